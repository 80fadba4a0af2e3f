"""The biobank world model: one jitted, float32 draw of a whole cohort from a
key and a design (:func:`draw`), shapes fixed by the profile, so one compile
serves every seed and every design of a profile.

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
  NT-proBNP-like marker) for everyone, metabolites, diagnosis codes, and a
  five-year cardiovascular event with its time (exponential hazard, log
  hazard 0.85 per SD of severity, drop-out 2% a year).
* Transcripts, for a random subset: each gene's transcript follows its
  protein's true level loosely (shared variance U(0.05, 0.6)).

The imaged and transcript subsets are random in S1 (imaging selection, T3,
is stage S2).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.biobank.config import BLOCK, Sizes
from luca_gym.worlds.biobank.design import ARCHETYPES

ROOT_KEY = 0xB10B  # the root of every world key
N_FACTORS = 6  # shared latent factors of the proteome
N_COVARIATES = 4  # age, sex, BMI, exercise (standardised) as effects see them
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


def _standardise(x, axis=0):
    return (x - x.mean(axis=axis, keepdims=True)) / (x.std(axis=axis, keepdims=True) + 1e-6)


@partial(jax.jit, static_argnames=("sizes",))
def draw(seed_words, archetype, n_drivers, hard, *, sizes: Sizes) -> dict:
    """One cohort: ``seed_words`` uint32 (2,) (the world seed's two words),
    ``archetype`` int32 () (index into ARCHETYPES), ``n_drivers`` int32 (),
    ``hard`` bool (). Returns a dict of arrays (N participants, P proteins, V
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
    * ``imaging`` float32 (N, 6) (standardised scale, every participant), ``imaging_missing`` bool (N, 6);
    * ``sbp``, ``dbp``, ``heart_rate``, ``log_ntprobnp`` float32 (N,); ``physiology_missing`` bool (N,);
    * ``metabolites`` float32 (N, 8) (standardised scale), ``metabolite_missing`` bool (N, 8);
    * ``transcripts`` float32 (NR, P) (standardised scale), ``rna`` int32 (NR,), ``imaged`` int32 (NI,) (sorted);
    * ``diagnosis_noise`` float32 (N, 3), ``diagnosis_draw`` float32 (N, 3): the records' draws;
    * ``event`` bool (N,), ``event_time`` float32 (N,) years.
    """
    n, n_img, p, v, n_rna = sizes
    blocks = v // BLOCK
    key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(ROOT_KEY), seed_words[0]), seed_words[1])
    k = iter(jax.random.split(key, 64))
    f32 = jnp.float32

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
    sign = jnp.where(jax.random.bernoulli(next(k), 0.5, (p,)), 1.0, -1.0).astype(f32)
    effect = jnp.where(driver, sign * jax.random.uniform(next(k), (p,), f32, 0.3, 0.6), 0.0)

    # -- proteins
    cis_variant = jax.random.permutation(next(k), v)[:p].astype(jnp.int32)
    cis_r2 = jnp.where(driver, jax.random.uniform(next(k), (p,), f32, 0.06, 0.3), jax.random.uniform(next(k), (p,), f32, 0.02, 0.25))
    cis_sign = jnp.where(jax.random.bernoulli(next(k), 0.5, (p,)), 1.0, -1.0).astype(f32)
    has_trans = jax.random.bernoulli(next(k), 0.2, (p,))
    trans_variant = jax.random.randint(next(k), (p,), 0, v, jnp.int32)
    trans_r2 = jnp.where(has_trans, jax.random.uniform(next(k), (p,), f32, 0.005, 0.03), 0.0)
    factors = jax.random.normal(next(k), (n, N_FACTORS), f32)
    loadings = 0.35 * jax.random.normal(next(k), (N_FACTORS, p), f32) * jax.random.bernoulli(next(k), 0.3, (N_FACTORS, p))
    covariate_effects = 0.12 * jax.random.normal(next(k), (N_COVARIATES, p), f32)
    explained = cis_r2 + trans_r2 + (loadings**2).sum(0) + (covariate_effects**2).sum(0)
    residual_sd = jnp.sqrt(jnp.maximum(1.0 - explained, 0.15))
    protein = (cis_sign * jnp.sqrt(cis_r2) * standard_genotype(cis_variant)
               + jnp.sqrt(trans_r2) * standard_genotype(trans_variant)
               + factors @ loadings + covariates @ covariate_effects
               + residual_sd * jax.random.normal(next(k), (n, p), f32))
    protein_true = _standardise(protein)
    assay_sd = jax.random.uniform(next(k), (p,), f32, 0.15, 0.45)
    npx_mean = jax.random.uniform(next(k), (p,), f32, 2.0, 9.0)
    npx_scale = jax.random.uniform(next(k), (p,), f32, 0.5, 1.4)
    protein_npx = npx_mean + npx_scale * (protein_true + assay_sd * jax.random.normal(next(k), (n, p), f32))
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
    biology = factors[:, :2] @ biology_weights
    risk = 0.35 * age_z + 0.15 * sex_pm + 0.25 * bmi_z - 0.15 * exercise_z
    residual_var = jnp.where(hard, RESIDUAL_VARIANCE["hard"], RESIDUAL_VARIANCE["standard"])
    raw = molecular + interaction + polygenic + biology + risk + jnp.sqrt(residual_var) * jax.random.normal(next(k), (n,), f32)
    scale = raw.std() + 1e-6
    severity = (raw - raw.mean()) / scale

    # -- imaging (every participant drawn; the imaged subset is released)
    load = jnp.asarray(IMAGING_LOADINGS)[archetype]
    imaging = (severity[:, None] * load + covariates @ jnp.asarray(IMAGING_COVARIATES)
               + IMAGING_NOISE * jax.random.normal(next(k), (n, len(IMAGING)), f32))
    imaging_missing = jax.random.bernoulli(next(k), 0.02, (n, len(IMAGING)))
    imaged = jnp.sort(jax.random.permutation(next(k), n)[:n_img]).astype(jnp.int32)

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
    log_hazard = jnp.log(0.012) + 0.85 * severity + 0.3 * age_z + 0.2 * sex_pm
    event_time = jax.random.exponential(next(k), (n,), f32) / jnp.exp(log_hazard)
    censor = jnp.minimum(5.0, jax.random.exponential(next(k), (n,), f32) / 0.02)
    return {
        "genotypes": genotypes, "maf": maf, "age": age, "sex": sex, "bmi": bmi, "site": site, "exercise": exercise,
        "exercise_missing": exercise_missing, "cis_variant": cis_variant, "trans_variant": trans_variant, "has_trans": has_trans,
        "protein_true": protein_true, "protein_npx": protein_npx, "protein_missing": protein_missing, "driver": driver,
        "effect": effect / scale, "interaction": strongest.astype(jnp.int32), "severity": severity,
        "imaging": imaging, "imaging_missing": imaging_missing, "imaged": imaged,
        "sbp": sbp, "dbp": dbp, "heart_rate": heart_rate, "log_ntprobnp": log_ntprobnp, "physiology_missing": physiology_missing,
        "metabolites": metabolites, "metabolite_missing": metabolite_missing, "transcripts": transcripts, "rna": rna,
        "diagnosis_noise": diagnosis_noise, "diagnosis_draw": diagnosis_draw,
        "event": event_time < censor, "event_time": jnp.minimum(event_time, censor),
    }


def cohort(world_seed: int, design, sizes: Sizes) -> dict:
    """:func:`draw` of world seed ``world_seed`` (an int in [0, 2**63)) and
    ``design`` (a :class:`~.design.Design`), as numpy arrays."""
    words = np.array([world_seed >> 32, world_seed & 0xFFFFFFFF], np.uint32)
    out = draw(words, np.int32(ARCHETYPES.index(design.archetype)), np.int32(design.n_drivers),
               np.bool_(design.tier == "hard"), sizes=sizes)
    return {name: np.asarray(value) for name, value in jax.device_get(out).items()}
