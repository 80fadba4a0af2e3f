"""The LUCA world: tiers, scaling rules and the organism generator (SPEC §1).

``make_organism(seed, tier, n_genes, mode, backwards)`` is a pure function of
its arguments: the generator draws from numpy generators seeded by
``(seed, tier, n_genes, attempt, stream)`` and checks every guarantee with the
same JAX solver the sessions use. An attempt that cannot be repaired is
replaced by the next one, so the result stays a pure function of the triple.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    scored on the diseased dynamics.
    """
    check_triple(seed, tier, n_genes, mode)
    if not isinstance(backwards, (bool, np.bool_)):
        raise ValueError(f"backwards: {backwards!r} is not a bool; allowed True or False")
    t = TIERS[tier]
    for attempt in range(MAX_ATTEMPTS):
        organism = _Attempt(seed, t, n_genes, mode, bool(backwards), attempt).run()
        if organism is not None:
            return organism
    raise RuntimeError(
        f"no organism met the guarantees for seed={seed}, tier={tier!r}, n_genes={n_genes} "
        f"after {MAX_ATTEMPTS} attempts"
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


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def solve_many(arrays: OrganismArrays, codes: np.ndarray, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free phenotypes (B, P) and convergence (B,) of a batch of
    interventions on one organism. The batch is padded to a power of two (in
    chunks) so each organism size compiles a handful of shapes only."""
    n = arrays.n_genes
    chunk = max(8, min(_next_pow2(len(codes)), _next_pow2(max(8, (1 << 19) // n))))
    phen, conv = [], []
    for start in range(0, len(codes), chunk):
        c, f = codes[start : start + chunk], flags[start : start + chunk]
        pad = chunk - len(c)
        c = np.concatenate([c, np.zeros((pad, n), np.int8)])
        f = np.concatenate([f, np.zeros((pad, flags.shape[1]), bool)])
        r = sim.solve_interventions(arrays, c, f)
        phen.append(np.asarray(r.phenotypes)[: chunk - pad])
        conv.append(np.asarray(r.converged)[: chunk - pad])
    return np.concatenate(phen), np.concatenate(conv)


def single_target_interventions(n_genes: int, n_signals: int, genes: np.ndarray, types) -> tuple[np.ndarray, np.ndarray]:
    """Codes (B, N) and flags (B, S): each of ``types`` on each gene of ``genes``
    (type-major order), then each signal activated alone."""
    rows = len(types) * len(genes) + n_signals
    codes = np.zeros((rows, n_genes), np.int8)
    flags = np.zeros((rows, n_signals), bool)
    for k, code in enumerate(types):
        codes[k * len(genes) + np.arange(len(genes)), genes] = code
    flags[len(types) * len(genes) + np.arange(n_signals), np.arange(n_signals)] = True
    return codes, flags


class _Attempt:
    """One generation attempt; ``run()`` returns an Organism or None."""

    def __init__(self, seed: int, tier: Tier, n: int, mode: str, backwards: bool, attempt: int):
        self.seed, self.tier, self.n, self.mode, self.backwards = seed, tier, n, mode, backwards
        self.attempt = attempt
        self.sizes = sizes(n)

    def rng(self, stream: int, with_attempt: bool = True) -> np.random.Generator:
        key = [self.seed, self.tier.index, self.n, self.attempt if with_attempt else 0, stream]
        return np.random.default_rng(np.random.SeedSequence(key))

    # -- steps 2-9: topology and parameters -----------------------------------
    def build_network(self) -> None:
        n, t, sz = self.n, self.tier, self.sizes
        rng = self.rng(0)
        m = sz.n_modules
        # Balanced modules (sizes differ by at most one): random sizes made the
        # intra-module pair count, hence the edge count, swing past the paper's range.
        module = np.empty(n, np.int32)
        module[rng.permutation(n)] = np.arange(n) % m

        order = rng.permutation(n)
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        adj = np.zeros((n, n), bool)  # adj[i, j]: edge j -> i
        same = module[:, None] == module[None, :]
        off_diag = ~np.eye(n, dtype=bool)
        forward = rank[None, :] < rank[:, None]
        for pairs, density in ((same & off_diag, t.intra_density), (~same, t.inter_density)):
            # An exact edge count (density x ordered pairs) placed on forward
            # pairs: a DAG backbone with the paper's edge totals.
            candidates = np.flatnonzero(pairs & forward)
            k = min(round_half_up(density * pairs.sum()), candidates.size)
            adj.flat[rng.choice(candidates, size=k, replace=False)] = True
        for _ in range(round_half_up(t.ffl_per_20 * n / 20)):
            a, b, c = sorted(rng.choice(n, 3, replace=False), key=lambda g: rank[g])
            adj[b, a] = adj[c, b] = adj[c, a] = True
        # Feedback edges close a loop: along a forward edge i -> k (and on to a
        # child j of k when k has one), then back to i.
        for _ in range(round_half_up(t.feedback_per_20 * n / 20)):
            k, i = np.argwhere(adj & forward)[rng.integers(np.count_nonzero(adj & forward))]
            children = np.flatnonzero(adj[:, k] & (rank > rank[k]))
            j = rng.choice(children) if children.size else k
            adj[i, j] = True
        magnitude = rng.uniform(*WEIGHT_MAGNITUDE, size=(n, n)) * weight_scale(t, n)
        sign = np.where(rng.random((n, n)) < t.inhibition, -1.0, 1.0)
        self.weights = np.where(adj, magnitude * sign, 0.0)
        self.module, self.rank = module, rank

        rng = self.rng(1)
        s = sz.n_signals
        self.signal_modes = tuple("activates" if rng.random() < 0.5 else "inhibits" for _ in range(s))
        effects = np.zeros((s, n))
        for k in range(s):
            targets = rng.choice(n, size=rng.integers(1, sz.signal_max_targets + 1), replace=False)
            sign = 1.0 if self.signal_modes[k] == "activates" else -1.0
            effects[k, targets] = sign * rng.uniform(*SIGNAL_STRENGTH, size=targets.size)
        self.signal_effects = effects

        # Biases put a mid-range state s* exactly at the healthy fixed point.
        self.target_state = rng.uniform(*BASELINE_STATE, size=n)

        # Readout genes: sinks first (a gene with no outgoing edge can only be
        # seen if it is read out), one per module guaranteed, then at random.
        rng = self.rng(2)
        n_readout = max(m, round_half_up(t.observability * n))
        sinks = set(np.flatnonzero(~adj.any(axis=0)).tolist())
        chosen: list[int] = []
        for mod in rng.permutation(m):
            members = np.flatnonzero(module == mod)
            preferred = [g for g in members if g in sinks] or list(members)
            chosen.append(int(rng.choice(preferred)))
        rest = [g for g in rng.permutation(n) if g not in chosen]
        rest.sort(key=lambda g: g not in sinks)  # stable: sinks first, random otherwise
        chosen += [int(g) for g in rest[: n_readout - len(chosen)]]
        readout_mask = np.zeros(n, bool)
        readout_mask[chosen] = True
        pool = rng.permutation(np.flatnonzero(~readout_mask))
        latent_mask = np.zeros(n, bool)
        latent_mask[pool[: min(pool.size, round_half_up(t.latent_fraction * n))]] = True

        readout = np.zeros((N_PHENOTYPES, n))
        genes = rng.permutation(np.flatnonzero(readout_mask))
        phen = np.concatenate([np.arange(min(N_PHENOTYPES, genes.size)), rng.integers(N_PHENOTYPES, size=max(0, genes.size - N_PHENOTYPES))])
        readout[phen, genes] = rng.uniform(*READOUT_WEIGHT, size=genes.size) * np.where(rng.random(genes.size) < 0.5, -1.0, 1.0)
        self.readout, self.readout_mask, self.latent_mask = readout, readout_mask, latent_mask

        self.fixed_bias = None

    def flip(self) -> None:
        """The backwards organism (appendix E.1): every signed quantity of the
        settled forward organism inverted -- weights, biases, signal modes,
        readout weights; phenotypes are re-centred on the new baseline."""
        self.fixed_bias = -self.bias()
        self.weights, self.signal_effects, self.readout = -self.weights, -self.signal_effects, -self.readout
        self.signal_modes = tuple("inhibits" if x == "activates" else "activates" for x in self.signal_modes)

    def bias(self) -> np.ndarray:
        """Forward: the bias that makes s* the healthy fixed point of the
        current weights. Backwards: the inverted forward bias, fixed."""
        if self.fixed_bias is not None:
            return self.fixed_bias
        s = self.target_state
        return np.log(s / (1 - s)) / self.tier.beta - self.weights @ s

    def arrays(self, baseline_state, **disease) -> OrganismArrays:
        n, s = self.n, self.sizes.n_signals
        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        fields = dict(
            weights=f32(self.weights),
            bias=f32(self.current_bias),
            baseline_input=f32(self.weights @ np.asarray(baseline_state, np.float64) + self.current_bias),
            beta=f32(self.tier.beta),
            damping=f32(self.tier.damping),
            signal_effects=f32(self.signal_effects),
            readout=f32(self.readout),
            readout_gain=f32(READOUT_GAIN),
            baseline_state=f32(baseline_state),
            noise_sigma=f32(self.tier.noise_sigma),
            module=jnp.asarray(self.module, jnp.int32),
            readout_mask=jnp.asarray(self.readout_mask),
            latent_mask=jnp.asarray(self.latent_mask),
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
        fields.update(disease)
        return OrganismArrays(**fields)

    # -- step 10: dynamics and the healthy baseline ----------------------------
    def solve_baseline(self) -> OrganismArrays | None:
        """The healthy steady state, or None if it is not reached or not stable
        (an unstable fixed point would not be the solver's answer from nearby)."""
        self.current_bias = self.bias()
        start = self.target_state if self.fixed_bias is None else np.full(self.n, 0.5)
        provisional = self.arrays(start)
        r = sim.solve(provisional, np.zeros(self.n, np.int8), np.zeros(self.sizes.n_signals, bool))
        if not bool(r.converged):
            return None
        state = np.asarray(r.states, np.float64)
        d = self.tier.damping
        jacobian = (1 - d) * np.eye(self.n) + d * (self.tier.beta * state * (1 - state))[:, None] * self.weights
        if np.max(np.abs(np.linalg.eigvals(jacobian))) >= 1 - STABILITY_MARGIN:
            return None
        return self.arrays(state)

    # -- steps 11-13: every gene visible, latent genes relevant ----------------
    def visible(self, arrays: OrganismArrays):
        """Single BLOCK and BOOST of every gene, then every signal: phenotypes
        (2N + S, P), or None if a solve failed to converge."""
        codes, flags = single_target_interventions(self.n, self.sizes.n_signals, np.arange(self.n), (BLOCK, BOOST))
        phen, conv = solve_many(arrays, codes, flags)
        return phen if conv.all() else None

    def repair_silent(self, singles: np.ndarray) -> bool:
        """Add an edge from each silent gene to a later readout gene. Returns
        False when nothing could be repaired (the attempt is dropped)."""
        n = self.n
        shift = np.abs(singles[: 2 * n] - 0.5).max(axis=1).reshape(2, n).max(axis=0)
        silent = np.flatnonzero(shift <= DETECTABLE_SHIFT)
        if silent.size == 0:
            return True
        rng = self.rng(3 + self.repairs + (REPAIR_ROUNDS + 1 if self.fixed_bias is not None else 0))
        for g in silent:
            later = np.flatnonzero(self.readout_mask & (self.rank > self.rank[g]))
            if later.size == 0:
                return False
            fresh = later[self.weights[later, g] == 0]  # a new edge leaves the existing ones intact
            h = rng.choice(fresh if fresh.size else later)
            magnitude = rng.uniform(*REPAIR_MAGNITUDE) * (1 if rng.random() >= self.tier.inhibition else -1)
            self.weights[h, g] = magnitude
        return True

    # -- SPEC 1.6: the malfunction ---------------------------------------------
    def choose_malfunction(self, arrays: OrganismArrays, singles: np.ndarray):
        n, s = self.n, self.sizes.n_signals
        targetable = np.flatnonzero(~self.latent_mask)
        # A lock is a clamp, so each candidate's disease phenotypes are those of
        # a single intervention already solved: LOCK_HI = BOOST, LOCK_LO = BLOCK.
        cand_target = np.concatenate([targetable, targetable, n + np.arange(s)])
        cand_type = np.concatenate([np.full(targetable.size, LOCK_HI), np.full(targetable.size, LOCK_LO), np.full(s, PERSIST)])
        cand_phen = np.concatenate([singles[n + targetable], singles[targetable], singles[2 * n :]])
        low, high = HEALTHY_RANGE
        out = (cand_phen < low) | (cand_phen > high)
        rng = self.rng(10, with_attempt=False)
        codes, flags = single_target_interventions(n, s, targetable, (BLOCK, BOOST, DAMPEN))
        for c in rng.permutation(cand_target.size):
            if not out[c].any():
                continue
            diseased = self.with_malfunction(arrays, cand_target[c], cand_type[c])
            phen, conv = solve_many(diseased, codes, flags)
            restored = (phen >= low) & (phen <= high) & out[c]
            if not conv.all() or not restored.any():
                continue
            n_alt = int(np.sum(np.abs(cand_phen - cand_phen[c]).max(axis=1) <= N_ALT_TOLERANCE)) - 1
            return diseased, n_alt
        return None

    def with_malfunction(self, arrays: OrganismArrays, target: int, kind: int) -> OrganismArrays:
        n = self.n
        lock = np.zeros(n, np.int8)
        persist = np.zeros(self.sizes.n_signals, bool)
        if kind == PERSIST:
            persist[target - n] = True
        else:
            lock[target] = kind
        return self.arrays(
            arrays.baseline_state,
            gene_lock=jnp.asarray(lock),
            signal_persist=jnp.asarray(persist),
            malfunction_target=jnp.int32(target),
            malfunction_type=jnp.int32(kind),
        )

    # -- SPEC 1.7: prediction tasks --------------------------------------------
    def choose_tasks(self, arrays: OrganismArrays):
        n, s = self.n, self.sizes.n_signals
        pool = np.flatnonzero(self.readout_mask & ~self.latent_mask)
        codes, flags = single_target_interventions(n, s, pool, (BLOCK, BOOST))
        phen, conv = solve_many(arrays, codes, flags)
        if not conv.all():
            return None
        base = np.asarray(sim.solve(arrays, np.zeros(n, np.int8), np.zeros(s, bool)).phenotypes)
        effect = {BLOCK: phen[: pool.size] - base, BOOST: phen[pool.size : 2 * pool.size] - base}
        index = {int(g): k for k, g in enumerate(pool)}
        shares = (self.readout[:, pool] != 0).T.astype(np.int32)
        share = (shares @ shares.T) > 0
        cross = self.module[pool][:, None] != self.module[pool][None, :]
        a_idx, b_idx = np.nonzero(np.triu(share & cross, k=1))
        pairs = np.stack([pool[a_idx], pool[b_idx]], axis=1)
        if pairs.size == 0:
            return None
        type_pairs = np.array([(BLOCK, BLOCK), (BLOCK, BOOST), (BOOST, BLOCK), (BOOST, BOOST)], np.int8)
        rng = self.rng(20, with_attempt=False)
        order = rng.permutation(len(pairs) * len(type_pairs))
        tasks: list[tuple] = []
        for start in range(0, order.size, 64):
            batch = order[start : start + 64]
            genes = pairs[batch // len(type_pairs)]
            types = type_pairs[batch % len(type_pairs)]
            c = np.zeros((batch.size, n), np.int8)
            c[np.arange(batch.size), genes[:, 0]] = types[:, 0]
            c[np.arange(batch.size), genes[:, 1]] = types[:, 1]
            joint, ok = solve_many(arrays, c, np.zeros((batch.size, s), bool))
            for k in range(batch.size):
                ga, gb = int(genes[k, 0]), int(genes[k, 1])
                additive = base + effect[int(types[k, 0])][index[ga]] + effect[int(types[k, 1])][index[gb]]
                if not ok[k] or np.abs(joint[k] - additive).max() <= NON_ADDITIVE:
                    continue
                if any({ga, gb} == {t[0], t[1]} for t in tasks):
                    continue
                tasks.append((ga, gb, int(types[k, 0]), int(types[k, 1]), joint[k]))
                if len(tasks) == N_TASKS:
                    return tasks, base
        return None

    def settle(self):
        """Steps 10-12: solve the baseline, check every gene is visible, repair
        and repeat. Returns (arrays, single-target phenotypes) or None."""
        self.repairs = 0
        while True:
            arrays = self.solve_baseline()
            if arrays is None:
                return None
            singles = self.visible(arrays)
            if singles is None:
                return None
            shift = np.abs(singles[: 2 * self.n] - 0.5).max(axis=1).reshape(2, self.n).max(axis=0)
            if (shift > DETECTABLE_SHIFT).all():
                return arrays, singles
            if self.repairs == REPAIR_ROUNDS or not self.repair_silent(singles):
                return None
            self.repairs += 1

    def run(self) -> Organism | None:
        self.build_network()
        settled = self.settle()
        if settled is not None and self.backwards:
            # The backwards organism inverts the settled forward one, so both
            # share their network (up to repairs the inverted dynamics need).
            self.flip()
            settled = self.settle()
        if settled is None:
            return None
        arrays, singles = settled

        n_alt = 0
        if self.mode == "disease":
            chosen = self.choose_malfunction(arrays, singles)
            if chosen is None:
                return None
            arrays, n_alt = chosen
        found = self.choose_tasks(arrays)
        if found is None:
            return None
        tasks, base = found
        low, high = HEALTHY_RANGE
        arrays = self.arrays(
            arrays.baseline_state,
            gene_lock=arrays.gene_lock,
            signal_persist=arrays.signal_persist,
            malfunction_target=arrays.malfunction_target,
            malfunction_type=arrays.malfunction_type,
            n_alt=jnp.int32(n_alt),
            baseline_phenotypes=jnp.asarray(base, jnp.float32),
            aberrant=jnp.asarray((base < low) | (base > high)),
            task_genes=jnp.asarray([[t[0], t[1]] for t in tasks], jnp.int32),
            task_codes=jnp.asarray([[t[2], t[3]] for t in tasks], jnp.int8),
            task_truth=jnp.asarray(np.stack([t[4] for t in tasks]), jnp.float32),
        )
        names_rng = self.rng(30, with_attempt=False)
        meta = OrganismMeta(
            seed=int(self.seed),
            tier=self.tier.name,
            n_genes=self.n,
            mode=self.mode,
            backwards=self.backwards,
            gene_names=vocabulary.gene_names(self.n),
            module_names=vocabulary.module_names(names_rng, self.sizes.n_modules),
            signal_labels=vocabulary.signal_labels(names_rng, self.sizes.n_signals),
            signal_modes=self.signal_modes,
            phenotype_names=vocabulary.phenotype_names(names_rng, N_PHENOTYPES),
        )
        return Organism(arrays=arrays, meta=meta)
