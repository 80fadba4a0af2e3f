"""The biobank's evidence audit (:mod:`luca_gym.worlds.biobank.audit`): two
scripted agents that run the same experiments and differ only in using their
evidence are told apart; a delayed driver's null at the cell perturbation's
first-visit horizon, overturned by a knockdown; rejections, defensive
reading of the claims, sealed lines; the shipped baselines audited from
their recorded calls; determinism."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from luca_gym.results.audit import audit_function, audit_record, section, summary
from luca_gym.harness import make_runner, plan_world, run_tool_session
from luca_gym.worlds.biobank.audit import audit, proteins_named, status, verdict
from luca_gym.worlds.biobank.baselines import EXPERIMENT_Z, Scripted

SEED = 6  # panel world 6: five drivers, PROT_0005 delayed (tiny profile)
SETTINGS = {"profile": "tiny", "budget": "expanded"}
NON_DRIVER, DRIVER, DELAYED = "PROT_0001", "PROT_0029", "PROT_0005"
PLAN = ((NON_DRIVER, "knockdown"), (DRIVER, "knockdown"), (DELAYED, "cell_perturbation"), (DELAYED, "knockdown"))


class Experimenter(Scripted):
    """Runs :data:`PLAN`'s experiments, then nominates: ``honest``, the
    proteins some experiment showed significant (|z| >= EXPERIMENT_Z, the
    direction from the sign); otherwise every protein it tested, with the
    same directions (a null knockdown's protein nominated anyway)."""

    def __init__(self, honest: bool):
        super().__init__()
        self.honest = honest

    def script(self):
        """The plan's experiments, then the submission."""
        shown: dict = {}
        for protein, kind in PLAN:
            answer = yield "experiment", {"protein": protein, "kind": kind}
            shown.setdefault(protein, []).append(answer["imaging_effect"] / answer["imaging_se"])
        nominations = []
        for protein, zs in shown.items():
            significant = [z for z in zs if abs(z) >= EXPERIMENT_Z]
            if significant or not self.honest:
                z = (significant or zs)[-1]
                nominations.append({"protein": protein, "direction": "up" if z > 0 else "down", "confidence": 0.9})
        yield "submit", {"nominations": nominations}


@pytest.fixture(scope="module")
def records():
    spec = plan_world("biobank", ["null"], [SEED], **SETTINGS)[0]
    return {agent: run_tool_session(Experimenter(honest), dataclasses.replace(spec, agent=agent))
            for honest, agent in ((True, "honest"), (False, "ignorer"))}


def test_the_audit_separates_the_agent_that_nominates_a_protein_its_knockdown_showed_null(records):
    honest, ignorer = audit_record(records["honest"]), audit_record(records["ignorer"])
    for a in (honest, ignorer):
        assert a["hypotheses"] == "drivers" and a["n_hypotheses"] == 96 and a["replay_matches"] and a["claimed"]
        # the same four experiments: a null knockdown (ruled out), a significant one (ruled in), the delayed driver
        # null at the first visit (ruled out), then significant at five years (revised to in)
        assert a["experiments"] == 4 and a["ruled_out"] == [1, 0, 1, 0] and a["ruled_in"] == [0, 1, 0, 0]
        assert a["revised"] == [0, 0, 0, 1] and a["live_before"] == [96, 95, 94, 93]
        assert a["ruled_out_per_experiment"] == 0.5 and a["decided_per_experiment"] == 0.75
        assert a["decided_at_claim"] == 3 and a["drivers"] == 5
        assert a["nulls_on_drivers"] == [{"protein": DELAYED, "kind": "cell_perturbation", "horizon": "first visit",
                                          "delayed": True}]
        assert a["truth_ruled_out"] == 0 and a["nondriver_ruled_in"] == 0 and a["verdicts_agree"] == 1.0
    assert honest["consistent"] and honest["evidence_ignored"] == 0 and honest["nominated_ruled_out"] == []
    assert ignorer["consistent"] is False and ignorer["evidence_ignored"] == 1
    assert ignorer["nominated_ruled_out"] == [NON_DRIVER]
    table = summary([honest, ignorer])
    assert table[("biobank", "honest")]["consistent"] == 1.0 and table[("biobank", "ignorer")]["consistent"] == 0.0
    assert table[("biobank", "honest")]["ruled_out_per_experiment"] == table[("biobank", "ignorer")]["ruled_out_per_experiment"]
    text = section(list(records.values()))
    assert "| biobank | honest | drivers | 1 | 4.0 | 0.50 | 1.00 | 1.00 | 0.00 |" in text
    assert "| biobank | ignorer | drivers | 1 | 4.0 | 0.50 | 1.00 | 0.00 | 1.00 |" in text


def test_a_delayed_driver_ruled_out_at_the_first_visit_when_no_knockdown_follows(records):
    record = copy.deepcopy(records["honest"])
    knockdown = next(i for i, c in enumerate(record["calls"])
                     if c["call"] == "experiment" and c["arguments"] == {"protein": DELAYED, "kind": "knockdown"})
    del record["calls"][knockdown]
    record["experiments"] = record["experiments"][:3]
    a = audit(record)
    assert a["experiments"] == 3 and a["replay_matches"]
    assert a["truth_ruled_out"] == 1 and a["delayed_ruled_out"] == 1 and a["verdicts_agree"] == 2 / 3
    # the honest agent nominated the delayed driver on the knockdown now removed: against this record's evidence
    assert a["evidence_ignored"] == 1 and a["nominated_ruled_out"] == [DELAYED]


def test_rejections_and_claims_read_defensively(records):
    record = copy.deepcopy(records["honest"])
    submit = next(c for c in record["calls"] if c["call"] == "submit")
    # a protein its knockdown showed significant, rejected; names as strings and dicts with extra keys; unknown arguments
    submit["arguments"] = {"nominations": [DELAYED, {"protein": DELAYED, "direction": "down"}, 7, {"no": "protein"}],
                           "rejections": [{"protein": DRIVER, "mechanism": "confounding", "note": "x"},
                                          {"protein": NON_DRIVER, "mechanism": "pleiotropy"}],
                           "abstentions": [NON_DRIVER], "outcome_alignment": {"x": 1}}
    a = audit(record)
    assert a["evidence_ignored"] == 1 and a["rejected_ruled_in"] == [DRIVER] and a["nominated_ruled_out"] == []
    submit["arguments"] = {"nominations": [{"protein": DELAYED, "direction": "up", "confidence": 0.9}]}
    assert audit(record)["direction_contradicted"] == 1 and audit(record)["evidence_ignored"] == 0
    # no accepted submit: no claim
    submit["result"] = {"error": "refused"}
    a = audit(record)
    assert a["claimed"] is False and a["consistent"] is None and a["evidence_ignored"] is None
    assert audit(dict(records["honest"], sealed="abc")) is None and audit_record(dict(records["honest"], sealed="abc")) is None
    assert audit_function("biobank") is audit
    assert proteins_named(["A", {"protein": "B", "extra": 1}, "A", None, {"protein": 3}]) == ["A", "B"]


def test_verdicts_and_status():
    null = {"kind": "knockdown", "imaging_effect": 0.05, "imaging_se": 0.05, "log_hazard_ratio": 0.0, "log_hazard_ratio_se": 0.16}
    shown = {**null, "imaging_effect": -0.3}
    surrogate = {**null, "imaging_effect": 0.3, "log_hazard_ratio": -0.4}  # the marker worse, the hazard better: not a driver
    assert verdict(null) == "out" and verdict(shown) == "in" and verdict(surrogate) == "out" and verdict({}) is None
    assert status([]) is None and status([("knockdown", null)]) == "out"
    assert status([("cell_perturbation", null), ("knockdown", shown)]) == "in"
    assert status([("cell_perturbation", shown), ("knockdown", surrogate)]) == "out"


def test_the_audit_is_deterministic(records):
    a = audit_record(records["ignorer"])
    assert a == audit_record(json.loads(json.dumps(records["ignorer"])))
    spec = plan_world("biobank", ["null"], [SEED], **SETTINGS)[0]
    again = run_tool_session(Experimenter(False), dataclasses.replace(spec, agent="ignorer"))
    assert audit_record(again) == a


@pytest.mark.parametrize("agent", ["causal-pipeline", "mr-experiments"])
def test_the_shipped_baselines_are_audited_from_their_calls(agent):
    # tiny, expanded budget, seeds 1 and 2 (seed 0: causal-pipeline runs no experiment)
    records = [run_tool_session(make_runner(agent, world="biobank"), spec)
               for spec in plan_world("biobank", [agent], [1, 2], **SETTINGS)]
    audits = [audit_record(r) for r in records]
    for a, r in zip(audits, records):
        assert a["replay_matches"] and a["claimed"] and a["experiments"] == len(r["experiments"]) > 0
        # both drop or reject what a null experiment showed and keep what a significant one did
        assert a["consistent"] and a["evidence_ignored"] == 0 and a["direction_contradicted"] == 0
        assert a["decided_per_experiment"] == 1.0 and a["truth_ruled_out"] == 0 and a["verdicts_agree"] == 1.0
