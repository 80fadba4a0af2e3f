"""The graph worlds' process analysis (``World.process``): how right each
cycle's proposed matrix is (:func:`proposal_cycles`), computed from a
session's ``calls``, after the Auto-Discovery-Bench paper's process
analyses. The analyses every world shares (reasoning keywords, tokens per
round) are :mod:`luca_gym.results.process`'s.

Pure functions over records (lines of ``sessions.jsonl``); a record without a
transcript (a scripted policy's) is left out.
"""

from __future__ import annotations

import json

from luca_gym.results.process import groups, with_transcripts
from luca_gym.results.summaries import markdown_table

GRAPH_WORLDS = ("dag", "relational")  # the worlds whose proposals (adjacency matrices) are scored per cycle
MAX_CYCLES = 30  # cycles shown per agent in the per-cycle table (the rest are counted in a note)


def _arguments(entry) -> dict:
    args = entry.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def proposals(record) -> list[dict]:
    """The matrices ``record`` (a graph world's session) proposed, in order,
    from its calls: each intervention that stated one and was accepted
    (its result says ``adjacency_correct``) and the final ``submit_graph``
    (right when its scores say ``success`` 1). Each ``{"cycle" (from 1),
    "call", "adjacency", "correct"}``."""
    out = []
    for entry in record.get("calls") or ():
        if not isinstance(entry, dict):
            continue
        result = entry.get("result") if isinstance(entry.get("result"), dict) else {}
        if "error" in result:
            continue
        adjacency = _arguments(entry).get("adjacency")
        if "adjacency_correct" in result:
            correct = bool(result["adjacency_correct"])
        elif entry.get("call") == "submit_graph" and isinstance(result.get("scores"), dict):
            correct = result["scores"].get("success") == 1
        else:
            continue
        out.append({"cycle": len(out) + 1, "call": entry.get("call"), "adjacency": adjacency, "correct": correct})
    return out


def _entries(matrix, n: int) -> list | None:
    """The off-diagonal entries of an n x n 0/1 matrix as booleans, or None if it is not one."""
    if not isinstance(matrix, list) or len(matrix) != n or not all(isinstance(row, list) and len(row) == n for row in matrix):
        return None
    return [bool(matrix[i][j]) for i in range(n) for j in range(n) if i != j]


def edge_accuracy(proposed, truth) -> float | None:
    """The share of off-diagonal entries of ``proposed`` equal to ``truth``'s
    (two n x n 0/1 matrices; None if either is not one, or n < 2)."""
    n = len(truth) if isinstance(truth, list) else 0
    a, b = _entries(proposed, n), _entries(truth, n)
    if a is None or b is None or not a:
        return None
    return sum(x == y for x, y in zip(a, b)) / len(a)


def proposal_cycles(records) -> list[dict]:
    """Per world, agent and cycle (the n-th proposal of a session), over the
    graph worlds' sessions with a transcript: ``world``, ``agent``, ``cycle``, ``proposals``
    (sessions that made an n-th proposal), ``correct`` (how many were
    right), ``share_correct``, and, over the solved sessions only (the
    record then holds the true matrix: the agent's own accepted one, so no
    truth is read from outside the record), ``known`` (how many),
    ``edge_accuracy`` (mean share of off-diagonal entries right) and
    ``entries_lost`` (mean entries right in the previous proposal and wrong
    in this one: where a model loses track; None at cycle 1)."""
    mine = [r for r in with_transcripts(records) if r.get("world") in GRAPH_WORLDS]
    rows = []
    for world, agent, sessions in groups(mine):
        cycles: dict[int, dict] = {}
        for r in sessions:
            made = proposals(r)
            truth = next((p["adjacency"] for p in made if p["correct"]), None)
            previous = None
            for p in made:
                c = cycles.setdefault(p["cycle"], {"proposals": 0, "correct": 0, "accuracy": [], "lost": []})
                c["proposals"] += 1
                c["correct"] += p["correct"]
                accuracy = None if truth is None else edge_accuracy(p["adjacency"], truth)
                if accuracy is not None:
                    c["accuracy"].append(accuracy)
                    if previous is not None:
                        n = len(truth)
                        now, before, true = _entries(p["adjacency"], n), _entries(previous, n), _entries(truth, n)
                        if before is not None:
                            c["lost"].append(sum(b == t and x != t for x, b, t in zip(now, before, true)))
                previous = p["adjacency"] if accuracy is not None else None
        for cycle in sorted(cycles):
            c = cycles[cycle]
            rows.append({"world": world, "agent": agent, "cycle": cycle, "proposals": c["proposals"], "correct": c["correct"],
                         "share_correct": c["correct"] / c["proposals"], "known": len(c["accuracy"]),
                         "edge_accuracy": sum(c["accuracy"]) / len(c["accuracy"]) if c["accuracy"] else None,
                         "entries_lost": sum(c["lost"]) / len(c["lost"]) if c["lost"] else None})
    return rows


def cycle_table(records, max_cycles: int = MAX_CYCLES) -> str | None:
    """:func:`proposal_cycles` as a markdown table (the first ``max_cycles``
    cycles of each world and agent; a note counts the rows left out), or None where no
    graph session with a transcript made a proposal."""
    rows = proposal_cycles(records)
    if not rows:
        return None
    shown = [r for r in rows if r["cycle"] <= max_cycles]

    def num(v, fmt):
        return "—" if v is None else fmt.format(v)

    body = [[r["world"], r["agent"], r["cycle"], r["proposals"], f"{r['correct']} ({100 * r['share_correct']:.0f}%)", r["known"],
             num(r["edge_accuracy"], "{:.3f}"), num(r["entries_lost"], "{:.2f}")] for r in shown]
    text = markdown_table(["world", "agent", "cycle", "proposals", "right", "solved sessions", "edge accuracy (solved)",
                           "entries lost since the previous cycle (solved)"], body)
    if len(shown) < len(rows):
        left = len(rows) - len(shown)
        text += f"\n\n{left} row{'' if left == 1 else 's'} of cycles beyond {max_cycles} left out."
    return text


def sections(records) -> list[str]:
    """The graph worlds' process section (markdown blocks) for ``records``'
    sessions with a transcript that proposed matrices: proposal accuracy by
    cycle; empty where none did."""
    cycles = cycle_table(records)
    if cycles is None:
        return []
    return [
        "### Proposal accuracy by cycle (graph worlds)",
        "Cycle n is a session's n-th proposed matrix (each intervention's, then a submission's): how many were "
        "right and, over the solved sessions (whose accepted matrix is the true one), the mean share of "
        "off-diagonal entries right and the entries right at the previous cycle but wrong at this one.",
        cycles,
    ]
