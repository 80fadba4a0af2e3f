"""Our worlds where LLM-RL users are: the text env's conversation as chat
messages plus OpenAI tool schemas, and the verifiers environment
(:func:`luca_gym.integrations.verifiers.load_environment`) driven offline by a
scripted client, which scores exactly what our harness scores for the same
calls, on LUCA and on a discovery world (``dag``)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import gymnasium as gym
import pytest

from luca_gym import worlds
from luca_gym.integrations.verifiers import INSTALL_HINT, load_environment
from luca_gym.protocol import load
from luca_gym.llm.loop import ScriptedAgent, run_agent

LUCA = {"tier": "easy", "mode": "disease"}
SEED = 2


def luca_script(session) -> list[tuple[str, dict]]:
    genes, names = session.targetable_genes, session.meta.phenotype_names
    return [
        ("get_organism_info", {}),
        ("run_experiment", {"interventions": {genes[0]: {"type": "BLOCK"}}}),
        ("run_experiment", {"interventions": {genes[1]: {"type": "BOOST"}}}),
        ("get_next_prediction_task", {}),
        ("submit_prediction", {"predictions": {p: 0.5 for p in names}}),
        ("submit_malfunction_hypothesis", {"target_name": genes[3], "malfunction_type": "LOCK_HI"}),
        ("submit_network", {"edges": [{"gene": genes[0], "phenotype": names[0], "direction": "+"}]}),
        ("end", {}),
    ]


def dag_script(session) -> list[tuple[str, dict]]:
    n = session.config.n
    chain = [[int(j == i + 1) for j in range(n)] for i in range(n)]
    # the paper's loop (the default): a matrix stated with every intervention
    stated = {"adjacency": [[0] * n] * n} if session.config.proposals == "every" else {}
    return [("intervene", {"molecule": i, **stated}) for i in range(n)] + [("get_observations", {}), ("submit_graph", {"adjacency": chain})]


WORLDS = {"luca": (LUCA, luca_script), "dag": ({}, dag_script)}


def open_session(world: str, seed: int = SEED):
    settings, _ = WORLDS[world]
    return load(worlds.get(world).tools)(seed, **settings)


def harness_record(world: str, script) -> dict:
    """What our harness's agent loop records for these calls."""
    return run_agent(ScriptedAgent(script), open_session(world))


# -- chat messages from the text env --------------------------------------------------------
def as_string_observation(messages: list[dict], tools: list[dict]) -> str:
    """The string observation rebuilt from the chat messages and tools: the
    same text, in the other wrapping."""
    specs = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in tools]
    parts = ["[system]\n" + messages[0]["content"], "[tools]\n" + json.dumps(specs), "[user]\n" + messages[1]["content"]]
    for m in messages[2:]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            call = m["tool_calls"][0]["function"]
            parts.append("[assistant tool call]\n" + json.dumps({"name": call["name"], "arguments": json.loads(call["arguments"])}))
        elif m["role"] == "assistant":
            parts.append("[assistant tool call]\n" + json.dumps({"name": None, "raw": json.loads(m["content"])}))
        else:
            parts.append("[tool result]\n" + m["content"])
    return "\n\n".join(parts)


@pytest.mark.parametrize("world", ["luca", "dag"])
def test_the_text_env_gives_the_conversation_as_chat_messages_with_the_same_text(world):
    settings, make_script = WORLDS[world]
    gym_id = next(i for i, (entry, _) in worlds.get(world).gym_ids().items() if i.endswith("Tools-v0"))
    env = gym.make(gym_id, **settings)
    obs, info = env.reset(options={env.unwrapped.seed_option: SEED})
    base = env.unwrapped
    messages, tools = base.chat_messages(), base.chat_tools()
    assert [m["role"] for m in messages] == ["system", "user"] and as_string_observation(messages, tools) == obs
    assert tools == base.session.tools_openai() and all(t["type"] == "function" for t in tools)
    if world == "dag":  # the generic env's reset info carries them (LUCA's subclass builds its own info)
        assert info["messages"] == messages and info["tools"] == tools
    script = make_script(base.session)
    actions = [json.dumps({"name": n, "arguments": a}) for n, a in script[:2]] + ["not json"]
    actions += [json.dumps({"name": n, "arguments": a}) for n, a in script[2:]]
    for action in actions:
        obs, _, _, _, info = env.step(action)
        assert as_string_observation(info["messages"], tools) == obs
    roles = [m["role"] for m in info["messages"]]
    assert roles.count("tool") == len(script) and roles.count("user") == 2  # the opening, the refused text's error
    calls = [m for m in info["messages"] if m.get("tool_calls")]
    answers = {m["tool_call_id"]: m for m in info["messages"] if m["role"] == "tool"}
    assert [c["tool_calls"][0]["function"]["name"] for c in calls] == [n for n, _ in script]
    assert all(answers[c["tool_calls"][0]["id"]]["name"] == c["tool_calls"][0]["function"]["name"] for c in calls)
    calls[0]["tool_calls"][0]["function"]["name"] = "edited"  # a copy: editing it changes nothing
    info["messages"].clear()
    assert len(base.chat_messages()) == len(roles)
    assert [m["tool_calls"][0]["function"]["name"] for m in base.chat_messages() if m.get("tool_calls")] == [n for n, _ in script]


def test_chat_tools_before_reset_is_refused():
    env = gym.make("luca_gym/DagDiscoveryTools-v0")
    assert env.unwrapped.chat_messages() == []
    with pytest.raises(RuntimeError, match="before reset"):
        env.unwrapped.chat_tools()


# -- verifiers ---------------------------------------------------------------------------------
try:
    import verifiers as vf
    from verifiers.types import Response, ResponseMessage, ToolCall
except ImportError:  # the chat-message tests above and the install hint's below still run
    vf = None
needs_verifiers = pytest.mark.skipif(vf is None, reason='verifiers not installed (pip install "luca-gym[verifiers]")')


class ScriptedClient(vf.Client if vf is not None else object):  # object: a stand-in when verifiers is missing (its tests skip)
    """An offline verifiers client: answers each turn with the next scripted
    ``(name, arguments)`` tool call (arguments a dict, or raw text sent as
    is), then with plain text once the script is spent."""

    def __init__(self, script):
        super().__init__(None)
        self.script, self.turn, self.seen_tools = list(script), 0, None

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        self.seen_tools = tools
        if self.turn >= len(self.script):
            return None
        self.turn += 1
        return self.script[self.turn - 1]

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, call):
        if call is None:
            message = ResponseMessage(content="done", finish_reason="stop", is_truncated=False)
        else:
            name, arguments = call
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            message = ResponseMessage(content=None, tool_calls=[ToolCall(id=f"call_{self.turn}", name=name, arguments=text)],
                                      finish_reason="tool_calls", is_truncated=False)
        return Response(id=f"r{self.turn}", created=0, model="scripted", message=message)

    async def close(self):
        return None


@pytest.fixture(scope="module")
def environments():
    return {world: load_environment(world, seeds=[SEED], **WORLDS[world][0]) for world in WORLDS}


def evaluate(env, script) -> tuple[dict, ScriptedClient]:
    client = ScriptedClient(script)
    out = env.evaluate_sync(client, model="scripted", num_examples=1, rollouts_per_example=1, state_columns=["luca_gym"])
    (rollout,) = out["outputs"]
    assert rollout.get("error") is None
    return rollout, client


@needs_verifiers
@pytest.mark.parametrize("world", ["luca", "dag"])
def test_an_evaluation_through_verifiers_scores_exactly_as_our_harness(world, environments):
    env = environments[world]
    script = WORLDS[world][1](open_session(world))
    record = harness_record(world, script)
    rollout, client = evaluate(env, script)
    assert rollout["reward"] == record["return"]
    assert rollout["luca_gym"]["scores"] == record["scores"] and rollout["luca_gym"]["end_reason"] == record["end_reason"]
    assert rollout["luca_gym"]["calls"] == len(record["calls"]) == len(script)
    tool_messages = [m for m in rollout["completion"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [c["result"] for c in record["calls"]]
    session = open_session(world)
    assert rollout["prompt"][0]["content"] == session.system_prompt() and rollout["prompt"][1]["content"] == session.opening
    assert [t.name for t in client.seen_tools] == list(session.tool_names)
    assert [t.parameters for t in client.seen_tools] == [s["input_schema"] for s in session.tool_specs()]


@needs_verifiers
@pytest.mark.parametrize("world", ["luca", "dag"])
def test_a_rollout_that_stops_calling_tools_is_ended_as_the_harness_ends_it(world, environments):
    script = WORLDS[world][1](open_session(world))[:-1]  # never ends the session itself
    record = harness_record(world, script)
    rollout, _ = evaluate(environments[world], script)
    assert rollout["luca_gym"]["end_reason"] == record["end_reason"] == "no_tool_call"
    assert rollout["reward"] == record["return"] and rollout["luca_gym"]["scores"] == record["scores"]


HOSTILE = [  # "end" is every world's: each would end the session if it were not refused
    ("end", "{not json"),
    ("end_session", {}),
    ("end", "[1, 2]"),
    ("end", '{"x": NaN}'),
    ("end", {"x": 1}),
    ("\ud800", {}),
]


@needs_verifiers
@pytest.mark.parametrize("world", ["luca", "dag"])
def test_malformed_tool_calls_get_clear_errors_and_cost_nothing(world, environments):
    script = WORLDS[world][1](open_session(world))
    hostile_script = script[:1] + HOSTILE + script[1:]
    clean = harness_record(world, script)
    rollout, _ = evaluate(environments[world], hostile_script)
    answers = [json.loads(m["content"]) for m in rollout["completion"] if m["role"] == "tool"]
    refusals = answers[1:1 + len(HOSTILE)]
    status = {k: answers[0][k] for k in open_session(world).status_keys}  # the status after the first call
    assert all(a == {"error": a["error"], **status} for a in refusals)  # an error, and nothing spent
    messages = [a["error"] for a in refusals]
    for expected, message in zip(["not valid JSON", "unknown tool", "expected a JSON object", "NaN is not allowed",
                                  "unknown field", "unknown tool"], messages):
        assert expected in message, message
    assert rollout["reward"] == clean["return"] and rollout["luca_gym"]["scores"] == clean["scores"]  # cost nothing
    assert rollout["luca_gym"]["calls"] == len(hostile_script)


@needs_verifiers
def test_verifiers_finds_it_by_module_name_and_sealed_rows_play_the_sealed_instances():
    env = vf.load_environment("luca_gym.integrations.verifiers", world="dag", seeds=[SEED], sealed="a verifiers secret")
    script = dag_script(open_session("dag"))
    rollout, _ = evaluate(env, script)
    sealed = load(worlds.get("dag").tools)(SEED, sealed="a verifiers secret")
    assert rollout["luca_gym"]["instance_id"] == sealed.instance_id != open_session("dag").instance_id
    assert rollout["luca_gym"]["scores"] == run_agent(ScriptedAgent(script), sealed)["scores"]
    assert rollout["info"]["seed"] == SEED


class EndClient(ScriptedClient):
    """Ends every rollout at once, keeping the tools each one was offered."""

    def __init__(self):
        super().__init__([])
        self.offered = []

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        self.offered.append(json.dumps([t.model_dump(exclude_none=True) for t in tools], sort_keys=True))
        return ("end", {})


@needs_verifiers
def test_each_row_shows_its_own_instance_prompt_and_tools():
    """A world's prompt (tracking's) and tools (LUCA's gene names) differ between instances."""
    for world, settings in [("luca", LUCA), ("tracking", {})]:
        seeds = [SEED, SEED + 1]
        env = load_environment(world, seeds=seeds, **settings)
        sessions = [load(worlds.get(world).tools)(s, **settings) for s in seeds]
        rows = env.get_eval_dataset()
        for row, session in zip(rows, sessions):
            assert [m["content"] for m in row["prompt"]] == [session.system_prompt(), session.opening]
            assert json.loads(row["info"]) == {"seed": session.seed, "tool_defs": [
                {"name": s["name"], "description": s["description"], "parameters": s["input_schema"]} for s in session.tool_specs()]}
        client = EndClient()
        out = env.evaluate_sync(client, model="end", num_examples=2, rollouts_per_example=1, state_columns=["luca_gym"])
        expected = [json.dumps([{"name": s["name"], "description": s["description"], "parameters": s["input_schema"]}
                                for s in session.tool_specs()], sort_keys=True) for session in sessions]
        assert sorted(client.offered) == sorted(expected) and len(set(expected)) == (2 if world == "luca" else 1)
        prompts = {o["info"]["seed"]: o["prompt"][0]["content"] for o in out["outputs"]}
        assert prompts == {s.seed: s.system_prompt() for s in sessions}


@needs_verifiers
def test_bad_arguments_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="world: 'no-such-world' unknown; allowed"):
        load_environment("no-such-world")
    with pytest.raises(ValueError, match="tier"):
        load_environment("luca", tier="extreme")
    with pytest.raises(ValueError, match="seeds\\[1\\]"):
        load_environment("dag", seeds=[0, -1])
    with pytest.raises(ValueError, match="max_turns"):
        load_environment("dag", max_turns=0)


def test_a_missing_verifiers_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "verifiers", None)
    with pytest.raises(ImportError, match='pip install "luca-gym\\[verifiers\\]"') as raised:
        load_environment("dag")
    assert str(raised.value) == INSTALL_HINT


@needs_verifiers
def test_the_mock_provider_plays_the_same_session_through_verifiers_and_our_harness(environments):
    """The mock provider's model decides each call from the tool results it
    reads back (OpenAI format), so equal scores mean verifiers fed back what
    our harness feeds back."""
    from verifiers.clients.openai_chat_completions_client import OpenAIChatCompletionsClient

    from luca_gym.llm.mock import MockClient
    from luca_gym.llm.providers import OpenAIChatAgent

    from openai.types.chat import ChatCompletion

    def plain(value):
        if isinstance(value, SimpleNamespace):
            return {k: plain(v) for k, v in vars(value).items()}
        return [plain(v) for v in value] if isinstance(value, list) else value

    class MockProviderClient(OpenAIChatCompletionsClient):
        """verifiers' own OpenAI chat client (its message and tool conversion), over the mock provider."""

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            answer = self.client.chat.completions.create(model=model, messages=prompt, tools=tools)
            return ChatCompletion.model_validate({**plain(answer), "created": 0})

    record = run_agent(OpenAIChatAgent("mock", client=MockClient()), open_session("luca"), backoff=0)
    out = environments["luca"].evaluate_sync(MockProviderClient(MockClient()), model="mock", num_examples=1,
                                             rollouts_per_example=1, state_columns=["luca_gym"])
    (rollout,) = out["outputs"]
    assert rollout.get("error") is None and record["end_reason"] == rollout["luca_gym"]["end_reason"] == "end"
    assert rollout["reward"] == record["return"] > 0 and rollout["luca_gym"]["scores"] == record["scores"]
    assert rollout["luca_gym"]["calls"] == len(record["calls"])


@needs_verifiers
def test_the_turn_limit_ends_the_session_as_the_harness_does():
    env = load_environment("dag", seeds=[SEED], max_turns=3)
    script = dag_script(open_session("dag"))
    record = run_agent(ScriptedAgent(script), open_session("dag"), max_turns=3)
    rollout, _ = evaluate(env, script)
    assert rollout["luca_gym"]["end_reason"] == record["end_reason"] == "turn_limit"
    assert rollout["luca_gym"]["scores"] == record["scores"] and rollout["luca_gym"]["calls"] == len(record["calls"]) == 4
