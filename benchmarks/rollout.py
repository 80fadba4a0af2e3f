"""Batched rollouts: environment steps per second, side by side in one run.

    .venv/bin/python benchmarks/rollout.py [--max-envs 16384] [--gen-max 4096] [--make-vec-only]

Prints, at N=20 (medium, healthy):
  * the pure rollout (`luca_gym.worlds.luca.functional.rollout`, one jitted lax.scan) for 1, 64,
    1024, 4096 and 16384 parallel organisms, with a policy that READS its
    observations: it runs an experiment (a solve) on every step until the
    budget is spent, choosing each gene from the phenotypes it just measured,
    then reveals the tasks and predicts the last measured phenotypes, so every
    solve feeds the composite the rollout returns. The compiled program is
    checked for the solver (its sigmoid); a policy that never reads an
    observation lets XLA delete the solver, and its figure is printed beside
    the honest one to show the size of that artifact;
  * `LucaVectorEnv.step` (numpy at the boundary) at the same sizes;
  * Gymnasium's `SyncVectorEnv` of `LucaEnv`s at the sizes it reaches in
    reasonable time, and the ratios;
  * the compile time, and the session state size per organism at N=20, 320, 1280;
  * batched organism generation (world.generate) against one organism at a
    time, per tier and mode, and LucaVectorEnv with a fresh organism every
    episode (autoreset generation included);
  * `gym.make_vec("luca_gym/Luca-v0", num_envs=1024)` stepped with random
    dict actions (`action_space.sample()`, which ends many episodes every
    step): the default organism pool against `organisms="fresh"`, with the
    actions sampled on the host each step (timed) and pre-sampled; and the
    pool's start-up, generated and stored (a first run) against read back (every
    later run). `--make-vec-only` prints this part alone.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import functional as luca_functional
from luca_gym.worlds.luca import core, pools
from luca_gym.worlds.luca.envs import LucaEnv, LucaVectorEnv
from luca_gym.worlds.luca.functional import organism_batch, rollout

TIER, MODE, N = "medium", "healthy", 20


def blind_policy(params):
    """Experiments until the budget is spent, then END, never reading a
    measurement: nothing the rollout returns depends on a solve, so XLA
    deletes the solver. Kept only to show that artifact."""

    def act(key, obs):
        b = obs["budget_left"].shape[0]
        gene = jax.random.randint(key, (b,), 0, params.n_genes)
        kind = jnp.where(obs["budget_left"] > 0, core.EXPERIMENT, core.END)
        return _action(params, kind, gene, jnp.full((b, 3), 0.5, jnp.float32))

    return act


def reading_policy(params):
    """Experiments on genes chosen from the phenotypes just measured, then the
    tasks answered with the last measurement: every solve feeds the output."""

    def act(key, obs):
        b = obs["budget_left"].shape[0]
        salt = jnp.floor(obs["last_phenotypes"].sum(axis=1) * 1e4).astype(jnp.int32)
        gene = (jax.random.randint(key, (b,), 0, params.n_genes) + salt) % params.n_genes
        mask = obs["action_mask"]
        kind = jnp.select(
            [obs["budget_left"] > 0, mask[:, core.REVEAL_TASK], mask[:, core.SUBMIT_PREDICTION]],
            [core.EXPERIMENT, core.REVEAL_TASK, core.SUBMIT_PREDICTION],
            core.END,
        )
        return _action(params, kind, gene, obs["last_phenotypes"].astype(jnp.float32))

    return act


def _action(params, kind, gene, prediction):
    b = kind.shape[0]
    return core.Action(
        kind=kind.astype(jnp.int32),
        gene_codes=jax.nn.one_hot(gene, params.n_genes, dtype=jnp.int32),
        signal_flags=jnp.zeros((b, params.n_signals), bool),
        prediction=prediction,
        diagnosis_target=jnp.zeros(b, jnp.int32),
        diagnosis_type=jnp.zeros(b, jnp.int32),
        network=jnp.zeros((b, params.n_genes, 3), jnp.int32),
    )


def solver_compiled(policy, organisms, keys, params, steps) -> bool:
    """Whether the compiled rollout still evaluates the dynamics (the sigmoid
    is an exponential in the compiled program; nothing else in a session is)."""
    compiled = luca_functional._rollout.lower(policy, jax.random.PRNGKey(0), organisms, keys, params, steps).compile()
    return " exponential(" in compiled.as_text()


def tiled_batch(num_envs: int, distinct: int = 64, tier: str = TIER, n: int = N, mode: str = MODE):
    """``num_envs`` sessions over ``distinct`` organisms. The organisms are
    generated on the CPU backend (bitwise the published ones) and then placed
    on the default device: the rollout is what is measured here."""
    with jax.default_device(jax.devices("cpu")[0]):
        organisms, keys = organism_batch(range(distinct), tier, n, mode)
    index = np.arange(num_envs) % distinct
    return jax.device_put(jax.tree_util.tree_map(lambda x: np.asarray(x)[index], (organisms, keys)))


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
    parser.add_argument("--sync-max", type=int, default=64)
    parser.add_argument("--gen-max", type=int, default=4096, help="largest generation batch")
    parser.add_argument("--fresh-envs", type=int, default=1024, help="envs in the fresh-organism run")
    parser.add_argument("--vec-envs", type=int, default=1024, help="envs in the make_vec random-action run")
    parser.add_argument("--vec-steps", type=int, default=100, help="timed steps per make_vec pool run (fresh: a tenth)")
    parser.add_argument("--make-vec-only", action="store_true", help="only the make_vec random-action figures")
    args = parser.parse_args()
    if args.make_vec_only:
        print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {len(jax.devices())}, cpus {os.cpu_count()}")
        make_vec_random(args)
        return
    params = core.make_params(TIER, N, MODE)
    steps = params.budget + 5  # the budget's experiments, two reveals, two predictions, end
    key = jax.random.PRNGKey(0)
    print("# luca-gym rollout benchmark")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {len(jax.devices())}, cpus {os.cpu_count()}")
    sizes = [s for s in (1, 64, 1024, 4096, 16384, 65536) if s <= args.max_envs]

    print(f"\n## Pure rollout (jit lax.scan), N={N}, {steps} steps: {params.budget} experiments, the tasks, end")
    print("| envs | steps/s, reading policy | solver compiled | mean composite | steps/s, blind policy | solver compiled | compile s |")
    print("|---|---|---|---|---|---|---|")
    rates = {}
    for b in sizes:
        organisms, keys = tiled_batch(b)
        row = []
        for policy in (reading_policy(params), blind_policy(params)):
            t0 = time.perf_counter()
            jax.block_until_ready(rollout(policy, key, organisms, keys, params, steps))
            compile_s = time.perf_counter() - t0
            dt = time_it(lambda: jax.block_until_ready(rollout(policy, key, organisms, keys, params, steps)))
            _, composite, ended = rollout(policy, key, organisms, keys, params, steps)
            assert bool(np.all(np.asarray(ended))), "every session must end within the steps"
            row.append((b * steps / dt, solver_compiled(policy, organisms, keys, params, steps), float(np.mean(composite)), compile_s))
        rates[b] = row[0][0]
        (honest, solved, composite, compile_s), (blind, blind_solved, _, _) = row
        print(f"| {b} | {honest:,.0f} | {'yes' if solved else 'NO'} | {composite:.3f} | {blind:,.0f} | "
              f"{'yes' if blind_solved else 'no: deleted by XLA'} | {compile_s:.1f} |", flush=True)

    print(f"\n## LucaVectorEnv.step (numpy boundary), N={N}")
    print("| envs | steps/s |")
    print("|---|---|")
    vec_rates = {}
    for b in [s for s in sizes if s <= 4096]:
        env = LucaVectorEnv(b, TIER, MODE, N)
        try:
            env.reset(options={"organism_seeds": np.arange(b) % 64})
        except RuntimeError as error:  # generation on this backend met no guarantee for a seed
            print(f"| {b} | failed: {error} |", flush=True)
            continue
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
        with jax.default_device(jax.devices("cpu")[0]):
            organisms, keys = organism_batch([0], TIER, n, MODE)
        _, state = jax.vmap(core.reset, in_axes=(0, 0, None))(keys, organisms, p)
        nbytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(state))
        print(f"N={n}: {nbytes / 1024:,.1f} KiB")

    generation(args)
    try:
        fresh_episodes(args)
    except RuntimeError as error:  # generation on this backend met no guarantee for a drawn seed
        print(f"\n## LucaVectorEnv with a fresh organism every episode: failed: {error}")
    make_vec_random(args)


def generation(args) -> None:
    """Batched generation (world.generate, one jitted call per attempt) against
    generating the same organisms one at a time, side by side."""
    from luca_gym.worlds.luca import generator as world

    print(f"\n## Organism generation (pure JAX, batched), N={N}, group {world.map_batch()} organism(s) per vmap")
    print("| tier, mode | organisms | batched organisms/s | one at a time organisms/s | ratio | first call s |")
    print("|---|---|---|---|---|---|")
    base = 10_000
    for tier, mode in (("easy", "healthy"), ("medium", "healthy"), ("hard", "healthy"), ("medium", "disease"), ("hard", "disease")):
        t0 = time.perf_counter()
        world.generate(np.arange(base, base + 16), tier, N, mode)  # compiles (or loads) this shape
        world.make_organism(base, tier, N, mode)
        first = time.perf_counter() - t0
        base += 16
        one = 32
        t0 = time.perf_counter()
        for s in range(base, base + one):
            world.make_organism(s, tier, N, mode)
        single = one / (time.perf_counter() - t0)
        base += one
        for b in [s for s in (256, 4096, 16384) if s <= args.gen_max]:
            t0 = time.perf_counter()
            try:
                jax.block_until_ready(world.generate(np.arange(base, base + b), tier, N, mode))
            except RuntimeError as error:  # an organism that met no guarantee in MAX_ATTEMPTS attempts
                print(f"| {tier}, {mode} | {b} | failed: {error} | | | |", flush=True)
                base += b
                continue
            rate = b / (time.perf_counter() - t0)
            base += b
            print(f"| {tier}, {mode} | {b} | {rate:,.0f} | {single:,.0f} | {rate / single:.1f}x | {first:.1f} |", flush=True)


def fresh_episodes(args) -> None:
    """LucaVectorEnv with a new organism every episode: a policy that runs one
    experiment per step until the budget is spent, then ends the session; each
    autoreset generates the finished sub-envs' organisms."""
    b = min(args.fresh_envs, args.max_envs)
    env = LucaVectorEnv(b, TIER, MODE, N, organisms="fresh")
    params = env.params
    obs, _ = env.reset(seed=1)
    experiment = np.eye(N, dtype=np.int64)[np.arange(b) % N]

    def act(obs):
        return {"kind": np.where(obs["budget_left"] > 0, core.EXPERIMENT, core.END), "gene_codes": experiment}

    # one episode to compile everything, then time two more
    for _ in range(params.budget + 2):
        obs, *_ = env.step(act(obs))
    steps, ended = 2 * (params.budget + 2), 0
    t0 = time.perf_counter()
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(act(obs))
        ended += int((terminated | truncated).sum())
    dt = time.perf_counter() - t0
    print(f"\n## LucaVectorEnv with a fresh organism every episode, N={N}, {b} envs")
    print(f"{b * steps / dt:,.0f} steps/s over {steps} steps ({ended} episodes ended, each autoreset generating its organisms)")


def make_vec_random(args) -> None:
    """``gym.make_vec`` at ``--vec-envs`` stepped with ``action_space.sample()``:
    the default pool against fresh organisms, actions sampled each step (in the
    time) or beforehand; and the pool's start-up (generate + store, then read)."""
    b = args.vec_envs
    size = pools.DEFAULT_POOL_SIZE
    print(f"\n## gym.make_vec(\"luca_gym/Luca-v0\", num_envs={b}), {TIER} {MODE} N={N}, random dict actions")
    stored = pools.pool_dir
    seeds = pools.pool_seeds(size)
    with tempfile.TemporaryDirectory() as folder:
        pools.pool_dir = lambda: folder  # a first run's empty store, without touching the user's
        try:
            pools._POOLS.clear()
            t0 = time.perf_counter()
            pools.stored_organisms(seeds, TIER, N, MODE)
            generated = time.perf_counter() - t0
            pools._POOLS.clear()
            t0 = time.perf_counter()
            pools.stored_organisms(seeds, TIER, N, MODE)
            read = time.perf_counter() - t0
            pools._POOLS.clear()
            t0 = time.perf_counter()
            env = gym.make_vec("luca_gym/Luca-v0", num_envs=b, tier=TIER, mode=MODE)
            env.reset(seed=0)
            started = time.perf_counter() - t0
        finally:
            pools.pool_dir = stored
    print(f"Default pool ({size} organisms, seeds {seeds[0]}..{seeds[-1]}): generated and stored in {generated:.1f} s "
          f"(a first run), read back in {read * 1000:.0f} ms; make_vec + reset with the stored pool: {started:.2f} s")
    print("| organisms | actions | steps/s | episodes ended per step | timed steps |")
    print("|---|---|---|---|---|")
    for organisms in ("pool", "fresh"):
        env = gym.make_vec("luca_gym/Luca-v0", num_envs=b, tier=TIER, mode=MODE, organisms=organisms)
        env.reset(seed=0)
        env.action_space.seed(0)
        steps = args.vec_steps if organisms == "pool" else max(1, args.vec_steps // 10)
        for _ in range(steps // 2):  # compiles the autoreset's few padded sizes
            env.step(env.action_space.sample())
        for label in ("sampled each step", "pre-sampled"):
            actions = [env.action_space.sample() for _ in range(steps)] if label == "pre-sampled" else None
            ended = 0
            t0 = time.perf_counter()
            for i in range(steps):
                _, _, terminated, truncated, _ = env.step(env.action_space.sample() if actions is None else actions[i])
                ended += int((terminated | truncated).sum())
            rate = b * steps / (time.perf_counter() - t0)
            name = f"pool of {size}" if organisms == "pool" else "fresh"
            print(f"| {name} | {label} | {rate:,.0f} | {ended / steps:.0f} | {steps} |", flush=True)


if __name__ == "__main__":
    main()
