"""The oracle: a world's truth (:class:`Oracle`) and the scorer of claims
(:meth:`Oracle.score`), after DrugTargetWorld 3.5 and S2. Versioned by
:data:`SCORER_VERSION`: a change that moves a score bumps it.

Claims (:class:`Claims`, checked by :func:`check_claims`):

* nominations: a protein, the direction to move it to treat the disease
  (``down``: lower it, inhibit; ``up``: raise it, activate; ``unknown``),
  and a causal confidence in [0, 1] (the probability the claimant gives that
  the protein drives the disease);
* rejections: a protein with the bias mechanism that makes it look causal
  (one of :data:`~.design.MECHANISMS`, T1-T9);
* a phenotype: one value per participant (those without a value are given
  the mean of the values submitted).

A protein may be nominated or rejected, not both, and each at most once.

The points (out of 100; the paper gives target identification and causal
confidence together more than half and leaves the split open: 35 and 20 here):

* target identification, 35: recall x precision of the nominated set
  against the drivers D.
* causal confidence, 20: one minus the Brier score of the confidences
  against the 0/1 truth, summed over the nominated proteins and the drivers
  (N u D; c = 0 for a driver not nominated) and divided by the number of
  drivers, floored at 0: 1 - sum_{N u D} (c - y)^2 / |D|. A sum over |D|,
  not a mean over N u D, so that padding earns nothing: a non-driver
  nominated at confidence c costs c^2 and never dilutes the drivers' errors
  (a mean would reward padding at c = 0, and the class-balanced mean of
  scorer version 1 gave a constant 0.5 a fixed 15 of 20 once every driver
  was nominated, however many non-drivers came with them: here the drivers
  at 0.5 alone earn 15, and each non-driver beside them at 0.5 costs
  5 / |D| points). Confidence matched to the evidence earns it: high on
  drivers, low (or no nomination) on what is not.
* direction, 20: over the drivers and the nominations together (N u D), a
  driver nominated with its therapeutic direction earns 1, with ``unknown``
  1/2; a wrong direction, a missed driver or a nominated non-driver (it has
  no right direction) earns 0; the mean times 20.
* bias identification, 15: recall x precision of the rejections against
  the world's planted decoys (protein -> mechanism; one per planted bias):
  a rejection is right when it names a decoy with its own mechanism (the
  paper's human-guided episode got 0 of 15 for a decoy rejected under the
  wrong mechanism); recall is the right rejections, less one for each
  rejection of a driver (floored at 0), over the decoys; precision is the
  right rejections over the counted rejections, so that rejecting every
  protein under some mechanism earns almost nothing. Ordinary proteins carry
  artefacts too (a strong BMI or exercise dependence, a site shift, a unit
  mixture: :data:`~.generator.ARTEFACTS`), so that no bias is "the only
  protein with X"; a rejection of a non-driver that names an artefact it
  really carries (and is not its planted mechanism) is neutral: neither
  right nor counted (``rejections_neutral``). ``bias_by_mechanism`` says
  which planted decoys were found. Earned only against decoys: a
  world that plants no bias gives 0 to every claimant (free points there
  would lift a submission of nothing above zero; the paper reports such
  episodes at zero).
* phenotype, 10: r = |corr(phenotype, latent severity)| over the imaged
  participants, against the held-out baseline r0, the same for the clinic's
  standard MRI measure of the world's archetype (never named to the agent);
  10 x clip((r - r0) / ((1 - r0) / 2), 0, 1): nothing at or below the
  baseline, full credit at half the way from r0 to 1.
* harmful-surrogate penalty, -30: nominating the world's harmful surrogate
  (T8) in the harmful direction (``surrogate_harm``: the way that improves
  the measured marker and raises the event hazard). Nominated the other way
  or ``unknown`` it is a non-driver like any other (no penalty, no credit).

The total is the sum, floored at 0, in ``scores["total"]`` with every part
beside it. Null worlds (no driver): the perfect answer nominates nothing:
target identification 35, causal confidence 20 and direction 20 then, and 0
for each of the three once anything is nominated; bias and phenotype as
anywhere. Leaving without a submission (the ``end`` tool) scores 0 in every part.

Version 2: the causal-confidence rule above (version 1: the class-balanced
Brier score), bias identification as recall x precision, the surrogate
penalty only in the harmful direction. Version 3: neutral rejections of
ordinary proteins' real artefacts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from luca_gym.validate import short_repr
from luca_gym.worlds.biobank.design import MECHANISMS, Design, design_rng
from luca_gym.worlds.biobank.generator import BIAS_STRENGTH

# Experiments (DrugTargetWorld S1.5): each lowers a named protein by 1 SD
# against a control sharing every other driver and residual, through the
# world's own model at its horizon: a cell perturbation reads the baseline
# weights (n = 120, with assay noise), a knockdown the late weights (n = 800,
# none). A delayed driver's baseline weight (2-10% of its late weight, at
# most ~0.06 SD) sits well inside a cell perturbation's SE (0.144), its late
# weight (0.3-0.6 before standardising) many knockdown SEs (0.05) from zero.
EXPERIMENTS = {
    "cell_perturbation": {"n": 120, "cost": 150_000, "assay_noise": 0.5, "horizon": "first visit", "weights": "baseline"},
    "knockdown": {"n": 800, "cost": 400_000, "assay_noise": 0.0, "horizon": "five years", "weights": "late"},
}
HAZARD_PER_SEVERITY = 0.85  # the generator's log hazard per SD of severity (in its outcome model)

SCORER_VERSION = "3"
POINTS = {"target_identification": 35.0, "causal_confidence": 20.0, "direction": 20.0, "bias_identification": 15.0,
          "phenotype": 10.0}
SURROGATE_PENALTY = -30.0
DIRECTIONS = ("down", "up", "unknown")
PARTS = (*POINTS, "surrogate_penalty")


@dataclass(frozen=True)
class Nomination:
    """One claimed driver: the protein, the direction to move it and the agent's confidence."""
    protein: str
    direction: str
    confidence: float


@dataclass(frozen=True)
class Claims:
    """A checked submission. ``phenotype``: float64 (n,) over the scored
    participants (NaN where no value was given), or None."""

    nominations: tuple = ()
    rejections: tuple = ()  # ((protein, mechanism), ...)
    phenotype: np.ndarray | None = None


def check_claims(nominations, rejections, proteins) -> Claims:
    """Claims from JSON-like lists (``[{"protein", "direction", "confidence"}]``
    and ``[{"protein", "mechanism"}]``), checked against the release's protein
    names ``proteins``; ValueError naming the first problem (the phenotype is
    added by the caller)."""
    known = set(proteins)
    seen: dict[str, str] = {}
    out_n, out_r = [], []
    for i, item in enumerate(nominations):
        protein, direction, confidence = item.get("protein"), item.get("direction"), item.get("confidence")
        if protein not in known:
            raise ValueError(f"nominations[{i}].protein: {short_repr(protein)} is not a protein of the release")
        if direction not in DIRECTIONS:
            raise ValueError(f"nominations[{i}].direction: {short_repr(direction)} not allowed; allowed {', '.join(DIRECTIONS)}")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise ValueError(f"nominations[{i}].confidence: {short_repr(confidence)} not allowed; a number in [0, 1]")
        if protein in seen:
            raise ValueError(f"nominations[{i}].protein: {protein} is {seen[protein]} already")
        seen[protein] = "nominated"
        out_n.append(Nomination(protein, direction, float(confidence)))
    for i, item in enumerate(rejections):
        protein, mechanism = item.get("protein"), item.get("mechanism")
        if protein not in known:
            raise ValueError(f"rejections[{i}].protein: {short_repr(protein)} is not a protein of the release")
        if mechanism not in MECHANISMS:
            raise ValueError(f"rejections[{i}].mechanism: {short_repr(mechanism)} not allowed; allowed {', '.join(MECHANISMS)}")
        if protein in seen:
            raise ValueError(f"rejections[{i}].protein: {protein} is {seen[protein]} already")
        seen[protein] = "rejected"
        out_r.append((protein, mechanism))
    return Claims(tuple(out_n), tuple(out_r))


def abs_correlation(values, severity) -> float:
    """|Pearson r| of ``values`` (NaN: the mean of the others) with ``severity``; 0 for fewer than 2 values or none varying."""
    values = np.asarray(values, np.float64)
    given = np.isfinite(values)
    if given.sum() < 2:
        return 0.0
    filled = np.where(given, values, values[given].mean())
    spread = filled.std() * severity.std()
    if not spread > 0:
        return 0.0
    return float(abs(np.mean((filled - filled.mean()) * (severity - severity.mean())) / spread))


@dataclass(frozen=True, eq=False)
class InterventionModel:
    """The world's disease model as the experiments run it (its drivers only:
    nothing else moves the disease when a protein is lowered).

    Attributes:
        levels: float64 (N, D): the drivers' true levels (SD) in the cohort, the units an experiment samples.
        baseline, late: float64 (D,): the drivers' baseline and late weights (SD of severity at that horizon per SD).
        hard: whether drivers act through ``tanh`` (the hard tier's saturation).
        pair: the hard tier's interacting drivers (indices into D), or ().
        pair_coef: (baseline, late): the interaction's coefficient at each horizon (SD of severity per SD x SD).
    """

    levels: np.ndarray
    baseline: np.ndarray
    late: np.ndarray
    hard: bool = False
    pair: tuple = ()
    pair_coef: tuple = (0.0, 0.0)

    def delta(self, driver: int, horizon: str, units: np.ndarray) -> float:
        """The mean change of severity at ``horizon`` ("baseline" or "late") over
        ``units`` (participant rows) when driver ``driver`` is lowered by 1 SD,
        against the same participants as they are (every other driver and
        residual shared, so they cancel)."""
        late = horizon == "late"
        weight = (self.late if late else self.baseline)[driver]
        x = self.levels[units]
        before, after = x[:, driver], x[:, driver] - 1.0
        act = np.tanh if self.hard else (lambda v: v)
        change = weight * (act(after) - act(before))
        if self.pair and driver in self.pair:
            other = x[:, self.pair[1] if driver == self.pair[0] else self.pair[0]]
            change = change + self.pair_coef[int(late)] * (after - before) * other
        return float(change.mean())


@dataclass(frozen=True)
class Oracle:
    """A world's truth. Never shown to an agent; scores claims.

    Attributes:
        design: the world's :class:`~.design.Design`.
        drivers: protein -> its effect on latent severity (SD of severity per
            SD of the protein's true level; hard tier: before saturation).
        decoys: protein -> the planted mechanism that makes it look causal (one per bias the world carries).
        surrogate: the harmful surrogate protein (T8; also among the decoys), or None.
        severity: float64 (n,): latent severity of the scored participants (the imaged).
        baseline: float64 (n,): the held-out baseline phenotype there (NaN where missing).
        baseline_name: the release column the baseline is.
        interaction: the hard tier's interacting driver pair, or ().
        surrogate_harm: the surrogate's harmful direction ("up" or "down"), or None.
        artefacts: protein -> the mechanisms whose artefact it carries as an
            ordinary protein (a strong BMI or exercise dependence, a site
            shift, a unit mixture: :data:`~.generator.ARTEFACTS`); rejecting
            a protein under one of them is neutral.
        late_effects: driver -> its late weight (SD of the five-year severity per SD of its true level).
        delayed: the delayed drivers (acting mostly late; ``drivers`` holds their small baseline weight).
        tracker: the protein that tracks the later disease without causing it (delayed worlds), or None.
        model: the :class:`InterventionModel` the experiments run (None: the linear weights of ``drivers``
            at both horizons, over no cohort).
    """

    design: Design
    drivers: dict
    decoys: dict
    surrogate: str | None
    severity: np.ndarray
    baseline: np.ndarray
    baseline_name: str
    interaction: tuple = ()
    surrogate_harm: str | None = None
    artefacts: dict = field(default_factory=dict)
    late_effects: dict = field(default_factory=dict)
    delayed: tuple = ()
    tracker: str | None = None
    model: InterventionModel | None = None

    def direction(self, protein: str) -> str:
        """A driver's therapeutic direction: ``down`` when more of it worsens disease."""
        return "down" if self.drivers[protein] > 0 else "up"

    def experiment(self, world_seed: int, protein: str, kind: str, index: int) -> dict:
        """The delivery of experiment ``kind`` (a key of :data:`EXPERIMENTS`)
        on ``protein``, the session's request number ``index``: the measured
        effect of lowering the protein by 1 SD on the imaging measure of
        disease (SD of severity at the kind's horizon; + is worse) and, for a
        knockdown, on the five-year event log hazard, each an estimate with
        its standard error. The effect is the world's own model's
        (:class:`InterventionModel`: n participants of the cohort, each
        against itself unperturbed; a cell perturbation reads the baseline
        weights, a knockdown the late ones; T8's surrogate moves the imaging
        and the hazard; anything else nothing) plus sampling noise, both drawn
        from (world seed, kind, protein, index); the truth itself is never
        returned."""
        spec = EXPERIMENTS[kind]
        rng = design_rng(world_seed, f"experiment {kind} {protein} {int(index)}")
        late = spec["weights"] == "late"
        if protein not in self.drivers:
            imaging = 0.0
        elif self.model is None:
            imaging = -(self.late_effects.get(protein, self.drivers[protein]) if late else self.drivers[protein])
        else:
            units = rng.choice(len(self.model.levels), spec["n"], replace=False)
            imaging = self.model.delta(sorted(self.drivers).index(protein), spec["weights"], units)
        hazard = HAZARD_PER_SEVERITY * imaging
        if protein == self.surrogate:
            sign = 1.0 if self.surrogate_harm == "up" else -1.0
            imaging += BIAS_STRENGTH["surrogate_imaging"] * sign  # lowering it undoes the imaging improvement ...
            hazard -= BIAS_STRENGTH["surrogate_hazard"] * sign  # ... and the harm
        se = float(np.sqrt(2.0 / spec["n"] * (1.0 + spec["assay_noise"] ** 2)))
        out = {"kind": kind, "protein": protein, "n": spec["n"], "horizon": spec["horizon"], "intervention": "lowered by 1 SD",
               "imaging_effect": round(imaging + se * float(rng.standard_normal()), 4), "imaging_se": round(se, 4)}
        if kind == "knockdown":
            hazard_se = float(np.sqrt(4.0 / (0.1 * 2 * spec["n"])))  # ~10% of both arms with an event in five years
            out |= {"log_hazard_ratio": round(hazard + hazard_se * float(rng.standard_normal()), 4),
                    "log_hazard_ratio_se": round(hazard_se, 4)}
        return out

    @property
    def baseline_r(self) -> float:
        return abs_correlation(self.baseline, self.severity)

    def truth(self) -> dict:
        """The truth as JSON-ready data (for the evaluator and the tests)."""
        return {"design": self.design.as_dict(), "scorer_version": SCORER_VERSION,
                "drivers": {p: {"effect": round(float(e), 6), "direction": self.direction(p)} for p, e in sorted(self.drivers.items())},
                "decoys": dict(self.decoys), "surrogate": self.surrogate, "surrogate_harm": self.surrogate_harm,
                "interaction": list(self.interaction), "artefacts": {p: list(m) for p, m in sorted(self.artefacts.items())},
                "phenotype_baseline": self.baseline_name,
                "late_effects": {p: round(float(e), 6) for p, e in sorted(self.late_effects.items())},
                "delayed": list(self.delayed), "tracker": self.tracker}

    def score(self, claims: Claims) -> dict:
        """The scores of ``claims``: every part (points), ``total`` (floored at 0) and the figures they come from."""
        drivers = set(self.drivers)
        nominated = {n.protein: n for n in claims.nominations}
        hits = drivers & set(nominated)
        recall = len(hits) / len(drivers) if drivers else float(not nominated)
        precision = len(hits) / len(nominated) if nominated else float(not drivers)
        identification = recall * precision if drivers else float(not nominated)

        if drivers:
            brier = sum((1.0 - (nominated[d].confidence if d in nominated else 0.0)) ** 2 for d in drivers)
            brier += sum(n.confidence ** 2 for p, n in nominated.items() if p not in drivers)
            confidence = max(0.0, 1.0 - brier / len(drivers))
        else:
            confidence = float(not nominated)

        union = drivers | set(nominated)
        credit = sum(1.0 if nominated[d].direction == self.direction(d) else 0.5 if nominated[d].direction == "unknown" else 0.0
                     for d in hits)
        direction = credit / len(union) if union else 1.0

        rejected = dict(claims.rejections)
        wrong = sum(p in drivers for p in rejected)
        right = {m: rejected.get(p) == m for p, m in self.decoys.items()}
        neutral = sum(p not in drivers and self.decoys.get(p) != m and m in self.artefacts.get(p, ())
                      for p, m in rejected.items())
        counted = len(rejected) - neutral
        found = sum(right.values())
        bias = max(0, found - wrong) / len(self.decoys) * found / counted if self.decoys and counted else 0.0

        r0 = self.baseline_r
        r = None if claims.phenotype is None else abs_correlation(claims.phenotype, self.severity)
        phenotype = 0.0 if r is None else float(np.clip((r - r0) / ((1.0 - r0) / 2.0), 0.0, 1.0))
        harmful = self.surrogate in nominated and nominated[self.surrogate].direction == self.surrogate_harm
        penalty = SURROGATE_PENALTY if self.surrogate is not None and harmful else 0.0

        parts = {"target_identification": identification, "causal_confidence": confidence, "direction": direction,
                 "bias_identification": bias, "phenotype": phenotype}
        scores = {name: round(POINTS[name] * value, 6) for name, value in parts.items()}
        scores["surrogate_penalty"] = penalty
        total = max(0.0, sum(scores.values()))
        return {"total": round(total, 6), **scores, "recall": round(recall, 6), "precision": round(precision, 6),
                "nominated": len(nominated), "rejections_neutral": neutral,
                "bias_by_mechanism": {m: float(ok) for m, ok in sorted(right.items())},
                "phenotype_r": None if r is None else round(r, 6), "phenotype_baseline_r": round(r0, 6)}


def zero_scores(oracle: Oracle) -> dict:
    """The scores of a session left without a submission: 0 in every part."""
    return {"total": 0.0, **{name: 0.0 for name in PARTS}, "recall": 0.0, "precision": 0.0, "nominated": 0,
            "rejections_neutral": 0, "bias_by_mechanism": {m: 0.0 for m in sorted(oracle.decoys.values())}, "phenotype_r": None,
            "phenotype_baseline_r": round(oracle.baseline_r, 6)}
