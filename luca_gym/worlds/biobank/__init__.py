"""Biobank, drug-target discovery in a synthetic biobank after
*DrugTargetWorld: A Synthetic Biobank for Training and Benchmarking AI
Scientists* (arXiv:2610.09558): a cohort whose latent cardiac disease
severity is driven by 0-6 concealed proteins; the agent builds a phenotype
from raw measurements, finds the driver proteins and the direction to move
each, and submits claims scored against the truth.

Built: the world model, release and oracle, the structured tools, the
scorer, the planted biases T1-T9 (each a decoy protein made as every
protein is, its mechanism on top; ordinary proteins carry the same
artefacts; :mod:`~.generator` says what each plants), the experiments (cell
perturbation and knockdown, computed by the oracle) under a ``budget``
regime (none, limited, expanded; a session key), the floor (``null``,
``nominate-nothing``, ``nominate-all``, ``top-association``,
``cue-spotter``, ``artefact-sweep``, ``blanket-labels``,
``association-pick``), the baselines (``correlation-screen``, ``cis-mr``,
``mr-experiments``) and the reference ``causal-pipeline``
(:mod:`~.pipeline`), the sandboxed ``python`` tool (sealed sessions with
``python=True``; limits per session), synthetic cine MRI of the imaged
participants (:mod:`~.imaging`; the ``cine_mri`` table), the paper-size
profile, and time: baseline and late weights of each driver, delayed
drivers (some worlds), survival over five years and follow-up visits of
half the imaged (world version 6); ambiguous pairs, outcome-alignment labels
and abstentions (world version 7, scorer version 4); the ECG and CT tables,
dated diagnoses with those recorded over follow-up, and the survival and
visit-change tools (world version 8); the delayed driver and its tracker
an ambiguous pair on one cis instrument (world version 9); claims that must
be earned (world version 10, scorer version 5: earned rejections, misaligned
drivers and direction-aware labels, pairs no observation or blanket rule
resolves, sealed designs drawn from the panel's distribution); a pair's
members matched as the adjusted association scan sees them, and a wrong
rejection cancelling a right one (world version 11, scorer version 6).

Profiles (:mod:`~.config`): ``small``, the default (6,000 participants,
1,200 with clinic MRI measures, 300 proteins, 1,024 variants, 2,000 with
transcripts), ``tiny`` for the tests, and ``paper``, the paper's size
(54,000 participants, 10,800 imaged, 2,941 proteins, 8,192 variants,
18,000 with transcripts; minutes and about 9 GiB to generate on a CPU). Seeds
0-19 are the evaluation panel (archetype, drivers and tier of each seed in
:mod:`~.design`'s table); every other seed draws its design.

Its parts: :mod:`~.config` (:class:`BiobankConfig`, the profiles),
:mod:`~.design` (a world's design, the panel of seeds 0-19),
:mod:`~.generator` (the JAX world model), :mod:`~.imaging` (the cine MRI), :mod:`~.release` (the released
tables, the data dictionary, Parquet), :mod:`~.oracle` (the truth and the
scorer), :mod:`~.world` (a world from a seed), :mod:`~.analysis` (the
statistics the tools run), :mod:`~.tools` (the tool session),
:mod:`~.envs` (``luca_gym/Biobank-v0``, one step), :mod:`~.flat`
(``luca_gym/BiobankFlat-v0``: the tools as one ``Discrete`` action with a
mask, for learners; host-side, so no jittable codec, ``World.flat``),
:mod:`~.baselines` (the floor and the baselines), :mod:`~.pipeline` (``causal-pipeline``)
and :mod:`~.report`.

:data:`WORLD` is what the registry holds; importing this package imports none
of the parts.
"""

from luca_gym.protocol import World

WORLD = World(
    name="biobank",
    version="11",  # 2: the planted biases and scorer version 2; 3: experiments and budgets; 4: cine MRI in the release;
    # 5: no generator fingerprints (decoys made as every protein, ordinary proteins' artefacts), scorer version 3;
    # 6: time (baseline and late weights, delayed drivers, outcomes from the late disease, survival, follow-up visits,
    # experiments by horizon through the world's model); 7: T5, T6 and T8 in every panel world, T4's pair equal within
    # the standard errors (the oracle's ambiguous pairs), scorer version 4 (outcome alignment, abstentions, pair logic);
    # 8: the ecg, ct and follow_up_diagnoses tables and the diagnoses' dates (added; every other value as in 7)
    # 9: the delayed driver and its tracker an ambiguous pair (the tracker on the driver's cis instrument, 0.9-1.1 times
    # its strength; no ordinary artefacts); every other protein's values as in 8
    # 10: misaligned drivers (half of the non-delayed ones), a pair's non-causal member matching the causal one's
    # observational association, ordinary proteins at drivers' loci, T5's and T9's sites and T5's and T6's signs drawn
    # per world, sealed designs drawn from the panel's distribution; scorer version 5 (earned rejections,
    # direction-aware labels, no label waiving the surrogate's penalty, pair resolutions supported by a separating
    # experiment)
    # 11: a pair's non-causal member matches the causal one's association as the tools' adjusted scan sees it (age,
    # sex, BMI, site); scorer version 6 (a wrong rejection cancels a right one in bias identification's precision;
    # a wrong outcome-alignment label costs MISLABEL)
    gym_stem="Biobank",
    summary="drug-target discovery in a synthetic biobank: build a phenotype, find the causal driver proteins and their direction",
    config="luca_gym.worlds.biobank.config:BiobankConfig",
    headline="total",
    tools="luca_gym.worlds.biobank.tools:BiobankToolSession",
    env="luca_gym.worlds.biobank.envs:BiobankEnv",
    flat_env="luca_gym.worlds.biobank.flat:BiobankFlatEnv",
    baselines="luca_gym.worlds.biobank.pipeline:BASELINES",
    report="luca_gym.worlds.biobank.report:sections",
    audit="luca_gym.worlds.biobank.audit",
    host_side=("tools",),
    reference="DrugTargetWorld: A Synthetic Biobank for Training and Benchmarking AI Scientists (arXiv:2610.09558)",
    session_keys=("profile", "tier", "budget", "seed"),
    required_scores=("total", "target_identification", "causal_confidence", "direction", "outcome_alignment",
                     "bias_identification", "phenotype", "surrogate_penalty"),
)

__all__ = ["WORLD"]
