"""Baseline agents as policies over the public environment."""

from luca_gym.baselines.policies import (
    BASELINES,
    PAPER_BASELINES,
    CausalSweepPolicy,
    HeuristicPolicy,
    Policy,
    RandomPolicy,
    SweepPolicy,
    TaskDirectedPolicy,
    make_policy,
)

__all__ = ["BASELINES", "PAPER_BASELINES", "CausalSweepPolicy", "HeuristicPolicy", "Policy", "RandomPolicy", "SweepPolicy", "TaskDirectedPolicy", "make_policy"]
