"""luca-gym: synthetic worlds for experimental reasoning.

Worlds with a hidden ground truth, where an agent chooses budgeted
experiments and is scored on what it concluded. Each world lives in
``luca_gym.worlds.<name>`` on one protocol (:mod:`luca_gym.protocol`) and is
found through the registry (:mod:`luca_gym.worlds`: ``names()``, ``get()``,
:func:`register_world`); registering a world registers its Gymnasium ids.
LUCA (``luca_gym.worlds.luca``) is the first; its most used names are
re-exported here.

Importing the package turns on JAX's persistent compilation cache
(:mod:`luca_gym.compile_cache`; ``LUCA_GYM_CACHE_DIR=off`` disables it) and
XLA's portable CPU math (the same instance, bit for bit, on every x86 CPU).
"""

from luca_gym import compile_cache

compile_cache.portable_math()  # before JAX's backend starts
compile_cache.configure()  # before anything compiles: later runs reuse the compiled programs

from luca_gym.worlds.luca.types import Organism, OrganismArrays, OrganismMeta, SteadyState
from luca_gym.worlds.luca.generator import MODES, TIERS, make_organism, sizes

__version__ = "0.1.0"

__all__ = [
    "MODES",
    "TIERS",
    "Organism",
    "OrganismArrays",
    "OrganismMeta",
    "SteadyState",
    "make_organism",
    "register_world",
    "sizes",
    "worlds",
]


from luca_gym import worlds
from luca_gym.worlds import register_world

worlds.names()  # registers the built-in worlds' Gymnasium ids (luca_gym/Luca-v0, ...) and any entry-point worlds
