"""A digest of what every registered world's shipped baselines score: run
them through the harness, keep each results line's ``scores`` and ``calls``,
hash them by (world, agent).

A change that should move no score (a refactor, a package move) keeps the
digest; one that moves a score shows which world and agent it moved. Each
world's baselines (``World.baseline_policies()``: its scripted policies and
its scripted tool agents, no network and no language model) play a small
fixed plan through :func:`luca_gym.harness.plan_world` and
:func:`luca_gym.harness.sweep`, the path ``luca-gym eval`` takes:

* luca: easy and medium, healthy and disease, N=10, seeds 0-1 (model-fit,
  some 10-60 s a session, on easy healthy only);
* dag, relational, equation, tracking: the default settings, seeds 0-2;
* biobank: the tiny profile, seeds 0-1.

Of each results line only the key fields (world, agent, settings, seed),
``scores`` and ``calls`` enter the hash; wall times, versions, digests,
dates and paths do not. The script uses only the registry and harness API,
so it runs on an older tree as well (put that tree first on ``PYTHONPATH``)::

    python benchmarks/results_digest.py --out before.json          # on the old code
    python benchmarks/results_digest.py --compare before.json      # on the new: exit 1 if any differ

It prints ``{world: {agent: sha256}}`` and one overall hash; ``--compare``
prints each (world, agent) whose hash differs (or is missing on either
side). ``--worlds dag,equation`` digests only those worlds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

# The plan of each world: settings (each one value or a list) and seeds.
PLANS = {
    "luca": ({"tier": ["easy", "medium"], "mode": ["healthy", "disease"], "n_genes": 10}, [0, 1]),
    "dag": ({}, [0, 1, 2]),
    "relational": ({}, [0, 1, 2]),
    "equation": ({}, [0, 1, 2]),
    "tracking": ({}, [0, 1, 2]),
    "biobank": ({"profile": "tiny"}, [0, 1]),
}
# Baselines too slow for their world's whole plan: a smaller one.
SLOW = {
    ("luca", "model-fit"): ({"tier": "easy", "mode": "healthy", "n_genes": 10}, [0, 1]),
}
KEPT = ("scores", "calls")


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


def world_lines(name: str, out_dir: str) -> list[dict]:
    """Every baseline of world ``name`` on its plan, through the harness; the
    results lines as written."""
    from luca_gym import harness, worlds

    world = worlds.get(name)
    settings, seeds = PLANS.get(name, ({}, [0, 1, 2]))
    agents = list(world.baseline_policies())
    specs = harness.plan_world(world, [a for a in agents if (name, a) not in SLOW], seeds, **settings)
    for agent in agents:
        if (name, agent) in SLOW:
            slow_settings, slow_seeds = SLOW[name, agent]
            specs += harness.plan_world(world, [agent], slow_seeds, **slow_settings)
    path = harness.sweep(specs, out_dir, policy_factory=lambda agent: harness.make_runner(agent, world=name))
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def digest(lines: list[dict]) -> dict[str, str]:
    """``{agent: sha256}`` over each line's key and kept fields, lines in key order."""
    from luca_gym import harness

    by_agent: dict[str, list] = {}
    for record in lines:
        key = [str(k) for k in harness.record_key(record)]
        by_agent.setdefault(record["agent"], []).append((key, {k: record.get(k) for k in KEPT}))
    return {agent: hashlib.sha256(_canonical(sorted(items, key=lambda kv: kv[0])).encode()).hexdigest()
            for agent, items in sorted(by_agent.items())}


def overall(table: dict) -> str:
    return hashlib.sha256(_canonical(table).encode()).hexdigest()


def compare(table: dict, other: dict) -> list[str]:
    """One line per (world, agent) whose hash differs or is on one side only."""
    lines = []
    for world in sorted(set(table) | set(other)):
        mine, theirs = table.get(world, {}), other.get(world, {})
        for agent in sorted(set(mine) | set(theirs)):
            if agent not in theirs:
                lines.append(f"{world} {agent}: only here")
            elif agent not in mine:
                lines.append(f"{world} {agent}: only in the file compared")
            elif mine[agent] != theirs[agent]:
                lines.append(f"{world} {agent}: differs")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the digest here as JSON")
    parser.add_argument("--compare", help="a digest written by --out: print what differs, exit 1 if anything does")
    parser.add_argument("--worlds", help="comma-separated worlds (default: every registered world)")
    args = parser.parse_args(argv)

    import luca_gym
    from luca_gym import worlds

    names = args.worlds.split(",") if args.worlds else list(worlds.names())
    print(f"luca_gym from {os.path.dirname(luca_gym.__file__)}", file=sys.stderr)
    table = {}
    for name in names:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as out_dir:
            lines = world_lines(name, out_dir)
        table[name] = digest(lines)
        print(f"{name}: {len(lines)} sessions, {len(table[name])} agents, {time.perf_counter() - start:.1f} s",
              file=sys.stderr)
    result = {"worlds": table, "overall": overall(table)}
    print(json.dumps(result, indent=1, sort_keys=True))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            other = json.load(f)["worlds"]
        if args.worlds:
            other = {k: v for k, v in other.items() if k in names}
        differ = compare(table, other)
        for line in differ:
            print(line)
        print("digest: " + ("unchanged" if not differ else f"{len(differ)} differ"))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
