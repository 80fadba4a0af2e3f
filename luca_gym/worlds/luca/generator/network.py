"""The gene-regulatory network of an organism (SPEC 1.3 steps 2-12).

Drawing the network (modules, edges, feed-forward loops, feedback edges,
weights, signals, target states, readout and latent genes), then settling it:
the bias that makes the drawn target state the healthy fixed point, the check
that this fixed point is stable, and the repair of genes no single
intervention makes visible. Every step is a JAX function of a key, so it
traces into the batched generator; shapes are fixed per :class:`Plan` (random
choices are masks and top-k selections over all genes, and the repair loop is
a ``lax.while_loop``). The solves and the batched single interventions here are
also what the malfunction and task searches use.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import sim
from luca_gym.worlds.luca.spec import BLOCK, BOOST, N_PHENOTYPES, N_TASKS, NETWORK_SHIFT_THRESHOLD, NO_MALFUNCTION
from luca_gym.worlds.luca.types import OrganismArrays
from luca_gym.worlds.luca.generator.tiers import Plan, TierParams
from luca_gym.worlds.luca.precision import matmul

# Readout steepness gamma and readout weight range (ours). gamma = 2 makes a
# direct readout change clearly visible (a BLOCK moves its phenotype by ~0.1-0.3)
# while a change passed on through the network mostly stays under the 0.10
# threshold on easy organisms, as in the paper (random ~0.667 on easy; gamma = 3
# or 4 let spill-over move a second phenotype and random fell to 0.53-0.59).
READOUT_GAIN = 2.0
READOUT_WEIGHT = (0.8, 1.2)
READOUT_LEAK = 0.2
WEIGHT_MAGNITUDE = (0.5, 1.5)
SIGNAL_STRENGTH = (1.0, 2.0)
REPAIR_ROUNDS = 10
# A repair edge is strong (and unscaled): one direct link must make the gene visible at any N.
REPAIR_MAGNITUDE = (1.0, 1.5)
# The healthy fixed point must attract the solver's damped update.
STABILITY_MARGIN = 1e-3
# Rows solved side by side in one vmapped solver loop at most: a row that needs
# all MAX_STEPS updates holds only its chunk (about 2^19 gene states per chunk).
SOLVE_CHUNK_STATES = 1 << 19
# A batch of solves on a CPU: updates every row takes side by side, then the
# slots the rows still running finish in (see solve_rows; measured at N=20).
FIRST_STEPS = 64
REFILL_SLOTS = 8

# Statuses of a search inside the traced loops (settling, malfunction, tasks).
RUNNING, OK, FAILED = 0, 1, 2


def only_if(pred, fn, operands, fallback):
    """``fn(*operands)`` where ``pred`` (bool scalar) holds, else ``fallback``
    (the structure ``fn`` returns): a while loop of one iteration or none.

    Generation skips work with it that cannot change an attempt's outcome (the
    searches after a failed settling, the solves after an unstable baseline).
    A ``cond`` would not do: under ``vmap`` (groups of organisms, a caller's
    ``vmap`` of :func:`~luca_gym.worlds.luca.generator.traced_generate`) it runs
    both branches for every row, while this loop runs once if any row needs it
    and keeps each row's own result. The operands pass through an optimization
    barrier so that XLA cannot hoist ``fn`` out of the loop as loop-invariant."""

    def body(carry):
        _, ops, _ = carry
        ops = jax.lax.optimization_barrier(ops)
        return jnp.bool_(False), ops, fn(*ops)

    return jax.lax.while_loop(lambda c: c[0], body, (jnp.asarray(pred, bool), operands, fallback))[2]


def top_k_mask(priority: jax.Array, k) -> jax.Array:
    """A bool mask of the ``k`` (traced) largest entries of ``priority`` (any
    shape); ties go to the lower index."""
    flat = priority.reshape(-1)
    order = jnp.argsort(-flat, stable=True)
    return jnp.zeros(flat.shape, bool).at[order].set(jnp.arange(flat.size) < k).reshape(priority.shape)


def masked_choice(key, mask: jax.Array) -> jax.Array:
    """A uniformly drawn flat index where ``mask`` is True (the last if none): the
    r-th True entry for r uniform below their count (one draw, one cumsum)."""
    counts = jnp.cumsum(mask.reshape(-1).astype(jnp.int32))
    r = jax.random.randint(key, (), 0, jnp.maximum(counts[-1], 1))
    return jnp.minimum(jnp.searchsorted(counts, r + 1), mask.size - 1)


def draw_network(key, p: Plan, t: TierParams) -> dict:
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
    adj = top_k_mask(jnp.where(same & off_diag & forward, u[0], -1.0), t.intra_edges)
    adj |= top_k_mask(jnp.where(~same & forward, u[1], -1.0), t.inter_edges)

    def ffl(i, adj):
        three = top_k_mask(jax.random.uniform(jax.random.fold_in(k[3], i), (n,)), 3)
        abc = jnp.argsort(jnp.where(three, rank, n))[:3]  # the three genes in topological order
        a, b, c = abc[0], abc[1], abc[2]
        return adj.at[b, a].set(True).at[c, b].set(True).at[c, a].set(True)

    adj = jax.lax.fori_loop(0, t.ffl, ffl, adj)

    def feedback(i, adj):
        # A feedback edge closes a loop: along a forward edge g -> h (and on to
        # a child j of h when h has one), then back to g.
        kk = jax.random.split(jax.random.fold_in(k[4], i))
        h, g = jnp.divmod(masked_choice(kk[0], adj & forward), n)
        children = adj[:, h] & (rank > rank[h])
        j = jnp.where(children.any(), masked_choice(kk[1], children), h)
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
    target_state = jax.random.uniform(k[8], (n,), minval=t.state_low, maxval=t.state_high)

    # Readout genes: one per module (a sink if it has one: a gene with no
    # outgoing edge can only be seen if it is read out), then sinks first, then
    # at random.
    sink = ~adj.any(axis=0)
    preference = jax.random.uniform(k[9], (n,)) + 2.0 * sink
    in_module = module[None, :] == jnp.arange(m)[:, None]
    chosen = jnp.zeros(n, bool).at[jnp.argmax(jnp.where(in_module, preference[None, :], -1.0), axis=1)].set(True)
    rest = jnp.where(chosen, -1.0, jax.random.uniform(k[10], (n,)) + 2.0 * sink)
    readout_mask = chosen | top_k_mask(rest, t.n_readout - m)
    latent_mask = top_k_mask(jnp.where(readout_mask, -1.0, jax.random.uniform(k[11], (n,))), t.n_latent)
    # Modules read out into a home phenotype (ours): the modules, in random
    # order, take the phenotypes in turn, so every phenotype is some module's
    # home; a module's first readout gene feeds its home and each other readout
    # gene does with probability 1 - READOUT_LEAK (else a phenotype at random).
    home = (jax.random.permutation(k[12], m) % N_PHENOTYPES)[module]
    leak = jax.random.uniform(jax.random.fold_in(k[13], 1), (n,)) < READOUT_LEAK
    phenotype = jnp.where(chosen | ~leak, home, jax.random.randint(k[13], (n,), 0, N_PHENOTYPES))
    r = jax.random.uniform(k[14], (n,), minval=READOUT_WEIGHT[0], maxval=READOUT_WEIGHT[1])
    r = r * jnp.where(jax.random.uniform(k[15], (n,)) < 0.5, -1.0, 1.0)
    readout = jnp.zeros((N_PHENOTYPES, n)).at[phenotype, genes].set(jnp.where(readout_mask, r, 0.0))
    return dict(
        weights=weights, module=module, rank=rank, signal_effects=signal_effects, target_state=target_state,
        readout=readout, readout_mask=readout_mask, latent_mask=latent_mask,
    )


def organism_arrays(
    p: Plan, t: TierParams, net: dict, weights, bias, baseline_input, baseline_state, **rest
) -> OrganismArrays:
    """The :class:`OrganismArrays` of a drawn network with ``weights`` and
    ``bias``, healthy (no malfunction, no tasks) unless ``rest`` sets fields."""
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


def solve_rows(arrays: OrganismArrays, codes, flags) -> tuple[jax.Array, jax.Array]:
    """Noise-free phenotypes (B, P) and convergence (B,) of a batch of
    interventions, in chunks of at most SOLVE_CHUNK_STATES / N rows.

    On a CPU a batch that fits one chunk is solved in two parts, with the
    result of one vmapped solve: every row takes FIRST_STEPS updates side by
    side, and the rows still running finish in REFILL_SLOTS slots
    (:func:`finish_rows`). A vmapped loop computes every row until the slowest
    is done, and on hard organisms one slow row (or one that never converges,
    failing the attempt) held 40-60 others for up to MAX_STEPS updates."""
    solve = jax.vmap(sim.fixed_point, in_axes=(None, 0, 0, None, None))
    rows, n = codes.shape
    chunk = max(8, SOLVE_CHUNK_STATES // n)
    if rows > chunk:
        # lax.map vmaps the per-row solve over each chunk
        r = jax.lax.map(lambda x: sim.fixed_point(arrays, x[0], x[1], sim.MAX_STEPS, sim.TOL), (codes, flags), batch_size=chunk)
        return r.phenotypes, r.converged
    if rows <= 2 * REFILL_SLOTS or jax.default_backend() != "cpu":
        r = solve(arrays, codes, flags, sim.MAX_STEPS, sim.TOL)
        return r.phenotypes, r.converged
    first = solve(arrays, codes, flags, FIRST_STEPS, sim.TOL)
    states, converged = finish_rows(arrays, codes, flags, first)
    return jax.vmap(sim.phenotypes, in_axes=(None, 0))(arrays, states), converged


def finish_rows(arrays: OrganismArrays, codes, flags, first) -> tuple[jax.Array, jax.Array]:
    """The solves of :func:`sim.fixed_point` (MAX_STEPS, TOL) carried on from
    ``first``, the same solves stopped after FIRST_STEPS updates: states
    (B, N) and convergence (B,).

    The rows ``first`` left running continue in REFILL_SLOTS slots, each
    taking the next such row when its own stops, so a row costs its own
    updates, not the slowest row's. Each update is the damped update of
    :func:`sim.fixed_point`, written as there and vmapped the same way, so a
    row ends bitwise where the one-loop solve ends it (XLA's CPU dot gives a
    row the same bits in any batch of two or more rows; measured, and
    pinned by the golden organisms)."""
    rows = codes.shape[0]
    target = partial(sim.update_target, arrays)
    m, a, drive = jax.vmap(partial(sim.solve_terms, arrays))(codes, flags)
    running = ~first.converged & (first.steps >= FIRST_STEPS)
    queue = jnp.argsort(~running, stable=True)  # the running rows first, in row order
    count = running.sum()

    def load(take):
        row = queue[jnp.minimum(take, rows - 1)]
        return row, take < count

    def body(carry):
        states, converged, row, live, s, step, taken = carry
        f = jax.vmap(target)(s, m[row], a[row], drive[row])
        residual = jnp.max(jnp.abs(f - s), axis=1)
        stop = live & ~((residual >= sim.TOL) & (step < sim.MAX_STEPS))  # the loop condition of sim.fixed_point
        out = jnp.where(stop, row, rows)  # rows out of range are dropped
        states = states.at[out].set(s, mode="drop")
        converged = converged.at[out].set(residual < sim.TOL, mode="drop")
        update = jax.vmap(partial(sim.damped_update, arrays))(s, f, m[row], a[row])
        s = jnp.where((live & ~stop)[:, None], update, s)
        step = jnp.where(live & ~stop, step + 1, step)
        # A stopped slot takes the next running row, from where ``first`` left it.
        new_row, new_live = load(taken + jnp.cumsum(stop) - 1)
        row = jnp.where(stop, new_row, row)
        s = jnp.where((stop & new_live)[:, None], first.states[row], s)
        step = jnp.where(stop & new_live, first.steps[row], step)
        live = (live & ~stop) | (stop & new_live)
        return states, converged, row, live, s, step, taken + stop.sum()

    row, live = load(jnp.arange(REFILL_SLOTS))
    init = (first.states, first.converged, row, live, first.states[row], first.steps[row], jnp.minimum(count, REFILL_SLOTS))
    states, converged, *_ = jax.lax.while_loop(lambda c: c[3].any(), body, init)
    return states, converged


def single_interventions(n: int, s: int, types) -> tuple[jax.Array, jax.Array]:
    """Codes int8 (len(types) N + S, N) and flags bool (len(types) N + S, S):
    each type on each gene (type-major), then each signal alone."""
    codes = jnp.concatenate([jnp.eye(n, dtype=jnp.int8) * code for code in types] + [jnp.zeros((s, n), jnp.int8)])
    flags = jnp.concatenate([jnp.zeros((len(types) * n, s), bool), jnp.eye(s, dtype=bool)])
    return codes, flags


def settle(p: Plan, t: TierParams, net: dict, weights, key, backwards_of=None):
    """Steps 10-12: solve the baseline, check it is stable and every gene is
    visible, repair silent genes (at most REPAIR_ROUNDS rounds).

    The bias makes s* the healthy fixed point: b = logit(s*)/beta - W s*. The
    backwards organism keeps the inverted forward bias b' = -b_fwd, with
    ``backwards_of`` the forward weights. Inputs are evaluated as
    W (s - s*) + (constant), so float32 rounding never cancels large terms.

    Returns (status, arrays, singles (2N + S, P), weights); the singles are
    zero where the last baseline failed (they are not solved then).
    """
    n, s = p.n, p.n_signals
    target = net["target_state"]
    logit = jnp.log(target / (1 - target)) / t.beta
    codes, flags = single_interventions(n, s, (BLOCK, BOOST))
    no_singles = (jnp.zeros((2 * n + s, N_PHENOTYPES), jnp.float32), jnp.zeros(2 * n + s, bool))
    genes = jnp.arange(n)

    def baseline(w):
        if backwards_of is None:
            bias = logit - matmul(w, target)
            constant = logit
        else:
            bias = -logit + matmul(backwards_of, target)
            constant = matmul(w + backwards_of, target) - logit  # only repair edges survive the sum
        start = target if backwards_of is None else jnp.full(n, 0.5, jnp.float32)
        provisional = organism_arrays(p, t, net, w, bias, matmul(w, start - target) + constant, start)
        r = sim.fixed_point(provisional, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool), sim.MAX_STEPS, sim.TOL)
        state = r.states
        jacobian = (1 - t.damping) * jnp.eye(n) + t.damping * (t.beta * state * (1 - state))[:, None] * w
        stable = sim.spectral_radius_bound(jacobian) < 1 - STABILITY_MARGIN
        arrays = organism_arrays(p, t, net, w, bias, matmul(w, state - target) + constant, state)
        return arrays, r.converged & stable

    def body(carry):
        w, rounds, _, _, _ = carry
        arrays, ok = baseline(w)
        # An unconverged or unstable baseline fails the attempt whatever the
        # single interventions give, and they are the costly part: on hard
        # organisms 40% of attempts stop here, and their singles ran all
        # MAX_STEPS updates without converging.
        phen, conv = only_if(ok, lambda a: solve_rows(a, codes, flags), (arrays,), no_singles)
        ok &= conv.all()
        shift = jnp.abs(phen[: 2 * n] - 0.5).max(axis=1).reshape(2, n).max(axis=0)
        # A gene is silent when no single BLOCK or BOOST on it moves a phenotype
        # by more than a measurement can detect.
        silent = shift <= NETWORK_SHIFT_THRESHOLD
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
        status = jnp.where(~ok, FAILED, jnp.where(~silent.any(), OK, jnp.where(repairable, RUNNING, FAILED)))
        w = jnp.where(status == RUNNING, repaired, w)
        return w, rounds + 1, status, arrays, phen

    shapes = jax.eval_shape(baseline, weights)[0]
    init = (
        weights,
        jnp.int32(0),
        jnp.int32(RUNNING),
        jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes),
        no_singles[0],
    )
    w, _, status, arrays, phen = jax.lax.while_loop(lambda c: c[2] == RUNNING, body, init)
    return status, arrays, phen, w
