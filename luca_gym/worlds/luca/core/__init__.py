"""The LUCA session protocol (SPEC §2-3) as one pure, jit-compiled JAX core.

Every rule of a session lives here once: budget and costs, phases, the honesty
refusals, measurement noise, scoring and reward. The Gymnasium environments,
the functional API and the LLM tool interface are adapters over these
functions; none re-implements a rule.

* ``types`` -- :class:`EnvParams` (static settings), :class:`Action` and
  :func:`make_action` (the one place an action is checked and completed),
  :class:`EnvState`, the action kinds and refusal codes.
* ``rules`` -- one table of per-kind conditions; the legal-action mask and the
  refusal codes both derive from it.
* ``reward`` -- the scorer's composite paid out as the session goes.
* ``observation`` -- the observation and the hidden score breakdown.
* ``session`` -- :func:`reset` and :func:`step`, pure; ``keys`` -- noise keys.

Noise is a pure function of the session key (derived from the organism's
triple) and the measurement counter, so a replayed session reproduces exactly
and two repeats of one experiment differ. ``step`` therefore takes no key.
"""

from luca_gym.worlds.luca.core.keys import noise_key, noise_keys, traced_noise_keys
from luca_gym.worlds.luca.core.observation import observation_shapes, observe, session_scores
from luca_gym.worlds.luca.core.rules import current_task, legal_kinds, refusal
from luca_gym.worlds.luca.core.session import measure, reset, step
from luca_gym.worlds.luca.core.types import (
    ACTION_FIELDS,
    ACTION_KINDS,
    COMMIT_DIAGNOSIS,
    END,
    ERROR_CODES,
    ERROR_MESSAGES,
    ERRORS,
    EXPERIMENT,
    N_KINDS,
    REVEAL_TASK,
    SINGLE_TYPES,
    SUBMIT_NETWORK,
    SUBMIT_PREDICTION,
    TEST_RESCUE,
    Action,
    EnvParams,
    EnvState,
    action_shapes,
    make_action,
    make_params,
    parse_action,
)

__all__ = [
    "ACTION_FIELDS", "ACTION_KINDS", "COMMIT_DIAGNOSIS", "END", "ERRORS", "ERROR_CODES", "ERROR_MESSAGES",
    "EXPERIMENT", "N_KINDS", "REVEAL_TASK", "SINGLE_TYPES", "SUBMIT_NETWORK", "SUBMIT_PREDICTION",
    "TEST_RESCUE", "Action", "EnvParams", "EnvState", "action_shapes", "current_task",
    "legal_kinds", "make_action", "make_params", "measure", "noise_key", "noise_keys", "observation_shapes",
    "observe", "parse_action", "refusal", "reset", "session_scores", "step", "traced_noise_keys",
]
