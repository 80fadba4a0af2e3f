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

# The names of the package's own worlds' baselines, by the entry point that holds them: what ``luca-gym worlds``
# (:func:`describe`) lists without importing a world's core (the policies import JAX). A world of another package,
# or an entry point not here, is loaded to list its names; tests/test_cli_light.py checks these against the loaded ones.
BUILTIN_BASELINE_NAMES = {
    "luca_gym.worlds.luca.baselines:BASELINES": ("random", "heuristic", "causal-sweep", "task-directed", "model-fit",
                                                 "causal-sweep-flat"),
    "luca_gym.worlds.luca.baselines.sweep_flat:FLAT_BASELINES": ("causal-sweep-flat",),
    "luca_gym.worlds.graphs.baselines:BASELINES": ("systematic", "random", "bayes-edges"),
    "luca_gym.worlds.graphs.baselines:FLAT_BASELINES": ("systematic", "information-gain", "round-robin"),
    "luca_gym.worlds.equation.baselines:BASELINES": ("random", "systematic", "noisy-fit"),
    "luca_gym.worlds.equation.batched:FLAT_BASELINES": ("random", "eliminate"),
    "luca_gym.worlds.tracking.baselines:BASELINES": ("systematic", "forgetful", "random"),
    "luca_gym.worlds.biobank.pipeline:BASELINES": ("null", "nominate-nothing", "nominate-all", "top-association",
                                                   "cue-spotter", "artefact-sweep", "blanket-labels",
                                                   "association-pick", "correlation-screen", "cis-mr", "mr-experiments",
                                                   "causal-pipeline"),
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
        vector = None
        if env_id.endswith(f"/{world.gym_stem}-v0"):
            # A world's own vector env, else the generic batch over its core (named, not imported).
            vector = world.vector_env or (CoreVectorEntryPoint(world.name) if world.core is not None else None)
        if env_id.endswith(f"/{world.gym_stem}Flat-v0"):
            # The single flat env takes settings=dict(...) as the batch does. With a flat codec,
            # make_vec builds the JAX batch (named, not imported: the registry imports no env
            # module), told its world through the id's kwargs, which the single env's entry
            # point checks and drops; without one, make_vec is Gymnasium's, of the single env.
            entry_point = FlatEnvEntryPoint(entry_point, world.name if world.flat is not None else None)
            if world.flat is not None:
                vector, kwargs = FLAT_VECTOR_ENV, {**kwargs, "world": world.name}
        gymnasium.register(id=env_id, entry_point=entry_point, vector_entry_point=vector, kwargs=kwargs)


def unfold_settings(settings, kwargs: dict) -> dict:
    """A flat env's settings given as keyword arguments, ``settings=dict(...)``
    or both: one dict (ValueError for a ``settings`` that is not a dict, or
    a setting given both ways)."""
    if settings is None:
        return dict(kwargs)
    if not isinstance(settings, dict):
        raise ValueError(f"settings: {short_repr(settings)} not allowed; a dict of the world's settings, "
                         "e.g. settings=dict(n_nodes=5), or the settings as keyword arguments")
    twice = sorted(set(settings) & set(kwargs))
    if twice:
        raise ValueError(f"settings: {', '.join(map(str, twice))} given twice (a keyword argument and in settings=); give it once")
    return {**settings, **kwargs}


class FlatEnvEntryPoint:
    """The entry point of a world's flat Gymnasium id: the single env
    ``entry_point`` names, its settings given as keyword arguments or as
    ``settings=dict(...)``, as the batched flat env takes them. ``world``:
    the world's name where the id's kwargs carry it (a world with a flat
    codec, whose ``make_vec`` is the JAX batch :data:`FLAT_VECTOR_ENV`); the
    single env is not given it, and another world's name is refused.
    Picklable (async vector envs)."""

    def __init__(self, entry_point: str, world: str | None = None):
        self.entry_point = entry_point
        self.world = world

    @property
    def metadata(self) -> dict:
        """The env class's metadata (Gymnasium reads its render modes)."""
        return load(self.entry_point).metadata

    def __call__(self, *, settings=None, world=None, **kwargs):
        if world is not None and world != self.world:
            raise ValueError(f"world: {short_repr(world)} not allowed for this id; it is world {self.world!r}'s "
                             "(gym.make the id of the world wanted)")
        return load(self.entry_point)(**unfold_settings(settings, kwargs))

    def __eq__(self, other):
        return isinstance(other, FlatEnvEntryPoint) and (other.entry_point, other.world) == (self.entry_point, self.world)

    def __hash__(self):
        return hash((self.entry_point, self.world))

    def __repr__(self) -> str:
        return f"FlatEnvEntryPoint({self.entry_point!r}, world={self.world!r})"


# make_vec of a flat id whose world has a flat codec: the JAX batch, by name.
FLAT_VECTOR_ENV = "luca_gym.envs.flat_vector:FlatVectorEnv"
# make_vec of a world's id where the world has a core and no vector env of its own: the generic batch, by name.
CORE_VECTOR_ENV = "luca_gym.envs.core_vector:CoreVectorEnv"


class CoreVectorEntryPoint:
    """The ``vector_entry_point`` of a world's ``luca_gym/<Stem>-v0`` where
    the world declares a core and no ``vector_env``: the generic
    :data:`CORE_VECTOR_ENV` bound to ``world`` (the id's kwargs name it for
    a world on the generic single env, and another world's name is
    refused). Picklable."""

    def __init__(self, world: str):
        self.world = world

    def __call__(self, num_envs: int, *, world=None, **kwargs):
        if world is not None and world != self.world:
            raise ValueError(f"world: {short_repr(world)} not allowed for this id; it is world {self.world!r}'s "
                             "(gym.make_vec the id of the world wanted)")
        return load(CORE_VECTOR_ENV)(num_envs, world=self.world, **kwargs)

    def __eq__(self, other):
        return isinstance(other, CoreVectorEntryPoint) and other.world == self.world

    def __hash__(self):
        return hash((CORE_VECTOR_ENV, self.world))

    def __repr__(self) -> str:
        return f"CoreVectorEntryPoint({self.world!r})"


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


def _policy_names(entry_point: str | None) -> tuple[str, ...]:
    """The names of the policies at ``entry_point`` (a ``{name: policy}``
    dict): a built-in's from :data:`BUILTIN_BASELINE_NAMES` (nothing
    imported), another's loaded."""
    if entry_point is None:
        return ()
    if entry_point in BUILTIN_BASELINE_NAMES:
        return BUILTIN_BASELINE_NAMES[entry_point]
    return tuple(load(entry_point))


def baseline_names(world) -> tuple[str, ...]:
    """The names of ``world``'s baselines (``World.baselines``'s keys), read
    without importing a built-in world's core."""
    return _policy_names(get(world).baselines)


def flat_baseline_names(world) -> tuple[str, ...]:
    """The names of ``world``'s flat baselines (``World.flat_baselines``'s
    keys), read without importing a built-in world's core."""
    return _policy_names(get(world).flat_baselines)


def describe(world) -> dict:
    """What ``luca-gym worlds`` says of ``world`` (a name, entry point or
    World), read from the registry alone (no world's core, no JAX, for the
    built-ins): name, version, summary, headline, settings (the key fields
    but the seed), gym_ids, baselines, flat_baselines (None where the world
    has none), contrasts and reference."""
    w = get(world)
    return {
        "name": w.name,
        "version": w.version,
        "summary": w.summary,
        "headline": w.headline,
        "settings": tuple(k for k in w.session_keys if k != "seed"),
        "gym_ids": tuple(w.gym_ids()),
        "baselines": baseline_names(w),
        "flat_baselines": None if w.flat_baselines is None else flat_baseline_names(w),
        "contrasts": tuple(c.name for c in w.contrasts),
        "reference": w.reference,
    }


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "World", "baseline_names", "describe", "flat_baseline_names", "get", "names",
           "register_world"]
