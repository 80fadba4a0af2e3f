"""Session noise keys: measurement noise is a pure function of the organism
triple and the measurement counter, so a replayed session reproduces exactly."""

from __future__ import annotations

import jax
import numpy as np

from luca_gym import seal
from luca_gym.worlds.luca import spec, generator as world


def noise_key(seed: int, tier: str, n_genes: int, sealed=None) -> jax.Array:
    """The session noise key of an organism triple (of its sealed seed under
    ``sealed``, :mod:`luca_gym.seal`)."""
    return noise_keys(np.asarray([spec.check_seed(seed)], np.int64), tier, n_genes, sealed)[0]


def noise_keys(seeds, tier: str, n_genes: int, sealed=None) -> jax.Array:
    """:func:`noise_key` of many seeds at once: (B, 2) uint32."""
    seeds = seal.resolve_seeds(np.asarray(seeds, np.int64), seal.make_seal(sealed))
    hi, lo = (seeds >> 32).astype(np.uint32), (seeds & 0xFFFFFFFF).astype(np.uint32)
    return traced_noise_keys(hi, lo, np.uint32(world.TIERS[spec.check_tier(tier)].index), np.uint32(spec.check_n_genes(n_genes)))


@jax.jit
def traced_noise_keys(seed_hi, seed_lo, tier_index, n_genes) -> jax.Array:
    """(B, 2) uint32 keys from the seeds as two uint32 words (B,) each; usable
    inside a user's own ``jit`` (the organisms of :func:`luca_gym.worlds.luca.functional.fresh_rollout`)."""

    def one(hi, lo):
        key = jax.random.fold_in(jax.random.PRNGKey(lo), hi)
        return jax.random.fold_in(jax.random.fold_in(key, tier_index), n_genes)

    return jax.vmap(one)(seed_hi, seed_lo)
