"""Gymnasium environments over the pure session core, sharing one boundary
(:mod:`luca_gym.envs.spaces`).

``LucaToolsEnv`` (:mod:`luca_gym.envs.tools`, the LLM tools as a text env)
is imported on first use, since it is built on :mod:`luca_gym.wrappers.llm`.
``LucaSB3VecEnv`` (:mod:`luca_gym.envs.sb3`) needs the ``rl`` extra
(stable-baselines3); it is imported on first use (and left out of
``__all__``, so a star import works without the extra).
"""

from luca_gym.envs.flat import LucaFlatEnv
from luca_gym.envs.luca_env import LucaEnv
from luca_gym.envs.vector import LucaVectorEnv

__all__ = ["LucaEnv", "LucaFlatEnv", "LucaVectorEnv"]


def __getattr__(name: str):
    if name == "LucaToolsEnv":  # imported on use: it sits on top of the LLM tools, which import this package
        from luca_gym.envs.tools import LucaToolsEnv

        return LucaToolsEnv
    if name == "LucaSB3VecEnv":
        from luca_gym.envs.sb3 import LucaSB3VecEnv

        return LucaSB3VecEnv
    raise AttributeError(f"module 'luca_gym.envs' has no attribute {name!r}")
