"""Difficulty tiers and the scaling rules (paper Tables 1 and 5).

A tier's numbers, the sizes that follow from N, and their two forms for the
traced generator: the static :class:`Plan` (keys the compile cache) and the
traced :class:`TierParams` (so every tier shares one compiled generator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import jax
import numpy as np

from luca_gym.worlds.luca.spec import N_PHENOTYPES, N_TASKS, TIER_NAMES, check_n_genes


@dataclass(frozen=True)
class Tier:
    """Generative parameters of a difficulty tier (paper Table 1).

    ``ffl_per_20`` and ``feedback_per_20`` are the injected feed-forward loops and
    feedback edges at N=20; both scale linearly with N. The rest are ours:
    ``damping`` is the solver's step fraction; ``task_residual`` the least
    amount (max over phenotypes) by which a prediction task's joint outcome
    differs from the sum of its single effects (at least the 0.10 accuracy
    threshold; rising with tier, paper Table 3's additive residual);
    ``weight_gain`` multiplies the |w| ~ U(0.5, 1.5) edge weights and
    ``state_range`` bounds the drawn healthy gene states;
    ``malfunction_excess`` is how far past the healthy edge a disease
    phenotype typically sits (see :mod:`luca_gym.worlds.luca.generator.malfunction`). Hard organisms have
    stronger edges and genes nearer saturation: gene-level effects then
    combine non-additively, which is what makes their held-out pairs hard for
    a predictor that adds single effects even in logit space (paper Table 6:
    causal-sweep 0.55 on hard); saturated genes also keep the stronger
    network stable.
    """

    name: str
    index: int
    observability: float
    intra_density: float
    inter_density: float
    inhibition: float
    beta: float
    noise_sigma: float
    latent_fraction: float
    ffl_per_20: float
    feedback_per_20: float
    damping: float
    task_residual: float
    weight_gain: float
    state_range: tuple[float, float]
    malfunction_excess: float


TIERS: dict[str, Tier] = {
    t.name: t
    for t in (
        Tier("easy", 0, 0.80, 0.25, 0.04, 0.20, 0.7, 0.005, 0.00, 1, 0, 1.0, 0.12, 1.0, (0.3, 0.7), 0.0),
        Tier("medium", 1, 0.60, 0.40, 0.08, 0.30, 1.0, 0.010, 0.00, 3, 3, 1.0, 0.16, 1.0, (0.3, 0.7), 0.03),
        Tier("hard", 2, 0.50, 0.50, 0.15, 0.40, 2.0, 0.030, 0.25, 4, 5, 0.7, 0.24, 1.5, (0.1, 0.9), 0.2),
    )
}
# A tier's index keys its organisms, so the names and their order are the spec's.
assert tuple(TIERS) == TIER_NAMES and [t.index for t in TIERS.values()] == list(range(len(TIER_NAMES)))


def round_half_up(x: float) -> int:
    """The paper's rounding: 2.5 -> 3."""
    return int(math.floor(x + 0.5))


@dataclass(frozen=True)
class Sizes:
    """Scaling rules of paper Table 5."""

    n_genes: int
    n_modules: int
    n_signals: int
    signal_max_targets: int
    n_phenotypes: int
    n_tasks: int
    budget: int


def sizes(n_genes: int) -> Sizes:
    """Sizes for ``n_genes`` genes: M = max(4, [N/5]), S = max(3, [N/7]),
    budget B = N + S + 8."""
    n_genes = check_n_genes(n_genes)
    s = max(3, round_half_up(n_genes / 7))
    return Sizes(
        n_genes=n_genes,
        n_modules=max(4, round_half_up(n_genes / 5)),
        n_signals=s,
        signal_max_targets=s,
        n_phenotypes=N_PHENOTYPES,
        n_tasks=N_TASKS,
        budget=n_genes + s + 8,
    )


def expected_in_degree(tier: Tier, n_genes: int) -> float:
    """Expected regulators per gene from the tier's densities and N/M genes per module."""
    per_module = n_genes / sizes(n_genes).n_modules
    return tier.intra_density * (per_module - 1) + tier.inter_density * (n_genes - per_module)


def weight_scale(tier: Tier, n_genes: int) -> float:
    """Weight magnitude factor (ours): 1 at N <= 20, and 1/sqrt(in-degree growth)
    beyond, so each gene's summed input keeps the spread it has at N=20.
    Without it the in-degree grows with N (the inter-module density is fixed)
    and large hard organisms saturate and stop converging."""
    return min(1.0, math.sqrt(expected_in_degree(tier, 20) / expected_in_degree(tier, n_genes)))


@dataclass(frozen=True)
class Plan:
    """The static shape of generation for one (N, mode, backwards): sizes the
    draw does not change. Hashable, so it keys the compile cache; the tier's
    numbers travel as traced :class:`TierParams`, so every tier shares one
    compiled generator."""

    n: int
    n_modules: int
    n_signals: int
    signal_max_targets: int
    disease: bool
    backwards: bool


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class TierParams:
    """A tier's generative numbers at one N, as arrays (traced, so one compile
    serves all tiers): exact edge counts, injected loops, gene-role counts,
    and the continuous parameters."""

    index: jax.Array
    intra_edges: jax.Array
    inter_edges: jax.Array
    ffl: jax.Array
    feedback: jax.Array
    n_readout: jax.Array
    n_latent: jax.Array
    weight_scale: jax.Array
    inhibition: jax.Array
    beta: jax.Array
    damping: jax.Array
    noise_sigma: jax.Array
    task_residual: jax.Array
    state_low: jax.Array
    state_high: jax.Array
    malfunction_excess: jax.Array


@lru_cache(maxsize=None)
def plan(n_genes: int, mode: str = "healthy", backwards: bool = False) -> Plan:
    """The :class:`Plan` of a generation call."""
    sz = sizes(n_genes)
    return Plan(
        n=n_genes,
        n_modules=sz.n_modules,
        n_signals=sz.n_signals,
        signal_max_targets=sz.signal_max_targets,
        disease=mode == "disease",
        backwards=bool(backwards),
    )


def tier_params(tier: str, n_genes: int) -> TierParams:
    """The :class:`TierParams` of ``tier`` at ``n_genes`` genes."""
    t, n = TIERS[tier], n_genes
    m = sizes(n).n_modules
    # Balanced modules: n % m modules of ceil(n/m) genes, the rest floor(n/m).
    module_sizes = [n // m + (1 if k < n % m else 0) for k in range(m)]
    intra_pairs = sum(k * (k - 1) for k in module_sizes)
    inter_pairs = n * (n - 1) - intra_pairs
    n_readout = max(m, round_half_up(t.observability * n))
    i32, f32 = np.int32, np.float32
    return TierParams(
        index=i32(t.index),
        # An exact edge count (density x ordered pairs), at most the forward half.
        intra_edges=i32(min(round_half_up(t.intra_density * intra_pairs), intra_pairs // 2)),
        inter_edges=i32(min(round_half_up(t.inter_density * inter_pairs), inter_pairs // 2)),
        ffl=i32(round_half_up(t.ffl_per_20 * n / 20)),
        feedback=i32(round_half_up(t.feedback_per_20 * n / 20)),
        n_readout=i32(n_readout),
        n_latent=i32(min(n - n_readout, round_half_up(t.latent_fraction * n))),
        weight_scale=f32(t.weight_gain * weight_scale(t, n)),
        inhibition=f32(t.inhibition),
        beta=f32(t.beta),
        damping=f32(t.damping),
        noise_sigma=f32(t.noise_sigma),
        task_residual=f32(t.task_residual),
        state_low=f32(t.state_range[0]),
        state_high=f32(t.state_range[1]),
        malfunction_excess=f32(t.malfunction_excess),
    )
