"""The biobank world's experiments and budgets: the
oracle's cell perturbation and knockdown, the ``budget`` setting, the
``experiment`` tool (refusals cost nothing and change nothing; every request
and delivery in the record's audit log), what a knockdown resolves (T4's
pair, T8's harm) and the ``mr-experiments`` baseline."""

from __future__ import annotations

import json

import pytest

from luca_gym.llm.loop import run_agent
from luca_gym.worlds.biobank import WORLD
from luca_gym.worlds.biobank.baselines import BASELINES
from luca_gym.worlds.biobank.config import BUDGETS, BiobankConfig
from luca_gym.worlds.biobank.design import ARCHETYPES, Design, planted
from luca_gym.worlds.biobank.oracle import EXPERIMENTS
from luca_gym.worlds.biobank.tools import BiobankToolSession
from luca_gym.worlds.biobank.world import make_world

CONFIG = BiobankConfig(profile="tiny")
SEEDS = (1000, 1001, 1002, 1003, 1004)


@pytest.fixture(scope="module")
def paired_worlds():
    """Five tiny worlds carrying T4 and T8, two drivers each."""
    return [make_world(seed, CONFIG, design=Design(ARCHETYPES[i % len(ARCHETYPES)], 2, "standard", planted("T4 T8")))
            for i, seed in enumerate(SEEDS)]


def test_budget_setting_and_session_key():
    assert BiobankConfig().budget == "none" and BiobankConfig().dollars == 0
    assert BUDGETS == {"none": 0, "limited": 450_000, "expanded": 2_000_000}
    assert "budget" in WORLD.session_keys
    with pytest.raises(ValueError, match="budget: 'lots' not allowed; one of 'none', 'limited', 'expanded'"):
        BiobankConfig(budget="lots")


def test_knockdown_separates_the_shared_instrument_pair_and_shows_the_harm(paired_worlds):
    separated = harm_shown = 0
    for world in paired_worlds:
        o = world.oracle
        decoy = next(p for p, m in o.decoys.items() if m == "shared_instrument")
        driver = max(o.drivers, key=lambda p: abs(o.drivers[p]))  # T4's driver: the strong one at its locus
        d = o.experiment(world.world_seed, driver, "knockdown", 0)
        c = o.experiment(world.world_seed, decoy, "knockdown", 1)
        separated += abs(d["imaging_effect"]) / d["imaging_se"] >= 2.0 > abs(c["imaging_effect"]) / c["imaging_se"]
        s = o.experiment(world.world_seed, o.surrogate, "knockdown", 2)
        harm_down = o.surrogate_harm == "up"  # lowering a protein whose harmful direction is up lowers the hazard
        harm_shown += (s["log_hazard_ratio"] < 0) == harm_down and (s["imaging_effect"] > 0) == harm_down
    assert separated >= 4 and harm_shown >= 4


def test_experiment_deliveries_are_deterministic_and_reveal_no_truth(paired_worlds):
    world = paired_worlds[0]
    o, protein = world.oracle, world.release.proteins[0]
    a = o.experiment(world.world_seed, protein, "cell_perturbation", 3)
    assert a == o.experiment(world.world_seed, protein, "cell_perturbation", 3)
    assert a != o.experiment(world.world_seed, protein, "cell_perturbation", 4)  # fresh sampling noise per request
    assert set(a) == {"kind", "protein", "n", "horizon", "intervention", "imaging_effect", "imaging_se"}
    k = o.experiment(world.world_seed, protein, "knockdown", 3)
    assert k["n"] == EXPERIMENTS["knockdown"]["n"] == 800 and a["n"] == 120 and k["imaging_se"] < a["imaging_se"]
    assert {"log_hazard_ratio", "log_hazard_ratio_se"} <= set(k)


def test_experiment_tool_budget_refusals_and_audit_log():
    s = BiobankToolSession(2, profile="tiny", budget="limited")
    protein = s.release.proteins[0]
    assert "$450,000" in s.system_prompt()
    refused = [("experiment", {"protein": "PROT_9999", "kind": "knockdown"}),
               ("experiment", {"protein": protein, "kind": "crispr"})]
    for name, args in refused:
        out = s.dispatch(name, args)
        assert "error" in out and out["budget_left"] == 450_000 and s.audit == []
    out = s.dispatch("experiment", {"protein": protein, "kind": "knockdown"})
    assert out["cost"] == 400_000 and out["budget_left"] == 50_000 and len(s.audit) == 1
    out = s.dispatch("experiment", {"protein": protein, "kind": "cell_perturbation"})
    assert "over the budget left ($50,000)" in out["error"] and out["budget_left"] == 50_000 and len(s.audit) == 1
    s.dispatch("submit", {"nominations": []})
    assert "error" in s.dispatch("experiment", {"protein": protein, "kind": "cell_perturbation"}) and len(s.audit) == 1
    record = json.loads(json.dumps(s.record()))
    assert record["experiments"][0]["delivery"]["protein"] == protein and record["experiments"][0]["cost"] == 400_000
    none = BiobankToolSession(2, profile="tiny")
    assert "error" in none.dispatch("experiment", {"protein": protein, "kind": "cell_perturbation"}) and none.audit == []


def _total(agent: str, seed: int, budget: str) -> float:
    session = BiobankToolSession(seed, profile="tiny", budget=budget)
    run_agent(BASELINES[agent](), session)
    return session.scores["total"]


def test_mr_experiments_is_cis_mr_without_budget_and_beats_it_with_one():
    seed = 12  # panel: DCM, four drivers, T1 T4 T6 T8
    cis = _total("cis-mr", seed, "none")
    assert _total("mr-experiments", seed, "none") == cis
    assert _total("mr-experiments", seed, "expanded") > cis


def test_eval_budget_sweeps_the_biobank_regimes(tmp_path, capsys):
    """``luca-gym eval --world biobank --budget none,expanded`` sweeps the regimes
    (a key field), where LUCA's --budget takes one value."""
    import json

    from luca_gym.cli import main

    out = tmp_path / "bb"
    assert main(["eval", "--world", "biobank", "--set", "profile=tiny", "--agents", "null", "--seeds", "0",
                 "--budget", "none,expanded", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    budgets = sorted(json.loads(line)["budget"] for line in (out / "sessions.jsonl").read_text().splitlines())
    assert budgets == ["expanded", "none"]
    assert main(["eval", "--world", "biobank", "--budget", "lavish", "--seeds", "0", "--out", str(tmp_path / "x"),
                 "--quiet"]) == 2
    assert "lavish" in capsys.readouterr().err
