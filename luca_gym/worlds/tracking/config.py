"""The tracking world's settings as one value object: :class:`TrackingConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from luca_gym.config import ConfigBase, boolean, int_in, probability, setting

MAX_LENGTH = 64  # M: rows of X (the paper: 3 to 30)
MAX_NODES = 64  # N: columns of X
MAX_COLORS = 16  # C: colour states 0..C-1


@dataclass(frozen=True)
class TrackingConfig(ConfigBase):
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
    ``length`` and ``n_nodes`` fix the shapes (static); the others are
    traced: one compiled step serves them all.
    """

    length: int = setting(10, int_in(2, MAX_LENGTH), static=True)
    n_nodes: int = setting(5, int_in(1, MAX_NODES), static=True)
    n_colors: int = setting(3, int_in(2, MAX_COLORS))
    change_prob: float = setting(0.3, probability())
    cot: bool = setting(False, boolean())

    @property
    def shape(self) -> tuple[int, int]:
        """(M - 1, N): the shape of Y."""
        return self.length - 1, self.n_nodes
