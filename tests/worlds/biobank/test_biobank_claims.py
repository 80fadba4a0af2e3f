"""The biobank scorer's claims beyond nominations and rejections (scorer
version 5, world version 10): the world's ambiguous pairs (T4: a driver and a
non-driver on one cis instrument, which no observational tool separates and
one knockdown does; a delayed driver and its tracker, likewise), abstentions on them, outcome-alignment labels, and the
refusal of claims written for another scorer version. The rules are written
down in docs/worlds/biobank.md beside the paper's sentences (DrugTargetWorld
S2.2, S3.1); every score below is worked out by hand beside its assertion.
Every world here is of the ``tiny`` profile."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.design import PANEL, Design
from luca_gym.worlds.biobank.oracle import SCORER_VERSION, Claims, Nomination, check_claims, load_claims
from luca_gym.worlds.biobank.tools import BiobankToolSession
from luca_gym.worlds.biobank.world import make_world

TINY = {"profile": "tiny"}
T4_SEED = 2  # panel: HFpEF, two drivers, T2 T4 T5 T6 T7 T8 T9
PAIR_FREE_SEED = 0  # panel: DCM, two drivers, no T4
NULL_SEED = 8
DELAYED_SEED = 17  # panel: a delayed driver, no T4


@pytest.fixture(scope="module")
def t4_world():
    return make_world(T4_SEED, BiobankConfig(**TINY))


@pytest.fixture(scope="module")
def pair_free_world():
    return make_world(PAIR_FREE_SEED, BiobankConfig(**TINY))


def _parts(scores):
    return {k: round(scores[k], 4) for k in ("total", "target_identification", "causal_confidence", "direction",
                                             "outcome_alignment", "bias_identification", "surrogate_penalty")}


def test_the_panel_plants_t5_t6_t8_everywhere_and_knows_its_ambiguous_pairs():
    assert all({"site_batch", "exercise_remodelling", "harmful_surrogate"} <= set(d.biases) for d in PANEL)
    assert [i for i, d in enumerate(PANEL) if "shared_instrument" in d.biases] == [2, 5, 7, 9, 12, 15, 18]
    assert PANEL[NULL_SEED].n_drivers == 0


def test_no_observational_tool_separates_a_t4_pair_and_one_knockdown_does(t4_world):
    """The T4 pair: one cis instrument, Wald ratios equal within their standard errors (and the same z, the
    variant's own), the joint analysis at the locus naming neither alone; a knockdown of the causal member moves
    disease, one of the other member does not. The delayed driver and its tracker are a pair too (below)."""
    oracle = t4_world.oracle
    assert len(oracle.pairs) == 1
    causal, other = oracle.pairs[0]
    assert causal in oracle.drivers and other not in oracle.drivers and oracle.decoys[other] == "shared_instrument"
    session = BiobankToolSession(T4_SEED, budget="expanded", **TINY)
    mr = {r["protein"]: r for r in session.call("cis_mr", {"phenotype": oracle.baseline_name,
                                                          "proteins": [causal, other]})["results"]}
    a, b = mr[causal], mr[other]
    assert a["instrument"] == b["instrument"] and a["p"] < 1e-3 and b["p"] < 1e-3
    assert abs(a["wald_ratio"] - b["wald_ratio"]) < 2 * np.hypot(a["se"], b["se"])  # equal within their SEs
    assert a["wald_ratio"] / a["se"] == pytest.approx(b["wald_ratio"] / b["se"], rel=1e-4)  # the variant's own z
    joint = session.call("conditional_analysis", {"variant": a["instrument"], "phenotype": oracle.baseline_name,
                                                  "proteins": [causal, other]})
    if "error" not in joint:  # one locus, one signal: the joint fit cannot put it on the causal member alone
        rows = {r["protein"]: r for r in joint["proteins"]}
        assert not (rows[causal]["joint_p"] < 0.01 and rows[other]["joint_p"] > 0.05)
    kd_causal = session.call("experiment", {"protein": causal, "kind": "knockdown"})
    kd_other = session.call("experiment", {"protein": other, "kind": "knockdown"})
    assert abs(kd_causal["imaging_effect"] / kd_causal["imaging_se"]) > 4
    assert abs(kd_other["imaging_effect"] / kd_other["imaging_se"]) < 3


def test_a_delayed_driver_and_its_tracker_are_an_ambiguous_pair():
    """Panel world 17 (a delayed driver, no T4; world version 9): the tracker's gene lies at the delayed driver's
    locus, on the driver's cis instrument (0.9-1.1 times its strength), so cis-MR on the baseline phenotype and on
    the five-year outcome gives the two the same instrument, the same z and Wald ratios equal within their standard
    errors; a cell perturbation (baseline weights) misses both; a knockdown (late weights) of the driver moves
    disease and one of the tracker does not. The oracle lists the pair, and an abstention on it is half a
    resolution, not a false positive."""
    seed = DELAYED_SEED
    oracle = make_world(seed, BiobankConfig(**TINY)).oracle
    assert oracle.delayed and oracle.tracker and oracle.pairs == ((oracle.delayed[0], oracle.tracker),)
    assert oracle.truth()["ambiguous_pairs"] == [{"causal": oracle.delayed[0], "other": oracle.tracker}]
    causal, other = oracle.pairs[0]
    assert other not in oracle.drivers and other not in oracle.decoys
    session = BiobankToolSession(seed, budget="expanded", **TINY)
    for phenotype in (oracle.baseline_name, "outcomes.cv_event"):
        mr = {r["protein"]: r for r in session.call("cis_mr", {"phenotype": phenotype,
                                                              "proteins": [causal, other]})["results"]}
        a, b = mr[causal], mr[other]
        assert a["instrument"] == b["instrument"], phenotype
        assert abs(a["wald_ratio"] - b["wald_ratio"]) < 2 * np.hypot(a["se"], b["se"]), phenotype  # equal within SEs
        assert a["wald_ratio"] / a["se"] == pytest.approx(b["wald_ratio"] / b["se"], rel=1e-4)  # the variant's own z
    for p in (causal, other):
        cell = session.call("experiment", {"protein": p, "kind": "cell_perturbation"})
        assert abs(cell["imaging_effect"]) < 2 * cell["imaging_se"], cell  # the baseline weights: null for both
    kd_causal = session.call("experiment", {"protein": causal, "kind": "knockdown"})
    kd_other = session.call("experiment", {"protein": other, "kind": "knockdown"})
    assert abs(kd_causal["imaging_effect"] / kd_causal["imaging_se"]) > 4
    assert abs(kd_other["imaging_effect"] / kd_other["imaging_se"]) < 3
    # the pair's rules: an abstention on exactly the pair is half a resolution and one right claim in precision
    others = [Nomination(p, oracle.direction(p), 1.0, "aligned") for p in sorted(oracle.drivers) if p != causal]
    n = len(oracle.drivers)
    plain = oracle.score(Claims(tuple(others)))
    abstained = oracle.score(Claims(tuple(others), abstentions=(tuple(sorted((causal, other))),)))
    # recall (n - 1) / n against (n - 1 + 0.5) / n, precision 1 both times
    assert plain["target_identification"] == pytest.approx(35 * (n - 1) / n)
    assert abstained["target_identification"] == pytest.approx(35 * (n - 0.5) / n)
    assert abstained["abstentions_unsupported"] == 0 and abstained["pairs"][causal] == "abstained"
    # scorer version 5: only a knockdown separates a delayed pair; a cell perturbation's null resolves nothing
    alone = (*others, Nomination(causal, oracle.direction(causal), 1.0))
    for tested, answer in (((causal, "cell_perturbation", 0.4),), "resolved without experiments"), (
            ((other, "cell_perturbation", 0.2),), "resolved without experiments"), (
            ((causal, "knockdown", 6.0),), "resolved with experiments"), (((other, "knockdown", 0.5),), "resolved with experiments"):
        assert oracle.score(Claims(alone, tested=tested))["pairs"][causal] == answer, tested


def test_the_pair_logic_on_hand_built_claims(t4_world):
    """Two drivers: the pair's causal member c (other member o) and a second driver d, nominated in its right
    direction at confidence 1 and labelled with its right outcome alignment in every claim set below. An
    experiment is (protein, kind, z of its imaging effect), as the session's audit log gives it."""
    oracle = t4_world.oracle
    c, o = oracle.pairs[0]
    d = next(p for p in oracle.drivers if p != c)
    second = Nomination(d, oracle.direction(d), 1.0, oracle.alignment(d))

    def score(*nominations, abstentions=(), tested=()):
        return _parts(oracle.score(Claims((second, *nominations), abstentions=abstentions, tested=tuple(tested))))

    resolved = Nomination(c, oracle.direction(c), 1.0, oracle.alignment(c))
    # Resolved with the agent's own experiment, of a kind that separates a T4 pair (either kind) and whose result
    # supports the claim (c's effect significant, or o's not): recall 2/2, precision 2/2: identification 35;
    # confidence 1 - 0 = 20; direction 2/2 x 15; alignment 2/2 x 5; total 75.
    for tested in ([(c, "knockdown", -6.0)], [(o, "knockdown", 0.7)], [(c, "cell_perturbation", 2.5)]):
        assert score(resolved, tested=tested) == {
            "total": 75.0, "target_identification": 35.0, "causal_confidence": 20.0, "direction": 15.0,
            "outcome_alignment": 5.0, "bias_identification": 0.0, "surrogate_penalty": 0.0}, tested
    # The same claim without an experiment that supports it (none; one elsewhere; c's effect null; o's significant:
    # an experiment whose result the claim ignores): recall (1 + 0.5) / 2, precision 1: identification 35 x 0.75 =
    # 26.25; the rest as above: total 66.25.
    unsupported = {"total": 66.25, "target_identification": 26.25, "causal_confidence": 20.0, "direction": 15.0,
                   "outcome_alignment": 5.0, "bias_identification": 0.0, "surrogate_penalty": 0.0}
    for tested in ([], [(d, "knockdown", 6.0)], [(c, "cell_perturbation", 1.1)], [(o, "knockdown", 3.5)]):
        assert score(resolved, tested=tested) == unsupported, tested
    # Abstaining on exactly the pair: recall (1 + 0.5) / 2, precision (1 + 1) / 2: 26.25, half a resolution's pair
    # credit (0.5 of 1); confidence: the members at 0.5 each: Brier (0 + 0.25 + 0.25) / 2 = 0.25 -> 15; direction and
    # alignment over N u D = {d, c}: 1/2 x 15 = 7.5 and 1/2 x 5 = 2.5; total 51.25.
    abstain = ((c, o) if c < o else (o, c),)
    assert score(abstentions=abstain) == {
        "total": 51.25, "target_identification": 26.25, "causal_confidence": 15.0, "direction": 7.5,
        "outcome_alignment": 2.5, "bias_identification": 0.0, "surrogate_penalty": 0.0}
    assert oracle.score(Claims((second,), abstentions=abstain))["pairs"] == {c: "abstained"}
    # A resolution is worth twice an abstention in the pair's recall credit (1 against 0.5).
    # The wrong member alone: recall 1/2, precision 1/2: 8.75; confidence 1 - (1 + 1) / 2 = 0 (c missed, o at 1);
    # direction 1/3 x 15 = 5; alignment: o is no driver and not the surrogate, its label counts nothing: 1/3 x 5.
    wrong = Nomination(o, "down", 1.0, "aligned")
    assert score(wrong, tested=[(o, "knockdown", 0.1)]) == {
        "total": 15.4167, "target_identification": 8.75, "causal_confidence": 0.0, "direction": 5.0,
        "outcome_alignment": 1.6667, "bias_identification": 0.0, "surrogate_penalty": 0.0}
    # Both members (no resolution): recall 2/2, precision 2/3: 23.3333 (as scorer version 3 scored it).
    assert score(resolved, Nomination(o, "down", 0.0)) ["target_identification"] == 23.3333
    # An abstention on a pair observation can separate (d and a bystander) is a false claim: with c resolved,
    # recall (1 + 1) / 2 = 1 without d nominated? No: d is in the abstention, so not nominated; recall 1/2 (c, tested),
    # precision 1 / (1 + 1): 8.75.
    bystander = next(p for p in t4_world.release.proteins if p not in oracle.drivers and p not in oracle.decoys and p != o)
    separable = oracle.score(Claims((resolved,), abstentions=(tuple(sorted((d, bystander))),), tested=((c, "knockdown", 5.0),)))
    assert round(separable["target_identification"], 4) == 8.75 and separable["abstentions_unsupported"] == 1


def _flip(label):
    return "aligned" if label == "misaligned" else "misaligned"


def test_outcome_alignment_labels(t4_world):
    """Over N u D, a driver's right label, nominated its therapeutic way, earns 1, none 0, a wrong one -3 (times
    5 / |N u D|; -2 under scorer version 5); a label on a driver nominated the wrong way or "unknown" earns nothing (scorer version 5: the
    label says what moving it as nominated does); the harmful surrogate nominated its harmful way costs the
    30-point penalty however it is labelled, and its label counts nothing (version 4 waived the penalty for a
    "misaligned" label)."""
    oracle = t4_world.oracle
    c, _ = oracle.pairs[0]
    d = next(p for p in oracle.drivers if p != c)
    s, harm = oracle.surrogate, oracle.surrogate_harm
    assert s is not None and oracle.alignment(s) == "misaligned"
    right = {p: oracle.alignment(p) for p in (c, d)}
    supported = ((c, "knockdown", 6.0),)

    def alignment(label_c, label_d, direction_c=None):
        claims = Claims((Nomination(c, direction_c or oracle.direction(c), 1.0, label_c),
                         Nomination(d, oracle.direction(d), 1.0, label_d)), tested=supported)
        return oracle.score(claims)["outcome_alignment"]

    assert alignment(right[c], right[d]) == 5.0  # (1 + 1) / 2 x 5
    assert alignment(right[c], None) == 2.5  # (1 + 0) / 2 x 5: a missing label, no credit, no penalty
    assert alignment(right[c], _flip(right[d])) == -5.0  # (1 - 3) / 2 x 5: a wrong label costs more than a missing one
    assert alignment(_flip(right[c]), _flip(right[d])) == -15.0
    # a blanket label (both the same) loses whenever one of the two is wrong: (1 - 3) / 2 x 5
    for label in ("aligned", "misaligned"):
        if label in right.values() and len(set(right.values())) == 2:
            assert alignment(label, label) == -5.0
    wrong_way = "up" if oracle.direction(c) == "down" else "down"
    for label in ("aligned", "misaligned"):  # nominated the wrong way or "unknown": the label earns nothing
        assert alignment(label, right[d], wrong_way) == alignment(label, right[d], "unknown") == 2.5

    drivers = tuple(Nomination(p, oracle.direction(p), 1.0, right[p]) for p in (c, d))

    def with_surrogate(label):
        return _parts(oracle.score(Claims(drivers + (Nomination(s, harm, 0.5, label),), tested=supported)))

    # N u D = {c, d, s}: identification 35 x 1 x 2/3 = 23.3333; confidence 1 - 0.25 / 2 = 0.875 -> 17.5;
    # direction 2/3 x 15 = 10; alignment (1 + 1 + 0) / 3 x 5 = 3.3333; the penalty -30: total 24.1667, however labelled.
    base = {"target_identification": 23.3333, "causal_confidence": 17.5, "direction": 10.0, "bias_identification": 0.0}
    for label in ("misaligned", None, "aligned"):
        assert with_surrogate(label) == {**base, "outcome_alignment": 3.3333, "surrogate_penalty": -30.0, "total": 24.1667}


def test_half_the_drivers_are_misaligned():
    """World version 10: each driver but a delayed one is misaligned with probability MISALIGNED_SHARE (one half):
    its late weight has the other sign, so moving it its therapeutic way improves the baseline disease and harms
    the outcomes; a blanket label is then right about half the time, and a wrong label costs twice a right one."""
    labels = []
    for seed in range(9811, 9817):
        oracle = make_world(seed, BiobankConfig(**TINY), design=Design("DCM", 6, "standard", (), 1)).oracle
        labels += [oracle.alignment(p) for p in oracle.drivers if p not in oracle.delayed]
        assert all(oracle.alignment(p) == "aligned" for p in oracle.delayed)
        assert all((oracle.late_effects[p] * oracle.drivers[p] > 0) == (oracle.alignment(p) == "aligned") for p in oracle.drivers)
    assert len(labels) == 30 and 8 <= labels.count("misaligned") <= 22, labels


def test_the_null_world_and_pair_free_worlds_score_as_before(pair_free_world):
    """Without abstentions or labels a pair-free world scores as scorer version 3 did but for the split of its
    direction points (15 + 5 for alignment): right labels give back what version 3 gave direction."""
    oracle = pair_free_world.oracle
    assert oracle.pairs == ()
    right = tuple(Nomination(p, oracle.direction(p), 1.0, oracle.alignment(p)) for p in sorted(oracle.drivers))
    assert oracle.score(Claims(right, phenotype=oracle.severity))["total"] == 85.0  # version 3's perfect answer: 85
    unlabelled = tuple(dataclasses.replace(n, alignment=None) for n in right)
    assert _parts(oracle.score(Claims(unlabelled)))["outcome_alignment"] == 0.0
    null = make_world(NULL_SEED, BiobankConfig(**TINY)).oracle
    assert null.pairs == () and null.score(Claims())["total"] == 75.0  # 35 + 20 + 15 + 5, as version 3's 75
    bystander = next(p for p in pair_free_world.release.proteins if p not in null.decoys)
    other = next(p for p in pair_free_world.release.proteins if p not in null.decoys and p != bystander)
    assert null.score(Claims(abstentions=(tuple(sorted((bystander, other))),)))["target_identification"] == 0.0


def test_claims_are_checked_and_other_scorer_versions_refused(t4_world):
    proteins = t4_world.release.proteins
    a, b = proteins[0], proteins[1]
    with pytest.raises(ValueError, match="outcome_alignment"):
        check_claims([{"protein": a, "direction": "up", "confidence": 0.5, "outcome_alignment": "maybe"}], [], proteins)
    with pytest.raises(ValueError, match="is nominated already"):
        check_claims([{"protein": a, "direction": "up", "confidence": 0.5}], [], proteins, [{"proteins": [a, b], "reason": "x"}])
    with pytest.raises(ValueError, match="named twice; a pair"):
        check_claims([], [], proteins, [{"proteins": [a, a], "reason": "x"}])
    with pytest.raises(ValueError, match="not allowed; a pair"):
        check_claims([], [], proteins, [{"proteins": [a, b, proteins[2]], "reason": "x"}])
    with pytest.raises(ValueError, match="reason"):
        check_claims([], [], proteins, [{"proteins": [a, b]}])
    with pytest.raises(ValueError, match=r"rejections\[0\].outcome_alignment: a label goes on a nomination"):
        check_claims([], [{"protein": a, "mechanism": "confounding", "outcome_alignment": "aligned"}], proteins)
    with pytest.raises(ValueError, match=r"abstentions\[0\].outcome_alignment: a label goes on a nomination"):
        check_claims([], [], proteins, [{"proteins": [a, b], "reason": "x", "outcome_alignment": "misaligned"}])
    delivery = {"protein": a, "kind": "knockdown", "imaging_effect": 0.3, "imaging_se": 0.05}
    document = {"scorer_version": SCORER_VERSION, "nominations": [], "abstentions": [{"proteins": [b, a], "reason": "x"}],
                "tested": [delivery]}
    claims = load_claims(document, proteins)
    assert claims.abstentions == ((a, b),) and claims.tested == ((a, "knockdown", pytest.approx(6.0)),)
    with pytest.raises(ValueError, match="tested"):
        load_claims({**document, "tested": [a]}, proteins)  # version 4's list of proteins: an experiment's result is needed
    for older in ("4", "5"):
        with pytest.raises(ValueError, match=f"scorer version '{older}' are refused; this scorer is version 6"):
            load_claims({**document, "scorer_version": older}, proteins)
    with pytest.raises(ValueError, match="scorer version None"):
        load_claims({"nominations": []}, proteins)
    session = BiobankToolSession(T4_SEED, **TINY)
    answer = session.call("submit", {"nominations": [], "scorer_version": "4"})
    assert "scorer version '4'" in answer["error"] and not session.ended
    answer = session.call("submit", {"nominations": [], "rejections": [
        {"protein": a, "mechanism": "confounding", "outcome_alignment": "aligned"}]})
    assert "error" in answer and not session.ended and session.budget_left == 0  # refused by its schema, costing nothing


def test_bad_claims_through_the_tools_are_one_clear_error_each_costing_nothing(t4_world):
    """A label on a protein not nominated (on a rejection or an abstention), an abstention naming a protein twice or
    not two proteins, a claim of another scorer version: each submit is refused with one error that names the
    problem, the session goes on with its budget, and a good submission afterwards scores as in a fresh session."""
    proteins = t4_world.release.proteins
    a, b, c = proteins[:3]
    session = BiobankToolSession(T4_SEED, budget="limited", **TINY)
    budget = session.budget_left
    bad = {"outcome_alignment": {"nominations": [], "rejections": [{"protein": a, "mechanism": "confounding",
                                                                   "outcome_alignment": "aligned"}]},
           "named twice": {"nominations": [], "abstentions": [{"proteins": [a, a], "reason": "one locus"}]},
           "more than 2 items": {"nominations": [], "abstentions": [{"proteins": [a, b, c], "reason": "one locus"}]},
           "scorer version '5'": {"nominations": [], "scorer_version": "5"}}
    left = set()
    for expected, arguments in bad.items():
        answer = session.call("submit", arguments)
        assert expected in answer["error"] and "scores" not in answer, (expected, answer)
        assert not session.ended and session.budget_left == budget
        left.add(answer.get("submissions_left"))
    assert len(left) == 1  # no refused submission used one up
    good = {"nominations": [{"protein": a, "direction": "up", "confidence": 0.5}], "scorer_version": SCORER_VERSION}
    fresh = BiobankToolSession(T4_SEED, budget="limited", **TINY).call("submit", dict(good))
    assert session.call("submit", good)["scores"] == fresh["scores"] and session.ended


def test_a_submission_through_the_tools_counts_the_sessions_own_experiments(t4_world):
    oracle = t4_world.oracle
    c, o = oracle.pairs[0]
    nominations = [{"protein": p, "direction": oracle.direction(p), "confidence": 1.0, "outcome_alignment": "aligned"}
                   for p in sorted(oracle.drivers)]
    untested = BiobankToolSession(T4_SEED, **TINY).call("submit", {"nominations": nominations})
    session = BiobankToolSession(T4_SEED, budget="limited", **TINY)
    assert "error" not in session.call("experiment", {"protein": o, "kind": "knockdown"})
    tested = session.call("submit", {"nominations": nominations, "scorer_version": SCORER_VERSION})
    assert untested["scores"]["target_identification"] == 26.25 and untested["scores"]["pairs"] == {c: "resolved without experiments"}
    assert tested["scores"]["target_identification"] == 35.0 and tested["scores"]["pairs_resolved"] == 1
    abstained = BiobankToolSession(T4_SEED, **TINY).call("submit", {
        "nominations": [n for n in nominations if n["protein"] != c], "abstentions": [{"proteins": [o, c], "reason": "one locus"}]})
    assert abstained["scores"]["target_identification"] == 26.25 and abstained["scores"]["abstentions"] == 1


def test_one_uninformative_experiment_earns_no_resolution():
    """A delayed pair (panel world 17): one cell perturbation of the delayed driver (it reads the baseline weights,
    which cannot separate the pair), its null result ignored, and the driver nominated alone: resolved without
    experiments, half a hit, as with no experiment at all; one knockdown of it resolves the pair."""
    oracle = make_world(DELAYED_SEED, BiobankConfig(**TINY)).oracle
    causal, _ = oracle.pairs[0]
    nominations = [{"protein": p, "direction": oracle.direction(p), "confidence": 1.0} for p in sorted(oracle.drivers)]
    scores = {}
    for kind in (None, "cell_perturbation", "knockdown"):
        session = BiobankToolSession(DELAYED_SEED, budget="limited", **TINY)
        if kind:
            assert "error" not in session.call("experiment", {"protein": causal, "kind": kind})
        scores[kind] = session.call("submit", {"nominations": nominations})["scores"]
    assert scores[None]["pairs"][causal] == scores["cell_perturbation"]["pairs"][causal] == "resolved without experiments"
    assert scores[None]["total"] == scores["cell_perturbation"]["total"] < scores["knockdown"]["total"]
    assert scores["knockdown"]["pairs"][causal] == "resolved with experiments"
