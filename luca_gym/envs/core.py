"""``CoreEnv``: any world's pure core (``World.core``,
:class:`luca_gym.protocol.Core`) as a single Gymnasium env; the registry
registers ``luca_gym/<Stem>-v0`` to it for a world that declares a core and
no env of its own, and a world's own env may be a configuration of it
(LUCA's ``LucaEnv`` is).

It is the host session :class:`luca_gym.host.CoreSession` (the config, the
seal, ``open``, ``step``, ``scores``, ``close``: the observation, the action,
refusals, the ending and the scores are described there) plus Gymnasium:
one instance per episode, ``reset(seed=...)`` seeding the draw of instance
seeds (from :data:`luca_gym.functional.TRAINING_SEED_START` up: never an
evaluation seed; a core may name another range, ``DRAWN_SEEDS``),
``options={"instance_seed": k}`` pinning instance k (a core may name the
option, ``SEED_OPTION``; the reset info reports the seed under that name,
with what the core's ``reset_info`` adds), the spaces, ``metadata`` and
``render``. ``render_mode`` is one the core offers: "ansi" where it has
``render``, or the modes it declares (``RENDER_MODES``; its ``render`` then
takes the mode and the instance).
"""

from __future__ import annotations

import gymnasium as gym

from luca_gym.boundary import reset_options
from luca_gym.functional import TRAINING_SEED_START
from luca_gym.host import CoreSession
from luca_gym.validate import DRAWN_SEED_LIMIT, check_render_mode, check_seed


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


class CoreEnv(CoreSession, gym.Env):
    """One session of ``world``'s core per episode: a
    :class:`~luca_gym.host.CoreSession` as a Gymnasium env.

    Args:
        world: the world's registry name (the registry's ``<Stem>-v0`` id passes it).
        render_mode: None or a mode the core offers (:func:`render_modes`).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): instance k is then made from its sealed seed.
        settings: the world's config fields (the core's ``make_config``'s, where it has one).

    Beside Gymnasium's API, the session's: :meth:`open` starts a session on a
    given instance; ``config``, ``seal``, ``instance`` (host side: never
    shown), ``instance_seed`` and ``state`` are the session's.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, world: str, render_mode: str | None = None, *, sealed=None, **settings):
        CoreSession.__init__(self, world, sealed=sealed, **settings)
        modes = render_modes(self.core)
        self.render_mode = check_render_mode(render_mode, modes)
        self.metadata = {**type(self).metadata, "render_modes": list(modes)}
        self.drawn_seeds = tuple(getattr(self.core, "DRAWN_SEEDS", (TRAINING_SEED_START, DRAWN_SEED_LIMIT)))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.open(reset_seed(self.np_random, options, self.seed_option, self.drawn_seeds))

    def render(self):
        if self.render_mode is None or self.state is None:
            return None
        if getattr(self.core, "RENDER_MODES", None) is not None:
            return self.core.render(self.state, self.config, self.render_mode, self.instance)
        return self.core.render(self.state, self.config)


__all__ = ["CoreEnv", "render_modes", "reset_seed"]
