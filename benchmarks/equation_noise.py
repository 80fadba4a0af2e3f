"""The equation world under measurement noise: the floors, ``systematic`` and
``noisy-fit``, the noise-robust scripted agent (the grammar fitted to the
noisy answers; :class:`luca_gym.worlds.equation.baselines.NoisyFit`).

    .venv/bin/python benchmarks/equation_noise.py [--seeds 7101-7150] [--noise 0.01,0.05] [--settings simple:3:0,medium:3:0,complex:3:0]

For each setting (complexity:variables:distractors) and noise, under the
paper's loop (a formula stated with every query, the session ended the first
time it is right; iterations the queries before it, at least 1), on the seeds
given (default 7101-7150, never used while ``noisy-fit`` was calibrated, on
7001-7050): the floors as ``luca-gym report`` computes them (the commonest
formula stated at once; ``random``), then ``systematic`` and ``noisy-fit``
through the harness's tool sessions (``run_tool_session``, as ``luca-gym
eval`` runs them), each cell success / mean iterations over the successful
sessions (∞ where none succeeded).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

AGENTS = ("systematic", "noisy-fit")


def cell(scores: dict) -> str:
    """success % / mean iterations over the successful sessions (∞ where none)."""
    success = np.asarray(scores["success"], float)
    solved = np.asarray(scores["iterations"], float)[success == 1]
    return f"{100 * success.mean():.0f}% / {solved.mean():.2f}" if len(solved) else f"{100 * success.mean():.0f}% / ∞"


def seed_range(text: str) -> list[int]:
    """'7101-7150' -> [7101, ..., 7150]."""
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def rows(settings, noises, seeds, agents=AGENTS, floors=True) -> list[str]:
    """One table row per setting and noise (printed as it comes)."""
    from luca_gym import worlds
    from luca_gym.harness.runner import run_tool_session
    from luca_gym.protocol import SessionSpec
    from luca_gym.worlds.equation.config import EquationConfig
    from luca_gym.worlds.equation.report import floor_scores

    world = worlds.get("equation")
    policies = world.baseline_policies()
    out = []
    for complexity, n, d in settings:
        for noise in noises:
            started = time.perf_counter()
            cells = []
            if floors:
                scores = floor_scores(EquationConfig(complexity, n, d, measurement_noise=noise), seeds)
                cells += [cell(scores["fixed"]), cell(scores["random"])]
            keys = (("complexity", complexity), ("n_variables", n), ("n_distractors", d), ("proposals", "every"),
                    ("measurement_noise", noise))
            for agent in agents:
                records = [run_tool_session(policies[agent](), SessionSpec(agent, seed, "equation", keys), retries=0)
                           for seed in seeds]
                cells.append(cell({k: [r["scores"][k] for r in records] for k in ("success", "iterations")}))
            out.append(f"| {complexity}, {n}, {d}, measurement_noise {noise:g} | " + " | ".join(cells) + " |")
            print(out[-1] + f"  ({time.perf_counter() - started:.1f} s)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="7101-7150")
    parser.add_argument("--noise", default="0.01,0.05")
    parser.add_argument("--settings", default="simple:3:0,medium:3:0,complex:3:0",
                        help="complexity:variables:distractors, comma separated")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--no-floors", action="store_true")
    args = parser.parse_args()
    seeds = seed_range(args.seeds)
    settings = [(c, int(n), int(d)) for c, n, d in (s.split(":") for s in args.settings.split(","))]
    noises = [float(v) for v in args.noise.split(",")]
    agents = tuple(args.agents.split(","))
    started = time.perf_counter()
    print(f"jax {jax.__version__}, seeds {args.seeds} ({len(seeds)}), the paper's loop, budget 10\n")
    head = (["floor: commonest formula at once", "floor: random"] if not args.no_floors else []) + list(agents)
    print("| setting (complexity, Var, Dis) | " + " | ".join(head) + " |")
    print("| --- " * (len(head) + 1) + "|")
    rows(settings, noises, seeds, agents, floors=not args.no_floors)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
