"""Instance sources: where a batched front end gets each new episode's instance.

One concept for every world: a *source* hands out, for ``count`` new
episodes, their instance seeds, their instances (a pytree, ``count``
leading, numpy) and, where the world's sessions take one, their noise keys
(uint32 ``(count, 2)``), all drawn with the env's numpy RNG so an env's
episodes are a pure function of its seed. Two kinds:

* ``"pool"``: M instances, the seeds ``pool_seeds`` (by default the training
  seeds 10 000 .. 10 000 + M - 1, :func:`luca_gym.functional.training_seeds`,
  never the evaluation seeds 0-19), built once at the first draw (through a
  world's store where it has one: LUCA keeps its organisms on disk,
  :func:`luca_gym.worlds.luca.pools.stored_organisms`), each episode drawing
  a row uniformly. With ``renew``, each episode also draws a fresh noise key
  from the RNG, so an instance met twice is measured with other noise; a
  world whose sessions are deterministic given the instance opens the same
  session each time it meets one (an agent trained on a pool has met only its
  M instances: a score on them is a training score).
* ``"fresh"``: a new seed per episode drawn from ``[low, DRAWN_SEED_LIMIT)``,
  its instance built ahead of need in batches of ``generation_batch`` times
  a power of two (few distinct batch sizes to compile; a world whose
  generator costs more than an episode builds few large batches), each used
  once, with the key the world builds beside it.

The vector envs (:class:`luca_gym.envs.core_vector.CoreVectorEnv`, LUCA's
:class:`~luca_gym.worlds.luca.envs.LucaVectorEnv` through
:class:`~luca_gym.worlds.luca.pools.EpisodeOrganisms`) and the SB3 vec envs
(:class:`luca_gym.envs.sb3_vec.FlatSB3VecEnv`, LUCA's
:class:`~luca_gym.worlds.luca.envs.LucaSB3VecEnv`) draw from one. The
functional env's :class:`luca_gym.functional.Pool` is a pool source's M
instances in their device form (:func:`luca_gym.functional.make_pool` reads
:meth:`InstanceSource.pool_instances`: LUCA's from its disk store), each
opened once as the seed's own session and drawn inside the jit by a JAX key.

A flat codec opens an instance in its own form (:func:`codec_instances`):
the instance alone, or, for a world whose sessions take a noise key (LUCA's
codec opens an organism with its key), the pair (instance, key).
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from luca_gym.validate import DRAWN_SEED_LIMIT, check_positive_int, short_repr

KINDS = ("pool", "fresh")


def check_kind(value, name: str = "organisms") -> str:
    """``"pool"`` or ``"fresh"`` (ValueError naming ``name`` otherwise)."""
    if not isinstance(value, str) or value not in KINDS:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; allowed {', '.join(map(repr, KINDS))}")
    return value


def take(tree, rows):
    """Every array of ``tree`` at ``rows`` (an index array or a slice) of its leading axis."""
    return jax.tree_util.tree_map(lambda x: x[rows], tree)


def codec_instances(instances, keys):
    """``instances`` in the form a flat codec's ``open`` takes: the instances
    alone where ``keys`` is None, else the pair (instances, keys) (LUCA's
    codec opens (organism, noise key))."""
    return instances if keys is None else (instances, keys)


def _concatenate(a, b):
    return jax.tree_util.tree_map(lambda x, y: np.concatenate([x, y]), a, b)


class InstanceSource:
    """Each new episode's instance seed, instance and noise key.

    Args:
        kind: ``"pool"`` or ``"fresh"`` (the module's notes).
        build: ``(seeds int64 (B,)) -> (instances, keys)``: the instances of
            ``seeds`` (numpy, B leading) and their sessions' own noise keys
            (uint32 (B, 2), or None for a world without them); fresh and
            pinned episodes open with these.
        pool_seeds: the pool's seeds (int64 (M,); kind ``"pool"`` only).
        pool_build: ``(seeds) -> instances``: the pool's instances (default:
            ``build``'s, without keys); a world's disk store goes here.
        pool_keys: ``(seeds) -> keys``: the pool instances' own noise keys,
            as ``build`` gives them (uint32 (M, 2)), for a front end that
            opens each pool instance once as the seed's own session
            (:meth:`pool_instances`); default: ``build``'s (with ``pool_build``
            given, that builds the instances again: a world with a store
            passes its keys here).
        renew: a pool episode draws a fresh noise key (uint32 (2,)) from the
            RNG after its row (without: no key, the world has none).
        generation_batch: the fewest fresh instances built in one call.
        low: fresh seeds are drawn from ``[low, DRAWN_SEED_LIMIT)``.
        kind_name: the argument's name in errors (LUCA's ``organisms``).
    """

    def __init__(self, kind: str, build: Callable, *, pool_seeds=None, pool_build: Callable | None = None,
                 pool_keys: Callable | None = None, renew: bool = False, generation_batch: int = 16, low: int = 0,
                 kind_name: str = "instances"):
        self.kind = check_kind(kind, kind_name)
        self.build = build
        self.generation_batch = check_positive_int(generation_batch, "generation_batch")
        if not 0 <= low < DRAWN_SEED_LIMIT:
            raise ValueError(f"low: {short_repr(low)} not allowed; an integer in 0..{DRAWN_SEED_LIMIT - 1}")
        self.low = int(low)
        self.renew = bool(renew)
        if self.kind == "pool":
            if pool_seeds is None:
                raise ValueError("pool_seeds: a pool needs its seeds")
            self.seeds = np.asarray(pool_seeds, np.int64)
        else:
            self.seeds = None
        self._pool_build = pool_build
        self._pool_keys = pool_keys
        self._pool = self._built_keys = None
        self.clear()

    @property
    def pool_size(self) -> int | None:
        return None if self.seeds is None else int(self.seeds.size)

    @property
    def pool(self):
        """The pool's instances (numpy, M leading), built (or read from the world's store) on first use."""
        if self._pool is None:
            if self.seeds is None:
                raise ValueError("pool: a fresh source has no pool")
            if self._pool_build is None:
                self._pool, self._built_keys = self.build(self.seeds)
            else:
                self._pool = self._pool_build(self.seeds)
        return self._pool

    def pool_instances(self):
        """(instances, keys): the pool's instances (:attr:`pool`) and their
        own noise keys (uint32 (M, 2), or None for a world without them),
        the pool's seeds' instances exactly as ``build`` gives them: what a
        front end opening each pool instance once as the seed's own session
        opens (:func:`luca_gym.functional.make_pool`, through
        :func:`codec_instances`)."""
        instances = self.pool
        if self._pool_keys is not None:
            return instances, self._pool_keys(self.seeds)
        if self._pool_build is None:
            return instances, self._built_keys
        return instances, self.build(self.seeds)[1]

    def clear(self) -> None:
        """Drop the fresh instances built ahead (a reseeded RNG replays its draws)."""
        self._stock = (np.zeros(0, np.int64), None)

    def draw_rows(self, rng: np.random.Generator, count: int):
        """Pool: (seeds int64 (count,), rows of :attr:`pool` int64 (count,),
        keys uint32 (count, 2) or None) drawn from ``rng``: the rows, then
        the keys (with ``renew``)."""
        rows = rng.integers(0, self.seeds.size, size=count)
        keys = rng.integers(0, 2**32, size=(count, 2), dtype=np.uint32) if self.renew else None
        return self.seeds[rows], rows, keys

    def draw(self, rng: np.random.Generator, count: int):
        """(seeds int64 (count,), instances numpy (count leading), keys uint32
        (count, 2) or None) of ``count`` new episodes, drawn from ``rng``."""
        if self.kind == "pool":
            seeds, rows, keys = self.draw_rows(rng, count)
            return seeds, take(self.pool, rows), keys
        seeds, built = self._stock
        if seeds.size < count:
            batches = -(-(count - seeds.size) // self.generation_batch)
            new = rng.integers(self.low, DRAWN_SEED_LIMIT, size=self.generation_batch << (batches - 1).bit_length(),
                               dtype=np.int64)
            more = self.build(new)
            seeds = np.concatenate([seeds, new])
            built = more if built is None else _concatenate(built, more)
        self._stock = seeds[count:], take(built, slice(count, None))
        instances, keys = take(built, slice(None, count))
        return seeds[:count], instances, keys


__all__ = ["InstanceSource", "KINDS", "check_kind", "codec_instances", "take"]
