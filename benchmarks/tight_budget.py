"""Where experiment selection matters: disease organisms with a tight budget.

    .venv/bin/python benchmarks/tight_budget.py [--budget 8] [--steps 20000000] [--num-envs 4096]

For medium and hard disease at N=20 with ``--budget`` experiment units, trains
the JAX PPO on the flat space (training organisms: seeds 10000-11023), then
compares, at the same budget and with the same analyst (logit-additive), on
organisms drawn from the evaluation seeds 0-19 (never trained on):

  (a) random legal flat actions (the masked random policy);
  (b) causal-sweep's order cut to the budget: the open task's singles, then
      the tasks, then a sweep (signals, BLOCK, BOOST) keeping one unit for the
      rescue, the analyst's diagnosis, a rescue with the measured single that
      restored most aberrant phenotypes, the network, end;
  (c) the trained PPO, greedy.

Each figure is the mean composite over the sessions that ended in a rollout of
``--eval-envs`` envs drawing organisms from the 20 evaluation seeds.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import functional as F
from luca_gym.worlds.luca import functional as luca_functional
from luca_gym.agents.ppo import PPOConfig, greedy_policy, train
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.core.types import ERRORS
from luca_gym.worlds.luca.spec import DAMPEN, HEALTHY_HIGH, HEALTHY_LOW, N_PHENOTYPES, N_TASKS


def sweep_order_policy(env: F.FlatEnv):
    """Causal-sweep's order over the flat space, read from the observation vector."""
    params = env.params
    n, s, p = params.n_genes, params.n_signals, N_PHENOTYPES
    lay = flat.layout(params)
    e = lay.targets
    sizes = [("budget", 1), ("base", p), ("aberrant", p), ("targetable", n), ("last", p), ("in_range", p), ("scalars", 3),
             ("error", len(ERRORS)), ("singles", n * DAMPEN * p), ("single_mask", n * DAMPEN), ("signals", s * p),
             ("signal_mask", s), ("task_genes", 2 * n), ("task_codes", 4), ("task_targets", e)]
    offset, at = 0, {}
    for name, size in sizes:
        at[name] = (offset, offset + size)
        offset += size
    get = lambda v, name: v[..., at[name][0]:at[name][1]]  # noqa: E731
    reserve = params.rescue_cost if params.disease else 0
    # sweep order over experiment indices: signals (disease), then BLOCK, then BOOST
    order = jnp.asarray(np.concatenate([np.arange(3 * n, 3 * n + s) if params.disease else np.zeros(0, int), np.arange(2 * n)]))

    def act(policy_params, key, obs, mask):
        def one(v, m):
            budget_left = jnp.round(v[0] * params.budget)
            need = (get(v, "task_targets") > 0) & m[:e]
            measured = jnp.concatenate([get(v, "single_mask").reshape(n, DAMPEN).T.reshape(-1), get(v, "signal_mask")]) > 0
            todo = m[order] & ~measured[order] & (budget_left - params.experiment_cost >= reserve)
            base = get(v, "base")
            phen = jnp.concatenate([get(v, "singles").reshape(n, DAMPEN, p).transpose(1, 0, 2).reshape(-1, p),
                                    get(v, "signals").reshape(s, p)]) + base  # (E, P), in experiment-index order
            aberrant = get(v, "aberrant") > 0
            count = jnp.sum((phen >= HEALTHY_LOW) & (phen <= HEALTHY_HIGH) & aberrant, axis=1)
            close = -jnp.sum(jnp.abs(phen - 0.5) * aberrant, axis=1)
            score = jnp.where(measured, count * 10.0 + close, -jnp.inf)
            rescue = lay.rescue + jnp.argmax(score)
            rescued = budget_left < params.budget - jnp.sum(measured) * params.experiment_cost
            choices = [
                (need.any(), jnp.argmax(need)),
                (m[lay.predict], lay.predict),
                (m[lay.reveal], lay.reveal),
                (todo.any(), order[jnp.argmax(todo)]),
                (m[lay.analyst_diagnosis], lay.analyst_diagnosis),
                (m[rescue] & ~rescued & jnp.isfinite(score).any(), rescue),
                (m[lay.network], lay.network),
            ]
            return jnp.select([c for c, _ in choices], [jnp.asarray(i) for _, i in choices], lay.end).astype(jnp.int32)

        return jax.vmap(one)(obs, mask)

    return act


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
    args = parser.parse_args()
    print("# luca-gym tight-budget benchmark")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, cpus {os.cpu_count()}")
    print(f"\n## Disease, N=20, budget {args.budget}; PPO trained {args.steps:,} steps on seeds 10000-11023; "
          f"evaluated on seeds 0-19 ({args.eval_envs} envs, one session each)")
    print("| tier | (a) random legal | (b) causal-sweep order, cut | (c) PPO | (c) - max(a, b) | train s |")
    print("|---|---|---|---|---|---|")
    for tier in args.tiers.split(","):
        config = PPOConfig(tier=tier, mode="disease", budget=args.budget, steps=args.steps, num_envs=args.num_envs)
        t0 = time.perf_counter()
        summary = train(config)
        train_s = time.perf_counter() - t0
        env = config.make_env()
        pool = F.make_pool(env, np.arange(20))
        steps = args.budget + 2 * N_TASKS + 4  # one session each: the bound of a flat session
        key = jax.random.PRNGKey(7)
        scores = []
        for policy, weights in ((F.masked_random, None), (sweep_order_policy(env), None), (greedy_policy, summary["network"])):
            out = F.flat_rollout(policy, weights, key, env, pool, args.eval_envs, steps)
            scores.append(float(out["mean_composite"]))
        a, b, c = scores
        print(f"| {tier} | {a:.3f} | {b:.3f} | {c:.3f} | {c - max(a, b):+.3f} | {train_s:.0f} |", flush=True)


if __name__ == "__main__":
    main()
