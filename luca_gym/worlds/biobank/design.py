"""A world's design: :class:`Design` (archetype, number of drivers, tier, planted
biases), the evaluation panel of seeds 0-19 (:data:`PANEL`) and the draw for
every other seed (:func:`design_of`).

The panel mirrors the paper's 20 cardiovascular worlds (DrugTargetWorld 3.6,
Figure S1, S3.2): each of the four archetypes five times, one null world,
two-driver worlds, three-to-six-driver worlds and hard worlds, and the
planted biases (T1-T9, :data:`MECHANISMS` in order; what each plants:
:mod:`~.generator`):

====  ========  =======  ========  ==================
seed  archetype drivers  tier      planted biases
====  ========  =======  ========  ==================
0     DCM       2        standard  T1 T2 T5 T6 T8
1     HCM       2        standard  T3 T5 T6 T8
2     HFpEF     2        standard  T2 T4 T5 T6 T7 T8 T9
3     ischemic  2        standard  T1 T5 T6 T8
4     DCM       3        standard  T2 T3 T5 T6 T7 T8
5     HCM       4        standard  T4 T5 T6 T8 T9
6     HFpEF     5        standard  T1 T3 T5 T6 T8
7     ischemic  6        standard  T2 T4 T5 T6 T7 T8
8     DCM       0        standard  T2 T5 T6 T8   (the null world)
9     HCM       3        standard  T1 T4 T5 T6 T8 T9
10    HFpEF     4        standard  T3 T5 T6 T7 T8
11    ischemic  3        standard  T2 T5 T6 T8 T9
12    DCM       4        hard      T1 T4 T5 T6 T8
13    HCM       2        hard      T3 T5 T6 T7 T8 T9
14    HFpEF     3        hard      T2 T5 T6 T8
15    ischemic  5        hard      T1 T3 T4 T5 T6 T8
16    DCM       6        standard  T5 T6 T7 T8 T9
17    HCM       5        standard  T1 T2 T5 T6 T8
18    HFpEF     2        standard  T4 T5 T6 T8 T9
19    ischemic  4        hard      T3 T5 T6 T7 T8
====  ========  =======  ========  ==================

Six two-driver worlds (0, 1, 2, 3, 13, 18), thirteen with three to six
drivers, five hard worlds (12, 13, 14, 15, 19). Three carry a delayed
driver (:data:`DELAYED_PANEL`: 6, 10 and 17; ``Design.delayed``): one of
their drivers acts mostly over follow-up (DrugTargetWorld's delayed-effect
designs), and a protein tracks the later disease without causing it. As
in the paper (DrugTargetWorld 3.1: "T5, T6, and T8 occur in all 20
evaluated worlds"), every panel world carries T5, T6 and T8 (since world
version 7; before it they were spread over 8 or 9 worlds each, a deviation
now removed). The other biases keep their worlds: T1 7, T2 8, T3 7, T4 7, T7 7,
T9 7. T4 makes the panel's ambiguous pairs (a driver and a non-driver on one
cis instrument, which no observational tool separates: seven worlds,
seeds 2, 5, 7, 9, 12, 15 and 18; the paper names no T4 world, and its 24 eligible
episodes for testing a shared-instrument pair fit six). The delayed worlds'
driver and tracker are an ambiguous pair too (world version 9): the tracker
sits on the driver's cis instrument, so no observational tool separates
them and a knockdown does (:class:`~.oracle.Oracle` ``pairs``). A seed from 20 up draws its
design from the seed: the archetype uniformly, a null world with probability
:data:`NULL_PROBABILITY`, else 1 to 6 drivers uniformly, hard with
probability :data:`HARD_PROBABILITY`, and each bias with probability
:data:`BIAS_PROBABILITY` (T4, a driver's shared instrument, only with a
driver), and a world of two or more drivers carries a delayed driver with
probability :data:`DELAYED_PROBABILITY` (drawn after the rest). Sealed
(world version 10), seeds 0-19 draw their designs from the secret out of
the panel's distribution (:func:`panel_rates`, :func:`sealed_design`: the
archetype uniformly, a null world at the panel's rate, the panel's driver
counts, tier, delayed rate, T5, T6 and T8 always and each other bias at
its panel rate), each seed independently: not a permutation of the public
table, so a sealed world matched to its nearest panel row learns nothing
of its planted biases (before version 10 the seal permuted the panel's
twenty rows, and cheap calls found a sealed world's row, and with it its
bias list, in 15 of 20 worlds); every other sealed seed draws its design
from its sealed seed. The biases a world carries are in its design and
oracle, never in the release or a tool's answer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

ARCHETYPES = ("DCM", "HCM", "HFpEF", "ischemic")
PANEL_SIZE = 20
NULL_PROBABILITY = 0.05
HARD_PROBABILITY = 0.25
BIAS_PROBABILITY = 0.4
DELAYED_PROBABILITY = 0.3  # a drawn world of two or more drivers carries a delayed driver (drawn after the rest)
DELAYED_PANEL = (6, 10, 17)  # the panel worlds that carry a delayed driver
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
        biases: the planted biases the world carries (names of :data:`MECHANISMS`, in that order).
        delayed: 0, or 1 for a world whose last driver is *delayed*: it acts
            mostly at the late horizon (its baseline weight a small share of
            its late weight), so the disease the cohort shows at baseline
            hardly reflects it while the five-year outcomes do (two or more
            drivers only; :mod:`~.generator`).
    """

    archetype: str
    n_drivers: int
    tier: str
    biases: tuple[str, ...] = ()
    delayed: int = 0

    @property
    def kind(self) -> str:
        """The paper's design class (S3.2): "null", "two-driver", "three-to-six" (or "one-driver"), "hard" first."""
        if self.n_drivers == 0:
            return "null"
        if self.tier == "hard":
            return "hard"
        return {1: "one-driver", 2: "two-driver"}.get(self.n_drivers, "three-to-six")

    def as_dict(self) -> dict:
        """The design as plain JSON-ready values."""
        return {"archetype": self.archetype, "n_drivers": self.n_drivers, "tier": self.tier, "biases": list(self.biases),
                "kind": self.kind, "delayed": self.delayed}


def planted(codes: str) -> tuple[str, ...]:
    """The mechanisms of bias codes ``"T1 T5"`` (in :data:`MECHANISMS`' order)."""
    numbers = {int(code[1:]) for code in codes.split()}
    return tuple(m for i, m in enumerate(MECHANISMS, 1) if i in numbers)


_S, _H = "standard", "hard"
_EVERYWHERE = " T5 T6 T8"  # DrugTargetWorld 3.1: T5, T6 and T8 occur in all 20 evaluated worlds
PANEL = (
    Design("DCM", 2, _S, planted("T1 T2" + _EVERYWHERE)), Design("HCM", 2, _S, planted("T3" + _EVERYWHERE)),
    Design("HFpEF", 2, _S, planted("T2 T4 T7 T9" + _EVERYWHERE)), Design("ischemic", 2, _S, planted("T1" + _EVERYWHERE)),
    Design("DCM", 3, _S, planted("T2 T3 T7" + _EVERYWHERE)), Design("HCM", 4, _S, planted("T4 T9" + _EVERYWHERE)),
    Design("HFpEF", 5, _S, planted("T1 T3" + _EVERYWHERE)), Design("ischemic", 6, _S, planted("T2 T4 T7" + _EVERYWHERE)),
    Design("DCM", 0, _S, planted("T2" + _EVERYWHERE)), Design("HCM", 3, _S, planted("T1 T4 T9" + _EVERYWHERE)),
    Design("HFpEF", 4, _S, planted("T3 T7" + _EVERYWHERE)), Design("ischemic", 3, _S, planted("T2 T9" + _EVERYWHERE)),
    Design("DCM", 4, _H, planted("T1 T4" + _EVERYWHERE)), Design("HCM", 2, _H, planted("T3 T7 T9" + _EVERYWHERE)),
    Design("HFpEF", 3, _H, planted("T2" + _EVERYWHERE)), Design("ischemic", 5, _H, planted("T1 T3 T4" + _EVERYWHERE)),
    Design("DCM", 6, _S, planted("T7 T9" + _EVERYWHERE)), Design("HCM", 5, _S, planted("T1 T2" + _EVERYWHERE)),
    Design("HFpEF", 2, _S, planted("T4 T9" + _EVERYWHERE)), Design("ischemic", 4, _H, planted("T3 T7" + _EVERYWHERE)),
)
PANEL = tuple(Design(d.archetype, d.n_drivers, d.tier, d.biases, int(i in DELAYED_PANEL)) for i, d in enumerate(PANEL))


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
    carried = rng.random(len(MECHANISMS)) < BIAS_PROBABILITY
    biases = tuple(m for m, c in zip(MECHANISMS, carried) if c and (m != "shared_instrument" or n_drivers > 0))
    delayed = int(n_drivers >= 2 and rng.random() < DELAYED_PROBABILITY)  # drawn last: the other fields as before
    return Design(archetype, n_drivers, tier, biases, delayed)


def panel_rates() -> dict:
    """The panel's distribution, which sealed seeds 0-19 draw from: ``null`` (the share of null worlds), ``drivers``
    ({count: share} of the other worlds), ``hard`` and ``delayed`` (shares of the worlds with drivers) and ``biases``
    ({mechanism: share}: of every world, T4's of the worlds with drivers)."""
    live = [d for d in PANEL if d.n_drivers]
    counts = sorted({d.n_drivers for d in live})
    return {"null": (len(PANEL) - len(live)) / len(PANEL),
            "drivers": {k: sum(d.n_drivers == k for d in live) / len(live) for k in counts},
            "hard": sum(d.tier == _H for d in live) / len(live), "delayed": sum(d.delayed for d in live) / len(live),
            "biases": {m: sum(m in d.biases for d in (live if m == "shared_instrument" else PANEL))
                       / len(live if m == "shared_instrument" else PANEL) for m in MECHANISMS}}


def sealed_design(seal, public_seed: int) -> Design:
    """The design of panel seed ``public_seed`` (0-19) under ``seal``: drawn from the secret out of :func:`panel_rates`."""
    rates = panel_rates()
    rng = np.random.default_rng(seal.draw(f"biobank design {int(public_seed)}"))
    archetype = ARCHETYPES[int(rng.integers(len(ARCHETYPES)))]
    counts = list(rates["drivers"])
    n_drivers = 0 if rng.random() < rates["null"] else int(rng.choice(counts, p=list(rates["drivers"].values())))
    tier = _H if n_drivers and rng.random() < rates["hard"] else _S
    carried = rng.random(len(MECHANISMS)) < np.array([rates["biases"][m] for m in MECHANISMS])
    biases = tuple(m for m, c in zip(MECHANISMS, carried) if c and (m != "shared_instrument" or n_drivers > 0))
    delayed = int(n_drivers >= 2 and rng.random() < rates["delayed"])
    return Design(archetype, n_drivers, tier, biases, delayed)


def design_of(public_seed: int, world_seed: int, tier: str = "auto", seal=None) -> Design:
    """The design of the world of ``public_seed`` generated from ``world_seed``
    (the same seed unsealed; the sealed seed when sealed under ``seal``): the
    panel's for a public seed below :data:`PANEL_SIZE` (sealed: in the
    secret's draw, :func:`sealed_design`), else drawn from ``world_seed``; ``tier`` "standard" or
    "hard" overrides the tier ("auto" keeps it)."""
    if public_seed < PANEL_SIZE:
        design = PANEL[public_seed] if seal is None else sealed_design(seal, public_seed)
    else:
        design = drawn_design(world_seed)
    if tier != "auto":
        design = Design(design.archetype, design.n_drivers, tier, design.biases, design.delayed)
    return design
