"""Disease mode (SPEC 1.6): one malfunction on a settled healthy organism.

A malfunction locks a targetable gene high or low, or keeps a signal on. It is
chosen among the candidates that send a phenotype out of the healthy range and
that some single-target intervention rescues, nearest first to the tier's
severity (how far past the healthy edge its phenotypes typically sit: just
past on easy, far past on hard; paper Table 8's random rescue, 0.525 / 0.200 /
0.058, is how often an arbitrary single intervention undoes it); ``n_alt``
counts the other candidates no phenotype tells apart from it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, HEALTHY_RANGE, LOCK_HI, LOCK_LO, PERSIST, n_alt_tolerance
from luca_gym.worlds.luca.types import OrganismArrays
from luca_gym.worlds.luca.generator.network import FAILED, OK, RUNNING, single_interventions, solve_rows
from luca_gym.worlds.luca.generator.tiers import Plan, TierParams

SEVERITY_TIE = 0.01  # excesses this close count as equally near the tier's severity


def with_malfunction(p: Plan, arrays: OrganismArrays, candidate) -> OrganismArrays:
    """Candidate c of the layout [LOCK_HI on genes | LOCK_LO on genes | PERSIST
    on signals] applied to ``arrays``."""
    n, s = p.n, p.n_signals
    kind = jnp.where(candidate < n, LOCK_HI, jnp.where(candidate < 2 * n, LOCK_LO, PERSIST))
    target = jnp.where(candidate < n, candidate, candidate - n)  # genes 0..N-1, signals N..
    lock = jnp.where((jnp.arange(n) == target) & (kind != PERSIST), kind, 0).astype(jnp.int8)
    persist = (jnp.arange(s) == candidate - 2 * n) & (kind == PERSIST)
    return dataclasses.replace(
        arrays, gene_lock=lock, signal_persist=persist,
        malfunction_target=target.astype(jnp.int32), malfunction_type=kind.astype(jnp.int32),
    )


def choose_malfunction(p: Plan, t: TierParams, arrays: OrganismArrays, singles, key):
    """A malfunction that sends a phenotype out of range and that some
    single-target intervention rescues; candidates are tried in order of how
    near their distance past the healthy edge is to the tier's
    ``malfunction_excess`` (mild on easy, severe on hard), ties at random.
    ``singles`` are the healthy phenotypes (2N + S, P) of BLOCK, BOOST on each
    gene and each signal alone. Returns (status, diseased arrays, n_alt)."""
    n, s = p.n, p.n_signals
    targetable = ~arrays.latent_mask
    # A lock is a clamp, so each candidate's disease phenotypes are those of a
    # single intervention already solved: LOCK_HI = BOOST, LOCK_LO = BLOCK.
    phen = jnp.concatenate([singles[n : 2 * n], singles[:n], singles[2 * n :]])
    valid = jnp.concatenate([targetable, targetable, jnp.ones(s, bool)])
    low, high = HEALTHY_RANGE
    out = (phen < low) | (phen > high)
    eligible = valid & out.any(axis=1)
    # Severity (ours): candidates are tried nearest first to the tier's
    # typical distance past the healthy edge, ties within ~0.01 in random order.
    excess = jnp.max(jnp.maximum(low - phen, phen - high), axis=1)
    priority = jax.random.uniform(key, eligible.shape) - jnp.abs(excess - t.malfunction_excess) / SEVERITY_TIE
    order = jnp.argsort(-jnp.where(eligible, priority, -jnp.inf))
    codes, flags = single_interventions(n, s, (BLOCK, BOOST, DAMPEN))
    row_valid = jnp.concatenate([targetable, targetable, targetable, jnp.ones(s, bool)])

    def body(carry):
        j, _, _ = carry
        c = order[j]
        rescued, conv = solve_rows(with_malfunction(p, arrays, c), codes, flags)
        restored = (rescued >= low) & (rescued <= high) & out[c] & row_valid[:, None]
        ok = (conv | ~row_valid).all() & restored.any()
        status = jnp.where(ok, OK, jnp.where(j + 1 < eligible.sum(), RUNNING, FAILED))
        return j + 1, status, c

    init_status = jnp.where(eligible.any(), RUNNING, FAILED)
    _, status, c = jax.lax.while_loop(lambda x: x[1] == RUNNING, body, (jnp.int32(0), init_status, jnp.int32(0)))
    n_alt = jnp.sum(valid & (jnp.abs(phen - phen[c]).max(axis=1) <= n_alt_tolerance(t.noise_sigma))) - 1
    return status, with_malfunction(p, arrays, c), n_alt.astype(jnp.int32)
