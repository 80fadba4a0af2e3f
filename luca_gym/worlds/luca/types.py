"""Pytrees shared by the world generator, the simulator and the session core.

An organism is split in two: :class:`OrganismArrays` holds every array (a JAX
pytree, so thousands of organisms of one size stack and ``vmap``), and
:class:`OrganismMeta` holds the names and the generating triple (static, plain
Python). :class:`Organism` joins them for the single-organism API.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import jax
import numpy as np


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class OrganismArrays:
    """Every array of one organism. Shapes depend on ``n_genes`` only (N genes,
    S signals, P=3 phenotypes, T=2 prediction tasks), never on the tier, so one
    compiled function serves every tier of a size.

    Attributes:
        weights: float32 (N, N). ``weights[i, j]`` is the effect of gene j on gene i.
        bias: float32 (N,). Per-gene bias b.
        baseline_input: float32 (N,). W s* + b, formed without cancellation
            (for a forward organism it is logit(s*)/beta exactly): the solver
            evaluates W (s - s*) + (W s* + b), which keeps float32 rounding small
            near the baseline, so the convergence tolerance sits well above the
            rounding floor even for large organisms.
        beta: float32 (). Sigmoid steepness of the tier.
        damping: float32 (). Fraction of the update applied per solver step.
        signal_effects: float32 (S, N). Input added to each gene by each active
            signal (+strength for an activating signal's targets, -strength for an
            inhibiting one's, 0 elsewhere).
        readout: float32 (P, N). Phenotype readout weights r (0 off readout genes).
        readout_gain: float32 (). Readout steepness gamma.
        baseline_state: float32 (N,). The healthy steady state s*: the solver's
            fixed initial state and the phenotype centre (healthy phenotypes 0.5).
        noise_sigma: float32 (). Per-gene measurement noise of the tier.
        module: int32 (N,). Module index of each gene.
        readout_mask: bool (N,). Readout (observable) genes.
        latent_mask: bool (N,). Latent genes (cannot be targeted).
        gene_lock: int8 (N,). LOCK_HI / LOCK_LO on the malfunctioning gene, else 0.
        signal_persist: bool (S,). The persistently active signal (disease).
        malfunction_target: int32 (). Unified target index (genes 0..N-1, signals
            N..N+S-1) of the malfunction, -1 in healthy mode.
        malfunction_type: int32 (). LOCK_HI / LOCK_LO / PERSIST, 0 if healthy.
        n_alt: int32 (). Other candidate malfunctions with an indistinguishable
            disease phenotype (SPEC 1.6); 0 in healthy mode.
        baseline_phenotypes: float32 (P,). Noise-free phenotypes of the organism as
            studied (diseased in disease mode).
        aberrant: bool (P,). Baseline phenotypes outside the healthy range.
        task_genes: int32 (T, 2). The two genes of each prediction task.
        task_codes: int8 (T, 2). BLOCK or BOOST on each of them.
        task_truth: float32 (T, P). Noise-free phenotypes under each task.
    """

    weights: jax.Array
    bias: jax.Array
    baseline_input: jax.Array
    beta: jax.Array
    damping: jax.Array
    signal_effects: jax.Array
    readout: jax.Array
    readout_gain: jax.Array
    baseline_state: jax.Array
    noise_sigma: jax.Array
    module: jax.Array
    readout_mask: jax.Array
    latent_mask: jax.Array
    gene_lock: jax.Array
    signal_persist: jax.Array
    malfunction_target: jax.Array
    malfunction_type: jax.Array
    n_alt: jax.Array
    baseline_phenotypes: jax.Array
    aberrant: jax.Array
    task_genes: jax.Array
    task_codes: jax.Array
    task_truth: jax.Array

    @property
    def n_genes(self) -> int:
        return self.weights.shape[-1]

    @property
    def n_signals(self) -> int:
        return self.signal_effects.shape[-2]


@dataclass(frozen=True)
class OrganismMeta:
    """Names and the generating triple: static, public, never batched."""

    seed: int
    tier: str
    n_genes: int
    mode: str
    backwards: bool
    gene_names: tuple[str, ...]
    module_names: tuple[str, ...]
    signal_labels: tuple[str, ...]
    signal_modes: tuple[str, ...]
    phenotype_names: tuple[str, ...]
    sealed: str | None = None  # the seal's fingerprint for a sealed organism (luca_gym.seal)
    # "invented" (G001...) or "real" (real human gene symbols, the appendix E.2
    # ablation): a relabelling only, the arrays are the same.
    vocabulary: str = "invented"


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Organism:
    """One immutable organism: ``arrays`` (a pytree leaf set) and ``meta`` (static).

    Build one with :func:`luca_gym.worlds.luca.generator.make_organism`.
    """

    arrays: OrganismArrays
    meta: OrganismMeta = dataclasses.field(metadata=dict(static=True))

    @property
    def n_genes(self) -> int:
        return self.meta.n_genes

    @property
    def n_signals(self) -> int:
        return len(self.meta.signal_labels)

    def fingerprint(self) -> str:
        """A stable SHA-256 over every array (dtype, shape, bytes) and every name."""
        h = hashlib.sha256()
        for field in dataclasses.fields(OrganismArrays):
            a = np.asarray(getattr(self.arrays, field.name))
            h.update(field.name.encode())
            h.update(str(a.dtype).encode())
            h.update(repr(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
        # Every name; ``sealed`` and ``vocabulary`` only when not the default,
        # so an organism keeps the fingerprint it had before they existed.
        defaults = {"sealed": None, "vocabulary": "invented"}
        meta = tuple(
            getattr(self.meta, f.name) for f in dataclasses.fields(OrganismMeta)
            if not (f.name in defaults and getattr(self.meta, f.name) == defaults[f.name])
        )
        h.update(repr(meta).encode())
        return h.hexdigest()


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class SteadyState:
    """Result of a steady-state solve (leading batch dims if batched).

    Attributes:
        states: float32 (..., N). Gene states at the fixed point (noise-free).
        phenotypes: float32 (..., P). Phenotypes read from ``states``.
        converged: bool (...). The residual max|f(s) - s| fell below the tolerance.
        steps: int32 (...). Solver updates taken.
    """

    states: jax.Array
    phenotypes: jax.Array
    converged: jax.Array
    steps: jax.Array
