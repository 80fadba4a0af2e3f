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

from luca_gym.worlds.luca.spec import ACCURACY_THRESHOLD, BLOCK, BOOST, N_PHENOTYPES, N_TASKS
from luca_gym.worlds.luca.types import OrganismArrays
from luca_gym.worlds.luca.generator.network import FAILED, OK, RUNNING, solve_rows
from luca_gym.worlds.luca.generator.tiers import Plan, TierParams
from luca_gym.worlds.luca.precision import matmul

TASK_CHUNK = 64  # joint interventions tried per round of the task search
TYPE_PAIRS = ((BLOCK, BLOCK), (BLOCK, BOOST), (BOOST, BLOCK), (BOOST, BOOST))
TYPE_COLUMNS = tuple((int(a == BOOST), int(b == BOOST)) for a, b in TYPE_PAIRS)  # rows of the effect table
SPILL_TIE = 0.05  # spills this close count as equally focused


def choose_tasks(p: Plan, t: TierParams, arrays: OrganismArrays, singles, key):
    """Two held-out, non-additive BLOCK/BOOST pairs of targetable readout genes
    from different modules that share a phenotype, whose joint outcome misses
    the sum of their single effects by more than the tier's ``task_residual``;
    where the organism has no two such pairs, by more than the 0.10 accuracy
    threshold (the guarantee). See :func:`search_tasks`."""
    first = search_tasks(p, t.task_residual, arrays, singles, key)
    return jax.lax.cond(
        first[0] == OK, lambda: first, lambda: search_tasks(p, jnp.float32(ACCURACY_THRESHOLD), arrays, singles, key)
    )


def search_tasks(p: Plan, floor, arrays: OrganismArrays, singles, key):
    """Two held-out pairs whose joint outcome misses the sum of the single
    effects by more than ``floor`` (at least the accuracy threshold), tried most
    focused first (below).
    ``singles`` are the phenotypes (at least 2N rows, P) of BLOCK, then BOOST,
    on each gene. Returns (status, baseline phenotypes (P,), baseline converged,
    task fields)."""
    n, s = p.n, p.n_signals
    base, base_conv = solve_rows(arrays, jnp.zeros((1, n), jnp.int8), jnp.zeros((1, s), bool))
    base = base[0]
    effect = singles[: 2 * n].reshape(2, n, N_PHENOTYPES) - base  # [BLOCK, BOOST]
    pool = arrays.readout_mask & ~arrays.latent_mask
    genes = jnp.arange(n)
    share = matmul((arrays.readout != 0).T.astype(jnp.int32), (arrays.readout != 0).astype(jnp.int32)) > 0
    pairs = pool[:, None] & pool[None, :] & (genes[:, None] < genes[None, :]) & share
    pairs &= arrays.module[:, None] != arrays.module[None, :]
    combos = jnp.broadcast_to(pairs[:, :, None], (n, n, len(TYPE_PAIRS))).reshape(-1)
    n_valid = combos.sum()
    # Focus (ours): candidates are tried in order of how far their single
    # effects spill onto the phenotypes the two genes do not share (least
    # first, ties within SPILL_TIE at random). A task's genes then move
    # their shared phenotype and little else, as the paper's random baseline
    # implies (0.633 on medium at N=20, exactly 2/3 from N=160 on); on dense
    # hard organisms even the most focused pair spills.
    reads = (arrays.readout != 0).T  # (N, P)
    apart = ~(reads[:, None, :] & reads[None, :, :])  # (N, N, P): phenotypes a pair does not share
    size = jnp.abs(effect)  # (2, N, P)
    spill = jnp.stack(
        [jnp.max(jnp.where(apart, size[i][:, None, :] + size[j][None, :, :], 0.0), axis=2) for i, j in TYPE_COLUMNS], axis=2
    ).reshape(-1)
    priority = jax.random.uniform(key, combos.shape) - spill / SPILL_TIE
    order = jnp.argsort(-jnp.where(combos, priority, -jnp.inf))
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
        # The sum of the single effects as a prediction: clipped into [0, 1] like any.
        additive = base + effect[(ta == BOOST).astype(jnp.int32), a] + effect[(tb == BOOST).astype(jnp.int32), b]
        good = combos[idx] & (start + rows < n_valid) & conv & (jnp.abs(joint - additive).max(axis=1) > jnp.maximum(floor, ACCURACY_THRESHOLD))

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
