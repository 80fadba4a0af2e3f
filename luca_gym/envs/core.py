"""``CoreEnv``: any world's pure core (``World.core``,
:class:`luca_gym.protocol.Core`) as a single Gymnasium env; the registry
registers ``luca_gym/<Stem>-v0`` to it for a world that declares a core and
no env of its own.

One instance per episode: ``reset(seed=...)`` seeds the draw of instance
seeds (from :data:`luca_gym.functional.TRAINING_SEED_START` up: never an
evaluation seed), ``options={"instance_seed": k}`` pins instance k. The
observation is the core's ``public_view`` (what an agent may see), the
action an element of the core's action space, which the core's
``to_action`` makes its typed action; the core's ``step`` decides the
reward and the ending, and refuses what its rules refuse (at no cost,
``info["error_code"]``). An action outside the action space raises
ValueError and changes nothing. An ended session's ``info["scores"]`` holds
every score; ``render_mode="ansi"`` renders where the core offers
``render``.
"""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym import worlds
from luca_gym.envs.codec import instance_seed
from luca_gym.protocol import load
from luca_gym.validate import check_render_mode, short_repr


def _as_space(value, space):
    """A core's view as numpy values of ``space`` (a Dict: key by key)."""
    if isinstance(space, spaces.Dict):
        return {key: _as_space(value[key], sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Discrete):  # a numpy scalar, as Gymnasium's checker asks
        return space.dtype.type(value)
    return np.asarray(value, space.dtype)


class CoreEnv(gym.Env):
    """One session of ``world``'s core per episode.

    Args:
        world: the world's registry name (the registry's ``<Stem>-v0`` id passes it).
        render_mode: None or "ansi" (where the core has ``render``).
        settings: the world's config fields.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, world: str, render_mode: str | None = None, **settings):
        self.world = worlds.get(world)
        if self.world.core is None:
            raise ValueError(f"world: {self.world.name!r} declares no core (World.core); CoreEnv needs one")
        self.core = load(self.world.core)
        self.config = self.world.make_config(**settings)
        allowed = ("ansi",) if hasattr(self.core, "render") else ()
        self.render_mode = check_render_mode(render_mode, allowed)
        self.observation_space = self.core.observation_space(self.config)
        self.action_space = self.core.action_space(self.config)
        self.state, self.instance_seed = None, None

    def _observation(self):
        return _as_space(jax.device_get(self.core.public_view(self.state, self.config)), self.observation_space)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.instance_seed = instance_seed(self.np_random, options)
        self.state = self.core.reset(self.core.instance(self.instance_seed, self.config), self.config)
        return self._observation(), {"instance_seed": self.instance_seed}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        try:
            inside = self.action_space.contains(action)
        except Exception:  # noqa: BLE001 -- hostile input: an action the space cannot even check is outside it
            inside = False
        if not inside:
            raise ValueError(f"action: {short_repr(action)} not allowed; an element of {self.action_space}")
        self.state, reward, error = self.core.step(self.state, self.core.to_action(action, self.config), self.config)
        terminated = bool(self.core.ended(self.state))
        info = {"error_code": int(error)}
        if terminated:
            info["scores"] = self.core.scores(jax.device_get(self.state), self.config)
        return self._observation(), float(reward), terminated, False, info

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        return self.core.render(self.state, self.config)

    def close(self):
        self.state = None


__all__ = ["CoreEnv"]
