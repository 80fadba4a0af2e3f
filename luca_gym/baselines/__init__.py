"""Baseline agents as policies over the public environment."""

from luca_gym.baselines.policies import (
    BASELINES,
    CausalSweepPolicy,
    HeuristicPolicy,
    Policy,
    RandomPolicy,
    make_policy,
)

__all__ = ["BASELINES", "CausalSweepPolicy", "HeuristicPolicy", "Policy", "RandomPolicy", "make_policy"]
