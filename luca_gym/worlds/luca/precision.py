"""Matrix products at full float32 precision, asked for in the source.

On NVIDIA GPUs JAX computes a float32 matrix product in reduced precision by
default (TF32 on Ampere and later), while the generator's acceptance tests
(steady state, the spectral-radius bound, task residual floors), the solver's
tolerance (2e-7) and the scorer assume full float32. Every product of the
generator, the solver and the differentiable steady state goes through
:func:`matmul`, which asks for ``Precision.HIGHEST`` in the program itself:
not a global or environment setting, which a stored ``jax.export`` program of
the generator (keyed by the source, not by settings) could silently lack. On
the CPU full precision is the default, so organisms there are bitwise those
of before; ``tests/worlds/luca/test_precision.py`` fails on any ``dot_general`` in these
programs that does not ask for it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST


def matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` at full precision (``jnp.matmul(..., precision=HIGHEST)``)."""
    return jnp.matmul(a, b, precision=HIGHEST)
