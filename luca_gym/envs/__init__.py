"""Gymnasium environments that serve every world: :class:`ToolsEnv`, a
world's tools as a text env (``luca_gym/<Stem>Tools-v0``), and
:class:`luca_gym.envs.core.CoreEnv`, any world's pure core (``World.core``)
as ``luca_gym/<Stem>-v0``, and :class:`luca_gym.envs.core_vector.CoreVectorEnv`,
many sessions of it as that id's ``make_vec``. A world's own Gymnasium envs, where it keeps them,
live in the world (LUCA's: :mod:`luca_gym.worlds.luca.envs`) and are reached
through the registry (``gymnasium.make("luca_gym/Luca-v0")``).
"""

from luca_gym.envs.tools import ToolsEnv

__all__ = ["ToolsEnv"]
