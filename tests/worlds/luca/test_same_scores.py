"""One scripted sequence of calls, three front ends, the same results and scores
:meth:`ToolSession.call <luca_gym.worlds.luca.tools.ToolSession.call>`,
the Gymnasium text env ``luca_gym/LucaTools-v0``, and the real MCP server
(``luca-gym mcp`` as a subprocess, driven over stdio by the official ``mcp``
SDK client), which also records its session with ``--out DIR --agent scripted``.

Each scenario's script is written by driving a :class:`ToolSession` (leg a):
later calls use earlier results (predictions from the measured baseline, a
network from the measured effects, the true malfunction as the diagnosis), so
the scores are not all zero and a difference between the legs would show. The
script -- every (name, arguments) pair, refused calls included -- is then
replayed verbatim through the text env (leg b) and the MCP server (leg c).
Scenarios (N=20): healthy easy and disease hard ended by ``end``; disease
medium that spends its budget and is ended by the call limit (truncated).

What "identical" means, leg by leg:

- ToolSession vs text env: the env's ``info["result"]`` is the very dict its
  inner ``ToolSession.call`` returned, so it is compared with ``==`` as is;
  the inner session's running return, raw scores and transcript equal leg
  a's exactly; the summed rewards equal the composite to 1e-6 only (the
  core's rewards are float32 increments summed as Python floats, the
  composite one float32: on disease-hard they differ by about 3e-8, on
  every leg alike). One malformed text action (not JSON) goes to the env
  alone, in the middle: it must change nothing.
- ToolSession vs MCP: a tool result crosses stdio as JSON, so leg a's result
  is compared after a JSON round trip (``_wire``), with the MCP result's
  ``structuredContent`` and its text block (the same JSON). Both legs'
  ``end`` results hold ``calls.describe_scores`` (names, 4 decimals), so
  that is like for like. The raw scores (float32 noise, codes for the
  malfunction) never cross MCP as a tool result; they are in the line the
  server records, compared with leg a's ``ToolSession.record()`` and with the
  line :func:`luca_gym.harness.record_tool_session` writes for leg a's session.

One server start per scenario, all started at once (each compiles JAX).
Every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
from dataclasses import dataclass

import anyio
import gymnasium as gym
import jax
import numpy as np
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from luca_gym.worlds.luca import calls
from luca_gym import harness as ev
from luca_gym.worlds.luca.spec import MALFUNCTION_TYPES
from luca_gym.worlds.luca.tools import ToolSession

# One worker runs the module: its module fixtures (sessions, a trained run) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("same-scores")

ROOT = pathlib.Path(__file__).resolve().parents[3]
# The server computes on this process's backend: "identical" is bit for bit, which holds on one backend
# (a CPU server against an in-process GPU session could differ in the last float32 bits).
ENV = {"JAX_PLATFORMS": jax.default_backend(), **{k: os.environ[k] for k in ("JAX_COMPILATION_CACHE_DIR", "PATH") if k in os.environ}}
AGENT = "scripted"
NOT_JSON = "this is not a tool call"  # a text action only the env can receive (MCP carries a name and an object)


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    tier: str
    mode: str
    n_genes: int = 20
    ending: str = "end"  # or "call_limit": the session runs out of budget, then hits its call limit

    @property
    def cli_args(self) -> list[str]:
        return ["mcp", "--seed", str(self.seed), "--tier", self.tier, "--mode", self.mode, "--n-genes", str(self.n_genes)]


SCENARIOS = (
    Scenario("healthy-easy", seed=3, tier="easy", mode="healthy"),
    Scenario("disease-hard", seed=5, tier="hard", mode="disease"),
    Scenario("disease-medium-call-limit", seed=7, tier="medium", mode="disease", ending="call_limit"),
)


# -- leg a: write the script by driving a ToolSession ---------------------------------
class Recorder:
    """Calls ``session`` and keeps every (name, arguments, result)."""

    def __init__(self, session: ToolSession):
        self.session = session
        self.script: list[tuple[str, dict]] = []
        self.results: list[dict] = []

    def __call__(self, name: str, arguments: dict, *, refused: bool = False) -> dict:
        arguments = json.loads(json.dumps(arguments))  # the script holds what is sent, not a live object
        before = (int(self.session.obs["budget_left"]), int(self.session.env.state.step_count))
        result = self.session.call(name, arguments)
        self.script.append((name, arguments))
        self.results.append(result)
        # The script is checked as it is written: a refusal is refused and free, the rest accepted.
        assert ("error" in result) == refused, (name, arguments, result)
        if refused:
            assert (int(self.session.obs["budget_left"]), int(self.session.env.state.step_count)) == before
        return result


def _clip(value: float) -> float:
    return float(min(1.0, max(0.0, value)))


def write_script(scenario: Scenario) -> tuple[ToolSession, Recorder]:
    session = ToolSession(scenario.seed, tier=scenario.tier, mode=scenario.mode, n_genes=scenario.n_genes)
    call = Recorder(session)
    meta, genes, names = session.meta, session.targetable_genes, session.meta.phenotype_names
    disease = scenario.mode == "disease"

    info = call("get_organism_info", {})
    baseline = info["baseline_phenotypes"]
    probes = genes[:3]
    effects = {}
    for gene in probes:  # single knock-outs: the effects the network is built from
        measured = call("run_experiment", {"interventions": {gene: {"type": "BLOCK"}}})["phenotypes"]
        effects[gene] = {p: measured[p] - baseline[p] for p in names}
    # Refused in the middle: an unknown gene (schema), an unknown tool, a bad enum.
    call("run_experiment", {"interventions": {"G999": {"type": "BLOCK"}}}, refused=True)
    call("run_experiments", {"interventions": {genes[0]: {"type": "BLOCK"}}}, refused=True)
    call("run_experiment", {"interventions": {genes[0]: {"type": "ACTIVATE"}}}, refused=True)
    # A signal activation together with a gene boost.
    call("run_experiment", {"interventions": {genes[3]: {"type": "BOOST"}, meta.signal_labels[0]: {"type": "ACTIVATE"}}})
    call("run_experiment", {"interventions": {probes[0]: {"type": "BLOCK"}}})  # a repeat: fresh noise, the same on every leg

    if disease:
        call("test_rescue", {"interventions": {genes[0]: {"type": "BLOCK"}}}, refused=True)  # before the diagnosis
        arrays = session.env.organism.arrays
        # The true malfunction (the test may look): a correct diagnosis makes its score non-zero.
        target = calls.target_name(meta, int(arrays.malfunction_target))
        kind = MALFUNCTION_TYPES[int(arrays.malfunction_type)]
        assert target in genes + meta.signal_labels, target
        call("submit_malfunction_hypothesis", {"target_name": target, "malfunction_type": kind})
        call("submit_malfunction_hypothesis", {"target_name": target, "malfunction_type": kind}, refused=True)  # one-way
        # Two rescues: the blunt one, then the gentle one (on seed 5, BLOCK overshoots and DAMPEN restores).
        firm = {"LOCK_HI": "BLOCK", "LOCK_LO": "BOOST"}.get(kind)
        on = target if firm else genes[0]  # a persistent signal cannot be switched off: act on a gene
        for how in (firm or "BLOCK", "DAMPEN"):
            rescued = call("test_rescue", {"interventions": {on: {"type": how}}})
            assert 0.0 <= rescued["restored_fraction"] <= 1.0
    else:
        call("submit_malfunction_hypothesis", {"target_name": genes[0], "malfunction_type": "LOCK_HI"}, refused=True)
        call("test_rescue", {"interventions": {genes[0]: {"type": "BLOCK"}}}, refused=True)

    for k in range(2):  # both prediction tasks, answered from what was measured
        task = call("get_next_prediction_task", {})
        pair = list(task["interventions"])
        if k == 0:
            # The core refuses an experiment on both genes of a held-out task.
            call("run_experiment", {"interventions": {g: {"type": "BLOCK"} for g in pair}}, refused=True)
            call("submit_prediction", {"predictions": {p: 2.0 for p in names}}, refused=True)  # out of [0, 1]
        guess = {p: _clip(baseline[p] + sum(effects.get(g, {}).get(p, 0.0) for g in pair)) for p in names}
        call("submit_prediction", {"predictions": guess})
        if k == 0:
            call("submit_prediction", {"predictions": guess}, refused=True)  # one answer per task
    edges = [
        {"gene": g, "phenotype": p, "direction": "+" if d < 0 else "-"}  # a knock-out lowers what the gene raises
        for g, by in effects.items() for p, d in by.items() if abs(d) > 0.02
    ]
    call("submit_network", {"edges": edges + [{"gene": "G999", "phenotype": names[0], "direction": "+"}]}, refused=True)
    call("submit_network", {"edges": edges})
    call("submit_hypothesis", {"text": ""}, refused=True)
    call("submit_hypothesis", {"text": f"{probes[0]} moves {names[0]}"})
    if scenario.ending == "end":
        last = call("end", {})
    else:  # spend the budget, then resubmit the network until the call limit ends the session
        for k in range(int(session.obs["budget_left"])):
            gene = genes[k % len(genes)]
            call("run_experiment", {"interventions": {gene: {"type": ("BOOST", "DAMPEN")[k % 2]}}})
        call("run_experiment", {"interventions": {genes[0]: {"type": "BLOCK"}}}, refused=True)  # no budget left
        while not session.ended:
            last = call("submit_network", {"edges": edges})
        assert int(session.env.state.step_count) == session.call_limit
    assert session.ended and last["ended"] is True and last["end_reason"] == scenario.ending
    return session, call


@pytest.fixture(scope="module")
def written():
    """Leg a: scenario name -> (its ToolSession, after ``end``; the Recorder holding the script and results)."""
    return {s.name: write_script(s) for s in SCENARIOS}


# -- leg c: the MCP server over stdio ---------------------------------------------------
async def _serve_one(scenario: Scenario, script, out, errlog, got: dict) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "luca_gym.cli", *scenario.cli_args, "--out", str(out), "--agent", AGENT],
        env=ENV, cwd=str(ROOT),
    )
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        await client.list_tools()  # so the client knows the output schemas it checks results against
        got[scenario.name] = [await client.call_tool(name, arguments) for name, arguments in script]


@pytest.fixture(scope="module")
def served(written, tmp_path_factory):
    """Leg c, every scenario's server at once: scenario name -> (the CallToolResults, the --out folder)."""
    base = tmp_path_factory.mktemp("same-scores-mcp")
    outs = {s.name: base / s.name for s in SCENARIOS}
    logs = {s.name: base / f"{s.name}-stderr.txt" for s in SCENARIOS}
    for out in outs.values():
        out.mkdir()
    got: dict = {}

    async def main(files):
        with anyio.fail_after(300):
            async with anyio.create_task_group() as tg:
                for scenario, errlog in zip(SCENARIOS, files):
                    tg.start_soon(_serve_one, scenario, written[scenario.name][1].script, outs[scenario.name], errlog, got)

    try:
        with contextlib.ExitStack() as stack:
            anyio.run(main, [stack.enter_context(open(logs[s.name], "w", encoding="utf-8")) for s in SCENARIOS])
    except BaseException:
        for name, log in logs.items():
            print(f"--- {name} server stderr ---\n{log.read_text(encoding='utf-8')[-3000:]}", file=sys.stderr)
        raise
    for name, log in logs.items():
        assert f"recorded in {outs[name] / ev.SESSIONS_FILE}" in log.read_text(encoding="utf-8"), name
    return {name: (got[name], outs[name]) for name in outs}


def _wire(value):
    """What a value becomes once sent as JSON (as a tool result crosses stdio)."""
    return json.loads(json.dumps(value))


# -- the checks -------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_script_covers_what_it_should(written, scenario):
    session, rec = written[scenario.name]
    names = [n for n, _ in rec.script]
    accepted = {n for n, r in zip(names, rec.results) if "error" not in r}
    assert {"get_organism_info", "run_experiment", "get_next_prediction_task", "submit_prediction", "submit_network",
            "submit_hypothesis"} <= accepted
    assert sum("error" in r for r in rec.results) >= 9 and "error" not in rec.results[-1]
    assert any(s in args.get("interventions", {}) for _, args in rec.script for s in session.meta.signal_labels)
    scores = session.scores
    assert scores["composite"] > 0 and scores["prediction"] > 0 and scores["network_f1"] > 0
    assert len(scores["task_scores"]) == 2
    if scenario.mode == "disease":
        assert {"submit_malfunction_hypothesis", "test_rescue"} <= accepted
        assert scores["diagnosis"] == 1.0 and scores["n_rescue_tests"] == 2  # the true malfunction was named
    if scenario.ending == "end":
        assert names[-1] == "end" and scores["n_experiments"] == 5
        assert session.end_reason == "end" and not session.truncated
    else:  # the budget spent, then the call limit
        assert "end" not in names and int(session.obs["budget_left"]) == 0
        assert scores["n_experiments"] + scores["n_rescue_tests"] == session.env.params.budget
        assert session.end_reason == "call_limit" and session.truncated
    assert np.isfinite(session.total_reward)
    assert session.total_reward == pytest.approx(scores["composite"], abs=1e-6)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_text_env_gives_the_same_results_and_scores(written, scenario):
    session, rec = written[scenario.name]
    env = gym.make("luca_gym/LucaTools-v0", tier=scenario.tier, mode=scenario.mode, n_genes=scenario.n_genes)
    try:
        obs, info = env.reset(options={"organism_seed": scenario.seed})
        assert info["organism_id"] == session.organism_id
        assert obs.startswith("[system]\n" + session.system_prompt())
        total, steps = 0.0, 0
        for i, ((name, arguments), expected) in enumerate(zip(rec.script, rec.results)):
            if i == 3:  # a malformed text action in the middle: a clear error, free, and nothing changes after it
                inner = env.unwrapped.session
                before = (int(inner.obs["budget_left"]), int(inner.env.state.step_count), len(inner.transcript))
                _, reward, terminated, truncated, bad = env.step(NOT_JSON)
                assert "action: not JSON" in bad["result"]["error"] and set(bad["result"]) == {"error", "budget_remaining"}
                assert reward == 0.0 and not terminated and not truncated and "scores" not in bad
                assert (int(inner.obs["budget_left"]), int(inner.env.state.step_count), len(inner.transcript)) == before
                steps += 1
            obs, reward, terminated, truncated, step_info = env.step(json.dumps({"name": name, "arguments": arguments}))
            steps += 1
            total += reward
            assert step_info["result"] == expected, (i, name)
            if "error" in expected:
                assert reward == 0.0, (i, name)
            ended = bool(expected.get("ended"))
            assert terminated == (ended and name == "end") and truncated == (ended and name != "end"), (i, name)
        # The final scores as the agent is shown them (names, 4 decimals): the same dict as leg a's end result.
        assert step_info["scores"] == rec.results[-1]["scores"] == calls.describe_scores(session.meta, session.scores)
        assert step_info["end_reason"] == scenario.ending and session.end_reason == scenario.ending
        # The return equals the composite (float32 rounding of summed differences), and the
        # env's inner session holds exactly leg a's raw scores, return and transcript.
        inner = env.unwrapped.session
        assert inner.scores == session.scores and inner.total_reward == session.total_reward
        assert total == pytest.approx(session.scores["composite"], abs=1e-6)
        assert inner.transcript == session.transcript  # the raw text never reached the session
        assert obs.count("[tool result]") == steps
    finally:
        env.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_mcp_server_gives_the_same_results_and_scores(written, served, scenario):
    session, rec = written[scenario.name]
    results, _ = served[scenario.name]
    assert len(results) == len(rec.script)
    for i, ((name, _), result, expected) in enumerate(zip(rec.script, results, rec.results)):
        assert result.structured_content == _wire(expected), (i, name)
        assert len(result.content) == 1 and json.loads(result.content[0].text) == result.structured_content
        assert result.is_error is ("error" in expected), (i, name)
    end = results[-1].structured_content
    # Like for like: both are describe_scores of the same raw scores (names, 4 decimals).
    assert end["scores"] == _wire(calls.describe_scores(session.meta, session.scores))
    assert end["scores"]["composite"] == round(session.scores["composite"], calls.SCORE_DIGITS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_mcp_recorded_line_equals_the_tool_session_record(written, served, scenario, tmp_path):
    session, rec = written[scenario.name]
    _, out = served[scenario.name]
    (line,) = ev.load_sessions(str(out))
    mine = _wire(session.record())
    assert line["agent"] == AGENT and (line["seed"], line["tier"], line["mode"]) == (scenario.seed, scenario.tier, scenario.mode)
    # Raw scores (float32 noise, malfunction codes), return, calls with their results, hypotheses, reason.
    assert line["scores"] == mine["scores"]
    assert line["return"] == mine["return"]
    assert line["calls"] == mine["calls"]
    assert line["hypotheses"] == mine["hypotheses"] and line["end_reason"] == mine["end_reason"] == scenario.ending
    assert line["truncated"] is session.truncated is (scenario.ending == "call_limit")
    assert calls.describe_scores(session.meta, line["scores"]) == rec.results[-1]["scores"]
    # And the whole line equals the one the harness writes for leg a's session, but for the wall time (and its digest).
    path = ev.record_tool_session(session, str(tmp_path), agent=AGENT)
    (local,) = ev.load_sessions(path)
    strip = {"wall_s", "digest"}
    assert {k: v for k, v in line.items() if k not in strip} == {k: v for k, v in local.items() if k not in strip}
