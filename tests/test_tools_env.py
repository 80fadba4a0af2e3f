"""``luca_gym/LucaTools-v0``: the tool interface as a Gymnasium text env, and
the replay agent. One registry and one dispatcher: a scripted sequence of
calls scores the same through the env and through ``ToolSession``."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from luca_gym.worlds.luca import calls
from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.envs.tools import parse_tool_call
from luca_gym.worlds.luca.envs.tools import LucaToolsEnv
from luca_gym.llm.loop import ReplayAgent, ScriptedAgent, run_agent
from luca_gym.worlds.luca.tools import ToolSession
from luca_gym.worlds.luca.evaluation import luca_spec

TIER, MODE, SEED = "easy", "disease", 2


@pytest.fixture(scope="module")
def env():
    return gym.make("luca_gym/LucaTools-v0", tier=TIER, mode=MODE)


def script_for(session: ToolSession) -> list[tuple[str, dict]]:
    genes = session.targetable_genes
    names = session.meta.phenotype_names
    return [
        ("get_organism_info", {}),
        ("run_experiment", {"interventions": {genes[0]: {"type": "BLOCK"}}}),
        ("run_experiment", {"interventions": {genes[1]: {"type": "BOOST"}, session.meta.signal_labels[0]: {"type": "ACTIVATE"}}}),
        ("run_experiment", {"interventions": {genes[0]: {"type": "BLOCK"}}}),  # a repeat: fresh noise
        ("get_next_prediction_task", {}),
        ("submit_prediction", {"predictions": {p: 0.5 for p in names}}),
        ("get_next_prediction_task", {}),
        ("submit_prediction", {"predictions": {p: 0.4 for p in names}}),
        ("submit_malfunction_hypothesis", {"target_name": genes[3], "malfunction_type": "LOCK_HI"}),
        ("test_rescue", {"interventions": {genes[3]: {"type": "BLOCK"}}}),
        ("submit_network", {"edges": [{"gene": genes[0], "phenotype": names[0], "direction": "+"}]}),
        ("submit_hypothesis", {"text": "G001 raises the first phenotype"}),
        ("end", {}),
    ]


def test_a_script_scores_the_same_through_the_text_env_and_the_tool_session(env):
    obs, info = env.reset(options={"organism_seed": SEED})
    assert env.observation_space.contains(obs)
    assert obs.startswith("[system]\n") and "[tools]\n" in obs and "run_experiment" in obs and "at most 188 calls" in obs
    session = ToolSession(SEED, tier=TIER, mode=MODE)
    assert info == {"organism_seed": SEED, "organism_id": session.organism_id,
                    "messages": env.unwrapped.chat_messages(), "tools": env.unwrapped.chat_tools()}
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert {t["function"]["name"] for t in info["tools"]} >= {"run_experiment", "end"}
    script = script_for(session)
    record = run_agent(ScriptedAgent(script), session)
    total = 0.0
    for i, (name, arguments) in enumerate(script):
        obs, reward, terminated, truncated, step_info = env.step(json.dumps({"name": name, "arguments": arguments}))
        total += reward
        assert step_info["result"] == record["calls"][i]["result"], name  # the same dispatcher, result for result
        assert terminated == (name == "end") and not truncated
    assert step_info["scores"] == calls.describe_scores(session.meta, record["scores"])
    assert total == pytest.approx(record["scores"]["composite"], abs=1e-6) == pytest.approx(record["return"], abs=1e-6)
    assert env.observation_space.contains(obs) and obs.count("[tool result]") == len(script)


@pytest.mark.parametrize(
    "action,message",
    [
        ("not json at all", "action: not JSON"),
        ('["run_experiment"]', "expected an object"),
        ('{"name": "run_experiment", "arguments": {}, "extra": 1}', "expected an object"),
        ('{"arguments": {}}', "expected an object"),
        (b'{"name": "end"}', "expected text, got bytes"),
        ('{"name": "run_experiments", "arguments": {}}', "unknown tool"),
        ('{"name": "run_experiment", "arguments": {"interventions": {"G999": {"type": "BLOCK"}}}}', "invalid arguments"),
        ('{"name": "test_rescue", "arguments": {"interventions": {"G001": {"type": "BLOCK"}}}}', "diagnosis"),
        ('{"name": "submit_hypothesis", "arguments": {"text": "\\ud800"}}', "lone surrogate"),
    ],
)
def test_malformed_text_actions_get_a_clear_error_and_change_nothing(env, action, message):
    env.reset(options={"organism_seed": SEED})
    session = env.unwrapped.session
    before = (int(session.obs["budget_left"]), int(session.env.state.step_count), session.ended)
    obs, reward, terminated, truncated, info = env.step(action)
    assert message in info["result"]["error"]
    assert reward == 0.0 and not terminated and not truncated and "scores" not in info
    assert (int(session.obs["budget_left"]), int(session.env.state.step_count), session.ended) == before
    assert env.observation_space.contains(obs)


def test_the_call_limit_truncates_and_refusals_never_do():
    env = LucaToolsEnv(tier=TIER, mode=MODE, max_steps=4)
    env.reset(options={"organism_seed": SEED})
    for _ in range(50):
        assert not any(env.step("{")[2:4])
    edge = {"gene": env.unwrapped.session.targetable_genes[0], "phenotype": env.unwrapped.session.meta.phenotype_names[0],
            "direction": "-"}
    for i in range(4):
        _, _, terminated, truncated, info = env.step(json.dumps({"name": "submit_network", "arguments": {"edges": [edge]}}))
    assert truncated and not terminated and info["end_reason"] == "call_limit"


def test_bad_settings_and_options_are_refused():
    with pytest.raises(ValueError, match="tier"):
        LucaToolsEnv(tier="extreme")
    env = LucaToolsEnv(tier=TIER, mode=MODE)
    with pytest.raises(ValueError, match="options"):
        env.reset(options={"seed": 3})
    with pytest.raises(RuntimeError, match="before reset"):
        LucaToolsEnv(tier=TIER, mode=MODE).step("{}")
    assert parse_tool_call('{"name": "end"}') == ("end", {})
    with pytest.raises(ValueError, match="^python: world 'luca' does not offer the python tool"):
        gym.make("luca_gym/LucaTools-v0", python=True)  # the generic check, not a TypeError


def test_sealed_text_env_plays_the_sealed_organism():
    secret = "a sealed text env secret"
    env = LucaToolsEnv(tier=TIER, mode=MODE, sealed=secret)
    _, info = env.reset(options={"organism_seed": SEED})
    assert info["organism_id"] == ToolSession(SEED, tier=TIER, mode=MODE, sealed=secret).organism_id != f"org_{SEED:08d}"


# -- replay ---------------------------------------------------------------------------
def test_a_replayed_baseline_session_scores_exactly_as_recorded():
    spec = luca_spec("heuristic", TIER, MODE, 20, SEED)
    record = ev.run_session(make_policy("heuristic"), spec)
    replayed = run_agent(ReplayAgent(record), ToolSession(SEED, tier=TIER, mode=MODE))
    assert replayed["scores"] == record["scores"]
    assert [c["call"] for c in replayed["calls"]] == [c["call"] for c in record["calls"]]


def test_a_replayed_tool_session_from_a_results_file_scores_exactly(tmp_path):
    session = ToolSession(SEED, tier=TIER, mode=MODE)
    script = script_for(session)
    spec = luca_spec("scripted", TIER, MODE, 20, SEED)
    path = ev.sweep([spec], str(tmp_path), policy_factory=lambda name: ScriptedAgent(script))
    (record,) = ev.load_sessions(path)
    again = run_agent(ReplayAgent(record), ToolSession(SEED, tier=TIER, mode=MODE))
    assert again["scores"] == record["scores"] and again["return"] == pytest.approx(record["return"])


def test_long_checked_arguments_are_logged_in_full_so_they_replay():
    session = ToolSession(SEED, tier=TIER, mode=MODE)
    names = session.meta.phenotype_names
    edges = [{"gene": g, "phenotype": p, "direction": "+"} for g in session.targetable_genes for p in names]
    assert len(json.dumps({"edges": edges})) > 2048
    session.call("submit_network", {"edges": edges})
    assert session.transcript[-1]["arguments"] == {"edges": edges}
    session.call("submit_network", {"edges": edges + [{"gene": "G999"}]})  # refused: abbreviated
    assert str(session.transcript[-1]["arguments"]).endswith("...<truncated>")


@pytest.mark.parametrize("record", [{}, {"calls": "x"}, {"calls": [{"arguments": {}}]}, []])
def test_a_record_without_calls_is_refused(record):
    with pytest.raises(ValueError, match="record"):
        ReplayAgent(record)


def test_gymnasium_env_checker_passes():
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(LucaToolsEnv(tier=TIER, mode="healthy"), skip_render_check=True)
    assert not [str(w.message) for w in caught]


@pytest.mark.parametrize("first", ["luca_gym.worlds.luca.tools", "luca_gym.mcp.server", "luca_gym.envs.tools", "luca_gym.envs",
                                   "luca_gym.worlds.luca.calls"])
def test_every_import_order_works(first):
    """The text env sits on the tools, which sit on the world: no cycle, whatever is imported first."""
    import subprocess
    import sys

    code = f"import {first}; from luca_gym.worlds.luca.envs import LucaToolsEnv; from luca_gym.worlds.luca.tools import ToolSession; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
