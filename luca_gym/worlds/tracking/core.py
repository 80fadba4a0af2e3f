"""The tracking world's pure core (``World.core``, :class:`luca_gym.protocol.Core`):
instances from seeds, the change rule, the scorer, ``reset`` / a jitted
``step`` on a typed :class:`Action`, what an agent sees and the spaces.

An instance is the observation matrix X, int32 (M, N): row 0 draws each
node's colour uniformly from 0..C-1; each later row keeps a node's colour, or
with probability ``change_prob`` changes it to one of the other C-1 colours
(uniformly). The truth is Y = :func:`changes` (X), bool (M-1, N). Only the
shapes (M, N) are static: one compiled ``step`` serves every instance, every
colour count, change probability and prompt condition of a shape. The
generic layers build the rest on it: the Gymnasium env
(:class:`luca_gym.envs.core.CoreEnv`, whose one step submits Y) and the tool
session (:mod:`luca_gym.tools.table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from luca_gym.validate import check_seed

ROOT_KEY = 0x7AC4  # the root of every instance key
SUBMIT, END, OBSERVE = 0, 1, 2  # step kinds: submit Y (ends), end without an answer, read X (free)
ERRORS = ("", "the session has ended")  # by error code


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """One action.

    Attributes:
        kind: int32 (): SUBMIT, END or OBSERVE.
        changes: bool (M-1, N): the Y submitted (read by SUBMIT only).
    """

    kind: jax.Array
    changes: jax.Array

    @classmethod
    def make(cls, kind: int, config, changes=None) -> "Action":
        """An action of ``kind`` under ``config``; ``changes`` (0/1, (M-1, N)) for SUBMIT, else none."""
        changes = np.zeros(config.shape, bool) if changes is None else np.asarray(changes, bool)
        return cls(np.int32(kind), changes)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class TrackingState:
    """One session.

    Attributes:
        observations: int32 (M, N): X, the trajectory the agent is shown.
        ended: bool (): a submission or ``end`` has closed the session.
        exact: float32 (): 1.0 iff the submitted Y is right in every cell (0 until submitted).
        trajectory_accuracy: float32 (): the fraction of the M-1 rows of Y submitted right.
        cell_accuracy: float32 (): the fraction of the (M-1) x N cells submitted right.
        position_correct: float32 (M-1,): 1.0 where a row of Y was submitted right.
    """

    observations: jax.Array
    ended: jax.Array
    exact: jax.Array
    trajectory_accuracy: jax.Array
    cell_accuracy: jax.Array
    position_correct: jax.Array


@partial(jax.jit, static_argnames=("length", "n_nodes"))
def _draw(seed_words, n_colors, change_prob, *, length: int, n_nodes: int) -> jax.Array:
    """X, int32 (length, n_nodes), of the seed split into two uint32 words (uint32 (2,))."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(ROOT_KEY), seed_words[0]), seed_words[1])
    k_first, k_change, k_shift = jax.random.split(key, 3)
    first = jax.random.randint(k_first, (n_nodes,), 0, n_colors, jnp.int32)
    change = jax.random.bernoulli(k_change, change_prob, (length - 1, n_nodes))
    shift = jax.random.randint(k_shift, (length - 1, n_nodes), 1, n_colors, jnp.int32)  # never 0: a change changes

    def next_row(row, drawn):
        changed, by = drawn
        row = jnp.where(changed, (row + by) % n_colors, row)
        return row, row

    _, rest = jax.lax.scan(next_row, first, (change, shift))
    return jnp.concatenate([first[None], rest])


def instance(seed: int, config, seal=None) -> jax.Array:
    """X, int32 (M, N), of instance ``seed`` under ``config`` (a
    :class:`~luca_gym.worlds.tracking.config.TrackingConfig`); sealed
    (:mod:`luca_gym.seal`), of its sealed seed."""
    seed = check_seed(seed) if seal is None else seal.organism_seed(seed)
    words = np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)
    return _draw(words, np.int32(config.n_colors), np.float32(config.change_prob), length=config.length, n_nodes=config.n_nodes)


def changes(observations: jax.Array) -> jax.Array:
    """Y, bool (M-1, N): Y[i, j] iff node j's colour differs between rows i and i+1 of X (int (M, N))."""
    return observations[1:] != observations[:-1]


def score(observations: jax.Array, guess: jax.Array):
    """The scores of ``guess`` (bool (M-1, N)) against Y of ``observations``
    (int (M, N)): (exact, trajectory_accuracy, cell_accuracy) float32 () and
    position_correct float32 (M-1,)."""
    right = guess == changes(observations)
    rows = right.all(axis=1)
    return (rows.all().astype(jnp.float32), rows.mean(dtype=jnp.float32), right.mean(dtype=jnp.float32),
            rows.astype(jnp.float32))


def reset(observations: jax.Array, config=None) -> TrackingState:
    """A fresh session on X (int32 (M, N)): open, nothing submitted, every
    score 0 (``config`` is not read: X holds the shape)."""
    zero = jnp.float32(0.0)
    return TrackingState(jnp.asarray(observations, jnp.int32), jnp.bool_(False), zero, zero, zero,
                         jnp.zeros(observations.shape[0] - 1, jnp.float32))


def step(state: TrackingState, action: Action, config=None):
    """One :class:`Action`. Returns (state, reward float32 (), error int32
    ()). SUBMIT scores ``action.changes`` and ends the session, its reward
    the exact score, so a session's return is its headline; END ends it with
    every score 0; OBSERVE changes nothing. Any action on an ended session is
    refused (error 1): it changes nothing and its reward is 0. ``config`` is
    not read (the state holds the shape; no other setting acts here)."""
    return _step(state, action.kind, action.changes)


@jax.jit
def _step(state: TrackingState, kind, guess):
    error = jnp.where(state.ended, 1, 0).astype(jnp.int32)
    ok = error == 0
    submitted = ok & (kind == SUBMIT)
    exact, trajectory, cells, positions = score(state.observations, guess)
    new = TrackingState(
        state.observations,
        state.ended | (ok & (kind != OBSERVE)),
        jnp.where(submitted, exact, state.exact),
        jnp.where(submitted, trajectory, state.trajectory_accuracy),
        jnp.where(submitted, cells, state.cell_accuracy),
        jnp.where(submitted, positions, state.position_correct),
    )
    return new, jnp.where(submitted, exact, 0.0), error


def scores(state: TrackingState, config=None) -> dict:
    """The session's scores as JSON-ready Python values: ``exact``,
    ``trajectory_accuracy``, ``cell_accuracy`` (floats) and
    ``position_correct`` (M-1 floats, 0.0 or 1.0)."""
    return {
        "exact": float(state.exact),
        "trajectory_accuracy": float(state.trajectory_accuracy),
        "cell_accuracy": float(state.cell_accuracy),
        "position_correct": [float(v) for v in np.asarray(state.position_correct)],
    }


def ended(state: TrackingState) -> jax.Array:
    """Whether the session has ended, bool ()."""
    return state.ended


def public_view(state: TrackingState, config=None) -> jax.Array:
    """What an agent sees: X, int32 (M, N)."""
    return state.observations


def observation_space(config) -> spaces.Box:
    """X: int32 (M, N) in 0..C-1."""
    return spaces.Box(0, config.n_colors - 1, (config.length, config.n_nodes), np.int32)


def action_space(config) -> spaces.MultiBinary:
    """Y to submit: 0/1 of shape (M - 1, N)."""
    return spaces.MultiBinary(config.shape)


def to_action(sample, config) -> Action:
    """An element of :func:`action_space` as the core's SUBMIT action."""
    return Action.make(SUBMIT, config, sample)


def render(state: TrackingState, config=None) -> str:
    """X as text, one row per step."""
    return "\n".join(" ".join(map(str, row)) for row in np.asarray(state.observations))
