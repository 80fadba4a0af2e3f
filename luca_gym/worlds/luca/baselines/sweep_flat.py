"""``causal-sweep-flat``: causal-sweep's order on the flat action space
(:mod:`luca_gym.worlds.luca.core.flat`), cut to the budget, the values
written by the ``logit-additive`` analyst (:mod:`luca_gym.worlds.luca.analysts`).
It reads exactly what a flat learner reads (the observation vector and the
legal-action mask) and chooses among the same K actions, so it is the
scripted reference a learner on the flat space has to beat at a tight budget
(``benchmarks/tight_budget.py``, column (b)).

At each call it takes the first of these that the mask allows:

1. an experiment the current task combines that is not yet measured (the
   lower flat index first);
2. the analyst's prediction for the current task;
3. reveal the next task;
4. the sweep, while a unit is left beyond the rescue's (disease mode): each
   signal (disease mode), then BLOCK, then BOOST of each gene, in index
   order, skipping what is measured or masked;
5. the analyst's diagnosis;
6. once, where something was measured: a rescue with the measured single
   that brought most aberrant phenotypes into the healthy range (ties: the
   one nearest 0.5 on them), the rule of
   :func:`~luca_gym.worlds.luca.analysts.best_measured_rescue`;
7. the analyst's network;
8. end.

One decision, three front ends, no copy:

* :func:`choose` -- one session's flat vector and mask -> a flat action;
* :func:`flat_policy` -- batched, for :func:`luca_gym.functional.flat_rollout`
  (the benchmark's column);
* :func:`for_codec` -- :func:`flat_policy` of a codec: the world's flat
  baseline (``FLAT_BASELINES``), the teacher of ``luca-gym train --algo bc``;
* :func:`batched_policy` -- dict observations -> core actions, for
  :func:`luca_gym.worlds.luca.functional.rollout`;
* :class:`CausalSweepFlatPolicy` -- the harness policy
  (``luca-gym eval --agents causal-sweep-flat``): the session's observation
  encoded as a flat learner's is (:func:`~luca_gym.worlds.luca.core.flat.observation_vector`,
  :func:`~luca_gym.worlds.luca.core.flat.mask`), :func:`choose`, then
  :func:`~luca_gym.worlds.luca.core.flat.decode` with the analyst, as the
  flat env decodes, in one jitted call per step.
"""

from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.spec import DAMPEN, HEALTHY_HIGH, HEALTHY_LOW, N_PHENOTYPES

ANALYST = "logit-additive"


def sweep_order(params: core.EnvParams) -> np.ndarray:
    """int32: the sweep's experiments as flat indices, in order: each signal
    (disease mode), then BLOCK, then BOOST of every gene."""
    n, s = params.n_genes, params.n_signals
    signals = np.arange(DAMPEN * n, DAMPEN * n + s) if params.disease else np.zeros(0, np.int64)
    return np.concatenate([signals, np.arange(2 * n)]).astype(np.int32)


def _slices(params: core.EnvParams) -> dict:
    """{part name: slice} of the flat vector (:func:`~luca_gym.worlds.luca.core.flat.observation_parts`)."""
    at, out = 0, {}
    for name, size in flat.observation_parts(params):
        out[name] = slice(at, at + size)
        at += size
    return out


def choose(vector: jax.Array, mask: jax.Array, params: core.EnvParams) -> jax.Array:
    """The flat action (int32 ()) of ``causal-sweep-flat`` for one session's
    observation vector float32 (D,) and legal-action mask bool (K,) (see the
    module doc); a legal one while the session is open."""
    n, s, p = params.n_genes, params.n_signals, N_PHENOTYPES
    lay = flat.layout(params)
    e = lay.targets
    part = {name: vector[where] for name, where in _slices(params).items()}
    budget_left = jnp.round(part["budget_left"][0] * params.budget)
    # Flat-index order (code-major: BLOCK g, BOOST g, DAMPEN g, then signals); the vector holds genes gene-major.
    measured = jnp.concatenate([part["single_mask"].reshape(n, DAMPEN).T.reshape(-1), part["signal_mask"]]) > 0
    need = (part["task_targets"] > 0) & mask[:e]
    reserve = params.rescue_cost if params.disease else 0
    order = jnp.asarray(sweep_order(params))
    todo = mask[order] & ~measured[order] & (budget_left - params.experiment_cost >= reserve)
    # Each single's phenotypes (the vector holds shifts from the baseline), in flat-index order: (E, P).
    base = part["baseline"]
    phenotypes = jnp.concatenate([part["singles"].reshape(n, DAMPEN, p).transpose(1, 0, 2).reshape(-1, p),
                                  part["signals"].reshape(s, p)]) + base
    aberrant = part["aberrant"] > 0
    restored = jnp.sum((phenotypes >= HEALTHY_LOW) & (phenotypes <= HEALTHY_HIGH) & aberrant, axis=1)
    closeness = -jnp.sum(jnp.abs(phenotypes - 0.5) * aberrant, axis=1)  # in [-P/2, 0]: a tie-break under one count
    score = jnp.where(measured, restored * (p + 1.0) + closeness, -jnp.inf)
    rescue = lay.rescue + jnp.argmax(score)
    # A rescue spends a unit no experiment accounts for: once one is spent, no second.
    rescued = budget_left < params.budget - jnp.sum(measured) * params.experiment_cost
    choices = [
        (need.any(), jnp.argmax(need)),
        (mask[lay.predict], lay.predict),
        (mask[lay.reveal], lay.reveal),
        (todo.any(), order[jnp.argmax(todo)]),
        (mask[lay.analyst_diagnosis], lay.analyst_diagnosis),
        (mask[rescue] & ~rescued & measured.any(), rescue),
        (mask[lay.network], lay.network),
    ]
    return jnp.select([c for c, _ in choices], [jnp.asarray(i) for _, i in choices], lay.end).astype(jnp.int32)


@lru_cache(maxsize=64)
def flat_policy(params: core.EnvParams):
    """``causal-sweep-flat`` for :func:`luca_gym.functional.flat_rollout`:
    ``act(policy_params, key, obs float32 (B, D), mask bool (B, K)) -> int32
    (B,)`` (no weights; the key is unused). The same settings give the same
    function, so a rollout compiles once."""

    def act(policy_params, key, obs, mask):
        return jax.vmap(partial(choose, params=params))(obs, mask)

    return act


def for_codec(codec):
    """``causal-sweep-flat`` for a LUCA flat codec (:func:`flat_policy` of its
    params): the world's flat baseline, the teacher of ``luca-gym train --algo
    bc`` (``World.flat_baselines``)."""
    return flat_policy(codec.params)


FLAT_BASELINES = {"causal-sweep-flat": for_codec}


def _action(obs: dict, params: core.EnvParams, analyst: str) -> core.Action:
    """One session's core action: encode as the flat env does, choose, decode with ``analyst``."""
    index = choose(flat.observation_vector(obs, params), flat.mask(obs, params), params)
    return flat.decode(index, obs, params, analyst)


@lru_cache(maxsize=64)
def batched_policy(params: core.EnvParams, analyst: str = ANALYST):
    """``causal-sweep-flat`` for :func:`luca_gym.worlds.luca.functional.rollout`:
    ``act(key, obs) -> core.Action`` over a batch of dict observations (the
    key is unused)."""

    def act(key, obs):
        return jax.vmap(partial(_action, params=params, analyst=analyst))(obs)

    return act


_host_action = jax.jit(_action, static_argnames=("params", "analyst"))


class CausalSweepFlatPolicy:
    """``causal-sweep-flat`` as a harness policy (``reset(params, seed)``,
    ``act(obs) -> dict action``); deterministic, so the seed is unused."""

    name = "causal-sweep-flat"
    analyst = ANALYST

    def reset(self, params: core.EnvParams, seed: int) -> None:
        """Start a session of these settings."""
        self.params = params

    def act(self, obs: dict) -> dict:
        """The sweep's next flat action, as a dict action."""
        action = jax.device_get(_host_action(obs, self.params, self.analyst))
        return {k: np.asarray(v) for k, v in vars(action).items()}
