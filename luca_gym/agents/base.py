"""A learned agent as a harness policy: it reads the observation dict, encodes
it as the flat vector and mask, lets the learned ``choose`` pick one of the K
flat actions, and decodes that into the dict action the env takes (the values
come from the agent's analyst). Nothing here reads hidden state."""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import numpy as np

from luca_gym.worlds.luca import analysts, core
from luca_gym.worlds.luca.core import flat


@partial(jax.jit, static_argnames=("params",))
def _encode(obs: dict, params: core.EnvParams):
    return flat.observation_vector(obs, params), flat.mask(obs, params)


@partial(jax.jit, static_argnames=("params", "analyst"))
def _decode(index, obs: dict, params: core.EnvParams, analyst: str):
    return flat.decode(index, obs, params, analyst)


class FlatPolicy:
    """A :class:`~luca_gym.worlds.luca.baselines.Policy` over the flat action space.

    Args:
        name: the agent's name in result files (e.g. ``ppo:runs/easy``).
        choose: ``(vector float32 (D,), mask bool (K,), rng) -> int``, the
            learned part; it must pick a legal index (mask True).
        analyst: the analyst that writes predictions, the network and the
            analyst's diagnosis (:data:`luca_gym.worlds.luca.analysts.ANALYSTS`).
    """

    def __init__(self, name: str, choose: Callable[[np.ndarray, np.ndarray, np.random.Generator], int],
                 analyst: str = "logit-additive"):
        analysts.get(analyst)
        self.name, self.choose, self.analyst = name, choose, analyst

    def reset(self, params: core.EnvParams, seed: int) -> None:
        self.params = params
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict) -> dict:
        vector, legal = jax.device_get(_encode(obs, self.params))
        index = int(self.choose(np.asarray(vector), np.asarray(legal, bool), self.rng))
        action = jax.device_get(_decode(np.int32(index), obs, self.params, self.analyst))
        return {k: np.asarray(v) for k, v in vars(action).items()}
