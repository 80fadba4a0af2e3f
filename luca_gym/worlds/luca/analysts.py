"""Analysts: what an agent concludes from what it has measured, as pure JAX
functions of one observation (no hidden state).

An agent that only *chooses experiments* (the flat action space,
:mod:`luca_gym.worlds.luca.core.flat`) still has to answer the prediction tasks, submit a
network and name a malfunction. An analyst does that part: given the public
observation of one session, it returns

* ``predict(obs) -> float32 (P,)``: the phenotypes under the current task;
* ``network(obs) -> int32 (N, P)``: gene -> phenotype signs;
* ``diagnose(obs) -> (target int32 (), type int32 ())``: a malfunction;
* ``rescue(obs) -> (is_signal, gene, code, signal)``: the measured single
  intervention that brought most aberrant phenotypes into range.

Two analysts are named in :data:`ANALYSTS`:

* ``logit-additive`` -- task-directed's: adds the measured single effects of a
  task's two interventions in logit space (the model family is sigmoid),
  reads edges with the scorer's rule, and diagnoses a lock by the single that
  no longer moves the organism (BOOST on a gene locked high, BLOCK on one
  locked low; a persistent signal does not respond to activation).
* ``constant`` -- predicts 0.5 everywhere and submits no edges (the random
  baseline's answers); it diagnoses and rescues as ``logit-additive`` does.

All functions take one session's observation; ``jax.vmap`` them for a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import scoring
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, NETWORK_SHIFT_THRESHOLD, PERSIST

LOGIT_EPS = 1e-4  # predictions are clipped into [eps, 1 - eps] before the logit


def _logit(x):
    x = jnp.clip(x, LOGIT_EPS, 1 - LOGIT_EPS)
    return jnp.log(x / (1 - x))


def logit_additive_prediction(obs: dict) -> jax.Array:
    """float32 (P,): the current task's phenotypes with the two measured single
    effects added in logit space (an unmeasured single adds nothing)."""
    n = obs["targetable"].shape[-1]
    base = obs["baseline_phenotypes"]
    genes = jnp.clip(obs["task_genes"], 0, n - 1)
    columns = jnp.clip(obs["task_codes"].astype(jnp.int32) - 1, 0, DAMPEN - 1)
    measured = obs["single_mask"].astype(bool)[genes, columns]  # (2,)
    singles = obs["single_results"][genes, columns]  # (2, P)
    effects = jnp.where(measured[:, None], _logit(singles) - _logit(base), 0.0)
    total = _logit(base) + effects[0] + effects[1]
    return jnp.clip(1.0 / (1.0 + jnp.exp(-total)), 0.0, 1.0).astype(jnp.float32)


def mirrored_logit_prediction(obs: dict) -> jax.Array:
    """float32 (P,): :func:`logit_additive_prediction`, where a task's BLOCK or
    BOOST left unmeasured is read from the other one, mirrored in logit space
    (a gene at mid-range moves its readouts as far up when boosted as down
    when blocked: the paper's causal-sweep knows the model family); a gene
    with neither measured adds nothing."""
    n = obs["targetable"].shape[-1]
    base = _logit(obs["baseline_phenotypes"])
    genes = jnp.clip(obs["task_genes"], 0, n - 1)
    columns = jnp.clip(obs["task_codes"].astype(jnp.int32) - 1, 0, 1)  # BLOCK 0, BOOST 1
    single = obs["single_mask"].astype(bool)
    own, other = single[genes, columns], single[genes, 1 - columns]  # (2,)
    own_effect = _logit(obs["single_results"][genes, columns]) - base
    other_effect = _logit(obs["single_results"][genes, 1 - columns]) - base
    effects = jnp.where(own[:, None], own_effect, jnp.where(other[:, None], -other_effect, 0.0))
    return jnp.clip(1.0 / (1.0 + jnp.exp(-(base + effects[0] + effects[1]))), 0.0, 1.0).astype(jnp.float32)


def block_sum_prediction(obs: dict) -> jax.Array:
    """float32 (P,): the baseline plus the measured BLOCK effects of the current
    task's two genes, whatever the task's intervention types (the heuristic
    baseline's naive superposition: it only ever BLOCKs; an unmeasured BLOCK
    adds nothing)."""
    n = obs["targetable"].shape[-1]
    base = obs["baseline_phenotypes"]
    genes = jnp.clip(obs["task_genes"], 0, n - 1)
    measured = obs["single_mask"].astype(bool)[genes, 0]  # (2,)
    effects = jnp.where(measured[:, None], obs["single_results"][genes, 0] - base, 0.0)
    return jnp.clip(base + effects[0] + effects[1], 0.0, 1.0).astype(jnp.float32)


def constant_prediction(obs: dict) -> jax.Array:
    """float32 (P,): 0.5 for every phenotype (the healthy baseline)."""
    return jnp.full(obs["baseline_phenotypes"].shape, 0.5, jnp.float32)


def network_from_singles(obs: dict) -> jax.Array:
    """int32 (N, P): signs from the measured single BLOCK / BOOST results by
    the scorer's edge rule (an unmeasured single counts as no shift)."""
    base = obs["baseline_phenotypes"]
    single = obs["single_mask"].astype(bool)
    block = jnp.where(single[:, 0, None], obs["single_results"][:, 0], base)
    boost = jnp.where(single[:, 1, None], obs["single_results"][:, 1], base)
    return scoring.network_truth(base, block, boost).astype(jnp.int32)


def no_network(obs: dict) -> jax.Array:
    """int32 (N, P) zeros: no edge claimed."""
    return jnp.zeros(obs["single_results"][:, 0].shape, jnp.int32)


def lock_signature_diagnosis(obs: dict) -> tuple[jax.Array, jax.Array]:
    """(target, type): the gene whose BLOCK moves the organism most and whose
    BOOST least is locked high (LOCK_HI), and vice versa; a measured signal
    that moves nothing is persistent (PERSIST) unless a gene's signature is
    clear (at least twice the network threshold). Without two measured singles
    on any gene: the first targetable gene, LOCK_HI."""
    targetable = obs["targetable"].astype(bool)
    n = targetable.shape[-1]
    single = obs["single_mask"].astype(bool)
    signal_mask = obs["signal_mask"].astype(bool)
    base = obs["baseline_phenotypes"]
    shift = jnp.max(jnp.abs(obs["single_results"] - base[None, None, :]), axis=2)  # (N, 3)
    both = targetable & single[:, 0] & single[:, 1]
    scores = jnp.stack([shift[:, 0] - shift[:, 1], shift[:, 1] - shift[:, 0]], axis=1)  # (N, 2)
    scores = jnp.where(both[:, None], scores, -jnp.inf).reshape(2 * n)
    flat = jnp.argmax(scores)
    best = jnp.max(scores)
    any_gene = jnp.isfinite(best)
    target = jnp.where(any_gene, flat // 2, jnp.argmax(targetable))
    type_ = jnp.where(any_gene, LOCK_HI + flat % 2, LOCK_HI)
    signal_shift = jnp.max(jnp.abs(obs["signal_results"] - base[None, :]), axis=1)
    quiet = jnp.argmin(jnp.where(signal_mask, signal_shift, jnp.inf))
    persist = signal_mask.any() & (best < 2 * NETWORK_SHIFT_THRESHOLD) & (signal_shift[quiet] < NETWORK_SHIFT_THRESHOLD)
    target = jnp.where(persist, n + quiet, target)
    type_ = jnp.where(persist, PERSIST, type_)
    return target.astype(jnp.int32), type_.astype(jnp.int32)


def largest_block_diagnosis(obs: dict) -> tuple[jax.Array, jax.Array]:
    """(target, LOCK_HI): the gene whose measured BLOCK moved the aberrant
    phenotypes most (a gene stuck high is the one whose removal matters
    most); the heuristic baseline's reading. Without a measured BLOCK: the
    first targetable gene."""
    targetable = obs["targetable"].astype(bool)
    blocked = obs["single_mask"].astype(bool)[:, 0] & targetable
    moved = jnp.sum(jnp.abs(obs["single_results"][:, 0] - obs["baseline_phenotypes"]) * obs["aberrant"].astype(bool), axis=-1)
    target = jnp.where(blocked.any(), jnp.argmax(jnp.where(blocked, moved, -jnp.inf)), jnp.argmax(targetable))
    return target.astype(jnp.int32), jnp.int32(LOCK_HI)


def reversal_rescue(obs: dict, target, type_):
    """The rescue that undoes a diagnosis: BLOCK a gene named LOCK_HI, BOOST
    one named LOCK_LO; for a signal named PERSIST (it cannot be switched
    off), the measured single that restored most (:func:`best_measured_rescue`).
    Returns (is_signal, gene, code, signal) like it."""
    n = obs["targetable"].shape[-1]
    fallback = best_measured_rescue(obs)
    is_gene = type_ != PERSIST
    gene = jnp.where(is_gene, jnp.clip(target, 0, n - 1), fallback[1]).astype(jnp.int32)
    code = jnp.where(is_gene, jnp.where(type_ == LOCK_HI, BLOCK, BOOST), fallback[2]).astype(jnp.int32)
    return ~is_gene & fallback[0], gene, code, fallback[3]


def restoring_diagnosis(obs: dict) -> tuple[jax.Array, jax.Array]:
    """(target, type): the measured single that restored most aberrant
    phenotypes names the fault it undoes -- a gene whose BLOCK restores is
    locked high (LOCK_HI), one whose BOOST restores locked low (LOCK_LO), a
    signal whose activation restores is persistent... (PERSIST); a DAMPEN
    reads as LOCK_HI."""
    n = obs["targetable"].shape[-1]
    is_signal, gene, code, signal = best_measured_rescue(obs)
    target = jnp.where(is_signal, n + signal, gene)
    type_ = jnp.where(is_signal, PERSIST, jnp.where(code == BOOST, LOCK_LO, LOCK_HI))
    return target.astype(jnp.int32), type_.astype(jnp.int32)


def measured_rescue(obs: dict, target, type_):
    """:func:`best_measured_rescue`, whatever the diagnosis (the signature of
    the rescue rules that take one)."""
    return best_measured_rescue(obs)


def best_measured_rescue(obs: dict):
    """The measured single intervention that brought most aberrant phenotypes
    into range (ties: nearest 0.5). Returns (is_signal bool (), gene int32 (),
    code int32 (), signal int32 ()); with nothing measured, DAMPEN on the first
    targetable gene."""
    targetable = obs["targetable"].astype(bool)
    n = targetable.shape[-1]
    s = obs["signal_mask"].shape[-1]
    single = obs["single_mask"].astype(bool)
    aberrant = obs["aberrant"].astype(bool)
    options_phen = jnp.concatenate([obs["single_results"].reshape(3 * n, -1), obs["signal_results"]], axis=0)
    options_ok = jnp.concatenate([single.reshape(3 * n), obs["signal_mask"].astype(bool)])
    count = jnp.sum(scoring.in_healthy_range(options_phen) & aberrant[None, :], axis=-1)
    closeness = -jnp.sum(jnp.abs(options_phen - 0.5) * aberrant[None, :], axis=-1)
    top = jnp.max(jnp.where(options_ok, count, -1))
    choice = jnp.argmax(jnp.where(options_ok & (count == top), closeness, -jnp.inf))
    has_option = options_ok.any()
    is_signal = has_option & (choice >= 3 * n)
    gene = jnp.where(has_option, jnp.clip(choice // 3, 0, n - 1), jnp.argmax(targetable))
    code = jnp.where(has_option, choice % 3 + 1, DAMPEN)
    signal = jnp.clip(choice - 3 * n, 0, s - 1)
    return is_signal, gene.astype(jnp.int32), code.astype(jnp.int32), signal.astype(jnp.int32)


@dataclass(frozen=True)
class Analyst:
    """A named set of pure conclusions from one observation (see module doc)."""

    name: str
    predict: Callable[[dict], jax.Array]
    network: Callable[[dict], jax.Array]
    diagnose: Callable[[dict], tuple]
    rescue: Callable[[dict], tuple]


ANALYSTS = {
    a.name: a
    for a in (
        Analyst("logit-additive", logit_additive_prediction, network_from_singles, lock_signature_diagnosis, best_measured_rescue),
        Analyst("constant", constant_prediction, no_network, lock_signature_diagnosis, best_measured_rescue),
    )
}


def get(name: str) -> Analyst:
    """The analyst called ``name`` (ValueError lists the allowed names)."""
    if not isinstance(name, str) or name not in ANALYSTS:
        raise ValueError(f"analyst: {name!r} unknown; allowed {', '.join(ANALYSTS)}")
    return ANALYSTS[name]


assert (LOCK_HI + 1, DAMPEN) == (LOCK_LO, 3)  # the index arithmetic above relies on these codes
