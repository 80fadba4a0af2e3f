"""Baseline agents as policies over the public environment."""

from luca_gym.worlds.luca.baselines.policies import (
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
from luca_gym.worlds.luca.baselines.model_fit import ModelFitPolicy
from luca_gym.worlds.luca.baselines.sweep_flat import CausalSweepFlatPolicy

# model-fit is not a paper baseline: a model-fitting scientist (beyond the paper).
BASELINES[ModelFitPolicy.name] = ModelFitPolicy
# Nor causal-sweep-flat: the scripted reference on the flat action space, for learners at a tight budget.
BASELINES[CausalSweepFlatPolicy.name] = CausalSweepFlatPolicy

__all__ = ["BASELINES", "PAPER_BASELINES", "CausalSweepPolicy", "HeuristicPolicy", "Policy", "RandomPolicy", "SweepPolicy", "TaskDirectedPolicy", "make_policy", "ModelFitPolicy",
           "CausalSweepFlatPolicy"]
