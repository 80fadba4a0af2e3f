"""What an agent may know (the observation) and what it may know only once the
session has ended (the score breakdown)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import scoring, sim
from luca_gym.worlds.luca.core.rules import current_task, legal_kinds
from luca_gym.worlds.luca.core.types import ERRORS, N_KINDS, SINGLE_TYPES, EnvParams, EnvState
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, HEALTHY_RANGE, N_PHENOTYPES, N_TASKS


def observe(state: EnvState, params: EnvParams) -> dict:
    """The observation: only what an agent may know (no weights, latent states,
    malfunction, task answers or scores). Shapes in :func:`observation_shapes`."""
    o = state.organism
    current, has_task, _ = current_task(state)
    return {
        "budget_left": state.budget_left,
        "baseline_phenotypes": state.baseline_phenotypes,
        "healthy_range": jnp.tile(jnp.array(HEALTHY_RANGE, jnp.float32), (N_PHENOTYPES, 1)),
        "aberrant": o.aberrant,
        "targetable": ~o.latent_mask,
        "last_phenotypes": state.last_phenotypes,
        "last_converged": state.last_converged,
        "last_steps": state.last_steps,
        "last_in_range": state.last_in_range,
        "last_restored_fraction": state.last_restored_fraction,
        "last_error": state.last_error,
        "single_results": state.single_results,
        "single_mask": state.single_mask,
        "signal_results": state.signal_results,
        "signal_mask": state.signal_mask,
        "task_index": jnp.where(has_task, current, -1).astype(jnp.int32),
        "task_genes": jnp.where(has_task, o.task_genes[current], -1).astype(jnp.int32),
        "task_codes": jnp.where(has_task, o.task_codes[current], 0).astype(jnp.int8),
        "predicted": state.predicted,
        "diagnosis_committed": state.committed,
        "network_submitted": state.network_submitted,
        "ended": state.ended,
        "action_mask": legal_kinds(state, params),
    }


def observation_shapes(params: EnvParams) -> dict:
    """{name: (shape, dtype, low, high)} of every observation field."""
    n, s, p, t = params.n_genes, params.n_signals, N_PHENOTYPES, N_TASKS
    f, i, b, i8 = np.float32, np.int32, np.bool_, np.int8
    return {
        "budget_left": ((), i, 0, params.budget),
        "baseline_phenotypes": ((p,), f, 0.0, 1.0),
        "healthy_range": ((p, 2), f, 0.0, 1.0),
        "aberrant": ((p,), b, 0, 1),
        "targetable": ((n,), b, 0, 1),
        "last_phenotypes": ((p,), f, 0.0, 1.0),
        "last_converged": ((), b, 0, 1),
        "last_steps": ((), i, 0, sim.MAX_UPDATES),
        "last_in_range": ((p,), b, 0, 1),
        "last_restored_fraction": ((), f, 0.0, 1.0),
        "last_error": ((), i, 0, len(ERRORS) - 1),
        "single_results": ((n, len(SINGLE_TYPES), p), f, 0.0, 1.0),
        "single_mask": ((n, len(SINGLE_TYPES)), b, 0, 1),
        "signal_results": ((s, p), f, 0.0, 1.0),
        "signal_mask": ((s,), b, 0, 1),
        "task_index": ((), i, -1, t - 1),
        "task_genes": ((2,), i, -1, n - 1),
        "task_codes": ((2,), i8, 0, DAMPEN),
        "predicted": ((t,), b, 0, 1),
        "diagnosis_committed": ((), b, 0, 1),
        "network_submitted": ((), b, 0, 1),
        "ended": ((), b, 0, 1),
        "action_mask": ((N_KINDS,), b, 0, 1),
    }


@partial(jax.jit, static_argnames=("params", "network"))
def session_scores(state: EnvState, params: EnvParams, network: bool = True) -> dict:
    """The hidden score breakdown of a session (SPEC §3). Adapters show it only
    once ``state.ended``. Network truth is solved here (2N noise-free solves);
    ``network=False`` returns the four headline scores only (cheap, batched use)."""
    o = state.organism
    n = params.n_genes
    prediction = scoring.prediction_accuracy(state.predictions, o.task_truth, state.predicted)
    diagnosis = scoring.diagnosis_score(state.diagnosis_target, state.diagnosis_type, o.malfunction_target, o.malfunction_type)
    rescue = scoring.rescue_score(state.best_rescue, state.n_rescues)
    composite = scoring.composite_score(params.disease, prediction, diagnosis, rescue)
    if not network:
        return {"composite": composite, "prediction": prediction, "diagnosis": diagnosis, "rescue": rescue}
    eye = jnp.eye(n, dtype=jnp.int8)
    no_signal = jnp.zeros((n, params.n_signals), bool)
    block = sim.solve_interventions(o, eye * BLOCK, no_signal).phenotypes
    boost = sim.solve_interventions(o, eye * BOOST, no_signal).phenotypes
    truth = scoring.network_truth(o.baseline_phenotypes, block, boost)
    edges = scoring.network_scores(state.network, truth, ~o.latent_mask)
    strategy = scoring.strategy_metrics(
        state.history_codes,
        state.history_signals,
        state.history_kind,
        state.n_history,
        params.budget,
        ~o.latent_mask,
        state.commit_used,
    )
    return {
        "composite": composite,
        "prediction": prediction,
        "diagnosis": diagnosis,
        "rescue": rescue,
        "task_scores": scoring.task_scores(state.predictions, o.task_truth, state.predicted),
        "network_precision": edges["precision"],
        "network_recall": edges["recall"],
        "network_f1": edges["f1"],
        **strategy,
        "n_alt": o.n_alt,
        "malfunction_target": o.malfunction_target,
        "malfunction_type": o.malfunction_type,
        "n_experiments": jnp.sum(state.history_kind == scoring.HISTORY_EXPERIMENT),
        "n_rescue_tests": state.n_rescues,
    }
