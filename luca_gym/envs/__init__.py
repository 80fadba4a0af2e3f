"""Gymnasium environments over the pure session core."""

from luca_gym.envs.luca_env import LucaEnv
from luca_gym.envs.vector import LucaVectorEnv, fresh_rollout, rollout

__all__ = ["LucaEnv", "LucaVectorEnv", "fresh_rollout", "rollout"]
