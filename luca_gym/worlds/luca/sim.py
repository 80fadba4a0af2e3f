"""The steady-state simulator (SPEC 1.4-1.5), in JAX.

Gene states follow s <- m * sigmoid(beta (W s + c + b)) + a, where (m, a) encode
the interventions and the disease lock (BLOCK: m=0, a=0; BOOST: m=0, a=1;
DAMPEN: m=0.5; a locked gene is clamped unless an intervention overrides it).
The solver starts from the organism's healthy steady state, applies a damped
update (the fixed point is that of ds/dt = f(s) - s) and stops when the
residual max|f(s) - s| falls below ``TOL`` or after ``MAX_STEPS`` updates.
Where the damped update has not converged by then (it is slow when the damped
Jacobian's spectral radius is near 1, and it oscillates for ever when the
damping overshoots a steady state that the ODE itself reaches), the public
solvers finish with at most ``NEWTON_STEPS`` Newton steps on f(s) - s = 0 and
accept the result only if it is a steady state of the ODE: residual below the
tolerance, states in [0, 1], and stable (every eigenvalue of the Jacobian of
f has real part below 1). A solve the damped update finished is returned
bitwise as before; the Newton steps run only for the others (a while loop
that takes zero iterations otherwise, also under ``vmap``).

Interventions are arrays (an int8 code per gene, a bool flag per signal), so a
solve compiles once per organism size and ``vmap`` runs over interventions or
over organisms:

* :func:`fixed_point` -- one organism, one intervention, unjitted (to trace
  into another program, as the generator does);
* :func:`solve` -- one organism, one intervention (jitted, no validation);
* :func:`solve_interventions` -- one organism, a batch of interventions;
* :func:`solve_organisms` -- a batch of organisms, one intervention each;
* :func:`steady_state` -- the validated public entry for an :class:`Organism`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, INTERVENTION_TYPES, LOCK_HI, NONE
from luca_gym.worlds.luca.types import Organism, OrganismArrays, SteadyState
from luca_gym.worlds.luca.precision import matmul

MAX_STEPS = 500
TOL = 2e-7  # residual max|f(s) - s|; 1e-6 left hard fixed points up to 1e-5 off (see docs/design-decisions.md)
# Newton steps after the damped loop, only for the solves it did not finish.
# From where the damped loop stops, float32 Newton reaches TOL in 1-4 steps on
# 98% of the hard-tier solves that stall, 7 at most (benchmarks/convergence.py).
NEWTON_STEPS = 10
MAX_UPDATES = MAX_STEPS + NEWTON_STEPS  # the most ``steps`` a polished solve reports
# The spectral radius is bounded by ||A^(2^k)||^(1/2^k) (Gelfand); 2^16
# squarings make the bound tight to ~1e-4 for any sane matrix. Used by the
# polish's stability check and the generator's baseline check alike.
STABILITY_SQUARINGS = 16


def clamps(codes: jax.Array, gene_lock: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-gene (m, a) of the update m * f + a. An intervention overrides a lock;
    DAMPEN on a locked gene halves the locked value."""
    lock_value = jnp.where(gene_lock == LOCK_HI, 1.0, 0.0)
    locked = gene_lock != 0
    m = jnp.select([codes == BLOCK, codes == BOOST, codes == DAMPEN], [0.0, 0.0, 0.5], 1.0)
    a = jnp.where(codes == BOOST, 1.0, 0.0)
    m = jnp.where(locked & ((codes == NONE) | (codes == DAMPEN)), 0.0, m)
    a = jnp.where(locked & (codes == NONE), lock_value, a)
    a = jnp.where(locked & (codes == DAMPEN), 0.5 * lock_value, a)
    return m.astype(jnp.float32), a.astype(jnp.float32)


def phenotypes(arrays: OrganismArrays, states: jax.Array) -> jax.Array:
    """Phenotypes float32 (..., P) of gene states float32 (..., N):
    sigmoid(gamma * r . (s - s*)), so the healthy baseline reads exactly 0.5."""
    return jax.nn.sigmoid(matmul(arrays.readout_gain * (states - arrays.baseline_state), arrays.readout.T))


def spectral_radius_bound(matrix: jax.Array, squarings: int = STABILITY_SQUARINGS) -> jax.Array:
    """The spectral radius, estimated from above as ||A^(2^k)||^(1/2^k) by
    repeated normalised squaring (Gelfand's formula; runs on any backend,
    unlike ``eigvals``).

    With the max-abs norm the estimate can sit below the radius by a factor
    n^(-1/2^k) at most (1.3e-4 at N=4096, k=16), inside STABILITY_MARGIN. For
    strongly non-normal matrices (entries of the normalised powers spanning
    more than float32's range) small entries flush to zero and the estimate
    can follow a smaller eigenvalue; the generator's Jacobians are far from
    that (tests/worlds/luca/test_generate.py compares it with ``eigvals``).
    """

    def square(i, carry):
        a, log_scale = carry
        norm = jnp.maximum(jnp.max(jnp.abs(a)), 1e-30)
        a = a / norm
        return matmul(a, a), 2.0 * (log_scale + jnp.log(norm))

    a, log_scale = jax.lax.fori_loop(0, squarings, square, (matrix, jnp.float32(0.0)))
    # max-abs norm of A^(2^k) is within a factor n of any induced norm; that
    # factor's 2^k-th root is ~1 + log(n) / 2^k.
    log_norm = jnp.log(jnp.maximum(jnp.max(jnp.abs(a)), 1e-30)) + log_scale
    return jnp.exp(log_norm / 2.0**squarings)


def solve_terms(arrays: OrganismArrays, gene_codes: jax.Array, signal_flags: jax.Array):
    """What a solve under one intervention holds fixed: the clamps ``m``, ``a``
    (:func:`clamps`) and the drive ``b + active signals' effects`` (N,)."""
    m, a = clamps(gene_codes, arrays.gene_lock)
    active = (signal_flags | arrays.signal_persist).astype(jnp.float32)
    return m, a, arrays.baseline_input + matmul(active, arrays.signal_effects)


def update_target(arrays: OrganismArrays, s: jax.Array, m, a, drive) -> jax.Array:
    """f(s) = m * sigmoid(beta (W (s - s*) + drive)) + a: the state the damped
    update moves toward (W s + b written as W (s - s*) + (W s* + b) to keep
    rounding small)."""
    return m * jax.nn.sigmoid(arrays.beta * (matmul(arrays.weights, s - arrays.baseline_state) + drive)) + a


def damped_update(arrays: OrganismArrays, s: jax.Array, f: jax.Array, m, a) -> jax.Array:
    """One update: clamped genes jump to their value; the others take a damped step toward ``f``."""
    return jnp.where(m == 0.0, a, s + arrays.damping * (f - s))


def fixed_point(
    arrays: OrganismArrays,
    gene_codes: jax.Array,
    signal_flags: jax.Array,
    max_steps: int,
    tol: float,
    polish: bool = False,
) -> SteadyState:
    """The steady state of one organism under one intervention (``gene_codes``
    int8 (N,), ``signal_flags`` bool (S,)): the damped update from the healthy
    state until the residual is below ``tol`` or ``max_steps`` updates. Not
    jitted, so it traces into a caller's program (the generator's, the jitted
    entries below); ``max_steps``, ``tol`` and ``polish`` are Python values.

    With ``polish`` (the jitted entries below), a solve the damped loop did not
    finish takes up to ``NEWTON_STEPS`` Newton steps from where it stopped; the
    Newton point is kept, and the solve reported converged, only if its residual
    is below ``tol``, its states are in [0, 1] and it is a stable steady state
    of ds/dt = f(s) - s; otherwise the damped result is returned, not converged.
    ``steps`` then counts every update: damped ones plus Newton steps taken
    (at most ``max_steps + NEWTON_STEPS``). A solve the damped loop finished is
    returned bitwise as without ``polish``. Without ``polish`` (the default, the
    generator's rule, which pins the published organisms) the damped loop is
    all there is.
    """
    m, a, drive = solve_terms(arrays, gene_codes, signal_flags)
    clamped = m == 0.0

    def pre(s):  # Newton's Jacobian (polish) reads the pre-activation
        return arrays.beta * (matmul(arrays.weights, s - arrays.baseline_state) + drive)

    def target(s):
        return update_target(arrays, s, m, a, drive)

    def cond(carry):
        _, _, residual, step = carry
        return (residual >= tol) & (step < max_steps)

    def body(carry):
        s, f, _, step = carry
        s = damped_update(arrays, s, f, m, a)
        f = target(s)
        return s, f, jnp.max(jnp.abs(f - s)), step + 1

    s0 = arrays.baseline_state
    f0 = target(s0)
    s, _, residual, steps = jax.lax.while_loop(cond, body, (s0, f0, jnp.max(jnp.abs(f0 - s0)), jnp.int32(0)))
    converged = residual < tol
    if polish:
        s, converged, steps = _polish(arrays, m, a, clamped, pre, s, residual, steps, tol)
    return SteadyState(
        states=s, phenotypes=phenotypes(arrays, s), converged=converged, steps=steps
    )


def _polish(arrays, m, a, clamped, pre, s_damped, residual, steps, tol):
    """Newton's method on g(s) = f(s) - s from the damped loop's last state, for
    a solve the loop did not finish (zero iterations otherwise). Returns
    (states, converged, steps) as :func:`fixed_point` documents."""
    n = s_damped.shape[0]

    def jacobian(s):
        # d f / d s = diag(m beta sigma'(u)) W; zero rows for the clamped genes.
        sig = jax.nn.sigmoid(pre(s))
        return (m * arrays.beta * sig * (1.0 - sig))[:, None] * arrays.weights, m * sig + a

    def solve_with(matrix, rhs):
        # matrix^-1 rhs through the LU of matrix^T solved transposed: LAPACK
        # wants column-major, which for matrix^T is the row-major matrix as
        # built, so XLA keeps no transposed copy of W (or identity) outside
        # the loops, which would cost O(N^2) on every solve, polished or not.
        return jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(matrix.T), rhs, trans=1)

    def shift_diagonal(matrix, value):
        # matrix + value I, built inside the loop body (an identity made
        # outside would be materialised for every solve).
        diagonal = jnp.arange(n)
        return matrix.at[diagonal, diagonal].add(value)

    def cond(carry):
        _, res, k = carry
        return (res >= tol) & (k < NEWTON_STEPS)  # false at once for a converged solve (and for NaN)

    def body(carry):
        s, _, k = carry
        jac, f = jacobian(s)
        delta = solve_with(shift_diagonal(jac, -1.0), f - s)  # (J - I) delta = g(s); the step is s - delta
        # Clamped genes keep their value exactly; a fixed point lies in [0, 1].
        s = jnp.where(clamped, a, jnp.clip(s - delta, 0.0, 1.0))
        jac, f = jacobian(s)
        return s, jnp.max(jnp.abs(f - s)), k + 1

    s_new, res_new, taken = jax.lax.while_loop(cond, body, (s_damped, residual, jnp.int32(0)))
    candidate = (residual >= tol) & (res_new < tol) & jnp.all((s_new >= 0.0) & (s_new <= 1.0))

    def stable(carry):
        _, s, _ = carry
        # Every eigenvalue lambda of J has Re(lambda) < 1 iff the Cayley
        # transform lambda / (2 - lambda) of each is inside the unit circle:
        # the spectral radius of J (2I - J)^-1, here of its transpose
        # (2I - J)^-T J^T (row-major operands for LAPACK, as above).
        jac, _ = jacobian(s)
        lu = jax.scipy.linalg.lu_factor(shift_diagonal(-jac, 2.0).T)
        cayley = jax.scipy.linalg.lu_solve(lu, jac.T)
        # The carried state must not look loop-invariant, or XLA hoists the
        # whole check out of the loop and runs it for every solve; the clip
        # is a no-op on the value (it is not used after the loop).
        return jnp.bool_(False), jnp.clip(s, 0.0, 1.0), spectral_radius_bound(cayley) < 1.0

    # A while loop of one iteration for a candidate, none otherwise: under vmap
    # (where a cond would run for every row) the check costs nothing when no
    # row in the batch was polished.
    _, _, is_stable = jax.lax.while_loop(lambda c: c[0], stable, (candidate, s_new, jnp.bool_(False)))
    accept = candidate & is_stable
    states = jnp.where(accept, s_new, s_damped)
    converged = jnp.where(residual < tol, True, accept)
    return states, converged, steps + taken


@partial(jax.jit, static_argnames=("max_steps", "tol", "polish"))
def solve(
    arrays, gene_codes, signal_flags, max_steps: int = MAX_STEPS, tol: float = TOL, polish: bool = True
) -> SteadyState:
    """One organism, one intervention: ``gene_codes`` int8 (N,), ``signal_flags``
    bool (S,). No validation (use :func:`steady_state` for checked input).
    Damped loop, then Newton where it did not converge (see :func:`fixed_point`);
    ``polish=False`` is the damped loop alone."""
    return fixed_point(arrays, gene_codes, signal_flags, max_steps, tol, polish)


@partial(jax.jit, static_argnames=("max_steps", "tol", "polish"))
def solve_interventions(
    arrays, gene_codes, signal_flags, max_steps: int = MAX_STEPS, tol: float = TOL, polish: bool = True
) -> SteadyState:
    """One organism, a batch of interventions: ``gene_codes`` int8 (B, N),
    ``signal_flags`` bool (B, S). Returns a batched :class:`SteadyState`."""
    return jax.vmap(fixed_point, in_axes=(None, 0, 0, None, None, None))(
        arrays, gene_codes, signal_flags, max_steps, tol, polish
    )


@partial(jax.jit, static_argnames=("max_steps", "tol", "polish"))
def solve_organisms(
    arrays, gene_codes, signal_flags, max_steps: int = MAX_STEPS, tol: float = TOL, polish: bool = True
) -> SteadyState:
    """A batch of organisms (``arrays`` stacked on a leading axis, see
    :func:`stack`), one intervention each: ``gene_codes`` int8 (B, N),
    ``signal_flags`` bool (B, S)."""
    return jax.vmap(fixed_point, in_axes=(0, 0, 0, None, None, None))(
        arrays, gene_codes, signal_flags, max_steps, tol, polish
    )


def measure(key: jax.Array, arrays: OrganismArrays, states: jax.Array) -> jax.Array:
    """Noisy phenotypes float32 (..., P): Gaussian noise of the tier's sigma is
    added to each gene state, clipped to [0, 1], then read out. Pure in ``key``."""
    noise = arrays.noise_sigma * jax.random.normal(key, states.shape, dtype=jnp.float32)
    return phenotypes(arrays, jnp.clip(states + noise, 0.0, 1.0))


def stack(organisms) -> OrganismArrays:
    """Stack the arrays of organisms of one size on a new leading axis."""
    arrays = [o.arrays if isinstance(o, Organism) else o for o in organisms]
    sizes = {a.n_genes for a in arrays}
    if len(sizes) != 1:
        raise ValueError(f"organisms: cannot stack different sizes {sorted(sizes)}; stack one n_genes at a time")
    # Stack on the host: one transfer instead of a device op per leaf and organism.
    return jax.tree_util.tree_map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])), *arrays)


def intervention_arrays(
    organism: Organism, gene_codes=None, signal_flags=None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate and normalise an intervention for ``organism``.

    Args:
        gene_codes: int (N,) or (B, N) with values in 0..3 (NONE, BLOCK, BOOST,
            DAMPEN); None means no gene intervention.
        signal_flags: bool or 0/1 (S,) or (B, S); None means no signal activated.

    Returns int8 and bool numpy arrays. Raises ValueError naming the argument,
    the bad value and what is allowed; a latent gene may not be a target.
    """
    n, s = organism.n_genes, organism.n_signals
    codes = np.zeros(n, np.int8) if gene_codes is None else np.asarray(gene_codes)
    flags = np.zeros(s, bool) if signal_flags is None else np.asarray(signal_flags)
    if codes.ndim not in (1, 2) or codes.shape[-1] != n:
        raise ValueError(f"gene_codes: shape {codes.shape} not allowed; expected ({n},) or (batch, {n})")
    if flags.ndim not in (1, 2) or flags.shape[-1] != s:
        raise ValueError(f"signal_flags: shape {flags.shape} not allowed; expected ({s},) or (batch, {s})")
    if codes.dtype.kind not in "iub":
        raise ValueError(f"gene_codes: dtype {codes.dtype} not allowed; expected integer codes 0..3")
    bad = codes[(codes < 0) | (codes > DAMPEN)]
    if bad.size:
        allowed = ", ".join(f"{i}={t}" for i, t in enumerate(INTERVENTION_TYPES))
        raise ValueError(f"gene_codes: unknown code {int(bad.flat[0])}; allowed {allowed}")
    if flags.dtype.kind not in "biu" or np.any((flags != 0) & (flags != 1)):
        raise ValueError(f"signal_flags: values must be booleans or 0/1, got {flags.dtype} {np.unique(flags)[:4]}")
    latent = np.asarray(organism.arrays.latent_mask)
    hit = np.nonzero(np.any(codes.reshape(-1, n) != NONE, axis=0) & latent)[0]
    if hit.size:
        name = organism.meta.gene_names[hit[0]]
        raise ValueError(f"gene_codes: {name} is latent and cannot be targeted; targetable genes are the non-latent ones")
    if codes.ndim == 2 and flags.ndim == 2 and codes.shape[0] != flags.shape[0]:
        raise ValueError(f"signal_flags: batch {flags.shape[0]} does not match gene_codes batch {codes.shape[0]}")
    return codes.astype(np.int8), flags.astype(bool)


def steady_state(
    organism: Organism, gene_codes=None, signal_flags=None, key: jax.Array | None = None
) -> SteadyState:
    """Solve ``organism`` under an intervention (single or batched), validated.

    With ``key``, the returned phenotypes are measured: noise is added to the
    gene states before readout (``states`` stay noise-free ground truth).
    """
    codes, flags = intervention_arrays(organism, gene_codes, signal_flags)
    if codes.ndim == 2 or flags.ndim == 2:
        b = codes.shape[0] if codes.ndim == 2 else flags.shape[0]
        codes = np.broadcast_to(codes, (b, organism.n_genes))
        flags = np.broadcast_to(flags, (b, organism.n_signals))
        result = solve_interventions(organism.arrays, codes, flags)
    else:
        result = solve(organism.arrays, codes, flags)
    if key is not None:
        result = SteadyState(
            states=result.states,
            phenotypes=measure(key, organism.arrays, result.states),
            converged=result.converged,
            steps=result.steps,
        )
    return result
