"""One policy loop for every world (:mod:`luca_gym.tools.play`) and the
runner kinds the harness asks (:func:`luca_gym.protocol.runner_kind`).

LUCA's policies act with core dict actions; the loop plays each as the tool
call it is, so a baseline's record is the tool session's transcript, call
for call what a tool agent sending those calls gets, ending included.
"""

from __future__ import annotations

import numpy as np
import pytest

from luca_gym import harness, worlds
from luca_gym.harness.sweep import _reporting
from luca_gym.protocol import POLICY, TOOL_AGENT, runner_kind
from luca_gym.worlds.luca import calls, core
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.evaluation import luca_spec, play_policy
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.tools import ToolSession

SETTINGS = {"tier": "medium", "mode": "disease", "n_genes": 10}


def test_a_luca_baselines_record_is_the_tool_sessions_transcript():
    """The record's calls are what a tool agent sending the same calls gets, entry for entry, the ending included."""
    record = harness.run_session(make_policy("heuristic"), luca_spec("heuristic", seed=1, **SETTINGS))
    replay = ToolSession(1, **SETTINGS)
    for entry in record["calls"]:
        replay.call(entry["call"], entry["arguments"])
    assert replay.transcript == record["calls"]
    last = record["calls"][-1]["result"]
    assert (last["ended"], last["end_reason"], record["end_reason"], record["truncated"]) == (True, "end", "end", False)
    assert last["scores"] == calls.describe_scores(replay.meta, record["scores"])  # as a model's last call shows them
    assert record["return"] == pytest.approx(record["scores"]["composite"], abs=1e-6)
    assert (record["organism_id"], record["budget"], record["call_limit"]) == (replay.organism_id, 21, 148)


class _Experiments:
    """Experiments only (G001 BLOCK, BOOST, DAMPEN, ...); never ends the session itself."""

    def reset(self, params, seed):
        self.n, self.count = params.n_genes, 0

    def act(self, observation):
        self.count += 1
        codes = np.zeros(self.n, np.int64)
        codes[0] = 1 + self.count % 3
        return {"kind": core.EXPERIMENT, "gene_codes": codes}


def test_the_call_limit_ends_a_policys_session_as_a_models():
    out = play_policy(_Experiments(), 0, env=Session(**SETTINGS, max_steps=3), **SETTINGS)
    assert (len(out["calls"]), out["truncated"], out["end_reason"], out["fields"]["call_limit"]) == (3, True, "call_limit", 3)
    last = out["calls"][-1]["result"]
    assert last["ended"] is True and last["end_reason"] == "call_limit" and "limit of 3 calls" in last["note"]
    with pytest.raises(RuntimeError, match="did not end the session within 2 calls"):
        play_policy(_Experiments(), 0, max_calls=2, **SETTINGS)


class _Once:
    """One given action, then ``end``."""

    def __init__(self, make):
        self.make = make

    def reset(self, params, seed):
        self.params, self.first = params, True

    def act(self, observation):
        if self.first:
            self.first = False
            return self.make(observation, self.params)
        return {"kind": core.END}


def test_what_a_policy_sends_is_checked_as_a_models_call():
    # A malformed action: the core's parser's error, naming the field (as the host session always raised).
    with pytest.raises(ValueError, match="signal_flags"):
        play_policy(_Once(lambda o, p: {"kind": core.EXPERIMENT, "signal_flags": np.full(p.n_signals, 2, np.int8)}), 0,
                    **SETTINGS)
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        play_policy(_Once(lambda o, p: {"kind": core.END, "colour": 1}), 0, **SETTINGS)

    # An action no tool call can express (a latent gene's experiment): the tool session's refusal, free.
    def latent(o, p):
        codes = np.zeros(p.n_genes, np.int64)
        codes[np.flatnonzero(np.asarray(o["targetable"]) == 0)[0]] = 1
        return {"kind": core.EXPERIMENT, "gene_codes": codes}

    out = play_policy(_Once(latent), 0, **{**SETTINGS, "tier": "hard"})
    first = out["calls"][0]
    assert "invalid arguments for run_experiment" in first["result"]["error"] and first["budget_remaining"] == out["fields"]["budget"]
    # A network entry that is no sign is refused, not passed on as "+".
    out = play_policy(_Once(lambda o, p: {"kind": core.SUBMIT_NETWORK, "network": np.full((p.n_genes, 3), 2, np.int8)}), 0,
                      **SETTINGS)
    assert out["calls"][0]["arguments"]["edges"][0]["direction"] == "2" and "error" in out["calls"][0]["result"]
    assert out["scores"]["network_recall"] == 0.0


class _CallablePolicy(_Experiments):
    def __call__(self, messages, tools):
        raise AssertionError("a policy is played through act")


def _agent(messages, tools):
    raise AssertionError("not called here")


def test_the_harness_asks_one_function_what_a_runner_is():
    assert runner_kind(_Experiments()) == runner_kind(_Experiments) == POLICY
    assert runner_kind(_CallablePolicy()) == POLICY  # reset and act make a policy, callable or not
    assert runner_kind(_agent) == TOOL_AGENT and runner_kind(harness.make_runner("systematic", world="equation")) == TOOL_AGENT
    assert runner_kind(_reporting(_Experiments(), print)) == POLICY and runner_kind(_reporting(_agent, print)) == TOOL_AGENT
    for neither in (object(), object, 3, "random"):
        with pytest.raises(TypeError, match="neither a policy"):
            runner_kind(neither)
    spec = luca_spec("x", seed=0, **SETTINGS)
    with pytest.raises(ValueError, match="a tool agent, not a policy"):
        harness.run_session(_agent, spec)
    with pytest.raises(ValueError, match="a policy .reset and act., not a tool agent"):
        harness.run_tool_session(_Experiments(), spec)
    # Every world's baselines: the graph worlds' and LUCA's are policies, the others' tool agents.
    kinds = {w: {runner_kind(cls) for cls in worlds.get(w).baseline_policies().values()}
             for w in ("luca", "dag", "relational", "equation", "tracking", "biobank")}
    assert kinds == {"luca": {POLICY}, "dag": {POLICY}, "relational": {POLICY}, "equation": {TOOL_AGENT},
                     "tracking": {TOOL_AGENT}, "biobank": {TOOL_AGENT}}
