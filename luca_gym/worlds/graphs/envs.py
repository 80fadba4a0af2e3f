"""The graph worlds' Gymnasium envs.

* ``luca_gym/DagDiscovery-v0`` / ``luca_gym/RelationalDiscovery-v0``: the
  generic :class:`luca_gym.envs.core.CoreEnv` over the core
  (:mod:`~luca_gym.worlds.graphs.core`): the whole action, a ``Dict`` of
  ``kind`` (0 intervene, 1 submit, 2 end), ``node`` and ``adjacency``
  (``MultiBinary((N, N))``, read by a submission and, under
  ``proposals="every"``, by an intervention); the observation is four keys of
  the public view (``states``, ``evidence``, ``intervened``,
  ``budget_left``). :class:`DagEnv` / :class:`RelationalEnv` add the refusal's
  words to ``info`` (``info["error"]``, beside the generic
  ``info["error_code"]``), as these envs always have.
* :class:`DagFlatEnv` / :class:`RelationalFlatEnv` (``...Flat-v0``): the
  flat codec (:mod:`~luca_gym.worlds.graphs.flat`) as a Gymnasium env
  (:class:`luca_gym.envs.codec.CodecEnv`), with an action mask.

A refused action earns nothing and changes nothing; an action outside the
action space raises ValueError and changes nothing.
"""

from __future__ import annotations

from luca_gym.envs.codec import CodecEnv
from luca_gym.envs.core import CoreEnv
from luca_gym.worlds.graphs import core


class _GraphEnv(CoreEnv):
    """:class:`~luca_gym.envs.core.CoreEnv` with ``info["error"]``: the
    generic env reports a refusal by its code alone; these envs have always
    given its words too (None when nothing was refused), so this adapter stays
    until the generic env gives them."""

    world_name = "dag"

    def __init__(self, render_mode: str | None = None, **settings):
        super().__init__(self.world_name, render_mode=render_mode, **settings)

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        info["error"] = core.ERRORS[info["error_code"]] or None
        return observation, reward, terminated, truncated, info


class DagEnv(_GraphEnv):
    """``luca_gym/DagDiscovery-v0`` (keyword settings: :class:`~luca_gym.worlds.graphs.config.DagConfig`'s fields)."""

    world_name = "dag"


class RelationalEnv(_GraphEnv):
    """``luca_gym/RelationalDiscovery-v0`` (keyword settings: :class:`~luca_gym.worlds.graphs.config.RelationalConfig`'s fields)."""

    world_name = "relational"


class DagFlatEnv(CodecEnv):
    """``luca_gym/DagDiscoveryFlat-v0``: the flat codec of ``dag``."""

    world = "dag"


class RelationalFlatEnv(CodecEnv):
    """``luca_gym/RelationalDiscoveryFlat-v0``: the flat codec of ``relational``."""

    world = "relational"
