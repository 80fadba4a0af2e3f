"""Learned agents for any world with a flat codec
(:class:`luca_gym.protocol.FlatCodec`): policies over its flat action space
that run through the same harness as the baselines.

* :class:`FlatPolicy` -- a learned agent as a harness policy.
* :mod:`luca_gym.agents.ppo` -- PPO in pure JAX: :class:`PPOConfig`,
  :func:`train_ppo`, :func:`load_ppo` (a run folder -> a greedy FlatPolicy).
* :mod:`luca_gym.agents.entity_attention` -- the permutation-equivariant
  network over a world's entities (equinox; LUCA's genes and signals, a
  graph's nodes: the codec's token layout) that PPO trains with
  ``network="entity"``: one set of weights acts on any number of entities
  of the same features (LUCA: at every organism size).
* :mod:`luca_gym.agents.recurrent` -- a GRU memory through each session
  (``network="recurrent"``).
* :mod:`luca_gym.agents.bc` -- behaviour cloning of one of a world's flat
  baselines; :mod:`luca_gym.agents.warm_start` -- a PPO run from another
  run's weights.
* ``luca_gym.agents.sb3`` -- MaskablePPO from sb3-contrib (the ``rl`` extra).
"""

from luca_gym.agents.base import FlatPolicy
from luca_gym.agents.ppo import PPOConfig
from luca_gym.agents.ppo import load as load_ppo
from luca_gym.agents.ppo import train as train_ppo

__all__ = ["FlatPolicy", "PPOConfig", "load_ppo", "train_ppo"]
