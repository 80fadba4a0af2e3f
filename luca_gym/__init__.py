"""luca-gym: the LUCA synthetic world for experimental reasoning.

A JAX steady-state simulator of gene-regulatory "organisms", the hidden-ground-
truth scorer of the LUCA paper, and (in later modules) Gymnasium environments
over one pure session core.

Importing the package turns on JAX's persistent compilation cache
(:mod:`luca_gym.compile_cache`; ``LUCA_GYM_CACHE_DIR=off`` disables it).
"""

from luca_gym import compile_cache

compile_cache.configure()  # before anything compiles: later runs reuse the compiled programs

from luca_gym.types import Organism, OrganismArrays, OrganismMeta, SteadyState
from luca_gym.world import MODES, TIERS, make_organism, sizes

__version__ = "0.1.0"

__all__ = [
    "MODES",
    "TIERS",
    "Organism",
    "OrganismArrays",
    "OrganismMeta",
    "SteadyState",
    "make_organism",
    "sizes",
]


def _register() -> None:
    import gymnasium

    if "luca_gym/Luca-v0" not in gymnasium.registry:
        gymnasium.register(
            id="luca_gym/Luca-v0",
            entry_point="luca_gym.envs:LucaEnv",
            vector_entry_point="luca_gym.envs:LucaVectorEnv",
        )
    if "luca_gym/LucaFlat-v0" not in gymnasium.registry:
        gymnasium.register(id="luca_gym/LucaFlat-v0", entry_point="luca_gym.envs:LucaFlatEnv")
    if "luca_gym/LucaTools-v0" not in gymnasium.registry:
        gymnasium.register(id="luca_gym/LucaTools-v0", entry_point="luca_gym.envs.tools:LucaToolsEnv")


_register()
