"""LUCA's diagnosis process (:mod:`luca_gym.worlds.luca.process`) and its
evidence audit (:mod:`luca_gym.worlds.luca.audit`) on scripted agents that run
the disambiguating signal test: one ignores it, one follows it.

Easy disease organisms of 8 genes; seed 5's malfunction is a persistent signal.
"""

from __future__ import annotations

import numpy as np
import pytest

from luca_gym.harness import run_session
from luca_gym.worlds.luca import core, process
from luca_gym.worlds.luca.baselines.policies import diagnosis_action, experiment_action, kind_action
from luca_gym.worlds.luca.evaluation import luca_spec
from luca_gym.worlds.luca.spec import LOCK_HI, PERSIST

TIER, N, PERSIST_SEED = "easy", 8, 5


class SignalTest:
    """Activates every signal alone (the disambiguating experiment among
    them), then commits a diagnosis, tests one rescue and ends.
    ``follow``: diagnose PERSIST on the signal whose activation moved the
    phenotypes least (the one already on); else ignore the tests and diagnose
    LOCK_HI on the first targetable gene."""

    def __init__(self, follow: bool):
        self.follow = follow
        self.name = "follows-signal" if follow else "ignores-signal"

    def reset(self, params, seed):
        self.params, self.step = params, 0

    def act(self, obs):
        p = self.params
        self.step += 1
        if self.step <= p.n_signals:
            return experiment_action(p, signals=[self.step - 1])
        if self.step == p.n_signals + 1:
            if self.follow:
                shift = np.abs(np.asarray(obs["signal_results"]) - np.asarray(obs["baseline_phenotypes"])).max(axis=1)
                return diagnosis_action(p.n_genes + int(np.argmin(shift)), PERSIST)
            return diagnosis_action(int(np.flatnonzero(obs["targetable"])[0]), LOCK_HI)
        if self.step == p.n_signals + 2:
            return experiment_action(p, signals=[0], kind=core.TEST_RESCUE)
        return kind_action(core.END)


def _session(follow: bool, seed: int = PERSIST_SEED) -> dict:
    agent = SignalTest(follow)
    return run_session(agent, luca_spec(agent.name, TIER, "disease", N, seed))


@pytest.fixture(scope="module")
def records():
    return [_session(False), _session(True)]


def test_the_seed_is_a_persistent_signal(records):
    assert all(r["scores"]["malfunction_type"] == PERSIST for r in records)


def test_the_table_shows_the_test_done_and_no_credit_for_the_agent_that_ignores_it(records):
    ignores, follows = records
    facts = process.disambiguation(ignores)
    assert facts["tested"] and facts["tested_alone"] and facts["committed"]
    assert facts["tests"] == 1 and not facts["credit"] and facts["diagnosis"].startswith("LOCK_HI")
    table = process.disambiguation_table(records)
    assert table["ignores-signal"] == {"sessions": 1, "tested": 1, "tested_alone": 1, "committed": 1, "credit": 0,
                                       "full_credit": 0, "tested_no_credit": 1, "tested_credit": 0}
    assert table["follows-signal"]["tested_credit"] == 1 and table["follows-signal"]["full_credit"] == 1
    text = process.section(records)
    assert "## Diagnosis process" in text and "| ignores-signal | 1 | 1 | 1 | 1 | 0 | 0 | 1 |" in text


def test_the_dissociation_counts_each_disease_session_once(records):
    table = process.dissociation_table(records)
    for agent, record in zip(("ignores-signal", "follows-signal"), records):
        row = table[agent]
        assert row["sessions"] == 1 == row["both"] + row["rescue_only"] + row["diagnosis_only"] + row["neither"]
        rescued, credited = record["scores"]["rescue"] > 0, record["scores"]["diagnosis"] > 0
        key = "both" if rescued and credited else "rescue_only" if rescued else "diagnosis_only" if credited else "neither"
        assert row[key] == 1


def test_other_malfunctions_and_healthy_lines_have_no_disambiguation_row(records):
    lock = dict(records[0], scores=dict(records[0]["scores"], malfunction_type=LOCK_HI))
    healthy = dict(records[0], mode="healthy")
    assert process.disambiguation(lock) is None and process.disambiguation(healthy) is None
    assert process.dissociation_table([healthy]) == {} and process.section([healthy]) is None


def test_the_audit_separates_the_agent_that_ignores_its_evidence(records):
    from luca_gym.results.audit import audit_record

    ignores, follows = (audit_record(r) for r in records)
    for a, record in zip((ignores, follows), records):
        assert a["hypotheses"] == "malfunctions" and a["claimed"]
        assert not a["truth_ruled_out"]  # the world's noise never rules out the truth here
        measured = [c for c in record["calls"] if c["call"] in ("run_experiment", "test_rescue")]
        assert a["experiments"] == len(measured) == record["scores"]["n_experiments"] + 1  # each signal alone, one rescue
        assert len(a["ruled_out"]) == a["experiments"]
    assert follows["consistent"] and follows["evidence_ignored"] == 0 and follows["claim"] == follows["truth"]
    assert ignores["consistent"] is False and ignores["evidence_ignored"] == 1
    assert ignores["claim"].startswith("LOCK_HI")
    # live hypotheses only shrink: each measurement rules out what it rules out of what was live
    live = [ignores["n_hypotheses"] - ignores["opening_ruled_out"]]
    for before, out in zip(ignores["live_before"], ignores["ruled_out"]):
        assert before == live[-1] and 0 <= out <= before
        live.append(before - out)
