"""Equation, symbolic equation discovery after *Auto-Discovery-Bench:
Diagnosing Structured State Tracking in Oracle-Guided Discovery*: a hidden
formula over variables with generic physical names, from a written-down
grammar at three complexities (simple, medium, complex), with distractor
variables that do not enter it. The agent chooses inputs and reads the output
(10 queries by default), stating the formula it believes (as text) with each
query, as the paper's loop asks (``proposals="every"``; ``"final"``: one
submitted formula); it succeeds when a formula it states agrees with the
hidden one within a relative error of 1e-6 on 100 held-out inputs.
Iterations are the paper's cycles: the queries before the right formula, at
least 1.

Versions: 2 (2026-12-05) runs the paper's loop by default and counts one
query and then the right formula as 1 iteration (version 1: one submission,
iterations the queries plus 1); the instances are version 1's. Two settings
beyond the paper came within version 2, off by default (the instances and
rules then version 2's exactly): ``measurement_noise`` (relative Gaussian
noise on each answer) and ``grammar_shown="words"`` (the grammar told in
prose, no template). Both are key fields of a results line; a line written
before them reads as off.

Its parts: :mod:`~luca_gym.worlds.equation.config` (settings and the
grammar, written down), :mod:`~luca_gym.worlds.equation.grammar` (formulas
as postfix programs, their JAX evaluator, the generator, the renderer),
:mod:`~luca_gym.worlds.equation.formula` (the parser of submitted text),
:mod:`~luca_gym.worlds.equation.core` (pure ``reset``/``step`` on a typed
``Action``, rules and scorer), :mod:`~luca_gym.worlds.equation.tools` (the
tool table), :mod:`~luca_gym.worlds.equation.envs` (``luca_gym/EquationDiscovery-v0``,
its own env: a formula is text the host reads before the core; the module says why),
:mod:`~luca_gym.worlds.equation.baselines` (``random``, ``systematic``),
:mod:`~luca_gym.worlds.equation.batched` (a batched JAX equation world for
learners over a finite family of the grammar's formulas:
``luca_gym/EquationDiscoveryFlat-v0`` and the flat codec) and
:mod:`~luca_gym.worlds.equation.report` (success rate and iterations over
successful sessions, as the paper's Table 1).

:data:`WORLD` is what the registry holds; importing this package imports none
of the parts.
"""

from luca_gym.protocol import World

WORLD = World(
    name="equation",
    version="2",
    gym_stem="EquationDiscovery",
    summary="symbolic equation discovery: query a hidden formula under a budget, then submit it as text",
    config="luca_gym.worlds.equation.config:EquationConfig",
    headline="success",
    tools="luca_gym.worlds.equation.tools:EquationToolSession",
    env="luca_gym.worlds.equation.envs:EquationEnv",
    flat="luca_gym.worlds.equation.batched:flat_codec",
    flat_baselines="luca_gym.worlds.equation.batched:FLAT_BASELINES",
    flat_env="luca_gym.worlds.equation.envs:EquationFlatEnv",
    baselines="luca_gym.worlds.equation.baselines:BASELINES",
    expected_fields="luca_gym.worlds.equation.config:expected_fields",
    report="luca_gym.worlds.equation.report:sections",
    sweep_order=("n_variables", "n_distractors", "complexity"),
    reference="Auto-Discovery-Bench: Diagnosing Structured State Tracking in Oracle-Guided Discovery, symbolic equation discovery",
    session_keys=("complexity", "n_variables", "n_distractors", "proposals", "measurement_noise", "grammar_shown", "seed"),
    # A line written before a field: one submission (version 1's protocol), exact answers, the grammar listed.
    key_defaults=(("proposals", "final"), ("measurement_noise", 0.0), ("grammar_shown", "listed")),
    required_scores=("success", "iterations"),
)

__all__ = ["WORLD"]
