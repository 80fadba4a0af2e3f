"""The differentiable steady state (luca_gym.worlds.luca.diffsim): it agrees with the
simulator, and its implicit gradients match central finite differences in
float64 on every tier, with locks, persistent signals and every intervention
type."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym.worlds.luca import diffsim, sim
from luca_gym.worlds.luca.spec import BLOCK, DAMPEN
from luca_gym.worlds.luca.generator import make_organism

CASES = [("easy", "healthy", 3), ("medium", "healthy", 4), ("hard", "healthy", 5), ("medium", "disease", 6), ("hard", "disease", 7)]
FLOAT_FIELDS = ("weights", "baseline_input", "baseline_state", "beta", "signal_effects", "readout", "readout_gain")


@pytest.fixture(scope="module")
def organisms():
    return {(t, m): make_organism(s, t, 20, m) for t, m, s in CASES}


def _interventions(organism, count=6, seed=0):
    rng = np.random.default_rng(seed)
    targetable = np.flatnonzero(~np.asarray(organism.arrays.latent_mask))
    codes = np.zeros((count, organism.n_genes), np.int8)
    flags = np.zeros((count, organism.n_signals), bool)
    for i in range(1, count):  # row 0: no intervention
        genes = rng.choice(targetable, 2, replace=False)
        codes[i, genes] = rng.integers(BLOCK, DAMPEN + 1, 2)
        flags[i, rng.integers(organism.n_signals)] = i % 2 == 0
    return codes, flags


@pytest.mark.parametrize("tier,mode", [(t, m) for t, m, _ in CASES])
def test_forward_agrees_with_the_simulator(organisms, tier, mode):
    o = organisms[(tier, mode)]
    codes, flags = _interventions(o)
    expected = sim.solve_interventions(o.arrays, codes, flags)
    got = diffsim.batch_interventions(o.arrays, jnp.asarray(codes), jnp.asarray(flags))
    converged = np.asarray(expected.converged)
    assert converged.any()
    np.testing.assert_allclose(np.asarray(got)[converged], np.asarray(expected.phenotypes)[converged], atol=2e-5)


@jax.jit
def _loss(values, arrays64, codes, flags, direction):
    arrays = dataclasses.replace(arrays64, **values)
    return jnp.dot(diffsim.coded_phenotypes(arrays, codes, flags), direction)


_grad = jax.jit(jax.grad(_loss))


@pytest.mark.parametrize("tier,mode", [(t, m) for t, m, _ in CASES])
def test_gradients_match_finite_differences_float64(organisms, tier, mode):
    o = organisms[(tier, mode)]
    codes, flags = _interventions(o, seed=1)
    rng = np.random.default_rng(2)
    with jax.enable_x64(True):
        arrays = diffsim.as_dtype(o.arrays, jnp.float64)
        values = {f: getattr(arrays, f) for f in FLOAT_FIELDS}
        for row in range(4):
            direction = jnp.asarray(rng.normal(size=3))
            args = (arrays, jnp.asarray(codes[row]), jnp.asarray(flags[row]), direction)
            loss = lambda v: _loss(v, *args)  # noqa: E731
            grad = _grad(values, *args)
            for field in FLOAT_FIELDS:
                g = np.asarray(grad[field])
                assert np.all(np.isfinite(g)), field
                # Check the largest component and a random one of each field.
                flat = [int(np.argmax(np.abs(g))), int(rng.integers(g.size))] if g.ndim else [0]
                for idx in flat:
                    step = np.zeros(g.size)
                    step[idx] = 1e-6
                    step = jnp.asarray(step.reshape(g.shape))
                    plus = dict(values, **{field: values[field] + step})
                    minus = dict(values, **{field: values[field] - step})
                    fd = float((loss(plus) - loss(minus)) / 2e-6)
                    assert abs(float(g.flat[idx]) - fd) <= 1e-6 + 1e-5 * abs(fd), (field, row, idx, float(g.flat[idx]), fd)


def test_gradients_of_the_intervention_and_forward_mode(organisms):
    """Gradients with respect to the continuous clamps (m, a) and the signal
    activity (a rescue is optimised over them), in reverse and forward mode,
    on a diseased hard organism (its lock clamps one gene)."""
    o = organisms[("hard", "disease")]
    with jax.enable_x64(True):
        arrays = diffsim.as_dtype(o.arrays, jnp.float64)
        codes = jnp.zeros(o.n_genes, jnp.int8)
        m, a = diffsim.clamps(codes, arrays.gene_lock)
        m, a = m.astype(jnp.float64), a.astype(jnp.float64)
        target = int(np.flatnonzero(~np.asarray(o.arrays.latent_mask) & (np.asarray(o.arrays.gene_lock) == 0))[0])
        m = m.at[target].set(0.7)  # a partial, continuous clamp
        activity = jnp.full(o.n_signals, 0.3)
        direction = jnp.asarray([1.0, -2.0, 0.5])

        @jax.jit  # one program for the dozen finite differences below (eager, each one compiled its own scans)
        def loss(m, a, activity):
            return jnp.dot(diffsim.steady_phenotypes(arrays, m, a, activity), direction)

        grads = jax.grad(loss, argnums=(0, 1, 2))(m, a, activity)
        for i, (arg, g) in enumerate(zip((m, a, activity), grads)):
            for idx in (target, int(np.argmax(np.abs(np.asarray(g))))) if i < 2 else (0, 1):
                e = jnp.zeros_like(arg).at[idx].set(1e-6)
                args = [m, a, activity]
                plus, minus = list(args), list(args)
                plus[i], minus[i] = arg + e, arg - e
                fd = float((loss(*plus) - loss(*minus)) / 2e-6)
                assert abs(float(g[idx]) - fd) <= 1e-6 + 1e-5 * abs(fd), (i, idx)
        # Forward mode agrees with reverse mode.
        tangent = jnp.asarray(np.random.default_rng(3).normal(size=o.n_signals))
        _, jvp = jax.jvp(lambda act: loss(m, a, act), (activity,), (tangent,))
        assert abs(float(jvp) - float(jnp.dot(grads[2], tangent))) < 1e-9


def test_candidate_networks_read_half_at_their_healthy_state():
    """A candidate (as model-fit writes one) has its healthy state as a fixed
    point, so its healthy phenotypes read 0.5, and a lock moves them."""
    rng = np.random.default_rng(0)
    n, s, p = 12, 3, 3
    weights = jnp.asarray(rng.normal(0, 0.8, (n, n)) * (rng.random((n, n)) < 0.3), jnp.float32)
    state = jnp.asarray(rng.uniform(0.2, 0.8, n), jnp.float32)
    readout = jnp.asarray(rng.normal(0, 1, (p, n)), jnp.float32)
    effects = jnp.asarray(rng.normal(0, 1, (s, n)), jnp.float32)
    arrays = diffsim.candidate_arrays(weights, state, readout, effects)
    healthy = diffsim.coded_phenotypes(arrays, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool))
    np.testing.assert_allclose(np.asarray(healthy), 0.5, atol=1e-6)
    lock = jnp.zeros(n, jnp.int8).at[int(np.argmax(np.abs(np.asarray(readout)).sum(0)))].set(1)
    locked = diffsim.candidate_arrays(weights, state, readout, effects, gene_lock=lock)
    sick = diffsim.coded_phenotypes(locked, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool))
    assert float(jnp.max(jnp.abs(sick - 0.5))) > 0.01


def test_batched_entry_compiles_once_per_size(organisms):
    """A new organism of the same size (any tier) reuses the compiled solve."""
    first = organisms[("easy", "healthy")]
    codes, flags = _interventions(first)
    diffsim.batch_interventions(first.arrays, jnp.asarray(codes), jnp.asarray(flags))
    before = diffsim.batch_interventions._cache_size()
    for key in (("hard", "disease"), ("medium", "healthy")):
        o = organisms[key]
        c, f = _interventions(o)
        diffsim.batch_interventions(o.arrays, jnp.asarray(c), jnp.asarray(f))
    assert diffsim.batch_interventions._cache_size() == before
