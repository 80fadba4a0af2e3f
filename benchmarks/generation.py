"""Organism generation per tier, side by side in one run: batched organisms/s
and each tier's rate over medium's (hard within 2x of medium).

    .venv/bin/python benchmarks/generation.py [--organisms 1024] [--n-genes 20] [--rounds 2] [--attempts 64]

For each mode, every tier generates ``--organisms`` fresh seeds with
``generate`` (one call, after a warm-up call that compiles or loads the
program), in ``--rounds`` interleaved rounds so that a load change on a
shared machine hits every tier alike; the table gives the best round. Then,
for ``--attempts`` seeds per tier and mode, where attempts end: the attempts
an accepted organism takes, and the stage each failed attempt stopped in:
settling's baseline (unconverged or unstable, in any repair round), the rest
of settling (a single intervention unconverged after MAX_STEPS updates, a
silent gene left after the repairs), or after settling (the malfunction or
the task search), from the generator's own functions.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.generator import network, organisms

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")


def rates(args) -> None:
    print(f"## Batched generation, N={args.n_genes}, {args.organisms} organisms per call, group {world.map_batch()}")
    base = 1_000_000  # fresh seeds: no organism is generated twice in a run
    for mode in MODES:
        for tier in TIERS:
            jax.block_until_ready(world.generate(np.arange(base, base + 16), tier, args.n_genes, mode))
            base += 16
    best = {}
    for _ in range(args.rounds):
        for mode in MODES:
            for tier in TIERS:
                t0 = time.perf_counter()
                jax.block_until_ready(world.generate(np.arange(base, base + args.organisms), tier, args.n_genes, mode))
                rate = args.organisms / (time.perf_counter() - t0)
                best[tier, mode] = max(best.get((tier, mode), 0.0), rate)
                base += args.organisms
    print("| mode | tier | organisms/s | medium / tier |")
    print("|---|---|---|---|")
    for mode in MODES:
        for tier in TIERS:
            print(f"| {mode} | {tier} | {best[tier, mode]:,.0f} | {best['medium', mode] / best[tier, mode]:.2f}x |")


def attempt_stats(args) -> None:
    n = args.n_genes
    print(f"\n## Attempts per accepted organism and where failed attempts stop, N={n}, seeds 0..{args.attempts - 1}")
    print("| mode | tier | attempts per organism (mean, max) | failed: baseline | failed: rest of settling | failed: after settling |")
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        p = world.plan(n, mode)
        for tier in TIERS:
            t = world.tier_params(tier, n)

            @jax.jit
            def attempt(lo, a, t=t, p=p):
                _, ok = organisms.run_attempt(jnp.uint32(0), lo, a, t, p)
                key = jax.random.fold_in(organisms.organism_key(jnp.uint32(0), lo, t.index, p.n), a)
                net = network.draw_network(jax.random.fold_in(key, 0), p, t)
                status, _, singles, _ = network.settle(p, t, net, net["weights"], jax.random.fold_in(key, 3))
                # settle leaves the singles unsolved (zero) when its baseline fails
                return ok, status, ~(singles == 0).all()

            used, where = [], Counter()
            for seed in range(args.attempts):
                for a in range(world.MAX_ATTEMPTS):
                    ok, status, base_ok = (np.asarray(x).item() for x in attempt(np.uint32(seed), np.int32(a)))
                    if ok:
                        used.append(a + 1)
                        break
                    where["after" if status == network.OK else "baseline" if not base_ok else "settle"] += 1
            print(f"| {mode} | {tier} | {np.mean(used):.2f}, {max(used)} | {where['baseline']} | {where['settle']} | {where['after']} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--organisms", type=int, default=1024)
    parser.add_argument("--n-genes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--attempts", type=int, default=64, help="seeds for the attempt statistics (0: none)")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, cpus {os.cpu_count()}")
    rates(args)
    if args.attempts:
        attempt_stats(args)


if __name__ == "__main__":
    main()
