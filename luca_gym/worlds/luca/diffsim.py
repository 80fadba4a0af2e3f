"""A differentiable steady state: gradients of the fixed point, and of the
phenotypes read from it, with respect to every continuous quantity of an
organism (weights, baseline input, baseline state, beta, signal effects,
readout, readout gain) and of an intervention (per-gene clamps, signal
activity), by implicit differentiation at the fixed point.

The fixed point s of s = f(s; theta), f = m * sigmoid(beta (W (s - s*) + d + u E)) + a,
is found as :mod:`luca_gym.worlds.luca.sim` finds it (damped updates from the healthy
state, then Newton steps), and differentiated with :func:`jax.lax.custom_root`:
ds/dtheta = (I - df/ds)^-1 df/dtheta. Nothing is backpropagated through the
iterations, so a gradient costs one N x N linear solve whatever the number of
solver steps, and forward-mode (``jax.jvp``, ``jacfwd``) works as well as
reverse-mode (``jax.grad``, ``vjp``), which a hand-written ``custom_vjp``
would not give. ``custom_root`` is JAX's own (no extra dependency); the
tangent system is solved densely (``jnp.linalg.solve``), exact to rounding
for the sizes of this world (N <= a few thousand).

Interventions are continuous here: ``m`` and ``a`` per gene (the update is
``m * f + a``; BLOCK is (0, 0), BOOST (0, 1), DAMPEN (0.5, 0), a locked gene
(0, 0 or 1)), and ``activity`` per signal in [0, 1] (a persistent signal is
on whatever the activity). :func:`clamps` turns the discrete codes and a
lock into (m, a), exactly as the simulator does, so the discrete world is a
point of the continuous one and the two agree (tests/worlds/luca/test_diffsim.py).
Gradients with respect to (m, a) of a clamped gene are meaningful (a rescue
can be optimised over them); gradients through a discrete code are not.

Everything is jittable and vmappable; the entries below run at any float
dtype (float64 under ``jax.enable_x64`` for gradient checks).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import sim
from luca_gym.worlds.luca.types import OrganismArrays
from luca_gym.worlds.luca.precision import matmul

# Solver settings of the differentiable forward pass (see :func:`fixed_point`).
DAMPED_STEPS = 400
NEWTON_STEPS = 8


def clamps(gene_codes: jax.Array, gene_lock: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(m, a) float32 (N,) of the discrete intervention ``gene_codes`` on an
    organism whose lock is ``gene_lock``: the simulator's own rule."""
    return sim.clamps(gene_codes, gene_lock)


def update(arrays: OrganismArrays, m: jax.Array, a: jax.Array, activity: jax.Array):
    """f(s) = m * sigmoid(beta (W (s - s*) + drive)) + a as a function of s,
    with drive = baseline_input + active @ signal_effects and a persistent
    signal always active."""
    active = jnp.where(arrays.signal_persist, 1.0, activity).astype(arrays.weights.dtype)
    drive = arrays.baseline_input + matmul(active, arrays.signal_effects)

    def f(s):
        return m * jax.nn.sigmoid(arrays.beta * (matmul(arrays.weights, s - arrays.baseline_state) + drive)) + a

    return f


def _solve(f, s0, damping, tol, damped_steps, newton_steps):
    """The root of g(s) = f(s) - s from s0: damped updates until the residual
    is below ``tol`` (at most ``damped_steps``), then Newton steps on g for a
    solve that is not there yet (each kept only where it lowers the
    residual). Plain iterations: differentiated implicitly by the caller."""

    def residual(s):
        return jnp.max(jnp.abs(f(s) - s))

    def cond(carry):
        s, r, k = carry
        return (r >= tol) & (k < damped_steps)

    def body(carry):
        s, _, k = carry
        s = s + damping * (f(s) - s)
        return s, residual(s), k + 1

    s, r, _ = jax.lax.while_loop(cond, body, (s0, residual(s0), jnp.int32(0)))

    def newton(_, carry):
        s, r = carry
        g = lambda x: f(x) - x  # noqa: E731
        jac = jax.jacfwd(g)(s)
        step = jnp.linalg.solve(jac, g(s))
        candidate = jnp.clip(s - step, 0.0, 1.0)
        rc = residual(candidate)
        better = jnp.isfinite(rc) & (rc < r) & (r >= tol)
        return jnp.where(better, candidate, s), jnp.where(better, rc, r)

    s, _ = jax.lax.fori_loop(0, newton_steps, newton, (s, r))
    return s


def _dense_tangent_solve(g, y):
    """Solve g(x) = y for a linear g (N x N, dense)."""
    return jnp.linalg.solve(jax.jacfwd(g)(y), y)


def fixed_point(
    arrays: OrganismArrays,
    m: jax.Array,
    a: jax.Array,
    activity: jax.Array,
    *,
    tol: float | None = None,
    damped_steps: int = DAMPED_STEPS,
    newton_steps: int = NEWTON_STEPS,
) -> jax.Array:
    """Gene states (N,) at the steady state of ``arrays`` under the continuous
    intervention (m, a, activity), differentiable (forward and reverse) in
    every float array of ``arrays`` and in m, a and activity.

    ``tol`` defaults to ``sim.TOL`` in float32 and 1e-13 in float64. The
    gradient is that of the fixed point actually reached: where the solver
    did not converge (an unstable or oscillating candidate network while
    fitting) it is the implicit gradient at the last iterate, finite but not
    meaningful; :func:`residual` tells.
    """
    dtype = arrays.weights.dtype
    if tol is None:
        tol = sim.TOL if dtype == jnp.float32 else 1e-13
    f = update(arrays, m, a, activity)
    damping = jax.lax.stop_gradient(arrays.damping)

    def solve(g, s0):
        return _solve(lambda s: g(s) + s, s0, damping, tol, damped_steps, newton_steps)

    s0 = jax.lax.stop_gradient(arrays.baseline_state)
    return jax.lax.custom_root(lambda s: f(s) - s, s0, solve, _dense_tangent_solve)


def residual(arrays: OrganismArrays, m, a, activity, states) -> jax.Array:
    """max |f(s) - s| of ``states`` (a converged solve is below ``sim.TOL``)."""
    return jnp.max(jnp.abs(update(arrays, m, a, activity)(states) - states))


def phenotypes(arrays: OrganismArrays, states: jax.Array) -> jax.Array:
    """The simulator's readout (noise-free), differentiable."""
    return sim.phenotypes(arrays, states)


def steady_phenotypes(arrays: OrganismArrays, m, a, activity, **solver) -> jax.Array:
    """Phenotypes (P,) at the steady state under (m, a, activity)."""
    return phenotypes(arrays, fixed_point(arrays, m, a, activity, **solver))


def coded_phenotypes(arrays: OrganismArrays, gene_codes: jax.Array, signal_flags: jax.Array, **solver) -> jax.Array:
    """Phenotypes (P,) under a discrete intervention (codes int (N,), flags
    bool (S,)) with the organism's own lock: the simulator's answer,
    differentiable in the organism's float arrays."""
    m, a = clamps(gene_codes, arrays.gene_lock)
    dtype = arrays.weights.dtype
    return steady_phenotypes(arrays, m.astype(dtype), a.astype(dtype), signal_flags.astype(dtype), **solver)


# Batched forms: one organism, many interventions; many organisms, one each.
batch_interventions = jax.jit(jax.vmap(coded_phenotypes, in_axes=(None, 0, 0)))
batch_organisms = jax.jit(jax.vmap(coded_phenotypes, in_axes=(0, 0, 0)))


def as_dtype(arrays: OrganismArrays, dtype) -> OrganismArrays:
    """``arrays`` with every float array cast to ``dtype`` (float64 for
    gradient checks under ``jax.enable_x64``)."""
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, arrays)


def candidate_arrays(
    weights: jax.Array,
    baseline_state: jax.Array,
    readout: jax.Array,
    signal_effects: jax.Array,
    gene_lock: jax.Array | None = None,
    signal_persist: jax.Array | None = None,
    damping: float = 0.5,
) -> OrganismArrays:
    """An :class:`OrganismArrays` for a candidate network, as a model-fitting
    agent writes one: weights (N, N) and readout (P, N) with beta and gamma
    folded in (both 1), the healthy state ``baseline_state`` (N,) in (0, 1)
    (the baseline input is set so that it is the healthy fixed point exactly,
    so healthy phenotypes read 0.5 as the world's do), signal effects (S, N),
    and an optional lock (int8 (N,)) or persistent signal (bool (S,)). The
    fields no solve reads are neutral placeholders."""
    n, s, p = weights.shape[-1], signal_effects.shape[-2], readout.shape[-2]
    dtype = weights.dtype
    logit = jnp.log(baseline_state) - jnp.log1p(-baseline_state)
    zeros_i = jnp.zeros((), jnp.int32)
    return OrganismArrays(
        weights=weights,
        bias=logit - matmul(weights, baseline_state),
        baseline_input=logit,
        beta=jnp.ones((), dtype),
        damping=jnp.asarray(damping, dtype),
        signal_effects=signal_effects,
        readout=readout,
        readout_gain=jnp.ones((), dtype),
        baseline_state=baseline_state,
        noise_sigma=jnp.zeros((), dtype),
        module=jnp.zeros((n,), jnp.int32),
        readout_mask=jnp.zeros((n,), bool),
        latent_mask=jnp.zeros((n,), bool),
        gene_lock=jnp.zeros((n,), jnp.int8) if gene_lock is None else gene_lock,
        signal_persist=jnp.zeros((s,), bool) if signal_persist is None else signal_persist,
        malfunction_target=zeros_i - 1,
        malfunction_type=zeros_i,
        n_alt=zeros_i,
        baseline_phenotypes=jnp.full((p,), 0.5, dtype),
        aberrant=jnp.zeros((p,), bool),
        task_genes=jnp.zeros((2, 2), jnp.int32),
        task_codes=jnp.zeros((2, 2), jnp.int8),
        task_truth=jnp.zeros((2, p), dtype),
    )
