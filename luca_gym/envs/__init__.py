"""Gymnasium environments over the pure session core, sharing one boundary
(:mod:`luca_gym.envs.spaces`)."""

from luca_gym.envs.luca_env import LucaEnv
from luca_gym.envs.vector import LucaVectorEnv

__all__ = ["LucaEnv", "LucaVectorEnv"]
