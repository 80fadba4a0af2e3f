"""Batched rollouts: environment steps per second, side by side in one run.

    .venv/bin/python benchmarks/rollout.py [--max-envs 16384] [--steps 32]

Prints, at N=20 (medium, healthy):
  * the pure rollout (`luca_gym.envs.rollout`, one jitted lax.scan) for 1, 64,
    1024, 4096 and 16384 parallel organisms, with a policy that runs an
    experiment (a solve) on every step until the budget is spent;
  * `LucaVectorEnv.step` (numpy at the boundary) at the same sizes;
  * Gymnasium's `SyncVectorEnv` of `LucaEnv`s at the sizes it reaches in
    reasonable time, and the ratios;
  * the compile time, and the session state size per organism at N=20, 320, 1280;
  * what host-side organism generation costs per autoreset.
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import core
from luca_gym.envs import LucaEnv, LucaVectorEnv, rollout
from luca_gym.envs.vector import organism_batch

TIER, MODE, N = "medium", "healthy", 20


def sweep_policy(params):
    """Experiments on every step (BLOCK, gene = step mod N), END when the budget is spent."""

    def act(key, obs):
        b = obs["budget_left"].shape[0]
        gene = jax.random.randint(key, (b,), 0, params.n_genes)
        kind = jnp.where(obs["budget_left"] > 0, core.EXPERIMENT, core.END)
        return core.Action(
            kind=kind.astype(jnp.int32),
            gene_codes=jax.nn.one_hot(gene, params.n_genes, dtype=jnp.int32),
            signal_flags=jnp.zeros((b, params.n_signals), bool),
            prediction=jnp.full((b, 3), 0.5, jnp.float32),
            diagnosis_target=jnp.zeros(b, jnp.int32),
            diagnosis_type=jnp.zeros(b, jnp.int32),
            network=jnp.zeros((b, params.n_genes, 3), jnp.int32),
        )

    return act


def tiled_batch(num_envs: int, distinct: int = 64):
    organisms, keys = organism_batch(range(distinct), TIER, N, MODE)
    index = np.arange(num_envs) % distinct
    return jax.tree_util.tree_map(lambda x: x[index], organisms), keys[index]


def time_it(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-envs", type=int, default=16384)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--sync-max", type=int, default=64)
    args = parser.parse_args()
    params = core.make_params(TIER, N, MODE)
    policy = sweep_policy(params)
    key = jax.random.PRNGKey(0)
    print("# luca-gym rollout benchmark")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {len(jax.devices())}, cpus {os.cpu_count()}")
    sizes = [s for s in (1, 64, 1024, 4096, 16384, 65536) if s <= args.max_envs]

    print(f"\n## Pure rollout (jit lax.scan), N={N}, {args.steps} steps, experiment on every step")
    print("| envs | steps/s | compile s |")
    print("|---|---|---|")
    rates = {}
    for b in sizes:
        organisms, keys = tiled_batch(b)
        t0 = time.perf_counter()
        jax.block_until_ready(rollout(policy, key, organisms, keys, params, args.steps))
        compile_s = time.perf_counter() - t0
        dt = time_it(lambda: jax.block_until_ready(rollout(policy, key, organisms, keys, params, args.steps)))
        rates[b] = b * args.steps / dt
        print(f"| {b} | {rates[b]:,.0f} | {compile_s:.1f} |", flush=True)

    print(f"\n## LucaVectorEnv.step (numpy boundary), N={N}")
    print("| envs | steps/s |")
    print("|---|---|")
    vec_rates = {}
    for b in [s for s in sizes if s <= 4096]:
        env = LucaVectorEnv(b, TIER, MODE, N)
        env.reset(options={"organism_seeds": np.arange(b) % 64})
        actions = {"kind": np.zeros(b, np.int64), "gene_codes": np.eye(N, dtype=np.int64)[np.arange(b) % N]}
        env.step(actions)
        steps = 8

        def run():
            for _ in range(steps):
                env.step(actions)

        vec_rates[b] = b * steps / time_it(run, 2)
        print(f"| {b} | {vec_rates[b]:,.0f} |", flush=True)

    print("\n## Gymnasium SyncVectorEnv of LucaEnv")
    print("| envs | steps/s | rollout / sync |")
    print("|---|---|---|")
    for b in [s for s in (1, 64, 256) if s <= args.sync_max]:
        sync = gym.vector.SyncVectorEnv([lambda: LucaEnv(TIER, MODE, N) for _ in range(b)])
        sync.reset(seed=0, options={"organism_seed": 0})
        actions = {
            "kind": np.zeros(b, np.int64),
            "gene_codes": np.eye(N, dtype=np.int64)[np.arange(b) % N],
            "signal_flags": np.zeros((b, params.n_signals), np.int8),
            "prediction": np.full((b, 3), 0.5, np.float32),
            "diagnosis_target": np.zeros(b, np.int64),
            "diagnosis_type": np.zeros(b, np.int64),
            "network": np.zeros((b, N, 3), np.int8),
        }
        sync.step(actions)
        steps = 8

        def run():
            for _ in range(steps):
                sync.step(actions)

        rate = b * steps / time_it(run, 2)
        ratio = rates.get(b, float("nan")) / rate
        print(f"| {b} | {rate:,.0f} | {ratio:,.0f}x |", flush=True)
    print("(a SyncVectorEnv step costs the sum of its LucaEnv steps, so its rate is flat in the env count;"
          " compare the pure rollout at 4096 with the 64-env SyncVectorEnv rate)")

    print("\n## Session state per organism (EnvState bytes, organism included)")
    for n in (20, 320, 1280):
        p = core.make_params(TIER, n, MODE)
        organisms, keys = organism_batch([0], TIER, n, MODE)
        _, state = jax.vmap(core.reset, in_axes=(0, 0, None))(keys, organisms, p)
        nbytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(state))
        print(f"N={n}: {nbytes / 1024:,.1f} KiB")

    print("\n## Host-side generation per autoreset (numpy, not traced)")
    from luca_gym import world

    t = time.perf_counter()
    for s in range(1000, 1032):
        world.make_organism(s, TIER, N, MODE)
    per = (time.perf_counter() - t) / 32
    print(f"make_organism at N={N}: {per * 1e3:.1f} ms per organism; an autoreset of k envs costs k x that on the host")


if __name__ == "__main__":
    main()
