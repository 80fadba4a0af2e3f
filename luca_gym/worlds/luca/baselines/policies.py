"""The paper's three baselines (SPEC §4), and a stronger reference, as
policies over the public observation.

A policy sees what an agent sees: the observation dict of :class:`LucaEnv` and
the public :class:`~luca_gym.worlds.luca.core.EnvParams`. None reads an organism's arrays.

* ``random`` -- no experiments; predicts 0.5; a random diagnosis and a random
  single-target rescue.
* ``heuristic`` -- BLOCKs each targetable gene once; predicts by summing the
  BLOCK effects; names the gene whose BLOCK moved the aberrant phenotypes most
  as locked high and tests its BLOCK as the rescue.
* ``causal-sweep`` -- BLOCKs, then BOOSTs, the targetable genes in order until
  the budget is spent; knows the model family (sigmoid), so it adds single
  effects in logit space (an unmeasured BOOST is the BLOCK mirrored); names
  the fault the best-restoring single undoes and tests that single.
* ``task-directed`` -- not a paper baseline: reveals each task first, measures
  exactly its two singles, then sweeps (signals first in disease mode); an
  upper reference for what the measurements allow.

The rules where the paper is silent (the diagnosis and the rescue) are the
plainest readings that reproduce its Table 8 (docs/design-decisions.md);
:data:`PAPER_RULES` names them, and the batched forms in
:mod:`luca_gym.worlds.luca.baselines.batched` use the same functions.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from luca_gym.worlds.luca import analysts, core, scoring
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, N_PHENOTYPES, NETWORK_SHIFT_THRESHOLD, PERSIST

_COLUMN = {BLOCK: 0, BOOST: 1, DAMPEN: 2}  # columns of obs["single_results"]
_EPS = 1e-4


@runtime_checkable
class Policy(Protocol):
    """Acts on an observation and returns an action dict for :class:`LucaEnv`.

    A policy class that cannot play every mode and size may also have a
    ``check_session(mode, n_genes)`` (static) raising ValueError:
    :func:`luca_gym.harness.plan_world` calls it before anything runs."""

    name: str

    def reset(self, params: core.EnvParams, seed: int) -> None:
        """Start a new session with the public settings and a policy seed."""

    def act(self, obs: dict) -> dict:
        """The next action for observation ``obs``."""


# -- action builders ----------------------------------------------------------
def experiment_action(params: core.EnvParams, genes: dict | None = None, signals=(), kind: int = core.EXPERIMENT) -> dict:
    """A dict action of ``kind`` (an experiment by default) with these gene codes and signals on."""
    codes = np.zeros(params.n_genes, np.int64)
    for g, c in (genes or {}).items():
        codes[g] = c
    flags = np.zeros(params.n_signals, np.int8)
    flags[list(signals)] = 1
    return {"kind": kind, "gene_codes": codes, "signal_flags": flags}


def predict_action(values) -> dict:
    """A prediction action, the values clipped to [0, 1]."""
    return {"kind": core.SUBMIT_PREDICTION, "prediction": np.clip(np.asarray(values, np.float32), 0.0, 1.0)}


def diagnosis_action(target: int, kind: int) -> dict:
    """A diagnosis action: ``target`` with malfunction code ``kind``."""
    return {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(target), "diagnosis_type": int(kind)}


def kind_action(kind: int) -> dict:
    """An action of ``kind`` with no fields (reveal, end)."""
    return {"kind": kind}


def network_from_singles(obs: dict) -> np.ndarray:
    """Gene -> phenotype signs int8 (N, P): :func:`luca_gym.worlds.luca.analysts.network_from_singles`."""
    return np.asarray(analysts.network_from_singles(obs), np.int8)


def restored_count(phenotypes: np.ndarray, aberrant: np.ndarray) -> tuple[int, float]:
    """(aberrant phenotypes in range, -distance of the aberrant ones from 0.5)."""
    inside = np.asarray(scoring.in_healthy_range(phenotypes))
    return int(np.sum(inside & aberrant)), -float(np.sum(np.abs(phenotypes - 0.5) * aberrant))


class _Planned:
    """Shared skeleton: a queue of experiments, then the end game."""

    name = "planned"

    def reset(self, params: core.EnvParams, seed: int) -> None:
        self.params = params
        self.rng = np.random.default_rng(seed)
        self.rescued = False
        self.network_sent = False

    def _legal(self, obs, kind) -> bool:
        return bool(obs["action_mask"][kind])


class RandomPolicy(_Planned):
    """No experiments; predicts 0.5 everywhere; in disease mode a random
    diagnosis and a random single-target rescue."""

    name = "random"

    def act(self, obs: dict) -> dict:
        """The paper's random baseline: no experiment, predictions 0.5, a random diagnosis and rescue."""
        p = self.params
        if self._legal(obs, core.REVEAL_TASK):
            return kind_action(core.REVEAL_TASK)
        if self._legal(obs, core.SUBMIT_PREDICTION):
            return predict_action(np.full(N_PHENOTYPES, 0.5))
        targetable = np.flatnonzero(obs["targetable"])
        if self._legal(obs, core.COMMIT_DIAGNOSIS):
            candidates = [(g, t) for g in targetable for t in (LOCK_HI, LOCK_LO)]
            candidates += [(p.n_genes + k, PERSIST) for k in range(p.n_signals)]
            target, kind = candidates[self.rng.integers(len(candidates))]
            return diagnosis_action(target, kind)
        if not self.rescued and self._legal(obs, core.TEST_RESCUE):
            self.rescued = True
            options = [(g, c) for g in targetable for c in (BLOCK, BOOST, DAMPEN)] + [(-1 - k, 0) for k in range(p.n_signals)]
            g, c = options[self.rng.integers(len(options))]
            if g < 0:
                return experiment_action(p, signals=[-1 - g], kind=core.TEST_RESCUE)
            return experiment_action(p, {g: c}, kind=core.TEST_RESCUE)
        return kind_action(core.END)


# (predict, diagnose, rescue) of the paper-style sweeps, from luca_gym.worlds.luca.analysts.
PAPER_RULES = {
    "heuristic": (analysts.block_sum_prediction, analysts.largest_block_diagnosis, analysts.reversal_rescue),
    "causal-sweep": (analysts.mirrored_logit_prediction, analysts.restoring_diagnosis, analysts.measured_rescue),
}


class SweepPolicy(_Planned):
    """A paper-style baseline: each code of ``codes`` in turn on every
    targetable gene in index order (keeping the rescue's unit in disease mode)
    until the sweep is done or the budget is spent; then each task answered by
    ``predict``; in disease mode ``diagnose`` committed and ``rescue`` tested
    once; the network from the singles; end. The rules are
    :data:`PAPER_RULES` [name]."""

    codes: tuple[int, ...] = (BLOCK,)

    def act(self, obs: dict) -> dict:
        """Sweep the singles in order while the budget allows, then predict, diagnose and rescue by the policy's rules."""
        p = self.params
        predict, diagnose, rescue = PAPER_RULES[self.name]
        reserve = p.rescue_cost if p.disease else 0
        if obs["budget_left"] - p.experiment_cost >= reserve and self._legal(obs, core.EXPERIMENT):
            for code in self.codes:
                todo = np.flatnonzero(obs["targetable"].astype(bool) & ~obs["single_mask"][:, _COLUMN[code]].astype(bool))
                if todo.size:
                    return experiment_action(p, {int(todo[0]): code})
        if self._legal(obs, core.REVEAL_TASK):
            return kind_action(core.REVEAL_TASK)
        if self._legal(obs, core.SUBMIT_PREDICTION):
            return predict_action(np.asarray(predict(obs)))
        target, type_ = diagnose(obs)
        if self._legal(obs, core.COMMIT_DIAGNOSIS):
            return diagnosis_action(int(target), int(type_))
        if not self.rescued and self._legal(obs, core.TEST_RESCUE):
            self.rescued = True
            is_signal, gene, code, signal = (int(x) for x in rescue(obs, target, type_))
            if is_signal:
                return experiment_action(p, signals=[signal], kind=core.TEST_RESCUE)
            return experiment_action(p, {gene: code}, kind=core.TEST_RESCUE)
        if not self.network_sent:
            self.network_sent = True
            return {"kind": core.SUBMIT_NETWORK, "network": network_from_singles(obs)}
        return kind_action(core.END)


class HeuristicPolicy(SweepPolicy):
    """BLOCKs each targetable gene once; predicts by summing the BLOCK effects
    (whatever the task's types: the naive superposition of the paper's
    heuristic); names the gene whose BLOCK moved the aberrant phenotypes most
    as locked high (LOCK_HI) and tests its BLOCK as the rescue."""

    name = "heuristic"
    codes = (BLOCK,)


class CausalSweepPolicy(SweepPolicy):
    """BLOCKs, then BOOSTs, every targetable gene in index order until the
    budget is spent (the paper's systematic sweep; at N=20 that is 20 BLOCKs
    and 11 BOOSTs). Knows the model family, so it adds the two single effects
    in logit space, reading an unmeasured BOOST as the measured BLOCK mirrored;
    names the fault that the best-restoring single undoes (BLOCK -> LOCK_HI,
    BOOST -> LOCK_LO) and tests that single as the rescue."""

    name = "causal-sweep"
    codes = (BLOCK, BOOST)


class TaskDirectedPolicy(_Planned):
    """Not a paper baseline: an upper reference for what the measurements
    allow. Knows the model family. For each prediction task it measures the two
    single interventions the task combines and adds their effects in logit
    space (inverting the sigmoid readout); then sweeps BLOCK, then BOOST,
    across the targetable genes within the budget (signals first in disease
    mode). Diagnosis: a locked gene no longer responds to the intervention
    that repeats its lock (BOOST on LOCK_HI, BLOCK on LOCK_LO), and a
    persistent signal no longer responds to activation."""

    name = "task-directed"

    def act(self, obs: dict) -> dict:
        """Measure the current task's two singles and predict it, then sweep, then diagnose and rescue."""
        p = self.params
        mask = obs["single_mask"].astype(bool)
        if int(obs["task_index"]) >= 0 and not obs["predicted"][int(obs["task_index"])]:
            for g, c in zip(obs["task_genes"], obs["task_codes"]):
                if not mask[g, _COLUMN[int(c)]] and self._legal(obs, core.EXPERIMENT):
                    return experiment_action(p, {int(g): int(c)})
            return predict_action(self.predict(obs))
        if self._legal(obs, core.REVEAL_TASK):
            return kind_action(core.REVEAL_TASK)
        reserve = p.rescue_cost if p.disease else 0
        if obs["budget_left"] - p.experiment_cost >= reserve and self._legal(obs, core.EXPERIMENT):
            nxt = self.next_sweep(obs)
            if nxt is not None:
                return nxt
        if self._legal(obs, core.COMMIT_DIAGNOSIS):
            return diagnosis_action(*self.diagnose(obs))
        if not self.rescued and self._legal(obs, core.TEST_RESCUE):
            self.rescued = True
            return self.rescue(obs)
        if not self.network_sent:
            self.network_sent = True
            return {"kind": core.SUBMIT_NETWORK, "network": network_from_singles(obs)}
        return kind_action(core.END)

    def next_sweep(self, obs):
        """The next unmeasured single (signals first in disease mode, then BLOCKs, then BOOSTs), or None."""
        p = self.params
        if p.disease:
            todo = np.flatnonzero(~obs["signal_mask"].astype(bool))
            if todo.size:
                return experiment_action(p, signals=[int(todo[0])])
        targetable = obs["targetable"].astype(bool)
        for column, code in ((0, BLOCK), (1, BOOST)):
            todo = np.flatnonzero(targetable & ~obs["single_mask"][:, column].astype(bool))
            if todo.size:
                return experiment_action(p, {int(todo[0]): code})
        return None

    def predict(self, obs):
        """The task's prediction: the two measured single effects added in logit space."""
        base = np.clip(obs["baseline_phenotypes"], _EPS, 1 - _EPS)
        logit = lambda x: np.log(x / (1 - x))  # noqa: E731
        total = logit(base)
        for g, c in zip(obs["task_genes"], obs["task_codes"]):
            single = np.clip(obs["single_results"][g, _COLUMN[int(c)]], _EPS, 1 - _EPS)
            total = total + logit(single) - logit(base)
        return 1.0 / (1.0 + np.exp(-total))

    def diagnose(self, obs):
        """(target, malfunction code) the measurements point to: the gene whose BLOCK moved the phenotypes
        furthest beyond what its BOOST did (LOCK_HI) or the reverse (LOCK_LO), or a signal that did nothing (PERSIST)."""
        p = self.params
        base = obs["baseline_phenotypes"]
        mask = obs["single_mask"].astype(bool)
        shift = np.abs(obs["single_results"] - base[None, None]).max(axis=2)  # (N, 3)
        best, choice = -np.inf, (int(np.flatnonzero(obs["targetable"])[0]), LOCK_HI)
        for g in np.flatnonzero(obs["targetable"]):
            if mask[g, 0] and mask[g, 1]:
                for kind, moved, still in ((LOCK_HI, shift[g, 0], shift[g, 1]), (LOCK_LO, shift[g, 1], shift[g, 0])):
                    if moved - still > best:
                        best, choice = moved - still, (int(g), kind)
        signal_shift = np.abs(obs["signal_results"] - base).max(axis=1)
        measured = obs["signal_mask"].astype(bool)
        # A signal that does nothing when activated is already on, unless a
        # locked gene explains the disease better.
        if measured.any() and best < 2 * NETWORK_SHIFT_THRESHOLD:
            k = int(np.argmin(np.where(measured, signal_shift, np.inf)))
            if signal_shift[k] < NETWORK_SHIFT_THRESHOLD:
                choice = (p.n_genes + k, PERSIST)
        return choice

    def rescue(self, obs):
        """The rescue test of the measured single (gene or signal) that restored the most aberrant phenotypes
        (a DAMPEN of the first targetable gene when nothing was measured)."""
        p = self.params
        aberrant = obs["aberrant"].astype(bool)
        mask = obs["single_mask"].astype(bool)
        options = [
            (restored_count(obs["single_results"][g, c], aberrant), {"genes": {int(g): code}})
            for g in range(p.n_genes)
            for c, code in ((0, BLOCK), (1, BOOST), (2, DAMPEN))
            if mask[g, c]
        ]
        options += [
            (restored_count(obs["signal_results"][k], aberrant), {"signals": [k]})
            for k in np.flatnonzero(obs["signal_mask"])
        ]
        if not options:
            return experiment_action(p, {int(np.flatnonzero(obs["targetable"])[0]): DAMPEN}, kind=core.TEST_RESCUE)
        _, chosen = max(options, key=lambda o: o[0])
        return experiment_action(p, chosen.get("genes"), chosen.get("signals", ()), kind=core.TEST_RESCUE)


BASELINES = {cls.name: cls for cls in (RandomPolicy, HeuristicPolicy, CausalSweepPolicy, TaskDirectedPolicy)}
PAPER_BASELINES = ("random", "heuristic", "causal-sweep")  # the paper's three (the default sweep)


def make_policy(name: str) -> Policy:
    """A baseline policy by name: ``random``, ``heuristic``, ``causal-sweep``
    (the paper's three) or ``task-directed`` (a stronger reference)."""
    if name not in BASELINES:
        raise ValueError(f"agent: {name!r} unknown; allowed {', '.join(BASELINES)}")
    return BASELINES[name]()
