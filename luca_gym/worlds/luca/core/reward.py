"""The reward: the scorer's composite paid out as the session goes, so an
episode's undiscounted return equals its composite score (SPEC §3).

Each task's prediction credit is paid when it is submitted; diagnosis and
rescue credit when the session closes. The metric weights come from
:func:`luca_gym.worlds.luca.scoring.composite_terms`. Optional potential-based shaping
pays gamma * Phi(s') - Phi(s) on every accepted call (Phi: gene coverage,
zero once the session has closed), so at gamma = 1 it telescopes to zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import scoring
from luca_gym.worlds.luca.core.types import EnvParams, EnvState
from luca_gym.worlds.luca.spec import N_TASKS


def prediction_reward(task_score: jax.Array, params: EnvParams) -> jax.Array:
    """float32 (): the credit of one task's prediction score."""
    return task_score * (1.0 / (N_TASKS * scoring.composite_terms(params.disease)))


def shaping_potential(state: EnvState, params: EnvParams) -> jax.Array:
    """float32 (): the shaping potential, scale x gene coverage of the experiments."""
    coverage = scoring.gene_coverage(state.history_codes, state.history_kind, state.n_history, ~state.organism.latent_mask)
    return params.shaping_scale * coverage


def shaping_reward(state: EnvState, new: EnvState, accepted, closing, params: EnvParams):
    """(reward float32 (), potential float32 ()): gamma * Phi(new) - Phi(state)
    where the call was accepted or closed the session (Phi = 0 once closed);
    0 and the old potential otherwise."""
    potential = jnp.where(closing, 0.0, shaping_potential(new, params))
    paid = accepted | closing
    return jnp.where(paid, params.shaping_gamma * potential - state.shaping, 0.0), jnp.where(paid, potential, state.shaping)


def close_reward(state: EnvState, params: EnvParams) -> jax.Array:
    """float32 (): paid when the session closes: diagnosis and rescue credit
    (disease mode; nothing in healthy mode)."""
    if not params.disease:
        return jnp.float32(0.0)
    o = state.organism
    diagnosis = scoring.diagnosis_score(state.diagnosis_target, state.diagnosis_type, o.malfunction_target, o.malfunction_type)
    rescue = scoring.rescue_score(state.best_rescue, state.n_rescues)
    return (diagnosis + rescue) / scoring.composite_terms(True)
