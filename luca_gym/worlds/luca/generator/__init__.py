"""The LUCA world: tiers, scaling rules and the organism generator (SPEC §1).

``make_organism(seed, tier, n_genes, mode, backwards)`` is a pure function of
its arguments, and :func:`generate` makes a whole batch at once. The generator
is JAX from end to end: every random choice comes from a key derived from
``(seed, tier, n_genes, attempt)``, every guarantee is checked with the same
solver the sessions use, and one ``jit(vmap(...))`` call runs an attempt for a
whole batch on the device. An attempt that fails a guarantee is replaced by the
next one (only those organisms are retried), so the result stays a pure
function of the triple.

The parts, by the paper's concepts: :mod:`~luca_gym.worlds.luca.generator.tiers` (tiers and
scaling rules), :mod:`~luca_gym.worlds.luca.generator.network` (the regulatory network and its
settling), :mod:`~luca_gym.worlds.luca.generator.malfunction` (disease mode),
:mod:`~luca_gym.worlds.luca.generator.tasks` (prediction tasks) and
:mod:`~luca_gym.worlds.luca.generator.organisms` (attempts, retries, batches). This module is
their public face.
"""

from __future__ import annotations

from luca_gym.worlds.luca.spec import MAX_GENES, MIN_GENES, MODES
from luca_gym.worlds.luca.generator.organisms import (
    MAX_ATTEMPTS,
    generate,
    make_organism,
    map_batch,
    organism_key,
    organism_meta,
    traced_generate,
)
from luca_gym.worlds.luca.sim import STABILITY_SQUARINGS, spectral_radius_bound
from luca_gym.worlds.luca.generator.network import STABILITY_MARGIN
from luca_gym.worlds.luca.generator.tiers import (
    TIERS,
    Plan,
    Sizes,
    Tier,
    TierParams,
    expected_in_degree,
    plan,
    round_half_up,
    sizes,
    tier_params,
    weight_scale,
)

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_GENES",
    "MIN_GENES",
    "MODES",
    "STABILITY_MARGIN",
    "STABILITY_SQUARINGS",
    "TIERS",
    "Plan",
    "Sizes",
    "Tier",
    "TierParams",
    "expected_in_degree",
    "generate",
    "make_organism",
    "map_batch",
    "organism_key",
    "organism_meta",
    "plan",
    "round_half_up",
    "sizes",
    "spectral_radius_bound",
    "tier_params",
    "traced_generate",
    "weight_scale",
]
