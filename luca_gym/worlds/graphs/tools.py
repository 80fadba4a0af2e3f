"""The graph worlds' tool sessions, for language-model agents (and the
harness's policies): :class:`DagToolSession` and
:class:`RelationalToolSession`, tool tables on
:class:`~luca_gym.tools.table.TableToolSession`, whose JSON schemas are built
from the handlers' typed signatures and which parses and checks every call
against them before anything runs. The rules and the scorer are the core's
(:mod:`~luca_gym.worlds.graphs.core`; a refusal is its error message, the
reward, the ending and the scores are stepped by the table); this module
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
:data:`play_dag` / :data:`play_relational` play a scripted policy through
the same session (:func:`luca_gym.tools.play.play_policy`).
"""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np

from luca_gym.tools.session import MAX_PAYLOAD
from luca_gym.tools.play import table_play
from luca_gym.tools.table import Field, TableToolSession, tool_table
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.config import MAX_NODES, DagConfig, RelationalConfig

Node = Annotated[int, Field(minimum=0, maximum=lambda c: c.n - 1, description=lambda c: f"the {c.node_noun}, 0..{c.n - 1}")]
_Row = Annotated[list[Annotated[int, Field(enum=(0, 1))]], Field(items=lambda c: c.n)]  # a typed enum: JSON true refused
_MATRIX_WORDS = "{n} rows of {n} entries, 0 or 1: row i, column j is 1 iff there is an edge from node i to node j"
Matrix = Annotated[list[_Row], Field(items=lambda c: c.n, description=lambda c: _MATRIX_WORDS.format(n=c.n))]
# The matrix an intervention states: offered (and required) under proposals="every" only (else its default, None).
ProposedMatrix = Annotated[list[_Row], Field(items=lambda c: c.n, description=lambda c: _MATRIX_WORDS.format(n=c.n),
                                            when=lambda c: c.proposals == "every", required=True)]
_INTERVENE = """Costs 1 of the budget ({c.budget}){c.price_words}: {c.intervene_tool} one {c.node_noun}; it
{c.effect_words}. Returns every state after it and the observation matrix so far.{c.proposal_words}"""


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


class GraphToolSession(TableToolSession):
    """A session of a graph world's tools; subclasses name the world and its intervention's tool.

    Args:
        seed: the instance (sealed: its public seed).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True.
        settings: the config's fields (:class:`DagConfig` / :class:`RelationalConfig`).
    """

    core = core
    config_class: type = DagConfig
    status_keys = ("budget_remaining",)
    end_tool = "end"

    def __init__(self, seed: int = 0, *, sealed=None, **settings):
        super().__init__(seed, sealed=sealed, **settings)
        check_fits(self.config)
        self.history = [np.asarray(self.state.shown).tolist()]
        self.targets: list[int] = []

    # -- what the agent is told ----------------------------------------------------------
    @property
    def title(self) -> str:
        return f"luca-gym {self.world}"

    @property
    def opening(self) -> str:
        c = self.config
        return (f"The current states of the {c.n} {c.node_noun}s (0..{c.n - 1}) are {self.history[0]}. "
                f"Choose an intervention.")

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

    def _observations(self) -> dict:
        return {"observation_matrix": [list(row) for row in self.history], "interventions": list(self.targets)}

    # -- the tool table (each world adds its intervention) -------------------------------
    def _intervention(self, node: int, adjacency) -> core.Action:
        return core.Action.make(core.INTERVENE, self.config, node, adjacency)

    def submit_graph(self, adjacency: Matrix):
        """Submit your adjacency matrix; ends the session (free)."""
        return core.Action.make(core.SUBMIT, self.config, hypothesis=adjacency)

    def get_observations(self):
        """The observation matrix and the interventions so far (free)."""
        return self._observations()

    def end(self):
        """End the session without submitting (scored as unsolved)."""
        return core.Action.make(core.END, self.config)

    def answer(self, name: str, args: dict) -> dict:
        """An intervention made: the node, the states after it and the observation matrix so far; with a matrix
        stated, whether it was right."""
        c = self.config
        result: dict = {}
        if int(self.state.interventions) > len(self.targets):
            self.targets.append(int(args[c.node_noun]))
            self.history.append(np.asarray(self.state.shown).tolist())
            result = {c.node_noun: self.targets[-1], "states": self.history[-1], **self._observations()}
        if name == c.intervene_tool and c.proposals == "every":
            result["adjacency_correct"] = bool(self.state.success)
        return result

    # -- records -----------------------------------------------------------------------
    def record_fields(self) -> dict:
        return {**super().record_fields(), "budget": self.config.budget}

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

    def intervene(self, molecule: Node, adjacency: ProposedMatrix = None):
        return self._intervention(molecule, adjacency)

    intervene.__doc__ = _INTERVENE
    tools = tool_table(intervene, GraphToolSession.submit_graph, GraphToolSession.get_observations, GraphToolSession.end)


class RelationalToolSession(GraphToolSession):
    """``relational``'s tools: ``attack(house)``, ``submit_graph(adjacency)``,
    ``get_observations()``, ``end()``."""

    config_class = RelationalConfig
    world = "relational"

    def attack(self, house: Node, adjacency: ProposedMatrix = None):
        return self._intervention(house, adjacency)

    attack.__doc__ = _INTERVENE
    tools = tool_table(attack, GraphToolSession.submit_graph, GraphToolSession.get_observations, GraphToolSession.end)


play_dag = table_play(DagToolSession)  # World.play of dag: a reset/act policy through the same tool session
play_relational = table_play(RelationalToolSession)  # World.play of relational
