"""The equation world's part of ``luca-gym report``: the paper's Table 1 cells,
success rate and average iterations over successful sessions only (∞ where
none succeeded), by agent and setting."""

from __future__ import annotations

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
