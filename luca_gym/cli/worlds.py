"""``luca-gym worlds``: the registered worlds (built-in and entry points),
one block each, from the registry's descriptions: importing no world's
core, nor JAX, so it answers in well under a second."""

from __future__ import annotations


def add_parser(sub) -> None:
    """``worlds``' parser."""
    p = sub.add_parser("worlds", help="the registered worlds: name, version, headline score, Gymnasium ids, baselines")
    p.set_defaults(func=cmd_worlds)


def cmd_worlds(args) -> int:
    """One block per registered world (built-in and entry points), from the
    registry's descriptions (:func:`luca_gym.worlds.describe`: no world's
    core is imported, nor JAX)."""
    from luca_gym import worlds

    for name in worlds.names():
        w = worlds.describe(name)
        print(f"{w['name']} (version {w['version']}): {w['summary']}")
        print(f"  headline score: {w['headline']};  settings: {', '.join(w['settings']) or 'none'}")
        print(f"  gymnasium: {', '.join(w['gym_ids']) or 'none'}")
        print(f"  baselines: {', '.join(w['baselines']) or 'none'}")
        if w["flat_baselines"] is not None:
            print(f"  flat baselines (teachers of train --algo bc): {', '.join(w['flat_baselines'])}")
        if w["reference"]:
            print(f"  reference: {w['reference']}")
    return 0
