"""The biobank world's settings: :class:`BiobankConfig` and the profiles' sizes (:data:`PROFILES`).

A profile fixes every array shape of a world (so one compiled generator
serves every seed of a profile):

=========  ============  ======  ========  ========  ===========
profile    participants  imaged  proteins  variants  transcripts
=========  ============  ======  ========  ========  ===========
``small``  6,000         1,200   300       1,024     2,000
``tiny``   2,000         1,000   96        256       400
``paper``  54,000        10,800  2,941     8,192     18,000
=========  ============  ======  ========  ========  ===========

``small`` is the default (evaluation on this CPU); ``tiny`` is for the
tests (half its participants imaged, so that cis-MR on an imaging measure
has the power to beat a correlation screen even at this size); ``paper``
is the paper's panel (DrugTargetWorld S1.1): its genotypes alone are
442 MB in memory, and a world takes minutes and several GB of memory to
generate on a CPU (``benchmarks/biobank_generation.py`` measures it). Every
imaged participant has a cine MRI stack of 8 frames of 32 x 32 uint8
pixels (8 KB; :mod:`~.imaging`): 88 MB for the paper profile's 10,800.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from luca_gym.config import ConfigBase, choice, setting


class Sizes(NamedTuple):
    """The static shape of a profile's worlds.

    Attributes:
        participants: N, everyone in the biobank.
        imaged: the participants with cardiac MRI measures (a random subset; the top of a selection score in worlds carrying T3).
        proteins: P, each with one cis instrument (and its gene, and a transcript).
        variants: V, in linkage blocks of :data:`BLOCK` variants.
        rna: the participants with transcripts (a random subset).
    """

    participants: int
    imaged: int
    proteins: int
    variants: int
    rna: int


PROFILES = {
    "small": Sizes(6000, 1200, 300, 1024, 2000),
    "tiny": Sizes(2000, 1000, 96, 256, 400),
    "paper": Sizes(54000, 10800, 2941, 8192, 18000),
}
TIERS = ("auto", "standard", "hard")
BUDGETS = {"none": 0, "limited": 450_000, "expanded": 2_000_000}  # dollars for experiments (DrugTargetWorld S3.1)  # auto: the tier the world's design draws from its seed
BLOCK = 8  # variants per linkage block
MAX_DRIVERS = 6


@dataclass(frozen=True)
class BiobankConfig(ConfigBase):
    """The settings that, with a seed, name a biobank world.

    Attributes:
        profile: "small" (default), "tiny" (tests) or "paper" (the paper's
            size: minutes and several GB to generate); see the module's table.
        tier: "auto" (default: the tier of the world's design, drawn from its
            seed; the panel's for seeds 0-19), or "standard" / "hard" to
            force one (every other part of the design still comes from the seed).
        budget: the experiments' budget regime, "none" (default: $0, the
            world before its experiments), "limited" ($450,000: one knockdown or
            three cell perturbations) or "expanded" ($2,000,000).

    Checked on construction by the config base's shared validators
    (ValueError naming the field, the value and what is allowed), so a
    config that exists is a valid one. Every setting is static: the world
    is generated and analysed on the host, and the profile fixes its shapes
    (no compiled step takes a config).
    """

    profile: str = setting("small", choice(*PROFILES), static=True)
    tier: str = setting("auto", choice(*TIERS), static=True)
    budget: str = setting("none", choice(*BUDGETS), static=True)

    @property
    def dollars(self) -> int:
        return BUDGETS[self.budget]

    @property
    def sizes(self) -> Sizes:
        return PROFILES[self.profile]
