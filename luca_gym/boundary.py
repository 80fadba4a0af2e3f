"""The host boundary every world shares: what leaves a jitted core is numpy.

Bools cross as int8 0/1 (Gymnasium's Box has no bool dtype), so an
observation is the same object whether a Gymnasium env, the harness or a tool
session reads it.
"""

from __future__ import annotations

import jax
import numpy as np


def to_numpy_observation(obs: dict) -> dict:
    """Core observation (JAX arrays) -> numpy, bools as int8 (0/1)."""
    obs = jax.device_get(obs)
    return {k: (np.asarray(v, np.int8) if np.asarray(v).dtype == np.bool_ else np.asarray(v)) for k, v in obs.items()}


def to_python(tree: dict) -> dict:
    """A dict of JAX/numpy scalars and arrays -> Python numbers and lists (JSON-ready)."""
    out = {}
    for k, v in jax.device_get(tree).items():
        v = np.asarray(v)
        out[k] = v.tolist() if v.ndim else (int(v) if v.dtype.kind in "iu" else float(v))
    return out
