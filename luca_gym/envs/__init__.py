"""Gymnasium environments over the pure session core."""

from luca_gym.envs.luca_env import LucaEnv
from luca_gym.envs.vector import LucaVectorEnv, rollout

__all__ = ["LucaEnv", "LucaVectorEnv", "rollout"]
