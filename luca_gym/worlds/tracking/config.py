"""The tracking world's settings as one value object: :class:`TrackingConfig`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from luca_gym.validate import check_bool, is_integer, short_repr

MAX_LENGTH = 64  # M: rows of X (the paper: 3 to 30)
MAX_NODES = 64  # N: columns of X
MAX_COLORS = 16  # C: colour states 0..C-1


def _int_in(value, name: str, low: int, high: int) -> int:
    if not is_integer(value) or not low <= value <= high:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; an integer in {low}..{high}")
    return int(value)


def _probability(value, name: str) -> float:
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not number or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; a number in [0, 1]")
    return float(value)


@dataclass(frozen=True)
class TrackingConfig:
    """The settings that, with a seed, name a tracking instance.

    Attributes:
        length: M, the trajectory length (rows of X), 2..64; the paper's
            values are 3, 5, 10, 15, 20, 25 and 30.
        n_nodes: N, the nodes (columns of X), 1..64.
        n_colors: C, the colour states: X holds colours 0..C-1 (the paper's
            P is C-1), 2..16.
        change_prob: the probability that a node changes colour between two
            consecutive steps, in [0, 1]; a change picks one of the other
            C-1 colours uniformly. At the defaults a cell of Y is 1 with
            probability 0.3 and a row of Y is all zeros with 0.7**5 = 0.17.
        cot: the paper's chain-of-thought condition: the prompt says
            "Please also include the reason for your answer" before the
            trajectory and the request for Y (the paper prepends it before
            the prediction), and ``submit_changes`` takes a ``reason``, the
            first property of its schema (before ``changes``).

    Checked and normalised on construction (ValueError naming the field, the
    value and what is allowed), so a config that exists is a valid one.
    """

    length: int = 10
    n_nodes: int = 5
    n_colors: int = 3
    change_prob: float = 0.3
    cot: bool = False

    def __post_init__(self):
        object.__setattr__(self, "length", _int_in(self.length, "length", 2, MAX_LENGTH))
        object.__setattr__(self, "n_nodes", _int_in(self.n_nodes, "n_nodes", 1, MAX_NODES))
        object.__setattr__(self, "n_colors", _int_in(self.n_colors, "n_colors", 2, MAX_COLORS))
        object.__setattr__(self, "change_prob", _probability(self.change_prob, "change_prob"))
        object.__setattr__(self, "cot", check_bool(self.cot, "cot"))

    @property
    def shape(self) -> tuple[int, int]:
        """(M - 1, N): the shape of Y."""
        return self.length - 1, self.n_nodes

    def settings(self) -> dict:
        """The fields as keyword settings (a session's key settings but the seed)."""
        return asdict(self)
