"""Where experiment selection matters: disease organisms with a tight budget.

    .venv/bin/python benchmarks/tight_budget.py [--budget 8] [--steps 20000000] [--num-envs 4096] [--fine-tune-steps 1048576]

For medium and hard disease at N=20 with ``--budget`` experiment units, trains
the JAX PPO on the flat space (training organisms: seeds 10000-11023), then
compares, at the same budget and with the same analyst (logit-additive), on
organisms drawn from the evaluation seeds 0-19 (never trained on):

  (a) random legal flat actions (the masked random policy);
  (b) causal-sweep's order cut to the budget: the open task's singles, then
      the tasks, then a sweep (signals, BLOCK, BOOST) keeping one unit for the
      rescue, the analyst's diagnosis, a rescue with the measured single that
      restored most aberrant phenotypes, the network, end: the harness agent
      ``causal-sweep-flat`` (:mod:`luca_gym.worlds.luca.baselines.sweep_flat`,
      whose policy this imports; ``luca-gym eval --agents causal-sweep-flat
      --budget 8`` plays it on the host session);
  (c) the trained PPO, greedy;
  (d) a warm start: behaviour cloning of (b)'s actions
      (:func:`luca_gym.agents.bc.clone`, 2048 envs x 64 steps of (b) on the
      training pool, 30 epochs), then PPO fine-tuning (``--fine-tune-steps``,
      learning rate 3e-4, entropy 0.01), greedy; its codec has the opt-in
      ``rescue_features`` (each measured single's restored fraction and
      nearness to 0.5: the form in which (b)'s rescue rule is one weight per
      action; without them the clone reached 0.45 medium against (b)'s 0.57).

Each figure is the mean composite over the sessions that ended in a rollout of
``--eval-envs`` envs drawing organisms from the 20 evaluation seeds.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from luca_gym import functional as F
from luca_gym.worlds.luca import functional as luca_functional
from luca_gym.agents import bc
from luca_gym.agents.ppo import PPOConfig, greedy_policy, train
from luca_gym.worlds.luca.baselines.sweep_flat import flat_policy
from luca_gym.worlds.luca.spec import N_TASKS


def _cpu_generated(organism_batch):
    """Organisms generated on the CPU backend (bitwise the published ones),
    then placed on the default device: on a GPU, generation can still fail to
    meet the guarantees where the CPU meets them."""

    def generate(*args, **kwargs):
        with jax.default_device(jax.devices("cpu")[0]):
            batch = organism_batch(*args, **kwargs)
        return jax.device_put(jax.device_get(batch))

    return generate


def main() -> None:
    luca_functional.organism_batch = _cpu_generated(luca_functional.organism_batch)
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20_000_000)
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--eval-envs", type=int, default=2000)
    parser.add_argument("--tiers", default="medium,hard")
    parser.add_argument("--fine-tune-steps", type=int, default=1_048_576)
    args = parser.parse_args()
    print("# luca-gym tight-budget benchmark")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, cpus {os.cpu_count()}")
    print(f"\n## Disease, N=20, budget {args.budget}; PPO trained {args.steps:,} steps on seeds 10000-11023; "
          f"evaluated on seeds 0-19 ({args.eval_envs} envs, one session each)")
    print("| tier | (a) random legal | (b) causal-sweep order, cut | (c) PPO | (d) BC of (b) + PPO | (c) - max(a, b) "
          "| (d) - (b) | train s (c) | train s (d) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tier in args.tiers.split(","):
        config = PPOConfig("luca", tier=tier, mode="disease", budget=args.budget, steps=args.steps, num_envs=args.num_envs)
        t0 = time.perf_counter()
        summary = train(config)
        train_s = time.perf_counter() - t0
        env = config.make_env()
        pool = F.make_pool(env, np.arange(20))
        steps = args.budget + 2 * N_TASKS + 4  # one session each: the bound of a flat session
        key = jax.random.PRNGKey(7)
        scores = []
        for policy, weights in ((F.masked_random, None), (flat_policy(env.params), None), (greedy_policy, summary["network"])):
            out = F.flat_rollout(policy, weights, key, env, pool, args.eval_envs, steps)
            scores.append(float(out["mean_composite"]))
        warm = PPOConfig("luca", tier=tier, mode="disease", budget=args.budget, rescue_features=True, steps=args.fine_tune_steps,
                         num_envs=1024, learning_rate=3e-4, ent_coef=0.01)
        warm_env = warm.make_env()
        t0 = time.perf_counter()
        cloned = bc.clone(warm, flat_policy(warm_env.params), epochs=30)
        tuned = train(warm, network=cloned["network"])
        warm_s = time.perf_counter() - t0
        out = F.flat_rollout(greedy_policy, tuned["network"], key, warm_env, F.make_pool(warm_env, np.arange(20)),
                             args.eval_envs, steps)
        d = float(out["mean_composite"])
        a, b, c = scores
        print(f"| {tier} | {a:.3f} | {b:.3f} | {c:.3f} | {d:.3f} | {c - max(a, b):+.3f} | {d - b:+.3f} | {train_s:.0f} "
              f"| {warm_s:.0f} |", flush=True)


if __name__ == "__main__":
    main()
