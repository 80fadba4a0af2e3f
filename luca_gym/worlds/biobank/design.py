"""A world's design: :class:`Design` (archetype, number of drivers, tier, planted
biases), the evaluation panel of seeds 0-19 (:data:`PANEL`) and the draw for
every other seed (:func:`design_of`).

The panel mirrors the paper's 20 cardiovascular worlds (DrugTargetWorld 3.6,
Figure S1, S3.2): each of the four archetypes five times, one null world,
two-driver worlds, three-to-six-driver worlds and hard worlds:

====  ========  =======  ========
seed  archetype drivers  tier
====  ========  =======  ========
0     DCM       2        standard
1     HCM       2        standard
2     HFpEF     2        standard
3     ischemic  2        standard
4     DCM       3        standard
5     HCM       4        standard
6     HFpEF     5        standard
7     ischemic  6        standard
8     DCM       0        standard   (the null world)
9     HCM       3        standard
10    HFpEF     4        standard
11    ischemic  3        standard
12    DCM       4        hard
13    HCM       2        hard
14    HFpEF     3        hard
15    ischemic  5        hard
16    DCM       6        standard
17    HCM       5        standard
18    HFpEF     2        standard
19    ischemic  4        hard
====  ========  =======  ========

Six two-driver worlds (0, 1, 2, 3, 13, 18), thirteen with three to six
drivers, five hard worlds (12, 13, 14, 15, 19). A seed from 20 up draws its
design from the seed: the archetype uniformly, a null world with probability
:data:`NULL_PROBABILITY`, else 1 to 6 drivers uniformly, hard with
probability :data:`HARD_PROBABILITY`. A sealed world of a panel seed keeps the
panel's design (so a sealed panel is still the panel) with every parameter
drawn from the sealed seed. Planted biases (T1-T9) are stage S2 of issue 28:
every design's ``biases`` is empty until then.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

ARCHETYPES = ("DCM", "HCM", "HFpEF", "ischemic")
PANEL_SIZE = 20
NULL_PROBABILITY = 0.05
HARD_PROBABILITY = 0.25
# The planted-bias mechanisms (DrugTargetWorld S1.4, T1-T9), as claims name them.
MECHANISMS = ("confounding", "reverse_causation", "selection", "shared_instrument", "site_batch",
              "exercise_remodelling", "pleiotropy", "harmful_surrogate", "assay_units")


@dataclass(frozen=True)
class Design:
    """What kind of world a seed names.

    Attributes:
        archetype: one of :data:`ARCHETYPES`: how latent severity shows in
            imaging, physiology and records.
        n_drivers: 0 (a null world) to 6 causal driver proteins.
        tier: "standard" or "hard" (saturating driver effects, an interaction
            between the two strongest drivers, polygenic background, more residual).
        biases: the planted biases the world carries (names of :data:`MECHANISMS`); empty in S1.
    """

    archetype: str
    n_drivers: int
    tier: str
    biases: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The paper's design class (S3.2): "null", "two-driver", "three-to-six" (or "one-driver"), "hard" first."""
        if self.n_drivers == 0:
            return "null"
        if self.tier == "hard":
            return "hard"
        return {1: "one-driver", 2: "two-driver"}.get(self.n_drivers, "three-to-six")

    def as_dict(self) -> dict:
        return {"archetype": self.archetype, "n_drivers": self.n_drivers, "tier": self.tier, "biases": list(self.biases),
                "kind": self.kind}


_S, _H = "standard", "hard"
PANEL = (
    Design("DCM", 2, _S), Design("HCM", 2, _S), Design("HFpEF", 2, _S), Design("ischemic", 2, _S),
    Design("DCM", 3, _S), Design("HCM", 4, _S), Design("HFpEF", 5, _S), Design("ischemic", 6, _S),
    Design("DCM", 0, _S), Design("HCM", 3, _S), Design("HFpEF", 4, _S), Design("ischemic", 3, _S),
    Design("DCM", 4, _H), Design("HCM", 2, _H), Design("HFpEF", 3, _H), Design("ischemic", 5, _H),
    Design("DCM", 6, _S), Design("HCM", 5, _S), Design("HFpEF", 2, _S), Design("ischemic", 4, _H),
)


def design_rng(world_seed: int, purpose: str) -> np.random.Generator:
    """A numpy generator for one host-side purpose of world ``world_seed`` (a hash of both: independent streams)."""
    digest = hashlib.sha256(f"biobank {purpose} {int(world_seed)}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def drawn_design(world_seed: int) -> Design:
    """The design a seed outside the panel draws (see the module's docstring)."""
    rng = design_rng(world_seed, "design")
    archetype = ARCHETYPES[int(rng.integers(len(ARCHETYPES)))]
    null = rng.random() < NULL_PROBABILITY
    n_drivers = 0 if null else int(rng.integers(1, 7))
    tier = _H if (not null and rng.random() < HARD_PROBABILITY) else _S
    return Design(archetype, n_drivers, tier)


def design_of(public_seed: int, world_seed: int, tier: str = "auto") -> Design:
    """The design of the world of ``public_seed`` generated from ``world_seed``
    (the same seed unsealed; the sealed seed when sealed): the panel's for a
    public seed below :data:`PANEL_SIZE`, else drawn from ``world_seed``;
    ``tier`` "standard" or "hard" overrides the tier ("auto" keeps it)."""
    design = PANEL[public_seed] if public_seed < PANEL_SIZE else drawn_design(world_seed)
    if tier != "auto":
        design = Design(design.archetype, design.n_drivers, tier, design.biases)
    return design
