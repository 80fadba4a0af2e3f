"""The evaluation harness: session records, resumable sweeps (including a
sweep killed half-way and a write cut short) and the paper's summary tables.

Real sessions run at N=20 on the easy tier only; the tables are checked on a
hand-made list of records whose numbers are known.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import signal_after_lines
from luca_gym.results import report
from luca_gym.worlds.luca import calls, core
from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.llm.loop import ScriptedAgent
from luca_gym.worlds.luca.evaluation import luca_spec
from luca_gym.worlds.luca import tables as luca_tables
from luca_gym.worlds.luca import evaluation as luca_evaluation

EXPECTED_SCORES = (*luca_evaluation.SCORE_FIELDS, "network_precision", "network_recall", "network_f1", *luca_evaluation.STRATEGY_FIELDS, "n_alt")


def strict_json(line):
    """json.loads that refuses NaN / Infinity (not JSON)."""

    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(line, parse_constant=refuse)


def key_of(record) -> tuple:
    return ev.record_key(record)


class CountingFactory:
    def __init__(self):
        self.made = []

    def __call__(self, agent):
        self.made.append(agent)
        return make_policy(agent)


SPECS = ev.plan_world("luca", ["random", "causal-sweep"], [0, 1], tier=["easy"], mode=["healthy", "disease"], n_genes=[20])


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A small sweep, run once: (results path, the factory's log)."""
    out = tmp_path_factory.mktemp("sweep")
    factory = CountingFactory()
    path = ev.sweep(SPECS, str(out), policy_factory=factory)
    return Path(path), factory


# -- plan --------------------------------------------------------------------------
def test_plan_is_the_full_product():
    specs = ev.plan_world("luca", ["random", "heuristic"], [3, 5, 7], tier=["easy", "hard"], mode=["healthy", "disease"], n_genes=[20, 40])
    assert len(specs) == 2 * 2 * 2 * 2 * 3
    assert len({ev.session_key(s) for s in specs}) == len(specs)
    assert {s.seed for s in specs} == {3, 5, 7}


@pytest.mark.parametrize(
    "args, words",
    [
        ((["robot"], ["easy"], ["healthy"], [20], [0]), ["'robot'", "random, heuristic, causal-sweep, task-directed"]),
        ((["random"], ["extreme"], ["healthy"], [20], [0]), ["'extreme'", "easy, medium, hard"]),
        ((["random"], ["easy"], ["sick"], [20], [0]), ["'sick'", "healthy, disease"]),
        ((["random"], ["easy"], ["healthy"], [3], [0]), ["n_genes", "4..4096"]),
        ((["random"], ["easy"], ["healthy"], [20], [-1]), ["seed", "-1"]),
        ((["random"], ["easy"], ["healthy"], [20], [2**63]), ["seed", str(2**63), "0..2**63-1"]),
        ((["random"], ["easy"], ["healthy"], [20], [3.0]), ["seed", "3.0", "integer"]),
        ((["random"], ["easy"], ["healthy"], [20.0], [0]), ["n_genes", "20.0", "integer"]),
        ((["random"], ["easy"], ["healthy"], [20], [0], "yes"), ["backwards", "'yes'", "True or False"]),
    ],
)
def test_plan_refuses_bad_values(args, words):
    agents, tiers, modes, n_genes, seeds, *backwards = args
    with pytest.raises(ValueError) as err:
        ev.plan_world("luca", agents, seeds, tier=tiers, mode=modes, n_genes=n_genes, backwards=(backwards or [False])[0])
    for w in words:
        assert w in str(err.value)


# -- backwards reaches the env everywhere ------------------------------------------------
class BaselineSpy:
    """A policy that records the baseline phenotypes it is shown, then ends."""

    def __init__(self):
        self.seen = []

    def reset(self, params, seed):
        pass

    def act(self, obs):
        self.seen.append(np.asarray(obs["baseline_phenotypes"]).tolist())
        return {"kind": core.END}


def first_baseline(backwards: bool) -> list:
    obs, _ = LucaEnv(tier="easy", backwards=backwards).reset(options={"organism_seed": 0})
    return np.asarray(obs["baseline_phenotypes"]).tolist()


@pytest.mark.parametrize("backwards", [False, True])
def test_run_session_plays_the_spec_organism(backwards):
    assert first_baseline(True) != first_baseline(False)
    policy = BaselineSpy()
    record = ev.run_session(policy, luca_spec("spy", "easy", "healthy", 20, 0, backwards))
    assert policy.seen == [first_baseline(backwards)] and record["backwards"] is backwards


def test_run_session_refuses_an_env_built_for_other_settings():
    spec = luca_spec("spy", "easy", "healthy", 20, 0, True)
    with pytest.raises(ValueError, match="backwards"):
        ev.run_session(BaselineSpy(), spec, LucaEnv(tier="easy"))
    with pytest.raises(ValueError, match="backwards"):
        ev.run_tool_session(ScriptedAgent([("end", {})]), spec, LucaEnv(tier="easy"))
    assert ev.run_session(BaselineSpy(), spec, LucaEnv(tier="easy", backwards=True))["backwards"] is True


@pytest.mark.parametrize("backwards", [False, True])
def test_tool_sessions_and_sweeps_play_the_spec_organism(tmp_path, backwards):
    script = [("get_organism_info", {}), ("end", {})]
    spec = luca_spec("scripted", "easy", "healthy", 20, 0, backwards)
    modes = {"inhibits" if backwards else "activates"}
    record = ev.run_tool_session(ScriptedAgent(script), spec)
    assert {s["mode"] for s in record["calls"][0]["result"]["signals"]} == modes
    path = ev.sweep([spec], str(tmp_path), policy_factory=lambda name: ScriptedAgent(script))
    (swept,) = ev.load_sessions(path)
    assert swept["backwards"] is backwards
    assert {s["mode"] for s in swept["calls"][0]["result"]["signals"]} == modes


# -- the session record --------------------------------------------------------------
def test_sweep_writes_one_line_per_session(swept):
    path, factory = swept
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == len(SPECS) == len(factory.made)
    records = [strict_json(line) for line in lines]
    assert [key_of(r) for r in records] == [ev.session_key(s) for s in SPECS]
    assert ev.load_sessions(str(path.parent)) == records


def test_session_record_fields(swept):
    path, _ = swept
    for line in path.read_text().splitlines():
        r = strict_json(line)
        assert r["agent"] in ("random", "causal-sweep")
        assert (r["tier"], r["n_genes"], r["backwards"]) == ("easy", 20, False)
        assert r["mode"] in ("healthy", "disease")
        assert r["budget"] == 31
        for name in EXPECTED_SCORES:
            assert isinstance(r["scores"][name], (int, float)), name
        assert r["n_alt"] == r["scores"]["n_alt"]
        assert isinstance(r["n_alt"], int) and r["n_alt"] >= 0
        if r["mode"] == "healthy":
            assert r["n_alt"] == 0
            assert r["scores"]["composite"] == pytest.approx(r["scores"]["prediction"])
        else:
            s = r["scores"]
            assert s["composite"] == pytest.approx((s["prediction"] + s["diagnosis"] + s["rescue"]) / 3, abs=1e-6)
        assert r["return"] == pytest.approx(r["scores"]["composite"], abs=1e-5)
        budget = r["budget"]
        for c in r["calls"]:
            assert set(c) == {"call", "arguments", "result", "budget_remaining"}
            assert c["call"] in calls.CALLS
            assert isinstance(c["arguments"], dict)
            assert c["result"]["budget_remaining"] == c["budget_remaining"]
            assert c["budget_remaining"] <= budget
            budget = c["budget_remaining"]
            assert "error" not in c["result"]
        assert r["calls"][-1]["call"] == "end"


def test_session_record_logs_calls_by_name(swept):
    path, _ = swept
    records = [strict_json(line) for line in path.read_text().splitlines()]
    sweep = next(r for r in records if (r["agent"], r["mode"]) == ("causal-sweep", "disease"))
    experiments = [c for c in sweep["calls"] if c["call"] == "run_experiment"]
    assert len(experiments) == sweep["scores"]["n_experiments"] > 0
    first = experiments[0]
    (target, spec), = first["arguments"]["interventions"].items()
    assert target.startswith("G") and spec["type"] in ("BLOCK", "BOOST")
    assert len(first["result"]["phenotypes"]) == 3
    assert all(0.0 <= v <= 1.0 for v in first["result"]["phenotypes"].values())
    assert first["result"]["status"] in ("converged", "max_steps_reached")
    reveal = next(c for c in sweep["calls"] if c["call"] == "get_next_prediction_task")
    assert len(reveal["result"]["interventions"]) == 2
    diagnosis = next(c for c in sweep["calls"] if c["call"] == "submit_malfunction_hypothesis")
    assert diagnosis["arguments"]["malfunction_type"] in ("LOCK_HI", "LOCK_LO", "PERSIST")
    rescue = next(c for c in sweep["calls"] if c["call"] == "test_rescue")
    assert 0.0 <= rescue["result"]["restored_fraction"] <= 1.0


# -- resume -------------------------------------------------------------------------
def test_same_sweep_again_runs_nothing(swept):
    path, _ = swept
    before = path.read_bytes()
    factory = CountingFactory()
    seen = []
    ev.sweep(SPECS, str(path.parent), policy_factory=factory, progress=lambda i, n, spec: seen.append((i, n, spec)))
    assert factory.made == []
    assert path.read_bytes() == before
    assert seen == [(0, 0, None)]


def test_wider_sweep_runs_only_the_new_sessions(tmp_path, swept):
    path, _ = swept
    (tmp_path / ev.SESSIONS_FILE).write_bytes(path.read_bytes())
    wider = ev.plan_world("luca", ["random", "causal-sweep"], [0, 1, 2], tier=["easy"], mode=["healthy"], n_genes=[20])
    factory = CountingFactory()
    ev.sweep(wider, str(tmp_path), policy_factory=factory)
    assert sorted(factory.made) == ["causal-sweep", "random"]
    lines = (tmp_path / ev.SESSIONS_FILE).read_bytes()
    assert lines.startswith(path.read_bytes())
    keys = [key_of(strict_json(line)) for line in lines.decode().splitlines()]
    assert len(keys) == len(set(keys)) == len(SPECS) + 2


def test_unfinished_last_line_is_ignored_and_trimmed(tmp_path, swept):
    path, _ = swept
    data = path.read_bytes()
    records = data.splitlines(keepends=True)
    # Keep the first session, then a write cut short half-way through the second.
    cut = records[0] + records[1][: len(records[1]) // 2]
    (tmp_path / ev.SESSIONS_FILE).write_bytes(cut)
    assert [key_of(r) for r in ev.load_sessions(str(tmp_path))] == [ev.session_key(SPECS[0])]
    factory = CountingFactory()
    ev.sweep(SPECS[:2], str(tmp_path), policy_factory=factory)
    assert factory.made == [SPECS[1].agent]
    after = (tmp_path / ev.SESSIONS_FILE).read_bytes()
    assert after.startswith(records[0]) and after.endswith(b"\n")
    assert [key_of(strict_json(x)) for x in after.splitlines()] == [ev.session_key(SPECS[0]), ev.session_key(SPECS[1])]


def test_corrupt_middle_line_is_refused_and_kept(tmp_path, swept):
    path, _ = swept
    lines = path.read_bytes().splitlines(keepends=True)
    data = lines[0] + b'{"agent": "random", "tier"\n' + lines[1]
    (tmp_path / ev.SESSIONS_FILE).write_bytes(data)
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:2: corrupt line"):
        ev.load_sessions(str(tmp_path))
    factory = CountingFactory()
    with pytest.raises(ev.ResultsError):
        ev.sweep(SPECS, str(tmp_path), policy_factory=factory)
    assert factory.made == []
    assert (tmp_path / ev.SESSIONS_FILE).read_bytes() == data


def test_sweep_runs_a_repeated_spec_once(tmp_path):
    spec = luca_spec("random", "easy", "healthy", 20, 0)
    ev.sweep([spec, spec], str(tmp_path))
    lines = (tmp_path / ev.SESSIONS_FILE).read_text().splitlines()
    assert len(lines) == 1


def luca_gym_command() -> list[str]:
    script = Path(sys.executable).with_name("luca-gym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "luca_gym.cli"]


def test_resume_after_killed_sweep(tmp_path):
    """Kill a CLI sweep (SIGKILL) part-way, leave a half-written line, rerun:
    exactly one line per session, every line parses, nothing before the kill
    is rewritten."""
    out = tmp_path / "results"
    cmd = luca_gym_command() + [
        "eval", "--agents", "random,heuristic", "--tiers", "easy", "--modes", "healthy,disease",
        "--seeds", "0-4", "--out", str(out), "--quiet",
    ]
    expected = {("luca", a, "easy", m, 20, s, False, "invented", "suppress") for a in ("random", "heuristic") for m in ("healthy", "disease")
                for s in range(5)}
    path = out / ev.SESSIONS_FILE
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        signal_after_lines(proc, path, 3, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    killed = path.read_bytes()
    complete = killed[: killed.rfind(b"\n") + 1]
    done = complete.count(b"\n")
    assert 3 <= done < len(expected)

    with open(path, "ab") as f:
        f.write(b'{"agent":"random","tier":"easy","mode":"dise')  # a write cut short
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "Composite score, N=20" in rerun.stdout

    data = path.read_bytes()
    assert data.startswith(complete) and data.endswith(b"\n")
    records = [strict_json(line) for line in data.decode().splitlines()]
    keys = [key_of(r) for r in records]
    assert len(keys) == len(set(keys)) == len(expected)
    assert set(keys) == expected
    for r in records:
        assert r["calls"][-1]["call"] == "end"


# -- summaries on hand-made records ----------------------------------------------------
def make_record(agent, tier, mode, n, seed, composite, **scores) -> dict:
    base = dict(
        composite=composite, prediction=composite, diagnosis=0.0, rescue=0.0,
        budget_fraction=0.5, single_gene_fraction=1.0, gene_coverage=0.5, block_fraction=1.0,
        redundancy=0.0, commit_point=0.0, n_alt=0,
    )
    base.update(scores)
    return {"agent": agent, "tier": tier, "mode": mode, "n_genes": n, "seed": seed, "backwards": False, "scores": base}


RECORDS = [
    # easy healthy: random 0 and 1 (mean 0.5, population std 0.5; ddof=1 would be 0.707)
    make_record("random", "easy", "healthy", 20, 0, 0.0),
    make_record("random", "easy", "healthy", 20, 1, 1.0),
    make_record("causal-sweep", "easy", "healthy", 20, 0, 1.0),
    make_record("causal-sweep", "easy", "healthy", 20, 1, 1.0),
    # easy disease: sub-scores chosen so the gap is known
    make_record("random", "easy", "disease", 20, 0, 0.25, prediction=0.5, diagnosis=0.0, rescue=0.25, n_alt=2),
    make_record("random", "easy", "disease", 20, 1, 0.25, prediction=0.5, diagnosis=0.0, rescue=0.25, n_alt=4),
    make_record("heuristic", "easy", "disease", 20, 0, 0.5, prediction=0.5, diagnosis=1.0, rescue=0.0),
    # medium healthy at N=20 and N=40 (strategy and scaling)
    make_record("heuristic", "medium", "healthy", 20, 0, 0.5, budget_fraction=0.6, single_gene_fraction=0.25,
                gene_coverage=0.75, block_fraction=0.5, redundancy=0.1, commit_point=0.2),
    make_record("heuristic", "medium", "healthy", 20, 1, 0.7, budget_fraction=0.8, single_gene_fraction=0.75,
                gene_coverage=0.25, block_fraction=1.0, redundancy=0.3, commit_point=0.4),
    make_record("heuristic", "medium", "healthy", 40, 0, 0.25),
    make_record("random", "medium", "healthy", 40, 0, 0.75),
]


def test_summary_uses_population_std():
    s = luca_tables.summary(RECORDS)
    mean, std, count = s[("random", "easy", "healthy", 20)]["composite"]
    assert (mean, count) == (0.5, 2)
    assert std == pytest.approx(0.5)
    assert std == pytest.approx(np.std([0.0, 1.0], ddof=0))
    assert s[("random", "easy", "disease", 20)]["n_alt"] == (3.0, 1.0, 2)
    assert s[("heuristic", "medium", "healthy", 20)]["commit_point"] == pytest.approx((0.3, 0.1, 2))
    assert ("random", "medium", "healthy", 20) not in s


def test_composite_table():
    table = luca_tables.composite_table(RECORDS, 20).splitlines()
    assert table[0] == "| agent | easy H | medium H | easy D |"
    rows = {line.split(" | ")[0].strip("| "): line for line in table[2:]}
    assert list(rows) == ["random", "heuristic", "causal-sweep"]
    assert "0.500 ± 0.500 (paper 0.667)" in rows["random"]
    assert "0.250 ± 0.000 (paper 0.358)" in rows["random"]
    assert "1.000 ± 0.000 (paper 1.000)" in rows["causal-sweep"]
    assert "0.600 ± 0.100 (paper 0.575)" in rows["heuristic"]
    assert rows["causal-sweep"].count(" - ") == 2  # no medium H, no easy D for causal-sweep
    assert "paper" not in luca_tables.composite_table(RECORDS, 20, with_paper=False)


def test_disease_table():
    table = luca_tables.disease_table(RECORDS, 20).splitlines()
    assert table[0].startswith("| tier | agent | prediction | diagnosis | rescue | composite | rescue - diagnosis |")
    assert "| easy | random | 0.500 | 0.000 | 0.250 | 0.250 | +0.250 |" in table
    assert "| easy | heuristic | 0.500 | 1.000 | 0.000 | 0.500 | -1.000 |" in table
    assert not any("causal-sweep" in line for line in table)
    assert len(table) == 4


def test_strategy_table():
    table = luca_tables.strategy_table(RECORDS).splitlines()
    assert "| heuristic | 0.70 | 50.0% | 50.0% | 75.0% | 0.20 | 0.30 |" in table
    assert len(table) == 3  # only heuristic has medium healthy N=20 records


def test_scaling_table():
    table = luca_tables.scaling_table(RECORDS).splitlines()
    assert table[0] == "| N | budget | random | heuristic |"
    assert table[2] == "| 20 | 31 | - | 0.600 ± 0.100 (paper 0.550) |"
    assert table[3] == "| 40 | 54 | 0.750 ± 0.000 (paper 0.617) | 0.250 ± 0.000 (paper 0.567) |"


def test_agents_in_orders_the_baselines_first():
    extra = make_record("openai:m", "easy", "healthy", 20, 0, 0.5)
    assert ev.agents_in([extra, *RECORDS]) == ["random", "heuristic", "causal-sweep", "openai:m"]


def test_report_uses_only_public_names_of_eval():
    source = Path(report.__file__).read_text()
    assert "ev._" not in source
    used = set(re.findall(r"\bev\.([A-Za-z_]\w*)", source))
    assert used and all(not name.startswith("_") for name in used)
    assert used <= set(ev.__all__), used - set(ev.__all__)


def test_learned_agents_are_checked_in_the_plan(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    specs = ev.plan_world("luca", [f"ppo:{run}", "random"], [0], tier=["easy"], mode=["healthy"], n_genes=[20])
    assert [s.agent for s in specs] == [f"ppo:{run}", "random"]
    assert ev.is_learned_agent(f"ppo:{run}") and ev.is_learned_agent("sb3:model.zip") and not ev.is_learned_agent("random")
    with pytest.raises(ValueError, match="no such run folder"):
        ev.plan_world("luca", [f"ppo:{tmp_path / 'missing'}"], [0], tier=["easy"], mode=["healthy"], n_genes=[20])
    with pytest.raises(ValueError, match="no such file"):
        ev.plan_world("luca", [f"sb3:{tmp_path / 'missing.zip'}"], [0], tier=["easy"], mode=["healthy"], n_genes=[20])
    with pytest.raises(ValueError, match="config.json: missing"):  # a folder that holds no run
        ev.make_runner(f"ppo:{run}", world="luca")


# -- a budget for the whole sweep (luca-gym eval --budget) -----------------------------------
def tight_plan(**settings):
    return ev.plan_world("luca", ["causal-sweep"], [0, 1], tier=["medium"], mode=["disease"], **settings)


def test_plan_takes_one_budget_for_the_whole_sweep():
    """A run option: recorded by every session and compared by the results
    folder (expected fields), not part of a session's key."""
    plain, tight = tight_plan(), tight_plan(budget=8)
    assert ev.run_options("luca") == ("budget",) and ev.run_options("equation") == ("budget",)
    assert [s.options()["budget"] for s in tight] == [8, 8] and all("budget" not in s.options() for s in plain)
    assert [ev.session_key(s) for s in tight] == [ev.session_key(s) for s in plain]
    assert ev.expected_fields(tight[0]) == {"budget": 8, "call_limit": 4 * 8 + 64}
    assert ev.expected_fields(plain[0]) == {"budget": 31, "call_limit": 4 * 31 + 64}  # the paper's N + S + 8
    assert tight_plan(budget=[8]) == tight and tight_plan(budget=None) == plain


@pytest.mark.parametrize("budget, words", [
    ([8, 9], ["budget", "[8, 9]", "one value for the whole sweep"]),
    ([], ["budget", "empty"]),
    (0, ["budget: 0 not allowed", "1..65536"]),
    (-1, ["budget: -1 not allowed"]),
    (8.5, ["budget: 8.5 not allowed"]),
    ("x", ["budget: 'x' not allowed"]),
    (10**9, ["budget: 1000000000 not allowed"]),
    (True, ["budget: True not allowed"]),
])
def test_plan_refuses_bad_budgets(budget, words):
    with pytest.raises(ValueError) as err:
        tight_plan(budget=budget)
    for w in words:
        assert w in str(err.value)


def test_a_language_model_agent_plays_luca_at_the_budget():
    """LUCA's tool session takes the budget: its prompt, call limit and first
    status say so; an unknown setting is still refused by name."""
    from luca_gym.worlds.luca.tools import ToolSession

    (spec,) = ev.plan_world("luca", ["openai:gpt-4o"], [0], tier="medium", mode="disease", n_genes=20, budget=8)
    assert spec.options()["budget"] == 8
    # the settings of the other budget-8 tests (test_cli's): the same compiled session core
    session = ToolSession(0, tier="medium", mode="disease", n_genes=20, budget=8)
    assert session.call_limit == 4 * 8 + 64 and "96" in session.system_prompt()
    assert session.call("get_organism_info", {})["budget_remaining"] == 8
    with pytest.raises(ValueError, match="budget: 0 not allowed"):
        ToolSession(0, tier="medium", n_genes=20, budget=0)
    with pytest.raises(ValueError, match="settings: stance_of_mind unknown .* allowed tier, .*budget"):
        ev.plan_world("luca", ["random"], [0], stance_of_mind=1)


def test_a_tool_agents_budget_reaches_its_tool_session():
    """equation's tool session takes the budget: its systematic baseline queries at most that many times."""
    (spec,) = ev.plan_world("equation", ["systematic"], [3], complexity=["medium"], n_distractors=[2], budget=1)
    record = ev.run_tool_session(ev.make_runner("systematic", world="equation"), spec, retries=0)
    assert record["budget"] == 1 and sum(c["call"] == "query" for c in record["calls"]) <= 1


def test_causal_sweep_flat_in_the_harness_plays_as_its_batched_rollout():
    """causal-sweep-flat on the host session at budget 8 scores, session by
    session, what its batched form scores on the same organisms and noise
    keys; clean sessions that spend at most the budget."""
    import jax

    from luca_gym.worlds.luca import functional as luca_functional
    from luca_gym.worlds.luca.baselines.sweep_flat import batched_policy

    seeds = [0, 1, 2]
    specs = ev.plan_world("luca", ["causal-sweep-flat"], seeds, tier=["medium"], mode=["disease"], budget=8)
    records = [ev.run_session(make_policy("causal-sweep-flat"), s) for s in specs]
    for r in records:
        assert r["budget"] == 8 and r["end_reason"] == "end" and not r["truncated"]
        assert [c for c in r["calls"] if "error" in c["result"]] == []
        assert sum(c["call"] in ("run_experiment", "test_rescue") for c in r["calls"]) <= 8
    params = core.make_params("medium", 20, "disease", budget=8)
    organisms, keys = luca_functional.organism_batch(seeds, "medium", 20, "disease")
    _, composite, ended = luca_functional.rollout(batched_policy(params), jax.random.PRNGKey(0), organisms, keys, params, 16)
    assert np.asarray(ended).all()
    assert [r["scores"]["composite"] for r in records] == pytest.approx(np.asarray(composite).tolist(), abs=1e-5)
