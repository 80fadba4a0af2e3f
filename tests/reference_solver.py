"""An independent float64 numpy reference for the steady-state dynamics.

Written from SPEC 1.4-1.5 and the docstrings of ``luca_gym.worlds.luca.types`` only (it
does not call ``luca_gym.worlds.luca.sim``), so the tests can compare the JAX solver to a
second implementation:

    s <- m * sigmoid(beta * (W s + c + b)) + a

with (m, a) from the interventions and the disease lock, c the input of the
active signals (requested flags or a persistent one), started from the
organism's ``baseline_state``; clamped genes (m == 0) jump to their value and
the others take the damped step s + damping * (f(s) - s). The default
tolerance is far below the JAX solver's 1e-6, so the result is the true fixed
point to float64 precision; ``tol=1e-6, max_steps=500`` reproduces the
simulator's stopping rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Codes as written in SPEC 1.5 / 1.6 (restated, not imported, to stay independent).
NONE, BLOCK, BOOST, DAMPEN = 0, 1, 2, 3
LOCK_HI, LOCK_LO = 1, 2

REFERENCE_TOL = 1e-12
REFERENCE_MAX_STEPS = 100_000


@dataclass(frozen=True)
class Reference:
    """Result of one reference solve.

    Attributes:
        states: float64 (N,).
        phenotypes: float64 (P,).
        converged: the residual fell below ``tol``.
        steps: updates taken.
        residual: the final max|f(s) - s|.
    """

    states: np.ndarray
    phenotypes: np.ndarray
    converged: bool
    steps: int
    residual: float


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def as_float64(arrays) -> dict[str, np.ndarray]:
    """The organism arrays the dynamics need, as float64 / int numpy arrays."""
    names = ("weights", "bias", "beta", "damping", "signal_effects", "readout", "readout_gain", "baseline_state")
    out = {k: np.asarray(getattr(arrays, k), np.float64) for k in names}
    out["gene_lock"] = np.asarray(arrays.gene_lock, np.int64)
    out["signal_persist"] = np.asarray(arrays.signal_persist, bool)
    return out


def clamps(codes: np.ndarray, gene_lock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-gene multiplier m and offset a, written gene by gene from SPEC 1.5/1.6."""
    n = codes.shape[0]
    m = np.ones(n)
    a = np.zeros(n)
    for g in range(n):
        code, lock = int(codes[g]), int(gene_lock[g])
        locked_value = 1.0 if lock == LOCK_HI else 0.0
        if code == BLOCK:
            m[g], a[g] = 0.0, 0.0
        elif code == BOOST:
            m[g], a[g] = 0.0, 1.0
        elif code == DAMPEN:
            if lock in (LOCK_HI, LOCK_LO):
                m[g], a[g] = 0.0, 0.5 * locked_value
            else:
                m[g], a[g] = 0.5, 0.0
        elif lock in (LOCK_HI, LOCK_LO):
            m[g], a[g] = 0.0, locked_value
    return m, a


def phenotypes(arrays, states: np.ndarray) -> np.ndarray:
    """sigmoid(gain * (s - s*) . r^T) in float64."""
    p = as_float64(arrays) if not isinstance(arrays, dict) else arrays
    return _sigmoid(p["readout_gain"] * (states - p["baseline_state"]) @ p["readout"].T)


def solve(
    arrays,
    gene_codes=None,
    signal_flags=None,
    tol: float = REFERENCE_TOL,
    max_steps: int = REFERENCE_MAX_STEPS,
) -> Reference:
    """Steady state of one organism under one intervention (codes (N,), flags (S,))."""
    p = arrays if isinstance(arrays, dict) else as_float64(arrays)
    n, s_count = p["weights"].shape[0], p["signal_effects"].shape[0]
    codes = np.zeros(n, np.int64) if gene_codes is None else np.asarray(gene_codes, np.int64)
    flags = np.zeros(s_count, bool) if signal_flags is None else np.asarray(signal_flags, bool)
    m, a = clamps(codes, p["gene_lock"])
    active = (flags | p["signal_persist"]).astype(np.float64)
    drive = p["bias"] + active @ p["signal_effects"]
    clamped = m == 0.0

    def f(s):
        return m * _sigmoid(p["beta"] * (p["weights"] @ s + drive)) + a

    s = p["baseline_state"].copy()
    residual = float(np.max(np.abs(f(s) - s)))
    steps = 0
    while residual >= tol and steps < max_steps:
        s = np.where(clamped, a, s + p["damping"] * (f(s) - s))
        residual = float(np.max(np.abs(f(s) - s)))
        steps += 1
    return Reference(
        states=s, phenotypes=phenotypes(p, s), converged=residual < tol, steps=steps, residual=residual
    )
