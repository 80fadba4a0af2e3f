"""Summary tables over results lines that serve every world: :func:`group`,
:func:`agents_in` and :func:`world_table` (a world's headline score by agent
and settings). A world's own tables live in the world (LUCA's paper-format
tables: :mod:`luca_gym.worlds.luca.tables`)."""

from __future__ import annotations

from luca_gym.summaries import agents_in, cell, group, stats

__all__ = ["agents_in", "group", "world_table"]


def world_table(records, world) -> str:
    """A world's headline score by agent and settings: mean ± population std (n)."""
    from luca_gym import worlds

    world = worlds.get(world)
    names = [k for k in world.session_keys if k != "seed"]
    cells = group([r for r in records if r.get("world") == world.name], "agent", *names)
    lines = [f"| agent | {' | '.join(names)} | {world.headline} |" if names else f"| agent | {world.headline} |",
             "| --- " * (len(names) + 2) + "|"]
    for key, rs in cells.items():
        lines.append("| " + " | ".join(map(str, key)) + f" | {cell(stats([r['scores'][world.headline] for r in rs]))} |")
    return "\n".join(lines)

