"""Solver convergence on random interventions: the damped loop alone (the old
solver, ``polish=False``) vs the default solver (damped loop, then Newton where
it did not converge), side by side on the same batch.

    .venv/bin/python benchmarks/convergence.py                      # hard, N=20, seeds 0..99
    .venv/bin/python benchmarks/convergence.py --tier medium --seeds 0:50
    .venv/bin/python benchmarks/convergence.py --n 80 --seeds 0:20 --per-organism 500

Organisms come from ``world.generate`` (healthy and disease by default). Each
gets ``--per-organism`` random interventions (fixed numpy seed): 45% one gene,
45% two genes (BLOCK/BOOST/DAMPEN at random on targetable genes, each signal
also on with probability 1/4), 10% signals only (a non-empty random set).
All rows are solved with ``sim.solve_organisms`` in batches of ``--batch``.

Prints:
  * convergence before/after, and that every row the damped loop finished is
    bitwise unchanged (states, phenotypes, steps);
  * the Newton steps the polished rows took;
  * for every polished row, the distance to the float64 reference
    (tests/reference_solver.py) at the organism's damping, or, where even the
    float64 damped update cycles, at damping 0.1 (the same ODE ds/dt = f(s) - s,
    a finer step); the same distance for the damped loop's unconverged state;
  * the rows still unconverged, and whether the float64 ODE reference finds a
    steady state for them (it should not: no stable steady state);
  * the time of the batch, new / old (best of ``--repeats``, after a warm-up).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import reference_solver as ref

from luca_gym.worlds.luca import sim, generator as world
from luca_gym.worlds.luca.spec import INTERVENTION_TYPES, MODES

# The float64 reference: the damped update at the organism's damping, then,
# where that cycles, finer steps of the same ODE (explicit Euler is itself
# unstable at 0.1 for a weakly damped focus with a large imaginary part).
REFERENCE_LADDER = ((None, 30_000), (0.1, 60_000), (0.02, 300_000))


def seed_range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if stop else range(int(start), int(start) + 1)


def draw_interventions(rng, latent: np.ndarray, n_signals: int, count: int):
    """``count`` random interventions for one organism: codes int8 (count, N), flags bool (count, S)."""
    n = latent.size
    targetable = np.flatnonzero(~latent)
    codes = np.zeros((count, n), np.int8)
    flags = rng.random((count, n_signals)) < 0.25
    kind = rng.choice(3, size=count, p=[0.1, 0.45, 0.45])  # genes targeted: 0, 1 or 2
    for b in range(count):
        if kind[b] == 0:
            flags[b] = rng.random(n_signals) < 0.5
            flags[b, rng.integers(n_signals)] = True
        else:
            genes = rng.choice(targetable, size=kind[b], replace=False)
            codes[b, genes] = rng.integers(1, 4, size=kind[b])
    return codes, flags


def describe(codes: np.ndarray) -> str:
    genes = np.flatnonzero(codes)
    return "{" + ", ".join(f"{g}: {INTERVENTION_TYPES[codes[g]]}" for g in genes) + "}"


def timed(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def reference(params: dict, codes, flags):
    """(float64 states or None, the damping it converged at or None): the
    first rung of REFERENCE_LADDER whose damped update converges."""
    for damping, max_steps in REFERENCE_LADDER:
        p = params if damping is None else dict(params, damping=np.float64(damping))
        r = ref.solve(p, codes, flags, max_steps=max_steps)
        if r.converged:
            return r.states, damping
    return None, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop (default 0:100)")
    parser.add_argument("--tier", default="hard")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated (default healthy,disease)")
    parser.add_argument("--per-organism", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rng", type=int, default=0, help="numpy seed of the interventions")
    parser.add_argument("--no-reference", action="store_true", help="skip the float64 reference")
    args = parser.parse_args()
    seeds = seed_range(args.seeds)
    modes = args.modes.split(",")
    started = time.perf_counter()
    print(f"# solver convergence: tier {args.tier}, N={args.n}, seeds {seeds.start}..{seeds.stop - 1}, modes {modes}")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {os.cpu_count()} cores")

    t = time.perf_counter()
    parts = [jax.tree_util.tree_map(np.asarray, world.generate(list(seeds), args.tier, args.n, mode)) for mode in modes]
    arrays = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *parts)
    labels = [(seed, mode) for mode in modes for seed in seeds]
    print(f"generated {len(labels)} organisms in {time.perf_counter() - t:.1f} s")

    rng = np.random.default_rng(args.rng)
    k = args.per_organism
    organism, codes, flags = [], [], []
    for i in range(len(labels)):
        c, f = draw_interventions(rng, arrays.latent_mask[i], arrays.signal_persist.shape[1], k)
        organism.append(np.full(k, i))
        codes.append(c)
        flags.append(f)
    organism, codes, flags = np.concatenate(organism), np.concatenate(codes), np.concatenate(flags)
    rows = organism.size
    pad = -rows % args.batch
    organism_p = np.concatenate([organism, np.zeros(pad, int)])
    codes_p = np.concatenate([codes, np.zeros((pad, args.n), np.int8)])
    flags_p = np.concatenate([flags, np.zeros((pad, flags.shape[1]), bool)])

    old_parts, new_parts = [], []
    time_old = time_new = 0.0
    t = time.perf_counter()
    for start in range(0, rows + pad, args.batch):
        sl = slice(start, start + args.batch)
        batch = jax.tree_util.tree_map(lambda x, sl=sl: jax.numpy.asarray(x[organism_p[sl]]), arrays)
        c, f = jax.numpy.asarray(codes_p[sl]), jax.numpy.asarray(flags_p[sl])
        old_parts.append(jax.tree_util.tree_map(np.asarray, sim.solve_organisms(batch, c, f, polish=False)))
        new_parts.append(jax.tree_util.tree_map(np.asarray, sim.solve_organisms(batch, c, f)))
        time_old += timed(lambda b=batch, c=c, f=f: sim.solve_organisms(b, c, f, polish=False), args.repeats)
        time_new += timed(lambda b=batch, c=c, f=f: sim.solve_organisms(b, c, f), args.repeats)
    old = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:rows], *old_parts)
    new = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:rows], *new_parts)
    print(f"solved {rows:,} interventions x 2 solvers (with timing) in {time.perf_counter() - t:.1f} s")

    done = old.converged
    failed = ~new.converged
    bitwise = all(
        np.array_equal(getattr(new, k)[done], getattr(old, k)[done]) for k in ("states", "phenotypes", "steps", "converged")
    )
    in_range = bool(((new.states >= 0) & (new.states <= 1)).all())
    print("\n## Convergence")
    print(f"damped loop only: {done.sum():,}/{rows:,} = {100 * done.mean():.4f}% ({(~done).sum()} not converged)")
    print(f"damped + Newton:  {new.converged.sum():,}/{rows:,} = {100 * new.converged.mean():.4f}% ({failed.sum()} not converged)")
    print(f"rows the damped loop finished bitwise unchanged: {bitwise}; all states in [0, 1]: {in_range}")
    newton = new.steps[~done] - old.steps[~done]
    if newton.size:
        values, counts = np.unique(newton, return_counts=True)
        print("Newton steps taken (rows the damped loop left): " + ", ".join(f"{v}: {c}" for v, c in zip(values, counts)))

    if not args.no_reference and (~done).any():
        t = time.perf_counter()
        params = {}
        d_new, d_old, missed = [], [], []
        how_counts = {damping: 0 for damping, _ in REFERENCE_LADDER} | {"none": 0}
        for b in np.flatnonzero(~done):
            i = organism[b]
            if i not in params:
                params[i] = ref.as_float64(jax.tree_util.tree_map(lambda x, i=i: x[i], arrays))
            expected, how = reference(params[i], codes[b], flags[b])
            how_counts["none" if expected is None else how] += 1
            what = f"seed {labels[i][0]} {labels[i][1]} genes {describe(codes[b])} signals {np.flatnonzero(flags[b]).tolist()}"
            if expected is None:
                if new.converged[b]:
                    missed.append(f"{what}: polished, no float64 reference")
                continue
            if new.converged[b]:
                d_new.append(np.abs(new.states[b] - expected).max())
            else:
                missed.append(f"{what}: not converged, float64 reference converges (damping {how or 'own'})")
            d_old.append(np.abs(old.states[b] - expected).max())
        print(f"\n## Float64 reference ({time.perf_counter() - t:.0f} s) for the {(~done).sum()} rows the damped loop left")
        rungs = "; ".join(f"at damping {d}: {how_counts[d]}" for d, _ in REFERENCE_LADDER[1:])
        print(f"reference converged at the organism's damping: {how_counts[None]}; only at a finer step of the ODE "
              f"(the damped update cycles) {rungs}; none (no stable steady state reached): {how_counts['none']}")
        if d_new:
            print(f"max |polished states - reference| = {max(d_new):.2e} over {len(d_new)} rows "
                  f"(median {np.median(d_new):.1e})")
        if d_old:
            print(f"max |damped-loop states - reference| on the same rows = {max(d_old):.3f} (what was reported before)")
        print(f"disagreements: {len(missed)}")
        for line in missed[:20]:
            print(f"  {line}")

    print(f"\n## Time (solve_organisms, batches of {args.batch}, best of {args.repeats})")
    print(f"old {time_old:.3f} s, new {time_new:.3f} s: new/old = {time_new / time_old:.3f} "
          f"({rows / time_old:,.0f} vs {rows / time_new:,.0f} solves/s)")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
