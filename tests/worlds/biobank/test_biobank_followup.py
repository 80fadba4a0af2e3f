"""The biobank's ECG, CT and dated records, and the survival and visit-change
tools (world version 8). Every world here is of the ``tiny`` profile."""

from __future__ import annotations

import json

import numpy as np
import pytest

from luca_gym.worlds.biobank.analysis import cox, paired_change
from luca_gym.worlds.biobank.config import PROFILES, BiobankConfig
from luca_gym.worlds.biobank.design import ARCHETYPES, Design
from luca_gym.worlds.biobank.generator import CT, CT_LOADINGS, ECG, ECG_LOADINGS, cohort
from luca_gym.worlds.biobank.release import CARDIOMYOPATHY_CODES, TRUTH_WORDS, build_release, check_no_truth
from luca_gym.worlds.biobank.tools import ANALYSIS_TOOLS, OUTCOMES, BiobankToolSession
from luca_gym.worlds.biobank.world import make_world

CONFIG = BiobankConfig(profile="tiny")
SIZES = PROFILES["tiny"]


@pytest.fixture(scope="module")
def archetype_cohorts():
    """One plain world of each archetype (two drivers, no bias): (design, cohort, release)."""
    out = []
    for i, archetype in enumerate(ARCHETYPES):
        design = Design(archetype, 2, "standard", (), 0)
        c = cohort(7100 + i, design, SIZES)
        out.append((design, c, build_release(c, design, 7100 + i, SIZES)))
    return out


@pytest.fixture(scope="module")
def world():
    return make_world(9401, CONFIG)


def test_the_tables_shapes_and_dictionary(world):
    r = world.release
    check_no_truth(r)
    n, ni = SIZES.participants, SIZES.imaged
    assert list(r.tables["ecg"]) == ["participant_id", *ECG] and len(r.tables["ecg"]["qrs_ms"]) == n
    assert list(r.tables["ct"]) == ["participant_id", *CT]
    assert np.array_equal(r.tables["ct"]["participant_id"], r.tables["imaging"]["participant_id"]) and len(r.tables["ct"]["lv_mass_g"]) == ni
    assert np.array_equal(r.rows["ct"], r.rows["imaging"]) and np.array_equal(r.rows["ecg"], np.arange(n))
    for name in ECG:
        values = r.tables["ecg"][name]
        assert values.dtype == np.float32 and 0.01 < np.isnan(values).mean() < 0.06  # an ECG not recorded: the whole row
    assert np.array_equal(np.isnan(r.tables["ecg"]["qrs_ms"]), np.isnan(r.tables["ecg"]["pr_ms"]))
    calcium = r.tables["ct"]["coronary_calcium_agatston"]
    assert np.nanmin(calcium) == 0 and 0.2 < np.nanmean(calcium == 0) < 0.8  # none detected in many
    d, f = r.tables["diagnoses"], r.tables["follow_up_diagnoses"]
    assert list(d) == ["participant_id", "icd10", "years_from_baseline"] and len(d["years_from_baseline"]) == len(d["icd10"])
    assert (d["years_from_baseline"] <= 0).all() and d["years_from_baseline"].min() >= -15
    assert list(f) == ["participant_id", "icd10", "years_from_baseline"] and len(f["icd10"]) > 0
    assert (f["years_from_baseline"] > 0).all() and (f["years_from_baseline"] <= 5).all()
    assert len(set(zip(f["participant_id"], f["icd10"]))) == len(f["icd10"])  # one row per participant and code
    dictionary = r.dictionary()
    for table in ("ecg", "ct", "follow_up_diagnoses"):
        assert table in dictionary["tables"]
    assert "years_from_baseline" in dictionary["tables"]["diagnoses"]["columns"]


def test_the_new_content_is_deterministic_and_leaves_the_rest_alone():
    design = Design("ischemic", 2, "standard", ("confounding", "exercise_remodelling"), 0)
    a, b = cohort(7201, design, SIZES), cohort(7201, design, SIZES)
    for key in ("ecg", "ecg_missing", "ct", "ct_missing", "record_draw", "record_noise"):
        assert np.array_equal(a[key], b[key])
    ra, rb = build_release(a, design, 7201, SIZES), build_release(b, design, 7201, SIZES)
    for table in ("ecg", "ct", "diagnoses", "follow_up_diagnoses"):
        for column in ra.tables[table]:
            values = ra.tables[table][column]
            assert np.array_equal(values, rb.tables[table][column], equal_nan=values.dtype.kind == "f")
    other = cohort(7202, design, SIZES)
    assert not np.array_equal(a["ecg"], other["ecg"])
    # the new draws come from their own key: dropping them leaves every other released value as it was
    stripped = {k: v for k, v in a.items() if k not in ("ecg", "ecg_missing", "ct", "ct_missing", "record_draw", "record_noise")}
    shuffled = dict(stripped, ecg=other["ecg"], ecg_missing=other["ecg_missing"], ct=other["ct"], ct_missing=other["ct_missing"],
                    record_draw=other["record_draw"], record_noise=other["record_noise"])
    rs = build_release(shuffled, design, 7201, SIZES)
    for table, columns in ra.tables.items():
        for column, values in columns.items():
            if table in ("ecg", "ct", "follow_up_diagnoses") or column == "years_from_baseline":
                continue
            same = (values == rs.tables[table][column]) if values.dtype.kind == "O" else np.array_equal(
                values, rs.tables[table][column], equal_nan=values.dtype.kind == "f")
            assert np.all(same), (table, column)


def test_ecg_and_ct_load_on_the_archetypes(archetype_cohorts):
    for design, c, release in archetype_cohorts:
        a = ARCHETYPES.index(design.archetype)
        severity = c["severity"].astype(np.float64)
        for j, name in enumerate(ECG):
            values = release.numeric("ecg", name)
            rows = np.isfinite(values)
            r = np.corrcoef(values[rows], severity[rows])[0, 1]
            if abs(ECG_LOADINGS[a, j]) >= 0.3:
                assert np.sign(r) == np.sign(ECG_LOADINGS[a, j]) and abs(r) > 0.15, (design.archetype, name, r)
        imaged_severity = severity[c["imaged"]]
        for j, name in enumerate(CT):
            values = np.asarray(release.tables["ct"][name], np.float64)
            if name == "coronary_calcium_agatston":
                values = np.log1p(values)
            rows = np.isfinite(values)
            r = np.corrcoef(values[rows], imaged_severity[rows])[0, 1]
            if abs(CT_LOADINGS[a, j]) >= 0.3:
                assert np.sign(r) == np.sign(CT_LOADINGS[a, j]) and abs(r) > 0.15, (design.archetype, name, r)
    # the archetype's signature measure: QRS in DCM, voltage in HCM, PR in HFpEF, calcium in ischemic disease
    signature = {"DCM": ("ecg", "qrs_ms"), "HCM": ("ecg", "sokolow_lyon_mv"), "HFpEF": ("ecg", "pr_ms"),
                 "ischemic": ("ct", "coronary_calcium_agatston")}
    r = {}
    for design, c, release in archetype_cohorts:
        table, name = signature[design.archetype]
        values = release.numeric(table, name)
        rows = np.isfinite(values)
        r[design.archetype] = np.corrcoef(values[rows], c["severity"][rows])[0, 1]
    assert min(r.values()) > 0.2, r


def test_dated_records_agree_with_the_outcomes(archetype_cohorts):
    for design, c, release in archetype_cohorts:
        o = release.tables["outcomes"]
        f = release.tables["follow_up_diagnoses"]
        row = {p: i for i, p in enumerate(release.participant_ids)}
        follow = {(row[p], code): t for p, code, t in zip(f["participant_id"], f["icd10"], f["years_from_baseline"])}
        event, time = o["cv_event"].astype(bool), o["cv_event_time_years"]
        death, death_time = o["all_cause_death"].astype(bool), o["all_cause_death_time_years"]
        cardiac = o["cardiac_death"].astype(bool) & (o["cardiac_death_time_years"] == time)
        hospitalised = np.flatnonzero(event & ~cardiac & ~(death & (death_time < time)))
        assert len(hospitalised) > 10
        assert all(follow.get((i, "I50.9")) == time[i] for i in hospitalised)  # the hospitalisation at the event's time
        end = np.minimum(np.where(death, death_time, 5.0), np.where(event, 5.0, time))
        assert all(t <= end[i] + 1e-3 for (i, _), t in follow.items())  # nothing after death or loss to follow-up
        d = release.tables["diagnoses"]
        baseline = set(zip((row[p] for p in d["participant_id"]), d["icd10"]))
        code = CARDIOMYOPATHY_CODES[design.archetype]
        assert not any((i, k) in baseline for (i, k) in follow if k in (code, "I10", "E11"))  # new codes only
        # new cardiomyopathy follows the late disease
        onset = np.zeros(len(row), bool)
        onset[[i for (i, k) in follow if k == code]] = True
        assert onset.sum() > 0 and c["late_severity"][onset].mean() > 1.0


def test_cox_recovers_a_simulated_hazard():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4000, 2))
    t = rng.exponential(1 / (0.05 * np.exp(0.5 * x[:, 0] - 0.3 * x[:, 1])))
    censor = np.minimum(5.0, rng.exponential(40.0, 4000))
    fit = cox(np.round(np.minimum(t, censor), 2), t < censor, x)
    assert fit["converged"] and np.all(np.abs(fit["beta"] - [0.5, -0.3]) < 3 * fit["se"])
    with pytest.raises(ValueError):
        cox(np.ones(5), np.zeros(5, bool), np.ones((5, 1)))
    change = paired_change(np.arange(10.0), np.arange(10.0) + 2, np.full(10, 2.0))
    assert change["n"] == 10 and change["change_mean"] == pytest.approx(2.0) and change["per_year"] == pytest.approx(1.0)


def test_survival_association_recovers_a_planted_hazard_direction():
    session = BiobankToolSession(7301, profile="tiny")  # its own design; drivers below
    drivers = session._oracle.late_effects
    strong = [p for p, e in drivers.items() if abs(e) >= 0.25]
    assert strong, drivers
    for protein in strong:
        answer = session.call("survival_association", {"exposure": protein, "outcome": "cv_event"})
        assert "error" not in answer, answer
        assert np.sign(answer["log_hazard_ratio"]) == np.sign(drivers[protein]), (protein, answer)
        assert answer["events"] > 20 and answer["ci95"][0] < answer["hazard_ratio_per_sd"] < answer["ci95"][1]
    strongest = max(drivers, key=lambda p: abs(drivers[p]))
    assert session.call("survival_association", {"exposure": strongest})["p"] < 0.05
    # a measure of the disease predicts the events
    for outcome in OUTCOMES:
        answer = session.call("survival_association", {"exposure": "proteins." + session.release.proteins[0], "outcome": outcome,
                                                       "adjust": False})
        assert "error" not in answer and answer["adjusted"] is False and set(answer["rates_by_exposure"]) == {
            "lowest_third", "middle_third", "highest_third"}
    bnp = session.call("survival_association", {"exposure": "physiology.ntprobnp_pg_ml"})
    assert bnp["hazard_ratio_per_sd"] > 1.0


def test_the_tools_are_analysis_tools_answer_from_the_release_and_leak_nothing(world):
    assert {"survival_association", "visit_change"} <= set(ANALYSIS_TOOLS)
    session = BiobankToolSession(9401, profile="tiny")
    answers = [session.call("survival_association", {"exposure": "ecg.qrs_ms", "outcome": "cardiac_death"}),
               session.call("visit_change", {"measure": "lvef_pct"}),
               session.call("visit_change", {"measure": "visits.ntprobnp_pg_ml", "log": True, "exposure": "PROT_0001"}),
               session.call("visit_change", {"measure": "PROT_0002", "exposure": "ct.lv_mass_g", "adjust": False})]
    for answer in answers:
        assert "error" not in answer, answer
        text = json.dumps(answer).lower()
        assert not [w for w in TRUTH_WORDS if w in text]
    visits = len(session.release.tables["visits"]["participant_id"])
    assert 0 < answers[1]["n"] <= visits and answers[2]["exposure_n"] <= answers[2]["n"]
    assert "exposure_beta" in answers[3] and "exposure_beta" not in answers[1]


def test_bad_input_is_refused_at_no_cost():
    session = BiobankToolSession(9401, profile="tiny", budget="limited")
    before = (session.budget_left, dict(session.defined), list(session.audit), session.ended)
    bad = [("survival_association", {"exposure": "PROT_9999"}),
           ("survival_association", {"exposure": "imaging.nope"}),
           ("survival_association", {"exposure": "PROT_0001", "outcome": "stroke"}),
           ("survival_association", {"exposure": "PROT_0001", "adjust": "yes"}),
           ("survival_association", {}),
           ("visit_change", {"measure": "ecg.qrs_ms"}),
           ("visit_change", {"measure": "lvef_pct", "exposure": "nothing.here"}),
           ("visit_change", {"measure": "lvef_pct", "log": True, "extra": 1}),
           ("visit_change", {"measure": "lvef_pct", "log": "no"})]
    for name, args in bad:
        answer = session.call(name, args)
        assert "error" in answer and answer["budget_left"] == 450_000, (name, args, answer)
    assert (session.budget_left, dict(session.defined), list(session.audit), session.ended) == before
    # called directly (past the schema), the tool checks the outcome itself
    with pytest.raises(ValueError, match="outcome"):
        session.survival_association("PROT_0001", outcome="stroke")
