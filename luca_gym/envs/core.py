"""``CoreEnv``: any world's pure core (``World.core``,
:class:`luca_gym.protocol.Core`) as a single Gymnasium env; the registry
registers ``luca_gym/<Stem>-v0`` to it for a world that declares a core and
no env of its own, and a world's own env may be a configuration of it
(LUCA's ``LucaEnv`` is).

One instance per episode: ``reset(seed=...)`` seeds the draw of instance
seeds (from :data:`luca_gym.functional.TRAINING_SEED_START` up: never an
evaluation seed; a core may name another range, ``DRAWN_SEEDS``),
``options={"instance_seed": k}`` pins instance k (a core may name the
option, ``SEED_OPTION``; the reset info reports the seed under that name,
with what the core's ``reset_info`` adds); ``sealed=`` seals the instances
(:mod:`luca_gym.seal`). The settings make the config through the core's
``make_config`` where it has one (else ``World.make_config``).

The observation is the core's ``public_view`` (what an agent may see), the
action an element of the core's action space, which the core's
``to_action`` makes its typed action (a core that declares
``TO_ACTION_CHECKS`` checks every action itself and may take more than the
space's elements); the core's ``step`` decides the reward and the ending,
and refuses what its rules refuse (at no cost: ``info["error_code"]`` and
its words ``info["error"]``, None when nothing was refused, on every step).
An action outside the action space raises ValueError and changes nothing.
The step that ends the session reports it: ``truncated`` where the core's
``truncated`` says it ended at a limit, else ``terminated``; its
``info["scores"]`` holds every score. A step on an ended session is the
core's to refuse and reports neither flag. ``render_mode`` is one the core
offers: "ansi" where it has ``render``, or the modes it declares
(``RENDER_MODES``; its ``render`` then takes the mode and the instance).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym import seal as seal_mod
from luca_gym import worlds
from luca_gym.boundary import reset_options
from luca_gym.functional import TRAINING_SEED_START
from luca_gym.protocol import load
from luca_gym.validate import DRAWN_SEED_LIMIT, check_render_mode, check_seed, short_repr


def _as_space(value, space):
    """A core's view as numpy values of ``space`` (a Dict: key by key; a view
    that holds exactly the space's keys keeps its own order)."""
    if isinstance(space, spaces.Dict):
        keys = value.keys() if value.keys() == space.spaces.keys() else space.spaces
        return {key: _as_space(value[key], space[key]) for key in keys}
    if isinstance(space, spaces.Discrete):  # a numpy scalar, as Gymnasium's checker asks
        return space.dtype.type(value)
    return np.asarray(value, space.dtype)


def render_modes(core) -> tuple[str, ...]:
    """The render modes ``core`` offers: its ``RENDER_MODES``, else "ansi" where it has ``render``, else none."""
    declared = getattr(core, "RENDER_MODES", None)
    if declared is not None:
        return tuple(declared)
    return ("ansi",) if hasattr(core, "render") else ()


def reset_seed(np_random, options, option: str = "instance_seed",
               drawn: tuple[int, int] = (TRAINING_SEED_START, DRAWN_SEED_LIMIT)) -> int:
    """The instance seed a reset opens: ``options[option]`` (checked; any
    other option refused by name), else one drawn by ``np_random`` from
    ``drawn`` (low, high)."""
    options = reset_options(options, (option,))
    if option in options:
        return check_seed(options[option], f"options[{option!r}]")
    return int(np_random.integers(*drawn))


class CoreEnv(gym.Env):
    """One session of ``world``'s core per episode.

    Args:
        world: the world's registry name (the registry's ``<Stem>-v0`` id passes it).
        render_mode: None or a mode the core offers (:func:`render_modes`).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): instance k is then made from its sealed seed.
        settings: the world's config fields (the core's ``make_config``'s, where it has one).

    Beside Gymnasium's API: :meth:`open` starts a session on a given
    instance; ``config``, ``seal``, ``instance`` (host side: never shown),
    ``instance_seed`` and ``state`` are the session's.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, world: str, render_mode: str | None = None, *, sealed=None, **settings):
        self.world = worlds.get(world)
        if self.world.core is None:
            raise ValueError(f"world: {self.world.name!r} declares no core (World.core); CoreEnv needs one")
        self.core = load(self.world.core)
        self.config = getattr(self.core, "make_config", self.world.make_config)(**settings)
        self.seal = seal_mod.make_seal(sealed)
        modes = render_modes(self.core)
        self.render_mode = check_render_mode(render_mode, modes)
        self.metadata = {**type(self).metadata, "render_modes": list(modes)}
        self.seed_option = getattr(self.core, "SEED_OPTION", "instance_seed")
        self.drawn_seeds = tuple(getattr(self.core, "DRAWN_SEEDS", (TRAINING_SEED_START, DRAWN_SEED_LIMIT)))
        self.observation_space = self.core.observation_space(self.config)
        self.action_space = self.core.action_space(self.config)
        self.state = self.instance = self.instance_seed = None

    def _observation(self):
        return _as_space(jax.device_get(self.core.public_view(self.state, self.config)), self.observation_space)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.open(reset_seed(self.np_random, options, self.seed_option, self.drawn_seeds))

    def open(self, instance_seed: int) -> tuple[Any, dict]:
        """Start a session on instance ``instance_seed`` (checked; sealed
        under the env's seal). Returns (first observation, reset info)."""
        seed = check_seed(instance_seed, self.seed_option)
        self.instance = self.core.instance(seed, self.config, self.seal)
        self.state = self.core.reset(self.instance, self.config)
        self.instance_seed = seed
        info = {self.seed_option: seed}
        if hasattr(self.core, "reset_info"):
            info.update(self.core.reset_info(self.instance, self.config))
        return self._observation(), info

    def _typed(self, action):
        """The core's typed action for ``action``; ValueError (nothing changed) for one outside the space."""
        if not getattr(self.core, "TO_ACTION_CHECKS", False):
            try:
                inside = self.action_space.contains(action)
            except Exception:  # noqa: BLE001 -- hostile input: an action the space cannot even check is outside it
                inside = False
            if not inside:
                raise ValueError(f"action: {short_repr(action)} not allowed; an element of {self.action_space}")
        return self.core.to_action(action, self.config)

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset(): no session is open")
        typed = self._typed(action)
        was_ended = bool(self.core.ended(self.state))
        self.state, reward, error = self.core.step(self.state, typed, self.config)
        code = int(error)
        info: dict[str, Any] = {"error_code": code, "error": self.core.ERRORS[code] or None}
        terminated = truncated = False
        if bool(self.core.ended(self.state)) and not was_ended:  # this step ended the session
            truncated = hasattr(self.core, "truncated") and bool(self.core.truncated(self.state, self.config))
            terminated = not truncated
            info["scores"] = self.core.scores(jax.device_get(self.state), self.config)
        return self._observation(), float(reward), terminated, truncated, info

    def render(self):
        if self.render_mode is None or self.state is None:
            return None
        if getattr(self.core, "RENDER_MODES", None) is not None:
            return self.core.render(self.state, self.config, self.render_mode, self.instance)
        return self.core.render(self.state, self.config)

    def close(self):
        """Forget the session; ``step`` refuses until the next ``reset``."""
        self.state = None


__all__ = ["CoreEnv", "render_modes", "reset_seed"]
