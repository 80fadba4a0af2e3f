"""The evidence audit (:mod:`luca_gym.results.audit`, the graph worlds'
:mod:`luca_gym.worlds.graphs.audit`): two scripted agents that differ only in
using their evidence are told apart, and the arithmetic on a 3-node instance
is checked by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from luca_gym.results.audit import audit_function, audit_record, section, summary
from luca_gym.harness import plan_world, run_session
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.audit import contradicted


class Sweep:
    """Intervenes on every node once, in order, then submits a matrix:
    ``honest`` what its evidence implies; otherwise the same matrix with the
    first decided pair flipped (one decided edge ignored)."""

    def __init__(self, honest: bool):
        self.honest = honest

    def reset(self, config, seed):
        self.config, self.next = config, 0

    def act(self, obs):
        c = self.config
        if self.next < c.n:
            self.next += 1
            return {"tool": c.intervene_tool, "arguments": {c.node_noun: self.next - 1}}
        known = np.asarray(obs["knowledge"])
        matrix = known == core.EDGE
        if not self.honest:
            i, j = next((i, j) for i in range(c.n) for j in range(i + 1, c.n) if known[i, j] != core.UNKNOWN)
            matrix[i, j] = not matrix[i, j]
            if not c.directed:
                matrix[j, i] = matrix[i, j]
        return {"tool": "submit_graph", "arguments": {"adjacency": matrix.astype(int).tolist()}}


SETTINGS = {"dag": {"n_nodes": 3, "n_states": 3, "proposals": "final"}, "relational": {"n_houses": 3, "proposals": "final"}}


def _records(world: str, seeds=(0, 1)) -> list[dict]:
    out = []
    for honest, agent in ((True, "honest"), (False, "ignorer")):
        for spec in plan_world(world, ["systematic"], list(seeds), **SETTINGS[world]):
            out.append(run_session(Sweep(honest), dataclasses.replace(spec, agent=agent)))
    return out


@pytest.fixture(scope="module")
def dag_records():
    return _records("dag")


@pytest.fixture(scope="module")
def relational_records():
    return _records("relational")


def test_the_audit_separates_the_agent_that_ignores_a_decided_edge(dag_records, relational_records):
    for records in (dag_records, relational_records):
        for record in records:
            a = audit_record(record)
            assert a["replay_matches"] and a["claimed"]
            if record["agent"] == "honest":
                assert a["consistent"] and a["evidence_ignored"] == 0
            else:
                assert a["consistent"] is False and a["evidence_ignored"] == 1
        table = summary(audit_record(r) for r in records)
        world = records[0]["world"]
        assert table[(world, "honest")]["consistent"] == 1.0 and table[(world, "honest")]["evidence_ignored"] == 0.0
        assert table[(world, "ignorer")]["consistent"] == 0.0 and table[(world, "ignorer")]["evidence_ignored"] == 1.0
        # the experiments are the same: only the use of the evidence differs
        assert table[(world, "honest")]["ruled_out_per_experiment"] == table[(world, "ignorer")]["ruled_out_per_experiment"]


def test_hand_checked_arithmetic_on_three_nodes(dag_records, relational_records):
    # relational, 3 houses: 3 unordered pairs. Attacking house 0 decides (0,1) and (0,2) (every
    # ally's anger rises, so a pair whose anger did not is no alliance); house 1 then decides (1,2);
    # house 2 has nothing left. Ruled out [2, 1, 0]: 3 in all, 1.0 per experiment.
    for record in relational_records:
        a = audit_record(record)
        assert a["n_hypotheses"] == 3 and a["experiments"] == 3
        assert a["ruled_out"] == [2, 1, 0] and a["live_before"] == [3, 1, 0]
        assert a["ruled_out_per_experiment"] == 1.0 and a["decided_at_claim"] == 3
    # dag, 3 molecules: 6 ordered pairs, all decided by one intervention on each (children change
    # state for certain); row 0 is decided by the first, so at least 2 there; 6 in all, 2.0 per experiment.
    for record in dag_records:
        a = audit_record(record)
        assert a["n_hypotheses"] == 6 and a["experiments"] == 3
        assert sum(a["ruled_out"]) == 6 and a["ruled_out"][0] >= 2 and a["ruled_out_per_experiment"] == 2.0
        assert a["live_before"][0] == 6 and a["decided_at_claim"] == 6


def test_contradicted_counts_decided_pairs_only():
    known = np.array([[core.NO_EDGE, core.EDGE, core.UNKNOWN],
                      [core.NO_EDGE, core.NO_EDGE, core.NO_EDGE],
                      [core.UNKNOWN, core.EDGE, core.NO_EDGE]], np.int8)
    claim = np.zeros((3, 3), bool)
    assert contradicted(claim, known, directed=True) == 2  # 0->1 and 2->1 decided edges left out
    claim[0, 2] = claim[2, 0] = True  # unknown pairs: any claim is consistent
    assert contradicted(claim, known, directed=True) == 2
    claim[0, 1] = claim[2, 1] = True
    assert contradicted(claim, known, directed=True) == 0
    claim[1, 0] = True  # 1->0 was decided absent
    assert contradicted(claim, known, directed=True) == 1


def test_section_and_dispatch(dag_records, relational_records):
    text = section(dag_records + relational_records)
    assert text.startswith("## Evidence audit")
    for world in ("dag", "relational"):
        assert f"| {world} | honest | edges | 2 |" in text and f"| {world} | ignorer | edges | 2 |" in text
    assert "| 1.00 | 1.00 | 0.00 |" in text and "| 1.00 | 0.00 | 1.00 |" in text
    # worlds without an audit, sealed lines and a LUCA healthy line: None
    assert audit_function("equation") is None and audit_function("no-such-world") is None
    assert audit_record({"world": "equation", "seed": 0, "calls": []}) is None
    assert audit_record(dict(dag_records[0], sealed="abc")) is None
    assert audit_record({"world": "luca", "mode": "healthy", "seed": 0, "calls": []}) is None
    assert section([{"world": "equation", "seed": 0}]) is None


def test_the_shipped_graph_baselines_are_audited_from_their_calls():
    from luca_gym.worlds.graphs.baselines import BASELINES

    records = [run_session(BASELINES[agent](), spec) for agent in ("systematic", "random")
               for spec in plan_world("dag", [agent], [0, 1], n_nodes=4, n_states=3)]
    audits = [audit_record(r) for r in records]
    assert all(a["replay_matches"] and a["claimed"] for a in audits)
    # both baselines propose what their evidence implies: never an ignored edge
    assert all(a["consistent"] and a["evidence_ignored"] == 0 for a in audits)
    assert all(a["experiments"] == r["scores"]["interventions"] for a, r in zip(audits, records))
