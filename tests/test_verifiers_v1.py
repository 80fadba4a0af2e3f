"""verifiers 0.4 (``verifiers.v1``): ``load_environment`` builds our taskset,
harness and local env, and one rollout against a fake OpenAI-compatible
server on 127.0.0.1 (through verifiers' own interception server) plays the
dag world: intervene, then submit_graph; the trace's reward is what our
scorer gives the same calls in a session of our own. Offline: no uv, no
MCP program, no sandbox. Runs where verifiers >= 0.4 is installed (``make
test-verifiers`` builds that environment; 0.4 cannot share one with the llm
extra's mcp>=2.3)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from chat_server import PROXY_VARIABLES, ChatServer, completion, tool_message, turn_of

vf_root = pytest.importorskip("verifiers", reason="verifiers is not installed (make test-verifiers installs 0.4)")
if hasattr(vf_root, "MultiTurnEnv"):
    pytest.skip(f"verifiers {getattr(vf_root, '__version__', '?')} is the MultiTurnEnv API (0.2); "
                "this file tests verifiers >= 0.4 (make test-verifiers)", allow_module_level=True)

import verifiers.v1 as vf  # noqa: E402

from luca_gym import worlds  # noqa: E402
from luca_gym.integrations import verifiers as adapter  # noqa: E402
from luca_gym.integrations import verifiers_v1  # noqa: E402
from luca_gym.protocol import load  # noqa: E402

MODEL, KEY_VAR, KEY = "fake-model", "LUCA_GYM_FAKE_KEY", "sk-dummy-fake-server-0123456789"
N = 3  # dag nodes
EMPTY = [[0] * N for _ in range(N)]
SEED = 3
MAX_REQUESTS = 20


class FakeServer(ChatServer):
    """POST /v1/chat/completions on 127.0.0.1 answering from ``script``,
    ``[(tool, arguments)]``, one call a turn (then text only)."""

    def __init__(self, script):
        self.script = script
        super().__init__()

    def answer(self, path, authorization, body) -> tuple[int, dict]:
        refusal = self.refused(path, authorization, body, key=KEY, max_requests=MAX_REQUESTS)
        if refusal:
            return refusal
        turn = turn_of(body)
        message = {"role": "assistant", "content": "Done."}
        if turn < len(self.script):
            name, arguments = self.script[turn]
            message = tool_message(turn, f"I call {name}.", name, arguments)
        return 200, completion(len(self.requests), body.get("model"), message, 10, 5)


@pytest.fixture
def server(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv(KEY_VAR, KEY)
    fake = FakeServer(script(true_graph(SEED)))
    yield fake
    fake.stop()


def open_dag(seed: int):
    return load(worlds.get("dag").tools)(seed, n_nodes=N)


def script(adjacency) -> list:
    """The fake model's calls: an intervention, then the submission of ``adjacency``."""
    return [("intervene", {"molecule": 0, "adjacency": EMPTY}), ("submit_graph", {"adjacency": adjacency})]


def true_graph(seed: int) -> list:
    """The graph our scorer scores 1 (found by trying each, so the reward checked is not 0)."""
    for bits in itertools.product([0, 1], repeat=N * (N - 1)):
        edges = iter(bits)
        adjacency = [[0 if i == j else next(edges) for j in range(N)] for i in range(N)]
        if our_return(seed, script(adjacency))[0] > 0:
            return adjacency
    raise AssertionError(f"no graph scores for dag seed {seed}")


def our_return(seed: int, calls) -> tuple[float, dict]:
    """What our scorer gives ``calls`` in a session of our own (the session ends at the submission)."""
    session = open_dag(seed)
    for name, arguments in calls:
        session.call(name, arguments)
        if session.ended:
            break
    record = session.record()
    return record["return"], record


def test_load_environment_dispatches_to_verifiers_v1():
    env = adapter.load_environment("dag", num_examples=2, n_nodes=N)
    assert isinstance(env, verifiers_v1.LucaEnv) and isinstance(env.taskset, verifiers_v1.LucaTaskset)
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == [0, 1] and {t.data.world for t in tasks} == {"dag"}
    assert all(t.data.prompt and t.data.system_prompt for t in tasks)
    assert env.config.agent.runtime.type == "subprocess"  # local, not verifiers' Prime default
    assert type(env._harnesses["agent"]) is verifiers_v1.LucaHarness  # the taskset's own harness
    with pytest.raises(ValueError, match="setting 'bogus' unknown for world 'dag'"):
        adapter.load_environment("dag", num_examples=1, bogus=1)


def test_one_rollout_scores_what_our_scorer_scores(server):
    env = adapter.load_environment("dag", seeds=[SEED], n_nodes=N)
    client = vf.EvalClientConfig(base_url=server.url, api_key_var=KEY_VAR)
    episodes = asyncio.run(asyncio.wait_for(verifiers_v1.run(env, MODEL, client), timeout=300))
    assert len(episodes) == 1
    episode = episodes[0]
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.ok and trace.stop_condition == "agent_completed", trace.errors
    expected, record = our_return(SEED, server.script)
    assert expected == 1.0  # the fake model submits the true graph
    info = trace.info["luca_gym"]
    assert info["return"] == expected and info["scores"] == record["scores"]
    assert info["end_reason"] == record["end_reason"] and info["calls"] == len(record["calls"])
    assert trace.rewards["session_return"].score == expected
    assert trace.reward == pytest.approx(expected)
    # the model saw our tools and each tool's answer came back to it
    first = server.requests[0]
    assert {t["function"]["name"] for t in first["tools"]} >= {"intervene", "submit_graph"}
    assert first["messages"][0]["role"] == "system"
    assert any(m.get("role") == "tool" for m in server.requests[-1]["messages"])


def test_the_turn_limit_ends_the_session_as_our_harness_does(server):
    env = adapter.load_environment("dag", seeds=[SEED], n_nodes=N, max_turns=1)
    client = vf.EvalClientConfig(base_url=server.url, api_key_var=KEY_VAR)
    (episode,) = asyncio.run(asyncio.wait_for(verifiers_v1.run(env, MODEL, client), timeout=300))
    (trace,) = episode.traces
    session = open_dag(SEED)
    session.call(*server.script[0])  # the one turn's call runs, then the session is ended for the model
    session.finish("turn_limit")
    record = session.record()
    info = trace.info["luca_gym"]
    assert episode.ok and info["end_reason"] == "turn_limit" == record["end_reason"]
    assert info["scores"] == record["scores"] and trace.reward == pytest.approx(record["return"])
    assert len(server.requests) == 1


def test_a_secret_is_not_written_into_every_trace():
    with pytest.raises(ValueError, match="only None, False or True"):
        adapter.load_environment("dag", num_examples=1, sealed="a-secret-of-sixteen-characters", n_nodes=N)


def test_vf_eval_resolves_the_taskset_by_its_top_level_name():
    """vf-eval imports a taskset by a top-level module (``verifiers.v1.tasksets.<id>`` first, then ``<id>``):
    ``luca_gym_verifiers`` is installed with the package and exports this adapter's taskset and harness."""
    import importlib
    import subprocess
    import sys

    code = ("import importlib.util, luca_gym_verifiers as m; "
            "assert importlib.util.find_spec('luca_gym_verifiers') is not None; "
            "assert 'LucaTaskset' in m.__all__ and 'LucaHarness' in m.__all__; print(m.TASKSET_ID)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == verifiers_v1.TASKSET_ID == "luca_gym_verifiers"
    assert importlib.import_module("luca_gym_verifiers").LucaTaskset is verifiers_v1.LucaTaskset
