"""LUCA, the first world: gene-regulatory "organisms" with sigmoid dynamics
iterated to a fixed point, probed by BLOCK / BOOST / DAMPEN and signal
activations under a budget, with held-out two-gene predictions and, in disease
mode, a one-way diagnosis before rescues (the paper: *LUCA: A Synthetic World for
Experimental Reasoning*, https://github.com/RelationRx/luca).

Its parts: :mod:`~luca_gym.worlds.luca.config` (:class:`LucaConfig`),
:mod:`~luca_gym.worlds.luca.spec` (constants, codes, validators),
:mod:`~luca_gym.worlds.luca.types` (organism pytrees),
:mod:`~luca_gym.worlds.luca.generator` (tiers, networks, malfunctions, tasks,
batched and traced generation), :mod:`~luca_gym.worlds.luca.sim` and
:mod:`~luca_gym.worlds.luca.diffsim` (the steady state, plain and
differentiable), :mod:`~luca_gym.worlds.luca.core` (pure ``reset``/``step``,
rules, observation, reward), :mod:`~luca_gym.worlds.luca.scoring`,
:mod:`~luca_gym.worlds.luca.analysts`, :mod:`~luca_gym.worlds.luca.calls`
(the session's calls by name), :mod:`~luca_gym.worlds.luca.baselines`,
:mod:`~luca_gym.worlds.luca.vocabulary` and
:mod:`~luca_gym.worlds.luca.fidelity` (the paper's tables against ours).

:data:`WORLD` is what the registry holds; importing this package imports none
of the parts.
"""

from luca_gym.protocol import Contrast, World

WORLD = World(
    name="luca",
    version="1",
    gym_stem="Luca",
    summary="gene-regulatory organisms: budgeted perturbations, two-gene predictions, diagnosis and rescue",
    config="luca_gym.worlds.luca.config:LucaConfig",
    headline="composite",
    tools="luca_gym.worlds.luca.tools:ToolSession",
    core="luca_gym.worlds.luca.core.protocol",
    env="luca_gym.worlds.luca.envs.env:LucaEnv",
    vector_env="luca_gym.worlds.luca.envs.vector:LucaVectorEnv",
    flat_env="luca_gym.worlds.luca.envs.flat:LucaFlatEnv",
    flat="luca_gym.worlds.luca.functional:make_codec",
    tools_env="luca_gym.worlds.luca.envs.tools:LucaToolsEnv",
    baselines="luca_gym.worlds.luca.baselines:BASELINES",
    play="luca_gym.worlds.luca.evaluation:play_policy",
    flat_baselines="luca_gym.worlds.luca.baselines.sweep_flat:FLAT_BASELINES",
    expected_fields="luca_gym.worlds.luca.evaluation:expected_fields",
    check_settings="luca_gym.worlds.luca.evaluation:check_settings",
    report="luca_gym.worlds.luca.report:sections",
    audit="luca_gym.worlds.luca.audit",
    viewer="luca_gym.worlds.luca.viewer:VIEWER",
    cli="luca_gym.worlds.luca.cli:CLI",
    sweep_order=("n_genes", "tier", "mode", "backwards", "vocabulary", "stance"),
    reference="LUCA: A Synthetic World for Experimental Reasoning (Relation Therapeutics; https://github.com/RelationRx/luca)",
    session_keys=("tier", "mode", "n_genes", "seed", "backwards", "vocabulary", "stance"),
    # Added after the first results were written: older lines are of the default condition.
    key_defaults=(("vocabulary", "invented"), ("stance", "suppress")),
    required_scores=("composite", "prediction", "diagnosis", "rescue", "budget_fraction", "single_gene_fraction",
                     "gene_coverage", "block_fraction", "redundancy", "commit_point", "n_alt"),
    # The paper's ablations (appendix E): Δ = forward - backward, real - invented, permit - suppress.
    contrasts=(
        Contrast("backwards", "backwards", (False, True), ("forward", "backward"), minuend=False,
                 title="Backwards organisms (paper appendix E.1, Table 13)"),
        Contrast("vocabulary", "vocabulary", ("invented", "real"), ("invented", "real"), minuend="real",
                 title="Gene names (paper appendix E.2, Table 14)"),
        Contrast("stance", "stance", ("suppress", "permit"), ("suppress", "permit"), minuend="permit",
                 title="Prompt stance (paper appendix E.2, Table 14)"),
    ),
)

__all__ = ["WORLD"]
