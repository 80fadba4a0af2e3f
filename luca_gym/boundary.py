"""The host boundary every world shares: what leaves a jitted core is numpy,
and what an agent hands in is checked before anything reaches the core.

Bools cross as int8 0/1 (Gymnasium's Box has no bool dtype), so an
observation is the same object whether a Gymnasium env, the harness or a tool
session reads it.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from luca_gym.validate import check_keys, short_repr


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


def reset_options(options: Any, allowed: tuple) -> dict:
    """``reset(options=...)``: None or a dict whose keys are among ``allowed``."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"options: expected a dict or None, got {type(options).__name__}")
    check_keys(options, "options", allowed)
    return dict(options)


def check_flat_actions(actions: Any, size: int, batch: tuple = (), name: str = "action") -> np.ndarray:
    """Flat action indices of shape ``batch`` as int32, each an integer in
    [0, ``size``). Python and numpy integers (0-d arrays too) pass; bools,
    floats (even 3.0), strings and anything of another shape raise ValueError
    naming ``name``, the value and what is allowed."""
    allowed = f"an integer in 0..{size - 1}"
    try:
        array = np.asarray(actions)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: {short_repr(actions)} not allowed; {allowed}") from None
    if array.shape != tuple(batch) and not batch:
        raise ValueError(f"{name}: {short_repr(actions)} not allowed; {allowed}")
    if array.shape != tuple(batch):
        raise ValueError(f"{name}: shape {array.shape} not allowed; expected {tuple(batch)}, each {allowed}")
    # A Python int beyond int64 arrives as an object array: refused here too.
    if array.dtype.kind not in "iu":
        got = f" (dtype {array.dtype})" if batch else ""
        raise ValueError(f"{name}: {short_repr(actions)}{got} not allowed; {allowed}")
    outside = (array < 0) | (array >= size)
    if outside.any():
        where = tuple(int(i) for i in np.argwhere(outside)[0])
        label = f"{name}[{', '.join(map(str, where))}]" if batch else name
        raise ValueError(f"{label}: {array[where]} not allowed; {allowed}")
    return array.astype(np.int32)
