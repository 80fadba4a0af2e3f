"""The graph worlds' baselines, written once as batched JAX policies over the
flat observation (:mod:`~luca_gym.worlds.graphs.flat`) and run by the harness
through the same functions (:class:`FlatBaseline`), so the two forms are held
equal: on an instance, the harness's session and the batched one
(:func:`~luca_gym.worlds.graphs.flat.play_batch`, each session from its
seed's key) take the same calls, ``random``'s draws included. ``luca-gym
report`` computes the ``random`` floor that way.

Under either protocol a baseline's matrix is what the evidence implies
(unknown pairs taken as no edge): under ``proposals="every"`` (the paper's
loop) the flat codec attaches it to every intervention, so each cycle
proposes the baseline's current best hypothesis and the session ends the
first time it is right; under ``"final"`` only the submission carries it.

* ``systematic``: intervene on each node whose row (undirected: row or
  column) the evidence still leaves open, fewest interventions first, then
  lowest index; submit what the evidence implies once nothing is open or the
  budget is spent. With changes certain (the default) one pass decides every
  pair, and acyclicity spares the nodes every other node is known to reach;
  with redraws that may repeat, it comes back to the open rows while the
  budget lasts. It is the ceiling a budget allows, beside the paper's models.
* ``random``: intervene on uniformly random nodes until the budget is spent,
  then submit what the evidence implies: random experiments, exact inference
  (under the paper's loop it stops as soon as what it has seen implies the
  truth).
"""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.flat import GraphFlat, budget_left_of, interventions_of, knowledge_of, session_keys


@lru_cache(maxsize=None)
def systematic_policy(codec: GraphFlat):
    """The ``systematic`` policy of ``codec``: ``(params, key, obs (B, D),
    mask (B, K)) -> actions int32 (B,)`` (one function per codec, so it
    compiles once)."""
    n, directed = codec.config.n, codec.config.directed

    def choose(vector):
        open_ = core.open_rows(knowledge_of(vector, n), directed)
        # fewest interventions first, then the lowest index
        order = interventions_of(vector, n) * (n + 1) + jnp.arange(n) / n
        target = jnp.argmin(jnp.where(open_, order, jnp.inf))
        go = jnp.any(open_) & (budget_left_of(vector, n) > 0)
        return jnp.where(go, target, n).astype(jnp.int32)

    def policy(params, key, obs, mask):
        return jax.vmap(choose)(obs)

    return policy


@lru_cache(maxsize=None)
def random_policy(codec: GraphFlat):
    """The ``random`` policy of ``codec`` (see :func:`systematic_policy`)."""
    n = codec.config.n

    def policy(params, key, obs, mask):
        target = jax.random.randint(key, (obs.shape[0],), 0, n, jnp.int32)
        return jnp.where(mask[:, 0], target, n).astype(jnp.int32)

    return policy


POLICIES = {"systematic": systematic_policy, "random": random_policy}


@lru_cache(maxsize=None)
def _jitted(name: str, codec: GraphFlat):
    return jax.jit(POLICIES[name](codec))


class FlatBaseline:
    """A batched baseline as a harness policy (``reset(params, seed)``,
    ``act(observation) -> tool call``): the session's observation through the
    codec, the batched policy on a batch of one, the index back to a call."""

    name = ""

    def reset(self, params, seed: int) -> None:
        """Start a session of these settings: their codec, the jitted policy and a key from ``seed``."""
        self.codec = GraphFlat(params)
        self.policy = _jitted(self.name, self.codec)
        self.key = session_keys([seed])[0]

    def act(self, obs: dict) -> dict:
        """The session's action for ``obs``: the batched policy's choice on the flat codec, decoded."""
        vector, mask = self.codec.encode(obs)
        self.key, k = jax.random.split(self.key)
        index = self.policy(None, k, vector[None], mask[None])[0]
        return self.codec.decode(int(np.asarray(index)), obs)


class Systematic(FlatBaseline):
    """``systematic`` in the harness: intervenes on every node the evidence leaves open, then submits."""
    name = "systematic"


class Random(FlatBaseline):
    """``random`` in the harness: intervenes at random for the whole budget, then submits what the evidence implies."""
    name = "random"


BASELINES = {"systematic": Systematic, "random": Random}
# The flat-space form of systematic (World.flat_baselines): the teacher of `luca-gym train --algo bc`.
FLAT_BASELINES = {"systematic": systematic_policy}
