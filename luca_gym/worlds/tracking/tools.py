"""The tracking world's tools for language-model agents, a tool table on
:class:`~luca_gym.tools.table.TableToolSession`: ``get_observations``
(free: X again), ``submit_changes`` (Y, once: scores and ends the session)
and ``end`` (ends it unanswered, every score 0). The schemas, built from the
handlers' signatures, fix Y's shape (minItems = maxItems) and its values
(integers 0 or 1), so a malformed answer is refused before it reaches the
core, costs nothing and changes nothing. Every rule and the scorer are the
core's (:mod:`~luca_gym.worlds.tracking.core`).
"""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np

from luca_gym.tools.table import Field, TableToolSession, tool, tool_table
from luca_gym.worlds.tracking import core
from luca_gym.worlds.tracking.config import TrackingConfig

COT_INSTRUCTION = "Please also include the reason for your answer"  # the paper's chain-of-thought condition
MAX_REASON = 8000  # characters of the reason given with an answer (cot)

Bit = Annotated[int, Field(minimum=0, maximum=1)]
Row = Annotated[list[Bit], Field(items=lambda c: c.n_nodes)]
Changes = Annotated[list[Row], Field(
    items=lambda c: c.length - 1,
    description=lambda c: f"Y: {c.length - 1} rows (steps 0->1 ... {c.length - 2}->{c.length - 1}) of {c.n_nodes} values; "
                          "1 where the node changes colour.")]
# Under cot the reason comes first, as the paper asks for it before the prediction: a model that
# writes its arguments in the schema's order reasons before it answers.
Reason = Annotated[str, Field(max_length=MAX_REASON, description="the reason for your answer", when=lambda c: c.cot)]


class TrackingToolSession(TableToolSession):
    """One tracking session: instance ``seed`` (sealed: of its sealed seed)
    under the settings of :class:`~luca_gym.worlds.tracking.config.TrackingConfig`
    (``length``, ``n_nodes``, ``n_colors``, ``change_prob``, ``cot``)."""

    world = "tracking"
    core = core
    config_class = TrackingConfig
    opening = "The trajectory is in the instructions above. Submit its change-indicator matrix with submit_changes."
    status_keys = ("submissions_left",)
    title = "State tracking"

    @tool(title="The observation matrix X (free)", readOnlyHint=True, idempotentHint=True)
    def get_observations(self):
        """Free. The observation matrix X: one row per step, one colour per node."""
        return core.Action.make(core.OBSERVE, self.config)

    @tool(title="Submit the change-indicator matrix Y (once; ends the session)", readOnlyHint=False, destructiveHint=True,
          idempotentHint=False)
    def submit_changes(self, reason: Reason = "", *, changes: Changes):
        """Submit the change-indicator matrix Y ({c.shape[0]} x {c.shape[1]}, values 0 or 1) once; it is scored and the
        session ends."""
        return core.Action.make(core.SUBMIT, self.config, changes)

    @tool(title="End without an answer (every score 0)", readOnlyHint=False, destructiveHint=True, idempotentHint=True)
    def end(self):
        """End the session without an answer (every score 0)."""
        return core.Action.make(core.END, self.config)

    tools = tool_table(get_observations, submit_changes, end)

    def answer(self, name: str, args: dict) -> dict:
        return {"observations": self.observations()} if name == "get_observations" else {}

    def observations(self) -> list[list[int]]:
        """X as a list of M lists of N ints."""
        return np.asarray(self.state.observations).tolist()

    def system_prompt(self) -> str:
        """The rules for an agent: the trajectory's shape, the change matrix to submit and how it is scored."""
        c = self.config
        rows = "\n".join(json.dumps(r) for r in self.observations())
        # The paper prepends its CoT instruction before the prediction: here, before X and the request for Y.
        cot = f"{COT_INSTRUCTION} (the reason argument of submit_changes, written before the changes).\n\n" if c.cot else ""
        return (
            f"You are shown the trajectory of {c.n_nodes} nodes over {c.length} time steps: the observation matrix X "
            f"({c.length} rows, one per step 0..{c.length - 1}; {c.n_nodes} columns, one per node 0..{c.n_nodes - 1}). "
            f"Each entry is the colour of a node at a step, one of 0..{c.n_colors - 1}.\n\n"
            f"{cot}"
            f"X =\n{rows}\n\n"
            f"Your goal is the change-indicator matrix Y ({c.length - 1} rows, {c.n_nodes} columns): Y[i][j] = 1 if node j "
            f"changes colour between step i and step i+1 (X[i][j] != X[i+1][j]), else 0. Submit Y once with "
            f"submit_changes, as {c.length - 1} lists of {c.n_nodes} integers 0 or 1; the session ends with your "
            f"submission, scored by exact match. get_observations returns X again at no cost."
        )

    def status(self) -> dict:
        return {"submissions_left": int(not bool(self.state.ended))}

    def demo_calls(self) -> list[tuple[str, dict]]:
        """Read X, then submit "no change" everywhere (with a reason under cot)."""
        rows, n = self.config.shape
        changes = [[0] * n for _ in range(rows)]
        submit = {"reason": "a guess: no node changes", "changes": changes} if self.config.cot else {"changes": changes}
        return [("get_observations", {}), ("submit_changes", submit)]
