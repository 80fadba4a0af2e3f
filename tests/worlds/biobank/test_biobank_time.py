"""The biobank world over time (world version 6): baseline and late weights,
the delayed driver, the experiments by horizon (a cell perturbation reads
the baseline weights, a knockdown the late ones), survival over five years
and the follow-up visits. Every world here is of the ``tiny`` profile."""

from __future__ import annotations

import numpy as np
import pytest

from luca_gym.worlds.biobank import WORLD
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.design import (ARCHETYPES, DELAYED_PANEL, DELAYED_PROBABILITY, PANEL, Design, design_of,
                                            planted)
from luca_gym.worlds.biobank.generator import DELAYED_SHARE, LATE_FACTOR, VISIT_YEARS, cohort
from luca_gym.worlds.biobank.oracle import EXPERIMENTS
from luca_gym.worlds.biobank.release import build_release, check_no_truth
from luca_gym.worlds.biobank.world import make_world

CONFIG = BiobankConfig(profile="tiny")
DELAYED_SEEDS = (4301, 4302, 4304, 4305, 4307, 4308)  # standard three-driver worlds with a delayed driver


@pytest.fixture(scope="module")
def delayed_worlds():
    return [make_world(seed, CONFIG, design=Design(ARCHETYPES[i % 4], 3, "standard", (), 1))
            for i, seed in enumerate(DELAYED_SEEDS)]


@pytest.fixture(scope="module")
def plain_world():
    return make_world(0, CONFIG)  # panel: DCM, two drivers, no delayed driver


def test_the_version_and_the_designs_that_carry_a_delayed_driver():
    assert WORLD.version == "11"  # 11: pairs matched as the adjusted scan sees them, scorer version 6; 10: misaligned drivers, matched pairs, drawn sites and signs, sealed designs drawn; 9: the delayed driver and its tracker an ambiguous pair; 8: ECG, CT, dated records (test_biobank_followup.py); 7: the panel and T4 pairs
    assert [i for i, d in enumerate(PANEL) if d.delayed] == list(DELAYED_PANEL) == [6, 10, 17]
    assert all(PANEL[i].n_drivers >= 2 for i in DELAYED_PANEL)
    drawn = [design_of(s, s) for s in range(20, 620)]
    eligible = [d for d in drawn if d.n_drivers >= 2]
    assert not any(d.delayed for d in drawn if d.n_drivers < 2)
    assert abs(np.mean([d.delayed for d in eligible]) - DELAYED_PROBABILITY) < 0.08
    assert design_of(6, 6, "hard").delayed == 1 and design_of(6, 6).as_dict()["delayed"] == 1
    with pytest.raises(ValueError, match="delayed 0 or 1"):
        make_world(1, CONFIG, design=Design("DCM", 1, "standard", (), 1))


def test_weights_by_horizon(delayed_worlds, plain_world):
    """Ordinary drivers act at both horizons (late weight a LATE_FACTOR multiple of the baseline's, before the two
    severities' standardisation; of the other sign for a misaligned driver, world version 10); the delayed driver's
    baseline weight is a DELAYED_SHARE of its late one, of the same sign."""
    for world in delayed_worlds:
        o = world.oracle
        (delayed,) = o.delayed
        assert set(o.late_effects) == set(o.drivers) and o.tracker not in o.drivers and o.tracker not in o.decoys
        ratio = {p: o.drivers[p] / o.late_effects[p] for p in o.drivers}
        assert 0 < ratio[delayed] < 1.3 * DELAYED_SHARE[1]
        assert all(0.6 / LATE_FACTOR[1] < abs(ratio[p]) < 1.5 / LATE_FACTOR[0] for p in o.drivers if p != delayed)
        assert all((ratio[p] > 0) == (o.alignment(p) == "aligned") for p in o.drivers) and o.alignment(delayed) == "aligned"
        assert o.direction(delayed) == ("down" if o.late_effects[delayed] > 0 else "up")
    assert plain_world.oracle.delayed == () and plain_world.oracle.tracker is None
    assert plain_world.oracle.truth()["delayed"] == [] and "late_effects" in plain_world.oracle.truth()


def test_the_baseline_shows_baseline_weights_and_the_outcomes_late_ones(delayed_worlds):
    """The delayed driver hardly moves the baseline disease (what imaging shows), and moves the five-year one: against
    the same world drawn without the delay (every draw the same but its baseline weight), its association with the
    baseline disease falls and the late one stays."""
    drops = []
    for world in delayed_worlds:
        c = cohort(world.world_seed, world.design, CONFIG.sizes)
        d = world.design
        ordinary = cohort(world.world_seed, Design(d.archetype, d.n_drivers, d.tier, d.biases, 0), CONFIG.sizes)
        i = world.release.proteins.index(world.oracle.delayed[0])

        def r(cohort_, severity):
            return abs(np.corrcoef(cohort_["protein_true"][:, i], cohort_[severity])[0, 1])

        drops.append(r(ordinary, "severity") - r(c, "severity"))
        assert drops[-1] > 0, drops
        assert r(c, "late_severity") > r(c, "severity")
        if not ordinary["misaligned"][i]:  # drawn without the delay, the driver may be misaligned (world version 10)
            assert abs(r(c, "late_severity") - r(ordinary, "late_severity")) < 0.1
        # the same participants' disease five years on, where no driver is misaligned (world version 10: a misaligned
        # driver turns its part of it, and with two of three drivers turned the two may hardly correlate)
        if all(world.oracle.alignment(p) == "aligned" for p in world.oracle.drivers):
            assert np.corrcoef(c["severity"], c["late_severity"])[0, 1] > 0.6
        # the tracker follows the later disease (beyond the baseline's) without causing it
        t = world.release.proteins.index(world.oracle.tracker)
        progression = c["late_severity"] - np.polyval(np.polyfit(c["severity"], c["late_severity"], 1), c["severity"])
        # (either way: the way the delayed driver moves it, world version 9)
        assert abs(np.corrcoef(c["protein_true"][:, t], progression)[0, 1]) > 0.25
    assert np.mean(drops) > 0.1, drops


def test_cell_perturbation_misses_a_delayed_driver_and_knockdown_recovers_its_late_effect(delayed_worlds):
    signs = set()
    for world in delayed_worlds:
        o = world.oracle
        (p,) = o.delayed
        cell = o.experiment(world.world_seed, p, "cell_perturbation", 0)
        knock = o.experiment(world.world_seed, p, "knockdown", 1)
        assert cell["horizon"] == "first visit" and knock["horizon"] == "five years"
        assert abs(cell["imaging_effect"]) < 2.0 * cell["imaging_se"], cell  # within noise of zero
        assert abs(o.drivers[p]) < 0.5 * cell["imaging_se"]  # by calibration, not by luck
        late = -o.late_effects[p]  # lowering a protein that worsens disease improves it
        assert abs(knock["imaging_effect"]) >= 4.0 * knock["imaging_se"] and np.sign(knock["imaging_effect"]) == np.sign(late)
        assert abs(knock["imaging_effect"] - late) < 3.0 * knock["imaging_se"], (knock, late)
        signs.add(np.sign(late))
    assert signs == {-1.0, 1.0}  # both directions


def test_experiments_run_the_worlds_model(delayed_worlds):
    """Ordinary drivers: both horizons recover their own weight (linear tier, no saturation: exact before noise); a
    non-driver: nothing; the hard tier's saturation shrinks a 1 SD step (tanh)."""
    world = delayed_worlds[0]
    o = world.oracle
    for p in o.drivers:
        for kind, truth in (("cell_perturbation", o.drivers[p]), ("knockdown", o.late_effects[p])):
            units = np.arange(EXPERIMENTS[kind]["n"])
            assert o.model.delta(sorted(o.drivers).index(p), EXPERIMENTS[kind]["weights"], units) == pytest.approx(-truth, abs=1e-9)
    other = next(p for p in world.release.proteins if p not in o.drivers)
    k = o.experiment(world.world_seed, other, "knockdown", 2)
    assert abs(k["imaging_effect"]) < 4.0 * k["imaging_se"]
    hard = make_world(4303, CONFIG, design=Design("HFpEF", 3, "hard", (), 1))
    h = hard.oracle
    driver = max(h.drivers, key=lambda p: abs(h.late_effects[p]))
    d = h.model.delta(sorted(h.drivers).index(driver), "late", np.arange(len(h.model.levels)))
    assert 0.3 * abs(h.late_effects[driver]) < abs(d) < 0.95 * abs(h.late_effects[driver])


def test_survival_columns_beside_the_event(delayed_worlds, plain_world):
    for world in (plain_world, *delayed_worlds[:2]):
        t = world.release.tables["outcomes"]
        assert list(t) == ["participant_id", "cv_event", "cv_event_time_years", "all_cause_death", "all_cause_death_time_years",
                           "cardiac_death", "cardiac_death_time_years"]
        death, cardiac = t["all_cause_death"].astype(bool), t["cardiac_death"].astype(bool)
        assert 0.02 < death.mean() < 0.12 and 0.005 < cardiac.mean() < 0.06 and 0.05 < t["cv_event"].mean() < 0.2
        assert not (cardiac & ~death).any()  # a cardiac death is a death
        assert not (cardiac & (t["cv_event"] == 0) & (t["cardiac_death_time_years"] < t["cv_event_time_years"])).any()
        for column, happened in (("all_cause_death_time_years", death), ("cardiac_death_time_years", cardiac)):
            times = t[column]
            assert times.min() >= 0 and times.max() <= 5.0 and (times[~death] == 5.0).all() and (times[happened] < 5.0).all()
        # cardiac deaths come from the disease: the sicker die more
        c = cohort(world.world_seed, world.design, CONFIG.sizes)
        assert c["late_severity"][cardiac].mean() > c["late_severity"][~death].mean() + 0.3
    assert "all_cause_death" in plain_world.release.dictionary()["tables"]["outcomes"]["columns"]


def test_the_visits_table(plain_world):
    r = plain_world.release
    n_visit = CONFIG.sizes.imaged // 2
    visits, proteins = r.tables["visits"], r.tables["visit_proteins"]
    assert list(visits) == ["participant_id", "visit_years", "lvef_pct", "lvedv_ml", "max_wall_thickness_mm", "lv_mass_g",
                            "native_t1_ms", "wall_motion_score_index", "ntprobnp_pg_ml"]
    assert all(len(v) == n_visit for v in visits.values()) and list(proteins) == ["participant_id", *r.proteins]
    assert len(proteins["participant_id"]) == n_visit and (proteins["participant_id"] == visits["participant_id"]).all()
    ids = visits["participant_id"]
    assert len(set(ids)) == n_visit and set(ids) <= set(r.tables["imaging"]["participant_id"]) and list(ids) == sorted(ids)
    assert VISIT_YEARS[0] <= visits["visit_years"].min() and visits["visit_years"].max() <= VISIT_YEARS[1]
    assert r.dictionary()["release"]["with_follow_up_visit"] == n_visit and r.dictionary()["tables"]["visits"]["rows"] == n_visit
    # repeat measures: the same participants' baseline values predict them
    lvef = r.numeric("imaging", "lvef_pct")[r.rows["visits"]]
    assert np.corrcoef(lvef[np.isfinite(lvef) & np.isfinite(visits["lvef_pct"])],
                       visits["lvef_pct"][np.isfinite(lvef) & np.isfinite(visits["lvef_pct"])])[0, 1] > 0.4
    base = r.matrix("proteins")[r.rows["visits"]]
    ok = np.isfinite(base[:, 0]) & np.isfinite(proteins[r.proteins[0]])
    assert np.corrcoef(base[ok, 0], proteins[r.proteins[0]][ok])[0, 1] > 0.5
    check_no_truth(r)


def test_same_seed_same_tables(delayed_worlds):
    world = delayed_worlds[0]
    first, again = (cohort(world.world_seed, world.design, CONFIG.sizes) for _ in range(2))
    assert all(np.array_equal(first[k], again[k]) for k in first)
    a = build_release(first, world.design, world.world_seed, CONFIG.sizes)
    for table in ("outcomes", "visits", "visit_proteins"):
        for column, values in a.tables[table].items():
            assert np.array_equal(values, world.release.tables[table][column], equal_nan=values.dtype.kind == "f"), (table, column)
    o = world.oracle
    p = o.delayed[0]
    assert o.experiment(world.world_seed, p, "knockdown", 0) == o.experiment(world.world_seed, p, "knockdown", 0)
    other = cohort(world.world_seed + 1, world.design, CONFIG.sizes)
    assert not np.array_equal(first["visit_years"], other["visit_years"])


def test_a_world_without_a_delayed_driver_keeps_its_baseline_draws():
    """The time model draws from its own key branch: a world's baseline (genotypes, proteins, severity, imaging) is
    the same whether or not it carries a delayed driver, but for the delayed driver's own weight."""
    design = Design("HCM", 3, "standard", planted("T2 T8"))
    plain = cohort(4400, design, CONFIG.sizes)
    delayed = cohort(4400, Design("HCM", 3, "standard", planted("T2 T8"), 1), CONFIG.sizes)
    for key in ("genotypes", "driver", "cis_variant", "age", "site"):
        if key == "cis_variant":  # but the tracker's gene, at the delayed driver's locus (world version 9)
            moved = np.flatnonzero(plain[key] != delayed[key])
            assert list(moved) == [int(delayed["tracker"])] and delayed[key][moved[0]] == delayed[key][delayed["late_delayed"]][0]
            continue
        assert np.array_equal(plain[key], delayed[key]), key
    assert (plain["late_delayed"].sum(), delayed["late_delayed"].sum()) == (0, 1)
