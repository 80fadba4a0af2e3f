"""Organism pools: where the batched front ends get each new episode's organism.

Generating an organism costs more than the episode it starts (on a CPU it
takes at least 108 solves to check its guarantees where an episode makes about
32), so :class:`~luca_gym.worlds.luca.envs.LucaVectorEnv` and
:class:`~luca_gym.worlds.luca.envs.LucaSB3VecEnv` start each new episode, by
default, on an organism drawn uniformly from a *pool*: the organisms of
``pool_size`` (default 1024) consecutive training seeds (from 10 000 up,
:data:`luca_gym.functional.TRAINING_SEED_START`, never the evaluation seeds
0-19). A pool is generated once per (settings, seeds) and kept on disk beside
the compilation cache (:func:`pool_dir`), so the second run starts at once.
Each episode still gets a fresh noise key from the env's RNG: an organism met
twice is measured with other noise. :class:`EpisodeOrganisms` is LUCA's
configuration of the generic instance source (:class:`luca_gym.pools.InstanceSource`,
what every world's vector env draws from): organisms as instances, this
module's store as the pool's, a fresh noise key drawn per pool episode. The
functional env's pool (:func:`luca_gym.functional.make_pool`, PPO's training
pool) is the same source's organisms, opened once each with their seeds' own
noise keys (:meth:`~luca_gym.pools.InstanceSource.pool_instances`), so it
too is read from the store after the first run.

A pool is only a cache of :func:`luca_gym.worlds.luca.generator.generate`: an
organism stays a pure function of its seed, and a stored pool reads back
bitwise the arrays ``generate(seeds, ...)`` gives on this platform. The store
is keyed by everything the organisms depend on: the package's source (as the
stored generator programs are), JAX's version, the backend, tier, mode,
N, backwards and the seeds. The gene names (and so the vocabulary) are not
arrays and are not stored. Sealed organisms are pooled in memory only, never
written to disk.

What a pool means for generalisation: an agent trained on a pool has met only
its M organisms (with fresh noise); a score on them is a training score. Held-out
organisms (the evaluation seeds 0-19, or any seed outside the pool) measure
generalisation, and the gap shrinks as M grows (Procgen and XLand-MiniGrid fix
their level sets the same way, at 10^4-10^5). ``organisms="fresh"`` gives a
new organism every episode (no gap, at the generator's cost).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys

import jax
import numpy as np

from luca_gym import compile_cache
from luca_gym import seal as seal_mod
from luca_gym.pools import InstanceSource, check_kind
from luca_gym.functional import DEFAULT_POOL_SIZE, TRAINING_SEED_START, training_seeds
from luca_gym.validate import DRAWN_SEED_LIMIT, check_positive_int, is_integer, short_repr
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.functional import organism_batch
from luca_gym.worlds.luca.generator.organisms import _source_digest, check_seeds
from luca_gym.worlds.luca.types import OrganismArrays

# The functional env's default too. Generating it takes a first run about 3 s
# for easy or medium organisms on a 2-core CPU, but about 40 s (hard) and 65 s
# (hard disease): hard organisms generate at 15-30 per second there. Reading a
# stored pool back takes well under 0.1 s. Training runs that care about
# held-out organisms want 10^4 and more (pool_size).
POOL_FORMAT = 1
_FIELDS = tuple(f.name for f in dataclasses.fields(OrganismArrays))
_POOLS: dict = {}  # this process's pools: a dict lookup after the first env


def pool_dir() -> str | None:
    """Where pools are stored (beside the stored generator programs), or None when the cache is off."""
    where = compile_cache.cache_dir()
    return None if where is None else os.path.join(where, "luca-gym-pools")


def pool_seeds(size: int = DEFAULT_POOL_SIZE, start: int = TRAINING_SEED_START) -> np.ndarray:
    """int64 (size,): the pool's seeds, ``start .. start + size - 1`` (below the drawn-seed limit)."""
    size = check_positive_int(size, "pool_size")
    if not is_integer(start) or not 0 <= start < DRAWN_SEED_LIMIT:
        raise ValueError(f"pool start: {short_repr(start)} not allowed; an integer in 0..{DRAWN_SEED_LIMIT - 1}")
    if start + size > DRAWN_SEED_LIMIT:
        raise ValueError(f"pool_size: {size} too large for a pool from seed {start}; allowed 1..{DRAWN_SEED_LIMIT - start}")
    return training_seeds(size, int(start))


def stored_organisms(seeds, tier: str, n_genes: int = 20, mode: str = "healthy", backwards: bool = False, *,
                     sealed=None) -> OrganismArrays:
    """``generate(seeds, tier, n_genes, mode, backwards, sealed=sealed)`` as
    numpy arrays (B leading), read from the store when there, else generated
    and stored (sealed organisms: kept in this process only)."""
    seeds = check_seeds(seeds)
    tier, n_genes, mode, backwards = spec.check_organism(tier, n_genes, mode, backwards)
    seal = seal_mod.make_seal(sealed)
    name = (f"pool-{tier}-{mode}-n{n_genes}-{'backwards' if backwards else 'forwards'}-{jax.default_backend()}"
            f"-{int(seeds[0])}-{seeds.size}")
    key = hashlib.sha256(repr((POOL_FORMAT, jax.__version__, jax.default_backend(), _source_digest(), name,
                               hashlib.sha256(seeds.tobytes()).hexdigest())).encode()).hexdigest()[:24]
    memo = (key, None if seal is None else seal.fingerprint)
    if memo in _POOLS:
        return _POOLS[memo]
    folder = None if seal is not None else pool_dir()
    path = None if folder is None else os.path.join(folder, f"{name}-{key}.npz")
    organisms = _read(path, seeds)
    if organisms is None:
        if seeds.size >= 256:
            sys.stderr.write(f"luca_gym: generating a pool of {seeds.size} {tier} {mode} N={n_genes} organisms "
                             f"(first run only{'' if path is None else '; stored in ' + folder})\n")
        organisms = jax.device_get(world.generate(seeds, tier, n_genes, mode, backwards, sealed=seal))
        if path is not None:
            _write(path, seeds, organisms, stale=f"{name}-")
    _POOLS[memo] = organisms
    return organisms


def _read(path: str | None, seeds: np.ndarray) -> OrganismArrays | None:
    if path is None or not os.path.exists(path):
        return None
    try:
        with np.load(path) as data:
            if set(data.files) != {"seeds", *_FIELDS} or not np.array_equal(data["seeds"], seeds):
                return None
            arrays = {name: data[name] for name in _FIELDS}
    except Exception:  # noqa: BLE001 -- a damaged entry is generated again
        return None
    if any(a.shape[:1] != seeds.shape for a in arrays.values()):
        return None
    return OrganismArrays(**arrays)


def _write(path: str, seeds: np.ndarray, organisms: OrganismArrays, stale: str) -> None:
    """Store atomically; entries of the same pool under another key (an older
    source or JAX) are removed, so the store does not grow with every edit."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, seeds=seeds, **{name: np.asarray(getattr(organisms, name)) for name in _FIELDS})
        os.replace(tmp, path)
        for entry in os.listdir(folder):
            if entry.startswith(stale) and entry.endswith(".npz") and entry != os.path.basename(path):
                os.remove(os.path.join(folder, entry))
    except OSError:
        pass  # no store: this process still uses the pool it generated


class EpisodeOrganisms(InstanceSource):
    """Each new episode's organism and noise key, for LUCA's batched front
    ends: the generic :class:`luca_gym.pools.InstanceSource` with LUCA's
    organisms, its pool read from and kept in the store
    (:func:`stored_organisms`).

    Args:
        organisms: ``"pool"`` (draw uniformly from the organisms of
            :func:`pool_seeds` ``(pool_size, pool_start)``, loaded or generated
            at the first draw, with a fresh noise key per episode) or
            ``"fresh"`` (a newly drawn seed in ``[0, DRAWN_SEED_LIMIT)`` per
            episode, never used again, with the seed's own noise key, as a
            single env opens it; generated ahead of need, ``generation_batch``
            times a power of two at a time).
        settings: the organisms' settings (a
            :class:`~luca_gym.worlds.luca.config.LucaConfig`; its budget is
            the sessions', not the organisms'). seal: None or a
            :class:`luca_gym.seal.Seal`.
        seeds: the pool's seeds in place of ``pool_size`` consecutive ones
            (any seeds below the drawn-seed limit, in any order; the
            functional env's :func:`luca_gym.functional.make_pool`).
        low: fresh seeds are drawn from ``[low, DRAWN_SEED_LIMIT)``.

    ``draw(rng, count)`` gives (seeds int64 (count,), organisms numpy
    (count leading), noise keys uint32 (count, 2)); ``draw_rows`` (pool) the
    rows of :attr:`pool` in place of the organisms; ``pool_instances()``
    the pool's organisms (from the store) with their seeds' own noise keys.
    """

    def __init__(self, organisms: str, settings: LucaConfig, seal, *, pool_size: int = DEFAULT_POOL_SIZE,
                 pool_start: int = TRAINING_SEED_START, generation_batch: int = 16, seeds=None, low: int = 0):
        organisms = check_kind(organisms, "organisms")
        if not isinstance(settings, LucaConfig):
            raise ValueError(f"settings: {short_repr(settings)} is not a LucaConfig")
        self.tier, self.n_genes, self.mode, self.backwards = settings.tier, settings.n_genes, settings.mode, settings.backwards
        self.seal = seal
        if seeds is None:
            pool_size = check_positive_int(pool_size, "pool_size")
            seeds = pool_seeds(pool_size, pool_start) if organisms == "pool" else None
        else:
            seeds = check_seeds(seeds)
            if seeds.max() >= DRAWN_SEED_LIMIT:
                raise ValueError(f"seeds: {int(seeds.max())} out of range for a pool; allowed 0..{DRAWN_SEED_LIMIT - 1}")
            pool_size = int(seeds.size)
        super().__init__(organisms, self._organisms, pool_seeds=seeds, pool_build=self._stored, pool_keys=self._keys,
                         renew=True, generation_batch=generation_batch, low=low, kind_name="organisms")
        self.organisms = organisms
        self._pool_size = pool_size

    @property
    def pool_size(self) -> int:
        """The pool's organisms (the argument, also in ``"fresh"`` mode)."""
        return self._pool_size

    def _organisms(self, seeds: np.ndarray):
        """(organisms, their own noise keys) of ``seeds``, as numpy."""
        return jax.device_get(organism_batch(seeds, self.tier, self.n_genes, self.mode, self.backwards, sealed=self.seal))

    def _keys(self, seeds: np.ndarray) -> np.ndarray:
        """uint32 (B, 2): the sessions' own noise keys of ``seeds`` (as :meth:`_organisms` gives them)."""
        return jax.device_get(core.noise_keys(seeds, self.tier, self.n_genes, self.seal))

    def _stored(self, seeds: np.ndarray) -> OrganismArrays:
        return stored_organisms(seeds, self.tier, self.n_genes, self.mode, self.backwards, sealed=self.seal)
