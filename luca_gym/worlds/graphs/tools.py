"""The graph worlds' tool sessions, for language-model agents (and the
harness's policies): :class:`DagToolSession` and
:class:`RelationalToolSession`, on the generic dispatcher
(:class:`luca_gym.tools.session.ToolSessionBase`), which parses and checks
every call against the published schemas before anything runs. The rules and
the scorer are the core's (:mod:`~luca_gym.worlds.graphs.core`); this module
translates calls and answers, and keeps the observation matrix (what the
agent was shown) for its answers.

The loop follows the paper's: the agent sees the current states, asks for an
intervention, and is shown every node's state after it, with the whole
history as an observation matrix (one row per cycle, row 0 the states before
the first intervention: the states as shown, misread now and then under
``observation_noise``, the latent nodes never). Under ``proposals="every"``
(the default, the paper's loop) it states its current adjacency matrix with every intervention
and the session ends, solved, the first time the matrix is right; under
``"final"`` it submits one matrix. A session ends with ``end_reason`` "end"
whoever ended it (the agent or the rules), as every world's does.
"""

from __future__ import annotations

import jax
import numpy as np

import json

from luca_gym import seal as seal_mod
from luca_gym.tools.session import MAX_PAYLOAD, ToolSessionBase
from luca_gym.tools.table import play_policy
from luca_gym.validate import check_seed
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.config import MAX_NODES, DagConfig, RelationalConfig

_EMPTY = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def _matrix_schema(n: int) -> dict:
    row = {"type": "array", "minItems": n, "maxItems": n, "items": {"type": "integer", "enum": [0, 1]}}
    return {"type": "array", "minItems": n, "maxItems": n, "items": row,
            "description": f"{n} rows of {n} entries, 0 or 1: row i, column j is 1 iff there is an edge from node i to node j"}


def _longest_call(config, n: int) -> int:
    """The characters of JSON of the longest call of a session of ``n`` nodes:
    an intervention on the last node stating a matrix of ones."""
    return len(json.dumps({config.node_noun: n - 1, "adjacency": [[1] * n] * n}, ensure_ascii=False))


def check_fits(config) -> None:
    """ValueError unless a call stating the N x N matrix fits in the
    :data:`~luca_gym.tools.session.MAX_PAYLOAD` characters a call's arguments
    may hold (N at most 147): larger graphs are the core's, the Gymnasium and
    flat envs' and the batched baselines', not a tool session's."""
    if _longest_call(config, config.n) > MAX_PAYLOAD:
        largest = max(n for n in range(2, config.n) if _longest_call(config, n) <= MAX_PAYLOAD)
        raise ValueError(f"{config.size_field}: {config.n} too large for a tool session; at most {largest} (a call "
                         f"stating the {config.n} x {config.n} adjacency matrix takes {_longest_call(config, config.n)} "
                         f"characters of JSON, a call at most {MAX_PAYLOAD}; the core, the Gymnasium and flat envs and "
                         f"the batched baselines take up to {MAX_NODES})")


class GraphToolSession(ToolSessionBase):
    """A session of a graph world's tools; subclasses name the world.

    Args:
        seed: the instance (sealed: its public seed).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True.
        settings: the config's fields (:class:`DagConfig` / :class:`RelationalConfig`).
    """

    config_class: type = DagConfig
    status_keys = ("budget_remaining",)
    end_tool = "end"

    def __init__(self, seed: int = 0, *, sealed=None, **settings):
        super().__init__()
        self.config = self.config_class(**settings)
        check_fits(self.config)
        self.seed = check_seed(seed)
        self.seal = seal_mod.make_seal(sealed)
        self.state = core.reset(core.instance(self.seed, self.config, self.seal), self.config)
        self.instance_id = seal_mod.instance_id(self.seed, self.seal, prefix=self.world)
        self.history = [np.asarray(self.state.shown).tolist()]
        self.targets: list[int] = []
        self.set_specs(self._specs_of())

    # -- what the agent is told ----------------------------------------------------------
    @property
    def title(self) -> str:
        return f"luca-gym {self.world}"

    @property
    def opening(self) -> str:
        c = self.config
        return (f"The current states of the {c.n} {c.node_noun}s (0..{c.n - 1}) are {self.history[0]}. "
                f"Choose an intervention.")

    def _specs_of(self) -> list[dict]:
        c, noun = self.config, self.config.node_noun
        target = {noun: {"type": "integer", "minimum": 0, "maximum": c.n - 1, "description": f"the {noun}, 0..{c.n - 1}"}}
        required = [noun]
        effect = ("re-draws the state of each of its children (the intervened molecule keeps its state)" if c.directed
                  else "raises its anger and the anger of each house allied to it by 1")
        price = f" and {c.intervention_cost:g} of your return" if c.intervention_cost else ""
        intervene_doc = f"Costs 1 of the budget ({c.budget}){price}: {c.intervene_tool} one {noun}; it {effect}. " \
                        "Returns every state after it and the observation matrix so far."
        if c.proposals == "every":
            target["adjacency"] = _matrix_schema(c.n)
            required.append("adjacency")
            intervene_doc += (" State with it the adjacency matrix you believe from what you have seen so far: if it is "
                              "right the session ends, solved, and the intervention is not made.")
        return [
            {"name": c.intervene_tool, "description": intervene_doc,
             "input_schema": {"type": "object", "properties": target, "required": required, "additionalProperties": False}},
            {"name": "submit_graph", "description": "Submit your adjacency matrix; ends the session (free).",
             "input_schema": {"type": "object", "properties": {"adjacency": _matrix_schema(c.n)}, "required": ["adjacency"],
                              "additionalProperties": False}},
            {"name": "get_observations", "description": "The observation matrix and the interventions so far (free).",
             "input_schema": dict(_EMPTY)},
            {"name": "end", "description": "End the session without submitting (scored as unsolved).",
             "input_schema": dict(_EMPTY)},
        ]

    def system_prompt(self) -> str:
        """The rules for an agent: the hidden graph, what an intervention shows, the budget and the answer."""
        c = self.config
        if c.directed:
            world = (f"There are {c.n} molecules, numbered 0..{c.n - 1}, linked by a hidden directed acyclic graph. "
                     f"Each molecule has a state from 0 to {c.n_states - 1}. Intervening on a molecule changes the state "
                     "of each of its children to a random state" + (" (possibly the same one)" if c.redraw_may_repeat
                                                                     else " different from its current one")
                     + "; the intervened molecule keeps its state, and no other molecule changes.")
            goal = ("the adjacency matrix: row i, column j is 1 iff " + ("intervening on molecule i can change molecule j"
                                                                         if c.n_latent else "molecule j is a child of molecule i"))
        else:
            world = (f"There are {c.n} houses, numbered 0..{c.n - 1}, linked by hidden alliances (an undirected graph). "
                     "Every house's anger starts at 0. Attacking a house raises its anger by 1 and the anger of each "
                     "house allied to it by 1.")
            goal = ("the symmetric adjacency matrix: row i, column j is 1 iff " + (
                "attacking house i raises house j's anger" if c.n_latent else "houses i and j are allied") + " (diagonal 0)")
        harder = self._harder_rules()
        proposals = ("With each intervention, state the adjacency matrix you believe from what you have seen so far: "
                     "the session ends, solved, the first time it is right. submit_graph states a last matrix and ends "
                     "the session either way." if c.proposals == "every"
                     else "You submit one matrix (submit_graph); it ends the session.")
        return (f"You are a scientist discovering a hidden graph by experiment. {world}{harder} You have {c.budget} "
                f"interventions ({c.intervene_tool}); after each you are shown every {c.node_noun}'s state and the "
                f"observation matrix of all cycles so far. Your goal: {goal}. {proposals} "
                "Your iterations are the interventions made before the right matrix (at least 1): use as few as you can."
                + (f" Each intervention costs {c.intervention_cost:g}: your return is 1 if you find the matrix, 0 if "
                   f"not, less {c.intervention_cost:g} times the interventions made." if c.intervention_cost else ""))

    def _harder_rules(self) -> str:
        """The rules beyond the paper's, in words (empty under the paper's settings)."""
        c = self.config
        words = ""
        if c.n_latent:
            if c.directed:
                words += (f" Besides these, {c.n_latent} hidden molecule{'s' if c.n_latent > 1 else ''} belong to the "
                          "graph: you never see them and cannot intervene on them, but an effect passes through them (a "
                          "hidden molecule whose state changes re-draws its own children in turn). In the matrix you "
                          "recover, row i, column j is 1 iff intervening on molecule i can change molecule j: j is a "
                          "child of i, or is reached from i through hidden molecules only.")
            else:
                words += (f" Besides these, {c.n_latent} hidden house{'s' if c.n_latent > 1 else ''} belong to the "
                          "alliances: you never see them and cannot attack them, but an attack passes through them (a "
                          "hidden house whose anger rises raises its allies' in turn; each house rises at most once an "
                          "attack). In the matrix you recover, houses i and j are allied iff attacking one raises the "
                          "other's anger: they are allies, or are linked through hidden houses only.")
        if c.observation_noise:
            values = f"state from 0 to {c.n_states - 1}" if c.directed else f"value from 0 to {c.budget}"
            words += (f" Each {'state' if c.directed else 'anger'} you are shown is misread with probability "
                      f"{c.observation_noise:g}, each on its own: replaced by a uniformly random other {values} (the "
                      f"true {'state' if c.directed else 'anger'} is unchanged; the next reading may be right).")
        return words

    def status(self) -> dict:
        return {"budget_remaining": int(self.state.budget_left)}

    def observation(self) -> dict:
        """The public view as numpy arrays (what a harness policy reads)."""
        return jax.device_get(core.public_view(self.state))

    def _observations(self) -> dict:
        return {"observation_matrix": [list(row) for row in self.history], "interventions": list(self.targets)}

    # -- calls -------------------------------------------------------------------------
    def dispatch(self, name: str, args: dict) -> dict:
        c = self.config
        if name == "get_observations":
            return {**self._observations(), **self.status()}
        kind = {c.intervene_tool: core.INTERVENE, "submit_graph": core.SUBMIT, "end": core.END}[name]
        hypothesis = np.asarray(args.get("adjacency", np.zeros((c.n, c.n), int)), bool)
        node = args.get(c.node_noun, 0)
        before = self.state
        self.state, reward, error = core.step(self.state, kind, node, hypothesis, c)
        error = int(error)
        if error:
            return self.error(core.ERRORS[error])
        self.total_reward += float(reward)
        result: dict = {}
        if int(self.state.interventions) > int(before.interventions):
            self.targets.append(int(node))
            self.history.append(np.asarray(self.state.shown).tolist())
            result = {c.node_noun: int(node), "states": self.history[-1], **self._observations()}
        if kind == core.INTERVENE and c.proposals == "every":
            result["adjacency_correct"] = bool(self.state.success)
        if bool(self.state.ended):
            self.ended, self.end_reason = True, "end"
            self.scores = self.final_scores()
            result.update(ended=True, end_reason=self.end_reason, scores=self.scores)
        return {**result, **self.status()}

    def final_scores(self) -> dict:
        """The scores as JSON values (the core's :func:`core.scores`)."""
        values = jax.device_get(core.scores(self.state, self.config.directed, self.config.intervention_cost))
        # cost and return are float32 sums: 6 decimals say them (0.15, not 0.15000000596)
        return {k: round(float(v), 6) if k in ("cost", "return") else float(v) if k in ("success", "edge_f1") else int(v)
                for k, v in values.items()}

    # -- records -----------------------------------------------------------------------
    def key_settings(self) -> dict:
        return self.config.settings()

    def record_fields(self) -> dict:
        return {"instance_id": self.instance_id, "budget": self.config.budget}

    def record(self) -> dict:
        return {**self.record_fields(), **super().record()}

    def demo_calls(self) -> list[tuple[str, dict]]:
        c = self.config
        calls = []
        for i in range(min(2, c.n)):
            arguments = {c.node_noun: i}
            if c.proposals == "every":
                arguments["adjacency"] = np.zeros((c.n, c.n), int).tolist()
            calls.append((c.intervene_tool, arguments))
        calls.append(("get_observations", {}))
        return calls + [("submit_graph", {"adjacency": np.zeros((c.n, c.n), int).tolist()})]


class DagToolSession(GraphToolSession):
    """``dag``'s tools: ``intervene(molecule)``, ``submit_graph(adjacency)``,
    ``get_observations()``, ``end()``."""

    config_class = DagConfig
    world = "dag"


class RelationalToolSession(GraphToolSession):
    """``relational``'s tools: ``attack(house)``, ``submit_graph(adjacency)``,
    ``get_observations()``, ``end()``."""

    config_class = RelationalConfig
    world = "relational"


def play_dag(policy, seed: int, **options) -> dict:
    """``World.play`` of ``dag``: one session of ``policy`` (``reset(config,
    seed)``, ``act(observation) -> {"tool", "arguments"}``) on its tool
    session (``env``, if given, one of these settings; ``max_calls``,
    ``sealed`` and the config's fields as keywords). Returns the record's
    parts (see :class:`luca_gym.protocol.World`): the generic
    :func:`~luca_gym.tools.table.play_policy`."""
    return play_policy(DagToolSession, policy, seed, **options)


def play_relational(policy, seed: int, **options) -> dict:
    """``World.play`` of ``relational`` (see :func:`play_dag`)."""
    return play_policy(RelationalToolSession, policy, seed, **options)
