"""Figure helpers every world's report and viewer share (matplotlib, Agg)."""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt, fig, path: str) -> None:
    """Save with every outside legend and label inside the image; close."""
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
