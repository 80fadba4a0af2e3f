"""LUCA's Gymnasium environments over its pure session core, sharing one
boundary (:mod:`luca_gym.worlds.luca.envs.spaces`): ``LucaEnv`` (one
session), ``LucaVectorEnv`` (thousands at once), ``LucaFlatEnv`` (the flat
encoding for learners) and ``LucaToolsEnv`` (the tools as a text env).

``LucaSB3VecEnv`` (:mod:`luca_gym.worlds.luca.envs.sb3`) needs the ``rl``
extra (stable-baselines3): it is imported on first use, and left out of
``__all__`` so that a star import works without the extra.
"""

from luca_gym.worlds.luca.envs.env import LucaEnv
from luca_gym.worlds.luca.envs.flat import LucaFlatEnv
from luca_gym.worlds.luca.envs.tools import LucaToolsEnv
from luca_gym.worlds.luca.envs.vector import LucaVectorEnv

__all__ = ["LucaEnv", "LucaFlatEnv", "LucaToolsEnv", "LucaVectorEnv"]


def __getattr__(name: str):
    if name == "LucaSB3VecEnv":  # an optional extra: imported when asked for
        from luca_gym.worlds.luca.envs.sb3 import LucaSB3VecEnv

        return LucaSB3VecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
