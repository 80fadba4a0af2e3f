"""``luca_gym/StateTracking-v0``: the tracking world as a Gymnasium env. One
instance per episode; the observation is X, int32 (M, N) in 0..C-1; the
action is the change-indicator matrix, ``MultiBinary((M - 1, N))``; the one
step scores it (reward: the exact score, the headline) and ends the episode,
with every score in ``info["scores"]``. The core's jitted ``step`` decides."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym.envs.codec import instance_seed
from luca_gym.validate import check_render_mode, short_repr
from luca_gym.worlds.tracking import core
from luca_gym.worlds.tracking.config import TrackingConfig


class TrackingEnv(gym.Env):
    """One tracking session per episode (keyword settings: :class:`TrackingConfig`'s fields).

    ``reset`` seeds the draw of instance seeds (from 10,000 up: never an
    evaluation seed); ``options={"instance_seed": k}`` pins instance k. An
    action that is not a 0/1 array of shape (M - 1, N) raises ValueError and
    changes nothing."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, **settings):
        self.config = c = TrackingConfig(**settings)
        self.render_mode = check_render_mode(render_mode)
        self.observation_space = spaces.Box(0, c.n_colors - 1, (c.length, c.n_nodes), np.int32)
        self.action_space = spaces.MultiBinary((c.length - 1, c.n_nodes))
        self.state, self.instance_seed = None, None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.instance_seed = instance_seed(self.np_random, options)
        self.state = core.reset(core.instance(self.instance_seed, self.config))
        return np.asarray(self.state.observations, np.int32), {"instance_seed": self.instance_seed}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        guess = np.asarray(action)
        shape = (self.config.length - 1, self.config.n_nodes)
        if guess.shape != shape or guess.dtype.kind not in "biu" or not np.isin(guess, (0, 1)).all():
            raise ValueError(f"action: {short_repr(action)} not allowed; 0/1 of shape {shape}")
        self.state, reward, error = core.step(self.state, core.SUBMIT, guess.astype(bool))
        info = {"error_code": int(error)}
        if bool(self.state.ended):
            info["scores"] = core.scores(jax.device_get(self.state))
        return np.asarray(self.state.observations, np.int32), float(reward), bool(self.state.ended), False, info

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        rows = np.asarray(self.state.observations)
        return "\n".join(" ".join(map(str, row)) for row in rows)

    def close(self):
        self.state = None
