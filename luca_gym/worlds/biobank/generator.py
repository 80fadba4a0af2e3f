"""The biobank world model: one jitted, float32 draw of a whole cohort from a
key and a design (:func:`draw`), shapes fixed by the profile, so one compile
serves every seed and every design of a profile.

One module, one job: simulating the cohort (the jitted draw, the ECG, CT
and record draws of :func:`follow_up`, the cine stacks, assembled by
:func:`cohort`). Drawing the design lives in :mod:`~.design` and the
release's tables in :mod:`~.release`; most of this module's length is the
model's description below and its coefficients, kept beside the one
function that uses them.

The structural model (DrugTargetWorld S1.1-S1.3; every coefficient below is a
design choice, not an estimate):

* Genotypes: V variants in linkage blocks of :data:`~.config.BLOCK`; a
  haplotype is a Gaussian AR(1) chain along each block (adjacent correlation
  U(0.55, 0.95), none across blocks) thresholded at the allele frequency
  (U(0.05, 0.5)); a genotype is the sum of two haplotypes (0/1/2).
* Covariates: age U(40, 75) years, sex (1 = male), BMI (log-normal around
  26.5, up with age and in men), imaging site (4), exercise hours a week
  (gamma, down with age and BMI).
* Proteins (true level, standardised): a cis instrument each (a distinct
  variant; variance explained U(0.02, 0.25), drivers U(0.06, 0.3)), a trans
  variant on 20% (U(0.005, 0.03)), :data:`N_FACTORS` shared latent factors
  (each protein loads on each with probability 0.3), covariates, and a
  residual. Measured proteins add an assay residual (SD U(0.15, 0.45)) on an
  NPX-like scale; 2% are missing.
* Latent severity (standardised): 0-6 driver proteins (identity drawn
  uniformly; effect U(0.3, 0.6) per SD of the true level, either sign),
  risk factors (age, sex, BMI up; exercise down), two of the latent factors
  that also shape proteins (unmeasured biology: the reason an observational
  screen finds proteins that do not drive disease) and a residual. Hard
  tier: each driver acts through ``tanh`` (saturating beyond 1 SD), the two
  strongest drivers interact (0.15 x their product), a polygenic background
  of V/4 variants (variance 0.15), and a larger residual (0.8 instead of 0.5).
* Phenotypes, by archetype (:data:`IMAGING_LOADINGS`): six clinic-reported
  MRI measures for the imaged, physiology (blood pressure, heart rate, an
  NT-proBNP-like marker) for everyone, metabolites, diagnosis codes, and
  the five-year outcomes (below, Time: they follow the late disease).
* Time (DrugTargetWorld S1.5; world version 6): each driver has a
  baseline and a late weight. An ordinary driver acts at both (its late
  weight its baseline weight times U(0.8, 1.25), or, for a *misaligned*
  driver, world version 10, each with probability
  :data:`MISALIGNED_SHARE`, times -U(0.8, 1.25): it improves the baseline
  disease and harms the late one); a *delayed* driver (the
  driver of rank ``n_drivers - 1`` in a world whose design has ``delayed``
  and two or more drivers) acts mostly late: its drawn effect is its late
  weight and its baseline weight only U(0.02, 0.1) of it. Latent severity
  (what the baseline phenotypes, the images and the diagnoses show, and what
  a phenotype is scored against) sums the baseline weights; the *late*
  severity (five years on) sums the late weights over the same participant
  (the same risk factors, biology and residual) plus a progression residual
  (variance 0.15), standardised. The hard outcomes follow the late severity:
  the cardiovascular event (heart-failure hospitalisation, log hazard 0.85
  per SD, or cardiac death, whichever first; drop-out 2% a year), cardiac
  death (log rate -5.5 a year, 0.85 per SD, age, sex, T8's surrogate) and
  death of other causes (log rate -5.3, age, sex, BMI), both censored at
  five years. In a delayed world a non-driver *tracks* the progression
  (0.5 x the late severity beyond what the baseline predicts, signed as the
  delayed driver's late weight): it associates with later disease without
  causing it. Since world version 9 its gene lies at the delayed driver's
  locus and the driver's cis variant is its only cis genetics, its
  instrument (on its standardised level) 0.9-1.1 times the driver's (drawn
  from the time branch's last key; it carries no ordinary artefact, as a
  decoy carries none): the two Wald ratios are equal within the standard
  errors on the baseline phenotypes and on the outcomes, a cell
  perturbation misses both, and only a knockdown separates them (the
  oracle's ``pairs``, as T4's). Half the imaged
  return for a follow-up visit after U(2, 3.5) years: the MRI measures
  and NT-proBNP of the disease moved toward its late state (a weight
  years / 5), and every protein again (within-person correlation 0.85 of
  the true level, the tracker moved with the progression, fresh assay noise,
  the same site artefacts). The time model draws from its own branch of the
  world key, so nothing drawn before it moves with it.
* ECG, CT and dated records (world version 8; :func:`follow_up`, from the
  world key's own branch :data:`FOLLOW_UP_KEY`, so every value drawn before
  stays as it was): a resting ECG for everyone (QRS, QTc, heart rate,
  Sokolow-Lyon voltage, PR; :data:`ECG_LOADINGS` by archetype) and a cardiac
  CT for the imaged (coronary calcium, epicardial fat, LV mass;
  :data:`CT_LOADINGS`), each the heart as it is (severity with T6's and
  T8's real remodelling, not T5's MRI scanner) along the archetype's
  pattern, with covariates and reading noise; and the uniform and normal
  draws from which the release dates the baseline diagnoses and records
  the diagnoses after baseline (:func:`~.release.build_release`).
* Transcripts, for a random subset: each gene's transcript follows its
  protein's true level loosely (shared variance U(0.05, 0.6)).
* Cine MRI of the imaged (:mod:`~.imaging`, in :func:`cohort`): the heart
  as it is (the MRI pattern before the clinic's reading noise) plus the
  participant's own anatomy, drawn from the world key's own branch, so that
  no other value of the world depends on the images.

The imaged and transcript subsets are random, unless the world carries T3.

Artefacts of ordinary proteins (:data:`ARTEFACTS`; non-drivers, not a
decoy): a pre-analytical shift of the measured level at one site (8%, 0.5-1.5
SD), a strong BMI dependence (6%, 0.5-0.9 per SD of BMI, either sign), a
strong exercise dependence (6%), and a second unit at one site (4%; never
at a site related to disease). They make no ordinary protein look causal
under the tools' default covariate adjustment, and they mean that no planted
bias is "the only protein with X": a decoy's own trait is drawn from the
same ranges as the artefacts' (the oracle lists each protein's artefacts;
since scorer version 5 a rejection of one counts as right only where the
release shows the artefact fooling an analysis: :func:`~.oracle.earned_rejections`).

Planted biases (DrugTargetWorld S1.4; ``biases`` bool (9,) in the order of
:data:`~.design.MECHANISMS`). Each carried bias makes one decoy protein, a
non-driver that looks causal to one kind of analysis: the protein of rank
MAX_DRIVERS + j in the draw that ranks the drivers first (so never a
driver). A decoy is made by the process that makes every protein (cis and
trans genetics, the latent factors, covariates, residual, assay noise; its
instrument's strength from the drivers' range U(0.06, 0.3)), with its
mechanism on top (:data:`BIAS_STRENGTH` holds every coefficient). Two
things keep the mechanism its one path to looking causal: its loadings on
the two latent factors that also shape disease are folded onto two others
(so it is as connected as any protein), and it carries no artefact but its
own.

* T1 confounding: the decoy depends on BMI (0.5-0.9 per SD, either sign;
  linear in kg/m2, as the tools adjust for it), and BMI's effect on severity
  is raised from 0.25 to 0.45: associated unless adjusted for BMI; its
  cis-MR is null.
* T2 reverse causation: the decoy reacts to disease (0.35-0.6 per SD of
  severity): associated in every analysis but cis-MR; the drivers'
  instruments move it (reverse-direction MR).
* T3 imaging selection: the imaged are the top NI of a selection score
  (severity + 0.7 x the decoy + health-conscious volunteering: exercise,
  age, BMI and a latent factor many proteins load on + noise; the top 20%
  in the small and paper profiles, the top half in ``tiny``): among the
  imaged, the decoy and severity are anticorrelated (a collider); in the
  whole cohort, nothing.
* T4 shared instrument: the decoy's gene lies at the first driver's locus
  and the driver's cis variant is its only cis genetics, acting on it
  directly and through its co-regulation with the driver (0.3-0.6 x the
  driver's true level): its instrument (on its standardised level) is
  0.9-1.1 times the driver's (either member may be the stronger; world
  version 7, before it 0.8-1.6 before standardising, which left the two
  Wald ratios up to 2.5 SE apart), so its cis-MR is as significant as the
  driver's and its Wald ratio equal within the standard errors, its
  observational association like a driver's, and the locus cannot tell the
  two apart (an experiment can): an *ambiguous pair* (the oracle's ``pairs``). Only in worlds with a driver; that
  driver's instrument and effect are strong (U(0.2, 0.3) and U(0.45, 0.6)). Since world version 10 the decoy
  also carries the disease's unexplained part, the unmeasured biology and the residual (:data:`PAIR_ASSOCIATION`),
  as the tracker does, so that its correlation
  with the baseline disease is the driver's times a log-uniform draw in 1/1.6-1.6 (since world version 11 both
  adjusted for age, sex, BMI and site, as the tools' association scan is): the stronger association picks the
  driver about half the time, and so does the weaker. And each driver's locus hosts an ordinary protein on its cis variant
  with probability :data:`NEIGHBOUR_RATE` (its variance explained :data:`NEIGHBOUR_STRENGTH` times the
  driver's, no co-regulation), so a shared disease-associated instrument is no tell of a planted pair.
* T5 imaging-site batch effect: one site's scanner (drawn per world since
  world version 10; site 4 before) distorts every MRI measure along the
  archetype's disease pattern (1.5 SD) and that site's samples of the decoy
  are shifted (0.8-1.5 SD either way, the sign drawn since version 10;
  pre-analytical handling, as the ordinary site artefacts): the decoy predicts imaging disease unless adjusted for
  site; no non-imaging endpoint agrees.
* T6 benign exercise remodelling: exercise remodels the heart along the
  archetype's imaging pattern (0.6 per SD of log exercise) while lowering
  severity, and the decoy moves with exercise (0.5-0.9, up or down: the sign
  drawn since world version 10): associated with
  imaging disease, against (or not with) the clinical endpoints; cis-MR null.
* T7 pleiotropic instrument: the decoy's cis variant also acts on severity
  directly (0.25 per SD of genotype): its cis-MR is significant, its
  observational association far weaker than the Wald ratio implies.
* T8 harmful surrogate: moving the decoy one way (``surrogate_sign``)
  improves every MRI measure (0.35 SD per SD, against the disease pattern)
  and raises the five-year event hazard (log hazard 0.4 per SD): imaging
  analyses, cis-MR included, recommend the direction that harms patients;
  the outcomes show it.
* T9 assay unit mixture: one site's samples of the decoy (drawn per world
  since world version 10, never T5's; site 3 before) are reported in
  another unit (log2 of a concentration: 6 above the NPX of the same
  sample), and that site recruits sicker participants (severity 0.6 up before
  standardising): the decoy predicts disease unless analysed within sites,
  and its distribution is a mixture of two (as the ordinary unit mixtures',
  which sit at sites unrelated to disease).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.biobank.config import BLOCK, MAX_DRIVERS, Sizes
from luca_gym.worlds.biobank.design import ARCHETYPES, MECHANISMS
from luca_gym.worlds.biobank.imaging import cine

ROOT_KEY = 0xB10B  # the root of every world key
N_FACTORS = 6  # shared latent factors of the proteome
N_COVARIATES = 4  # age, sex, BMI, exercise (standardised) as effects see them
BIOLOGY = 2  # the first latent factors also act on disease (unmeasured biology)
# Released MRI measures (clinic-reported), in order; their loadings on severity by archetype (rows: ARCHETYPES).
IMAGING = ("lvef_pct", "lvedv_ml", "max_wall_thickness_mm", "lv_mass_g", "native_t1_ms", "wall_motion_score_index")
IMAGING_LOADINGS = np.array([
    [-0.80, 0.70, -0.25, 0.35, 0.25, 0.35],  # DCM: dilation, falling ejection fraction
    [0.25, -0.30, 0.85, 0.70, 0.35, 0.05],  # HCM: wall thickening, mass
    [-0.05, -0.05, 0.35, 0.35, 0.80, 0.05],  # HFpEF: tissue (native T1), preserved ejection fraction
    [-0.60, 0.35, -0.10, 0.10, 0.25, 0.85],  # ischemic: regional wall motion
], np.float32)
# The clinic's standard measure of each archetype: the held-out baseline phenotype the scorer compares against.
STANDARD_MEASURE = {"DCM": "lvef_pct", "HCM": "max_wall_thickness_mm", "HFpEF": "native_t1_ms",
                    "ischemic": "wall_motion_score_index"}
# Covariate effects (age, sex, BMI, exercise; standardised) on each MRI measure, every archetype.
IMAGING_COVARIATES = np.array([
    [-0.10, -0.15, 0.00, 0.00],
    [-0.10, 0.45, 0.25, 0.10],
    [0.15, 0.35, 0.20, 0.05],
    [0.05, 0.45, 0.30, 0.10],
    [0.10, -0.20, 0.00, 0.00],
    [0.10, 0.05, 0.00, 0.00],
], np.float32).T
IMAGING_NOISE = 0.55
SBP_LOADING = np.array([0.10, 0.10, 0.45, 0.15], np.float32)  # by archetype
HR_LOADING = np.array([0.35, 0.05, 0.15, 0.20], np.float32)
BNP_LOADING = np.array([0.70, 0.55, 0.50, 0.60], np.float32)
METABOLITES = ("ldl_mmol_l", "hdl_mmol_l", "triglycerides_mmol_l", "glucose_mmol_l", "creatinine_umol_l", "crp_mg_l",
               "urate_umol_l", "lactate_mmol_l")
RESIDUAL_VARIANCE = {"standard": 0.5, "hard": 0.8}
SATURATION = 1.0  # hard tier: a driver acts through SATURATION * tanh(x / SATURATION)
INTERACTION = 0.15  # hard tier: the two strongest drivers' product term
POLYGENIC_VARIANCE = 0.15  # hard tier
N_BIASES = len(MECHANISMS)
T1, T2, T3, T4, T5, T6, T7, T8, T9 = range(N_BIASES)
# T5's scanner site and T9's unit site (0-based) are drawn per world since world version 10 (two different sites; before
# it they were the constants 3 and 2, released as sites 4 and 3: a site a world could be read by), as are the signs of
# T5's site shift and T6's exercise dependence.
V10_KEY = 0x0A10  # folded into the world key: world version 10's own draws (sites, signs, misaligned drivers, pairs)
BIAS_STRENGTH = {  # the planted biases' coefficients (see the module's docstring); pairs are uniform ranges
    "confounding_bmi": (0.5, 0.9), "confounding_severity": 0.2, "reactive": (0.35, 0.6), "selection_decoy": 0.7,
    "selection_noise": 0.5, "site_imaging": 1.5, "site_protein": (0.8, 1.5), "remodelling_imaging": 0.6,
    "remodelling_protein": (0.5, 0.9), "pleiotropy": 0.25, "surrogate_imaging": 0.35, "surrogate_hazard": 0.4,
    "unit_site_severity": 0.6, "unit_offset": 6.0, "coregulation": (0.3, 0.6), "shared_strength": (0.9, 1.1),
}
# Artefacts of ordinary proteins (any protein, at these rates), so that no planted bias is "the only protein with X":
# a pre-analytical shift of the measured level at one site, a strong dependence on BMI or on exercise (true level),
# and a second unit at one site (measured level; never at a site related to disease). A protein whose total BMI or
# exercise loading (artefact and ordinary covariate effect together) reaches "carrier" carries that artefact.
ARTEFACTS = {"site_rate": 0.08, "site_shift": (0.5, 1.5), "bmi_rate": 0.06, "bmi": (0.5, 0.9), "exercise_rate": 0.06,
             "exercise": (0.5, 0.9), "unit_rate": 0.04, "carrier": 0.25}
# Who is imaged in a world carrying T3: health-conscious participants volunteer (exercise up, age and BMI down, and a
# latent factor of the proteome that many proteins load on: so many proteins shift among the imaged), with the severity
# and the decoy (BIAS_STRENGTH["selection_decoy"]).
SELECTION_COVARIATES = {"exercise": 0.6, "age": -0.4, "bmi": -0.5, "factor": 0.9}
# Time (DrugTargetWorld S1.5): each driver has a baseline and a late weight. An ordinary driver's late weight is its
# baseline weight times LATE_FACTOR (uniform); a delayed driver's baseline weight is DELAYED_SHARE (uniform) of its
# late weight. The late disease adds a progression residual (variance PROGRESSION_VARIANCE, before standardising).
LATE_FACTOR = (0.8, 1.25)
DELAYED_SHARE = (0.02, 0.1)
PROGRESSION_VARIANCE = 0.15
TRACKER_LOADING = 0.5  # delayed worlds: a non-driver tracks the progression (late disease beyond the baseline's)
# World version 10: each driver but a delayed one is *misaligned* with probability MISALIGNED_SHARE (its late weight
# then has the other sign: moved its therapeutic way it improves the baseline disease and the imaging, and harms the
# late disease and the hard outcomes), so "aligned" is no free default.
MISALIGNED_SHARE = 0.5
# World version 10: an ambiguous pair's non-causal member (T4's decoy, the tracker) carries the disease's unexplained
# part (the unmeasured biology, the latent factors that also shape disease, and the residual: a marker no instrument
# moves) with a weight set so that its correlation with the baseline disease is the causal member's times
# PAIR_ASSOCIATION (log-uniform: either member may show the stronger association).
PAIR_ASSOCIATION = (1 / 1.6, 1.6)
PAIR_TUNING_STEPS = 6  # secant steps that set that weight
# World version 10: each driver's locus also hosts an ordinary protein with probability NEIGHBOUR_RATE, on the
# driver's cis variant at NEIGHBOUR_STRENGTH times its variance explained (no co-regulation: its cis-MR is significant,
# its observational association is not), so sharing a disease-associated instrument is no tell of a planted pair.
NEIGHBOUR_RATE = 0.35
NEIGHBOUR_STRENGTH = (0.3, 1.2)
# Survival over five years: log hazards per year (exp(-5.5) ~ 0.4%, exp(-5.3) ~ 0.5%) and their slopes.
CARDIAC_DEATH = {"log_rate": -5.5, "severity": 0.85, "age": 0.3, "sex": 0.2}
OTHER_DEATH = {"log_rate": -5.3, "age": 0.9, "sex": 0.2, "bmi": 0.1}
FOLLOW_UP_YEARS = 5.0
VISIT_YEARS = (2.0, 3.5)  # when the follow-up visit falls (uniform), for half the imaged participants
PROTEIN_STABILITY = 0.85  # correlation of a protein's true level with itself at the follow-up visit
# ECG and CT (world version 8): clinic-read summaries of the heart as it is (severity along the archetype's pattern,
# with the heart's real remodelling: T6's exercise and T8's surrogate, never T5's MRI scanner), drawn from their own
# branch of the world key (FOLLOW_UP_KEY), as are the records' dates and the diagnoses after baseline.
FOLLOW_UP_KEY = 0xEC67  # folded into the world key: the ECG, the CT and the dated records' own draws
ECG = ("qrs_ms", "qtc_ms", "heart_rate_bpm", "sokolow_lyon_mv", "pr_ms")
ECG_LOADINGS = np.array([  # per SD of the heart's disease (rows: ARCHETYPES)
    [0.60, 0.40, 0.35, 0.10, 0.25],  # DCM: conduction delay (QRS), tachycardia
    [0.30, 0.50, 0.00, 0.80, 0.20],  # HCM: voltage (hypertrophy), long QTc
    [0.10, 0.30, 0.15, 0.30, 0.35],  # HFpEF: atrial (PR), some voltage
    [0.40, 0.40, 0.20, -0.20, 0.15],  # ischemic: QRS, QTc, lost voltage (scar)
], np.float32)
ECG_COVARIATES = np.array([  # rows: age, sex, BMI, exercise (standardised); columns: ECG
    [0.10, 0.15, 0.00, -0.10, 0.25],
    [0.30, -0.30, -0.10, 0.20, 0.10],
    [0.05, 0.10, 0.15, -0.20, 0.05],
    [0.00, 0.00, -0.30, 0.20, 0.10],
], np.float32)
CT = ("coronary_calcium_agatston", "epicardial_fat_ml", "lv_mass_g")
CT_LOADINGS = np.array([
    [0.10, 0.10, 0.35],  # DCM
    [0.05, 0.10, 0.70],  # HCM: mass
    [0.30, 0.60, 0.35],  # HFpEF: epicardial fat
    [0.85, 0.35, 0.10],  # ischemic: coronary calcium
], np.float32)
CT_COVARIATES = np.array([
    [0.60, 0.20, 0.00],
    [0.40, 0.10, 0.45],
    [0.10, 0.60, 0.30],
    [0.00, -0.10, 0.10],
], np.float32)
TEST_NOISE = 0.6  # the ECG's and the CT's reading noise (SD, standardised scale)
ECG_MISSING, CT_MISSING = 0.03, 0.02  # an ECG not recorded (the whole row); a CT measure not read


def world_key(seed_words) -> jax.Array:
    """The root key of the world of ``seed_words`` uint32 (2,) (every draw of the world descends from it)."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(ROOT_KEY), seed_words[0]), seed_words[1])


def _standardise(x, axis=0):
    return (x - x.mean(axis=axis, keepdims=True)) / (x.std(axis=axis, keepdims=True) + 1e-6)


@partial(jax.jit, static_argnames=("sizes",))
def draw(seed_words, archetype, n_drivers, hard, biases, delayed, *, sizes: Sizes) -> dict:
    """One cohort: ``seed_words`` uint32 (2,) (the world seed's two words),
    ``archetype`` int32 () (index into ARCHETYPES), ``n_drivers`` int32 (),
    ``hard`` bool (), ``biases`` bool (9,) (the planted biases carried, in the
    order of MECHANISMS; T4 needs a driver), ``delayed`` int32 () (1: the
    driver of rank ``n_drivers - 1`` is delayed; needs two drivers). Returns a dict of arrays (N participants, P proteins, V
    variants, NI imaged, NR with transcripts, K = N_FACTORS):

    * ``genotypes`` int8 (N, V); ``maf`` float32 (V,): allele frequencies;
    * ``age``, ``bmi``, ``exercise`` float32 (N,); ``sex``, ``site`` int32 (N,);
      ``exercise_missing`` bool (N,);
    * ``cis_variant``, ``trans_variant`` int32 (P,); ``has_trans`` bool (P,);
    * ``protein_true`` float32 (N, P) standardised; ``protein_npx`` float32 (N, P); ``protein_missing`` bool (N, P);
    * ``driver`` bool (P,); ``effect`` float32 (P,): a driver's linear effect
      on severity per SD of its true level (0 elsewhere); ``interaction`` int32 (2,):
      the hard tier's interacting drivers;
    * ``severity`` float32 (N,): latent severity, standardised;
    * ``imaging`` float32 (N, 6) (standardised scale, every participant: the clinic's reading), ``imaging_missing`` bool (N, 6);
      ``heart`` float32 (NI, 6): the imaged participants' heart as it is (the same pattern before the clinic's
      reading noise), which their cine images show (:mod:`~.imaging`);
    * ``sbp``, ``dbp``, ``heart_rate``, ``log_ntprobnp`` float32 (N,); ``physiology_missing`` bool (N,);
    * ``metabolites`` float32 (N, 8) (standardised scale), ``metabolite_missing`` bool (N, 8);
    * ``transcripts`` float32 (NR, P) (standardised scale), ``rna`` int32 (NR,), ``imaged`` int32 (NI,) (sorted);
    * ``diagnosis_noise`` float32 (N, 3), ``diagnosis_draw`` float32 (N, 3): the records' draws;
    * ``event`` bool (N,), ``event_time`` float32 (N,) years (the event: heart-failure hospitalisation or cardiac
      death, whichever first, censored by drop-out); ``cardiac_death``, ``all_cause_death`` bool (N,) and
      ``cardiac_death_time``, ``death_time`` float32 (N,) years (censored at five years);
    * ``late_effect`` float32 (P,): a driver's late weight (SD of late severity per SD); ``late_severity`` float32 (N,);
      ``late_delayed`` bool (P,): the delayed driver; ``tracker`` int32 (): the protein that tracks progression;
      ``has_tracker`` bool (); ``scale``, ``late_scale`` float32 (): the raw SDs that standardised the two
      severities; ``pair_sign`` float32 (): the hard tier's interaction sign;
    * ``visited`` int32 (NV,) (half the imaged, sorted), ``visit_years`` float32 (NV,), ``visit_imaging`` float32
      (NV, 6), ``visit_imaging_missing`` bool (NV, 6), ``visit_log_ntprobnp`` float32 (NV,), ``visit_npx`` float32
      (NV, P), ``visit_protein_missing`` bool (NV, P): the follow-up visit;
    * ``decoy`` int32 (9,): each bias's decoy protein (meaningful where carried);
      ``carried`` bool (9,): the biases carried (``biases``, T4 dropped without a driver);
      ``surrogate_sign`` float32 (): the direction (+1 up, -1 down) in which
      moving T8's decoy improves the imaging and harms patients.
    """
    n, n_img, p, v, n_rna = sizes
    blocks = v // BLOCK
    key = world_key(seed_words)
    k = iter(jax.random.split(key, 64))
    kb = iter(jax.random.split(jax.random.fold_in(key, 0xB1A5), 32))  # the planted biases' own draws
    kv = iter(jax.random.split(jax.random.fold_in(key, V10_KEY), 16))  # world version 10's own draws
    batch_site = jax.random.randint(next(kv), (), 0, 4, jnp.int32)  # T5's scanner site
    unit_site_t9 = (batch_site + jax.random.randint(next(kv), (), 1, 4, jnp.int32)) % 4  # T9's unit site, another one
    t5_sign, t6_sign = jnp.where(jax.random.bernoulli(next(kv), 0.5, (2,)), 1.0, -1.0).astype(jnp.float32)
    f32 = jnp.float32
    bs = BIAS_STRENGTH

    # -- genotypes: AR(1) haplotypes along each block, thresholded at the allele frequency
    maf = jax.random.uniform(next(k), (v,), f32, 0.05, 0.5)
    rho = jax.random.uniform(next(k), (v,), f32, 0.55, 0.95).reshape(blocks, BLOCK).at[:, 0].set(0.0)
    threshold = jax.scipy.special.ndtri(maf).reshape(blocks, BLOCK)
    k_hap = next(k)

    def along_block(z, j):
        e = jax.random.normal(jax.random.fold_in(k_hap, j), (2 * n, blocks), f32)
        z = rho[:, j] * z + jnp.sqrt(1.0 - rho[:, j] ** 2) * e
        return z, z < threshold[:, j]

    _, alleles = jax.lax.scan(along_block, jnp.zeros((2 * n, blocks), f32), jnp.arange(BLOCK))
    alleles = alleles.transpose(1, 2, 0).reshape(2 * n, v).astype(jnp.int8)
    genotypes = alleles[:n] + alleles[n:]

    def standard_genotype(index):
        g = genotypes[:, index].astype(f32)
        q = maf[index]
        return (g - 2 * q) / jnp.sqrt(2 * q * (1 - q))

    # -- covariates
    age = jax.random.uniform(next(k), (n,), f32, 40.0, 75.0)
    sex = jax.random.bernoulli(next(k), 0.5, (n,)).astype(jnp.int32)
    bmi = jnp.exp(jnp.log(26.5) + 0.03 * sex + 0.004 * (age - 57.5) + 0.16 * jax.random.normal(next(k), (n,), f32))
    site = jax.random.randint(next(k), (n,), 0, 4, jnp.int32)
    exercise = 1.6 * jax.random.gamma(next(k), 2.0, (n,), f32) * jnp.exp(-0.01 * (age - 57.5) - 0.6 * (jnp.log(bmi) - jnp.log(26.5)))
    exercise_missing = jax.random.bernoulli(next(k), 0.04, (n,))
    covariates = jnp.stack([_standardise(age), 2.0 * sex - 1.0, _standardise(jnp.log(bmi)), _standardise(jnp.log1p(exercise))], 1)
    age_z, sex_pm, bmi_z, exercise_z = covariates.T

    # -- drivers: which proteins, how strongly, which way
    rank = jnp.argsort(jax.random.permutation(next(k), p))
    driver = rank < n_drivers
    order = jnp.argsort(rank)  # order[r]: the protein of rank r
    decoy = order[MAX_DRIVERS + jnp.arange(N_BIASES)].astype(jnp.int32)
    carried = biases & jnp.ones(N_BIASES, bool).at[T4].set(n_drivers >= 1)
    on = carried.astype(f32)
    first_driver = order[0]
    sign = jnp.where(jax.random.bernoulli(next(k), 0.5, (p,)), 1.0, -1.0).astype(f32)
    effect = jnp.where(driver, sign * jax.random.uniform(next(k), (p,), f32, 0.3, 0.6), 0.0)
    effect = effect.at[first_driver].set(jnp.where(  # T4: a driver whose shared locus shows
        carried[T4], sign[first_driver] * jax.random.uniform(next(kb), (), f32, 0.45, 0.6), effect[first_driver]))
    # -- time: baseline and late weights (their own draws, so that nothing above moves)
    kt_keys = jax.random.split(jax.random.fold_in(key, 0x7143), 32)
    kt = iter(kt_keys)  # the last key (unused by the iterator) draws the tracker's instrument strength
    late_effect = effect * jax.random.uniform(next(kt), (p,), f32, *LATE_FACTOR)
    is_delayed = (delayed > 0) & (n_drivers >= 2)
    late_delayed = (rank == n_drivers - 1) & is_delayed  # the last driver (never T4's, the first)
    late_effect = jnp.where(late_delayed, effect, late_effect)  # a delayed driver's drawn effect is its late weight ...
    effect = jnp.where(late_delayed, effect * jax.random.uniform(next(kt), (), f32, *DELAYED_SHARE), effect)  # ... mostly
    # misaligned drivers (world version 10): the late weight has the other sign
    misaligned = driver & ~late_delayed & jax.random.bernoulli(next(kv), MISALIGNED_SHARE, (p,))
    late_effect = jnp.where(misaligned, -late_effect, late_effect)

    # -- proteins: every protein, the decoys included, made by one process (cis and trans genetics, the latent
    # factors, covariates, artefacts, residual); a decoy's mechanism goes on top (below)
    ka = iter(jax.random.split(jax.random.fold_in(key, 0xA27E), 32))  # the artefacts' own draws

    def uniform(keys, bounds, shape=()):
        return jax.random.uniform(next(keys), shape, f32, *bounds)

    def random_sign(keys, shape=()):
        return jnp.where(jax.random.bernoulli(next(keys), 0.5, shape), 1.0, -1.0).astype(f32)

    cis_variant = jax.random.permutation(next(k), v)[:p].astype(jnp.int32)
    cis_variant = cis_variant.at[decoy[T4]].set(jnp.where(carried[T4], cis_variant[first_driver], cis_variant[decoy[T4]]))
    driver_r2 = jax.random.uniform(next(k), (p,), f32, 0.06, 0.3)
    cis_r2 = jnp.where(driver, driver_r2, jax.random.uniform(next(k), (p,), f32, 0.02, 0.25))
    cis_r2 = cis_r2.at[decoy].set(jnp.where(carried, driver_r2[decoy], cis_r2[decoy]))  # a decoy's instrument: a driver's range
    cis_r2 = cis_r2.at[first_driver].set(jnp.where(carried[T4], uniform(kb, (0.2, 0.3)), cis_r2[first_driver]))
    cis_sign = jnp.where(jax.random.bernoulli(next(k), 0.5, (p,)), 1.0, -1.0).astype(f32)
    # T4: the shared variant acts on the decoy directly too, its loading set once the decoy is co-regulated (below), so
    # that its instrument is `shared_strength` times the driver's: either member may have the stronger instrument
    coregulation = uniform(kb, bs["coregulation"])
    ratio = uniform(kb, bs["shared_strength"])
    cis_sign = cis_sign.at[decoy[T4]].set(jnp.where(carried[T4], cis_sign[first_driver], cis_sign[decoy[T4]]))
    cis_r2 = cis_r2.at[decoy[T4]].set(jnp.where(carried[T4], 0.0, cis_r2[decoy[T4]]))
    # delayed worlds (world version 9): the tracker's gene lies at the delayed driver's locus and the driver's cis
    # variant is its only cis genetics; its strength is set once it tracks the progression (below)
    tracker = order[MAX_DRIVERS + N_BIASES].astype(jnp.int32)
    delayed_driver = order[jnp.maximum(n_drivers - 1, 0)]
    cis_variant = cis_variant.at[tracker].set(jnp.where(is_delayed, cis_variant[delayed_driver], cis_variant[tracker]))
    cis_sign = cis_sign.at[tracker].set(jnp.where(is_delayed, cis_sign[delayed_driver], cis_sign[tracker]))
    cis_r2 = cis_r2.at[tracker].set(jnp.where(is_delayed, 0.0, cis_r2[tracker]))
    # world version 10: an ordinary protein at a driver's locus (NEIGHBOUR_RATE), on the driver's cis variant
    host = order[jnp.arange(MAX_DRIVERS)]
    neighbour = order[MAX_DRIVERS + N_BIASES + 1 + jnp.arange(MAX_DRIVERS)]
    hosted = (jnp.arange(MAX_DRIVERS) < n_drivers) & jax.random.bernoulli(next(kv), NEIGHBOUR_RATE, (MAX_DRIVERS,))
    cis_variant = cis_variant.at[neighbour].set(jnp.where(hosted, cis_variant[host], cis_variant[neighbour]))
    cis_r2 = cis_r2.at[neighbour].set(jnp.where(
        hosted, cis_r2[host] * jax.random.uniform(next(kv), (MAX_DRIVERS,), f32, *NEIGHBOUR_STRENGTH), cis_r2[neighbour]))
    has_trans = jax.random.bernoulli(next(k), 0.2, (p,))
    trans_variant = jax.random.randint(next(k), (p,), 0, v, jnp.int32)
    trans_r2 = jnp.where(has_trans, jax.random.uniform(next(k), (p,), f32, 0.005, 0.03), 0.0)
    factors = jax.random.normal(next(k), (n, N_FACTORS), f32)
    loadings = 0.35 * jax.random.normal(next(k), (N_FACTORS, p), f32) * jax.random.bernoulli(next(k), 0.3, (N_FACTORS, p))
    # a decoy is as connected as any protein, but its loadings on the factors that also shape disease (BIOLOGY) are
    # folded onto the next ones: its planted mechanism is then its one path to looking causal
    folded = loadings[:, decoy].at[BIOLOGY:2 * BIOLOGY].add(loadings[:BIOLOGY, decoy]).at[:BIOLOGY].set(0.0)
    loadings = loadings.at[:, decoy].set(jnp.where(carried, folded, loadings[:, decoy]))
    covariate_effects = 0.12 * jax.random.normal(next(k), (N_COVARIATES, p), f32)
    # Covariate-driven proteins (BMI linear in kg/m2, as the tools adjust for it; exercise): ordinary ones at
    # ARTEFACTS' rates, and T1's and T6's decoys (their mechanism), from overlapping ranges.
    art = ARTEFACTS
    # artefacts are ordinary proteins' (a decoy carries only its own mechanism's, so that it is its one path)
    # (the delayed worlds' tracker, a pair member as T4's decoy is, carries none either: world version 9)
    ordinary = ~driver & ~jnp.zeros(p, bool).at[decoy].set(carried) & ~(is_delayed & (jnp.arange(p) == tracker))
    bmi_coef = jnp.where(ordinary & jax.random.bernoulli(next(ka), art["bmi_rate"], (p,)), random_sign(ka, (p,)) * uniform(ka, art["bmi"], (p,)), 0.0)
    bmi_coef = bmi_coef.at[decoy[T1]].set(
        jnp.where(carried[T1], random_sign(ka) * uniform(ka, bs["confounding_bmi"]), bmi_coef[decoy[T1]]))
    exercise_coef = jnp.where(ordinary & jax.random.bernoulli(next(ka), art["exercise_rate"], (p,)),
                              random_sign(ka, (p,)) * uniform(ka, art["exercise"], (p,)), 0.0)
    exercise_coef = exercise_coef.at[decoy[T6]].set(
        jnp.where(carried[T6], t6_sign * uniform(ka, bs["remodelling_protein"]), exercise_coef[decoy[T6]]))
    bmi_linear = _standardise(bmi)
    explained = cis_r2 + trans_r2 + (loadings**2).sum(0) + (covariate_effects**2).sum(0) + bmi_coef**2 + exercise_coef**2
    residual_sd = jnp.sqrt(jnp.maximum(1.0 - explained, 0.15))
    protein = (cis_sign * jnp.sqrt(cis_r2) * standard_genotype(cis_variant)
               + jnp.sqrt(trans_r2) * standard_genotype(trans_variant)
               + factors @ loadings + covariates @ covariate_effects
               + bmi_linear[:, None] * bmi_coef + exercise_z[:, None] * exercise_coef
               + residual_sd * jax.random.normal(next(k), (n, p), f32))
    protein_true = _standardise(protein)
    assay_sd = jax.random.uniform(next(k), (p,), f32, 0.15, 0.45)
    npx_mean = jax.random.uniform(next(k), (p,), f32, 2.0, 9.0)
    npx_scale = jax.random.uniform(next(k), (p,), f32, 0.5, 1.4)
    assay_noise = assay_sd * jax.random.normal(next(k), (n, p), f32)
    protein_missing = jax.random.bernoulli(next(k), 0.02, (n, p))

    # -- latent severity
    linear = jnp.where(hard, SATURATION * jnp.tanh(protein_true / SATURATION), protein_true)
    molecular = linear @ effect
    _, strongest = jax.lax.top_k(jnp.abs(effect), 2)
    pair_sign = jnp.sign(effect[strongest[0]] * effect[strongest[1]])
    interaction = jnp.where(hard & (n_drivers >= 2), INTERACTION * pair_sign, 0.0) * (
        protein_true[:, strongest[0]] * protein_true[:, strongest[1]])
    n_poly = v // 4
    poly_variants = jax.random.permutation(next(k), v)[:n_poly]
    poly_weights = jax.random.normal(next(k), (n_poly,), f32) * jnp.sqrt(POLYGENIC_VARIANCE / n_poly)
    polygenic = jnp.where(hard, standard_genotype(poly_variants) @ poly_weights, 0.0)
    biology_weights = jax.random.uniform(next(k), (2,), f32, 0.25, 0.4) * jnp.where(
        jax.random.bernoulli(next(k), 0.5, (2,)), 1.0, -1.0)
    biology = factors[:, :BIOLOGY] @ biology_weights
    risk = 0.35 * age_z + 0.15 * sex_pm + (0.25 + on[T1] * bs["confounding_severity"]) * bmi_z - 0.15 * exercise_z
    pleiotropy_sign = jnp.where(jax.random.bernoulli(next(kb), 0.5), 1.0, -1.0).astype(f32)
    planted = (on[T7] * bs["pleiotropy"] * pleiotropy_sign * standard_genotype(cis_variant[decoy[T7]])
               + on[T9] * bs["unit_site_severity"] * (site == unit_site_t9))
    residual_var = jnp.where(hard, RESIDUAL_VARIANCE["hard"], RESIDUAL_VARIANCE["standard"])
    residual = jnp.sqrt(residual_var) * jax.random.normal(next(k), (n,), f32)
    raw = molecular + interaction + polygenic + biology + risk + planted + residual
    scale = raw.std() + 1e-6
    severity = (raw - raw.mean()) / scale
    # the late disease (five years on): the late weights, the same participant, a progression residual
    late_raw = (linear @ late_effect + interaction + polygenic + biology + risk + planted + residual
                + jnp.sqrt(PROGRESSION_VARIANCE) * jax.random.normal(next(kt), (n,), f32))
    late_scale = late_raw.std() + 1e-6
    late_severity = (late_raw - late_raw.mean()) / late_scale
    # a protein that tracks the progression without causing it (delayed worlds): the late disease beyond the baseline's
    progression = _standardise(late_severity - jnp.mean(late_severity * severity) * severity)

    # -- the planted mechanisms that act on a decoy's true level: T2 reacts to disease, T4 is co-regulated with the driver
    reactive = protein_true[:, decoy[T2]] + uniform(kb, bs["reactive"]) * severity
    protein_true = protein_true.at[:, decoy[T2]].set(jnp.where(carried[T2], _standardise(reactive), protein_true[:, decoy[T2]]))
    marker = _standardise(biology + residual)  # the disease's part no driver and no covariate explains

    def correlation(x, y):
        return jnp.mean(_standardise(x) * _standardise(y))

    # the tools' adjustment set (age, sex, BMI, site: Release.covariates), which the association a claimant compares
    # a pair's members by leaves out (world version 11: a pair's members are matched on it)
    adjustment = jnp.stack([jnp.ones(n, f32), age_z, sex_pm, _standardise(bmi), *((site == s).astype(f32) for s in (1, 2, 3))], 1)
    adjustment_basis = jnp.linalg.qr(adjustment)[0]

    def adjusted_correlation(x, y):  # the correlation of x and y once both are adjusted for age, sex, BMI and site
        return correlation(x - adjustment_basis @ (adjustment_basis.T @ x), y - adjustment_basis @ (adjustment_basis.T @ y))

    def on_instrument(untuned, g, target):
        # untuned + c g, standardised, c such that its slope on g (centred, its variance v_g) is `target`: c solves
        # (s + c v) / sqrt(V + 2 c s + c^2 v) = t over the cohort (s = cov(level, g), V = var(level), v = var(g))
        untuned = untuned - untuned.mean()
        v_g = jnp.mean(g**2)
        t_sign = jnp.where(target < 0, -1.0, 1.0)
        s_xg, v_x, t2 = t_sign * jnp.mean(untuned * g), jnp.mean(untuned**2), target**2
        direct = t_sign * (-s_xg + jnp.sqrt(jnp.maximum(s_xg**2 - v_g * (s_xg**2 - t2 * v_x) / (v_g - t2), 0.0))) / v_g
        return _standardise(untuned + direct * g)

    def matched_pair(untuned, g, target, causal, key_ratio):
        # a pair's non-causal member (world version 10): untuned + k x the disease's unexplained part (the unmeasured
        # biology and the residual: a marker of the disease that no instrument moves), on the shared instrument
        # (`on_instrument`), k set by secant steps so that its correlation with the baseline disease is the causal
        # member's times a log-uniform PAIR_ASSOCIATION draw (k within [-3, 3]: where that is out of reach, the nearest);
        # since world version 11 both correlations adjusted for the tools' covariates, as a claimant's association scan
        # is (version 10 matched the unadjusted ones: a delayed driver's weak association, partly its covariates', then
        # fell below its tracker's after adjustment more often than not)
        low, high = PAIR_ASSOCIATION
        goal = jnp.exp(jax.random.uniform(key_ratio, (), f32, jnp.log(low), jnp.log(high))) * adjusted_correlation(
            protein_true[:, causal], severity)

        def gap(k):
            return adjusted_correlation(on_instrument(untuned + k * marker, g, target), severity) - goal

        k0, k1 = 0.0, 0.5 * jnp.sign(goal - adjusted_correlation(untuned, severity) + 1e-9) * jnp.sign(jnp.mean(marker * severity))
        g0 = gap(k0)
        for _ in range(PAIR_TUNING_STEPS):
            g1 = gap(k1)
            step = jnp.where(jnp.abs(g1 - g0) > 1e-9, g1 * (k1 - k0) / (g1 - g0 + 1e-12), 0.0)
            k0, g0, k1 = k1, g1, jnp.clip(k1 - step, -3.0, 3.0)
        return on_instrument(untuned + k1 * marker, g, target)

    # T4: the decoy is co-regulated with the first driver and sits on its cis variant at `ratio` times its strength
    t4_g = standard_genotype(cis_variant[first_driver])
    t4_g = t4_g - t4_g.mean()
    t4_target = ratio * jnp.mean(t4_g * protein_true[:, first_driver]) / jnp.mean(t4_g**2)
    coregulated = matched_pair(protein_true[:, decoy[T4]] + coregulation * protein_true[:, first_driver], t4_g, t4_target,
                               first_driver, next(kv))
    protein_true = protein_true.at[:, decoy[T4]].set(jnp.where(carried[T4], coregulated, protein_true[:, decoy[T4]]))
    # the tracker: on the delayed driver's cis variant, its instrument (on its standardised level) `shared_strength`
    # times the driver's, as T4's decoy's is, so the two members' Wald ratios are equal within their standard errors
    # at every horizon
    shared_g = standard_genotype(cis_variant[delayed_driver])
    shared_g = shared_g - shared_g.mean()
    v_g = jnp.mean(shared_g**2)
    target = (jax.random.uniform(kt_keys[-1], (), f32, *bs["shared_strength"])
              * jnp.mean(shared_g * protein_true[:, delayed_driver]) / v_g)
    # it moves with the progression the way the delayed driver moves it (its sign is the driver's late weight's), so
    # that the genetics it shares through the progression agrees with the instrument's direct action
    tracker_sign = jnp.where(late_effect[delayed_driver] < 0, -1.0, 1.0)
    tracked = matched_pair(protein_true[:, tracker] + tracker_sign * TRACKER_LOADING * progression, shared_g, target,
                           delayed_driver, next(kv))
    protein_true = protein_true.at[:, tracker].set(jnp.where(is_delayed, tracked, protein_true[:, tracker]))

    # -- measurement artefacts (ordinary proteins at ARTEFACTS' rates; T5's and T9's decoys as their mechanism): a
    # pre-analytical shift at one site, and a second unit at one site (never the site that T9 makes sicker)
    site_shifted = (ordinary & jax.random.bernoulli(next(ka), art["site_rate"], (p,))).at[decoy[T5]].set(
        carried[T5] | jax.random.bernoulli(next(ka), art["site_rate"]))
    shift_site = jax.random.randint(next(ka), (p,), 0, 4, jnp.int32)
    shift_site = shift_site.at[decoy[T5]].set(jnp.where(carried[T5], batch_site, shift_site[decoy[T5]]))
    shift = random_sign(ka, (p,)) * uniform(ka, art["site_shift"], (p,))
    shift = shift.at[decoy[T5]].set(jnp.where(carried[T5], t5_sign * uniform(kb, bs["site_protein"]), shift[decoy[T5]]))
    site_effect = jnp.where(site_shifted, shift, 0.0) * (site[:, None] == shift_site[None, :])
    unit_mixed = (ordinary & jax.random.bernoulli(next(ka), art["unit_rate"], (p,))).at[decoy[T9]].set(
        carried[T9] | jax.random.bernoulli(next(ka), art["unit_rate"]))
    other_site = jax.random.randint(next(ka), (p,), 0, 3, jnp.int32)
    unit_site = jnp.where(carried[T9], other_site + (other_site >= unit_site_t9), jax.random.randint(next(ka), (p,), 0, 4, jnp.int32))
    unit_site = unit_site.at[decoy[T9]].set(jnp.where(carried[T9], unit_site_t9, unit_site[decoy[T9]]))
    units = bs["unit_offset"] * (unit_mixed & (site[:, None] == unit_site[None, :]))
    protein_npx = npx_mean + npx_scale * (protein_true + assay_noise + site_effect) + units
    artefacts = (jnp.zeros((p, N_BIASES), bool).at[:, T1].set(jnp.abs(bmi_coef + covariate_effects[2]) >= art["carrier"])
                 .at[:, T5].set(site_shifted).at[:, T6].set(jnp.abs(exercise_coef + covariate_effects[3]) >= art["carrier"])
                 .at[:, T9].set(unit_mixed)) & ordinary[:, None]
    surrogate_sign = jnp.where(jax.random.bernoulli(next(kb), 0.5), 1.0, -1.0).astype(f32)
    surrogate = on[T8] * surrogate_sign * protein_true[:, decoy[T8]]  # T8: moving it this way improves imaging, harms patients

    # -- imaging (every participant drawn; the imaged subset is released)
    load = jnp.asarray(IMAGING_LOADINGS)[archetype]
    distortion = (on[T5] * bs["site_imaging"] * (site == batch_site) + on[T6] * bs["remodelling_imaging"] * exercise_z
                  - bs["surrogate_imaging"] * surrogate)  # T5 scanner, T6 remodelling, T8 surrogate: along the disease pattern
    heart = (severity + distortion)[:, None] * load + covariates @ jnp.asarray(IMAGING_COVARIATES)  # the heart as it is
    imaging = heart + IMAGING_NOISE * jax.random.normal(next(k), (n, len(IMAGING)), f32)  # as the clinic reads it
    imaging_missing = jax.random.bernoulli(next(k), 0.02, (n, len(IMAGING)))
    random_imaged = jax.random.permutation(next(k), n)[:n_img]
    selection = (severity + bs["selection_decoy"] * protein_true[:, decoy[T3]] + SELECTION_COVARIATES["exercise"] * exercise_z
                 + SELECTION_COVARIATES["age"] * age_z + SELECTION_COVARIATES["bmi"] * bmi_z
                 + SELECTION_COVARIATES["factor"] * factors[:, BIOLOGY] + bs["selection_noise"] * jax.random.normal(next(kb), (n,), f32))
    _, selected = jax.lax.top_k(selection, n_img)  # T3: the top NI of the selection score are imaged
    imaged = jnp.sort(jnp.where(carried[T3], selected, random_imaged)).astype(jnp.int32)

    # -- physiology
    e_phys = jax.random.normal(next(k), (n, 4), f32)
    sbp_z = 0.3 * age_z + 0.1 * sex_pm + 0.25 * bmi_z + jnp.asarray(SBP_LOADING)[archetype] * severity + 0.85 * e_phys[:, 0]
    sbp = 128.0 + 14.0 * sbp_z
    dbp = 79.0 + 0.45 * (sbp - 128.0) + 6.0 * e_phys[:, 1]
    heart_rate = 70.0 + 10.0 * (jnp.asarray(HR_LOADING)[archetype] * severity - 0.3 * exercise_z + 0.9 * e_phys[:, 2])
    log_ntprobnp = (jnp.log(80.0) + 0.25 * age_z - 0.1 * sex_pm - 0.1 * bmi_z
                    + jnp.asarray(BNP_LOADING)[archetype] * severity + 0.6 * e_phys[:, 3])
    physiology_missing = jax.random.bernoulli(next(k), 0.03, (n,))

    # -- metabolites: covariates, the first two latent factors, a little severity (creatinine, CRP), noise
    m = len(METABOLITES)
    metabolite_covariates = 0.2 * jax.random.normal(next(k), (N_COVARIATES, m), f32)
    metabolite_factors = 0.3 * jax.random.normal(next(k), (2, m), f32)
    metabolite_severity = jnp.zeros(m, f32).at[4].set(0.15).at[5].set(0.1)
    metabolites = (covariates @ metabolite_covariates + factors[:, :2] @ metabolite_factors + severity[:, None] * metabolite_severity
                   + 0.8 * jax.random.normal(next(k), (n, m), f32))
    metabolite_missing = jax.random.bernoulli(next(k), 0.03, (n, m))

    # -- transcripts: the protein's true level, loosely
    rna = jnp.sort(jax.random.permutation(next(k), n)[:n_rna]).astype(jnp.int32)
    shared = jax.random.uniform(next(k), (p,), f32, 0.05, 0.6)
    transcripts = jnp.sqrt(shared) * protein_true[rna] + jnp.sqrt(1 - shared) * jax.random.normal(next(k), (n_rna, p), f32)

    # -- records and outcomes
    diagnosis_noise = jax.random.normal(next(k), (n, 3), f32)
    diagnosis_draw = jax.random.uniform(next(k), (n, 3), f32)
    # hard outcomes follow the late disease (the late weights)
    log_hazard = jnp.log(0.012) + 0.85 * late_severity + 0.3 * age_z + 0.2 * sex_pm + bs["surrogate_hazard"] * surrogate
    hospitalisation = jax.random.exponential(next(k), (n,), f32) / jnp.exp(log_hazard)
    censor = jnp.minimum(FOLLOW_UP_YEARS, jax.random.exponential(next(k), (n,), f32) / 0.02)
    cd, od = CARDIAC_DEATH, OTHER_DEATH
    cardiac_hazard = (cd["log_rate"] + cd["severity"] * late_severity + cd["age"] * age_z + cd["sex"] * sex_pm
                      + bs["surrogate_hazard"] * surrogate)
    cardiac_time = jax.random.exponential(next(kt), (n,), f32) / jnp.exp(cardiac_hazard)
    other_time = jax.random.exponential(next(kt), (n,), f32) / jnp.exp(
        od["log_rate"] + od["age"] * age_z + od["sex"] * sex_pm + od["bmi"] * bmi_z)
    event_time = jnp.minimum(hospitalisation, cardiac_time)  # a cardiac death is a cardiovascular event
    death_time = jnp.minimum(cardiac_time, other_time)

    # -- the follow-up visit: half the imaged, between VISIT_YEARS; the disease moved toward its late state
    n_visit = n_img // 2
    visited = jnp.sort(imaged[jax.random.permutation(next(kt), n_img)[:n_visit]]).astype(jnp.int32)
    visit_years = jax.random.uniform(next(kt), (n_visit,), f32, *VISIT_YEARS)
    w = visit_years / FOLLOW_UP_YEARS
    visit_severity = (1.0 - w) * severity[visited] + w * late_severity[visited]
    visit_heart = ((visit_severity + distortion[visited])[:, None] * load
                   + covariates[visited] @ jnp.asarray(IMAGING_COVARIATES))
    visit_imaging = visit_heart + IMAGING_NOISE * jax.random.normal(next(kt), (n_visit, len(IMAGING)), f32)
    visit_imaging_missing = jax.random.bernoulli(next(kt), 0.02, (n_visit, len(IMAGING)))
    visit_log_ntprobnp = (jnp.log(80.0) + 0.25 * age_z[visited] - 0.1 * sex_pm[visited] - 0.1 * bmi_z[visited]
                          + jnp.asarray(BNP_LOADING)[archetype] * visit_severity
                          + 0.6 * jax.random.normal(next(kt), (n_visit,), f32))
    visit_true = (PROTEIN_STABILITY * protein_true[visited]
                  + jnp.sqrt(1.0 - PROTEIN_STABILITY**2) * jax.random.normal(next(kt), (n_visit, p), f32))
    visit_true = visit_true.at[:, tracker].add(jnp.where(is_delayed, tracker_sign * TRACKER_LOADING * w * progression[visited], 0.0))
    visit_npx = (npx_mean + npx_scale * (visit_true + assay_sd * jax.random.normal(next(kt), (n_visit, p), f32)
                                         + site_effect[visited]) + units[visited])
    visit_protein_missing = jax.random.bernoulli(next(kt), 0.02, (n_visit, p))
    return {
        "genotypes": genotypes, "maf": maf, "age": age, "sex": sex, "bmi": bmi, "site": site, "exercise": exercise,
        "exercise_missing": exercise_missing, "cis_variant": cis_variant, "trans_variant": trans_variant, "has_trans": has_trans,
        "protein_true": protein_true, "protein_npx": protein_npx, "protein_missing": protein_missing, "driver": driver,
        "effect": effect / scale, "interaction": strongest.astype(jnp.int32), "severity": severity,
        "imaging": imaging, "imaging_missing": imaging_missing, "imaged": imaged, "heart": heart[imaged],
        "sbp": sbp, "dbp": dbp, "heart_rate": heart_rate, "log_ntprobnp": log_ntprobnp, "physiology_missing": physiology_missing,
        "metabolites": metabolites, "metabolite_missing": metabolite_missing, "transcripts": transcripts, "rna": rna,
        "diagnosis_noise": diagnosis_noise, "diagnosis_draw": diagnosis_draw,
        "event": event_time < censor, "event_time": jnp.minimum(event_time, censor),
        "cardiac_death": (cardiac_time <= other_time) & (cardiac_time < FOLLOW_UP_YEARS),
        "cardiac_death_time": jnp.minimum(death_time, FOLLOW_UP_YEARS),
        "all_cause_death": death_time < FOLLOW_UP_YEARS, "death_time": jnp.minimum(death_time, FOLLOW_UP_YEARS),
        "late_effect": late_effect / late_scale, "late_severity": late_severity, "late_delayed": late_delayed,
        "tracker": tracker, "has_tracker": is_delayed, "scale": scale, "late_scale": late_scale, "pair_sign": pair_sign,
        "visited": visited, "visit_years": visit_years, "visit_imaging": visit_imaging,
        "visit_imaging_missing": visit_imaging_missing, "visit_log_ntprobnp": visit_log_ntprobnp, "visit_npx": visit_npx,
        "visit_protein_missing": visit_protein_missing,
        "decoy": decoy, "carried": carried, "surrogate_sign": surrogate_sign, "artefacts": artefacts,
        "batch_site": batch_site, "unit_site": unit_site_t9, "misaligned": misaligned, "neighbour": neighbour, "hosted": hosted,
    }


def follow_up(seed_words, c: dict, archetype: int) -> dict:
    """The ECG, the CT and the records' draws of cohort ``c`` (:func:`draw`'s
    arrays) of archetype index ``archetype``, from their own branch of the
    world key (:data:`FOLLOW_UP_KEY`), so nothing else in the world moves
    with them (world version 8). Returns numpy arrays:

    * ``ecg`` float32 (N, 5) (standardised scale, every participant, in the
      order of :data:`ECG`), ``ecg_missing`` bool (N,): no ECG recorded;
    * ``ct`` float32 (NI, 3) (the imaged, :data:`CT`), ``ct_missing`` bool (NI, 3);
    * ``record_draw`` float32 (N, 10) uniform and ``record_noise`` float32
      (N, 2) normal: the records' dates and the diagnoses after baseline
      (:func:`~.release.build_release` turns them into the dated records).

    Each measure is the heart as it is, ``severity`` plus the real
    remodelling of T6 (exercise) and T8 (the surrogate), along the
    archetype's loadings (:data:`ECG_LOADINGS`, :data:`CT_LOADINGS`), plus
    covariate effects and reading noise (:data:`TEST_NOISE`)."""
    key = jax.random.fold_in(world_key(seed_words), FOLLOW_UP_KEY)
    keys = iter(jax.random.split(key, 8))
    n, n_img = len(c["age"]), len(c["imaged"])
    f64 = np.float64

    def z(x):
        x = np.asarray(x, f64)
        return (x - x.mean()) / (x.std() + 1e-6)

    covariates = np.stack([z(c["age"]), 2.0 * c["sex"] - 1.0, z(np.log(c["bmi"])), z(np.log1p(c["exercise"]))], 1)
    carried = np.asarray(c["carried"])
    surrogate = float(carried[T8]) * float(c["surrogate_sign"]) * np.asarray(c["protein_true"][:, c["decoy"][T8]], f64)
    heart = (np.asarray(c["severity"], f64) + float(carried[T6]) * BIAS_STRENGTH["remodelling_imaging"] * covariates[:, 3]
             - BIAS_STRENGTH["surrogate_imaging"] * surrogate)
    normal = lambda shape: np.asarray(jax.random.normal(next(keys), shape, jnp.float32), f64)  # noqa: E731
    uniform = lambda shape: np.asarray(jax.random.uniform(next(keys), shape, jnp.float32), f64)  # noqa: E731
    ecg = heart[:, None] * ECG_LOADINGS[archetype] + covariates @ ECG_COVARIATES + TEST_NOISE * normal((n, len(ECG)))
    ecg_missing = uniform((n,)) < ECG_MISSING
    imaged = np.asarray(c["imaged"])
    ct = (heart[imaged, None] * CT_LOADINGS[archetype] + covariates[imaged] @ CT_COVARIATES
          + TEST_NOISE * normal((n_img, len(CT))))
    ct_missing = uniform((n_img, len(CT))) < CT_MISSING
    return {"ecg": ecg.astype(np.float32), "ecg_missing": ecg_missing, "ct": ct.astype(np.float32), "ct_missing": ct_missing,
            "record_draw": uniform((n, 10)).astype(np.float32), "record_noise": normal((n, 2)).astype(np.float32)}


def cohort(world_seed: int, design, sizes: Sizes) -> dict:
    """:func:`draw` of world seed ``world_seed`` (an int in [0, 2**63)) and
    ``design`` (a :class:`~.design.Design`), as numpy arrays, with the
    imaged participants' cine MRI stacks: ``cine`` uint8 (NI, FRAMES,
    PIXELS, PIXELS) (:func:`~.imaging.cine`), and :func:`follow_up`'s ECG,
    CT and records' draws."""
    words = np.array([world_seed >> 32, world_seed & 0xFFFFFFFF], np.uint32)
    biases = np.array([m in design.biases for m in MECHANISMS])
    out = draw(words, np.int32(ARCHETYPES.index(design.archetype)), np.int32(design.n_drivers),
               np.bool_(design.tier == "hard"), biases, np.int32(getattr(design, "delayed", 0)), sizes=sizes)
    c = {name: np.asarray(value) for name, value in jax.device_get(out).items()}
    site = c["site"][c["imaged"]]
    c["cine"] = cine(world_key(words), c["heart"], site, c["imaged"], c["carried"][T5] & (site == c["batch_site"]))
    c.update(follow_up(words, c, ARCHETYPES.index(design.archetype)))
    return c
