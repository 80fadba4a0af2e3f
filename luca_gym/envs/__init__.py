"""Gymnasium environments over the pure session core."""

from luca_gym.envs.luca_env import LucaEnv

__all__ = ["LucaEnv"]
