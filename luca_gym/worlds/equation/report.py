"""The equation world's part of ``luca-gym report``: the paper's Table 1 cells,
success rate and average iterations over successful sessions only (∞ where
none succeeded), by agent and setting; and :func:`figure_sessions`, sessions
on one instance as their agents played them (:func:`session_of` reads one
from its messages)."""

from __future__ import annotations

import json

import numpy as np

from luca_gym.figures import agent_color, legend_right, panel_letters, pyplot, save
from luca_gym.summaries import group

KEYS = ("complexity", "n_variables", "n_distractors")


def table(records) -> str:
    """Markdown: agent, settings, sessions, success rate, iterations over the successful ones and over all."""
    lines = ["| agent | complexity | Var | Dis | sessions | success | iterations (successful) | iterations (all) |",
             "| --- " * 8 + "|"]
    for key, rs in group(records, "agent", *KEYS).items():
        won = [r["scores"]["iterations"] for r in rs if r["scores"]["success"] == 1.0]
        every = [r["scores"]["iterations"] for r in rs]
        mean_won = f"{sum(won) / len(won):.2f}" if won else "∞"
        lines.append("| " + " | ".join(map(str, key)) + f" | {len(rs)} | {len(won) / len(rs):.0%} | {mean_won} | "
                     f"{sum(every) / len(every):.2f} |")
    return "\n".join(lines)


def sections(records, out_dir, *, source=None, notes=None) -> list[str]:
    """``luca-gym report``'s markdown parts for this world's records."""
    return ["## equation (symbolic equation discovery)",
            "Success rate, and iterations (queries + 1 for the submission) averaged over successful sessions "
            "as the paper does (∞ where none succeeded) and over all.", table(records)]


def session_of(messages) -> dict:
    """What a finished session's messages (``run_agent``'s ``record["messages"]``)
    show of it: ``variables`` (from ``describe``; ``None`` if never called),
    ``queries`` (each ``(inputs {name: value}, output)``, in order), the last
    ``formula`` submitted and accepted (``None`` if none) and the ``scores``.
    Reads only the tool calls and their answers: what the agent saw."""
    calls = {c["id"]: c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()}
    out = {"variables": None, "queries": [], "formula": None, "scores": None}
    for m in messages:
        if m.get("role") != "tool" or m.get("is_error"):
            continue
        answer, call = json.loads(m["content"]), calls.get(m.get("tool_call_id"), {})
        if "error" in answer:
            continue
        if m["name"] == "describe":
            out["variables"] = list(answer["variables"])
        elif m["name"] == "query":
            out["queries"].append((dict(answer["inputs"]), float(answer["output"])))
        elif "scores" in answer:
            out["scores"] = dict(answer["scores"])
            if m["name"] == "submit_formula":
                out["formula"] = call.get("arguments", {}).get("formula")
    return out


def figure_sessions(sessions: dict, path: str, *, title: str = "") -> None:
    """Sessions on one instance, ``{agent: session_of(...)}``, to the PNG
    ``path``: (a) where each agent queried, each variable's input range with
    the agent's queries on it (numbered in order), and (b) the output each
    query read (a log axis where every output is positive), then each agent's
    submitted formula with its success and iterations. Shows only the calls
    and their answers, never the hidden formula or the held-out inputs."""
    plt = pyplot()
    variables = next(s["variables"] for s in sessions.values() if s["variables"])
    low, high = 1.0, 5.0
    fig, (ax_in, ax_out) = plt.subplots(1, 2, figsize=(10.5, 0.45 * len(variables) + 3.2),
                                        gridspec_kw={"width_ratios": [1.25, 1]})
    rows = np.arange(len(variables))[::-1]
    shift = np.linspace(-0.18, 0.18, len(sessions)) if len(sessions) > 1 else [0.0]
    outputs = []
    for k, (agent, session) in enumerate(sessions.items()):
        color = agent_color(agent)
        for q, (inputs, output) in enumerate(session["queries"], start=1):
            xs = [inputs[v] for v in variables]
            ax_in.scatter(xs, rows + shift[k], s=70, color=color, edgecolor="white", zorder=3,
                          label=agent if q == 1 else None)
            for x, y in zip(xs, rows + shift[k]):
                ax_in.text(x, y, str(q), ha="center", va="center", fontsize=6, color="white", zorder=4)
            outputs.append(output)
        if session["queries"]:
            ax_out.plot(range(1, len(session["queries"]) + 1), [o for _, o in session["queries"]], marker="o",
                        color=color, label=agent)
    ax_in.set_yticks(rows, variables)
    ax_in.set_xlim(low - 0.2, high + 0.2)
    ax_in.set_ylim(-0.6, len(variables) - 0.4)
    ax_in.grid(axis="x", alpha=0.3)
    ax_in.set_xlabel(f"input (each in [{low:g}, {high:g}]); a dot: one query, numbered in order")
    ax_in.set_title("where each agent queried", fontsize=10)
    if outputs and min(outputs) > 0:
        from matplotlib.ticker import FormatStrFormatter

        ax_out.set_yscale("log")
        ax_out.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax_out.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax_out.set_xlabel("query")
    ax_out.set_ylabel("the output it read")
    ax_out.xaxis.get_major_locator().set_params(integer=True)
    ax_out.grid(alpha=0.3)
    ax_out.set_title("what each query answered", fontsize=10)
    legend_right(ax_out)
    panel_letters([ax_in, ax_out])
    lines = []
    for agent, session in sessions.items():
        scores = session["scores"] or {}
        verdict = "succeeded" if scores.get("success") == 1.0 else "failed"
        lines.append(f"{agent}: submitted {session['formula'] or '(nothing)'}; {verdict}, "
                     f"{scores.get('iterations', '?')} iterations")
    fig.text(0.02, -0.02, "\n".join(lines), ha="left", va="top", fontsize=9, family="monospace")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    save(plt, fig, path)
