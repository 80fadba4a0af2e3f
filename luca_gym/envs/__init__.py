"""Gymnasium environments that serve every world: :class:`ToolsEnv`, a
world's tools as a text env (``luca_gym/<Stem>Tools-v0``). A world's own
Gymnasium envs live in the world (LUCA's: :mod:`luca_gym.worlds.luca.envs`)
and are reached through the registry (``gymnasium.make("luca_gym/Luca-v0")``).

``luca_gym.envs.LucaEnv``, ``LucaVectorEnv``, ``LucaFlatEnv``,
``LucaToolsEnv`` and ``LucaSB3VecEnv`` (and the modules ``luca_env``,
``vector``, ``flat``, ``sb3``, ``spaces``) are deprecated names of LUCA's,
kept for one release.
"""

from luca_gym._deprecated import moved_name
from luca_gym.envs.tools import ToolsEnv

__all__ = ["ToolsEnv"]


def __getattr__(name: str):
    return moved_name(__name__, name)
