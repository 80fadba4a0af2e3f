"""``CoreSession``: one session of any world's pure core (``World.core``,
:class:`luca_gym.protocol.Core`) on the host, behind the numpy boundary, and
no Gymnasium env: what the tool layer and the harness may stand on.
:class:`luca_gym.envs.core.CoreEnv` is this session plus Gymnasium (seeded
``reset``, ``render``, metadata).

The settings make the config through the core's ``make_config`` where it has
one (else ``World.make_config``); ``sealed=`` seals the instances
(:mod:`luca_gym.seal`). :meth:`CoreSession.open` starts a session on instance
k (the reset info reports the seed under the core's ``SEED_OPTION``, default
"instance_seed", with what the core's ``reset_info`` adds).

The observation is the core's ``public_view`` (what an agent may see) as
numpy values of the core's observation space; the action an element of the
core's action space, which the core's ``to_action`` makes its typed action (a
core that declares ``TO_ACTION_CHECKS`` checks every action itself and may
take more than the space's elements); the core's ``step`` decides the reward
and the ending, and refuses what its rules refuse (at no cost:
``info["error_code"]`` and its words ``info["error"]``, None when nothing was
refused, on every step). An action outside the action space raises
ValueError and changes nothing. The step that ends the session reports it:
``truncated`` where the core's ``truncated`` says it ended at a limit, else
``terminated``; its ``info["scores"]`` holds every score. A step on an ended
session is the core's to refuse and reports neither flag.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from gymnasium import spaces

from luca_gym import seal as seal_mod
from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.validate import check_seed, short_repr


def _as_space(value, space):
    """A core's view as numpy values of ``space`` (a Dict: key by key; a view
    that holds exactly the space's keys keeps its own order)."""
    if isinstance(space, spaces.Dict):
        keys = value.keys() if value.keys() == space.spaces.keys() else space.spaces
        return {key: _as_space(value[key], space[key]) for key in keys}
    if isinstance(space, spaces.Discrete):  # a numpy scalar, as Gymnasium's checker asks
        return space.dtype.type(value)
    return np.asarray(value, space.dtype)


def open_core(world: str, sealed, settings: dict, what: str) -> tuple:
    """``(World, its core, the session's config, the seal)`` for ``world``'s
    core under ``settings`` (the core's ``make_config`` where it has one,
    else ``World.make_config``); ValueError for a world without a core,
    naming ``what`` needs one."""
    entry = worlds.get(world)
    if entry.core is None:
        raise ValueError(f"world: {entry.name!r} declares no core (World.core); {what} needs one")
    core = load(entry.core)
    return entry, core, getattr(core, "make_config", entry.make_config)(**settings), seal_mod.make_seal(sealed)


class CoreSession:
    """One session of ``world``'s core at a time, on the host.

    Args:
        world: the world's registry name.
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): instance k is then made from its sealed seed.
        settings: the world's config fields (the core's ``make_config``'s, where it has one).

    :meth:`open` starts a session on a given instance, :meth:`step` takes an
    action and returns ``(obs, reward, terminated, truncated, info)`` with
    numpy values and Python scalars, :meth:`scores` gives the ended session's
    scores, :meth:`close` forgets it. ``config``, ``seal``, ``instance`` (host
    side: never shown), ``instance_seed`` and ``state`` are the session's;
    ``observation_space`` and ``action_space`` the core's, what ``step``
    returns and takes.
    """

    def __init__(self, world: str, *, sealed=None, **settings):
        self.world, self.core, self.config, self.seal = open_core(world, sealed, settings, "a core session")
        self.seed_option = getattr(self.core, "SEED_OPTION", "instance_seed")
        self.observation_space = self.core.observation_space(self.config)
        self.action_space = self.core.action_space(self.config)
        self.state = self.instance = self.instance_seed = None

    def _observation(self):
        return _as_space(jax.device_get(self.core.public_view(self.state, self.config)), self.observation_space)

    def open(self, instance_seed: int) -> tuple[Any, dict]:
        """Start a session on instance ``instance_seed`` (checked; sealed
        under the session's seal). Returns (first observation, reset info)."""
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
        """One action: (observation, reward, terminated, truncated, info); the step that ends the session adds ``info["scores"]``."""
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
            info["scores"] = self.scores()
        return self._observation(), float(reward), terminated, truncated, info

    def scores(self) -> dict:
        """The scores of the ended session (the core's ``scores``); refuses while it is open."""
        if self.state is None or not bool(self.core.ended(self.state)):
            raise RuntimeError("scores are revealed only once the session has ended")
        return self.core.scores(jax.device_get(self.state), self.config)

    def close(self):
        """Forget the session; ``step`` refuses until the next one opens."""
        self.state = None


__all__ = ["CoreSession", "open_core"]
