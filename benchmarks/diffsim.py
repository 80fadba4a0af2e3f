"""Gradients of the steady state: implicit differentiation at the fixed point
(luca_gym.worlds.luca.diffsim, jax.lax.custom_root) vs backpropagating through a fixed
number of damped updates, side by side in one run.

Both compute d(sum of phenotypes . v)/d(weights) for a batch of interventions
on one organism per tier; the script reports seconds per batched gradient
(jitted, after a warm-up), and each method's error against a float64
implicit gradient (itself checked against finite differences in
tests/worlds/luca/test_diffsim.py). The gradients are summed into a printed checksum, so
nothing is dead code to XLA.

    .venv/bin/python benchmarks/diffsim.py [--batch 64] [--unrolled-steps 400] [--repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import diffsim, sim
from luca_gym.worlds.luca.generator import make_organism


def unrolled_phenotypes(arrays, codes, flags, steps):
    """Phenotypes after ``steps`` damped updates from the healthy state,
    differentiated by backpropagation through every update."""
    m, a = diffsim.clamps(codes, arrays.gene_lock)
    f = diffsim.update(arrays, m.astype(arrays.weights.dtype), a.astype(arrays.weights.dtype), flags.astype(arrays.weights.dtype))
    s = jax.lax.fori_loop(0, steps, lambda _, s: s + arrays.damping * (f(s) - s), arrays.baseline_state)
    return sim.phenotypes(arrays, s)


def make_grad(solve):
    def loss(weights, arrays, codes, flags, direction):
        arrays = dataclasses.replace(arrays, weights=weights)
        return jnp.sum(jax.vmap(lambda c, f: solve(arrays, c, f))(codes, flags) @ direction)

    return jax.jit(jax.grad(loss))


def timed(fn, args, repeats):
    jax.block_until_ready(fn(*args))
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--unrolled-steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n-genes", type=int, default=20)
    args = ap.parse_args()
    implicit = make_grad(diffsim.coded_phenotypes)
    unrolled = make_grad(lambda a, c, f: unrolled_phenotypes(a, c, f, args.unrolled_steps))
    print(f"N={args.n_genes}, batch {args.batch}, unrolled {args.unrolled_steps} damped updates; "
          "seconds per batched gradient (best of repeats), max relative error vs float64 implicit")
    print("| tier | mode | implicit (s) | unrolled (s) | unrolled / implicit | implicit error | unrolled error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    checksum = 0.0
    for tier, mode in (("easy", "healthy"), ("medium", "healthy"), ("hard", "healthy"), ("hard", "disease")):
        o = make_organism(1, tier, args.n_genes, mode)
        rng = np.random.default_rng(0)
        targetable = np.flatnonzero(~np.asarray(o.arrays.latent_mask))
        codes = np.zeros((args.batch, o.n_genes), np.int8)
        for row in codes:
            row[rng.choice(targetable, 2, replace=False)] = rng.integers(1, 4, 2)
        flags = np.zeros((args.batch, o.n_signals), bool)
        direction = jnp.asarray(rng.normal(size=3), jnp.float32)
        call = (o.arrays.weights, o.arrays, jnp.asarray(codes), jnp.asarray(flags), direction)
        t_imp, t_unr = timed(implicit, call, args.repeats), timed(unrolled, call, args.repeats)
        g_imp, g_unr = np.asarray(implicit(*call)), np.asarray(unrolled(*call))
        with jax.enable_x64(True):
            a64 = diffsim.as_dtype(o.arrays, jnp.float64)
            ref = np.asarray(make_grad(diffsim.coded_phenotypes)(a64.weights, a64, jnp.asarray(codes), jnp.asarray(flags),
                                                                 direction.astype(jnp.float64)))
        scale = np.abs(ref).max()
        e_imp, e_unr = np.abs(g_imp - ref).max() / scale, np.abs(g_unr - ref).max() / scale
        checksum += float(g_imp.sum() + g_unr.sum())
        print(f"| {tier} | {mode} | {t_imp:.4f} | {t_unr:.4f} | {t_unr / t_imp:.1f}x | {e_imp:.1e} | {e_unr:.1e} |")
    print(f"checksum {checksum:.6f}")


if __name__ == "__main__":
    main()
