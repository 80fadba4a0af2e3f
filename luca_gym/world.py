"""The LUCA world: tiers, scaling rules and the organism generator (SPEC §1).

``make_organism(seed, tier, n_genes, mode, backwards)`` is a pure function of
its arguments, and :func:`generate` makes a whole batch at once. The generator
is JAX from end to end: every random choice comes from a key derived from
``(seed, tier, n_genes, attempt)``, every guarantee is checked with the same
solver the sessions use, and one ``jit(vmap(...))`` call runs an attempt for a
whole batch on the device. An attempt that fails a guarantee is replaced by the
next one (only those organisms are retried), so the result stays a pure
function of the triple.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import sim, vocabulary
from luca_gym.scoring import ACCURACY_THRESHOLD, HEALTHY_HIGH, HEALTHY_LOW, NETWORK_SHIFT_THRESHOLD
from luca_gym.types import (
    BLOCK,
    BOOST,
    DAMPEN,
    LOCK_HI,
    LOCK_LO,
    N_PHENOTYPES,
    N_TASKS,
    NO_MALFUNCTION,
    PERSIST,
    Organism,
    OrganismArrays,
    OrganismMeta,
)

MODES = ("healthy", "disease")
MIN_GENES, MAX_GENES = 4, 4096
HEALTHY_RANGE = (HEALTHY_LOW, HEALTHY_HIGH)
# A shift a measurement can detect (SPEC 1.3 step 12; the network threshold).
DETECTABLE_SHIFT = NETWORK_SHIFT_THRESHOLD
# Non-additivity a prediction task must show (SPEC 1.7).
NON_ADDITIVE = ACCURACY_THRESHOLD
# Two malfunctions are indistinguishable when all phenotypes agree this well.
N_ALT_TOLERANCE = 0.02
# Readout steepness gamma and readout weight range (ours). gamma = 2 makes a
# direct readout change clearly visible (a BLOCK moves its phenotype by ~0.1-0.3)
# while a change passed on through the network mostly stays under the 0.10
# threshold on easy organisms, as in the paper (random ~0.667 on easy; gamma = 3
# or 4 let spill-over move a second phenotype and random fell to 0.53-0.59).
READOUT_GAIN = 2.0
READOUT_WEIGHT = (0.8, 1.2)
WEIGHT_MAGNITUDE = (0.5, 1.5)
SIGNAL_STRENGTH = (1.0, 2.0)
BASELINE_STATE = (0.3, 0.7)
MAX_ATTEMPTS = 50
REPAIR_ROUNDS = 10
# A repair edge is strong (and unscaled): one direct link must make the gene visible at any N.
REPAIR_MAGNITUDE = (1.0, 1.5)
# The healthy fixed point must attract the solver's damped update.
STABILITY_MARGIN = 1e-3


@dataclass(frozen=True)
class Tier:
    """Generative parameters of a difficulty tier (paper Table 1).

    ``ffl_per_20`` and ``feedback_per_20`` are the injected feed-forward loops and
    feedback edges at N=20; both scale linearly with N. ``damping`` is the
    solver's step fraction (ours).
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


TIERS: dict[str, Tier] = {
    t.name: t
    for t in (
        Tier("easy", 0, 0.80, 0.25, 0.04, 0.20, 0.7, 0.005, 0.00, 1, 0, 1.0),
        Tier("medium", 1, 0.60, 0.40, 0.08, 0.30, 1.0, 0.010, 0.00, 3, 3, 1.0),
        Tier("hard", 2, 0.50, 0.50, 0.15, 0.40, 2.0, 0.030, 0.25, 4, 5, 0.7),
    )
}


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
    _check_n_genes(n_genes)
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


def _check_n_genes(n_genes) -> None:
    if isinstance(n_genes, bool) or not isinstance(n_genes, (int, np.integer)):
        raise ValueError(f"n_genes: {n_genes!r} is not an integer; allowed {MIN_GENES}..{MAX_GENES}")
    if not MIN_GENES <= n_genes <= MAX_GENES:
        raise ValueError(f"n_genes: {n_genes} out of range; allowed {MIN_GENES}..{MAX_GENES}")


def check_triple(seed, tier, n_genes, mode="healthy") -> None:
    """Raise ValueError naming the argument, the bad value and what is allowed."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: {seed!r} is not an integer; allowed 0..2**63-1")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed: {seed} out of range; allowed 0..2**63-1")
    if tier not in TIERS:
        raise ValueError(f"tier: {tier!r} unknown; allowed {', '.join(TIERS)}")
    _check_n_genes(n_genes)
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} unknown; allowed {', '.join(MODES)}")


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


# -- the generator: one traced attempt --------------------------------------------
#
# Every step of SPEC 1.3 is a JAX function of a key derived from the triple and
# the attempt number, so a whole batch of organisms is generated by one
# jit(vmap(...)) call on the device. Shapes are fixed per (tier, N, mode): the
# random choices are masks and top-k selections over all genes, and the loops
# whose length depends on the draw (repairs, malfunction candidates, task
# candidates) are ``lax.while_loop``s.

ROOT_KEY = 0x1ACA  # the root of every organism key
TASK_CHUNK = 64  # joint interventions tried per round of the task search
# The spectral radius of the update's Jacobian is bounded by ||J^(2^k)||^(1/2^k)
# (Gelfand); 2^16 squarings make the bound tight to ~1e-4 for any sane matrix.
STABILITY_SQUARINGS = 16
TYPE_PAIRS = ((BLOCK, BLOCK), (BLOCK, BOOST), (BOOST, BLOCK), (BOOST, BOOST))

# Attempt statuses inside the traced loops.
_RUNNING, _OK, _FAILED = 0, 1, 2


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
        weight_scale=f32(weight_scale(t, n)),
        inhibition=f32(t.inhibition),
        beta=f32(t.beta),
        damping=f32(t.damping),
        noise_sigma=f32(t.noise_sigma),
    )


def organism_key(seed_hi, seed_lo, tier_index, n_genes) -> jax.Array:
    """The key of a triple (the seed split into two uint32 words); traceable."""
    key = jax.random.PRNGKey(ROOT_KEY)
    for part in (seed_hi, seed_lo, tier_index, n_genes):
        key = jax.random.fold_in(key, part)
    return key


def _top_k_mask(priority: jax.Array, k) -> jax.Array:
    """A bool mask of the ``k`` (traced) largest entries of ``priority`` (any
    shape); ties go to the lower index."""
    flat = priority.reshape(-1)
    order = jnp.argsort(-flat, stable=True)
    return jnp.zeros(flat.shape, bool).at[order].set(jnp.arange(flat.size) < k).reshape(priority.shape)


def _masked_choice(key, mask: jax.Array) -> jax.Array:
    """A uniformly drawn flat index where ``mask`` is True (the last if none): the
    r-th True entry for r uniform below their count (one draw, one cumsum)."""
    counts = jnp.cumsum(mask.reshape(-1).astype(jnp.int32))
    r = jax.random.randint(key, (), 0, jnp.maximum(counts[-1], 1))
    return jnp.minimum(jnp.searchsorted(counts, r + 1), mask.size - 1)


def _network(key, p: Plan, t: TierParams) -> dict:
    """Steps 2-9: modules, edges, feed-forward loops, feedback edges, weights,
    signals, target states, readout and latent genes."""
    n, m = p.n, p.n_modules
    k = jax.random.split(key, 16)
    genes = jnp.arange(n)
    # Balanced modules (sizes differ by at most one): random sizes made the
    # intra-module pair count, hence the edge count, swing past the paper's range.
    module = jnp.zeros(n, jnp.int32).at[jax.random.permutation(k[0], n)].set((genes % m).astype(jnp.int32))
    rank = jnp.zeros(n, jnp.int32).at[jax.random.permutation(k[1], n)].set(genes.astype(jnp.int32))
    same = module[:, None] == module[None, :]
    off_diag = genes[:, None] != genes[None, :]
    forward = rank[None, :] < rank[:, None]  # adj[i, j]: the edge j -> i goes forward
    u = jax.random.uniform(k[2], (2, n, n))
    adj = _top_k_mask(jnp.where(same & off_diag & forward, u[0], -1.0), t.intra_edges)
    adj |= _top_k_mask(jnp.where(~same & forward, u[1], -1.0), t.inter_edges)

    def ffl(i, adj):
        three = _top_k_mask(jax.random.uniform(jax.random.fold_in(k[3], i), (n,)), 3)
        abc = jnp.argsort(jnp.where(three, rank, n))[:3]  # the three genes in topological order
        a, b, c = abc[0], abc[1], abc[2]
        return adj.at[b, a].set(True).at[c, b].set(True).at[c, a].set(True)

    adj = jax.lax.fori_loop(0, t.ffl, ffl, adj)

    def feedback(i, adj):
        # A feedback edge closes a loop: along a forward edge g -> h (and on to
        # a child j of h when h has one), then back to g.
        kk = jax.random.split(jax.random.fold_in(k[4], i))
        h, g = jnp.divmod(_masked_choice(kk[0], adj & forward), n)
        children = adj[:, h] & (rank > rank[h])
        j = jnp.where(children.any(), _masked_choice(kk[1], children), h)
        return adj.at[g, j].set(True)

    adj = jax.lax.fori_loop(0, t.feedback, feedback, adj)
    magnitude = jax.random.uniform(k[5], (n, n), minval=WEIGHT_MAGNITUDE[0], maxval=WEIGHT_MAGNITUDE[1]) * t.weight_scale
    sign = jnp.where(jax.random.uniform(k[6], (n, n)) < t.inhibition, -1.0, 1.0)
    weights = jnp.where(adj, magnitude * sign, 0.0)

    # Signals: a mode, 1..max targets, strengths U(1, 2).
    def signal(key):
        ks = jax.random.split(key, 4)
        activates = jax.random.uniform(ks[0]) < 0.5
        count = jax.random.randint(ks[1], (), 1, p.signal_max_targets + 1)
        order = jnp.argsort(jax.random.uniform(ks[2], (n,)))
        targets = jnp.zeros(n, bool).at[order].set(genes < count)
        strength = jax.random.uniform(ks[3], (n,), minval=SIGNAL_STRENGTH[0], maxval=SIGNAL_STRENGTH[1])
        return jnp.where(targets, jnp.where(activates, 1.0, -1.0) * strength, 0.0)

    signal_effects = jax.vmap(signal)(jax.random.split(k[7], p.n_signals))
    target_state = jax.random.uniform(k[8], (n,), minval=BASELINE_STATE[0], maxval=BASELINE_STATE[1])

    # Readout genes: one per module (a sink if it has one: a gene with no
    # outgoing edge can only be seen if it is read out), then sinks first, then
    # at random.
    sink = ~adj.any(axis=0)
    preference = jax.random.uniform(k[9], (n,)) + 2.0 * sink
    in_module = module[None, :] == jnp.arange(m)[:, None]
    chosen = jnp.zeros(n, bool).at[jnp.argmax(jnp.where(in_module, preference[None, :], -1.0), axis=1)].set(True)
    rest = jnp.where(chosen, -1.0, jax.random.uniform(k[10], (n,)) + 2.0 * sink)
    readout_mask = chosen | _top_k_mask(rest, t.n_readout - m)
    latent_mask = _top_k_mask(jnp.where(readout_mask, -1.0, jax.random.uniform(k[11], (n,))), t.n_latent)
    # Every phenotype gets a readout gene; the other readout genes feed one at random.
    position = jnp.zeros(n, jnp.int32).at[jnp.argsort(-jnp.where(readout_mask, jax.random.uniform(k[12], (n,)), -1.0))].set(genes.astype(jnp.int32))
    phenotype = jnp.where(position < N_PHENOTYPES, position, jax.random.randint(k[13], (n,), 0, N_PHENOTYPES))
    r = jax.random.uniform(k[14], (n,), minval=READOUT_WEIGHT[0], maxval=READOUT_WEIGHT[1])
    r = r * jnp.where(jax.random.uniform(k[15], (n,)) < 0.5, -1.0, 1.0)
    readout = jnp.zeros((N_PHENOTYPES, n)).at[phenotype, genes].set(jnp.where(readout_mask, r, 0.0))
    return dict(
        weights=weights, module=module, rank=rank, signal_effects=signal_effects, target_state=target_state,
        readout=readout, readout_mask=readout_mask, latent_mask=latent_mask,
    )


def _arrays(p: Plan, t: TierParams, net: dict, weights, bias, baseline_input, baseline_state, **rest) -> OrganismArrays:
    n, s = p.n, p.n_signals
    fields = dict(
        weights=weights,
        bias=bias,
        baseline_input=baseline_input,
        beta=t.beta,
        damping=t.damping,
        signal_effects=net["signal_effects"],
        readout=net["readout"],
        readout_gain=jnp.float32(READOUT_GAIN),
        baseline_state=baseline_state,
        noise_sigma=t.noise_sigma,
        module=net["module"],
        readout_mask=net["readout_mask"],
        latent_mask=net["latent_mask"],
        gene_lock=jnp.zeros(n, jnp.int8),
        signal_persist=jnp.zeros(s, bool),
        malfunction_target=jnp.int32(-1),
        malfunction_type=jnp.int32(NO_MALFUNCTION),
        n_alt=jnp.int32(0),
        baseline_phenotypes=jnp.full(N_PHENOTYPES, 0.5, jnp.float32),
        aberrant=jnp.zeros(N_PHENOTYPES, bool),
        task_genes=jnp.zeros((N_TASKS, 2), jnp.int32),
        task_codes=jnp.zeros((N_TASKS, 2), jnp.int8),
        task_truth=jnp.zeros((N_TASKS, N_PHENOTYPES), jnp.float32),
    )
    fields.update(rest)
    return OrganismArrays(**fields)


# Rows solved side by side in one vmapped solver loop at most: a row that needs
# all MAX_STEPS updates holds only its chunk (about 2^19 gene states per chunk).
SOLVE_CHUNK_STATES = 1 << 19


def _solve_rows(arrays: OrganismArrays, codes, flags) -> tuple[jax.Array, jax.Array]:
    """Noise-free phenotypes (B, P) and convergence (B,) of a batch of
    interventions, in chunks of at most SOLVE_CHUNK_STATES / N rows."""
    solve = jax.vmap(sim._solve, in_axes=(None, 0, 0, None, None))
    rows, n = codes.shape
    chunk = max(8, SOLVE_CHUNK_STATES // n)
    if rows <= chunk:
        r = solve(arrays, codes, flags, sim.MAX_STEPS, sim.TOL)
    else:
        # lax.map vmaps the per-row solve over each chunk
        r = jax.lax.map(lambda x: sim._solve(arrays, x[0], x[1], sim.MAX_STEPS, sim.TOL), (codes, flags), batch_size=chunk)
    return r.phenotypes, r.converged


def _singles(n: int, s: int, types) -> tuple[jax.Array, jax.Array]:
    """Codes (len(types) N + S, N) and flags: each type on each gene (type-major),
    then each signal alone."""
    codes = jnp.concatenate([jnp.eye(n, dtype=jnp.int8) * code for code in types] + [jnp.zeros((s, n), jnp.int8)])
    flags = jnp.concatenate([jnp.zeros((len(types) * n, s), bool), jnp.eye(s, dtype=bool)])
    return codes, flags


def spectral_radius_bound(matrix: jax.Array, squarings: int = STABILITY_SQUARINGS) -> jax.Array:
    """The spectral radius, estimated from above as ||A^(2^k)||^(1/2^k) by
    repeated normalised squaring (Gelfand's formula; runs on any backend,
    unlike ``eigvals``).

    With the max-abs norm the estimate can sit below the radius by a factor
    n^(-1/2^k) at most (1.3e-4 at N=4096, k=16), inside STABILITY_MARGIN. For
    strongly non-normal matrices (entries of the normalised powers spanning
    more than float32's range) small entries flush to zero and the estimate
    can follow a smaller eigenvalue; the generator's Jacobians are far from
    that (tests/test_generate.py compares it with ``eigvals``).
    """

    def square(i, carry):
        a, log_scale = carry
        norm = jnp.maximum(jnp.max(jnp.abs(a)), 1e-30)
        a = a / norm
        return a @ a, 2.0 * (log_scale + jnp.log(norm))

    a, log_scale = jax.lax.fori_loop(0, squarings, square, (matrix, jnp.float32(0.0)))
    # max-abs norm of A^(2^k) is within a factor n of any induced norm; that
    # factor's 2^k-th root is ~1 + log(n) / 2^k.
    log_norm = jnp.log(jnp.maximum(jnp.max(jnp.abs(a)), 1e-30)) + log_scale
    return jnp.exp(log_norm / 2.0**squarings)


def _settle(p: Plan, t: TierParams, net: dict, weights, key, backwards_of=None):
    """Steps 10-12: solve the baseline, check it is stable and every gene is
    visible, repair silent genes (at most REPAIR_ROUNDS rounds).

    The bias makes s* the healthy fixed point: b = logit(s*)/beta - W s*. The
    backwards organism keeps the inverted forward bias b' = -b_fwd, with
    ``backwards_of`` the forward weights. Inputs are evaluated as
    W (s - s*) + (constant), so float32 rounding never cancels large terms.

    Returns (status, arrays, singles (2N + S, P), weights).
    """
    n, s = p.n, p.n_signals
    target = net["target_state"]
    logit = jnp.log(target / (1 - target)) / t.beta
    codes, flags = _singles(n, s, (BLOCK, BOOST))
    genes = jnp.arange(n)

    def baseline(w):
        if backwards_of is None:
            bias = logit - w @ target
            constant = logit
        else:
            bias = -logit + backwards_of @ target
            constant = (w + backwards_of) @ target - logit  # only repair edges survive the sum
        start = target if backwards_of is None else jnp.full(n, 0.5, jnp.float32)
        provisional = _arrays(p, t, net, w, bias, w @ (start - target) + constant, start)
        r = sim._solve(provisional, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool), sim.MAX_STEPS, sim.TOL)
        state = r.states
        jacobian = (1 - t.damping) * jnp.eye(n) + t.damping * (t.beta * state * (1 - state))[:, None] * w
        stable = spectral_radius_bound(jacobian) < 1 - STABILITY_MARGIN
        arrays = _arrays(p, t, net, w, bias, w @ (state - target) + constant, state)
        return arrays, r.converged & stable

    def body(carry):
        w, rounds, _, _, _ = carry
        arrays, ok = baseline(w)
        phen, conv = _solve_rows(arrays, codes, flags)
        ok &= conv.all()
        shift = jnp.abs(phen[: 2 * n] - 0.5).max(axis=1).reshape(2, n).max(axis=0)
        silent = shift <= DETECTABLE_SHIFT
        # Repair: an edge from each silent gene g to a later readout gene h
        # (a fresh one if there is one, so existing edges stay intact).
        kr = jax.random.split(jax.random.fold_in(key, rounds), 3)
        later = net["readout_mask"][None, :] & (net["rank"][None, :] > net["rank"][:, None])  # [g, h]
        fresh = later & (w.T == 0)
        pick = jnp.where(fresh.any(axis=1, keepdims=True), fresh, later)
        h = jnp.argmax(jnp.where(pick, jax.random.uniform(kr[0], (n, n)), -1.0), axis=1)
        magnitude = jax.random.uniform(kr[1], (n,), minval=REPAIR_MAGNITUDE[0], maxval=REPAIR_MAGNITUDE[1])
        magnitude *= jnp.where(jax.random.uniform(kr[2], (n,)) >= t.inhibition, 1.0, -1.0)
        repaired = w.at[h, genes].set(jnp.where(silent, magnitude, w[h, genes]))
        repairable = ~(silent & ~later.any(axis=1)).any() & (rounds < REPAIR_ROUNDS)
        status = jnp.where(~ok, _FAILED, jnp.where(~silent.any(), _OK, jnp.where(repairable, _RUNNING, _FAILED)))
        w = jnp.where(status == _RUNNING, repaired, w)
        return w, rounds + 1, status, arrays, phen

    shapes = jax.eval_shape(baseline, weights)[0]
    init = (
        weights,
        jnp.int32(0),
        jnp.int32(_RUNNING),
        jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes),
        jnp.zeros((2 * n + s, N_PHENOTYPES), jnp.float32),
    )
    w, _, status, arrays, phen = jax.lax.while_loop(lambda c: c[2] == _RUNNING, body, init)
    return status, arrays, phen, w


def _with_malfunction(p: Plan, arrays: OrganismArrays, candidate) -> OrganismArrays:
    """Candidate c of the layout [LOCK_HI on genes | LOCK_LO on genes | PERSIST
    on signals] applied to ``arrays``."""
    n, s = p.n, p.n_signals
    kind = jnp.where(candidate < n, LOCK_HI, jnp.where(candidate < 2 * n, LOCK_LO, PERSIST))
    target = jnp.where(candidate < n, candidate, candidate - n)  # genes 0..N-1, signals N..
    lock = jnp.where((jnp.arange(n) == target) & (kind != PERSIST), kind, 0).astype(jnp.int8)
    persist = (jnp.arange(s) == candidate - 2 * n) & (kind == PERSIST)
    return dataclasses.replace(
        arrays, gene_lock=lock, signal_persist=persist,
        malfunction_target=target.astype(jnp.int32), malfunction_type=kind.astype(jnp.int32),
    )


def _malfunction(p: Plan, arrays: OrganismArrays, singles, key):
    """SPEC 1.6: a malfunction that sends a phenotype out of range and that some
    single-target intervention rescues; candidates are tried in random order.
    Returns (status, diseased arrays, n_alt)."""
    n, s = p.n, p.n_signals
    targetable = ~arrays.latent_mask
    # A lock is a clamp, so each candidate's disease phenotypes are those of a
    # single intervention already solved: LOCK_HI = BOOST, LOCK_LO = BLOCK.
    phen = jnp.concatenate([singles[n : 2 * n], singles[:n], singles[2 * n :]])
    valid = jnp.concatenate([targetable, targetable, jnp.ones(s, bool)])
    low, high = HEALTHY_RANGE
    out = (phen < low) | (phen > high)
    eligible = valid & out.any(axis=1)
    order = jnp.argsort(-jnp.where(eligible, jax.random.uniform(key, eligible.shape), -1.0))
    codes, flags = _singles(n, s, (BLOCK, BOOST, DAMPEN))
    row_valid = jnp.concatenate([targetable, targetable, targetable, jnp.ones(s, bool)])

    def body(carry):
        j, _, _ = carry
        c = order[j]
        rescued, conv = _solve_rows(_with_malfunction(p, arrays, c), codes, flags)
        restored = (rescued >= low) & (rescued <= high) & out[c] & row_valid[:, None]
        ok = (conv | ~row_valid).all() & restored.any()
        status = jnp.where(ok, _OK, jnp.where(j + 1 < eligible.sum(), _RUNNING, _FAILED))
        return j + 1, status, c

    init_status = jnp.where(eligible.any(), _RUNNING, _FAILED)
    _, status, c = jax.lax.while_loop(lambda x: x[1] == _RUNNING, body, (jnp.int32(0), init_status, jnp.int32(0)))
    n_alt = jnp.sum(valid & (jnp.abs(phen - phen[c]).max(axis=1) <= N_ALT_TOLERANCE)) - 1
    return status, _with_malfunction(p, arrays, c), n_alt.astype(jnp.int32)


def _tasks(p: Plan, arrays: OrganismArrays, singles, key):
    """SPEC 1.7: two held-out, non-additive BLOCK/BOOST pairs of targetable
    readout genes from different modules that share a phenotype, tried in
    random order. Returns (status, baseline phenotypes, task fields)."""
    n, s = p.n, p.n_signals
    base, base_conv = _solve_rows(arrays, jnp.zeros((1, n), jnp.int8), jnp.zeros((1, s), bool))
    base = base[0]
    effect = singles[: 2 * n].reshape(2, n, N_PHENOTYPES) - base  # [BLOCK, BOOST]
    pool = arrays.readout_mask & ~arrays.latent_mask
    genes = jnp.arange(n)
    share = ((arrays.readout != 0).T.astype(jnp.int32) @ (arrays.readout != 0).astype(jnp.int32)) > 0
    pairs = pool[:, None] & pool[None, :] & (genes[:, None] < genes[None, :]) & share
    pairs &= arrays.module[:, None] != arrays.module[None, :]
    combos = jnp.broadcast_to(pairs[:, :, None], (n, n, len(TYPE_PAIRS))).reshape(-1)
    n_valid = combos.sum()
    order = jnp.argsort(-jnp.where(combos, jax.random.uniform(key, combos.shape), -1.0))
    pad = -order.size % TASK_CHUNK
    order = jnp.concatenate([order, jnp.zeros(pad, order.dtype)])  # combo 0 (gene 0 with itself) is never valid
    type_pairs = jnp.asarray(TYPE_PAIRS, jnp.int8)
    rows = jnp.arange(TASK_CHUNK)

    def body(carry):
        start, count, _, genes_, codes_, truth_ = carry
        idx = jax.lax.dynamic_slice(order, (start,), (TASK_CHUNK,))
        a, b, ti = idx // (n * len(TYPE_PAIRS)), (idx // len(TYPE_PAIRS)) % n, idx % len(TYPE_PAIRS)
        ta, tb = type_pairs[ti, 0], type_pairs[ti, 1]
        codes = jnp.zeros((TASK_CHUNK, n), jnp.int8).at[rows, a].set(ta).at[rows, b].set(tb)
        joint, conv = _solve_rows(arrays, codes, jnp.zeros((TASK_CHUNK, s), bool))
        additive = base + effect[(ta == BOOST).astype(jnp.int32), a] + effect[(tb == BOOST).astype(jnp.int32), b]
        good = combos[idx] & (start + rows < n_valid) & conv & (jnp.abs(joint - additive).max(axis=1) > NON_ADDITIVE)

        def accept(k, acc):
            count, genes_, codes_, truth_ = acc
            repeat = (count > 0) & (genes_[0, 0] == a[k]) & (genes_[0, 1] == b[k])
            take = good[k] & (count < N_TASKS) & ~repeat
            slot = jnp.minimum(count, N_TASKS - 1)
            genes_ = jnp.where(take, genes_.at[slot].set(jnp.stack([a[k], b[k]]).astype(jnp.int32)), genes_)
            codes_ = jnp.where(take, codes_.at[slot].set(jnp.stack([ta[k], tb[k]])), codes_)
            truth_ = jnp.where(take, truth_.at[slot].set(joint[k]), truth_)
            return count + take, genes_, codes_, truth_

        count, genes_, codes_, truth_ = jax.lax.fori_loop(0, TASK_CHUNK, accept, (count, genes_, codes_, truth_))
        start = start + TASK_CHUNK
        status = jnp.where(count == N_TASKS, _OK, jnp.where(start < n_valid, _RUNNING, _FAILED))
        return start, count, status, genes_, codes_, truth_

    init = (
        jnp.int32(0), jnp.int32(0), jnp.where(n_valid > 0, _RUNNING, _FAILED),
        jnp.zeros((N_TASKS, 2), jnp.int32), jnp.zeros((N_TASKS, 2), jnp.int8), jnp.zeros((N_TASKS, N_PHENOTYPES), jnp.float32),
    )
    _, _, status, task_genes, task_codes, task_truth = jax.lax.while_loop(lambda c: c[2] == _RUNNING, body, init)
    return status, base, base_conv[0], dict(task_genes=task_genes, task_codes=task_codes, task_truth=task_truth)


def _attempt(seed_hi, seed_lo, attempt, t: TierParams, p: Plan) -> tuple[OrganismArrays, jax.Array]:
    """One generation attempt for one triple: (arrays, ok). Traceable and pure."""
    triple = organism_key(seed_hi, seed_lo, t.index, p.n)
    key = jax.random.fold_in(triple, attempt)
    net = _network(jax.random.fold_in(key, 0), p, t)
    status, arrays, singles, weights = _settle(p, t, net, net["weights"], jax.random.fold_in(key, 3))
    if p.backwards:
        # The backwards organism inverts the settled forward one (paper
        # appendix E.1): weights, bias, signal effects and readout flip sign,
        # and the phenotypes are re-centred on the new baseline.
        net = dict(net, signal_effects=-net["signal_effects"], readout=-net["readout"])
        back, arrays, singles, _ = _settle(p, t, net, -weights, jax.random.fold_in(key, 4), backwards_of=weights)
        status = jnp.where(status == _OK, back, _FAILED)
    ok = status == _OK
    if p.disease:
        m_status, arrays, n_alt = _malfunction(p, arrays, singles, jax.random.fold_in(triple, 10))
        ok &= m_status == _OK
        # The tasks are chosen and scored on the diseased dynamics.
        codes, flags = _singles(p.n, p.n_signals, (BLOCK, BOOST))
        task_singles, task_conv = _solve_rows(arrays, codes[: 2 * p.n], flags[: 2 * p.n])  # genes only
        pool = arrays.readout_mask & ~arrays.latent_mask
        ok &= (task_conv | ~jnp.concatenate([pool, pool])).all()
    else:
        n_alt, task_singles = jnp.int32(0), singles
    t_status, base, base_conv, tasks = _tasks(p, arrays, task_singles, jax.random.fold_in(triple, 20))
    ok &= (t_status == _OK) & base_conv
    low, high = HEALTHY_RANGE
    arrays = dataclasses.replace(
        arrays, n_alt=n_alt, baseline_phenotypes=base, aberrant=(base < low) | (base > high), **tasks
    )
    return arrays, ok


@partial(jax.jit, static_argnames=("p", "map_batch"))
def _attempt_batch(seed_hi, seed_lo, attempt, t: TierParams, p: Plan, map_batch: int):
    """One attempt for a batch: ``lax.map`` over groups of ``map_batch``
    organisms, ``vmap`` within a group. Every group has the same shape, so an
    organism's result does not depend on the batch it was generated in."""
    return jax.lax.map(lambda x: _attempt(*x, t, p), (seed_hi, seed_lo, attempt), batch_size=map_batch)


def traced_generate(seed_hi, seed_lo, t: TierParams, p: Plan, max_attempts: int = MAX_ATTEMPTS):
    """Generation of one organism as a traceable JAX function: attempts run in
    a ``lax.while_loop`` until one meets every guarantee. Returns (arrays, ok);
    ``ok`` is False when ``max_attempts`` attempts all failed.

    Use it inside your own ``jit`` (``vmap`` it over seeds): the result equals
    :func:`generate`'s, which runs the same attempts with a host-side retry of
    the failed organisms only. ``seed_hi`` / ``seed_lo`` are the seed's uint32
    words; ``t`` and ``p`` come from :func:`tier_params` and :func:`plan`.
    """
    shapes = jax.eval_shape(lambda: _attempt(seed_hi, seed_lo, jnp.int32(0), t, p))

    def body(carry):
        attempt, _, _ = carry
        arrays, ok = _attempt(seed_hi, seed_lo, attempt, t, p)
        return attempt + 1, ok, arrays

    init = (jnp.int32(0), jnp.bool_(False), jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes[0]))
    _, ok, arrays = jax.lax.while_loop(lambda c: ~c[1] & (c[0] < max_attempts), body, init)
    return arrays, ok


def map_batch() -> int:
    """Organisms generated side by side (vmapped) in one group. Their loops
    (solver steps, repair rounds, candidate searches) run until the slowest
    member is done, so on a CPU one at a time is fastest (measured: 0.25 s vs
    1.1 s for 256 hard organisms' settling); an accelerator wants wide groups.
    Override with ``LUCA_GYM_GENERATION_GROUP``."""
    value = os.environ.get("LUCA_GYM_GENERATION_GROUP")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"LUCA_GYM_GENERATION_GROUP: {value!r} not allowed; a positive integer")
        return int(value)
    return 1 if jax.default_backend() == "cpu" else 256


def _call_sizes(group: int) -> tuple[int, ...]:
    """Batch sizes one generation call is padded to (each is a compile, which
    takes seconds): on a CPU (groups of one) 1 and 16, with larger batches run
    as a series of 16-organism calls; with groups of g, g, 16 g, 256 g ... up
    to 4096 (an accelerator's default g = 256 gives 256 and 4096)."""
    if group == 1:
        return (1, 16)
    sizes_ = [group]
    while sizes_[-1] * 16 <= max(4096, group):
        sizes_.append(sizes_[-1] * 16)
    return tuple(sizes_)


def generate(seeds, tier: str, n_genes: int = 20, mode: str = "healthy", backwards: bool = False) -> OrganismArrays:
    """The organism arrays of many triples at once, stacked on a leading axis.

    Each attempt of SPEC 1.3 runs for the whole batch as jitted calls on the
    default device; only the organisms whose attempt failed are retried with
    the next attempt. Row ``i`` is bitwise the ``arrays`` of
    ``make_organism(seeds[i], ...)`` on the same backend, whatever the batch.

    Raises ValueError on a bad argument and RuntimeError when a triple meets no
    guarantee within MAX_ATTEMPTS attempts.
    """
    seeds = _check_seeds(seeds)
    check_triple(0, tier, n_genes, mode)
    p, t = plan(n_genes, mode, _check_backwards(backwards)), tier_params(tier, n_genes)
    hi = (seeds >> 32).astype(np.uint32)
    lo = (seeds & 0xFFFFFFFF).astype(np.uint32)
    group = map_batch()
    sizes_ = _call_sizes(group)
    result = None
    pending = np.arange(seeds.size)
    for attempt in range(MAX_ATTEMPTS):
        if pending.size == 0:
            break
        calls = []
        for start in range(0, pending.size, sizes_[-1]):  # dispatch every call, then collect
            rows = pending[start : start + sizes_[-1]]
            size = next(b for b in sizes_ if b >= rows.size)
            padded = np.concatenate([rows, np.full(size - rows.size, rows[0])])
            calls.append((rows, _attempt_batch(hi[padded], lo[padded], np.full(size, attempt, np.int32), t, p, group)))
        done = []
        # Assembled on the host: no compile per batch size (the vector env asks
        # for any count), and on a GPU an N=20 batch of 4096 is 17 MB.
        for rows, (arrays, ok) in calls:
            ok = np.asarray(ok)[: rows.size]
            arrays = jax.tree_util.tree_map(np.asarray, arrays)
            if result is None:
                result = jax.tree_util.tree_map(lambda x: np.zeros((seeds.size,) + x.shape[1:], x.dtype), arrays)
            for dst, src in zip(jax.tree_util.tree_leaves(result), jax.tree_util.tree_leaves(arrays)):
                dst[rows[ok]] = src[: rows.size][ok]
            done.append(rows[ok])
        pending = np.setdiff1d(pending, np.concatenate(done))
    if pending.size:
        raise RuntimeError(
            f"no organism met the guarantees for seed={int(seeds[pending[0]])}, tier={tier!r}, "
            f"n_genes={n_genes} after {MAX_ATTEMPTS} attempts"
        )
    return jax.tree_util.tree_map(jnp.asarray, result)


def _check_seeds(seeds) -> np.ndarray:
    values = np.asarray(seeds)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"seeds: shape {values.shape} not allowed; a non-empty 1-d sequence of seeds")
    if values.dtype.kind not in "iu":
        raise ValueError(f"seeds: dtype {values.dtype} not allowed; integers 0..2**63-1")
    if values.dtype.kind == "i" and np.any(values < 0):
        raise ValueError(f"seeds: {int(values[values < 0][0])} out of range; allowed 0..2**63-1")
    if values.dtype == np.uint64 and np.any(values >= 2**63):
        raise ValueError(f"seeds: {int(values[values >= 2**63][0])} out of range; allowed 0..2**63-1")
    return values.astype(np.int64)


def _check_backwards(backwards) -> bool:
    if not isinstance(backwards, (bool, np.bool_)):
        raise ValueError(f"backwards: {backwards!r} is not a bool; allowed True or False")
    return bool(backwards)


def make_organism(
    seed: int, tier: str, n_genes: int = 20, mode: str = "healthy", backwards: bool = False
) -> Organism:
    """Generate the organism of ``(seed, tier, n_genes)`` (SPEC 1.3).

    Args:
        seed: non-negative integer.
        tier: ``"easy"``, ``"medium"`` or ``"hard"``.
        n_genes: 4..4096.
        mode: ``"healthy"`` or ``"disease"`` (adds one malfunction, SPEC 1.6).
        backwards: invert every signed quantity (weights, biases, signal modes,
            readout weights; paper appendix E.1) and re-centre the phenotypes.

    The healthy and disease organisms of one triple share their network; the
    disease one adds the malfunction, and its prediction tasks are chosen and
    scored on the diseased dynamics. :func:`generate` makes many at once.
    """
    check_triple(seed, tier, n_genes, mode)
    backwards = _check_backwards(backwards)
    arrays = jax.tree_util.tree_map(lambda x: x[0], generate([seed], tier, n_genes, mode, backwards))
    return Organism(arrays=arrays, meta=organism_meta(seed, tier, n_genes, mode, backwards, arrays.signal_effects))


def organism_meta(seed: int, tier: str, n_genes: int, mode: str, backwards: bool, signal_effects) -> OrganismMeta:
    """The names of an organism (host-side strings, a pure function of the triple)."""
    sz = sizes(n_genes)
    names_rng = np.random.default_rng(np.random.SeedSequence([int(seed), TIERS[tier].index, n_genes, 0, 30]))
    effects = np.asarray(signal_effects)
    return OrganismMeta(
        seed=int(seed),
        tier=tier,
        n_genes=n_genes,
        mode=mode,
        backwards=bool(backwards),
        gene_names=vocabulary.gene_names(n_genes),
        module_names=vocabulary.module_names(names_rng, sz.n_modules),
        signal_labels=vocabulary.signal_labels(names_rng, sz.n_signals),
        signal_modes=tuple("activates" if row.sum() > 0 else "inhibits" for row in effects),
        phenotype_names=vocabulary.phenotype_names(names_rng, N_PHENOTYPES),
    )
