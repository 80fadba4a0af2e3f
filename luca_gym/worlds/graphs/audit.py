"""The evidence audit of a graph world's session (``dag``, ``relational``):
what each intervention the agent made told it of the hidden graph's edges,
and whether its last proposed matrix agrees with what it had been told.

The session is replayed from its results line: the world's own tool session
(:class:`~luca_gym.worlds.graphs.tools.GraphToolSession`, the core behind it)
is opened on the line's seed and settings, as the scorer opens it, and every
recorded call is made again, so the evidence is the core's own
(:attr:`~luca_gym.worlds.graphs.core.GraphState.evidence`,
:func:`~luca_gym.worlds.graphs.core.knowledge`); nothing here restates a rule.

Hypotheses are the candidate edges: ordered pairs (i, j), i != j, directed,
unordered pairs undirected. A pair is *live* while
:func:`~luca_gym.worlds.graphs.core.knowledge` leaves it UNKNOWN; an
intervention *rules out* the live pairs it decides (EDGE or NO_EDGE, by what
it showed or, directed, by acyclicity once a path is seen). The final claim is
the last matrix the agent proposed (with an intervention under
``proposals="every"``, or ``submit_graph``); *evidence ignored* is the pairs
the knowledge at the moment of that claim had decided and the matrix
contradicts, and the claim is *consistent* when there are none. The audit
sees only the agent's evidence: with ``observation_noise`` a misreading makes
the knowledge wrong, and a matrix that follows it is still consistent.
"""

from __future__ import annotations

import numpy as np

from luca_gym import worlds
from luca_gym.protocol import load
from luca_gym.worlds.graphs import core


def _pairs(n: int, directed: bool) -> np.ndarray:
    """bool (N, N): the pairs that can hold an edge (one per unordered pair, undirected)."""
    return ~np.eye(n, dtype=bool) if directed else np.triu(np.ones((n, n), bool), 1)


def known_of(state) -> np.ndarray:
    """int8 (N, N): what ``state``'s evidence implies (:func:`core.knowledge`), as numpy."""
    return np.asarray(core.knowledge(state.evidence, state.reach))


def contradicted(claim: np.ndarray, known: np.ndarray, directed: bool) -> int:
    """The pairs ``known`` decides (EDGE or NO_EDGE) that the matrix ``claim``
    (bool (N, N)) states otherwise, one per unordered pair undirected."""
    decided = (known != core.UNKNOWN) & _pairs(len(known), directed)
    return int(np.sum(decided & (np.asarray(claim, bool) != (known == core.EDGE))))


def open_session(record: dict):
    """The world's tool session on ``record``'s seed and settings, freshly
    opened (the instance regenerated as the scorer generates it); None for
    a sealed line (its instance needs the seal's secret)."""
    if record.get("sealed"):
        return None
    world = worlds.get(record["world"])
    settings = {k: record[k] for k in world.session_keys if k != "seed" and k in record}
    return load(world.tools)(record["seed"], **settings)


def audit(record: dict) -> dict | None:
    """The evidence audit of one ``dag`` or ``relational`` results line (None
    where it cannot be replayed: sealed). Returns ``{"hypotheses": "edges",
    "n_hypotheses", "experiments", "ruled_out"`` (per intervention, in
    order), ``"live_before"`` (per intervention), ``"ruled_out_per_experiment"``
    (mean; None without interventions), ``"claimed"`` (whether a matrix was
    proposed), ``"consistent"`` and ``"evidence_ignored"`` (None without a
    claim), ``"decided_at_claim"``, ``"replay_matches"`` (the replay showed
    every recorded state)}."""
    session = open_session(record)
    if session is None:
        return None
    config = session.config
    n, directed = config.n, config.directed
    pairs = _pairs(n, directed)
    ruled_out, live_before = [], []
    claim, claim_known, matches = None, None, True
    for call in record.get("calls") or []:
        name, arguments = call.get("call"), call.get("arguments")
        before = session.state
        known_before = known_of(before)
        result = session.call(name, arguments)
        if "error" in result:
            continue
        after = session.state
        proposing = name == "submit_graph" or (name == config.intervene_tool and config.proposals == "every")
        if proposing:
            claim, claim_known = np.asarray(arguments["adjacency"], bool), known_before
        if int(after.interventions) > int(before.interventions):
            live = (known_before == core.UNKNOWN) & pairs
            decided = live & (known_of(after) != core.UNKNOWN)
            live_before.append(int(live.sum()))
            ruled_out.append(int(decided.sum()))
            recorded = (call.get("result") or {}).get("states")
            matches &= recorded is None or list(recorded) == list(result.get("states", []))
    ignored = None if claim is None else contradicted(claim, claim_known, directed)
    return {
        "hypotheses": "edges",
        "n_hypotheses": int(pairs.sum()),
        "experiments": len(ruled_out),
        "ruled_out": ruled_out,
        "live_before": live_before,
        "ruled_out_per_experiment": float(np.mean(ruled_out)) if ruled_out else None,
        "claimed": claim is not None,
        "consistent": None if claim is None else ignored == 0,
        "evidence_ignored": ignored,
        "decided_at_claim": None if claim is None else int(((claim_known != core.UNKNOWN) & pairs).sum()),
        "replay_matches": bool(matches),
    }
