"""Learned agents: policies over the flat action space (:mod:`luca_gym.worlds.luca.core.flat`)
that run through the same harness as the baselines.

* :class:`FlatPolicy` -- a learned agent as a harness policy.
* :mod:`luca_gym.agents.ppo` -- PPO in pure JAX: :class:`PPOConfig`,
  :func:`train_ppo`, :func:`load_ppo` (a run folder -> a greedy FlatPolicy).
* :mod:`luca_gym.agents.pergene` -- the permutation-equivariant network over
  genes and signals (equinox) that PPO trains with ``network="pergene"``: one
  set of weights acts at every organism size.
* ``luca_gym.agents.sb3`` -- MaskablePPO from sb3-contrib (the ``rl`` extra).
"""

from luca_gym.agents.base import FlatPolicy
from luca_gym.agents.ppo import PPOConfig
from luca_gym.agents.ppo import load as load_ppo
from luca_gym.agents.ppo import train as train_ppo

__all__ = ["FlatPolicy", "PPOConfig", "load_ppo", "train_ppo"]
