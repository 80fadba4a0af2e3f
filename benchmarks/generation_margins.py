"""Why one seed's organism differs between two backends: the attempt each
backend accepted, and how far each guarantee that accepted it sat from its
threshold, measured on both backends.

``generator.generate`` keeps a seed's first attempt whose organism meets
every guarantee (SPEC 1.3). A backend that rounds differently (another
summation order, a transcendental an ulp off) flips a comparison only where
the compared quantity sat within rounding of its threshold; it then accepts
another attempt (another network), or in the same attempt chooses another
malfunction or task. :func:`margins` re-evaluates, on given organism arrays,
the comparisons of the path that accepted them, each as a signed distance to
its threshold (positive: passed), from the generator's own building blocks
(``sim.fixed_point``, ``sim.spectral_radius_bound``, ``with_malfunction``,
the spec's thresholds). It reads the organism the generator made; it does not
generate. :func:`diagnose` runs a seed's attempts on the default device and
on the CPU, finds the first attempt the two judge differently (or the shared
attempt whose choices differ) and reports the margins of the organism one of
them accepted, on both.

What it cannot see: the settling's baseline solve (it starts from the drawn
target state, which the arrays do not keep; the baseline's stability is
checked), a flip in an earlier repair round of the settling (the margins are
those of the final round), or a near-tie in an ordering (the malfunction's
severity order, the tasks' spill order) rather than a threshold. Then every
margin is far from rounding, and the report says so.

    .venv/bin/python benchmarks/generation_margins.py --tier medium --mode healthy --seeds 36
"""

from __future__ import annotations

import argparse
import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.cli.common import parse_seeds
from luca_gym.worlds.luca import sim
from luca_gym.worlds.luca.generator.malfunction import with_malfunction
from luca_gym.worlds.luca.generator.network import STABILITY_MARGIN, single_interventions
from luca_gym.worlds.luca.generator.organisms import MAX_ATTEMPTS, call_sizes, map_batch, run_attempt_batch
from luca_gym.worlds.luca.generator.tiers import Plan, plan, tier_params
from luca_gym.worlds.luca.spec import (
    ACCURACY_THRESHOLD,
    BLOCK,
    BOOST,
    DAMPEN,
    HEALTHY_RANGE,
    LOCK_HI,
    NETWORK_SHIFT_THRESHOLD,
    n_alt_tolerance,
)
from luca_gym.worlds.luca.types import OrganismArrays

# Comparisons within this of their threshold count as "within rounding"
# (float32 states and phenotypes near 0.5 carry about 6e-8 per ulp; a few
# hundred solver updates and 2^16 squarings accumulate more) ...
ROUNDING = 1e-5
# ... and a solve with fewer updates left than this is near its limit (5% of
# MAX_STEPS: a solve that slow crawls near the rounding floor of its residual,
# where another backend's rounding can hold it above TOL).
NEAR_STEPS = 25


def _solves(arrays: OrganismArrays, codes, flags):
    """The generator's solves (``sim.fixed_point`` with MAX_STEPS, TOL) of a
    batch of interventions: (phenotypes (B, P), updates left (B,)). A solve
    passes when its residual falls below TOL within MAX_STEPS updates; the
    loop stops right after it does, so the final residual always sits just
    under TOL and says nothing. What a backend's rounding can flip is whether
    it gets there in time: the margin is the updates it had left
    (MAX_STEPS - steps; -1 if it never converged)."""
    r = jax.vmap(lambda c, f: sim.fixed_point(arrays, c, f, sim.MAX_STEPS, sim.TOL))(codes, flags)
    return r.phenotypes, jnp.where(r.converged, sim.MAX_STEPS - r.steps, -1).astype(jnp.float32)


@partial(jax.jit, static_argnames=("p",))
def _margins(arrays: OrganismArrays, t, p: Plan) -> dict:
    n, s = p.n, p.n_signals
    low, high = HEALTHY_RANGE
    healthy = dataclasses.replace(arrays, gene_lock=jnp.zeros_like(arrays.gene_lock),
                                  signal_persist=jnp.zeros_like(arrays.signal_persist))
    out = {}
    # The settling's last round: the baseline, its stability, the singles, every gene visible.
    # (The settling's own baseline solve started from the drawn target state,
    # which the arrays do not keep; its stability is checked here.)
    state = arrays.baseline_state
    jacobian = (1 - arrays.damping) * jnp.eye(n) + arrays.damping * (arrays.beta * state * (1 - state))[:, None] * arrays.weights
    out["stability"] = (1 - STABILITY_MARGIN) - sim.spectral_radius_bound(jacobian)
    codes, flags = single_interventions(n, s, (BLOCK, BOOST))
    singles, left = _solves(healthy, codes, flags)
    out["singles steps left"] = jnp.min(left)
    shift = jnp.abs(singles[: 2 * n] - 0.5).max(axis=1).reshape(2, n).max(axis=0)
    out["visibility"] = jnp.min(shift - NETWORK_SHIFT_THRESHOLD)
    pool = arrays.readout_mask & ~arrays.latent_mask
    if p.disease:
        targetable = ~arrays.latent_mask
        phen = jnp.concatenate([singles[n : 2 * n], singles[:n], singles[2 * n :]])  # the candidates' disease phenotypes
        valid = jnp.concatenate([targetable, targetable, jnp.ones(s, bool)])
        # The candidate index (with_malfunction's layout; a signal's target is N + its index).
        c = jnp.where(arrays.malfunction_type == LOCK_HI, arrays.malfunction_target, n + arrays.malfunction_target)
        excess = jnp.maximum(low - phen[c], phen[c] - high)
        out["malfunction out of range"] = jnp.max(excess)
        was_out = excess > 0
        rcodes, rflags = single_interventions(n, s, (BLOCK, BOOST, DAMPEN))
        row_valid = jnp.concatenate([targetable, targetable, targetable, jnp.ones(s, bool)])
        diseased = with_malfunction(p, healthy, c)
        rescued, left = _solves(diseased, rcodes, rflags)
        inside = jnp.minimum(rescued - low, high - rescued)
        out["rescue"] = jnp.max(jnp.where(was_out[None, :] & row_valid[:, None], inside, -jnp.inf))
        out["rescue steps left"] = jnp.min(jnp.where(row_valid, left, jnp.inf))
        distance = jnp.abs(phen - phen[c]).max(axis=1)
        others = valid & (jnp.arange(valid.size) != c)
        out["n_alt"] = jnp.min(jnp.where(others, jnp.abs(distance - n_alt_tolerance(arrays.noise_sigma)), jnp.inf))
        task_singles, left = _solves(diseased, codes[: 2 * n], flags[: 2 * n])
        out["task singles steps left"] = jnp.min(jnp.where(jnp.concatenate([pool, pool]), left, jnp.inf))
        studied = diseased
    else:
        task_singles, studied = singles, healthy
    # The tasks: each chosen pair's miss of the additive prediction, against the floors.
    base, left = _solves(studied, jnp.zeros((1, n), jnp.int8), jnp.zeros((1, s), bool))
    out["task baseline steps left"] = left[0]
    effect = task_singles[: 2 * n].reshape(2, n, -1) - base[0]
    a, b = arrays.task_genes[:, 0], arrays.task_genes[:, 1]
    ta, tb = arrays.task_codes[:, 0], arrays.task_codes[:, 1]
    rows = jnp.arange(a.shape[0])
    tcodes = jnp.zeros((a.shape[0], n), jnp.int8).at[rows, a].set(ta).at[rows, b].set(tb)
    joint, left = _solves(studied, tcodes, jnp.zeros((a.shape[0], s), bool))
    additive = base[0] + effect[(ta == BOOST).astype(jnp.int32), a] + effect[(tb == BOOST).astype(jnp.int32), b]
    miss = jnp.abs(joint - additive).max(axis=1)
    out["task joint steps left"] = jnp.min(left)
    out["task residual vs accuracy threshold"] = jnp.min(miss) - ACCURACY_THRESHOLD
    out["task residual vs the tier's floor"] = jnp.min(miss) - jnp.maximum(t.task_residual, ACCURACY_THRESHOLD)
    return out


def margins(arrays: OrganismArrays, tier: str, n_genes: int, mode: str) -> dict[str, float]:
    """Each comparison that accepted ``arrays`` (one organism, any leaves
    that convert to arrays) as a signed float distance to its threshold,
    computed on the default device. Positive: passed. A solve's margin is
    the updates it had left (:func:`_solves`); "n_alt" is the nearest other
    candidate's distance to the indistinguishability tolerance (it accepts
    nothing, but a candidate across it changes the organism's ``n_alt``)."""
    arrays = jax.tree_util.tree_map(jnp.asarray, arrays)
    return {k: float(v) for k, v in _margins(arrays, tier_params(tier, n_genes), plan(n_genes, mode)).items()}


def attempts(seed: int, tier: str, n_genes: int, mode: str, max_attempts: int = MAX_ATTEMPTS):
    """The seed's attempts on the default device, as ``generate`` runs them
    (same group and call size), until one is accepted: (its index or None,
    its arrays as numpy or None)."""
    p, t = plan(n_genes, mode), tier_params(tier, n_genes)
    group = map_batch()
    size = call_sizes(group)[0]
    hi = np.full(size, seed >> 32, np.uint32)
    lo = np.full(size, seed & 0xFFFFFFFF, np.uint32)
    for attempt in range(max_attempts):
        arrays, ok = run_attempt_batch(hi, lo, np.full(size, attempt, np.int32), t, p, group)
        if bool(np.asarray(ok)[0]):
            return attempt, jax.tree_util.tree_map(lambda x: np.asarray(x)[0], arrays)
    return None, None


def diagnose(seed: int, tier: str, n_genes: int, mode: str, cpu_context) -> dict:
    """A seed's attempts on the default device and on the CPU (inside
    ``cpu_context()``), and the margins of the organism accepted at the first
    attempt where they part, on both. Returns a JSON-ready dict."""
    dev_k, dev_arrays = attempts(seed, tier, n_genes, mode)
    with cpu_context():
        cpu_k, cpu_arrays = attempts(seed, tier, n_genes, mode)
    result = {"seed": seed, "accepted_attempt_device": dev_k, "accepted_attempt_cpu": cpu_k}
    if dev_k is None and cpu_k is None:
        result["finding"] = "no attempt accepted on either backend"
        return result
    first = min(k for k in (dev_k, cpu_k) if k is not None)
    reference, side = (cpu_arrays, "cpu") if cpu_k == first else (dev_arrays, "device")
    result["margins_of"] = f"the organism the {side} accepted at attempt {first}"
    on_device = margins(reference, tier, n_genes, mode)
    with cpu_context():
        on_cpu = margins(reference, tier, n_genes, mode)
    result["margins"] = {k: {"device": on_device[k], "cpu": on_cpu[k]} for k in on_device}
    if dev_k != cpu_k:
        parted = f"attempt {first} accepted on the {side} only"
    elif all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(dev_arrays), jax.tree_util.tree_leaves(cpu_arrays))):
        parted = "the same organism on both backends"
    else:
        parted = f"attempt {dev_k} accepted on both, with other arrays"
    result["finding"] = f"{parted}; {finding(result['margins'])}"
    return result


def finding(table: dict) -> str:
    """One line: the comparisons whose sign differs between the backends,
    else the nearest to its threshold, and whether rounding could flip it."""
    # Every margin decides something: the guarantees whether the attempt is
    # accepted, the tier's task floor which tasks are chosen, n_alt a field.
    flipped = [k for k in table if (table[k]["device"] > 0) != (table[k]["cpu"] > 0)]
    if flipped:
        return "; ".join(f"{k} flips: {table[k]['device']:+.3g} on the device, {table[k]['cpu']:+.3g} on the CPU" for k in flipped)
    def scaled(k):  # the distance in units of what rounding can move: updates for solves, float32 rounding else
        return min(abs(table[k]["device"]), abs(table[k]["cpu"])) / (NEAR_STEPS if "steps left" in k else ROUNDING)

    near = min(table, key=scaled)
    gap = min(abs(table[near]["device"]), abs(table[near]["cpu"]))
    unit = " updates" if "steps left" in near else ""
    where = ("near enough for rounding to flip it" if scaled(near) <= 1
             else "no comparison near enough for rounding to flip it: an earlier repair round or an ordering near-tie")
    return f"nearest: {near}, {gap:.3g}{unit} from its threshold ({where})"


def main() -> None:
    from device_check import cpu_backend  # noqa: PLC0415  (benchmarks/device_check.py: the CPU side's context)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tier", default="medium")
    ap.add_argument("--mode", default="healthy")
    ap.add_argument("--n-genes", type=int, default=20)
    ap.add_argument("--seeds", default="36", help="as luca-gym's --seeds: 36, 0-9 or 1,5,9")
    args = ap.parse_args()
    for seed in parse_seeds(args.seeds):
        r = diagnose(seed, args.tier, args.n_genes, args.mode, cpu_backend)
        print(f"seed {seed}: attempt {r['accepted_attempt_device']} on {jax.default_backend()}, "
              f"{r['accepted_attempt_cpu']} on the CPU; {r['finding']}")
        for k, v in r.get("margins", {}).items():
            print(f"  {k:40s} {v['device']:+.4g} ({jax.default_backend()})  {v['cpu']:+.4g} (cpu)")


if __name__ == "__main__":
    main()
