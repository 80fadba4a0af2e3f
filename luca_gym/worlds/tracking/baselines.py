"""The tracking world's baselines, as tool agents (callables ``(messages,
tools) -> AgentTurn``, new for each session):

* ``systematic`` reads X with ``get_observations`` and submits Y computed
  cell by cell: exact on every instance (the ceiling);
* ``forgetful`` reads X but tracks only the first :data:`FORGETFUL_ROWS`
  transitions (steps 0->1 ... 3->4); after them it answers "no change", so its
  accuracy by position falls from 1 to the chance that a row has no change
  ((1 - change_prob)**N), a stand-in for the paper's decay with position
  (Figure 5) that is exact at lengths up to 5;
* ``random`` submits a uniformly random 0/1 matrix of the right shape without
  reading X (drawn from a hash of its instructions: a replay is exact).

Each agent reads only what any agent is given: the messages and the tool specs.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from luca_gym.llm.loop import AgentTurn, ToolCall

FORGETFUL_ROWS = 4  # K: the transitions the forgetful baseline tracks


def _shape(tools) -> tuple[int, int]:
    """(M-1, N) from the published schema of ``submit_changes``."""
    changes = next(t for t in tools if t["name"] == "submit_changes")["input_schema"]["properties"]["changes"]
    return changes["minItems"], changes["items"]["minItems"]


def _submit(changes, reason: str, tools, turn: int) -> AgentTurn:
    """Submit ``changes`` (0/1, (M-1, N)), with ``reason`` where the tool takes one (the CoT condition)."""
    arguments = {"changes": np.asarray(changes, int).tolist()}
    if "reason" in next(t for t in tools if t["name"] == "submit_changes")["input_schema"]["properties"]:
        arguments = {"reason": reason, **arguments}  # in the schema's order: the reason first
    return AgentTurn(tool_calls=[ToolCall("submit_changes", arguments, f"call_{turn}")])


class _Tracker:
    """Read X, then submit Y as computed by :meth:`answer` (``reason``: what it says it did)."""

    reason: str

    def __call__(self, messages, tools) -> AgentTurn:
        seen = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        observed = [s["observations"] for s in seen if "observations" in s]
        if not observed:
            return AgentTurn(tool_calls=[ToolCall("get_observations", {}, f"call_{len(seen)}")])
        return _submit(self.answer(np.asarray(observed[-1])), self.reason, tools, len(seen))

    def answer(self, x: np.ndarray) -> np.ndarray:
        """Y, bool (M-1, N), as this agent sees it from X (int (M, N))."""
        raise NotImplementedError


class Systematic(_Tracker):
    """Every transition, cell by cell: Y = X[1:] != X[:-1]."""

    reason = "Y[i][j] is 1 exactly where X[i][j] differs from X[i+1][j], checked for every step and node."

    def answer(self, x):
        return x[1:] != x[:-1]


class Forgetful(_Tracker):
    """The first :data:`FORGETFUL_ROWS` transitions right, "no change" after."""

    reason = f"I compared the first {FORGETFUL_ROWS + 1} steps node by node and assumed no change after them."

    def answer(self, x):
        y = x[1:] != x[:-1]
        y[FORGETFUL_ROWS:] = False
        return y


class RandomGuess:
    """A uniformly random 0/1 matrix, X unread (seeded by a hash of the instructions)."""

    def __call__(self, messages, tools) -> AgentTurn:
        digest = hashlib.sha256(messages[0]["content"].encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        return _submit(rng.integers(0, 2, _shape(tools)), "A random guess.", tools, 0)


BASELINES = {"systematic": Systematic, "forgetful": Forgetful, "random": RandomGuess}
