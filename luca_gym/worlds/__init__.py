"""The registry of worlds: :func:`names`, :func:`get` and :func:`register_world`.

The worlds shipped with the package are listed here by entry point (the only
place outside ``luca_gym/worlds/<name>/`` that names one); a world in another
package registers itself through the entry-point group ``luca_gym.worlds``
(``[project.entry-points."luca_gym.worlds"] toy = "toy_world:WORLD"``), or by
calling :func:`luca_gym.register_world`. Registering a world registers its
Gymnasium ids (:meth:`luca_gym.protocol.World.gym_ids`).
"""

from __future__ import annotations

import threading
import warnings
from importlib import metadata

from luca_gym.protocol import World, load
from luca_gym.validate import short_repr

ENTRY_POINT_GROUP = "luca_gym.worlds"
# The package's own worlds, by entry point.
BUILTIN = {
    "luca": "luca_gym.worlds.luca:WORLD",
    "dag": "luca_gym.worlds.graphs:DAG",
    "relational": "luca_gym.worlds.graphs:RELATIONAL",
    "equation": "luca_gym.worlds.equation:WORLD",
    "tracking": "luca_gym.worlds.tracking:WORLD",
    "biobank": "luca_gym.worlds.biobank:WORLD",
}

_WORLDS: dict[str, World] = {}
_LOCK = threading.RLock()
_ENTRY_POINTS_LOADED = False


def register_world(world: World, *, replace: bool = False) -> World:
    """Add ``world`` to the registry and register its Gymnasium ids.

    Registering the same world again is a no-op; another world under a taken
    name is refused unless ``replace``. Raises TypeError for a non-World and
    ValueError for a taken name."""
    if not isinstance(world, World):
        raise TypeError(f"register_world: expected a luca_gym.protocol.World, got {type(world).__name__}")
    with _LOCK:
        old = _WORLDS.get(world.name)
        if old is not None and old != world and not replace:
            raise ValueError(f"register_world: a world named {world.name!r} is registered already "
                             f"({old.summary!r}); pass replace=True to replace it")
        _WORLDS[world.name] = world
    _register_gym_ids(world, replace=replace)
    return world


def _register_gym_ids(world: World, replace: bool) -> None:
    import gymnasium

    for env_id, (entry_point, kwargs) in world.gym_ids().items():
        if env_id in gymnasium.registry and not replace:
            continue
        vector = world.vector_env if env_id.endswith(f"/{world.gym_stem}-v0") else None
        if env_id.endswith(f"/{world.gym_stem}Flat-v0") and world.flat is not None:
            vector = _flat_vector_entry_point(world.name)
        gymnasium.register(id=env_id, entry_point=entry_point, vector_entry_point=vector, kwargs=kwargs)


def _flat_vector_entry_point(name: str):
    """``make_vec`` of a world's flat id: the JAX batch
    (:class:`luca_gym.envs.flat_vector.FlatVectorEnv`), imported when first
    built (registering imports no JAX)."""

    def make_flat_vector(**kwargs):
        from luca_gym.envs.flat_vector import FlatVectorEnv

        return FlatVectorEnv(world=name, **kwargs)

    make_flat_vector.__qualname__ = f"FlatVectorEnv[{name}]"
    return make_flat_vector


def _load_builtin() -> None:
    for name, entry_point in BUILTIN.items():
        if name not in _WORLDS:
            register_world(load(entry_point))


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    with _LOCK:
        if _ENTRY_POINTS_LOADED:
            return
        _ENTRY_POINTS_LOADED = True
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                world = ep.load()
                register_world(world)
            except Exception as error:  # a broken plug-in must not break the library
                warnings.warn(f"world entry point {ep.name!r} ({ep.value}) could not be registered: {error}", stacklevel=2)


def names() -> tuple[str, ...]:
    """The registered worlds' names, sorted (built-ins and entry points included)."""
    _load_builtin()
    _load_entry_points()
    return tuple(sorted(_WORLDS))


def get(world) -> World:
    """A registered world by name, a ``"package.module:attribute"`` entry point
    (loaded and registered), or a :class:`World` (registered and returned).

    Raises ValueError naming the value and the registered worlds."""
    if isinstance(world, World):
        return register_world(world)
    if not isinstance(world, str):
        raise ValueError(f"world: {short_repr(world)} is not a world name; allowed {', '.join(names())}")
    if ":" in world:
        try:
            loaded = load(world)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"world: {short_repr(world)} could not be loaded ({error})") from None
        if not isinstance(loaded, World):
            raise ValueError(f"world: {short_repr(world)} is a {type(loaded).__name__}, not a luca_gym.protocol.World")
        return register_world(loaded)
    if world not in names():
        raise ValueError(f"world: {short_repr(world)} unknown; allowed {', '.join(names())} "
                         "(or package.module:attribute)")
    return _WORLDS[world]


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "World", "get", "names", "register_world"]
