"""The biobank world's floor: no generator fingerprint singles out a decoy,
and the shortcut baselines (``nominate-nothing``, ``nominate-all``,
``top-association``, ``cue-spotter``) and the blanket rules that read no
causal evidence (``artefact-sweep``, ``blanket-labels``,
``association-pick``; world version 11, scorer version 6) stay below the
scripted agents that reason (``cis-mr``, ``causal-pipeline``) on seeds no
tuning used.

The baselines were calibrated on seeds 8001-8020 (small profile), world
version 10's rules and the pipeline's changes for it on the small
profile's 9801-9808 and pairs of 9811-9816, version 11's (the wrong
rejection's cost, the wrong label's, the pairs matched as the adjusted scan
sees them) on the small profile's 9701-9720 and pairs of 9841-9860; the
quick tier checks ``tiny`` worlds 9401-9410, the slow tier the small
profile's 9901-9920, with the bounds BENCHMARKS.md reports."""

from __future__ import annotations

import numpy as np
import pytest

from luca_gym import harness
from luca_gym.worlds.biobank import analysis, audit
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.design import ARCHETYPES, MECHANISMS, Design
from luca_gym.worlds.biobank.world import make_world

TINY = BiobankConfig(profile="tiny")
FLOOR = ("nominate-nothing", "nominate-all", "top-association", "cue-spotter", "artefact-sweep", "blanket-labels",
         "association-pick", "cis-mr", "causal-pipeline")
# (mechanism, protein_qc field, the more extreme way): the cue each planted bias could leave on its decoy
CUES = (("confounding", "r_bmi", "abs"), ("exercise_remodelling", "r_exercise", "abs"), ("site_batch", "site_shift", "abs"),
        ("assay_units", "bimodality", "abs"), ("selection", "imaged_shift", "abs"), *(
            (m, "connectivity", "low") for m in ("confounding", "reverse_causation", "shared_instrument", "site_batch",
                                                 "pleiotropy", "harmful_surrogate", "assay_units")))


@pytest.fixture(scope="module")
def planted_worlds():
    """Twelve tiny worlds carrying every bias (two drivers, the archetypes in turn)."""
    return [make_world(seed, TINY, design=Design(ARCHETYPES[seed % 4], 2, "standard", MECHANISMS)) for seed in range(9501, 9513)]


def _rank(values, i, way):
    """How many proteins are more extreme than protein i (0: i is the most extreme)."""
    values = np.asarray(values, np.float64)
    if way == "low":
        return int((values < values[i]).sum())
    return int((np.abs(values) > abs(values[i])).sum())


def test_no_protein_trait_singles_out_a_decoy(planted_worlds):
    """On every cue family a generator could leave (connectedness, BMI, exercise, site, bimodality, a shift among the
    imaged), a decoy is not the most extreme protein as a rule: not in every world on any one cue (before this
    generator several decoys topped their cue in every world), and in at most a quarter of the (world, cue) pairs
    over all cues; ordinary proteins carry each artefact too (so "the only protein with X" is never a tell). An
    artefact's ordinary carriers are drawn as its decoy's is, so the decoy tops its few carriers by chance: T9's
    decoy tops the bimodality of its ~3.6 carriers in 3 of 20 tiny worlds 7001-7020 and in 8 of these 12."""
    tops = {}
    for world in planted_worlds:
        qc = analysis.protein_qc(world.release)
        index = {p: i for i, p in enumerate(world.release.proteins)}
        decoy = {m: index[p] for p, m in world.oracle.decoys.items()}
        for mechanism, field, way in CUES:
            tops.setdefault((mechanism, field), []).append(_rank(qc[field], decoy[mechanism], way) == 0)
    assert {k: sum(v) for k, v in tops.items() if sum(v) == len(v)} == {}
    assert np.mean([t for v in tops.values() for t in v]) <= 0.25, {k: sum(v) for k, v in tops.items()}
    carriers = {m: np.mean([sum(m in a for p, a in w.oracle.artefacts.items() if p not in w.oracle.decoys) for w in planted_worlds])
                for m in ("confounding", "exercise_remodelling", "site_batch", "assay_units")}
    assert all(c >= 2 for c in carriers.values()), carriers


def test_a_shared_instrument_pair_has_no_fixed_stronger_member(planted_worlds):
    """Which member of T4's pair has the stronger instrument is drawn, not fixed."""
    stronger = []
    for world in planted_worlds:
        inst = analysis.instruments(world.release)
        index = {p: i for i, p in enumerate(world.release.proteins)}
        decoy = next(index[p] for p, m in world.oracle.decoys.items() if m == "shared_instrument")
        driver = next(index[p] for p in world.oracle.drivers if inst["variant"][index[p]] == inst["variant"][decoy])
        stronger.append(bool(inst["f"][decoy] > inst["f"][driver]))
    assert 0 < sum(stronger) < len(stronger), stronger


def _sweep(tmp_path, seeds, **settings):
    """Every floor agent's sessions on ``seeds``, a world at a time (its sessions share its generation: make_world
    keeps the last few worlds), and cis-mr's total with every nomination labelled "misaligned" (its claims rescored
    while the world is at hand), by seed."""
    out = str(tmp_path / "results")
    config = BiobankConfig(profile=settings.get("profile", "small"))
    misaligned = {}
    for seed in seeds:
        harness.sweep(harness.plan_world("biobank", list(FLOOR), [seed], **settings), out,
                      lambda name: harness.make_runner(name, world="biobank"))
        cis = next(s for s in harness.load_sessions(out) if s["agent"] == "cis-mr" and s["seed"] == seed)
        misaligned[seed] = audit.relabelled_total(cis, make_world(seed, config).oracle, "misaligned")
    sessions = harness.load_sessions(out)
    return {a: [s for s in sessions if s["agent"] == a] for a in FLOOR}, misaligned


def _mean(sessions, score):
    return float(np.mean([s["scores"][score] for s in sessions]))


def _check_floor(swept, pipeline_margin, pipeline_floor=0.0, sweep_bias=1.5):
    # the blanket rules, outside null worlds (where nominating nothing is the perfect answer): the sweep of artefact
    # carriers earns at most `sweep_bias` of 15 bias points and less than cis-mr in total; blanket labels, "aligned"
    # (the blanket-labels agent) or "misaligned" (cis-mr's claims rescored), and the stronger-association pick of a
    # pair raise nothing over cis-mr's claims
    by_agent, misaligned = swept
    live = {a: [s for s in ss if s["design"]["kind"] != "null"] for a, ss in by_agent.items()}
    sweep = live["artefact-sweep"]
    assert np.mean([len(s["calls"][-1]["arguments"]["rejections"]) for s in sweep]) >= 10  # it does sweep
    assert _mean(sweep, "bias_identification") <= sweep_bias
    assert _mean(sweep, "total") < _mean(live["cis-mr"], "total")
    assert _mean(live["blanket-labels"], "total") <= _mean(live["cis-mr"], "total")
    assert np.mean([misaligned[s["seed"]] for s in live["cis-mr"]]) <= _mean(live["cis-mr"], "total")
    # the pick keeps one member of each instrument-sharing group where cis-mr nominates them all: on a planted pair a
    # coin flip (test_the_stronger_association_of_a_pair_...), but an ordinary protein at a driver's locus has a
    # significant cis-MR and a null observational association, and dropping it is a real inference (cis-mr's false
    # positive): so the pick may rise above cis-mr (1.23 points on 9701-9720, 6.14 on 9901-9920), and stays a floor
    # against the reasoning agent
    assert _mean(live["association-pick"], "total") <= _mean(live["causal-pipeline"], "total") - pipeline_margin
    cue = by_agent["cue-spotter"]
    assert np.mean([len(s["calls"][-1]["arguments"]["rejections"]) for s in cue]) >= 3  # it does reject its outliers
    assert _mean(cue, "bias_identification") <= 3.0
    # outside null worlds, where nominating nothing earns the null world's 75 by design (9701-9720 hold two: over all
    # 20, nominate-nothing 8.06 against cis-mr 6.91; with drivers 0.36 against 7.41). The single strongest association
    # is a floor against the reasoning agent, not against cis-mr: one nomination at 0.8 is often a driver, and cis-mr
    # pays for its false positives (6.08 against cis-mr's 7.41 on 9701-9720, 15.92 against 14.83 on 9901-9920)
    assert _mean(live["top-association"], "total") <= _mean(live["causal-pipeline"], "total") - pipeline_margin
    for trivial in ("nominate-nothing", "nominate-all"):
        assert _mean(live[trivial], "total") < _mean(live["cis-mr"], "total")
    pipeline = _mean(by_agent["causal-pipeline"], "total")
    assert pipeline >= _mean(by_agent["cis-mr"], "total") + pipeline_margin and pipeline >= pipeline_floor
    # its bias points come from the checks: found decoys across mechanisms, not one cue
    found = {m for s in by_agent["causal-pipeline"] for m, ok in s["scores"]["bias_by_mechanism"].items() if ok}
    assert len(found) >= 4, found


def test_the_shortcuts_stay_on_the_floor_on_unseen_tiny_worlds(tmp_path):
    """The tiny profile's worlds, with the small profile's bound on the sweep (1.5 of 15 bias points)."""
    _check_floor(_sweep(tmp_path, range(9401, 9411), profile="tiny"), pipeline_margin=10.0)


@pytest.mark.slow
def test_the_shortcuts_stay_on_the_floor_on_unseen_small_worlds(tmp_path):
    """The issue's aims on the small profile, budget none, seeds 9901-9920 (no null world among them; BENCHMARKS.md
    gives the figures): artefact-sweep at most 1.5 of 15 bias points (0.00) and below cis-mr, blanket labels of
    either kind no better than cis-mr, cue-spotter at most 3 bias points, causal-pipeline at least 45 (45.19) and
    20 above cis-mr (14.83), the other shortcuts 20 below it. A world's nine sessions run one after another, so it
    is generated once, not once a session."""
    _check_floor(_sweep(tmp_path, range(9901, 9921)), pipeline_margin=20.0, pipeline_floor=45.0, sweep_bias=1.5)


@pytest.mark.slow
def test_the_stronger_association_of_a_pair_is_a_coin_flip():
    """World version 10: an ambiguous pair's non-causal member matches the causal one's association with the disease
    in distribution (since version 11 as the adjusted scan sees it), so the member with the stronger
    covariate-adjusted association with log NT-proBNP is the causal one in about half the pairs (under version 9,
    in 11 of 12), and so is the weaker: each in 35-65% of 40 pairs, tiny worlds 9421-9440 designed to carry two
    each (a T4 pair and a delayed pair; 53 of 100 on the small profile's 9921-9970, BENCHMARKS.md)."""
    right = audit.association_pick(range(9421, 9441), TINY)
    assert len(right) == 40 and 0.35 <= np.mean(right) <= 0.65, right
