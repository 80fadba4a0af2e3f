"""The tracking world's tools for language-model agents, on
:class:`~luca_gym.tools.session.ToolSessionBase`: ``get_observations``
(free: X again), ``submit_changes`` (Y, once: scores and ends the session)
and ``end`` (ends it unanswered, every score 0). The schemas fix Y's shape
(minItems = maxItems) and its values (integers 0 or 1), so a malformed answer
is refused before it reaches the core, costs nothing and changes nothing.
Every rule and the scorer are the core's (:mod:`~luca_gym.worlds.tracking.core`).
"""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np

from luca_gym import seal as seal_mod
from luca_gym.tools.session import ToolSessionBase
from luca_gym.validate import check_keys
from luca_gym.worlds.tracking import core
from luca_gym.worlds.tracking.config import TrackingConfig

COT_INSTRUCTION = "Please also include the reason for your answer"  # the paper's chain-of-thought condition
MAX_REASON = 8000  # characters of the reason given with an answer (cot)
KINDS = {"submit_changes": core.SUBMIT, "end": core.END, "get_observations": core.OBSERVE}
ANNOTATIONS = {  # the MCP server publishes these
    "get_observations": {"title": "The observation matrix X (free)", "readOnlyHint": True, "idempotentHint": True},
    "submit_changes": {"title": "Submit the change-indicator matrix Y (once; ends the session)", "readOnlyHint": False,
                       "destructiveHint": True, "idempotentHint": False},
    "end": {"title": "End without an answer (every score 0)", "readOnlyHint": False, "destructiveHint": True,
            "idempotentHint": True},
}
NO_ARGUMENTS = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


class TrackingToolSession(ToolSessionBase):
    """One tracking session: instance ``seed`` (sealed: of its sealed seed)
    under the settings of :class:`~luca_gym.worlds.tracking.config.TrackingConfig`
    (``length``, ``n_nodes``, ``n_colors``, ``change_prob``, ``cot``)."""

    world = "tracking"
    opening = "The trajectory is in the instructions above. Submit its change-indicator matrix with submit_changes."
    status_keys = ("submissions_left",)
    title = "State tracking"

    def __init__(self, seed: int = 0, *, sealed=None, **settings):
        super().__init__()
        check_keys(settings, "settings", [f.name for f in fields(TrackingConfig)])
        self.config, self.seed = TrackingConfig(**settings), seed
        self.seal = seal_mod.make_seal(sealed)
        self.state = core.reset(core.instance(seed, self.config, self.seal))
        self.instance_id = seal_mod.instance_id(seed, self.seal, prefix="tracking")
        self._no_guess = np.zeros(self.config.shape, bool)
        rows, n = self.config.shape
        row = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1}, "minItems": n, "maxItems": n}
        changes = {"type": "array", "items": row, "minItems": rows, "maxItems": rows,
                   "description": f"Y: {rows} rows (steps 0->1 ... {rows - 1}->{rows}) of {n} values; 1 where the node changes colour."}
        # Under cot the reason comes first, as the paper asks for it before the prediction: a model that
        # writes its arguments in the schema's order reasons before it answers.
        reason = {"type": "string", "maxLength": MAX_REASON, "description": "the reason for your answer"}
        submit = {"reason": reason, "changes": changes} if self.config.cot else {"changes": changes}
        self.set_specs([
            {"name": "get_observations", "description": "Free. The observation matrix X: one row per step, one colour per node.",
             "input_schema": NO_ARGUMENTS},
            {"name": "submit_changes",
             "description": f"Submit the change-indicator matrix Y ({rows} x {n}, values 0 or 1) once; it is scored and "
                            "the session ends.",
             "input_schema": {"type": "object", "properties": submit, "required": ["changes"], "additionalProperties": False}},
            {"name": "end", "description": "End the session without an answer (every score 0).", "input_schema": NO_ARGUMENTS},
        ])

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

    def dispatch(self, name: str, args: dict) -> dict:
        guess = np.asarray(args["changes"], bool) if name == "submit_changes" else self._no_guess
        self.state, reward, error = core.step(self.state, KINDS[name], guess)
        if int(error):
            return self.error(core.ERRORS[int(error)])
        self.total_reward += float(reward)
        result = {"observations": self.observations()} if name == "get_observations" else {}
        if bool(self.state.ended):
            self.ended, self.end_reason = True, "end"
            self.scores = core.scores(self.state)
            result.update(ended=True, end_reason="end", scores=self.scores)
        return {**result, **self.status()}

    def key_settings(self) -> dict:
        return self.config.settings()

    def annotations(self, name: str) -> dict | None:
        return ANNOTATIONS.get(name)

    def record(self) -> dict:
        return {"instance_id": self.instance_id, **super().record()}

    def demo_calls(self) -> list[tuple[str, dict]]:
        """Read X, then submit "no change" everywhere (with a reason under cot)."""
        rows, n = self.config.shape
        changes = [[0] * n for _ in range(rows)]
        submit = {"reason": "a guess: no node changes", "changes": changes} if self.config.cot else {"changes": changes}
        return [("get_observations", {}), ("submit_changes", submit)]
