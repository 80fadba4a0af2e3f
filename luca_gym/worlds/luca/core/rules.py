"""The session's rules (SPEC §2) as one table, from which both the legal-action
mask and the refusal codes derive.

:func:`refusals` lists, for every action kind, the conditions that refuse it,
in the order they are checked. A condition is either about the session alone
(budget, phase, mode: it decides the mask) or about what the action carries
(codes, targets, values: it can only refuse). :func:`legal_kinds` is "no
session condition holds"; :func:`refusal` is "the first condition that holds".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca.core.types import (
    COMMIT_DIAGNOSIS,
    END,
    ERROR_CODES,
    EXPERIMENT,
    N_KINDS,
    REVEAL_TASK,
    SUBMIT_NETWORK,
    SUBMIT_PREDICTION,
    TEST_RESCUE,
    Action,
    EnvParams,
    EnvState,
)
from luca_gym.worlds.luca.spec import DAMPEN, LOCK_HI, LOCK_LO, N_TASKS, PERSIST


def current_task(state: EnvState) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(index int32 (), has_task bool (), pending bool ()) of the task revealed
    last: ``pending`` while it has no prediction. ``index`` is 0 before any."""
    index = jnp.clip(state.tasks_revealed - 1, 0, N_TASKS - 1)
    has_task = state.tasks_revealed > 0
    return index, has_task, has_task & ~state.predicted[index]


def _intervention(state: EnvState, action: Action) -> list:
    """Conditions on the targets of an experiment or a rescue test."""
    codes = action.gene_codes.astype(jnp.int32)
    touched = codes != 0
    task_genes = state.organism.task_genes
    both = touched[task_genes[:, 0]] & touched[task_genes[:, 1]]
    return [
        (jnp.any((codes < 0) | (codes > DAMPEN)), "unknown_code"),
        (jnp.any(touched & state.organism.latent_mask), "latent_target"),
        (~jnp.any(touched) & ~jnp.any(action.signal_flags), "empty_intervention"),
        (jnp.any(both), "held_out_pair"),
    ]


def refusals(state: EnvState, params: EnvParams, action: Action | None = None) -> dict:
    """{kind: [(condition bool (), error name), ...]} in checking order.

    Without an action, only the session's conditions (those that decide the
    mask); with one, the action's conditions follow them.
    """
    index, has_task, pending = current_task(state)
    session = {
        EXPERIMENT: [(state.budget_left < params.experiment_cost, "budget_spent")],
        REVEAL_TASK: [(state.tasks_revealed >= N_TASKS, "no_task_left"), (pending, "prediction_pending")],
        SUBMIT_PREDICTION: [(~has_task, "no_current_task"), (state.predicted[index], "already_predicted")],
        SUBMIT_NETWORK: [],
        COMMIT_DIAGNOSIS: [(jnp.bool_(not params.disease), "healthy_mode"), (state.committed, "already_committed")],
        TEST_RESCUE: [
            (jnp.bool_(not params.disease), "healthy_mode"),
            (~state.committed, "not_committed"),
            (state.budget_left < params.rescue_cost, "budget_spent"),
        ],
        END: [],
    }
    if action is None:
        return session
    values = action.prediction
    net = action.network.astype(jnp.int32)
    n, s = params.n_genes, params.n_signals
    target, type_ = action.diagnosis_target, action.diagnosis_type
    is_gene = (target >= 0) & (target < n)
    is_signal = (target >= n) & (target < n + s)
    gene_ok = is_gene & ~state.organism.latent_mask[jnp.clip(target, 0, n - 1)] & ((type_ == LOCK_HI) | (type_ == LOCK_LO))
    carried = {
        EXPERIMENT: _intervention(state, action),
        REVEAL_TASK: [],
        SUBMIT_PREDICTION: [(~jnp.all(jnp.isfinite(values) & (values >= 0) & (values <= 1)), "bad_prediction")],
        SUBMIT_NETWORK: [(~jnp.all((net >= -1) & (net <= 1)), "bad_network")],
        COMMIT_DIAGNOSIS: [(~(gene_ok | (is_signal & (type_ == PERSIST))), "bad_diagnosis")],
        TEST_RESCUE: _intervention(state, action),
        END: [],
    }
    return {kind: session[kind] + carried[kind] for kind in session}


def _first(conditions: list) -> jax.Array:
    """int32 (): the code of the first condition that holds, 0 if none."""
    if not conditions:
        return jnp.int32(0)
    return jnp.select([c for c, _ in conditions], [ERROR_CODES[name] for _, name in conditions], 0)


def legal_kinds(state: EnvState, params: EnvParams) -> jax.Array:
    """bool (N_KINDS,): which action kinds are legal now (the action mask)."""
    table = refusals(state, params)
    return jnp.array([~state.ended & (_first(table[kind]) == 0) for kind in range(N_KINDS)])


def refusal(state: EnvState, action: Action, params: EnvParams) -> jax.Array:
    """int32 (): the refusal code of ``action`` in ``state`` (0: legal)."""
    table = refusals(state, params, action)
    by_kind = jnp.array([_first(table[kind]) for kind in range(N_KINDS)])
    kind = action.kind
    code = jnp.where((kind >= 0) & (kind < N_KINDS), by_kind[jnp.clip(kind, 0, N_KINDS - 1)], ERROR_CODES["unknown_kind"])
    return jnp.where(state.ended, ERROR_CODES["session_ended"], code).astype(jnp.int32)
