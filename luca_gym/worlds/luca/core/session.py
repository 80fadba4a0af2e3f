"""Opening a session and applying one action: pure, jit-compiled, vmappable.

An illegal action returns the state unchanged except ``last_error``, with
reward 0: the rules in :mod:`luca_gym.worlds.luca.core.rules` decide,
this module applies.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import scoring, sim
from luca_gym.worlds.luca.core import reward as rewards
from luca_gym.worlds.luca.core.observation import observe
from luca_gym.worlds.luca.core.rules import current_task, refusal
from luca_gym.worlds.luca.core.types import (
    COMMIT_DIAGNOSIS,
    END,
    EXPERIMENT,
    REVEAL_TASK,
    SINGLE_TYPES,
    SUBMIT_NETWORK,
    SUBMIT_PREDICTION,
    TEST_RESCUE,
    Action,
    EnvParams,
    EnvState,
)
from luca_gym.worlds.luca.spec import N_PHENOTYPES, N_TASKS, NO_MALFUNCTION
from luca_gym.worlds.luca.types import OrganismArrays, SteadyState


def measure(noise_key, count, organism: OrganismArrays, codes, flags) -> tuple[SteadyState, jax.Array]:
    """Solve, then measure with the noise of measurement number ``count``:
    (noise-free steady state, noisy phenotypes float32 (P,))."""
    result = sim.solve(organism, codes, flags)
    noisy = sim.measure(jax.random.fold_in(noise_key, count), organism, result.states)
    return result, noisy


@partial(jax.jit, static_argnames=("params",))
def reset(key: jax.Array, organism: OrganismArrays, params: EnvParams) -> tuple[dict, EnvState]:
    """Open a session on ``organism``; ``key`` seeds its measurement noise.
    Returns (observation, state). The baseline is measurement number 0."""
    n, s, p, h = params.n_genes, params.n_signals, N_PHENOTYPES, params.budget
    if organism.n_genes != n or organism.n_signals != s:
        raise ValueError(f"organism: size ({organism.n_genes} genes, {organism.n_signals} signals) does not match params ({n}, {s})")
    _, baseline = measure(key, 0, organism, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool))
    f32, i32 = jnp.float32, jnp.int32
    state = EnvState(
        organism=organism,
        noise_key=key,
        budget_left=i32(params.budget),
        measure_count=i32(1),
        step_count=i32(0),
        baseline_phenotypes=baseline,
        last_phenotypes=baseline,
        last_converged=jnp.bool_(True),
        last_steps=i32(0),
        last_in_range=scoring.in_healthy_range(baseline),
        last_restored_fraction=f32(0.0),
        last_error=i32(0),
        single_results=jnp.zeros((n, len(SINGLE_TYPES), p), f32),
        single_mask=jnp.zeros((n, len(SINGLE_TYPES)), bool),
        signal_results=jnp.zeros((s, p), f32),
        signal_mask=jnp.zeros(s, bool),
        tasks_revealed=i32(0),
        predictions=jnp.zeros((N_TASKS, p), f32),
        predicted=jnp.zeros(N_TASKS, bool),
        committed=jnp.bool_(False),
        diagnosis_target=i32(-1),
        diagnosis_type=i32(NO_MALFUNCTION),
        best_rescue=f32(0.0),
        n_rescues=i32(0),
        network=jnp.zeros((n, p), jnp.int8),
        network_submitted=jnp.bool_(False),
        history_codes=jnp.zeros((h, n), jnp.int8),
        history_signals=jnp.zeros((h, s), bool),
        history_kind=jnp.full(h, scoring.HISTORY_EMPTY, jnp.int8),
        n_history=i32(0),
        commit_used=i32(-1),
        ended=jnp.bool_(False),
        truncated=jnp.bool_(False),
        shaping=f32(0.0),
    )
    return observe(state, params), state


def _single_tables(state: EnvState, measured_experiment, codes, flags, noisy) -> dict:
    """The single-target tables after an experiment: one gene and no signal, or
    one signal and no gene, records its measurement."""
    touched = codes != 0
    n_genes_hit, n_signals_hit = jnp.sum(touched), jnp.sum(flags)
    single_gene = measured_experiment & (n_genes_hit == 1) & (n_signals_hit == 0)
    gene = jnp.argmax(touched)
    column = jnp.clip(codes[gene].astype(jnp.int32) - 1, 0, len(SINGLE_TYPES) - 1)
    single_signal = measured_experiment & (n_genes_hit == 0) & (n_signals_hit == 1)
    signal = jnp.argmax(flags)
    return dict(
        single_results=jnp.where(single_gene, state.single_results.at[gene, column].set(noisy), state.single_results),
        single_mask=jnp.where(single_gene, state.single_mask.at[gene, column].set(True), state.single_mask),
        signal_results=jnp.where(single_signal, state.signal_results.at[signal].set(noisy), state.signal_results),
        signal_mask=jnp.where(single_signal, state.signal_mask.at[signal].set(True), state.signal_mask),
    )


def _history(state: EnvState, params: EnvParams, measured, is_experiment, codes, flags) -> dict:
    """The costed-call log read by the strategy metrics."""
    row = jnp.clip(state.n_history, 0, params.budget - 1)
    kind_code = jnp.where(is_experiment, scoring.HISTORY_EXPERIMENT, scoring.HISTORY_RESCUE).astype(jnp.int8)
    return dict(
        history_codes=jnp.where(measured, state.history_codes.at[row].set(codes), state.history_codes),
        history_signals=jnp.where(measured, state.history_signals.at[row].set(flags), state.history_signals),
        history_kind=jnp.where(measured, state.history_kind.at[row].set(kind_code), state.history_kind),
        n_history=state.n_history + measured.astype(jnp.int32),
    )


@dataclasses.dataclass(frozen=True)
class _Call:
    """What a call brings to its kind's handler: ``on`` (this kind, accepted),
    the measurement of an experiment or rescue (noise-free steady state, noisy
    phenotypes, the codes and flags applied) and the current task."""

    on: jax.Array
    result: SteadyState
    noisy: jax.Array
    codes: jax.Array
    flags: jax.Array
    task: jax.Array


# One handler per action kind: (state, action, params, call) -> (the fields it
# changes when ``call.on``, the reward it pays or None). The rules table
# (core.rules) decides whether a call is accepted; a handler only applies it.
def _on_experiment(state: EnvState, action: Action, params: EnvParams, c: _Call):
    return _single_tables(state, c.on, c.codes, c.flags, c.noisy), None


def _on_rescue(state: EnvState, action: Action, params: EnvParams, c: _Call):
    # The agent sees its measurement; the score uses the noise-free truth.
    o = state.organism
    measured_fraction = scoring.restored_fraction(c.noisy, o.aberrant)
    true_fraction = scoring.restored_fraction(c.result.phenotypes, o.aberrant)
    return dict(
        last_restored_fraction=jnp.where(c.on, measured_fraction, state.last_restored_fraction),
        best_rescue=jnp.where(c.on, jnp.maximum(state.best_rescue, true_fraction), state.best_rescue),
        n_rescues=state.n_rescues + c.on.astype(jnp.int32),
    ), None


def _on_reveal(state: EnvState, action: Action, params: EnvParams, c: _Call):
    spent = params.budget - state.budget_left
    return dict(
        tasks_revealed=state.tasks_revealed + c.on.astype(jnp.int32),
        commit_used=jnp.where(c.on & (state.commit_used < 0), spent, state.commit_used),
    ), None


def _on_prediction(state: EnvState, action: Action, params: EnvParams, c: _Call):
    # Per-task credit paid at submission.
    task_score = scoring.task_scores(action.prediction[None], state.organism.task_truth[c.task][None], jnp.ones(1, bool))[0]
    return dict(
        predictions=jnp.where(c.on, state.predictions.at[c.task].set(action.prediction), state.predictions),
        predicted=jnp.where(c.on, state.predicted.at[c.task].set(True), state.predicted),
    ), jnp.where(c.on, rewards.prediction_reward(task_score, params), 0.0)


def _on_commit(state: EnvState, action: Action, params: EnvParams, c: _Call):
    return dict(
        committed=state.committed | c.on,
        diagnosis_target=jnp.where(c.on, action.diagnosis_target, state.diagnosis_target),
        diagnosis_type=jnp.where(c.on, action.diagnosis_type, state.diagnosis_type),
    ), None


def _on_network(state: EnvState, action: Action, params: EnvParams, c: _Call):
    return dict(
        network=jnp.where(c.on, action.network.astype(jnp.int8), state.network),
        network_submitted=state.network_submitted | c.on,
    ), None


def _on_end(state: EnvState, action: Action, params: EnvParams, c: _Call):
    return {}, None  # closing is the same for END and the call limit: applied in step


HANDLERS = {
    EXPERIMENT: _on_experiment,
    TEST_RESCUE: _on_rescue,
    REVEAL_TASK: _on_reveal,
    SUBMIT_PREDICTION: _on_prediction,
    COMMIT_DIAGNOSIS: _on_commit,
    SUBMIT_NETWORK: _on_network,
    END: _on_end,
}


def _measured_fields(state: EnvState, params: EnvParams, is_experiment, is_rescue, result: SteadyState, noisy, codes, flags) -> dict:
    """What every measurement changes (an experiment's or a rescue's): budget, counters, the last reading, the log."""
    measured = is_experiment | is_rescue
    cost = jnp.where(is_experiment, params.experiment_cost, 0) + jnp.where(is_rescue, params.rescue_cost, 0)
    return dict(
        budget_left=state.budget_left - cost,
        measure_count=state.measure_count + measured.astype(jnp.int32),
        last_phenotypes=jnp.where(measured, noisy, state.last_phenotypes),
        last_converged=jnp.where(measured, result.converged, state.last_converged),
        last_steps=jnp.where(measured, result.steps, state.last_steps),
        last_in_range=jnp.where(measured, scoring.in_healthy_range(noisy), state.last_in_range),
        **_history(state, params, measured, is_experiment, codes, flags),
    )


@partial(jax.jit, static_argnames=("params",))
def step(state: EnvState, action: Action, params: EnvParams):
    """Apply ``action``. Returns (observation, state, reward, terminated,
    truncated, info) with ``info = {"error": int32 code}``.

    The rules decide (:func:`~luca_gym.worlds.luca.core.rules.refusal`); the
    kind's handler in :data:`HANDLERS` applies an accepted call. An illegal
    action returns the state unchanged except ``last_error``, with reward 0:
    it costs nothing, counts toward nothing and never closes the session.
    """
    o = state.organism
    kind = action.kind
    error = refusal(state, action, params)
    ok = error == 0
    on = {k: ok & (kind == k) for k in HANDLERS}
    measured = on[EXPERIMENT] | on[TEST_RESCUE]
    codes = jnp.where(measured, action.gene_codes, 0).astype(jnp.int8)
    flags = action.signal_flags & measured
    # Free calls skip the solver (under vmap the cond becomes a select).
    result, noisy = jax.lax.cond(
        measured,
        lambda: measure(state.noise_key, state.measure_count, o, codes, flags),
        lambda: (
            SteadyState(states=o.baseline_state, phenotypes=state.last_phenotypes, converged=jnp.bool_(True), steps=jnp.int32(0)),
            state.last_phenotypes,
        ),
    )
    current, _, _ = current_task(state)
    fields = _measured_fields(state, params, on[EXPERIMENT], on[TEST_RESCUE], result, noisy, codes, flags)
    paid = []
    for k, handler in HANDLERS.items():
        changed, reward = handler(state, action, params, _Call(on[k], result, noisy, codes, flags, current))
        fields.update(changed)
        paid += [] if reward is None else [reward]
    reward = sum(paid[1:], paid[0])
    # Only accepted calls count toward max_steps: a refused call changes nothing.
    step_count = state.step_count + ok.astype(jnp.int32)
    new = dataclasses.replace(state, **fields)
    # A valid END closes the session (terminated); the max_steps-th accepted
    # call closes it too (truncated), after it has been applied. Either way the
    # closing credit is paid once. A refused call never closes a session.
    terminated = on[END]
    truncated = ok & ~state.ended & ~terminated & (step_count >= params.max_steps)
    closing = terminated | truncated
    if params.dense_shaping:
        shaping, potential = rewards.shaping_reward(state, new, ok, closing, params)
        reward = reward + shaping
        new = dataclasses.replace(new, shaping=potential)
    reward = reward + jnp.where(closing, rewards.close_reward(new, params), 0.0)
    new = dataclasses.replace(new, ended=state.ended | closing, truncated=state.truncated | truncated)
    # An illegal action changes nothing but the error code.
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, state)
    new = dataclasses.replace(new, step_count=step_count, last_error=error)
    return observe(new, params), new, reward.astype(jnp.float32), terminated, truncated, {"error": error}
