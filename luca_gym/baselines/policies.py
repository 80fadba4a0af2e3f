"""The paper's three baselines (SPEC §4) as policies over the public observation.

A policy sees what an agent sees: the observation dict of :class:`LucaEnv` and
the public :class:`~luca_gym.core.EnvParams`. None reads an organism's arrays.
``causal-sweep`` is privileged only in knowing the model family (sigmoid
readouts), so it adds single effects in logit space.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from luca_gym import analysts, core, scoring
from luca_gym.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, N_PHENOTYPES, NETWORK_SHIFT_THRESHOLD, PERSIST

_COLUMN = {BLOCK: 0, BOOST: 1, DAMPEN: 2}  # columns of obs["single_results"]
_EPS = 1e-4


@runtime_checkable
class Policy(Protocol):
    """Acts on an observation and returns an action dict for :class:`LucaEnv`."""

    name: str

    def reset(self, params: core.EnvParams, seed: int) -> None:
        """Start a new session with the public settings and a policy seed."""

    def act(self, obs: dict) -> dict:
        """The next action for observation ``obs``."""


# -- action builders ----------------------------------------------------------
def experiment_action(params: core.EnvParams, genes: dict | None = None, signals=(), kind: int = core.EXPERIMENT) -> dict:
    codes = np.zeros(params.n_genes, np.int64)
    for g, c in (genes or {}).items():
        codes[g] = c
    flags = np.zeros(params.n_signals, np.int8)
    flags[list(signals)] = 1
    return {"kind": kind, "gene_codes": codes, "signal_flags": flags}


def predict_action(values) -> dict:
    return {"kind": core.SUBMIT_PREDICTION, "prediction": np.clip(np.asarray(values, np.float32), 0.0, 1.0)}


def diagnosis_action(target: int, kind: int) -> dict:
    return {"kind": core.COMMIT_DIAGNOSIS, "diagnosis_target": int(target), "diagnosis_type": int(kind)}


def kind_action(kind: int) -> dict:
    return {"kind": kind}


def network_from_singles(obs: dict) -> np.ndarray:
    """Gene -> phenotype signs int8 (N, P): :func:`luca_gym.analysts.network_from_singles`."""
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


class HeuristicPolicy(_Planned):
    """BLOCKs each targetable gene once; predicts by summing the single effects
    it measured (the BLOCK effects, whatever the task's intervention type: the
    naive additive assumption the paper's heuristic makes); in disease mode diagnoses the
    gene whose BLOCK best restores the aberrant phenotypes (LOCK_HI) and tests
    that BLOCK as the rescue."""

    name = "heuristic"

    def act(self, obs: dict) -> dict:
        p = self.params
        reserve = p.rescue_cost if p.disease else 0
        blocked = obs["single_mask"][:, 0].astype(bool)
        todo = np.flatnonzero(obs["targetable"].astype(bool) & ~blocked)
        if todo.size and obs["budget_left"] - p.experiment_cost >= reserve and self._legal(obs, core.EXPERIMENT):
            return experiment_action(p, {int(todo[0]): BLOCK})
        if self._legal(obs, core.REVEAL_TASK):
            return kind_action(core.REVEAL_TASK)
        if self._legal(obs, core.SUBMIT_PREDICTION):
            return predict_action(self.predict(obs))
        if self._legal(obs, core.COMMIT_DIAGNOSIS):
            self.best = self.best_block(obs)
            return diagnosis_action(self.best, LOCK_HI)
        if not self.rescued and self._legal(obs, core.TEST_RESCUE):
            self.rescued = True
            return experiment_action(p, {self.best: BLOCK}, kind=core.TEST_RESCUE)
        if not self.network_sent:
            self.network_sent = True
            return {"kind": core.SUBMIT_NETWORK, "network": network_from_singles(obs)}
        return kind_action(core.END)

    def predict(self, obs):
        base = obs["baseline_phenotypes"]
        effects = [
            obs["single_results"][g, 0] - base if obs["single_mask"][g, 0] else np.zeros(N_PHENOTYPES)
            for g in obs["task_genes"]
        ]
        return base + sum(effects)

    def best_block(self, obs) -> int:
        aberrant = obs["aberrant"].astype(bool)
        genes = np.flatnonzero(obs["single_mask"][:, 0])
        if genes.size == 0:
            return int(np.flatnonzero(obs["targetable"])[0])
        return int(max(genes, key=lambda g: restored_count(obs["single_results"][g, 0], aberrant)))


class CausalSweepPolicy(_Planned):
    """Knows the model family. For each prediction task it measures the two
    single interventions the task combines and adds their effects in logit
    space (inverting the sigmoid readout); then sweeps BLOCK, then BOOST,
    across the targetable genes within the budget (signals first in disease
    mode). Diagnosis: a locked gene no longer responds to the intervention
    that repeats its lock (BOOST on LOCK_HI, BLOCK on LOCK_LO), and a
    persistent signal no longer responds to activation."""

    name = "causal-sweep"

    def act(self, obs: dict) -> dict:
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
        base = np.clip(obs["baseline_phenotypes"], _EPS, 1 - _EPS)
        logit = lambda x: np.log(x / (1 - x))  # noqa: E731
        total = logit(base)
        for g, c in zip(obs["task_genes"], obs["task_codes"]):
            single = np.clip(obs["single_results"][g, _COLUMN[int(c)]], _EPS, 1 - _EPS)
            total = total + logit(single) - logit(base)
        return 1.0 / (1.0 + np.exp(-total))

    def diagnose(self, obs):
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


BASELINES = {cls.name: cls for cls in (RandomPolicy, HeuristicPolicy, CausalSweepPolicy)}


def make_policy(name: str) -> Policy:
    """A baseline policy by name: ``random``, ``heuristic`` or ``causal-sweep``."""
    if name not in BASELINES:
        raise ValueError(f"agent: {name!r} unknown; allowed {', '.join(BASELINES)}")
    return BASELINES[name]()
