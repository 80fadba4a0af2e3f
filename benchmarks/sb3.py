"""SB3 on the flat action space: environment steps per second and a short
Maskable PPO run, side by side in one run.

    .venv/bin/python benchmarks/sb3.py [--tier easy] [--mode healthy] [--steps 64] [--train-steps 800000] [--num-envs 256]

Prints, at N=20:
  * ``LucaSB3VecEnv`` (one jit(vmap(flat.step)) per step, same-step autoreset
    on organisms from its pool) at 64 and 1024 envs, and at 64 envs on fresh
    organisms generating only the finished sub-envs' on each step
    (``organisms="fresh", generation_batch=1``),
    against SB3's ``DummyVecEnv`` of 64 ``LucaFlat-v0`` envs. Every env takes
    the same kind of action: uniform among the legal ones, drawn from the
    masks the env returned (so each step's output feeds the next step);
  * ``MaskablePPO(LinearPathPolicy)`` steps per second on ``LucaSB3VecEnv``
    (``--num-envs``, 256 by default as ``train_maskable_ppo``) with torch on
    one thread (as ``train_maskable_ppo`` runs it) and on torch's default;
  * a ``train_maskable_ppo`` run (``--num-envs``, on its pool of training
    organisms): steps per second and the learning curve;
  * the trained policy on the evaluation seeds 0-19 through the harness
    (``luca_gym.harness.run_session`` over ``load_policy``, its most likely
    action and a sample from its masked distribution), beside the
    harness's ``random`` baseline, a uniform masked-random flat policy with
    the same analyst, and ``causal-sweep``.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
import time

import gymnasium as gym
import jax
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import DummyVecEnv

import luca_gym  # noqa: F401  (registers luca_gym/LucaFlat-v0)
from luca_gym import functional, harness
from luca_gym.agents import FlatPolicy
from luca_gym.agents.sb3 import DEFAULT_NUM_ENVS, PPO_SETTINGS, LinearPathPolicy, load_policy, train_maskable_ppo
from luca_gym.worlds.luca.baselines import make_policy
from luca_gym.worlds.luca.envs import LucaSB3VecEnv
from luca_gym.worlds.luca.evaluation import luca_spec

N = 20
EVAL_SEEDS = range(20)
TRAIN_STEPS = 800_000


def masked_random(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int64 (B,): one action per row, uniform among the True entries of
    ``masks`` bool (B, K) (the largest uniform key among the legal ones)."""
    return np.argmax(np.where(masks, rng.random(masks.shape), -1.0), axis=1)


def steps_per_second(env, steps: int, warmup: int) -> tuple[float, int]:
    """(env steps per second over ``steps`` calls after ``warmup`` calls,
    episodes finished in the timed part)."""
    rng = np.random.default_rng(0)
    env.reset()
    for _ in range(warmup):
        env.step(masked_random(get_action_masks(env), rng))
    episodes = 0
    started = time.perf_counter()
    for _ in range(steps):
        _, _, dones, _ = env.step(masked_random(get_action_masks(env), rng))
        episodes += int(dones.sum())
    return env.num_envs * steps / (time.perf_counter() - started), episodes


def ppo_steps_per_second(threads: int, tier: str, mode: str, num_envs: int) -> float:
    """MaskablePPO (rollouts and updates) steps per second on LucaSB3VecEnv
    (``num_envs`` envs, organisms from its pool) with torch on ``threads``
    threads: two updates after one warm-up update."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = MaskablePPO(LinearPathPolicy, LucaSB3VecEnv(num_envs, tier, mode, N, seed=0), device="cpu", seed=0,
                            **PPO_SETTINGS)
        rollout = num_envs * PPO_SETTINGS["n_steps"]
        model.learn(rollout)
        steps = 2 * rollout
        started = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return steps / (time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)


def evaluate(policy, tier: str, mode: str) -> float:
    """Mean composite of ``policy`` on the evaluation seeds through the harness."""
    return float(np.mean([harness.run_session(policy, luca_spec(policy.name, tier, mode, N, s))["scores"]["composite"]
                          for s in EVAL_SEEDS]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tier", default="easy")
    parser.add_argument("--mode", default="healthy")
    parser.add_argument("--steps", type=int, default=64, help="timed vector-env calls per setting")
    parser.add_argument("--train-steps", type=int, default=TRAIN_STEPS, help="env steps of the training run")
    parser.add_argument("--num-envs", type=int, default=DEFAULT_NUM_ENVS, help="envs of MaskablePPO")
    parser.add_argument("--out", default=None, help="run directory of the training (default: a temporary one)")
    args = parser.parse_args()
    tier, mode = args.tier, args.mode
    print("# luca-gym SB3 benchmark")
    print(f"jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; {tier} {mode} N={N}")

    print(f"\n## Env steps/s, masked random actions ({args.steps} timed calls after warm-up)")
    print("| env | envs | steps/s | episodes timed | vs DummyVecEnv |")
    print("|---|---|---|---|---|")
    settings = [
        ("DummyVecEnv(LucaFlat-v0)", 64,
         lambda: DummyVecEnv([lambda: gym.make("luca_gym/LucaFlat-v0", tier=tier, mode=mode, n_genes=N)] * 64)),
        ("LucaSB3VecEnv, fresh, generation_batch=1", 64,
         lambda: LucaSB3VecEnv(64, tier, mode, N, organisms="fresh", generation_batch=1, seed=0)),
        ("LucaSB3VecEnv", 64, lambda: LucaSB3VecEnv(64, tier, mode, N, seed=0)),
        ("LucaSB3VecEnv", 1024, lambda: LucaSB3VecEnv(1024, tier, mode, N, seed=0)),
    ]
    reference = None
    for name, envs, make in settings:
        # Warm-up long enough for every autoreset batch size to compile.
        rate, episodes = steps_per_second(make(), args.steps, warmup=args.steps)
        reference = reference or rate
        print(f"| {name} | {envs} | {rate:,.0f} | {episodes} | {rate / reference:.1f}x |", flush=True)

    print(f"\n## MaskablePPO steps/s on LucaSB3VecEnv ({args.num_envs} envs) by torch threads (train_maskable_ppo uses 1)")
    print("| torch threads | steps/s | vs 1 thread |")
    print("|---|---|---|")
    default_threads = torch.get_num_threads()
    one = ppo_steps_per_second(1, tier, mode, args.num_envs)
    print(f"| 1 | {one:,.0f} | 1.0x |", flush=True)
    if default_threads > 1:
        many = ppo_steps_per_second(default_threads, tier, mode, args.num_envs)
        print(f"| {default_threads} (torch's default) | {many:,.0f} | {many / one:.2f}x |", flush=True)

    print(f"\n## MaskablePPO on LucaSB3VecEnv ({args.num_envs} envs), {args.train_steps} steps")
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or scratch
        summary = train_maskable_ppo(tier, mode, N, world="luca", steps=args.train_steps, num_envs=args.num_envs, out=out, seed=0)
        with open(os.path.join(out, "learning_curve.csv")) as f:
            curve = list(csv.DictReader(f))  # the JAX PPO's columns: one row per update
        rate = "n/a (one update)" if summary["steps_per_s"] is None else f"{summary['steps_per_s']:,.0f}"
        print(f"steps/s: {rate} after the first update (setup {summary['setup_s']:.0f} s); "
              f"{summary['episodes']} episodes in {summary['wall_s']:.0f} s")
        print("| steps | wall s | mean return (episodes ended in the update) |")
        print("|---|---|---|")
        step = max(1, len(curve) // 10)
        for row in curve[::step] + (curve[-1:] if (len(curve) - 1) % step else []):
            print(f"| {row['env_steps']} | {float(row['wall_s']):.0f} | {float(row['mean_return']):.3f} |")

        print(f"\n## Mean composite on seeds 0-19 ({tier} {mode} N={N}, the harness)")
        uniform = FlatPolicy("masked-random", lambda vector, mask, rng: int(rng.choice(np.flatnonzero(mask))),
                             functional.make_env(tier, N, mode, world="luca"))
        agents = {"random (harness baseline)": make_policy("random"), "masked-random flat": uniform,
                  "MaskablePPO, most likely action": load_policy(out),
                  "MaskablePPO, sampled (per-session RNG)": load_policy(out, deterministic=False),
                  "causal-sweep": make_policy("causal-sweep")}
        scores = {label: evaluate(policy, tier, mode) for label, policy in agents.items()}
        print("| agent | composite | minus random |")
        print("|---|---|---|")
        for label, score in scores.items():
            print(f"| {label} | {score:.3f} | {score - scores['random (harness baseline)']:+.3f} |")

if __name__ == "__main__":
    main()
