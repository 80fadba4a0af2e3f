"""A biobank world from a seed: :func:`make_world` -> :class:`BiobankWorld`
(the release an analyst gets and the oracle that keeps the truth).

A world is a pure function of (seed, config): unsealed, it is drawn from the
seed itself; sealed (:mod:`luca_gym.seal`), from the sealed seed, the design
of a panel seed (0-19) kept (:func:`~.design.design_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from luca_gym.validate import check_seed
from luca_gym.worlds.biobank.config import PROFILES, BiobankConfig
from luca_gym.worlds.biobank.design import Design, design_of
from luca_gym.worlds.biobank.generator import STANDARD_MEASURE, cohort
from luca_gym.worlds.biobank.oracle import Oracle
from luca_gym.worlds.biobank.release import Release, build_release


@dataclass(frozen=True)
class BiobankWorld:
    """One world: ``release`` (:class:`~.release.Release`), ``oracle``
    (:class:`~.oracle.Oracle`), its ``design`` and the ``world_seed`` it was drawn from."""

    release: Release
    oracle: Oracle
    design: Design
    world_seed: int


def make_world(seed, config: BiobankConfig | None = None, seal=None) -> BiobankWorld:
    """The world of public ``seed`` under ``config`` (default: the small
    profile), sealed under ``seal`` (a :class:`luca_gym.seal.Seal`) or not.
    ValueError names a bad seed."""
    config = config or BiobankConfig()
    seed = check_seed(seed)
    world_seed = seed if seal is None else seal.organism_seed(seed)
    return _world(world_seed, design_of(seed, world_seed, config.tier), config.profile)


@lru_cache(maxsize=4)  # a sweep's sessions of one world, and the tests' fixtures, share it
def _world(world_seed: int, design: Design, profile: str) -> BiobankWorld:
    sizes = PROFILES[profile]
    c = cohort(world_seed, design, sizes)
    release = build_release(c, design, world_seed, sizes)
    imaged = c["imaged"]
    baseline_name = STANDARD_MEASURE[design.archetype]
    baseline = np.asarray(release.tables["imaging"][baseline_name], np.float64)
    drivers = {release.proteins[i]: float(c["effect"][i]) for i in np.flatnonzero(c["driver"])}
    pair = tuple(release.proteins[i] for i in c["interaction"]) if design.tier == "hard" and design.n_drivers >= 2 else ()
    oracle = Oracle(design=design, drivers=drivers, decoys={}, surrogate=None, severity=c["severity"][imaged].astype(np.float64),
                    baseline=baseline, baseline_name=f"imaging.{baseline_name}", interaction=pair)
    return BiobankWorld(release, oracle, design, world_seed)
