"""The toy world's optional flat codec (:class:`luca_gym.protocol.FlatCodec`),
apart from ``toy_world.py`` as a world's optional part: action i < N probes
switch i, action N submits what was probed (1 for the rest); the observation
is what was probed and where. The functional env and the PPO run on it with
no change to a generic file."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from toy_world import PROBE, SUBMIT, ToyConfig, instance, reset, step


@dataclass(frozen=True)
class ToyFlat:
    n_bits: int = 8
    world = "toy"
    headline = "accuracy"

    def __post_init__(self):
        ToyConfig(self.n_bits)  # checks n_bits

    @property
    def num_actions(self) -> int:
        return self.n_bits + 1

    @property
    def observation_size(self) -> int:
        return 2 * self.n_bits

    def settings(self) -> dict:
        return {"n_bits": self.n_bits}

    def describe(self) -> str:
        return f"N={self.n_bits}"

    def instances(self, seeds):
        return jnp.stack([instance(int(s), ToyConfig(self.n_bits)) for s in np.asarray(seeds)])

    def _view(self, state):
        toy, seen, known = state
        vector = jnp.concatenate([jnp.where(known, seen, 0.0), known.astype(jnp.float32)])
        probe_ok = ~known & (toy.budget_left > 0) & ~toy.ended
        return state, vector, jnp.concatenate([probe_ok, ~toy.ended[None]])

    def open(self, bits):
        zeros = jnp.zeros(self.n_bits)
        return self._view((reset(bits, ToyConfig(self.n_bits)), zeros, zeros.astype(bool)))

    def step(self, state, action):
        toy, seen, known = state
        kind = jnp.where(action < self.n_bits, PROBE, SUBMIT)
        index = jnp.minimum(action, self.n_bits - 1)
        toy, reward, error, bit = step(toy, kind, index, jnp.where(known, seen > 0, True), ToyConfig(self.n_bits))
        probed = (error == 0) & (kind == PROBE)
        seen = jnp.where(probed, seen.at[index].set(bit.astype(jnp.float32)), seen)
        new = (toy, seen, known | (probed & (jnp.arange(self.n_bits) == index)))
        # an index outside [0, n_bits] is refused (error 3): nothing moves, nothing is earned
        outside = (action < 0) | (action > self.n_bits)
        new = jax.tree_util.tree_map(lambda old, changed: jnp.where(outside, old, changed), state, new)
        state, vector, mask = self._view(new)
        return state, vector, mask, jnp.where(outside, 0.0, reward), state[0].ended, jnp.bool_(False), jnp.where(outside, 3, error)

    def score(self, state):
        return state[0].score


def first_legal(codec):
    """The toy's flat baseline: the first action the mask allows (probe the
    switches in order while the budget lasts, then submit)."""
    def act(params, key, obs, mask):
        return jnp.argmax(mask, axis=-1).astype(jnp.int32)

    return act


def out_of_range(codec):
    """A broken flat baseline for check_world's test: an index outside [0, K)."""
    def act(params, key, obs, mask):
        return jnp.full(obs.shape[:1], -1, jnp.int32)

    return act


FLAT_BASELINES = {"first-legal": first_legal}
BROKEN_FLAT_BASELINES = {"out-of-range": out_of_range}
