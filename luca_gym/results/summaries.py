"""Statistics over results lines that every world's tables use: mean,
population std and count per cell (:func:`stats`, as the paper reports
them), :func:`group` and :func:`agents_in`, and the one way a table is
written in markdown (:func:`markdown_table`)."""

from __future__ import annotations

import numpy as np


def stats(values) -> tuple[float, float, int]:
    """(mean, population std, count) of ``values``."""
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std()), int(v.size)  # population std, as the paper


def cell(values_stats) -> str:
    """``mean ± std`` of :func:`stats`' triple, three decimals."""
    mean, std, _ = values_stats
    return f"{mean:.3f} ± {std:.3f}"


def group(records, *fields) -> dict:
    """{tuple of ``fields``' values: [records]} in first-seen order."""
    out: dict = {}
    for r in records:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


def agents_in(records) -> list:
    """The agents of ``records``: each world's baselines in their usual order
    (the registry's), then the others by name."""
    from luca_gym import worlds
    from luca_gym.protocol import LEGACY_WORLD

    order: list = []
    for name in dict.fromkeys(r.get("world", LEGACY_WORLD) for r in records):
        if name in worlds.names():
            order += [a for a in worlds.get(name).baseline_policies() if a not in order]
    return sorted({r["agent"] for r in records}, key=lambda a: (order.index(a) if a in order else len(order), a))


def markdown_table(head, body) -> str:
    """A markdown table of ``head`` (column names) and ``body`` (rows of
    cells, any values: written with ``str``); a ``|`` in a cell is escaped
    and a line break becomes a space, so a cell cannot break the table."""
    def text(v):
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(text, head)) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(map(text, row)) + " |" for row in body]
    return "\n".join(lines)
