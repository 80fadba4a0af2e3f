"""luca-gym: synthetic worlds for experimental reasoning.

Worlds with a hidden ground truth, where an agent chooses budgeted
experiments and is scored on what it concluded. Each world lives in
``luca_gym.worlds.<name>`` on one protocol (:mod:`luca_gym.protocol`) and is
found through the registry (:mod:`luca_gym.worlds`: ``names()``, ``get()``,
:func:`register_world`); registering a world registers its Gymnasium ids.
LUCA (``luca_gym.worlds.luca``) is the first; its most used names are
re-exported here, imported on first use.

Importing the package imports no JAX (``luca-gym --help`` answers in a
fraction of a second): JAX's persistent compilation cache
(:mod:`luca_gym.compile_cache`; ``LUCA_GYM_CACHE_DIR=off`` disables it) and
XLA's portable CPU math (the same instance, bit for bit, on every x86 CPU)
are turned on when JAX is imported, before anything can compile; at once
where JAX was imported before the package.
"""

import importlib
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# LUCA's most used names, re-exported: their homes, imported on first use (they import JAX).
_LUCA_NAMES = {
    **dict.fromkeys(("MODES", "TIERS", "make_organism", "sizes"), "luca_gym.worlds.luca.generator"),
    **dict.fromkeys(("Organism", "OrganismArrays", "OrganismMeta", "SteadyState"), "luca_gym.worlds.luca.types"),
}
if TYPE_CHECKING:  # what static readers see (type checkers; griffe, for the API reference); __getattr__ at run time
    from luca_gym.worlds.luca.generator import MODES, TIERS, make_organism, sizes
    from luca_gym.worlds.luca.types import Organism, OrganismArrays, OrganismMeta, SteadyState

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


def _set_up_jax() -> None:
    """XLA's portable math and the compilation cache (:mod:`luca_gym.compile_cache`)."""
    from luca_gym import compile_cache

    compile_cache.portable_math()  # before JAX's backend starts
    compile_cache.configure()  # before anything compiles: later runs reuse the compiled programs


class _WhenJaxImports(importlib.abc.MetaPathFinder):
    """Runs :func:`_set_up_jax` right after ``jax`` itself is imported (its
    backend starts on the first computation, later), then leaves
    ``sys.meta_path``: the one import hook, for the one module it watches.

    It stays in place until JAX is really executed: a library that only asks
    whether JAX is there (``importlib.util.find_spec("jax")``) gets a spec
    whose loading would set JAX up, and the hook still watches the import
    that follows."""

    def __init__(self):
        self._asking = False  # our own find_spec below passes through this finder

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "jax" or self._asking:
            return None
        self._asking = True
        try:
            spec = importlib.util.find_spec("jax")  # the finders after this one find the real module
        finally:
            self._asking = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_set_up(module):
            exec_module(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _set_up_jax()

        spec.loader.exec_module = exec_then_set_up
        return spec


if "jax" in sys.modules:
    _set_up_jax()  # JAX came first: now (portable_math warns if its backend already runs)
else:
    from luca_gym.compile_cache import portable_math

    portable_math()  # sets XLA_FLAGS now, without importing JAX, for this process and the ones it starts
    if not any(isinstance(f, _WhenJaxImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenJaxImports())


def __getattr__(name: str):
    if name not in _LUCA_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LUCA_NAMES[name]), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


def __dir__():
    return sorted({*globals(), *__all__})


from luca_gym import worlds  # noqa: E402  (after the JAX hook: a world's registration may import JAX)
from luca_gym.worlds import register_world  # noqa: E402

worlds.names()  # registers the built-in worlds' Gymnasium ids (luca_gym/Luca-v0, ...) and any entry-point worlds
