"""One policy for every organism size: the per-gene network trained at N=20
only, evaluated at N=20, 40 and 80 beside causal-sweep (issue 26, item 3).

    .venv/bin/python benchmarks/pergene.py [--steps 786432] [--num-envs 256] [--n-genes 20,40,80]
        [--tier medium] [--mode healthy] [--out results/pergene]

Trains the JAX PPO with ``network="pergene"`` (:mod:`luca_gym.agents.pergene`)
on ``--tier`` ``--mode`` organisms of N=20 (training seeds 10000 up), writes
the run folder ``--out``, then plays the one checkpoint, greedy, through the
harness (``luca-gym eval --agents ppo:OUT,causal-sweep``: host sessions, the
same path any agent takes) at every ``--n-genes`` on the evaluation seeds
(never trained on), with the world's default budget (N + S + 8) at each size.
Prints the mean composite per agent and size, and writes the sessions to
``OUT/eval``. The same weights act at every size: the codec's token layout
for that size places them (:func:`luca_gym.agents.ppo.bind`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict

import numpy as np

from luca_gym.agents import ppo
from luca_gym.cli import main as cli


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tier", default="medium")
    parser.add_argument("--mode", default="healthy")
    parser.add_argument("--steps", type=int, default=786_432, help="96 updates of 256 envs x 32 steps")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--token-width", type=int, default=32)
    parser.add_argument("--attention-layers", type=int, default=2)
    parser.add_argument("--attention-heads", type=int, default=4)
    parser.add_argument("--pool-size", type=int, default=1024)
    parser.add_argument("--n-genes", default="20,40,80", help="sizes to evaluate at (training is at N=20)")
    parser.add_argument("--seeds", default="0-19")
    parser.add_argument("--baselines", default="causal-sweep")
    parser.add_argument("--out", default=os.path.join("results", "pergene"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    config = ppo.PPOConfig(tier=args.tier, n_genes=20, mode=args.mode, network="pergene", steps=args.steps,
                           num_envs=args.num_envs, num_steps=args.num_steps, minibatches=args.minibatches,
                           token_width=args.token_width, attention_layers=args.attention_layers,
                           attention_heads=args.attention_heads, pool_size=args.pool_size, seed=args.seed)
    print(f"training the per-gene network at N=20 {args.tier} {args.mode}: {ppo.plan(config)}", flush=True)

    def progress(row):
        print(f"  update {row['update']}/{row['updates']}  {row['env_steps']:,} steps  {row['wall_s']:.0f} s  "
              f"training composite {row['mean_score']:.3f}  entropy {row['entropy']:.2f}", flush=True)

    summary = ppo.train(config, args.out, progress=progress)
    print(f"trained: {summary['env_steps']:,} steps in {summary['wall_s']:.0f} s "
          f"({summary['steps_per_s'] or 0:.0f} steps/s after the first update)", flush=True)

    results = os.path.join(args.out, "eval")
    agents = ",".join([f"ppo:{args.out}", *filter(None, args.baselines.split(","))])
    started = time.perf_counter()
    code = cli(["eval", "--agents", agents, "--seeds", args.seeds, "--tiers", args.tier, "--modes", args.mode,
                "--n-genes", args.n_genes, "--out", results, "--quiet"])
    if code != 0:
        raise SystemExit(code)
    print(f"evaluated in {time.perf_counter() - started:.0f} s", flush=True)

    scores = defaultdict(list)
    with open(os.path.join(results, "sessions.jsonl"), encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            scores[record["agent"], record["n_genes"]].append(record["scores"]["composite"])
    sizes = sorted({n for _, n in scores})
    print(f"\nmean composite, {args.tier} {args.mode}, seeds {args.seeds} (policy trained at N=20 only)")
    print(f"{'agent':<40}" + "".join(f"{f'N={n}':>10}" for n in sizes))
    for agent in dict.fromkeys(a for a, _ in scores):
        cells = [f"{np.mean(scores[agent, n]):>10.3f}" if scores[agent, n] else f"{'-':>10}" for n in sizes]
        print(f"{agent:<40}" + "".join(cells))


if __name__ == "__main__":
    main()
