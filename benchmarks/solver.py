"""Steady-state solver and generator throughput, measured side by side in one run.

    .venv/bin/python benchmarks/solver.py

Prints the machine, then:
  * JAX steady-state solves per second at N=20 for batch 1, 64 and 4096, through
    (a) ``sim.solve_organisms`` over distinct medium organisms (64 distinct,
    tiled), each with its own random single-gene intervention, and (b)
    ``sim.solve_interventions`` (one organism, a batch of single-gene
    interventions); compiled first, ``block_until_ready``, best and median of
    several repeats;
  * a plain numpy loop over the same solves one at a time: (i) 500 updates
    always (the paper harness), (ii) stopping when max|f(s) - s| < sim.TOL;
  * the ratios JAX / numpy;
  * organisms generated per second at N=20 and N=320 (fresh seeds, after a
    warm-up generation that compiles the solver);
  * the solve time of one N=1280 organism: baseline and a single BLOCK.
Targets: >= 250,000 solves/s at batch 4096 and >= 1000x the 500-update loop.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import jax
import numpy as np

from luca_gym.worlds.luca import sim, generator as world
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, NONE

N = 20
DISTINCT = 64
BATCHES = (1, 64, 4096)
REPEATS = 7
NUMPY_SOLVES = 64
TARGET_RATE = 250_000
TARGET_RATIO = 1000


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def timed(fn, repeats=REPEATS):
    """(best, median) wall seconds of ``fn()`` over ``repeats`` calls, after one
    untimed call (compile and warm caches)."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def single_gene_interventions(rng, organisms, index):
    """One random BLOCK/BOOST/DAMPEN on a random targetable gene per row."""
    codes = np.zeros((len(index), N), np.int8)
    for b, i in enumerate(index):
        targetable = np.flatnonzero(~np.asarray(organisms[i].arrays.latent_mask))
        codes[b, rng.choice(targetable)] = rng.choice([BLOCK, BOOST, DAMPEN])
    return codes


# -- the numpy loop ----------------------------------------------------------------


def numpy_params(arrays):
    return {
        k: np.asarray(getattr(arrays, k), np.float64)
        for k in ("weights", "bias", "beta", "damping", "signal_effects", "readout", "readout_gain", "baseline_state")
    } | {"gene_lock": np.asarray(arrays.gene_lock), "signal_persist": np.asarray(arrays.signal_persist)}


def numpy_solve(p, codes, flags, fixed_steps: bool):
    """One steady state with numpy, one update at a time: 500 updates always
    (``fixed_steps``) or until max|f(s) - s| < sim.TOL, the JAX solver's rule (cap 500)."""
    lock = p["gene_lock"]
    m = np.where(codes == DAMPEN, 0.5, np.where(codes == NONE, 1.0, 0.0))
    a = np.where(codes == BOOST, 1.0, 0.0)
    locked = lock != 0
    lock_value = np.where(lock == LOCK_HI, 1.0, 0.0)
    a = np.where(locked & (codes == NONE), lock_value, np.where(locked & (codes == DAMPEN), 0.5 * lock_value, a))
    m = np.where(locked & ((codes == NONE) | (codes == DAMPEN)), 0.0, m)
    clamped = m == 0.0
    drive = p["bias"] + (flags | p["signal_persist"]).astype(np.float64) @ p["signal_effects"]
    w, beta, damping = p["weights"], p["beta"], p["damping"]
    s = p["baseline_state"].copy()
    for _ in range(500):
        f = m / (1.0 + np.exp(-beta * (w @ s + drive))) + a
        if not fixed_steps and np.max(np.abs(f - s)) < sim.TOL:
            break
        s = np.where(clamped, a, s + damping * (f - s))
    phen = 1.0 / (1.0 + np.exp(-p["readout_gain"] * (p["readout"] @ (s - p["baseline_state"]))))
    return s, phen



def numpy_rate(params, codes, flags, fixed_steps: bool) -> float:
    """Solves per second of the numpy loop over the rows (best of 3)."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for b in range(len(codes)):
            numpy_solve(params[b], codes[b], flags[b], fixed_steps)
        best = min(best, time.perf_counter() - t)
    return len(codes) / best


# -- the large organism --------------------------------------------------------------


def large_organism_arrays(n: int):
    """The medium N=1280 organism of seed 0 through ``make_organism`` (its
    first call compiles the generator for this size), then a second one,
    seed 1, timed without the compile."""
    t = time.perf_counter()
    organism = world.make_organism(0, "medium", n)
    first = time.perf_counter() - t
    t = time.perf_counter()
    world.make_organism(1, "medium", n)
    second = time.perf_counter() - t
    return organism.arrays, f"make_organism(0, 'medium', {n}) {first:.1f} s with compile; make_organism(1, ...) {second:.1f} s"


def main() -> None:
    started = time.perf_counter()
    print("# luca-gym solver benchmark")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"python {platform.python_version()}, numpy {np.__version__}, jax {jax.__version__}, "
          f"backend {jax.default_backend()} ({jax.devices()[0].device_kind})")
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")

    # Organisms (and the generation rate at N=20): warm up on seed 0, then fresh seeds.
    world.make_organism(0, "medium", N)
    t = time.perf_counter()
    with jax.default_device(jax.devices("cpu")[0]):  # the published organisms; the solver is measured
        organisms = [world.make_organism(seed, "medium", N) for seed in range(1, DISTINCT + 1)]
    gen_rate_20 = DISTINCT / (time.perf_counter() - t)
    stacked = sim.stack(organisms)
    n_signals = organisms[0].n_signals

    rng = np.random.default_rng(0)
    rows = []
    for batch in BATCHES:
        index = np.arange(batch) % DISTINCT
        tiled = jax.tree_util.tree_map(lambda x, index=index: x[index], stacked)
        codes_a = single_gene_interventions(rng, organisms, index)
        codes_b = single_gene_interventions(rng, organisms, np.zeros(batch, int))
        flags = np.zeros((batch, n_signals), bool)
        result = sim.solve_organisms(tiled, codes_a, flags)
        assert bool(np.all(result.converged)), "a benchmark solve did not converge"
        best_a, median_a = timed(lambda tiled=tiled, c=codes_a, f=flags: sim.solve_organisms(tiled, c, f))
        best_b, median_b = timed(lambda c=codes_b, f=flags: sim.solve_interventions(organisms[0].arrays, c, f))
        rows.append((batch, batch / best_a, batch / median_a, batch / best_b, batch / median_b))

    # The numpy loop over the same single-gene solves (the organisms of the 4096 batch).
    index = np.arange(NUMPY_SOLVES) % DISTINCT
    params = [numpy_params(organisms[i].arrays) for i in index]
    codes = single_gene_interventions(np.random.default_rng(1), organisms, index)
    flags = np.zeros((NUMPY_SOLVES, n_signals), bool)
    jax_check = sim.solve_organisms(jax.tree_util.tree_map(lambda x: x[index], stacked), codes, flags)
    diff = max(
        float(np.abs(numpy_solve(params[b], codes[b], flags[b], False)[1] - np.asarray(jax_check.phenotypes[b])).max())
        for b in range(NUMPY_SOLVES)
    )
    rate_fixed = numpy_rate(params, codes, flags, fixed_steps=True)
    rate_converge = numpy_rate(params, codes, flags, fixed_steps=False)

    print(f"\n## Steady-state solves per second, N={N} (medium), single-gene interventions")
    print(f"numpy loop, one solve at a time: (i) 500 updates {rate_fixed:,.0f}/s; "
          f"(ii) to convergence (residual < {sim.TOL:g}) {rate_converge:,.0f}/s "
          f"(numpy vs JAX phenotypes agree within {diff:.1e})")
    header = ("| batch | JAX solve_organisms best (median) /s | vs (i) | vs (ii) "
              "| JAX solve_interventions best (median) /s | vs (i) | vs (ii) |")
    print(header)
    print("|" + "---|" * 7)
    for batch, a_best, a_med, b_best, b_med in rows:
        print(f"| {batch} | {a_best:,.0f} ({a_med:,.0f}) | {a_best / rate_fixed:,.0f}x | {a_best / rate_converge:,.0f}x "
              f"| {b_best:,.0f} ({b_med:,.0f}) | {b_best / rate_fixed:,.0f}x | {b_best / rate_converge:,.0f}x |")

    # Generation rate at N=320: warm up (compile) on seed 0, then fresh seeds.
    world.make_organism(0, "medium", 320)
    t = time.perf_counter()
    count_320 = 3
    for seed in range(1, count_320 + 1):
        world.make_organism(seed, "medium", 320)
    gen_rate_320 = count_320 / (time.perf_counter() - t)
    print("\n## Organisms generated per second (medium, healthy, fresh seeds, after a warm-up)")
    print(f"N=20: {gen_rate_20:.1f}/s ({DISTINCT} organisms); N=320: {gen_rate_320:.2f}/s ({count_320} organisms)")

    # One N=1280 organism.
    arrays, note = large_organism_arrays(1280)
    n = 1280
    none = np.zeros(n, np.int8)
    block = none.copy()
    block[int(np.flatnonzero(~np.asarray(arrays.latent_mask))[0])] = BLOCK
    no_flags = np.zeros(arrays.n_signals, bool)
    base_best, _ = timed(lambda: sim.solve(arrays, none, no_flags), repeats=5)
    block_best, _ = timed(lambda: sim.solve(arrays, block, no_flags), repeats=5)
    steps_base = int(sim.solve(arrays, none, no_flags).steps)
    steps_block = int(sim.solve(arrays, block, no_flags).steps)
    print("\n## One N=1280 organism (medium), after warm-up")
    print(f"{note}")
    print(f"baseline solve {base_best * 1e3:.2f} ms ({steps_base} updates); "
          f"single BLOCK {block_best * 1e3:.2f} ms ({steps_block} updates)")

    print("\n## Targets (batch 4096, best of the repeats)")
    for name, rate in (("solve_organisms", rows[-1][1]), ("solve_interventions", rows[-1][3])):
        ratio = rate / rate_fixed
        print(f"{name}: {rate:,.0f}/s vs {TARGET_RATE:,}/s: "
              f"{'met' if rate >= TARGET_RATE else f'missed by {1 - rate / TARGET_RATE:.0%}'}; "
              f"{ratio:,.0f}x the 500-update numpy loop vs {TARGET_RATIO}x: "
              f"{'met' if ratio >= TARGET_RATIO else f'missed by {1 - ratio / TARGET_RATIO:.0%}'}")
    print(f"\ntotal benchmark time {time.perf_counter() - started:.0f} s, "
          f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
