"""``luca_gym.worlds.luca.fidelity`` with ``graph_stats`` and ``paper``: graph
statistics on hand-built graphs, the additive residual against a hand
computation, verdicts on synthetic numbers, the ``fidelity`` command's
parsing, and a small run that writes the report."""

from __future__ import annotations

import itertools
import json

import jax
import numpy as np
import pytest

from luca_gym.worlds.luca import core, fidelity, graph_stats, paper, sim, generator as world
from luca_gym.worlds.luca.baselines.batched import POLICIES
from luca_gym.cli import main
from luca_gym.worlds.luca.functional import organism_batch, rollout
from luca_gym.worlds.luca.spec import ACCURACY_THRESHOLD, N_TASKS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def weights_of(n: int, edges) -> np.ndarray:
    """Organism-style weights (``w[i, j] != 0``: the edge j -> i) of edges (u, v) = u -> v."""
    w = np.zeros((n, n), np.float32)
    for u, v in edges:
        w[v, u] = 0.7
    return w


def fas_by_permutations(adj: np.ndarray) -> int:
    """The minimum feedback arc set by trying every order of the genes."""
    u, v = np.nonzero(adj)
    best = len(u)
    for order in itertools.permutations(range(adj.shape[0])):
        position = np.empty(adj.shape[0], int)
        position[list(order)] = np.arange(adj.shape[0])
        best = min(best, int(np.sum(position[u] > position[v])))
    return best


# -- graph statistics ------------------------------------------------------------------------
def test_feed_forward_loops_are_triangles():
    ffl = [(0, 1), (1, 2), (0, 2)]
    assert graph_stats.feed_forward_loops(weights_of(3, ffl)) == 1
    # a second path 0 -> 3 -> 2 beside the shortcut 0 -> 2 makes a second loop
    assert graph_stats.feed_forward_loops(weights_of(4, ffl + [(0, 3), (3, 2)])) == 2
    # a directed 3-cycle and a chain are not feed-forward loops
    assert graph_stats.feed_forward_loops(weights_of(3, [(0, 1), (1, 2), (2, 0)])) == 0
    assert graph_stats.feed_forward_loops(weights_of(4, [(0, 1), (1, 2), (2, 3)])) == 0
    # the weights' orientation matters: transposing a loop keeps it a loop, a self-loop adds none
    w = weights_of(3, ffl)
    w[1, 1] = 1.0
    assert graph_stats.feed_forward_loops(w) == 1


@pytest.mark.parametrize(
    "n, edges, feedback, cyclic",
    [
        (3, [(0, 1), (1, 2), (0, 2)], 0, 0),  # a feed-forward loop, acyclic
        (3, [(0, 1), (1, 2), (2, 0)], 1, 3),  # one 3-cycle: one feedback edge, three edges on it
        (4, [(0, 1), (1, 0), (2, 3), (3, 2)], 2, 4),  # two 2-cycles
        (3, [(0, 1), (1, 2), (2, 0), (1, 0)], 1, 4),  # two cycles sharing 0 -> 1: one removal breaks both
        (5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (2, 0), (4, 2)], 2, 7),  # nested loops
        (2, [(0, 0), (0, 1)], 1, 1),  # a self-loop is a feedback edge
    ],
)
def test_feedback_edges_on_hand_built_graphs(n, edges, feedback, cyclic):
    assert graph_stats.feedback_edges(weights_of(n, edges)) == (feedback, True, cyclic)


def test_feedback_exact_agrees_with_every_order_and_bounds_the_greedy():
    rng = np.random.default_rng(0)
    for _ in range(12):
        adj = rng.random((6, 6)) < 0.35
        np.fill_diagonal(adj, False)
        exact = graph_stats._feedback_exact(adj)
        assert exact == fas_by_permutations(adj)
        assert graph_stats._feedback_greedy(adj) >= exact


def test_feedback_edges_fall_back_to_the_greedy_bound(monkeypatch):
    w = weights_of(4, [(0, 1), (1, 2), (2, 3), (3, 0)])
    monkeypatch.setattr(graph_stats, "EXACT_FAS_MAX_GENES", 3)
    assert graph_stats.feedback_edges(w) == (1, False, 4)


# -- the additive residual ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["healthy", "disease"])
def test_additive_residual_matches_a_hand_computation(mode):
    organism = world.make_organism(20, "medium", 20, mode)
    a = organism.arrays
    base = np.asarray(sim.steady_state(organism).phenotypes)
    expected = []
    for t in range(N_TASKS):
        genes, codes = np.asarray(a.task_genes[t]), np.asarray(a.task_codes[t])
        singles = []
        for g, c in zip(genes, codes):
            one = np.zeros(20, np.int8)
            one[g] = c
            singles.append(np.asarray(sim.steady_state(organism, one).phenotypes) - base)
        both = np.zeros(20, np.int8)
        both[genes] = codes
        joint = np.asarray(sim.steady_state(organism, both).phenotypes)
        np.testing.assert_allclose(joint, np.asarray(a.task_truth[t]), atol=1e-5)  # the truth is that solve
        expected.append(np.abs(joint - (base + singles[0] + singles[1])).max())
    got = graph_stats.additive_residuals(sim.stack([organism, organism]))
    assert got.shape == (2, N_TASKS)
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    np.testing.assert_allclose(got[1], got[0])


# -- verdicts ---------------------------------------------------------------------------------
def test_compare_half_width_band():
    rows = fidelity.compare({"a": 0.5, "b": 0.8, "c": 0.2, "d": None}, {"a": 0.45, "b": 0.6, "c": 0.4, "d": 0.1}, 0.10)
    by = {r["figure"]: r for r in rows}
    assert [r["figure"] for r in rows] == ["a", "b", "c", "d"]
    assert by["a"]["in_band"] is True and by["a"]["off_by"] == 0.0
    assert (by["a"]["low"], by["a"]["high"]) == pytest.approx((0.35, 0.55))
    assert by["b"]["in_band"] is False and by["b"]["off_by"] == pytest.approx(0.1)
    assert by["c"]["in_band"] is False and by["c"]["off_by"] == pytest.approx(-0.1)
    assert by["d"]["in_band"] is None and by["d"]["off_by"] is None  # not measured: not judged
    assert fidelity.verdict_text(by["b"]) == "OUT +0.100" and fidelity.verdict_text(by["c"]) == "OUT -0.100"
    assert fidelity.verdict_text(by["a"]) == "in" and fidelity.verdict_text(by["d"]) == "–"


def test_compare_band_edges():
    # on the edge (0.983 - 0.10 is 0.8829999... in floats) is in band, and so is
    # anything within the paper's rounding (half a unit of its third decimal)
    assert fidelity.compare({"x": 0.883}, {"x": 0.983}, 0.10)[0]["in_band"] is True
    assert fidelity.compare({"x": np.float32(1.083)}, {"x": 0.983}, 0.10)[0]["in_band"] is True
    assert fidelity.compare({"x": 0.8826}, {"x": 0.983}, 0.10)[0]["in_band"] is True
    assert fidelity.compare({"x": 2 / 3 - 0.1}, {"x": 0.667}, 0.10)[0]["in_band"] is True  # 0.5667 vs 0.567
    just_out = fidelity.compare({"x": 0.882}, {"x": 0.983}, 0.10)[0]
    assert just_out["in_band"] is False and just_out["off_by"] == pytest.approx(-0.001)
    assert fidelity.verdict_text(just_out) == "OUT -0.001"
    above = fidelity.compare({"x": 0.6616}, {"x": 0.561}, 0.10)[0]
    assert above["in_band"] is False and fidelity.verdict_text(above) == "OUT +6.0e-04"


def test_compare_absolute_one_sided_exact_and_unjudged_bands():
    band = {"range": (26, 42), "floor": (2, None), "exact": (20, 20), "none": (None, None)}
    rows = fidelity.compare({"range": 43.5, "floor": 100, "exact": 19, "none": 5}, {"range": 34, "floor": 3, "exact": 20, "none": 1}, band)
    by = {r["figure"]: r for r in rows}
    assert by["range"]["in_band"] is False and by["range"]["off_by"] == pytest.approx(1.5)
    assert by["floor"]["in_band"] is True
    assert fidelity.compare({"floor": 1}, {"floor": 3}, band)[0]["off_by"] == pytest.approx(-1)
    assert by["exact"]["in_band"] is False and by["exact"]["off_by"] == -1
    assert fidelity.compare({"exact": 20}, {"exact": 20}, band)[0]["in_band"] is True
    assert by["none"]["in_band"] is None
    # a figure the paper does not have is shown, not judged
    assert fidelity.compare({"x": 0.5}, {"x": None}, 0.1)[0]["in_band"] is None


def test_n_alt_band_is_two_poisson_standard_errors_plus_one_count():
    assert paper.n_alt_band(0.05, 20) == pytest.approx((0.0, 0.2))
    assert paper.n_alt_band(0.5, 20) == pytest.approx((0.5 - (2 * np.sqrt(0.025) + 0.05), 0.5 + 2 * np.sqrt(0.025) + 0.05))
    assert paper.n_alt_band(1.25, 20) == pytest.approx((0.7, 1.8))


def test_table3_rows_judge_synthetic_statistics():
    per_seed = {
        "targetable": [15, 15, 15, 15], "readout": [10, 10, 10, 11], "latent": [5, 5, 5, 5],
        "edges": [86, 100, 110, 121], "ffl": [140, 150, 130, 160], "feedback": [5, 6, 4, 7],
        "cyclic_edges": [70, 80, 75, 90], "additive_residual": [0.30, 0.35, 0.25, 0.40],
        "additive_residual_disease": [0.3, 0.3, 0.3, 0.3], "n_alt": [0, 1, 3, 2],
    }
    stats = {
        "tier": "hard", "n_genes": 20, "seeds": [0, 1, 2, 3], "per_seed": per_seed,
        "summary": {k: graph_stats.summary(v) for k, v in per_seed.items()},
        "additive_task_rate": 0.125, "additive_task_rate_disease": 0.0,
    }
    by = {r["figure"]: r for r in fidelity.table3_rows(stats)}
    assert all(r["table"] == "3" and r["condition"] == "hard N=20" for r in by.values())
    assert by["agent-targetable genes"]["in_band"] is True
    assert by["readout genes"]["in_band"] is False and by["readout genes"]["off_by"] == pytest.approx(0.25)
    assert by["GRN edges (mean within the range)"]["in_band"] is True  # mean 104.25 in 87-121
    frac = by["GRN edges (fraction of seeds in range)"]
    assert frac["ours"] == 0.75 and frac["in_band"] is False  # 86 is below 87
    assert by["additive task rate"]["in_band"] is False and by["additive task rate"]["off_by"] == 0.125
    residual = by["additive residual (mean)"]
    assert residual["ours"] == pytest.approx(0.325) and (residual["low"], residual["high"]) == pytest.approx((0.227, 0.391))
    assert residual["in_band"] is True and residual["ours_std"] == pytest.approx(np.std([0.30, 0.35, 0.25, 0.40]))
    assert by["n_alt (mean, disease)"]["in_band"] is True  # 1.5 within 1.25 +/- (2 sqrt(1.25/4) + 1/4)
    assert by["n_alt (max, disease)"]["in_band"] is None and by["n_alt (max, disease)"]["ours"] == 3
    assert by["feedback edges (min feedback arc set)"]["in_band"] is True  # mean 5.5 within 5 +/- 1
    assert by["feed-forward loops (triangles)"]["in_band"] is True


# -- baseline scores -----------------------------------------------------------------------------
def test_baseline_scores_are_the_rollouts_sessions():
    """The sub-scores come from the sessions functional.rollout runs: same composite."""
    seeds = [20, 21]
    params = core.make_params("medium", 20, "disease")
    organisms, keys = organism_batch(seeds, "medium", 20, "disease")
    _, composite, _ = rollout(POLICIES["heuristic"](params), jax.random.PRNGKey(0), organisms, keys, params, params.max_steps)
    result = fidelity.baseline_scores(seeds, "medium", "disease", 20, ("heuristic",), log=None)
    scores = result["agents"]["heuristic"]
    np.testing.assert_allclose(scores["composite"], np.asarray(composite), atol=1e-6)
    np.testing.assert_allclose(scores["composite"], np.mean([scores[s] for s in fidelity.SUBSCORES], axis=0), atol=1e-6)
    with pytest.raises(ValueError, match="agents: 'nobody' unknown"):
        fidelity.baseline_scores(seeds, "medium", "disease", 20, ("nobody",), log=None)


# -- the whole run and the command ---------------------------------------------------------------
def test_run_writes_the_report(tmp_path):
    lines = []
    report = fidelity.run([20, 21], tiers=("medium",), agents=("heuristic",), n_genes=(20,), log=lines.append)
    assert lines and any("generating" in line for line in lines)
    rows = report["rows"]
    assert {r["table"] for r in rows} == set(paper.TABLES)
    judged = [r for r in rows if r["in_band"] is not None]
    assert report["summary"] == {"judged": len(judged), "in_band": sum(r["in_band"] for r in judged)}
    for r in judged:
        assert (r["off_by"] == 0.0) == r["in_band"]
        tol = paper.TOLERANCE
        assert r["in_band"] == ((r["low"] is None or r["ours"] >= r["low"] - tol) and (r["high"] is None or r["ours"] <= r["high"] + tol))
    stats = report["statistics"]["medium"]
    assert stats["seeds"] == [20, 21] and len(stats["per_seed"]["edges"]) == 2
    residuals = np.asarray(stats["per_seed"]["task_residuals"])
    assert stats["additive_task_rate"] == np.mean(residuals <= ACCURACY_THRESHOLD)
    assert np.allclose(stats["per_seed"]["additive_residual"], residuals.max(axis=1))
    table8 = [r for r in rows if r["table"] == "8"]
    assert [r["figure"] for r in table8] == list(fidelity.SUBSCORES)
    assert all(r["paper"] == paper.PAPER_TABLE8["medium"]["heuristic"][r["figure"]] for r in table8)

    text = fidelity.write_report(report, str(tmp_path))
    md = (tmp_path / "fidelity.md").read_text()
    assert md == text and fidelity.summary_line(report) in md
    for table in paper.TABLES:
        assert fidelity.TABLE_TITLES[table] in md
    saved = json.loads((tmp_path / "fidelity.json").read_text())
    assert saved["summary"] == report["summary"] and len(saved["rows"]) == len(rows)
    for name, _ in fidelity.FIGURES.values():
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
        assert f"({name})" in md


def test_cli_fidelity_prints_verdicts_and_exits_0(tmp_path, capsys):
    out = tmp_path / "fid"
    assert main(["fidelity", "--seeds", "20-21", "--tiers", "medium", "--tables", "3", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "agent-targetable genes" in printed.out and "figures in band" in printed.out
    assert printed.err == ""
    assert (out / "fidelity.md").exists() and (out / "organisms.png").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "9-1"], "seeds: range '9-1' runs backwards"),
        (["--seeds", "x"], "seeds: 'x' is not a seed"),
        (["--scaling-seeds", "1-"], "seeds:"),
        (["--tiers", "easy,bogus"], "bogus"),
        (["--agents", "nobody"], "agents: 'nobody' unknown"),
        (["--tables", "3,5"], "tables: '5' unknown; allowed 3, 6, 7, 8, 11"),
        (["--n-genes", "20,x"], "n-genes"),
        (["--n-genes", "2"], "--n-genes: 2"),
        (["--seeds", "-3"], "seed"),
    ],
)
def test_cli_fidelity_rejects_bad_input(tmp_path, capsys, args, message):
    assert main(["fidelity", *args, "--out", str(tmp_path / "fid"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("luca-gym fidelity: error:") and message in err and err.count("\n") == 1
    assert not (tmp_path / "fid" / "fidelity.md").exists()


def test_cli_fidelity_help_describes_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fidelity", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for option in ("--seeds", "--tiers", "--agents", "--n-genes", "--scaling-seeds", "--tables", "--out", "--quiet"):
        assert option in text
    assert "Table 11" in text and "Exit code 0" in text
