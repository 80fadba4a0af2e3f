"""The ground floor every world shares: validators of arguments that come
from users and agents, and the seed range.

Errors name the argument, the bad value (cut by :func:`short_repr`, since the
value may be hostile) and what is allowed. Nothing here imports another module
of the package.
"""

from __future__ import annotations

import numpy as np

SEED_LIMIT = 2**63  # seeds are integers in [0, SEED_LIMIT)
# Environments that are not given an instance seed draw one below this.
DRAWN_SEED_LIMIT = 2**31 - 1


def is_integer(value) -> bool:
    """A Python or numpy integer, not a bool."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


def check_seed(seed, name: str = "seed") -> int:
    """An instance seed (an organism, a graph, a biobank): a Python or numpy integer in [0, 2**63). Returns it as int.

    Floats (even 3.0), bools and arrays are refused: a seed names an organism,
    so two spellings of one value must not exist."""
    if not is_integer(seed):
        raise ValueError(f"{name}: {short_repr(seed)} is not an integer; allowed 0..2**63-1")
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"{name}: {seed} out of range; allowed 0..2**63-1")
    return int(seed)


def check_bool(value, name: str) -> bool:
    """``value`` as a bool; ValueError naming ``name`` unless it is a Python or numpy bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: {short_repr(value)} is not a bool; allowed True or False")
    return bool(value)


def check_positive_int(value, name: str) -> int:
    """``value`` as an int; ValueError naming ``name`` unless it is an integer of at least 1."""
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; a positive integer")
    return int(value)


def short_repr(value) -> str:
    """A repr cut to 40 characters, for error messages about hostile input."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_render_mode(render_mode, allowed=("ansi",)):
    """A Gymnasium ``render_mode``: None or one of ``allowed``."""
    if render_mode is not None and render_mode not in allowed:
        raise ValueError(f"render_mode: {render_mode!r} not supported; allowed None or {', '.join(map(repr, allowed))}")
    return render_mode


def check_keys(mapping: dict, what: str, allowed) -> None:
    """Every key of ``mapping`` a str among ``allowed`` (mixed-type keys give a
    ValueError, never a TypeError from sorting them)."""
    for key in mapping:
        if not isinstance(key, str) or key not in allowed:
            raise ValueError(f"{what}: unknown key {short_repr(key)}; allowed {', '.join(repr(a) for a in allowed)}")
