"""The graph worlds' Gymnasium envs.

* ``luca_gym/DagDiscovery-v0`` / ``luca_gym/RelationalDiscovery-v0``: the
  generic :class:`luca_gym.envs.core.CoreEnv` over the core
  (:mod:`~luca_gym.worlds.graphs.core`): the whole action, a ``Dict`` of
  ``kind`` (0 intervene, 1 submit, 2 end), ``node`` and ``adjacency``
  (``MultiBinary((N, N))``, read by a submission and, under
  ``proposals="every"``, by an intervention); the observation is four keys of
  the public view (``states``, ``evidence``, ``intervened``,
  ``budget_left``); ``info`` holds the refusal's code and words
  (``info["error_code"]``, ``info["error"]``) on every step.
  :class:`DagEnv` / :class:`RelationalEnv` are that env, bound to the world.
* :class:`DagFlatEnv` / :class:`RelationalFlatEnv` (``...Flat-v0``): the
  flat codec (:mod:`~luca_gym.worlds.graphs.flat`) as a Gymnasium env
  (:class:`luca_gym.envs.codec.CodecEnv`), with an action mask.

A refused action earns nothing and changes nothing; an action outside the
action space raises ValueError and changes nothing.
"""

from __future__ import annotations

from luca_gym.envs.codec import CodecEnv
from luca_gym.envs.core import CoreEnv


class DagEnv(CoreEnv):
    """``luca_gym/DagDiscovery-v0`` (keyword settings: :class:`~luca_gym.worlds.graphs.config.DagConfig`'s fields):
    the generic env of ``dag``."""

    def __init__(self, render_mode: str | None = None, **settings):
        super().__init__("dag", render_mode=render_mode, **settings)


class RelationalEnv(CoreEnv):
    """``luca_gym/RelationalDiscovery-v0`` (keyword settings: :class:`~luca_gym.worlds.graphs.config.RelationalConfig`'s
    fields): the generic env of ``relational``."""

    def __init__(self, render_mode: str | None = None, **settings):
        super().__init__("relational", render_mode=render_mode, **settings)


class DagFlatEnv(CodecEnv):
    """``luca_gym/DagDiscoveryFlat-v0``: the flat codec of ``dag``."""

    world = "dag"


class RelationalFlatEnv(CodecEnv):
    """``luca_gym/RelationalDiscoveryFlat-v0``: the flat codec of ``relational``."""

    world = "relational"
