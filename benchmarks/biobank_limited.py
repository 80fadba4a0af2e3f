"""The biobank's shipped baselines at the limited budget, and the reference
and the cue floor at budget none, on the small profile's unseen seeds
9101-9120: totals (floored at 0), totals before the floor (the sum of the
parts) and bias points, for BENCHMARKS.md::

    .venv/bin/python benchmarks/biobank_limited.py   # about 6 min on 2 cores
"""

from __future__ import annotations

import tempfile

import numpy as np

from luca_gym import harness

PARTS = ("target_identification", "causal_confidence", "direction", "outcome_alignment", "bias_identification",
         "phenotype", "surrogate_penalty")
SEEDS = list(range(9101, 9121))


def run(agents, budget) -> list[dict]:
    """The sessions of ``agents`` on :data:`SEEDS` at ``budget`` (a sweep in a temporary folder)."""
    out = tempfile.mkdtemp()
    harness.sweep(harness.plan_world("biobank", agents, SEEDS, budget=budget), out,
                  lambda name: harness.make_runner(name, world="biobank"))
    return harness.load_sessions(out)


def main() -> None:
    """Print each agent's mean total, total before the floor and bias points."""
    for budget, agents in (("none", ["causal-pipeline", "cue-spotter"]),
                           ("limited", ["correlation-screen", "cis-mr", "mr-experiments"])):
        sessions = run(agents, budget)
        for agent in agents:
            mine = [r for r in sessions if r["agent"] == agent]
            print(budget, agent, f"total {np.mean([r['scores']['total'] for r in mine]):.2f}",
                  f"before the floor {np.mean([sum(r['scores'][k] for k in PARTS) for r in mine]):.2f}",
                  f"bias {np.mean([r['scores']['bias_identification'] for r in mine]):.2f}", flush=True)


if __name__ == "__main__":
    main()
