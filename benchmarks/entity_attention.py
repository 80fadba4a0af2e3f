"""One policy for every organism size on LUCA: the entity network (one token
per gene and signal) trained at N=20 only, evaluated at N=20, 40 and 80
beside causal-sweep.

    .venv/bin/python benchmarks/entity_attention.py [--steps 786432] [--num-envs 256] [--n-genes 20,40,80]
        [--tier medium] [--mode healthy] [--out results/entity_attention]
    .venv/bin/python benchmarks/entity_attention.py --clone --mode disease [--train-n 20] [--n-genes 20,40,80,160]

Trains the JAX PPO with ``network="entity"`` (:mod:`luca_gym.agents.entity_attention`)
on ``--tier`` ``--mode`` organisms of N=``--train-n`` (training seeds 10000
up). With ``--clone`` it trains by behaviour cloning instead
(:func:`luca_gym.agents.bc.clone`): the teacher is causal-sweep-flat at the
world's default budget (:mod:`luca_gym.worlds.luca.baselines.sweep_flat`,
N-agnostic itself), the codec has ``rescue_features`` (each single's restored
fraction in its own gene's token, and the budget units left, so "keep the
rescue's unit" reads the same at every N), and the teacher plays
``--clone-envs`` x N=20 / N envs (at least 64) for twice a session's length.
It writes the run folder ``--out``, then plays the one checkpoint, greedy, through the
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

from luca_gym.agents import bc, ppo
from luca_gym.cli import main as cli
from luca_gym.worlds.luca.baselines.sweep_flat import flat_policy
from luca_gym.worlds.luca.spec import N_TASKS


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
    parser.add_argument("--out", default=os.path.join("results", "entity_attention"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-n", type=int, default=20, help="the organism size trained at")
    parser.add_argument("--clone", action="store_true", help="behaviour cloning of causal-sweep-flat instead of PPO")
    parser.add_argument("--clone-envs", type=int, default=512, help="the teacher's envs at N=20 (scaled by 20 / N)")
    parser.add_argument("--clone-epochs", type=int, default=15)
    args = parser.parse_args()

    config = ppo.PPOConfig("luca", tier=args.tier, n_genes=args.train_n, mode=args.mode, network="entity", steps=args.steps,
                           num_envs=args.num_envs, num_steps=args.num_steps, minibatches=args.minibatches,
                           token_width=args.token_width, attention_layers=args.attention_layers,
                           attention_heads=args.attention_heads, pool_size=args.pool_size, seed=args.seed,
                           rescue_features=args.clone)
    if args.clone:
        train_by_cloning(config, args)
    else:
        train_by_ppo(config, args)
    evaluate(args)


def train_by_cloning(config: ppo.PPOConfig, args) -> None:
    """Fit the network to causal-sweep-flat's actions and write the run folder."""
    env = config.make_env()
    envs = max(64, args.clone_envs * 20 // args.train_n)
    steps = 2 * (env.params.budget + 2 * N_TASKS + 4)  # two sessions' bound each
    print(f"cloning causal-sweep-flat at N={args.train_n} {args.tier} {args.mode} into the entity network: "
          f"{envs} envs x {steps} steps, {args.clone_epochs} epochs", flush=True)

    def progress(row):
        print(f"  epoch {row['epoch']}  cross-entropy {row['cross_entropy']:.3f}  accuracy {row['accuracy']:.3f}  "
              f"{row['wall_s']:.0f} s", flush=True)

    cloned = bc.clone(config, flat_policy(env.params), envs=envs, steps=steps, epochs=args.clone_epochs,
                      minibatch=512, progress=progress)
    print(f"cloned: {cloned['samples']:,} samples in {cloned['wall_s']:.0f} s; the teacher scored "
          f"{cloned['teacher_score']:.3f} on the training pool", flush=True)
    ppo.save(args.out, config, cloned["network"], {"algo": "ppo", "trained_by": "behaviour cloning of causal-sweep-flat",
                                                    "samples": cloned["samples"], "wall_s": cloned["wall_s"]})


def train_by_ppo(config: ppo.PPOConfig, args) -> None:
    """Train the network with PPO and write the run folder."""
    print(f"training the entity network at N={args.train_n} {args.tier} {args.mode}: {ppo.plan(config)}", flush=True)

    def progress(row):
        print(f"  update {row['update']}/{row['updates']}  {row['env_steps']:,} steps  {row['wall_s']:.0f} s  "
              f"training composite {row['mean_score']:.3f}  entropy {row['entropy']:.2f}", flush=True)

    summary = ppo.train(config, args.out, progress=progress)
    print(f"trained: {summary['env_steps']:,} steps in {summary['wall_s']:.0f} s "
          f"({summary['steps_per_s'] or 0:.0f} steps/s after the first update)", flush=True)


def evaluate(args) -> None:
    """Play the checkpoint and the baselines through the harness at every size; print the table."""
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
    print(f"\nmean composite, {args.tier} {args.mode}, seeds {args.seeds} (policy trained at N={args.train_n} only)")
    print(f"{'agent':<40}" + "".join(f"{f'N={n}':>10}" for n in sizes))
    for agent in dict.fromkeys(a for a, _ in scores):
        cells = [f"{np.mean(scores[agent, n]):>10.3f}" if scores[agent, n] else f"{'-':>10}" for n in sizes]
        print(f"{agent:<40}" + "".join(cells))


if __name__ == "__main__":
    main()
