"""PPO training throughput and time to target, side by side in one run.

    .venv/bin/python benchmarks/ppo.py [--envs 1024,4096] [--target-steps 5000000]

Prints, for easy healthy N=20 (the flat env, logit-additive analyst):
  * training env steps/s at each number of parallel envs (after the first
    update, whose compile is reported apart): every update collects
    num_envs x 32 steps of the policy acting on its observations and trains
    on them, so the measured work is the learning itself;
  * with --target-steps, one full run at 1024 envs: the wall time and env
    steps at which the training curve's mean composite first reaches 0.95,
    and the final value.
"""

from __future__ import annotations

import argparse
import os
import time

import jax

from luca_gym.agents.ppo import PPOConfig, train


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", default="1024,4096")
    parser.add_argument("--updates", type=int, default=6, help="updates per throughput measurement")
    parser.add_argument("--target-steps", type=int, default=0, help="run to this many steps at 1024 envs and time 0.95")
    args = parser.parse_args()
    print("# luca-gym PPO benchmark")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {len(jax.devices())}, cpus {os.cpu_count()}")
    print("\n## Training throughput, easy healthy N=20 (32 steps per env per update, 4 epochs x 8 minibatches)")
    print("| envs | env steps/s | first update (compile + run) s |")
    print("|---|---|---|")
    for num_envs in [int(x) for x in args.envs.split(",")]:
        config = PPOConfig("luca", num_envs=num_envs, steps=num_envs * 32 * args.updates)
        summary = train(config)
        print(f"| {num_envs} | {summary['steps_per_s']:,.0f} | {summary['setup_s']:.1f} |", flush=True)
    if args.target_steps:
        rows = []
        started = time.perf_counter()
        summary = train(PPOConfig("luca", num_envs=1024, steps=args.target_steps), progress=rows.append)
        hit = next((r for r in rows if r["mean_composite"] >= 0.95), None)
        print(f"\n## Time to 0.95 (training curve, 1024 envs, {args.target_steps:,} steps)")
        if hit:
            print(f"0.95 reached at {hit['wall_s']:.0f} s, {hit['env_steps']:,} env steps (update {hit['update']})")
        else:
            print("0.95 not reached")
        print(f"final mean composite {summary['final_composite']:.3f} after {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
