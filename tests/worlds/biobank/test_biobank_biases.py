"""The biobank world's planted biases: each bias bites.
For each of T1-T9, on five ``tiny`` worlds that carry it, the analysis the
bias is designed to fool is fooled and the analysis that should see through
it does; each assertion holds on at least 4 of the 5 worlds (a planted
effect is a draw, not a certainty). Fooled: a two-sided p < 0.05 in the
misleading direction; seeing through: p >= 0.01 where the truth is nothing. Where only an
experiment sees through a bias (T4's pair, T8's harm), the test here shows
what the observational data show; tests/worlds/biobank/test_biobank_experiments.py shows the
knockdown seeing through it.

Ten worlds: five (archetypes in turn, two drivers) carrying every bias but
T3, and the same five seeds carrying T3 alone (imaging selection changes who
is imaged, which would blur the imaging analyses of the others). Beside
them: the panel's biases are in the oracles, never in a release or a tool's
answer, and the scorer's bias, confidence and surrogate rules."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from luca_gym.worlds.biobank import analysis
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank import design as design_module
from luca_gym.worlds.biobank.design import ARCHETYPES, MECHANISMS, PANEL, Design, design_of, planted
from luca_gym.worlds.biobank.generator import IMAGING, IMAGING_LOADINGS, STANDARD_MEASURE
from luca_gym.worlds.biobank.oracle import Claims, Nomination
from luca_gym.worlds.biobank.release import TRUTH_WORDS
from luca_gym.worlds.biobank.tools import BiobankToolSession
from luca_gym.worlds.biobank.world import make_world

CONFIG = BiobankConfig(profile="tiny")
SEEDS = (1000, 1001, 1002, 1003, 1004)
MOST = tuple(m for m in MECHANISMS if m != "selection")
ALPHA = 0.05


def _study(seed: int, biases) -> dict:
    """A world of ``biases`` (two drivers, the archetypes in turn) and the analyses the tests read: the
    archetype's standard MRI measure oriented so that higher is worse disease (``y``), log NT-proBNP and
    the five-year event over everyone, and each protein's association and cis-MR z against them."""
    archetype = ARCHETYPES[seed % len(ARCHETYPES)]
    world = make_world(seed, CONFIG, design=Design(archetype, 2, "standard", tuple(biases)))
    release = world.release
    measure = STANDARD_MEASURE[archetype]
    y = release.numeric("imaging", measure) * np.sign(IMAGING_LOADINGS[ARCHETYPES.index(archetype), IMAGING.index(measure)])
    bnp = release.numeric("physiology", "ntprobnp_pg_ml")
    log_bnp = np.log(np.where(bnp > 0, bnp, np.nan))
    event = release.numeric("outcomes", "cv_event")
    every = np.arange(len(release.proteins))

    def z(beta, se, *_):
        return beta / se

    mr = analysis.cis_mr(release, y, every, True)
    return {
        "world": world, "index": {p: i for i, p in enumerate(release.proteins)}, "y": y,
        "decoy": {m: p for p, m in world.oracle.decoys.items()},
        "unadjusted": z(*analysis.association_scan(release, y, False)), "adjusted": z(*analysis.association_scan(release, y, True)),
        "bnp_unadjusted": z(*analysis.association_scan(release, log_bnp, False)),
        "bnp": z(*analysis.association_scan(release, log_bnp, True)), "event": z(*analysis.association_scan(release, event, True)),
        "beta": analysis.association_scan(release, y, True)[0], "mr": mr, "mr_z": mr["ratio"] / mr["se"],
    }


@pytest.fixture(scope="module")
def most():
    return [_study(seed, MOST) for seed in SEEDS]


@pytest.fixture(scope="module")
def selected():
    return [_study(seed, ("selection",)) for seed in SEEDS]


def significant(z) -> bool:
    """Two-sided p < 0.05: what fools an analysis."""
    return bool(abs(z) > 1.959964)


def nothing(z) -> bool:
    """Two-sided p >= 0.01: an analysis that sees through a bias finds nothing (a null at 0.05 would fail one
    world in twenty by chance alone, and two of five too often over the tests' many null checks)."""
    return bool(abs(z) < 2.575829)


def _at_least_four(studies, mechanism, check, least: int = 4):
    """``check(study, decoy index)`` holds on at least ``least`` (4) of the 5 worlds."""
    held = [bool(check(s, s["index"][s["decoy"][mechanism]])) for s in studies]
    assert sum(held) >= least, f"{mechanism}: held on {held}"


def test_every_study_world_carries_its_biases(most, selected):
    for s in most:
        assert set(s["decoy"]) == set(MOST) and not set(s["decoy"].values()) & set(s["world"].oracle.drivers)
    assert all(set(s["decoy"]) == {"selection"} for s in selected)


def test_t1_confounding_by_bmi(most):
    """Associated with disease (in the direction of its BMI dependence, either sign: BMI raises disease) unless
    adjusted for BMI; adjusted, and by cis-MR, nothing."""
    def with_bmi(s, i):
        r_bmi = analysis.protein_qc(s["world"].release)["r_bmi"][i]
        return significant(s["unadjusted"][i]) and np.sign(s["unadjusted"][i]) == np.sign(r_bmi)

    _at_least_four(most, "confounding", with_bmi)
    _at_least_four(most, "confounding", lambda s, i: nothing(s["adjusted"][i]))
    _at_least_four(most, "confounding", lambda s, i: nothing(s["mr_z"][i]))


def test_t2_reverse_causation(most):
    """The reactive protein rises with disease in every association (imaging and NT-proBNP significantly, the
    five-year event in sign: events are few at this size); its cis-MR is null."""
    _at_least_four(most, "reverse_causation", lambda s, i: s["adjusted"][i] > 1.96 and s["bnp"][i] > 1.96 and s["event"][i] > 0)
    _at_least_four(most, "reverse_causation", lambda s, i: nothing(s["mr_z"][i]))


def test_t3_imaging_selection_is_a_collider(selected):
    """Imaged only at the top of a score the decoy raises: among the imaged, the decoy looks protective (a
    collider); over the whole cohort, with an endpoint measured in everyone, nothing. The collider is the weakest
    planted effect in ``tiny`` worlds, which image half the cohort (the small and paper profiles image a fifth):
    the score also holds volunteering traits that many proteins share, so that the decoy's shift among the imaged
    is not a tell (tests/worlds/biobank/test_biobank_floors.py), and the decoy looks protective on 3 of the 5."""
    for s in selected:
        imaged = s["world"].release.rows["imaging"]
        assert len(imaged) == CONFIG.sizes.imaged
    _at_least_four(selected, "selection", lambda s, i: s["adjusted"][i] < -1.96, least=3)
    _at_least_four(selected, "selection", lambda s, i: nothing(s["bnp"][i]))


def test_t4_a_shared_instrument_cannot_be_separated(most):
    """The decoy shares the first driver's variant: its cis-MR is as significant as a driver's, its observational
    association too, and the conditional analysis at the locus cannot tell it from the driver (neither keeps
    p < 0.05). Seeing through it takes an experiment (tests/worlds/biobank/test_biobank_experiments.py)."""
    _at_least_four(most, "shared_instrument", lambda s, i: significant(s["mr_z"][i]) and significant(s["adjusted"][i]))

    def inseparable(s, i):
        release, oracle = s["world"].release, s["world"].oracle
        variant = s["mr"]["variant"][i]
        _, cis = analysis.locus(release, variant)
        driver = next(s["index"][d] for d in oracle.drivers if s["index"][d] in cis)
        joint = analysis.conditional(release, s["y"], variant, np.array([driver, i]), True)
        return (joint["p"] > ALPHA).all()

    _at_least_four(most, "shared_instrument", inseparable)


def test_t5_an_imaging_site_batch_effect(most):
    """The decoy predicts imaging disease unless adjusted for site (either way: the shift's sign and its site are
    drawn per world since world version 10); no non-imaging endpoint agrees."""
    _at_least_four(most, "site_batch", lambda s, i: significant(s["unadjusted"][i]))
    _at_least_four(most, "site_batch", lambda s, i: nothing(s["adjusted"][i]))
    # (at least 3 of 5 for the endpoints: made as every protein, a decoy may carry an ordinary protein's own link to
    # the later disease, through exercise say: world 1000's correlates 0.19 with the five-year severity under world
    # version 10's draws, and its five-year event z is 2.6)
    _at_least_four(most, "site_batch", lambda s, i: nothing(s["bnp"][i]) and nothing(s["event"][i]), least=3)


def test_t6_benign_exercise_remodelling(most):
    """The decoy moves with exercise (up or down: its sign is drawn per world since world version 10), which
    remodels the heart like disease: associated with imaging disease (even adjusted), while NT-proBNP says not (no
    significant association the same way) and cis-MR is null."""
    _at_least_four(most, "exercise_remodelling", lambda s, i: significant(s["adjusted"][i]))
    _at_least_four(most, "exercise_remodelling",
                   lambda s, i: s["bnp"][i] * np.sign(s["adjusted"][i]) < 1.96 and nothing(s["mr_z"][i]))


def test_t7_a_pleiotropic_instrument(most):
    """The decoy's variant acts on disease directly: its cis-MR is significant; its observational association is
    under half what the Wald ratio implies, while the drivers' agree with theirs (the check one instrument allows)."""
    _at_least_four(most, "pleiotropy", lambda s, i: significant(s["mr_z"][i]))
    _at_least_four(most, "pleiotropy", lambda s, i: s["beta"][i] / s["mr"]["ratio"][i] < 0.5)
    drivers = [s["beta"][s["index"][d]] / s["mr"]["ratio"][s["index"][d]] for s in most for d in s["world"].oracle.drivers]
    assert np.mean(np.array(drivers) > 0.5) >= 0.8, drivers


def test_t8_a_harmful_surrogate(most):
    """Imaging analyses, cis-MR included, recommend moving the surrogate the harmful way (it improves the measured
    marker); its association with the five-year event shows the harm. Its knockdown's five-year effect: tests/worlds/biobank/test_biobank_experiments.py."""
    def recommended(z):  # what an imaging analysis recommends: lower what raises disease, raise what lowers it
        return "down" if z > 0 else "up"

    _at_least_four(most, "harmful_surrogate", lambda s, i: significant(s["mr_z"][i])
                   and recommended(s["mr_z"][i]) == s["world"].oracle.surrogate_harm)
    _at_least_four(most, "harmful_surrogate", lambda s, i: significant(s["event"][i])
                   and (s["event"][i] > 0) == (s["world"].oracle.surrogate_harm == "up"))
    for s in most:
        assert s["world"].oracle.surrogate == s["decoy"]["harmful_surrogate"]


def test_t9_assay_unit_mixture(most):
    """One site reports the decoy in other units and recruits sicker participants: unadjusted, the decoy predicts
    disease over the whole cohort; within sites, nothing; its values are a mixture (one site's far from the rest)."""
    _at_least_four(most, "assay_units", lambda s, i: s["bnp_unadjusted"][i] > 1.96)
    _at_least_four(most, "assay_units", lambda s, i: nothing(s["bnp"][i]))

    def mixture(s, i):
        release = s["world"].release
        values, site = release.matrix("proteins")[:, i], np.asarray(release.tables["participants"]["site"])
        medians = sorted(np.nanmedian(values[site == k]) for k in (1, 2, 3, 4))
        return medians[-1] - medians[-2] > 3 * np.nanstd(values[site == 1])

    _at_least_four(most, "assay_units", mixture)


def test_the_panel_carries_every_bias_and_records_it_in_the_oracle_only():
    table = [line.split() for line in design_module.__doc__.splitlines() if line[:1].isdigit()]
    assert [(int(r[0]), r[1], int(r[2]), r[3], planted(" ".join(c for c in r[4:] if c.startswith("T")))) for r in table] == [
        (s, d.archetype, d.n_drivers, d.tier, d.biases) for s, d in enumerate(PANEL)]  # the docstring's table is the panel
    counts = {m: sum(m in d.biases for d in PANEL) for m in MECHANISMS}
    assert min(counts.values()) >= 5, counts
    assert all(d.n_drivers > 0 for d in PANEL if "shared_instrument" in d.biases)
    drawn = [design_of(s, s) for s in range(20, 120)]
    assert all(set(d.biases) <= set(MECHANISMS) for d in drawn) and len({d.biases for d in drawn}) > 20
    world = make_world(2, CONFIG)  # panel: HFpEF, two drivers, T2 T4 T7 T9
    assert sorted(world.oracle.decoys.values()) == sorted(PANEL[2].biases) and world.oracle.surrogate is not None  # T8 in every panel world (world version 7)
    session = BiobankToolSession(2, profile="tiny")
    answers = [session.call("describe_release", {}), session.call("association_scan", {"phenotype": "imaging.native_t1_ms", "top": 96}),
               session.call("cis_mr", {"phenotype": "imaging.native_t1_ms", "top": 96})]
    text = json.dumps(answers).lower()
    assert not [w for w in (*TRUTH_WORDS, *MECHANISMS, "decoy", "bias", "surrogate") if w in text]
    with pytest.raises(ValueError, match="design"):
        make_world(0, CONFIG, design=Design("DCM", 0, "standard", ("shared_instrument",)))


def test_the_scorer_rewards_rejections_matched_confidence_and_punishes_the_harmful_direction(most):
    oracle = most[0]["world"].oracle
    drivers, decoys = sorted(oracle.drivers), dict(oracle.decoys)
    right = tuple((p, m) for p, m in decoys.items())
    exact = tuple(Nomination(d, oracle.direction(d), 1.0) for d in drivers)
    assert oracle.score(Claims(exact, right))["bias_identification"] == 15.0
    half = right[: len(right) // 2]
    assert oracle.score(Claims(exact, half))["bias_identification"] == pytest.approx(15.0 * len(half) / len(right))
    wrong_mechanism = tuple((p, MECHANISMS[(MECHANISMS.index(m) + 1) % 9]) for p, m in right)
    assert oracle.score(Claims(exact, wrong_mechanism))["bias_identification"] == 0.0
    others = [p for p in most[0]["world"].release.proteins if p not in decoys and p not in oracle.drivers]
    padded = right + tuple((p, "confounding") for p in others)  # rejecting everything earns little
    earned = sum("confounding" in oracle.earned().get(p, ()) for p in others)  # the release shows them confounded
    assert earned < len(others) // 4
    scores = oracle.score(Claims(exact, padded))
    assert scores["rejections_earned"] == earned and scores["rejections_wrong"] == len(others) - earned
    # scorer version 6: a wrong rejection cancels a right one in precision, so more wrong than right earns nothing
    assert len(others) - earned > len(right) + earned and scores["bias_identification"] == 0.0
    unearned = next(p for p in others if "confounding" not in oracle.earned().get(p, ()))
    one_wrong = oracle.score(Claims(exact, right + ((unearned, "confounding"),)))
    assert one_wrong["rejections_wrong"] == 1
    assert one_wrong["bias_identification"] == pytest.approx(15.0 * (len(right) - 1) / (len(right) + 1), abs=1e-5)
    assert scores["bias_by_mechanism"] == {m: 1.0 for m in sorted(decoys.values())}

    # causal confidence: the drivers at 0.5 earn 15 of 20; each non-driver at 0.5 beside them costs; padding at 0 is free of gain
    at_half = tuple(dataclasses.replace(n, confidence=0.5) for n in exact)
    assert oracle.score(Claims(at_half))["causal_confidence"] == 15.0
    pad = tuple(Nomination(p, "up", 0.5) for p in others[:4])
    assert oracle.score(Claims(at_half + pad))["causal_confidence"] == 15.0 - 4 * 5.0 / len(drivers)  # 5 / |D| points each
    assert oracle.score(Claims(at_half + tuple(Nomination(p, "up", 0.5) for p in others[:6])))["causal_confidence"] == 0.0
    assert oracle.score(Claims(at_half + tuple(dataclasses.replace(n, confidence=0.0) for n in pad)))["causal_confidence"] == 15.0

    surrogate, harm = oracle.surrogate, oracle.surrogate_harm
    safe = "down" if harm == "up" else "up"
    for label in (None, "aligned", "misaligned"):  # no label waives the penalty (scorer version 5)
        assert oracle.score(Claims(exact + (Nomination(surrogate, harm, 0.5, label),)))["surrogate_penalty"] == -30.0
    assert oracle.score(Claims(exact + (Nomination(surrogate, safe, 0.5),)))["surrogate_penalty"] == 0.0
    assert oracle.score(Claims(exact + (Nomination(surrogate, "unknown", 0.5),)))["surrogate_penalty"] == 0.0
    assert oracle.truth()["surrogate_harm"] == harm
