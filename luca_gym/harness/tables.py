"""Summary tables over results lines that serve every world: :func:`group`,
:func:`agents_in` and :func:`world_table` (a world's headline score by agent
and settings). A world's own tables live in the world (LUCA's paper-format
tables: :mod:`luca_gym.worlds.luca.tables`)."""

from __future__ import annotations

from luca_gym.results.summaries import agents_in, cell, group, markdown_table, stats

__all__ = ["agents_in", "group", "world_table"]


def world_table(records, world) -> str:
    """A world's headline score by agent and settings: mean ± population std
    (n). A setting that is the same in every row is said once, in a line
    above the table (``every row: n_nodes=10, ...``), not as a column."""
    from luca_gym import worlds

    world = worlds.get(world)
    names = [k for k in world.session_keys if k != "seed"]
    mine = [r for r in records if r.get("world") == world.name]
    cells = group(mine, "agent", *names)
    values = {name: {key[1 + i] for key in cells} for i, name in enumerate(names)}
    constant = [n for n in names if len(values[n]) == 1]
    shown = [i for i, n in enumerate(names) if n not in constant]
    columns = [names[i] for i in shown]
    lines = [f"every row: {', '.join(f'{n}={next(iter(values[n]))}' for n in constant)}", ""] if constant else []
    body = [[key[0], *(key[1 + i] for i in shown), cell(stats([r["scores"][world.headline] for r in rs]))]
            for key, rs in cells.items()]
    lines.append(markdown_table(["agent", *columns, world.headline], body))
    return "\n".join(lines)

