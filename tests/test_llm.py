"""The LLM tool interface (``luca_gym.tools`` and LUCA's ``luca_gym.worlds.luca.tools``): a replay of the paper's
worked session (appendix C) checked against the Gymnasium env, the tool
schemas checked both ways against the reference ``jsonschema`` library, the
prompts, the agent loop and the OpenAI / Anthropic adapters with fake clients
(no network), API-key hygiene and the evaluation record.

Malformed calls are fuzzed in ``test_llm_fuzz.py``; the MCP server in
``test_mcp.py``.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import types
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from luca_gym.worlds.luca.envs.spaces import action_space
from luca_gym.worlds.luca import calls, core
from luca_gym import harness as ev
from luca_gym.results import report
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.spec import GENE_TYPES, LOCK_HI, LOCK_LO, MALFUNCTION_TYPES
from luca_gym.llm import loop
from luca_gym.worlds.luca import tools as luca_tools
from luca_gym.llm import providers
from luca_gym.llm.loop import AgentTurn, ScriptedAgent, run_agent
from luca_gym.llm.providers import AnthropicAgent, OpenAIChatAgent
from luca_gym.worlds.luca.tools import ToolSession
from luca_gym.worlds.luca.evaluation import luca_spec
from luca_gym.worlds.luca import tables as luca_tables

SEED, TIER, MODE = 2, "easy", "disease"
GENES = [f"G{i:03d}" for i in range(1, 21)]
NINE_TOOLS = {
    "get_organism_info",
    "run_experiment",
    "get_next_prediction_task",
    "submit_prediction",
    "submit_hypothesis",
    "submit_network",
    "submit_malfunction_hypothesis",
    "test_rescue",
    "end",
}
COSTED = {"run_experiment", "test_rescue"}
SENTINEL_OPENAI = "sk-SENTINEL-openai-7c1f0e5d9b3a"
SENTINEL_ANTHROPIC = "sk-ant-SENTINEL-anthropic-42d8e6"


def block(*genes) -> dict:
    return {"interventions": {g: {"type": "BLOCK"} for g in genes}}


def appendix_script(phenotypes) -> list:
    """The shape of the paper's appendix C session (disease, easy, seed 2):
    organism info, four group BLOCKs of five genes, single-gene BLOCKs (21
    experiments in all), a one-way diagnosis, a rescue test (budget 9 left,
    as in the paper), two prediction tasks, a network, a hypothesis, end.
    The script uses public names only; the diagnosis is a guess, as the
    paper's agent's was."""
    p0, p1, p2 = phenotypes
    return [
        ("get_organism_info", {}),
        *[("run_experiment", block(*GENES[k : k + 5])) for k in (0, 5, 10, 15)],
        *[("run_experiment", block(g)) for g in GENES[:17]],
        ("submit_malfunction_hypothesis", {"target_name": "G012", "malfunction_type": "LOCK_HI"}),
        ("test_rescue", {"interventions": {"G014": {"type": "BLOCK"}}}),
        ("get_next_prediction_task", {}),
        ("submit_prediction", {"predictions": {p0: 0.3, p1: 0.6, p2: 0.5}}),
        ("get_next_prediction_task", {}),
        ("submit_prediction", {"predictions": {p0: 0.45, p1: 0.55, p2: 0.42}}),
        (
            "submit_network",
            {
                "edges": [
                    {"gene": "G004", "phenotype": p0, "direction": "+"},
                    {"gene": "G013", "phenotype": p0, "direction": "-"},
                    {"gene": "G016", "phenotype": p1, "direction": "-"},
                    {"gene": "G008", "phenotype": p2, "direction": "+"},
                ]
            },
        ),
        ("submit_hypothesis", {"text": "G012 looks locked high; blocking G014 compensates."}),
        ("end", {}),
    ]


def new_session(tier=TIER, mode=MODE, seed=SEED) -> ToolSession:
    return ToolSession(seed=seed, tier=tier, mode=mode)


def replay_on_env(script) -> dict:
    """The script's core calls sent to a fresh LucaEnv directly."""
    env = LucaEnv(tier=TIER, mode=MODE)
    obs, _ = env.reset(options={"organism_seed": SEED})
    meta = env.organism.meta
    budgets, results, total = [], [], 0.0
    for name, args in script:
        if calls.CALLS[name] is None:  # free calls with no core action
            budgets.append(int(obs["budget_left"]))
            results.append(None)
            continue
        action = calls.action_from_call(meta, name, args)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        budgets.append(int(obs["budget_left"]))
        results.append(calls.describe_result(meta, int(action["kind"]), obs, info))
        if terminated or truncated:
            break
    return {"budgets": budgets, "results": results, "scores": env.scores(), "return": total}


@pytest.fixture(scope="module")
def appendix():
    """The appendix-C-like session run once through run_agent + ScriptedAgent,
    and once through LucaEnv directly."""
    session = new_session()
    script = appendix_script(session.meta.phenotype_names)
    record = run_agent(ScriptedAgent(script), session)
    return {"session": session, "script": script, "record": record, "env": replay_on_env(script)}


# -- 1. the worked session ---------------------------------------------------
def test_appendix_session_scores_equal_the_env(appendix):
    session, record, env = appendix["session"], appendix["record"], appendix["env"]
    assert session.ended and record["scores"] is not None
    assert set(record["scores"]) == set(env["scores"])
    for key in env["scores"]:
        assert record["scores"][key] == env["scores"][key], key
    assert record["return"] == pytest.approx(env["return"], abs=1e-6)
    assert record["return"] == pytest.approx(record["scores"]["composite"], abs=1e-5)
    assert record["scores"]["n_experiments"] == 21 and record["scores"]["n_rescue_tests"] == 1


def test_appendix_session_shows_the_rescue_diagnosis_dissociation(appendix):
    """As in the paper's transcript: a rescue that works under a wrong diagnosis
    (pinned to organism (2, easy, 20) in disease mode as generated today)."""
    scores = appendix["record"]["scores"]
    assert scores["rescue"] == 1.0
    assert scores["diagnosis"] == 0.0
    assert scores["composite"] == pytest.approx((scores["prediction"] + 1.0) / 3, abs=1e-6)


def test_appendix_session_budget_and_results_per_call_equal_the_env(appendix):
    script, record, env = appendix["script"], appendix["record"], appendix["env"]
    log = record["calls"]
    assert [c["call"] for c in log] == [name for name, _ in script]
    budgets = [c["budget_remaining"] for c in log]
    assert budgets == env["budgets"]
    expected, left = [], 31
    for name, _ in script:
        left -= name in COSTED
        expected.append(left)
    assert budgets == expected
    assert budgets[[name for name, _ in script].index("test_rescue")] == 9  # as in the paper's transcript
    for entry, direct in zip(log, env["results"]):
        if direct is not None:
            result = {k: v for k, v in entry["result"].items() if k not in ("ended", "end_reason", "scores")}
            assert result == direct, entry["call"]


def test_appendix_session_returns_are_shaped_like_the_paper(appendix):
    session, record = appendix["session"], appendix["record"]
    phenotypes = list(session.meta.phenotype_names)
    log = record["calls"]
    for entry in log:
        result = entry["result"]
        assert "error" not in result, entry
        assert isinstance(result["budget_remaining"], int)
        json.dumps(result, allow_nan=False)
    info = log[0]["result"]
    assert set(info) >= {
        "organism_id",
        "gene_names",
        "signals",
        "observable_phenotypes",
        "baseline_phenotypes",
        "healthy_phenotype_ranges",
        "aberrant_phenotypes",
        "budget_remaining",
        "budget_total",
    }
    assert info["organism_id"] == "org_00000002"
    assert info["gene_names"] == GENES
    assert info["budget_remaining"] == info["budget_total"] == 31
    assert info["observable_phenotypes"] == phenotypes
    assert info["healthy_phenotype_ranges"] == {p: [0.35, 0.65] for p in phenotypes}
    assert info["aberrant_phenotypes"] and set(info["aberrant_phenotypes"]) <= set(phenotypes)
    assert all(set(s) == {"label", "mode"} and s["mode"] in ("activates", "inhibits") for s in info["signals"])
    for entry in log:
        result = entry["result"]
        if entry["call"] in COSTED:
            assert list(result["phenotypes"]) == phenotypes
            assert all(0.0 <= v <= 1.0 for v in result["phenotypes"].values())
            assert result["status"] in ("converged", "max_steps_reached")
            assert isinstance(result["steps"], int) and result["steps"] >= 1
    rescue = next(c["result"] for c in log if c["call"] == "test_rescue")
    assert list(rescue["phenotype_in_healthy_range"]) == phenotypes
    assert all(isinstance(v, bool) for v in rescue["phenotype_in_healthy_range"].values())
    assert rescue["phenotype_in_healthy_range"] == {p: 0.35 <= v <= 0.65 for p, v in rescue["phenotypes"].items()}
    assert 0.0 <= rescue["restored_fraction"] <= 1.0
    diagnosis = next(c["result"] for c in log if c["call"] == "submit_malfunction_hypothesis")
    assert diagnosis["stored"] is True and "test_rescue" in diagnosis["note"]
    assert set(diagnosis) == {"stored", "note", "budget_remaining"}  # the score is withheld
    tasks = [c["result"] for c in log if c["call"] == "get_next_prediction_task"]
    assert [t["task_index"] for t in tasks] == [0, 1]
    for t in tasks:
        assert len(t["interventions"]) == 2 and set(t["interventions"]) <= set(GENES)
    # Nothing hidden before the end; the scores appear once, on `end`.
    for entry in log[:-1]:
        text = json.dumps(entry["result"])
        assert "scores" not in entry["result"] and "malfunction" not in text and "n_alt" not in text
    meta = new_session().meta
    final = log[-1]["result"]
    assert final["ended"] is True and final["end_reason"] == "end"
    # The agent sees the scores rounded to 4 decimals and the malfunction by name; the record keeps the figures.
    assert final["scores"] == calls.describe_scores(meta, record["scores"])
    assert final["scores"]["malfunction_target"] in GENES + list(meta.signal_labels)
    assert final["scores"]["malfunction_type"] in ("LOCK_HI", "LOCK_LO", "PERSIST")
    assert all(round(v, 4) == v for v in final["scores"].values() if isinstance(v, float))
    assert final["scores"]["composite"] == round(record["scores"]["composite"], 4)
    json.dumps({k: v for k, v in record.items()}, allow_nan=False)


def test_session_reproduces_across_two_tool_sessions(appendix):
    again = run_agent(ScriptedAgent(appendix["script"]), new_session())
    assert again["scores"] == appendix["record"]["scores"]
    assert [c["result"] for c in again["calls"]] == [c["result"] for c in appendix["record"]["calls"]]


# -- 3. schemas: one source, checked both ways --------------------------------
def _schemas_by_format(session):
    openai = {t["function"]["name"]: t for t in session.tools_openai()}
    anthropic = {t["name"]: t for t in session.tools_anthropic()}
    mcp = {t["name"]: t for t in session.tools_mcp()}
    return openai, anthropic, mcp


@pytest.mark.parametrize("tier,mode", [("easy", "disease"), ("medium", "healthy"), ("hard", "disease")])
def test_three_formats_carry_the_same_valid_schema(tier, mode):
    session = new_session(tier, mode)
    openai, anthropic, mcp = _schemas_by_format(session)
    assert set(openai) == set(anthropic) == set(mcp) == NINE_TOOLS
    for name in NINE_TOOLS:
        o, a, m = openai[name], anthropic[name], mcp[name]
        assert o["type"] == "function" and set(o) == {"type", "function"}
        assert set(o["function"]) == {"name", "description", "parameters"}
        assert set(a) == {"name", "description", "input_schema"}
        assert set(m) == {"name", "description", "inputSchema"}
        assert o["function"]["parameters"] == a["input_schema"] == m["inputSchema"]
        assert o["function"]["description"] == a["description"] == m["description"] != ""
        schema = m["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        json.dumps(schema, allow_nan=False)
    latent = [g for g, t in zip(session.meta.gene_names, session.obs["targetable"]) if not t]
    assert bool(latent) == (tier == "hard")
    text = json.dumps(session.tools_mcp())
    for g in latent:
        assert f'"{g}"' not in text


def test_tool_specs_match_the_registry():
    session = new_session()
    assert tuple(s["name"] for s in session.tool_specs()) == luca_tools.TOOL_NAMES
    assert set(luca_tools.TOOL_NAMES) == NINE_TOOLS == set(calls.CALLS)


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def valid_arguments(session: ToolSession, name: str):
    genes, signals = list(session.targetable_genes), list(session.meta.signal_labels)
    phenotypes = list(session.meta.phenotype_names)
    if name in ("run_experiment", "test_rescue"):
        targets = st.lists(st.sampled_from(genes + signals), min_size=1, max_size=6, unique=True)

        def spec(ts, draw_types):
            return {"interventions": {t: {"type": ("ACTIVATE" if t in signals else k)} for t, k in zip(ts, draw_types)}}

        return targets.flatmap(
            lambda ts: st.lists(st.sampled_from(GENE_TYPES), min_size=len(ts), max_size=len(ts)).map(
                lambda ks: spec(ts, ks)
            )
        )
    if name == "submit_prediction":
        unit = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0, 1]))
        return st.fixed_dictionaries({p: unit for p in phenotypes}).map(lambda d: {"predictions": d})
    if name == "submit_hypothesis":
        return st.text(min_size=1, max_size=40).map(lambda t: {"text": t})
    if name == "submit_network":
        edge = st.fixed_dictionaries(
            {"gene": st.sampled_from(genes), "phenotype": st.sampled_from(phenotypes), "direction": st.sampled_from(["+", "-"])}
        )
        return st.lists(edge, max_size=8).map(lambda es: {"edges": es})
    if name == "submit_malfunction_hypothesis":
        return st.fixed_dictionaries(
            {"target_name": st.sampled_from(genes + signals), "malfunction_type": st.sampled_from(MALFUNCTION_TYPES[1:])}
        )
    return st.just({})


def _paths(value, prefix=()):
    """Every (path) inside nested dicts/lists, the root included."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _get(value, path):
    for p in path:
        value = value[p]
    return value


@st.composite
def mutated(draw, session: ToolSession, name: str):
    """A valid argument dict, then 0..3 random mutations: drop a key, add a
    key, replace a value with any JSON value, a near-miss string or number,
    or blow a list past its limit."""
    args = copy.deepcopy(draw(valid_arguments(session, name)))
    names = list(session.targetable_genes) + list(session.meta.signal_labels) + list(session.meta.phenotype_names)
    near = st.one_of(
        st.sampled_from(names).map(lambda s: s.lower()),
        st.sampled_from(["G000", "G021", "G1", "ACTIVATE", "BLOCK", "LOCK_HI", "lock_hi", "block", "+", "up", "", "type"]),
        st.text(max_size=6),
    )
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(args))
        path = draw(st.sampled_from(paths))
        target = _get(args, path)
        op = draw(st.sampled_from(["drop", "add", "replace", "near", "number", "grow"]))
        if op == "drop" and path:
            parent = _get(args, path[:-1])
            del parent[path[-1]]
        elif op == "add" and isinstance(target, dict):
            target[draw(st.one_of(near, st.text(max_size=6)))] = draw(JSON_VALUES)
        elif op == "grow" and isinstance(target, list) and target:
            target.extend(copy.deepcopy(target) * (70 // len(target) + 1))
        elif path and op in ("replace", "near", "number"):
            parent = _get(args, path[:-1])
            value = {
                "replace": JSON_VALUES,
                "near": near,
                "number": st.one_of(st.floats(-2, 3), st.integers(-5, 5), st.just(10**400), st.just(1e308)),
            }[op]
            parent[path[-1]] = draw(value)
        elif op == "replace":
            args = draw(JSON_VALUES)
    return args


@pytest.fixture(scope="module")
def schema_sessions():
    return {"disease": new_session(), "healthy": new_session("medium", "healthy"), "hard": new_session("hard", "disease")}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["disease", "healthy", "hard"]), name=st.sampled_from(sorted(NINE_TOOLS)))
def test_schema_and_dispatcher_agree_both_ways(schema_sessions, data, kind, name):
    session = schema_sessions[kind]
    schema = {t["name"]: t["inputSchema"] for t in session.tools_mcp()}[name]
    validator = jsonschema.Draft202012Validator(schema)
    args = data.draw(mutated(session, name))
    reference = validator.is_valid(args)
    event(f"schema-valid={reference}")
    # The same verdict when the arguments arrive as a JSON string.
    from_text = session.validate(name, json.dumps(args))
    assert reference == (from_text is None), (args, from_text)
    if args is not None:  # Python None is the documented "no arguments" (an empty object)
        ours = session.validate(name, args)
        assert reference == (ours is None), (args, ours)
    if not reference:
        assert isinstance(from_text, str) and from_text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.dictionaries(st.text(max_size=14), JSON_VALUES, max_size=3), name=st.sampled_from(sorted(NINE_TOOLS)))
def test_schema_and_dispatcher_agree_on_arbitrary_json(schema_sessions, args, name):
    session = schema_sessions["disease"]
    schema = {t["name"]: t["inputSchema"] for t in session.tools_mcp()}[name]
    assert jsonschema.Draft202012Validator(schema).is_valid(args) == (session.validate(name, args) is None)


def test_valid_examples_are_accepted_and_mutations_seen_both_ways(schema_sessions):
    """Guard against a vacuous agreement test: valid and invalid cases both occur."""
    session = schema_sessions["disease"]
    schema = {t["name"]: t["inputSchema"] for t in session.tools_mcp()}
    good = {
        "run_experiment": block("G001", "G002"),
        "submit_prediction": {"predictions": {p: 0.5 for p in session.meta.phenotype_names}},
        "submit_malfunction_hypothesis": {"target_name": session.meta.signal_labels[0], "malfunction_type": "PERSIST"},
        "submit_network": {"edges": []},
        "end": {},
    }
    for name, args in good.items():
        assert jsonschema.Draft202012Validator(schema[name]).is_valid(args)
        assert session.validate(name, args) is None
    bad = {
        "run_experiment": {"interventions": {}},
        "submit_prediction": {"predictions": {p: 1.5 for p in session.meta.phenotype_names}},
        "submit_malfunction_hypothesis": {"target_name": "G001", "malfunction_type": "lock_hi"},
        "submit_network": {"edges": [{"gene": "G001", "phenotype": session.meta.phenotype_names[0], "direction": "up"}]},
        "end": {"now": True},
    }
    for name, args in bad.items():
        assert not jsonschema.Draft202012Validator(schema[name]).is_valid(args)
        assert session.validate(name, args)


def test_non_ascii_hypothesis_within_max_length_is_accepted():
    session = new_session()
    schema = {t["name"]: t["inputSchema"] for t in session.tools_mcp()}["submit_hypothesis"]
    args = {"text": "é" * 12_000}
    assert jsonschema.Draft202012Validator(schema).is_valid(args)
    assert session.validate("submit_hypothesis", args) is None


def test_editing_a_returned_tool_spec_does_not_change_validation():
    session = new_session()
    spec = session.tools_openai()[1]["function"]["parameters"]
    spec["properties"]["interventions"]["properties"].clear()
    spec["properties"]["interventions"]["additionalProperties"] = True
    assert session.validate("run_experiment", {"interventions": {"NOPE": {"type": "BLOCK"}}}) is not None


# -- 4. prompts ----------------------------------------------------------------
REAL_BIOLOGY = (
    "TP53", "p53", "BRCA1", "BRCA2", "MYC", "EGFR", "KRAS", "lacZ", "lac operon", "trp", "GAL4", "insulin",
    "glucose", "lactose", "ATP", "cAMP", "NADH", "calcium", "E. coli", "Escherichia", "yeast", "Saccharomyces",
    "Drosophila", "Arabidopsis", "mouse", "human", "bacteria", "mitochondri", "ribosome", "mRNA", "DNA", "RNA",
    "protein", "kinase", "enzyme", "receptor", "hormone", "transcription factor", "apoptosis", "cancer", "NF-kB",
    "Wnt", "Notch", "Hedgehog", "mTOR", "cell cycle",
)


@pytest.mark.parametrize("disease", [False, True])
def test_prompts_state_the_rules_and_name_no_real_biology(disease):
    prompt = luca_tools.system_prompt(disease, 188)
    low = prompt.lower()
    # The call limit, and that refused calls do not count toward it.
    assert "at most 188 calls" in prompt and "refused calls do not count" in low
    # The invented-vocabulary rule.
    assert "invented" in low and "real biolog" in low and "experiment" in low
    # The goals.
    assert "goals" in low and re.search("prediction[ _]task", low)
    assert "get_organism_info" in prompt and "Call end" in prompt
    # The budget rule.
    assert "run_experiment" in prompt and "test_rescue" in prompt and "1 unit" in prompt
    assert "free" in low and "budget_remaining" in prompt and "refused" in low
    if disease:
        assert "submit_malfunction_hypothesis" in prompt and "one-way" in low and "cannot be revised" in low
        assert all(t in prompt for t in ("LOCK_HI", "LOCK_LO", "PERSIST"))
        assert "only after the diagnosis" in low
    else:
        for tool in ("get_next_prediction_task", "submit_prediction", "submit_network", "submit_hypothesis"):
            assert tool in prompt
        assert "within 0.10" in prompt
        assert "submit_malfunction_hypothesis" not in prompt and "LOCK_HI" not in prompt
    for word in REAL_BIOLOGY:
        assert not re.search(rf"(?<![A-Za-z]){re.escape(word)}(?![a-z])", prompt, re.IGNORECASE), word


def test_prompts_differ_by_mode_and_name_no_organism():
    healthy, disease = luca_tools.system_prompt(False), luca_tools.system_prompt(True)
    assert healthy != disease
    session = new_session()
    for name in (*session.meta.phenotype_names, *session.meta.signal_labels):
        assert name not in healthy and name not in disease


# -- 5. agent loop, adapters, keys, records ---------------------------------------
def fake_openai_response(turn: list, n: int):
    if not turn:
        message = SimpleNamespace(role="assistant", content="I am done.", tool_calls=None)
    else:
        message = SimpleNamespace(
            role="assistant",
            content=None,
            tool_calls=[
                SimpleNamespace(
                    id=f"call_{n}_{i}", type="function", function=SimpleNamespace(name=name, arguments=json.dumps(args))
                )
                for i, (name, args) in enumerate(turn)
            ],
        )
    return SimpleNamespace(choices=[SimpleNamespace(index=0, message=message, finish_reason="tool_calls")])


class FakeOpenAI:
    """Shaped like ``openai.OpenAI``: ``client.chat.completions.create(**kw)``."""

    def __init__(self, turns=(), api_key=None, base_url=None, max_retries=2):
        self.turns, self.requests, self.api_key, self.base_url = list(turns), [], api_key, base_url
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def __repr__(self):
        return "FakeOpenAI()"

    def _create(self, **kwargs):
        self.requests.append(copy.deepcopy(kwargs))
        turn = self.turns.pop(0) if self.turns else []
        return fake_openai_response(turn, len(self.requests))


class FakeAnthropic:
    """Shaped like ``anthropic.Anthropic``: ``client.messages.create(**kw)``."""

    def __init__(self, turns=(), api_key=None, max_retries=2):
        self.turns, self.requests, self.api_key = list(turns), [], api_key
        self.messages = SimpleNamespace(create=self._create)

    def __repr__(self):
        return "FakeAnthropic()"

    def _create(self, **kwargs):
        self.requests.append(copy.deepcopy(kwargs))
        turn = self.turns.pop(0) if self.turns else []
        n = len(self.requests)
        blocks = [SimpleNamespace(type="text", text=f"step {n}")]
        blocks += [SimpleNamespace(type="tool_use", id=f"toolu_{n}_{i}", name=name, input=args) for i, (name, args) in enumerate(turn)]
        return SimpleNamespace(content=blocks, stop_reason="tool_use" if turn else "end_turn")


def provider_turns(phenotypes) -> list:
    """A short full session, one or two calls per turn; one turn is malformed."""
    p = {name: 0.5 for name in phenotypes}
    return [
        [("get_organism_info", {})],
        [("run_experiment", block("G001")), ("run_experiment", block("G002"))],
        [("run_experiment", {"interventions": {"G999": {"type": "BLOCK"}}})],
        [("submit_malfunction_hypothesis", {"target_name": "G012", "malfunction_type": "LOCK_HI"})],
        [("test_rescue", {"interventions": {"G014": {"type": "BOOST"}}})],
        [("get_next_prediction_task", {})],
        [("submit_prediction", {"predictions": p})],
        [("get_next_prediction_task", {}), ("submit_prediction", {"predictions": p})],
        [("submit_hypothesis", {"text": "G012 locked high?"})],
        [("end", {})],
    ]


def _flat(turns):
    return [call for turn in turns for call in turn]


def test_openai_agent_drives_a_full_session_in_openai_format():
    session = new_session()
    turns = provider_turns(session.meta.phenotype_names)
    client = FakeOpenAI(turns)
    agent = OpenAIChatAgent("gpt-test", client=client, temperature=0)
    record = run_agent(agent, session)
    assert session.ended and record["scores"] is not None
    assert [c["call"] for c in record["calls"]] == [name for name, _ in _flat(turns)]
    assert "G999" in record["calls"][3]["result"]["error"]
    assert session.hypotheses == ["G012 locked high?"]
    assert len(client.requests) == len(turns)
    tools = session.tools_openai()
    for request in client.requests:
        assert request["model"] == "gpt-test" and request["temperature"] == 0
        assert request["tools"] == tools
        msgs = request["messages"]
        assert msgs[0] == {"role": "system", "content": luca_tools.system_prompt(True, 188)}
        assert msgs[1]["role"] == "user"
        json.dumps(msgs, allow_nan=False)
    msgs = client.requests[-1]["messages"]
    i = 2
    for turn in turns[:-1]:
        assistant = msgs[i]
        assert assistant["role"] == "assistant" and len(assistant["tool_calls"]) == len(turn)
        for tc, (name, args) in zip(assistant["tool_calls"], turn):
            assert tc["type"] == "function" and tc["function"]["name"] == name
            assert isinstance(tc["function"]["arguments"], str) and json.loads(tc["function"]["arguments"]) == args
        for k, tc in enumerate(assistant["tool_calls"]):
            reply = msgs[i + 1 + k]
            assert set(reply) == {"role", "tool_call_id", "content"}
            assert reply["role"] == "tool" and reply["tool_call_id"] == tc["id"]
            assert "budget_remaining" in json.loads(reply["content"])
        i += 1 + len(turn)
    assert i == len(msgs)
    assert {m["role"] for m in msgs} == {"system", "user", "assistant", "tool"}


def test_anthropic_agent_drives_a_full_session_in_anthropic_format():
    session = new_session()
    turns = provider_turns(session.meta.phenotype_names)
    client = FakeAnthropic(turns)
    agent = AnthropicAgent("claude-test", client=client, max_tokens=512)
    record = run_agent(agent, session)
    assert session.ended and record["scores"] is not None
    assert [c["call"] for c in record["calls"]] == [name for name, _ in _flat(turns)]
    assert len(client.requests) == len(turns)
    tools = session.tools_anthropic()
    for request in client.requests:
        assert request["model"] == "claude-test" and request["max_tokens"] == 512
        assert request["system"] == luca_tools.system_prompt(True, 188)
        assert request["tools"] == tools
        msgs = request["messages"]
        assert all(m["role"] in ("user", "assistant") for m in msgs)
        assert [m["role"] for m in msgs] == ["user", "assistant"] * (len(msgs) // 2) + ["user"] * (len(msgs) % 2)
        json.dumps(msgs, allow_nan=False)
    msgs = client.requests[-1]["messages"]
    assert msgs[0]["role"] == "user" and isinstance(msgs[0]["content"], str)
    for k, turn in enumerate(turns[:-1]):
        assistant, reply = msgs[1 + 2 * k], msgs[2 + 2 * k]
        assert assistant["role"] == "assistant"
        assert assistant["content"][0] == {"type": "text", "text": f"step {k + 1}"}
        uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
        assert [(u["name"], u["input"]) for u in uses] == turn
        assert reply["role"] == "user" and isinstance(reply["content"], list)
        assert [b["type"] for b in reply["content"]] == ["tool_result"] * len(turn)
        assert [b["tool_use_id"] for b in reply["content"]] == [u["id"] for u in uses]
        for b in reply["content"]:
            assert "budget_remaining" in json.loads(b["content"])
    assert len(msgs) == 1 + 2 * (len(turns) - 1)


def test_provider_agents_and_the_scripted_agent_score_alike():
    phenotypes = new_session().meta.phenotype_names
    turns = provider_turns(phenotypes)
    scripted = run_agent(ScriptedAgent(_flat(turns)), new_session())
    openai = run_agent(OpenAIChatAgent("m", client=FakeOpenAI(turns)), new_session())
    anthropic = run_agent(AnthropicAgent("m", client=FakeAnthropic(turns)), new_session())
    assert scripted["scores"] == openai["scores"] == anthropic["scores"]
    assert [c["result"] for c in scripted["calls"]] == [c["result"] for c in openai["calls"]]


@pytest.fixture
def fake_provider_modules(monkeypatch):
    """Fake ``openai`` / ``anthropic`` modules that record the client they made;
    sentinel keys in the environment."""
    made = {}

    def openai_factory(base_url=None, api_key=None, max_retries=2):
        made["openai"] = FakeOpenAI(provider_turns(new_session().meta.phenotype_names), api_key=api_key, base_url=base_url)
        made["openai"].max_retries = max_retries
        return made["openai"]

    def anthropic_factory(api_key=None, max_retries=2):
        made["anthropic"] = FakeAnthropic(provider_turns(new_session().meta.phenotype_names), api_key=api_key)
        made["anthropic"].max_retries = max_retries
        return made["anthropic"]

    monkeypatch.setitem(sys.modules, "openai", types.SimpleNamespace(OpenAI=openai_factory))
    monkeypatch.setitem(sys.modules, "anthropic", types.SimpleNamespace(Anthropic=anthropic_factory))
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_OPENAI)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL_ANTHROPIC)
    return made


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_api_keys_never_reach_a_log(fake_provider_modules, provider):
    agent = providers.make_agent(f"{provider}:model-x")
    sentinel = SENTINEL_OPENAI if provider == "openai" else SENTINEL_ANTHROPIC
    session = new_session()
    record = run_agent(agent, session)
    client = fake_provider_modules[provider]
    assert client.api_key == sentinel  # the key did reach the client
    assert client.max_retries == 0  # run_agent retries, counted; the SDK's own retries are off
    assert session.ended and record["scores"] is not None
    logs = {
        "record": json.dumps(record),
        "messages": json.dumps(record["messages"]),
        "requests": json.dumps(client.requests),
        "transcript": json.dumps(session.transcript),
        "repr": repr(agent) + str(agent),
    }
    spec = luca_spec(f"{provider}:model-x", TIER, MODE, 20, SEED)
    fake_provider_modules.clear()
    logs["eval"] = json.dumps(ev.run_tool_session(providers.make_agent(spec.agent), spec))
    for where, text in logs.items():
        assert SENTINEL_OPENAI not in text and SENTINEL_ANTHROPIC not in text, where
        assert "SENTINEL" not in text, where


def test_hypotheses_are_stored_with_the_session():
    session = new_session()
    texts = ["G003 drives the first phenotype.", "Signal feedback: ünïcode ✓", "x" * 5000]
    script = [("submit_hypothesis", {"text": t}) for t in texts] + [("end", {})]
    record = run_agent(ScriptedAgent(script), session)
    assert session.hypotheses == texts and record["hypotheses"] == texts
    spec = luca_spec("scripted", TIER, MODE, 20, SEED)
    out = ev.run_tool_session(ScriptedAgent(script), spec)
    assert out["hypotheses"] == texts
    # Not scored: the same session without hypotheses scores the same.
    plain = run_agent(ScriptedAgent([("end", {})]), new_session())
    assert plain["scores"] == record["scores"]


def test_a_turn_without_tool_calls_ends_the_session():
    session = new_session()
    record = run_agent(ScriptedAgent([("run_experiment", block("G001"))]), session)
    assert session.ended and record["scores"] is not None
    assert [c["call"] for c in record["calls"]] == ["run_experiment", "end"]
    # the agent's empty turn, then the harness's closing end and its result: tool messages match the calls one for one
    said = [m for m in record["messages"] if m["role"] == "assistant"]
    assert said[-2]["tool_calls"] == [] and said[-1]["harness"] == "no_tool_call"
    assert said[-1]["tool_calls"][0]["name"] == "end" and record["messages"][-1]["role"] == "tool"
    assert [m["name"] for m in record["messages"] if m["role"] == "tool"] == [c["call"] for c in record["calls"]]


def test_max_turns_ends_the_session():
    session = new_session()

    def chatty(messages, tools):
        return AgentTurn(tool_calls=[loop.ToolCall("get_organism_info", {})])

    record = run_agent(chatty, session, max_turns=5)
    assert session.ended and [c["call"] for c in record["calls"]] == ["get_organism_info"] * 5 + ["end"]


def test_tool_sessions_write_eval_records_the_harness_reads(appendix, tmp_path):
    spec = luca_spec("scripted", TIER, MODE, 20, SEED)
    record = ev.run_tool_session(ScriptedAgent(appendix["script"]), spec)
    baseline = ev.run_session(make_policy("random"), luca_spec("random", TIER, MODE, 20, SEED))
    assert set(record) - set(baseline) == {"hypotheses", "usage", "price_usd_per_mtok", "cost_usd", "messages"}
    transcript = record["messages"]  # the whole conversation, inline in the results line
    assert [m["role"] for m in transcript[:2]] == ["system", "user"]
    assert [m["name"] for m in transcript if m["role"] == "tool"] == [c["call"] for c in record["calls"]]
    assert all("latency_s" in m for m in transcript if m["role"] == "assistant")
    assert record["usage"]["provider_calls"] == len(appendix["script"]) and record["usage"]["failed_calls"] == []
    assert record["usage"]["input_tokens"] is None and record["cost_usd"] is None  # a script reports no tokens
    assert set(baseline) <= set(record)
    assert record["scores"] == appendix["record"]["scores"]
    assert record["return"] == pytest.approx(record["scores"]["composite"], abs=1e-5)
    assert record["budget"] == 31 and record["n_alt"] == record["scores"]["n_alt"]
    for entry in record["calls"]:
        assert set(entry) >= {"call", "arguments", "result", "budget_remaining"}
    path = tmp_path / ev.SESSIONS_FILE
    with open(path, "w", encoding="utf-8") as f:
        for r in (baseline, record):
            f.write(json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n")
    loaded = ev.load_sessions(str(tmp_path))
    assert [r["agent"] for r in loaded] == ["random", "scripted"]
    assert loaded[1]["scores"] == record["scores"] and loaded[1]["hypotheses"] == record["hypotheses"]
    text = report.write_report(str(tmp_path))
    assert "scripted" in text and "random" in text
    assert (tmp_path / "report.md").exists()
    assert ("scripted", TIER, MODE, 20) in luca_tables.summary(loaded)


def test_free_calls_still_work_when_the_budget_is_spent():
    session = new_session()
    for g in GENES + GENES[:11]:
        assert "error" not in session.call("run_experiment", block(g))
    assert session.obs["budget_left"] == 0
    refused = session.call("run_experiment", block("G001"))
    assert "budget" in refused["error"] and refused["budget_remaining"] == 0
    assert session.call("get_organism_info")["budget_remaining"] == 0
    assert session.call("get_next_prediction_task", {})["task_index"] == 0
    assert session.call("submit_malfunction_hypothesis", {"target_name": "G001", "malfunction_type": "LOCK_HI"})["stored"]
    assert "budget" in session.call("test_rescue", block("G001"))["error"]
    assert session.call("end")["ended"] is True


def test_return_equals_composite_when_the_call_limit_ends_the_session():
    session = new_session()
    arrays = session.env.organism.arrays  # the hidden truth, read by the test only
    target = session.meta.gene_names[int(arrays.malfunction_target)]
    kind = {LOCK_HI: "LOCK_HI", LOCK_LO: "LOCK_LO"}[int(arrays.malfunction_type)]
    session.call("submit_malfunction_hypothesis", {"target_name": target, "malfunction_type": kind})
    prediction = {"predictions": {p: 0.5 for p in session.meta.phenotype_names}}
    for _ in range(3 * session.call_limit):
        session.call("submit_prediction", prediction)  # refused: no task is open; counts toward nothing
    assert not session.ended and int(session.env.state.step_count) == 1
    network = {"edges": [{"gene": "G001", "phenotype": session.meta.phenotype_names[0], "direction": "+"}]}
    for _ in range(session.call_limit - 2):
        assert "ended" not in session.call("submit_network", network)
    last = session.call("submit_network", network)  # the call_limit-th accepted call: applied, then the end
    assert last["stored"] is True and last["ended"] is True and last["end_reason"] == "call_limit"
    assert str(session.call_limit) in last["note"]
    assert session.ended and session.scores["composite"] > 0
    assert session.total_reward == pytest.approx(session.scores["composite"], abs=1e-5)


def test_tool_session_record_says_why_the_session_ended():
    names = new_session().meta.phenotype_names
    spec = luca_spec("scripted", TIER, MODE, 20, SEED)
    refused = ev.run_tool_session(ScriptedAgent([("submit_prediction", {"predictions": {p: 0.5 for p in names}})] * 400), spec)
    assert refused["truncated"] is False and refused["end_reason"] == "turn_limit"  # 300 refused turns, then the harness ends it
    assert len(refused["calls"]) == 301 and refused["calls"][-1]["call"] == "end"
    network = {"edges": [{"gene": "G001", "phenotype": names[0], "direction": "-"}]}
    limited = ev.run_tool_session(ScriptedAgent([("submit_network", network)] * 400), spec)
    assert limited["calls"][-1]["result"].get("ended") is True
    assert len(limited["calls"]) == LucaEnv(tier=TIER, mode=MODE).params.max_steps == limited["call_limit"]
    assert limited["truncated"] is True and limited["end_reason"] == "call_limit"
    quiet = ev.run_tool_session(ScriptedAgent([]), spec)
    assert quiet["end_reason"] == "no_tool_call" and quiet["truncated"] is False


def test_a_hypothesis_after_end_is_refused():
    session = new_session()
    session.call("end")
    result = session.call("submit_hypothesis", {"text": "too late"})
    assert "error" in result and session.hypotheses == []


def test_a_committed_diagnosis_is_one_way_and_unlocks_rescue():
    session = new_session()
    before = session.call("test_rescue", block("G001"))
    assert "diagnosis" in before["error"] and before["budget_remaining"] == 31
    first = session.call("submit_malfunction_hypothesis", {"target_name": "G012", "malfunction_type": "LOCK_HI"})
    assert first["stored"] is True
    second = session.call("submit_malfunction_hypothesis", {"target_name": "G002", "malfunction_type": "LOCK_LO"})
    assert "one-way" in second["error"]
    assert int(session.env.state.diagnosis_target) == GENES.index("G012")
    rescue = session.call("test_rescue", block("G001"))
    assert "restored_fraction" in rescue and rescue["budget_remaining"] == 30


def test_healthy_mode_has_no_diagnosis_and_no_aberrant_field():
    session = new_session(mode="healthy")
    info = session.call("get_organism_info")
    assert "aberrant_phenotypes" not in info
    result = session.call("submit_malfunction_hypothesis", {"target_name": "G001", "malfunction_type": "LOCK_HI"})
    assert "disease mode" in result["error"]
    assert not bool(session.env.state.committed)
    assert core.ERROR_MESSAGES[int(session.env.state.last_error)] == result["error"]


# -- 6. one session constructor, one parse, one translator ---------------------------
def test_a_tool_session_opens_the_backwards_organism():
    forward, backwards = ToolSession(0, tier="easy"), ToolSession(0, tier="easy", backwards=True)
    assert (forward.meta.backwards, backwards.meta.backwards) == (False, True)
    modes = {s["mode"] for s in backwards.call("get_organism_info")["signals"]}
    assert modes == {"inhibits"} and {s["mode"] for s in forward.call("get_organism_info")["signals"]} == {"activates"}


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"seed": -1}, ["seed", "-1", "0..2**63-1"]),
        ({"seed": 1.0}, ["seed", "1.0", "integer"]),
        ({"tier": "extreme"}, ["tier", "'extreme'", "easy, medium, hard"]),
        ({"mode": "sick"}, ["mode", "'sick'", "healthy, disease"]),
        ({"n_genes": 3}, ["n_genes", "3", "4..4096"]),
        ({"backwards": "yes"}, ["backwards", "'yes'", "True or False"]),
        ({"env": LucaEnv(tier="easy", backwards=True)}, ["backwards", "True", "False"]),
        ({"env": LucaEnv(tier="hard")}, ["tier", "'hard'", "'easy'"]),
    ],
)
def test_a_tool_session_refuses_bad_settings_and_a_mismatched_env(settings, words):
    settings = {"seed": 0, "tier": "easy", **settings}
    with pytest.raises(ValueError) as err:
        ToolSession(settings.pop("seed"), **settings)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_a_call_parses_its_arguments_once(monkeypatch):
    session = new_session()
    parsed = []
    parse = ToolSession.parse_arguments
    monkeypatch.setattr(ToolSession, "parse_arguments", lambda self, arguments: parsed.append(arguments) or parse(self, arguments))
    for name, arguments in [
        ("run_experiment", block("G001")),
        ("run_experiment", json.dumps(block("G002"))),
        ("run_experiment", {"interventions": {}}),
        ("get_organism_info", None),
        ("submit_hypothesis", {"text": "one parse"}),
        ("end", "{}"),
    ]:
        before = len(parsed)
        session.call(name, arguments)
        assert len(parsed) == before + 1, name
    assert session.ended


class Shifty(dict):
    """Arguments that read differently each time they are serialised: the
    first reading is checked; a second one must never be what runs."""

    def __init__(self, *readings):
        super().__init__(readings[0])
        self.readings, self.reads = readings, 0

    def items(self):
        reading = self.readings[min(self.reads, len(self.readings) - 1)]
        self.reads += 1
        return reading.items()


@pytest.mark.parametrize("later", [block("G002"), {"interventions": {"G001": {"type": "BOOST", "force": 9}}}, {}])
def test_what_is_checked_is_what_runs_and_what_is_logged(later):
    session, twin = new_session(), new_session()
    result = session.call("run_experiment", Shifty(block("G001"), later))
    assert result == twin.call("run_experiment", block("G001"))
    assert session.transcript[-1]["arguments"] == block("G001")


def test_hostile_arguments_checked_once_cannot_slip_a_refused_call_through():
    """Checked as an empty (refused) experiment, read later as a valid one: refused, free."""
    session = new_session()
    result = session.call("run_experiment", Shifty({"interventions": {}}, block("G001")))
    assert "at least" in result["error"] and result["budget_remaining"] == 31
    assert int(session.env.state.step_count) == 0


CORE_CALLS = [name for name, kind in calls.CALLS.items() if kind is not None]
FIELDS = {
    "run_experiment": ("gene_codes", "signal_flags"),
    "test_rescue": ("gene_codes", "signal_flags"),
    "submit_prediction": ("prediction",),
    "submit_network": ("network",),
    "submit_malfunction_hypothesis": ("diagnosis_target", "diagnosis_type"),
    "get_next_prediction_task": (),
    "end": (),
}


@pytest.fixture(scope="module")
def hard_session():
    return new_session("hard", "disease")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(CORE_CALLS))
def test_named_calls_and_env_actions_translate_both_ways(hard_session, seed, name):
    """action_from_call inverts describe_action (the harness's log of a baseline's
    action), and its actions lie in the env's action space."""
    env, meta = hard_session.env, hard_session.meta
    space = action_space(env.params)  # the Gymnasium env's action space for these settings
    rng = np.random.default_rng(seed)
    n, s, p = meta.n_genes, len(meta.signal_labels), len(meta.phenotype_names)
    full = {
        "gene_codes": rng.integers(0, 4, n) * (rng.random(n) < 0.3),
        "signal_flags": (rng.random(s) < 0.5).astype(np.int8),
        "prediction": rng.random(p).astype(np.float32),
        "diagnosis_target": int(rng.integers(0, n + s)),
        "diagnosis_type": int(rng.integers(1, len(MALFUNCTION_TYPES))),
        "network": (rng.integers(-1, 2, (n, p)) * (rng.random((n, p)) < 0.3)).astype(np.int8),
    }
    named = calls.describe_action(meta, {"kind": calls.CALLS[name], **full})
    assert named["call"] == name
    json.dumps(named, allow_nan=False)
    action = calls.action_from_call(meta, name, named["arguments"])
    assert set(action) == {"kind", *FIELDS[name]}
    assert action["kind"] == calls.CALLS[name]
    for field, value in action.items():
        assert space[field].contains(value), field
        if field != "kind":
            np.testing.assert_array_equal(value, full[field])


def test_action_from_call_by_hand():
    session = new_session()
    meta = session.meta
    signal = meta.signal_labels[1]
    action = calls.action_from_call(meta, "run_experiment", {"interventions": {"G003": {"type": "DAMPEN"}, signal: {"type": "ACTIVATE"}}})
    assert action["kind"] == core.EXPERIMENT
    assert action["gene_codes"].tolist() == [0, 0, 3] + [0] * 17 and action["signal_flags"].tolist() == [0, 1, 0]
    action = calls.action_from_call(meta, "submit_malfunction_hypothesis", {"target_name": signal, "malfunction_type": "PERSIST"})
    assert (action["diagnosis_target"], action["diagnosis_type"]) == (20 + 1, MALFUNCTION_TYPES.index("PERSIST"))
    for free in ("get_organism_info", "submit_hypothesis"):
        with pytest.raises(ValueError, match=f"name: '{free}' has no core action; allowed run_experiment"):
            calls.action_from_call(meta, free, {})
