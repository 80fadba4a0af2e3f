"""How often a planted decoy is the single most extreme protein of its cue
family (``protein_qc``'s statistics) on twelve ``tiny`` worlds carrying all
nine biases (seeds 9501-9512): the fingerprint table of BENCHMARKS.md.

The cue list and the worlds are ``tests/worlds/biobank/test_biobank_floors.py``'s (the test
bounds what this prints)::

    .venv/bin/python benchmarks/biobank_cues.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_biobank_floors import CUES, TINY, _rank  # noqa: E402

from luca_gym.worlds.biobank import analysis  # noqa: E402
from luca_gym.worlds.biobank.design import ARCHETYPES, MECHANISMS, Design  # noqa: E402
from luca_gym.worlds.biobank.world import make_world  # noqa: E402


def main() -> None:
    """Print, per (mechanism, cue), the worlds whose decoy tops the cue, then the share over every cue."""
    tops = {}
    for seed in range(9501, 9513):
        world = make_world(seed, TINY, design=Design(ARCHETYPES[seed % 4], 2, "standard", MECHANISMS))
        qc = analysis.protein_qc(world.release)
        index = {p: i for i, p in enumerate(world.release.proteins)}
        decoy = {m: index[p] for p, m in world.oracle.decoys.items()}
        for mechanism, field, way in CUES:
            tops.setdefault((mechanism, field), []).append(_rank(qc[field], decoy[mechanism], way) == 0)
    for (mechanism, field), hits in tops.items():
        print(f"{mechanism:22s} {field:14s} {sum(hits)} / {len(hits)}")
    connectivity = [t for (_, field), hits in tops.items() if field == "connectivity" for t in hits]
    print(f"least connected: {sum(connectivity)} / {len(connectivity)}; "
          f"every cue, every world: {np.mean([t for hits in tops.values() for t in hits]):.0%}")


if __name__ == "__main__":
    main()
