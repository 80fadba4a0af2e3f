"""Tracking, the long-trajectory state-tracking probe of *Auto-Discovery-Bench:
Diagnosing Structured State Tracking in Oracle-Guided Discovery* ("long
trajectory"): the agent is shown an observation matrix X in {0..C-1}^(M x N),
the colours of N nodes over M steps, and submits once the change-indicator matrix
Y in {0,1}^((M-1) x N), Y[i, j] = 1 iff node j changes colour between steps i
and i+1. Scored by exact match (OA-Acc is its mean over sessions), by the
fraction of rows right (AT-Acc) and by correctness per position (Figure 5).

Its parts: :mod:`~luca_gym.worlds.tracking.config` (:class:`TrackingConfig`),
:mod:`~luca_gym.worlds.tracking.core` (instances, pure ``reset``/``step``,
the scorer, what an agent sees, the spaces: ``luca_gym/StateTracking-v0`` is
the generic :class:`~luca_gym.envs.core.CoreEnv` over it),
:mod:`~luca_gym.worlds.tracking.tools` (the tool table),
:mod:`~luca_gym.worlds.tracking.baselines` (tool agents) and
:mod:`~luca_gym.worlds.tracking.report` (Table 2 and Figure 5).

:data:`WORLD` is what the registry holds; importing this package imports none
of the parts.
"""

from luca_gym.protocol import World

WORLD = World(
    name="tracking",
    version="1",
    gym_stem="StateTracking",
    summary="long-trajectory state tracking: the change-indicator matrix of a colour trajectory, submitted once",
    config="luca_gym.worlds.tracking.config:TrackingConfig",
    headline="exact",
    tools="luca_gym.worlds.tracking.tools:TrackingToolSession",
    core="luca_gym.worlds.tracking.core",
    baselines="luca_gym.worlds.tracking.baselines:BASELINES",
    report="luca_gym.worlds.tracking.report:sections",
    reference="Auto-Discovery-Bench: Diagnosing Structured State Tracking in Oracle-Guided Discovery, long trajectory",
    session_keys=("length", "n_nodes", "n_colors", "change_prob", "cot", "seed"),
    required_scores=("exact", "trajectory_accuracy", "cell_accuracy", "position_correct"),
)

__all__ = ["WORLD"]
