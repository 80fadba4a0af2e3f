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
* direction, 15 (20 before scorer version 4): over the drivers and the
  nominations together (N u D), a driver nominated with its therapeutic
  direction earns 1, with ``unknown`` 1/2; a wrong direction, a missed
  driver or a nominated non-driver (it has no right direction) earns 0; the
  mean times 15.
* outcome alignment, 5 (version 4; direction-aware since version 5): over
  N u D, a driver's ``outcome_alignment`` label earns 1 when right
  (:meth:`Oracle.alignment`: since world version 10 half the drivers are
  misaligned) and the driver is nominated its therapeutic way,
  :data:`MISLABEL` (-3 since scorer version 6) when wrong and nominated that way, 0 when missing,
  nominated ``unknown`` or the wrong way, or on any other protein (the
  harmful surrogate too); the mean times 5 (it may be negative).
* ambiguous pairs (version 4; ``Oracle.pairs``: T4's, and since world
  version 9 a delayed driver and its tracker): the causal member
  nominated alone is a full hit when the claimant's own experiments
  (``Claims.tested``) support it (version 5: an experiment of a kind that
  separates the pair, :data:`SEPARATING`, whose result supports the claim:
  the causal member's effect significant, |z| >= 2, or the other's not),
  :data:`UNSUPPORTED_SHARE` of one
  otherwise; an abstention on exactly the pair earns :data:`ABSTENTION_SHARE`
  of a hit, counts as a right claim in precision and puts both members at
  confidence 0.5 in the Brier sum; an abstention on any other pair is a
  false claim in precision. docs/worlds/biobank.md gives the rules beside
  the paper's sentences (S2.2, S3.1).
* bias identification, 15: recall x precision of the rejections against
  the world's planted decoys (protein -> mechanism; one per planted bias):
  a rejection is right when it names a decoy with its own mechanism (the
  paper's human-guided episode got 0 of 15 for a decoy rejected under the
  wrong mechanism); recall is the right rejections, less one for each
  rejection of a driver (floored at 0), over the decoys; precision is the
  right rejections, less one for each wrong one (scorer version 6), over
  every rejection, floored at 0, so that rejecting every protein under
  some mechanism earns nothing. Ordinary proteins carry
  artefacts too (a strong BMI or exercise dependence, a site shift, a unit
  mixture: :data:`~.generator.ARTEFACTS`), so that no bias is "the only
  protein with X"; since version 5 a rejection of a protein that is not a
  decoy is right in precision only where it is *earned*: the release shows
  the protein fooling the analysis the named mechanism targets, by the rules
  of :func:`earned_rejections` (``rejections_earned``); it earns no bias
  points (those stay with the planted decoys), and any other rejection
  is wrong (``rejections_wrong``; version 3's neutral rejections of any
  real artefact carrier made a sweep of carriers free, and under version 5,
  where a wrong rejection only diluted precision, a sweep's earned
  rejections kept it 2 of 15 points).
  ``bias_by_mechanism`` says which planted decoys were found. Earned only against decoys: a
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
  the measured marker and raises the event hazard), however it is labelled
  (version 5; version 4 waived it for a ``misaligned`` label). Nominated the other way
  or ``unknown`` it is a non-driver like any other (no penalty, no credit).

The total is the sum, floored at 0, in ``scores["total"]`` with every part
beside it. Null worlds (no driver): the perfect answer nominates nothing:
target identification 35, causal confidence 20 and direction 20 then, and 0
for each of the three once anything is nominated; bias and phenotype as
anywhere. Leaving without a submission (the ``end`` tool) scores 0 in every part.

Version 2: the causal-confidence rule above (version 1: the class-balanced
Brier score), bias identification as recall x precision, the surrogate
penalty only in the harmful direction. Version 3: neutral rejections of
ordinary proteins' real artefacts. Version 4: outcome alignment (direction
15 + alignment 5), abstentions and the ambiguous pairs' rules; claims
written for another version are refused (:func:`load_claims`, ``submit``'s
``scorer_version``). Version 5: earned rejections (no neutral ones),
direction-aware labels, no label waiving the surrogate's penalty, a pair's
resolution supported by a separating experiment. Version 6: a wrong
rejection cancels a right one in precision, a wrong label costs 3.
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

SCORER_VERSION = "6"
POINTS = {"target_identification": 35.0, "causal_confidence": 20.0, "direction": 15.0, "outcome_alignment": 5.0,
          "bias_identification": 15.0, "phenotype": 10.0}
SURROGATE_PENALTY = -30.0
DIRECTIONS = ("down", "up", "unknown")
ALIGNMENTS = ("aligned", "misaligned")
PARTS = (*POINTS, "surrogate_penalty")
# Pair logic (DrugTargetWorld S2.2; the module's docstring): an ambiguous pair's causal member nominated alone earns a
# full hit when the claimant's own experiments touched the pair, UNSUPPORTED_SHARE of one without them; an abstention
# on exactly the pair earns ABSTENTION_SHARE (half of a resolution's credit) and counts its members at confidence 0.5.
UNSUPPORTED_SHARE = 0.5
ABSTENTION_SHARE = 0.5
ABSTENTION_CONFIDENCE = 0.5
# Outcome alignment (S3.1): per protein of N u D, a right label earns 1, none 0, a wrong one MISLABEL (the part's
# mean may go below 0: "mislabelling outcome alignment is especially costly"). Scorer version 6: -3 (version 5: -2).
# A driver is misaligned with probability one half (a delayed one never), so a blanket label of either kind is right
# about half the time and costs (1 + MISLABEL) / 2 = -1 a labelled driver in expectation; it gains in a world only
# where more than three quarters of its labels happen to be right.
MISLABEL = -3.0
# Pair logic (scorer version 5): "resolved with experiments" needs an experiment of a kind that can separate the pair
# (a delayed pair: a knockdown, at the late horizon; a T4 pair: either kind) whose result supports the claim: the
# nominated member's effect significant (|z| >= SUPPORT_Z) or the other member's not.
SEPARATING = {"shared_instrument": ("cell_perturbation", "knockdown"), "delayed": ("knockdown",)}
SUPPORT_Z = 2.0
# Earned rejections (scorer version 5; :func:`earned_rejections`): the thresholds of the rules the scorer computes.
EARNED = {"q": 0.05, "null_p": 0.05, "shift": 0.3, "bimodal": 0.555, "min_f": 10.0, "pleiotropy_ratio": 0.25}
MAX_REASON = 500  # characters of an abstention's reason
CHANGES = ("version 4: outcome_alignment, abstentions and the ambiguous pairs' rules; version 5: earned rejections, "
           "direction-aware labels and no label waiving the surrogate's penalty, experiments that support a pair's resolution; "
           "version 6: a wrong rejection cancels a right one in bias identification's precision, a wrong label costs 3")


@dataclass(frozen=True)
class Nomination:
    """One claimed driver: the protein, the direction to move it, the agent's
    confidence and, optionally, its outcome alignment (``"aligned"``: moving it
    as nominated improves both the disease phenotype and the hard outcomes;
    ``"misaligned"``: it improves one and harms the other; None: no label)."""
    protein: str
    direction: str
    confidence: float
    alignment: str | None = None


@dataclass(frozen=True)
class Claims:
    """A checked submission. ``abstentions``: ((protein, protein), ...), pairs
    the claimant says it cannot tell apart (each sorted); ``tested``: the
    claimant's own experiments, each (protein, kind, z of its imaging effect),
    in order (the session's audit log fills it); ``phenotype``: float64 (n,)
    over the scored participants (NaN where no value was given), or None."""

    nominations: tuple = ()
    rejections: tuple = ()  # ((protein, mechanism), ...)
    phenotype: np.ndarray | None = None
    abstentions: tuple = ()
    tested: tuple = ()  # ((protein, kind, imaging z), ...)


def tested_from(deliveries) -> tuple:
    """``Claims.tested`` from experiment deliveries (dicts with ``protein``, ``kind``, ``imaging_effect`` and ``imaging_se``)."""
    return tuple((d["protein"], d["kind"], float(d["imaging_effect"]) / float(d["imaging_se"])) for d in deliveries)


def check_claims(nominations, rejections, proteins, abstentions=()) -> Claims:
    """Claims from JSON-like lists (``[{"protein", "direction", "confidence",
    "outcome_alignment"?}]``, ``[{"protein", "mechanism"}]`` and
    ``[{"proteins": [A, B], "reason"}]``), checked against the release's
    protein names ``proteins``; ValueError naming the first problem (the
    phenotype and the tested proteins are added by the caller). A protein is
    nominated, rejected or in one abstention, at most one of them, once."""
    known = set(proteins)
    seen: dict[str, str] = {}
    out_n, out_r, out_a = [], [], []
    for i, item in enumerate(nominations):
        _check_fields(item, f"nominations[{i}]", ("protein", "direction", "confidence", "outcome_alignment"))
        protein, direction, confidence = item.get("protein"), item.get("direction"), item.get("confidence")
        alignment = item.get("outcome_alignment")
        if protein not in known:
            raise ValueError(f"nominations[{i}].protein: {short_repr(protein)} is not a protein of the release")
        if direction not in DIRECTIONS:
            raise ValueError(f"nominations[{i}].direction: {short_repr(direction)} not allowed; allowed {', '.join(DIRECTIONS)}")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise ValueError(f"nominations[{i}].confidence: {short_repr(confidence)} not allowed; a number in [0, 1]")
        if alignment is not None and alignment not in ALIGNMENTS:
            raise ValueError(f"nominations[{i}].outcome_alignment: {short_repr(alignment)} not allowed; allowed "
                             f"{', '.join(ALIGNMENTS)} (or leave it out)")
        if protein in seen:
            raise ValueError(f"nominations[{i}].protein: {protein} is {seen[protein]} already")
        seen[protein] = "nominated"
        out_n.append(Nomination(protein, direction, float(confidence), alignment))
    for i, item in enumerate(rejections):
        _check_fields(item, f"rejections[{i}]", ("protein", "mechanism"))
        protein, mechanism = item.get("protein"), item.get("mechanism")
        if protein not in known:
            raise ValueError(f"rejections[{i}].protein: {short_repr(protein)} is not a protein of the release")
        if mechanism not in MECHANISMS:
            raise ValueError(f"rejections[{i}].mechanism: {short_repr(mechanism)} not allowed; allowed {', '.join(MECHANISMS)}")
        if protein in seen:
            raise ValueError(f"rejections[{i}].protein: {protein} is {seen[protein]} already")
        seen[protein] = "rejected"
        out_r.append((protein, mechanism))
    for i, item in enumerate(abstentions):
        _check_fields(item, f"abstentions[{i}]", ("proteins", "reason"))
        pair, reason = item.get("proteins"), item.get("reason")
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"abstentions[{i}].proteins: {short_repr(pair)} not allowed; a pair: two different proteins")
        if pair[0] == pair[1]:
            raise ValueError(f"abstentions[{i}].proteins: {short_repr(pair[0])} named twice; a pair: two different proteins")
        for protein in pair:
            if protein not in known:
                raise ValueError(f"abstentions[{i}].proteins: {short_repr(protein)} is not a protein of the release")
            if protein in seen:
                raise ValueError(f"abstentions[{i}].proteins: {protein} is {seen[protein]} already")
        if not isinstance(reason, str) or not 0 < len(reason) <= MAX_REASON:
            raise ValueError(f"abstentions[{i}].reason: {short_repr(reason)} not allowed; a text of 1-{MAX_REASON} characters")
        for protein in pair:
            seen[protein] = "in an abstention"
        out_a.append(tuple(sorted(pair)))
    return Claims(tuple(out_n), tuple(out_r), abstentions=tuple(out_a))


def _check_fields(item, where: str, allowed: tuple) -> None:
    """ValueError unless ``item`` is an object of ``allowed`` fields (a label on a rejection or an abstention: a label
    goes on a nomination)."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: {short_repr(item)} not allowed; an object with {', '.join(allowed)}")
    unknown = sorted(set(item) - set(allowed))
    if unknown == ["outcome_alignment"]:
        raise ValueError(f"{where}.outcome_alignment: a label goes on a nomination, and {short_repr(item.get('protein', item.get('proteins')))} "
                         "is not nominated here")
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}; allowed {', '.join(allowed)}")


def load_claims(document, proteins) -> Claims:
    """Claims from a claim file's document (a JSON object): ``scorer_version``
    (required: the version the claims were written for), ``nominations``,
    ``rejections``, ``abstentions`` and ``tested`` (the claimant's
    experiments, in order: each ``{"protein", "kind", "imaging_effect",
    "imaging_se"}`` as the experiment tool delivered it), checked as
    :func:`check_claims` does. A document of another scorer version is
    refused (ValueError naming both versions): the rules that give its
    fields their meaning changed (version 4: outcome alignment, abstentions,
    the pair logic; version 5: earned rejections, direction-aware labels,
    experiments that support a pair's resolution)."""
    if not isinstance(document, dict):
        raise ValueError(f"claims: {short_repr(document)} not allowed; a JSON object with scorer_version {SCORER_VERSION}")
    version = document.get("scorer_version")
    if str(version) != SCORER_VERSION:
        raise ValueError(f"scorer_version: claims written for scorer version {short_repr(version)} are refused; this scorer "
                         f"is version {SCORER_VERSION} ({CHANGES}): score them with the scorer they were written for, or "
                         "write them again")
    unknown = set(document) - {"scorer_version", "nominations", "rejections", "abstentions", "tested"}
    if unknown:
        raise ValueError(f"claims: unknown field {sorted(unknown)[0]!r}; allowed scorer_version, nominations, rejections, "
                         "abstentions, tested")
    claims = check_claims(document.get("nominations", []), document.get("rejections", []), proteins,
                          document.get("abstentions", []))
    tested = document.get("tested", [])
    fields = ("protein", "kind", "imaging_effect", "imaging_se")
    if not isinstance(tested, list) or any(
            not isinstance(d, dict) or set(d) - {*fields, "n", "horizon", "intervention", "log_hazard_ratio", "log_hazard_ratio_se"}
            or d.get("protein") not in set(proteins) or d.get("kind") not in EXPERIMENTS
            or any(isinstance(d.get(f), bool) or not isinstance(d.get(f), (int, float)) for f in fields[2:])
            or not d["imaging_se"] > 0 for d in tested):
        raise ValueError(f"tested: {short_repr(tested)} not allowed; a list of experiment deliveries, each with protein (of "
                         f"the release), kind ({', '.join(EXPERIMENTS)}), imaging_effect and imaging_se (> 0)")
    return Claims(claims.nominations, claims.rejections, abstentions=claims.abstentions, tested=tested_from(tested))


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


REFERENCE_PHENOTYPES = ("log NT-proBNP", "the archetype's standard MRI measure")


def earned_rejections(release, standard: str) -> dict:
    """The mechanisms under which a rejection of each protein is *earned*
    (scorer version 5): protein -> frozenset of mechanisms, by rules computed
    from the release alone on two reference phenotypes, log NT-proBNP (every
    participant) and ``standard`` (``"imaging.<column>"``, the archetype's
    standard MRI measure), with the tools' statistics (:mod:`~.analysis`: q
    is Benjamini-Hochberg over the proteins; thresholds :data:`EARNED`). The
    full adjustment is the tools' (age, sex, BMI, site); a protein fools an
    analysis that leaves a covariate out where its association with a
    reference phenotype is significant under that analysis (q < 0.05) and
    null under the full adjustment, or under the full adjustment with
    exercise added (p > 0.05):

    * confounding: the analysis without BMI;
    * site_batch: the analysis without site (within-site handling left out);
    * assay_units: the same, for a protein with two modes (Sarle's
      coefficient above 0.555: a unit mixture);
    * exercise_remodelling: the full adjustment, against the full
      adjustment with exercise (log(1 + hours a week)) added;
    * selection: the adjusted association with the standard MRI measure
      significant and with log NT-proBNP null (p > 0.05) or of the other
      sign, with the imaged participants' mean shifted >= 0.3 SD;
    * shared_instrument: its lead cis variant (F >= 10) is another protein's
      lead too, and its cis-MR on a reference phenotype is significant;
    * pleiotropy: its cis-MR on a reference phenotype significant (F >= 10)
      and the adjusted observational slope below 0.25 of the Wald ratio (or
      of the other sign);
    * reverse_causation, harmful_surrogate: never (no rule on the release
      tells these from the unmeasured biology every protein shares: only the
      planted decoy earns them).
    """
    from luca_gym.worlds.biobank import analysis  # the tools' statistics (analysis imports nothing of the oracle)

    e = EARNED
    table, _, column = standard.partition(".")
    with np.errstate(divide="ignore", invalid="ignore"):
        bnp = np.log(release.numeric("physiology", "ntprobnp_pg_ml"))
        exercise = np.log1p(release.numeric("participants", "exercise_hours_per_week"))
    phenotypes = {"bnp": np.where(np.isfinite(bnp), bnp, np.nan), "imaging": release.numeric(table, column)}
    full = release.covariates()  # age, sex, BMI, sites 2-4
    with_exercise = np.c_[full, np.nan_to_num(exercise)]  # its missing rows left out (below)
    proteins = release.matrix("proteins")
    subsets = {"no_bmi": full[:, [0, 1, 3, 4, 5]], "no_site": full[:, :3], "full": full}

    def scan(y, z, rows=None):
        if rows is not None:
            y = np.where(rows, y, np.nan)
        beta, se, _ = analysis.column_ols(y, proteins, z)
        p = analysis.normal_p(beta / se)
        return np.nan_to_num(beta), np.nan_to_num(p, nan=1.0), np.nan_to_num(analysis.bh(p), nan=1.0)

    def fooled(y, left_out, against, rows=None):  # a discovery at Bonferroni's bar that the fuller analysis removes
        return (scan(y, left_out, rows)[1] < e["q"] / len(release.proteins)) & (scan(y, against, rows)[1] > e["null_p"])

    has_exercise = np.isfinite(exercise)
    removed = {m: np.zeros(len(release.proteins), bool) for m in ("no_bmi", "no_site", "exercise")}
    for y in phenotypes.values():
        removed["no_bmi"] |= fooled(y, subsets["no_bmi"], full)
        removed["no_site"] |= fooled(y, subsets["no_site"], full)
        removed["exercise"] |= fooled(y, full, with_exercise, has_exercise)  # over the participants who gave exercise
    qc = analysis.protein_qc(release)
    img_beta, _, img_q = scan(phenotypes["imaging"], full)
    bnp_beta, bnp_p, _ = scan(phenotypes["bnp"], full)
    imaging_only = (img_q < e["q"]) & ((bnp_p > e["null_p"]) | (img_beta * bnp_beta < 0))
    everyone = np.arange(len(release.proteins))
    inst = analysis.instruments(release)
    variant, f = inst["variant"], np.nan_to_num(inst["f"])
    strong = (variant >= 0) & (f >= e["min_f"])
    shared = strong & np.array([np.sum(strong & (variant == v)) > 1 for v in variant])
    adjusted = {"bnp": bnp_beta, "imaging": img_beta}
    mr_significant = np.zeros(len(everyone), bool)
    pleiotropic = np.zeros(len(everyone), bool)
    for name, y in phenotypes.items():
        m = analysis.cis_mr(release, y, everyone, True)
        significant = strong & (np.nan_to_num(m["q"], nan=1.0) < e["q"])
        mr_significant |= significant
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.nan_to_num(adjusted[name] / m["ratio"], nan=0.0)
        pleiotropic |= significant & (ratio < e["pleiotropy_ratio"])
    rules = {
        "confounding": removed["no_bmi"],
        "site_batch": removed["no_site"],
        "assay_units": removed["no_site"] & (np.nan_to_num(qc["bimodality"]) > e["bimodal"]),
        "exercise_remodelling": removed["exercise"],
        "selection": imaging_only & (np.abs(np.nan_to_num(qc["imaged_shift"])) >= e["shift"]),
        "shared_instrument": shared & mr_significant,
        "pleiotropy": pleiotropic,
    }
    return {protein: frozenset(m for m, rule in rules.items() if rule[i]) for i, protein in enumerate(release.proteins)
            if any(rule[i] for rule in rules.values())}


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
            shift, a unit mixture: :data:`~.generator.ARTEFACTS`; the truth's
            record: since scorer version 5 a rejection is judged by :meth:`earned`).
        release: the world's release, which :meth:`earned` reads (None: no rejection of a non-decoy is earned).
        late_effects: driver -> its late weight (SD of the five-year severity per SD of its true level).
        delayed: the delayed drivers (acting mostly late; ``drivers`` holds their small baseline weight).
        tracker: the protein that tracks the later disease without causing it (delayed worlds), or None.
        model: the :class:`InterventionModel` the experiments run (None: the linear weights of ``drivers``
            at both horizons, over no cohort).
        pairs: the world's ambiguous pairs, each (causal member, non-causal member): two proteins no
            observational tool separates (T4's driver and decoy on one cis instrument; their Wald ratios equal
            within the standard errors; and since world version 9 the delayed driver and its tracker, on the
            driver's cis instrument: equal Wald ratios at both horizons, a cell perturbation null for both), one
            knockdown does.
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
    pairs: tuple = ()
    release: object = field(default=None, repr=False, compare=False)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def earned(self) -> dict:
        """protein -> the mechanisms a rejection of it earns (:func:`earned_rejections` on the release; {} without one)."""
        if "earned" not in self._cache:
            self._cache["earned"] = {} if self.release is None else earned_rejections(self.release, self.baseline_name)
        return self._cache["earned"]

    def pair_kind(self, causal: str) -> str:
        """An ambiguous pair's kind: "delayed" (a delayed driver and its tracker) or "shared_instrument" (T4's)."""
        return "delayed" if causal in self.delayed else "shared_instrument"

    def direction(self, protein: str) -> str:
        """A driver's therapeutic direction: ``down`` when more of it worsens disease."""
        return "down" if self.drivers[protein] > 0 else "up"

    def alignment(self, protein: str) -> str | None:
        """A protein's outcome alignment: for a driver ``"aligned"`` when, moved
        its therapeutic way, it improves the baseline disease and the hard
        outcomes (its baseline and late weights share their sign; a delayed
        driver's always do) and ``"misaligned"`` when it improves the disease
        and harms the outcomes (world version 10: each other driver with
        probability :data:`~.generator.MISALIGNED_SHARE`); ``"misaligned"`` for
        the harmful surrogate (either way it moves, it improves one and harms
        the other; its label scores nothing, scorer version 5), None for any
        other protein (it moves neither)."""
        if protein in self.drivers:
            late = self.late_effects.get(protein, self.drivers[protein])
            return "aligned" if late * self.drivers[protein] > 0 else "misaligned"
        return "misaligned" if protein == self.surrogate else None

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
                "delayed": list(self.delayed), "tracker": self.tracker,
                "ambiguous_pairs": [{"causal": c, "other": o} for c, o in self.pairs],
                "alignment": {p: self.alignment(p) for p in sorted({*self.drivers, *([self.surrogate] if self.surrogate else [])})}}

    def score(self, claims: Claims) -> dict:
        """The scores of ``claims``: every part (points), ``total`` (floored at 0) and the figures they come from
        (the module's docstring gives the rules; ``pairs`` says how each ambiguous pair was answered)."""
        drivers = set(self.drivers)
        nominated = {n.protein: n for n in claims.nominations}
        hits = drivers & set(nominated)
        ambiguous = {tuple(sorted(pair)): pair for pair in self.pairs}
        good = [ambiguous[a] for a in claims.abstentions if a in ambiguous]
        bad = [a for a in claims.abstentions if a not in ambiguous]  # a pair observation can separate: a false positive
        credit = {d: 1.0 for d in hits}
        pairs = {}
        for causal, other in self.pairs:
            if (causal, other) in good:
                credit[causal], pairs[causal] = ABSTENTION_SHARE, "abstained"
            elif causal in nominated and other not in nominated:
                kinds = SEPARATING[self.pair_kind(causal)]
                supported = any(kind in kinds and ((p == causal and abs(z) >= SUPPORT_Z) or (p == other and abs(z) < SUPPORT_Z))
                                for p, kind, z in claims.tested)
                credit[causal] = 1.0 if supported else UNSUPPORTED_SHARE
                pairs[causal] = "resolved with experiments" if supported else "resolved without experiments"
            elif causal in nominated:
                pairs[causal] = "both nominated"
            else:
                pairs[causal] = "wrong member" if other in nominated else "missed"
        claimed = len(nominated) + len(claims.abstentions)
        recall = sum(credit.values()) / len(drivers) if drivers else float(not claimed)
        precision = (len(hits) + len(good)) / claimed if claimed else float(not drivers)
        identification = recall * precision if drivers else float(not claimed)

        abstained = {p: ABSTENTION_CONFIDENCE for a in claims.abstentions for p in a}
        if drivers:
            stated = {**abstained, **{p: n.confidence for p, n in nominated.items()}}
            brier = sum((1.0 - stated.get(d, 0.0)) ** 2 for d in drivers)
            brier += sum(c ** 2 for p, c in stated.items() if p not in drivers)
            confidence = max(0.0, 1.0 - brier / len(drivers))
        else:
            confidence = float(not nominated)

        union = drivers | set(nominated)
        points = sum(1.0 if nominated[d].direction == self.direction(d) else 0.5 if nominated[d].direction == "unknown" else 0.0
                     for d in hits)
        direction = points / len(union) if union else 1.0
        # a label on a driver: right (its alignment, nominated its therapeutic way) 1, nominated "unknown" or the wrong
        # way 0, a wrong alignment nominated the right way MISLABEL; on any other protein (the surrogate too) 0
        labels = {p: n.alignment for p, n in nominated.items() if n.alignment is not None}
        judged = {p: label == self.alignment(p) for p, label in labels.items()
                  if p in drivers and nominated[p].direction == self.direction(p)}
        right_labels = sum(judged.values())
        mislabelled = len(judged) - right_labels
        alignment = (right_labels + MISLABEL * mislabelled) / len(union) if union else 1.0

        rejected = dict(claims.rejections)
        wrong = sum(p in drivers for p in rejected)
        right = {m: rejected.get(p) == m for p, m in self.decoys.items()}
        found = sum(right.values())
        earned_rules = self.earned() if len(rejected) > found else {}
        earned = sum(p not in drivers and self.decoys.get(p) != m and m in earned_rules.get(p, ()) for p, m in rejected.items())
        # recall: the planted decoys found (less the drivers rejected) over the decoys; precision (scorer version 6):
        # the rejections found or earned, less one for each wrong one, over every rejection (floored at 0), so that a
        # wrong rejection cancels a right one and a sweep with more wrong rejections than right ones earns nothing
        misses = len(rejected) - found - earned
        bias = (max(0, found - wrong) / len(self.decoys) * max(0, found + earned - misses) / len(rejected)
                if self.decoys and rejected else 0.0)

        r0 = self.baseline_r
        r = None if claims.phenotype is None else abs_correlation(claims.phenotype, self.severity)
        phenotype = 0.0 if r is None else float(np.clip((r - r0) / ((1.0 - r0) / 2.0), 0.0, 1.0))
        harmful = self.surrogate in nominated and nominated[self.surrogate].direction == self.surrogate_harm  # any label
        penalty = SURROGATE_PENALTY if self.surrogate is not None and harmful else 0.0

        parts = {"target_identification": identification, "causal_confidence": confidence, "direction": direction,
                 "outcome_alignment": alignment, "bias_identification": bias, "phenotype": phenotype}
        scores = {name: round(POINTS[name] * value, 6) for name, value in parts.items()}
        scores["surrogate_penalty"] = penalty
        total = max(0.0, sum(scores.values()))
        return {"total": round(total, 6), **scores, "recall": round(recall, 6), "precision": round(precision, 6),
                "nominated": len(nominated), "rejections_earned": earned, "rejections_wrong": misses,
                "bias_by_mechanism": {m: float(ok) for m, ok in sorted(right.items())},
                "abstentions": len(claims.abstentions), "abstentions_unsupported": len(bad), "pairs": dict(sorted(pairs.items())),
                "pairs_resolved": sum(v == "resolved with experiments" for v in pairs.values()),
                "alignment_labels": len(labels), "alignment_mislabelled": mislabelled,
                "phenotype_r": None if r is None else round(r, 6), "phenotype_baseline_r": round(r0, 6)}


def zero_scores(oracle: Oracle) -> dict:
    """The scores of a session left without a submission: 0 in every part."""
    return {"total": 0.0, **{name: 0.0 for name in PARTS}, "recall": 0.0, "precision": 0.0, "nominated": 0,
            "rejections_earned": 0, "rejections_wrong": 0, "bias_by_mechanism": {m: 0.0 for m in sorted(oracle.decoys.values())},
            "abstentions": 0, "abstentions_unsupported": 0, "pairs": {c: "missed" for c, _ in oracle.pairs},
            "pairs_resolved": 0, "alignment_labels": 0, "alignment_mislabelled": 0, "phenotype_r": None,
            "phenotype_baseline_r": round(oracle.baseline_r, 6)}
