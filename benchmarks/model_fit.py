"""model-fit beside the repository's baselines on hard organisms (N=20), with
each sub-score and the seconds per session, from one results folder.

The sessions run through the harness (``luca_gym.eval.sweep``, as
``luca-gym eval`` does); a rerun on the same folder resumes. model-fit was
developed on seeds 300-309; report it on seeds it never saw (200-219 in
BENCHMARKS.md).

    .venv/bin/python benchmarks/model_fit.py --seeds 200-219 --out results/model_fit_hard
"""

from __future__ import annotations

import argparse
import collections

import numpy as np

from luca_gym import eval as ev
from luca_gym.cli import parse_seeds

AGENTS = ("model-fit", "task-directed", "causal-sweep", "heuristic")
PAPER_BEST = {"healthy": 0.642, "disease": 0.650}  # the paper's best agent per column (hard, N=20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="200-219")
    ap.add_argument("--out", default="results/model_fit_hard")
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--modes", default="healthy,disease")
    args = ap.parse_args()
    import os

    os.makedirs(args.out, exist_ok=True)
    specs = ev.plan(args.agents.split(","), ["hard"], args.modes.split(","), [20], parse_seeds(args.seeds))
    path = ev.sweep(specs, args.out)
    records = ev.load_sessions(path)
    cells = collections.defaultdict(list)
    for r in records:
        s = r["scores"]
        cells[(r["agent"], r["mode"])].append([s["composite"], s["prediction"], s["diagnosis"], s["rescue"], r["wall_s"]])
    print(f"hard, N=20, seeds {args.seeds}: mean (population std) over {len(set(r['seed'] for r in records))} seeds")
    print("| agent | mode | composite | prediction | diagnosis | rescue | s / session |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode in args.modes.split(","):
        for agent in args.agents.split(","):
            v = np.array(cells[(agent, mode)], float)
            if not len(v):
                continue
            mean, std = v.mean(0), v.std(0)
            sub = " | ".join(f"{mean[i]:.3f}" if mode == "disease" else "-" for i in (2, 3))
            print(f"| {agent} | {mode} | {mean[0]:.3f} ({std[0]:.3f}) | {mean[1]:.3f} | {sub} | {mean[4]:.1f} |")
        print(f"| paper's best agent | {mode} | {PAPER_BEST[mode]:.3f} | | | | |")


if __name__ == "__main__":
    main()
