"""A biobank world from a seed: :func:`make_world` -> :class:`BiobankWorld`
(the release an analyst gets and the oracle that keeps the truth).

A world is a pure function of (seed, config): unsealed, it is drawn from the
seed itself; sealed (:mod:`luca_gym.seal`), from the sealed seed, the design
of a panel seed (0-19) kept (:func:`~.design.design_of`). The planted
biases a world carries are in its oracle (``decoys``, ``surrogate``, its
ambiguous ``pairs``), never in its release.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from luca_gym.validate import check_seed, short_repr
from luca_gym.worlds.biobank.config import MAX_DRIVERS, PROFILES, BiobankConfig
from luca_gym.worlds.biobank.design import ARCHETYPES, MECHANISMS, Design, design_of
from luca_gym.worlds.biobank.generator import INTERACTION, STANDARD_MEASURE, cohort
from luca_gym.worlds.biobank.oracle import InterventionModel, Oracle
from luca_gym.worlds.biobank.release import Release, build_release


@dataclass(frozen=True)
class BiobankWorld:
    """One world: ``release`` (:class:`~.release.Release`), ``oracle``
    (:class:`~.oracle.Oracle`), its ``design`` and the ``world_seed`` it was drawn from."""

    release: Release
    oracle: Oracle
    design: Design
    world_seed: int


def make_world(seed, config: BiobankConfig | None = None, seal=None, design: Design | None = None) -> BiobankWorld:
    """The world of public ``seed`` under ``config`` (default: the small
    profile), sealed under ``seal`` (a :class:`luca_gym.seal.Seal`) or not.
    ``design`` replaces the seed's design (a study of one bias or one kind of
    world; every parameter still drawn from the seed). ValueError names a bad
    seed or design."""
    config = config or BiobankConfig()
    seed = check_seed(seed)
    world_seed = seed if seal is None else seal.organism_seed(seed)
    if design is None:
        design = design_of(seed, world_seed, config.tier, seal)
    elif (not isinstance(design, Design) or design.archetype not in ARCHETYPES or design.tier not in ("standard", "hard")
          or not 0 <= design.n_drivers <= MAX_DRIVERS or set(design.biases) - set(MECHANISMS)
          or (design.n_drivers == 0 and "shared_instrument" in design.biases)
          or design.delayed not in (0, 1) or (design.delayed and design.n_drivers < 2)):
        raise ValueError(f"design: {short_repr(design)} not allowed; a Design of an archetype ({', '.join(ARCHETYPES)}), "
                         f"0-{MAX_DRIVERS} drivers, tier standard or hard, biases in {', '.join(MECHANISMS)} "
                         "(shared_instrument with a driver only) and delayed 0 or 1 (1 with two drivers or more)")
    return _world(world_seed, design, config.profile)


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
    decoys = {release.proteins[c["decoy"][j]]: m for j, m in enumerate(MECHANISMS) if c["carried"][j]}
    surrogate = release.proteins[c["decoy"][MECHANISMS.index("harmful_surrogate")]] if "harmful_surrogate" in decoys.values() else None
    artefacts = {release.proteins[i]: tuple(m for j, m in enumerate(MECHANISMS) if c["artefacts"][i, j])
                 for i in np.flatnonzero(c["artefacts"].any(1))}
    index = np.flatnonzero(c["driver"])
    pairs = ()
    if "shared_instrument" in decoys.values():  # T4: the driver on the decoy's cis instrument and the decoy
        shared = int(c["decoy"][MECHANISMS.index("shared_instrument")])
        causal = [i for i in index if c["cis_variant"][i] == c["cis_variant"][shared]]
        pairs = ((release.proteins[causal[0]], release.proteins[shared]),)
    if bool(c["has_tracker"]):  # the delayed driver and its tracker, on the driver's cis instrument (world version 9)
        pairs += ((release.proteins[int(np.flatnonzero(c["late_delayed"])[0])], release.proteins[int(c["tracker"])]),)
    model = InterventionModel(
        levels=c["protein_true"][:, index].astype(np.float64), baseline=c["effect"][index].astype(np.float64),
        late=c["late_effect"][index].astype(np.float64), hard=design.tier == "hard",
        pair=tuple(int(np.flatnonzero(index == i)[0]) for i in c["interaction"]) if pair else (),
        pair_coef=((INTERACTION * float(c["pair_sign"]) / float(c["scale"]), INTERACTION * float(c["pair_sign"]) / float(c["late_scale"]))
                   if pair else (0.0, 0.0)))
    oracle = Oracle(design=design, drivers=drivers, decoys=decoys, surrogate=surrogate,
                    severity=c["severity"][imaged].astype(np.float64), baseline=baseline, baseline_name=f"imaging.{baseline_name}",
                    interaction=pair, surrogate_harm=None if surrogate is None else ("up" if c["surrogate_sign"] > 0 else "down"),
                    artefacts=artefacts, late_effects={release.proteins[i]: float(c["late_effect"][i]) for i in index},
                    delayed=tuple(release.proteins[i] for i in np.flatnonzero(c["late_delayed"])),
                    tracker=release.proteins[int(c["tracker"])] if bool(c["has_tracker"]) else None, model=model,
                    pairs=pairs, release=release)
    return BiobankWorld(release, oracle, design, world_seed)
