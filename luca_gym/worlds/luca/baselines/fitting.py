"""The fitting core of ``model-fit`` (:mod:`~luca_gym.worlds.luca.baselines.model_fit`),
pure JAX: a candidate network is a pytree ``theta`` of weights W (N, N),
baseline-state logits u (N,), readout R (P, N) and signal effects E (S, N)
(beta and the readout gain folded into W and R; the healthy state
sigmoid(u) is the candidate's healthy fixed point by construction, so its
healthy phenotypes read 0.5 as the world's do). An ensemble of candidates is
fitted to the measured phenotypes by Adam (optax) through the differentiable
steady state (:mod:`luca_gym.worlds.luca.diffsim`): many fits (members x
malfunction hypotheses) in one jitted, vmapped call. The local family fits
organisms of any size on a gene's neighbourhood. Apart from the agent, which
decides what to measure with these fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from luca_gym.worlds.luca import diffsim
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, N_PHENOTYPES


@dataclass(frozen=True)
class FitConfig:
    """Settings of the fit (hashable: static in jit).

    members: candidates per hypothesis. steps: Adam steps per fit. lr: Adam
    step size. noise: the phenotype noise the likelihood assumes. l1_w / l1_r
    / l1_e: sparsity priors (per unit of |weight|) on W, R and E. l2_u: prior
    pulling healthy states to mid-range. init_scale: spread of the initial W.
    damped_steps / newton_steps: the solver inside the fit.
    """

    members: int = 8
    steps: int = 250
    lr: float = 0.05
    noise: float = 0.03
    l1_w: float = 0.5
    l1_r: float = 0.5
    l1_e: float = 0.5
    l2_u: float = 0.5
    init_scale: float = 0.5
    damped_steps: int = 40
    newton_steps: int = 6


def init_theta(key, n: int, s: int, p: int, cfg: FitConfig):
    """One random candidate network."""
    kw, ku, kr, ke = jax.random.split(key, 4)
    return {
        "W": cfg.init_scale * jax.random.normal(kw, (n, n)),
        "u": 0.3 * jax.random.normal(ku, (n,)),
        "R": 0.5 * jax.random.normal(kr, (p, n)),
        "E": 0.5 * jax.random.normal(ke, (s, n)),
    }


def candidate(theta, lock, persist):
    """The :class:`OrganismArrays` of candidate ``theta`` with a lock (int8
    (N,)) and a persistent signal (bool (S,))."""
    n = theta["W"].shape[-1]
    weights = theta["W"] * (1.0 - jnp.eye(n, dtype=theta["W"].dtype))
    return diffsim.candidate_arrays(weights, jax.nn.sigmoid(theta["u"]), theta["R"], theta["E"], lock, persist)


def predict(theta, lock, persist, codes, flags, cfg: FitConfig):
    """Phenotypes (E, P) of candidate ``theta`` under interventions codes (E, N), flags (E, S)."""
    arrays = candidate(theta, lock, persist)
    solve = partial(diffsim.coded_phenotypes, damped_steps=cfg.damped_steps, newton_steps=cfg.newton_steps)
    return jax.vmap(solve, in_axes=(None, 0, 0))(arrays, codes, flags)


def loss(theta, lock, persist, data, cfg: FitConfig):
    """Negative log posterior (up to a constant): Gaussian measurement error
    on every measured phenotype (weighted by ``data["weight"]``) plus the
    sparsity priors."""
    pred = predict(theta, lock, persist, data["codes"], data["flags"], cfg)
    err = jnp.where(jnp.isfinite(pred), pred - data["y"], 1.0)
    fit = 0.5 * jnp.sum(data["weight"][:, None] * (err / cfg.noise) ** 2)
    prior = (
        cfg.l1_w * jnp.sum(jnp.abs(theta["W"]))
        + cfg.l1_r * jnp.sum(jnp.abs(theta["R"]))
        + cfg.l1_e * jnp.sum(jnp.abs(theta["E"]))
        + cfg.l2_u * jnp.sum(theta["u"] ** 2)
    )
    return fit + prior, fit


@partial(jax.jit, static_argnames=("cfg",))
def fit(thetas, locks, persists, data, cfg: FitConfig):
    """Fit a batch of candidates (leading axis F on ``thetas``, ``locks``
    (F, N), ``persists`` (F, S)) to ``data`` ({"codes" (E, N), "flags" (E, S),
    "y" (E, P), "weight" (E,)}); returns (thetas, fit term (F,), total (F,))."""
    opt = optax.adam(cfg.lr)

    def one(theta, lock, persist):
        state = opt.init(theta)

        def step(carry, _):
            theta, state = carry
            (total, _), grad = jax.value_and_grad(loss, has_aux=True)(theta, lock, persist, data, cfg)
            grad = jax.tree_util.tree_map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grad)
            updates, state = opt.update(grad, state)
            return (optax.apply_updates(theta, updates), state), total

        (theta, _), _ = jax.lax.scan(step, (theta, state), None, length=cfg.steps)
        total, fit_term = loss(theta, lock, persist, data, cfg)
        return theta, fit_term, total

    return jax.vmap(one)(thetas, locks, persists)


@partial(jax.jit, static_argnames=("cfg",))
def predict_batch(thetas, locks, persists, codes, flags, cfg: FitConfig):
    """Phenotypes (F, E, P) of every candidate under every intervention."""
    return jax.vmap(predict, in_axes=(0, 0, 0, None, None, None))(thetas, locks, persists, codes, flags, cfg)


def pad_data(codes, flags, y, weight, size: int):
    """Fixed-shape data (``size`` rows, zero weight past the measurements), so
    one compiled fit serves every point of a session."""
    e = len(codes)
    if e > size:
        raise ValueError(f"data: {e} measurements, more than the padded size {size}")
    n, s, p = np.shape(codes)[1], np.shape(flags)[1], np.shape(y)[1]
    out = {
        "codes": np.zeros((size, n), np.int8),
        "flags": np.zeros((size, s), bool),
        "y": np.full((size, p), 0.5, np.float32),
        "weight": np.zeros((size,), np.float32),
    }
    out["codes"][:e], out["flags"][:e], out["y"][:e], out["weight"][:e] = codes, flags, y, weight
    return {k: jnp.asarray(v) for k, v in out.items()}


def ensemble_weights(fit_terms):
    """Ensemble weights (jittable): members whose fit is far worse than the
    typical one (stuck in a poor optimum) are dropped, the rest count equally."""
    f = jnp.asarray(fit_terms)
    finite = jnp.isfinite(f)
    median = jnp.nanmedian(jnp.where(finite, f, jnp.nan))
    keep = finite & (f <= 2.0 * median + 1.0)
    keep = jnp.where(keep.any(), keep, finite)
    return keep / jnp.maximum(keep.sum(), 1)


# -- the local candidate family (organisms of any size) ----------------------------
#
# A dense candidate has N^2 weights and each gradient a dense N x N tangent
# solve: fine at N=20, out of reach at N=320 on a CPU. The local family
# models one prediction task at a time: a sigmoid network of K = 2 + H nodes,
# the task's two genes and H unnamed mediators standing for the network
# around them (their states, weights and readouts are fitted, never
# measured). Its data are the singles of the two genes under BLOCK, BOOST and
# DAMPEN; the rest of the organism is held at its healthy state. Everything
# here is pure JAX on fixed shapes, shared by ModelFitPolicy and the batched
# policy (``luca_gym.worlds.luca.baselines.batched``).

LOCAL_CODES = (BLOCK, BOOST, DAMPEN)


def local_interventions(mediators: int) -> jax.Array:
    """The local family's experiments: int8 (6, K), row ``3 * j + c - 1`` puts
    code ``c`` of :data:`LOCAL_CODES` on task gene ``j``."""
    k = 2 + mediators
    rows = [jnp.zeros(k, jnp.int8).at[j].set(c) for j in range(2) for c in LOCAL_CODES]
    return jnp.stack(rows)


def local_data(single_results, single_mask, genes, mediators: int):
    """The local fit's data from an observation's singles table
    (``single_results`` (N, 3, P), ``single_mask`` (N, 3)) for task ``genes``
    (2,): every measured single of the two genes, zero weight on the rest."""
    return {
        "codes": local_interventions(mediators),
        "flags": jnp.zeros((6, 1), bool),
        "y": single_results[genes].reshape(6, -1),
        "weight": single_mask[genes].reshape(6).astype(jnp.float32),
    }


def local_task(task_codes, mediators: int) -> jax.Array:
    """The task's intervention in the local family: int8 (1, K)."""
    return jnp.zeros((1, 2 + mediators), jnp.int8).at[0, :2].set(jnp.asarray(task_codes, jnp.int8))


def local_init(key, mediators: int, cfg: FitConfig):
    """``cfg.members`` random local candidates (no signals: one inert column)."""
    return jax.vmap(lambda k: init_theta(k, 2 + mediators, 1, N_PHENOTYPES, cfg))(jax.random.split(key, cfg.members))


def _local_arrays(thetas, mediators: int):
    m = jax.tree_util.tree_leaves(thetas)[0].shape[0]
    return jnp.zeros((m, 2 + mediators), jnp.int8), jnp.zeros((m, 1), bool)


@partial(jax.jit, static_argnames=("mediators", "cfg"))
def local_fit(thetas, data, mediators: int, cfg: FitConfig):
    """Fit local candidates ``thetas`` to ``data``; (thetas, fit terms)."""
    locks, persists = _local_arrays(thetas, mediators)
    thetas, fit_terms, _ = fit(thetas, locks, persists, data, cfg)
    return thetas, fit_terms


@partial(jax.jit, static_argnames=("mediators", "cfg"))
def local_outcomes(thetas, codes, mediators: int, cfg: FitConfig):
    """Phenotypes (members, E, P) of local candidates under local ``codes`` (E, K)."""
    locks, persists = _local_arrays(thetas, mediators)
    flags = jnp.zeros((codes.shape[0], 1), bool)
    return predict_batch(thetas, locks, persists, codes, flags, cfg)


def local_prediction(key, single_results, single_mask, genes, task_codes, mediators: int, cfg: FitConfig):
    """One task answered from scratch by the local family (jittable, vmappable):
    fit ``cfg.members`` fresh candidates to the task genes' singles and
    return the weighted ensemble mean of the task's phenotypes (P,)."""
    data = local_data(single_results, single_mask, genes, mediators)
    thetas, fit_terms = local_fit(local_init(key, mediators, cfg), data, mediators, cfg)
    preds = local_outcomes(thetas, local_task(task_codes, mediators), mediators, cfg)[:, 0]
    return jnp.clip(ensemble_weights(fit_terms) @ preds, 0.0, 1.0)
