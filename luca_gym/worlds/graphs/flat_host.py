"""A graph world's flat codec on one host session, for a learned agent in
the harness (:class:`luca_gym.agents.FlatPolicy`): the codecs that keep
state across a session's calls. :class:`RawHostSession` holds what a
``"raw"`` learner wrote (its matrix, the last intervention, the states
before it, the edits left); :class:`PosteriorHostSession` holds the
posterior analyst's memory of the matrices it stated in vain. Each encodes
the session's public view with the jitted codec's functions of
:mod:`luca_gym.worlds.graphs.flat` and decodes a flat index to the
session's tool call, so a host session takes the calls the batched one
takes.

A module of its own because it is the host side of the codec (numpy in,
tool calls out, state held in Python between calls), apart from the pure
codec that the functional env, PPO and :func:`~luca_gym.worlds.graphs.flat.play_batch`
jit; :meth:`GraphFlat.for_session <luca_gym.worlds.graphs.flat.GraphFlat.for_session>`
hands a session one of these.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.boundary import check_flat_actions
from luca_gym.worlds.graphs import analyst as posterior_analyst
from luca_gym.worlds.graphs.flat import (EDITS_SPENT, ERRORS, GraphFlat, _call, _committed, _edit, edit_budget,
                                         posterior_observation, raw_observation)


class _HostCodec:
    """What a codec held on one host session shows of its codec: K, D and
    the settings in words (the sessions below keep what differs)."""

    codec: GraphFlat

    @property
    def num_actions(self) -> int:
        """K, the codec's."""
        return self.codec.num_actions

    @property
    def observation_size(self) -> int:
        """D, the codec's."""
        return self.codec.observation_size

    def describe(self) -> str:
        """The codec's settings in a few words."""
        return self.codec.describe()


class RawHostSession(_HostCodec):
    """A ``"raw"`` codec on one host session (the harness's tool session, its
    public view as ``obs``): it holds what :class:`RawSession` holds for the
    learner (the matrix, the last intervention, the states before it, the
    edits left) across the session's calls, and encodes with the jitted
    codec's :func:`raw_observation`. :meth:`decode` of an edit applies it
    here and returns None: the learner chooses again
    (:meth:`luca_gym.agents.FlatPolicy.act`)."""

    def __init__(self, codec: GraphFlat):
        n = codec.config.n
        self.codec, self.config = codec, codec.config
        self.hypothesis = np.zeros((n, n), bool)
        self.last, self.before, self.edits_left = -1, None, edit_budget(n)

    def encode(self, obs: dict):
        """The session's observation ``obs`` (its public view) as the flat (vector, mask)."""
        if self.before is None:  # the opening states, until the first intervention
            self.before = np.asarray(obs["states"])
        return raw_observation(obs, self.hypothesis, self.last, self.before, self.edits_left, self.config,
                               self.codec.raw_actions)

    def decode(self, index: int, obs: dict) -> dict | None:
        """Flat index -> the session's tool call, or None for an edit of the
        matrix (applied here). An index outside [0, K), or an edit the codec
        refuses (the diagonal, no edits left), raises ValueError."""
        n = self.config.n
        index = int(check_flat_actions(index, self.num_actions, name="index"))
        if index > n and self.codec.commits:  # commit, then call as index - (N + 1)
            committed = np.asarray(_committed(jnp.asarray(self.hypothesis), jnp.int32(self.last), jnp.asarray(self.before),
                                              jnp.asarray(obs["states"]), self.config.directed))
            self.edits_left -= int(not np.array_equal(committed, self.hypothesis))
            self.hypothesis, index = committed, index - (n + 1)
        if index > n:
            pair = index - (n + 1)
            if pair // n == pair % n or self.edits_left <= 0:
                raise ValueError(f"index: {index} not allowed; {ERRORS[4 if pair // n == pair % n else EDITS_SPENT]}")
            self.hypothesis = np.asarray(_edit(jnp.asarray(self.hypothesis), jnp.int32(pair), self.config.directed))
            self.edits_left -= 1
            return None
        if index < n:
            self.last, self.before = index, np.asarray(obs["states"])
        return _call(self.config, index, self.hypothesis)


class PosteriorHostSession(_HostCodec):
    """An ``analyst="posterior"`` codec on one host session (its public view
    as ``obs``): the analyst's memory of the matrices it stated in vain,
    held across the session's calls, and the same pieces as the functional
    codec (:mod:`~luca_gym.worlds.graphs.analyst`), so a host session takes
    the calls the batched one takes."""

    def __init__(self, codec: GraphFlat):
        self.codec, self.config = codec, codec.config
        self.memory = posterior_analyst.bayes_memory(codec.config)

    def encode(self, obs: dict):
        """The session's observation ``obs`` (its public view) as the flat (vector, mask)."""
        view = {k: jnp.asarray(v) for k, v in obs.items()}
        return posterior_observation(view, _posterior(view, self.config), self.config)

    def decode(self, index: int, obs: dict) -> dict:
        """Flat index -> the session's tool call, the analyst's matrix attached
        (remembered where an intervention states it under the paper's loop).
        An index that is not an integer in [0, N] raises ValueError."""
        index = int(check_flat_actions(index, self.num_actions, name="index"))
        view = {k: jnp.asarray(v) for k, v in obs.items()}
        adjacency = _stated(_posterior(view, self.config), self.memory, self.config)
        if index < self.config.n and self.config.proposals == "every":
            self.memory = posterior_analyst.remember(self.memory, adjacency, self.config)
        return _call(self.config, index, np.asarray(adjacency))


@partial(jax.jit, static_argnames=("config",))
def _posterior(view, config):
    return posterior_analyst.edge_posterior(view, config)


@partial(jax.jit, static_argnames=("config",))
def _stated(posterior, memory, config):
    return posterior_analyst.best_unrefuted(posterior, memory, config)
