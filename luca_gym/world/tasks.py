"""Prediction tasks (SPEC 1.7): joint interventions whose effect the agent must
predict.

A task is a BLOCK/BOOST pair on two targetable readout genes from different
modules that share a phenotype, held out of the experiments, and non-additive:
its joint effect differs from the sum of the single effects by more than the
accuracy threshold (so predicting the sum fails). Candidates are tried in
random order, TASK_CHUNK at a time, inside a ``lax.while_loop``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from luca_gym.spec import ACCURACY_THRESHOLD, BLOCK, BOOST, N_PHENOTYPES, N_TASKS
from luca_gym.types import OrganismArrays
from luca_gym.world.network import FAILED, OK, RUNNING, solve_rows
from luca_gym.world.tiers import Plan

TASK_CHUNK = 64  # joint interventions tried per round of the task search
TYPE_PAIRS = ((BLOCK, BLOCK), (BLOCK, BOOST), (BOOST, BLOCK), (BOOST, BOOST))


def choose_tasks(p: Plan, arrays: OrganismArrays, singles, key):
    """Two held-out, non-additive BLOCK/BOOST pairs of targetable readout genes
    from different modules that share a phenotype, tried in random order.
    ``singles`` are the phenotypes (at least 2N rows, P) of BLOCK, then BOOST,
    on each gene. Returns (status, baseline phenotypes (P,), baseline converged,
    task fields)."""
    n, s = p.n, p.n_signals
    base, base_conv = solve_rows(arrays, jnp.zeros((1, n), jnp.int8), jnp.zeros((1, s), bool))
    base = base[0]
    effect = singles[: 2 * n].reshape(2, n, N_PHENOTYPES) - base  # [BLOCK, BOOST]
    pool = arrays.readout_mask & ~arrays.latent_mask
    genes = jnp.arange(n)
    share = ((arrays.readout != 0).T.astype(jnp.int32) @ (arrays.readout != 0).astype(jnp.int32)) > 0
    pairs = pool[:, None] & pool[None, :] & (genes[:, None] < genes[None, :]) & share
    pairs &= arrays.module[:, None] != arrays.module[None, :]
    combos = jnp.broadcast_to(pairs[:, :, None], (n, n, len(TYPE_PAIRS))).reshape(-1)
    n_valid = combos.sum()
    order = jnp.argsort(-jnp.where(combos, jax.random.uniform(key, combos.shape), -1.0))
    pad = -order.size % TASK_CHUNK
    order = jnp.concatenate([order, jnp.zeros(pad, order.dtype)])  # combo 0 (gene 0 with itself) is never valid
    type_pairs = jnp.asarray(TYPE_PAIRS, jnp.int8)
    rows = jnp.arange(TASK_CHUNK)

    def body(carry):
        start, count, _, genes_, codes_, truth_ = carry
        idx = jax.lax.dynamic_slice(order, (start,), (TASK_CHUNK,))
        a, b, ti = idx // (n * len(TYPE_PAIRS)), (idx // len(TYPE_PAIRS)) % n, idx % len(TYPE_PAIRS)
        ta, tb = type_pairs[ti, 0], type_pairs[ti, 1]
        codes = jnp.zeros((TASK_CHUNK, n), jnp.int8).at[rows, a].set(ta).at[rows, b].set(tb)
        joint, conv = solve_rows(arrays, codes, jnp.zeros((TASK_CHUNK, s), bool))
        additive = base + effect[(ta == BOOST).astype(jnp.int32), a] + effect[(tb == BOOST).astype(jnp.int32), b]
        good = combos[idx] & (start + rows < n_valid) & conv & (jnp.abs(joint - additive).max(axis=1) > ACCURACY_THRESHOLD)

        def accept(k, acc):
            count, genes_, codes_, truth_ = acc
            repeat = (count > 0) & (genes_[0, 0] == a[k]) & (genes_[0, 1] == b[k])
            take = good[k] & (count < N_TASKS) & ~repeat
            slot = jnp.minimum(count, N_TASKS - 1)
            genes_ = jnp.where(take, genes_.at[slot].set(jnp.stack([a[k], b[k]]).astype(jnp.int32)), genes_)
            codes_ = jnp.where(take, codes_.at[slot].set(jnp.stack([ta[k], tb[k]])), codes_)
            truth_ = jnp.where(take, truth_.at[slot].set(joint[k]), truth_)
            return count + take, genes_, codes_, truth_

        count, genes_, codes_, truth_ = jax.lax.fori_loop(0, TASK_CHUNK, accept, (count, genes_, codes_, truth_))
        start = start + TASK_CHUNK
        status = jnp.where(count == N_TASKS, OK, jnp.where(start < n_valid, RUNNING, FAILED))
        return start, count, status, genes_, codes_, truth_

    init = (
        jnp.int32(0), jnp.int32(0), jnp.where(n_valid > 0, RUNNING, FAILED),
        jnp.zeros((N_TASKS, 2), jnp.int32), jnp.zeros((N_TASKS, 2), jnp.int8), jnp.zeros((N_TASKS, N_PHENOTYPES), jnp.float32),
    )
    _, _, status, task_genes, task_codes, task_truth = jax.lax.while_loop(lambda c: c[2] == RUNNING, body, init)
    return status, base, base_conv[0], dict(task_genes=task_genes, task_codes=task_codes, task_truth=task_truth)
