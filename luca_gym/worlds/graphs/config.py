"""The two graph worlds' settings: :class:`DagConfig` (directed graph
discovery: molecules whose children change state when they are intervened on)
and :class:`RelationalConfig` (undirected relational discovery: houses whose
anger rises with their neighbours' when they are attacked).

Both are configs on :class:`luca_gym.config.ConfigBase`, checked on
construction and registered as JAX pytrees (:func:`luca_gym.config.pytree`):
the settings that fix a shape or a rule's form (the graph's size, the
states, the latent nodes, whether a redraw may repeat, when a matrix is
proposed) are static, so a compiled step is specialised to them; the
probabilities and the price (``edge_density``, ``observation_noise``,
``intervention_cost``) are traced, so one compiled step serves every value of
them. A config is hashable too: the flat codec holds one as a static
argument.

Beside the paper's settings, three make the worlds harder where the paper's
are won without discovering anything (each off by default, the default
instances and rules exactly the paper's): ``observation_noise`` (each state
shown is misread now and then), ``n_latent`` (hidden nodes that pass effects
on) and ``intervention_cost`` (a price on each intervention, taken from the
return).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from luca_gym.config import PROPOSALS, ConfigBase, boolean, choice, int_in, number_in, probability, pytree, setting

MAX_NODES = 256  # the largest graph; any N from 2 to this (the core's arrays are N x N)
MAX_LATENT = 256  # the most latent nodes beside the N shown
MAX_STATES = 64  # the most states a molecule can take
MAX_NOISE = 0.5  # the largest misreading probability: beyond, a reading is wrong more often than right
# The paper's settings (Auto-Discovery-Bench, Table 1).
DAG_SETTINGS = ((3, 3), (3, 5), (10, 5))  # (molecules, states)
RELATIONAL_SETTINGS = (3, 5, 10)  # houses


class _GraphSettings(ConfigBase):
    """What the core asks of either config."""

    directed: bool

    @property
    def n(self) -> int:
        """N, the number of nodes."""
        return getattr(self, self.size_field)

    @property
    def budget(self) -> int:
        """2N interventions, as the paper's episodes."""
        return 2 * self.n

    @property
    def n_total(self) -> int:
        """N plus the latent nodes: the hidden graph's size."""
        return self.n + self.n_latent

    @property
    def n_readings(self) -> int:
        """How many values a shown state can take, among which a misreading
        is drawn: the states 0..n_states-1 (``dag``), the angers 0..budget
        (``relational``: an anger rises at most once an attack)."""
        return self.n_states if self.directed else self.budget + 1

    def describe(self) -> str:
        """A few words for titles and logs."""
        extra = f" S={self.n_states}" if self.directed else ""
        harder = "".join(f" {name}={getattr(self, name):g}" for name in ("observation_noise", "n_latent", "intervention_cost")
                         if getattr(self, name))
        return f"{self.world} N={self.n}{extra}{harder}"

    @property
    def max_calls(self) -> int:
        """The most calls a session can take: the budget, then the submission."""
        return self.budget + 1

    # What the tools say of this world's intervention (words in its tool's description).
    @property
    def effect_words(self) -> str:
        """What an intervention does, in words."""
        return ("re-draws the state of each of its children (the intervened molecule keeps its state)" if self.directed
                else "raises its anger and the anger of each house allied to it by 1")

    @property
    def price_words(self) -> str:
        """The price of an intervention beyond the budget, in words (empty without one)."""
        return f" and {self.intervention_cost:g} of your return" if self.intervention_cost else ""

    @property
    def proposal_words(self) -> str:
        """What an intervention's matrix does under ``proposals="every"``, in words (empty under "final")."""
        return (" State with it the adjacency matrix you believe from what you have seen so far: if it is right the "
                "session ends, solved, and the intervention is not made." if self.proposals == "every" else "")


@pytree
@dataclass(frozen=True)
class DagConfig(_GraphSettings):
    """Directed graph discovery (``dag``).

    Attributes:
        n_nodes: N molecules shown, 2..256 (the paper: 3 and 10; default 10). Static.
        n_states: the number of states a molecule can take, 2..64: states are
            0..n_states-1, so the paper's S (the largest state) is
            n_states - 1 (the paper's settings: 3 and 5; default 5). Static.
        edge_density: the probability of each edge the hidden order allows
            (i before j in a random order of the molecules; default 0.3). Traced.
        redraw_may_repeat: False (default): an intervened molecule's children
            each take a new state different from their old one, so one
            intervention shows every child. True: the new state is uniform over
            all states, so a child keeps its state with probability
            1/n_states and a molecule that did not change may still be a child. Static.
        proposals: "every" (default): the paper's loop. Each cycle is an
            intervention and the matrix the agent then believes: the agent
            states its current matrix with every intervention (what it makes
            of the cycles seen so far) and the session ends, solved, the
            first time it is right, the intervention then not made; a final
            ``submit_graph`` (the last cycle's matrix) stays possible and
            ends the session either way. "final": one submitted matrix,
            which ends the session (not the paper's protocol). Static.
        observation_noise: the probability, 0 to 0.5, that a state shown is
            misread: replaced by a uniformly random other state (default 0,
            every reading right). Each shown state (the opening states and
            every state after each intervention) is misread on its own, drawn
            from the instance's key and the reading's index, so a session's
            readings are a pure function of its seed and interventions; the
            true states evolve as without noise. Beyond the paper. Traced.
        n_latent: latent molecules, 0..256 (default 0), beside the N shown:
            they are part of the hidden graph (drawn with the others, at
            random places in the hidden order) but are never shown and
            cannot be intervened on; a latent molecule whose state changes
            re-draws its own children in turn, so effects pass through it.
            The adjacency to recover is over the N shown molecules: i -> j
            is an edge iff the hidden graph has a path from i to j whose
            inner molecules are all latent (a direct edge among them), that
            is iff intervening on i can change j. Beyond the paper. Static.
        intervention_cost: the price of an intervention, a finite number from
            0 up (default 0): the session's return is success minus the cost
            times the interventions made (the scores then add ``return`` and
            ``cost``). Beyond the paper. Traced.

    Iterations (:func:`~luca_gym.worlds.graphs.core.iterations`) are the
    paper's cycles: the interventions made before the matrix that ended the
    session, at least 1, so one intervention and then the right matrix is 1
    iteration, and so is the right matrix stated before any intervention.
    """

    n_nodes: int = setting(10, int_in(2, MAX_NODES), static=True)
    n_states: int = setting(5, int_in(2, MAX_STATES), static=True)
    edge_density: float = setting(0.3, probability())
    redraw_may_repeat: bool = setting(False, boolean(), static=True)
    proposals: str = setting("every", choice(*PROPOSALS), static=True)
    observation_noise: float = setting(0.0, number_in(0, MAX_NOISE))
    n_latent: int = setting(0, int_in(0, MAX_LATENT), static=True)
    intervention_cost: float = setting(0.0, number_in(0, math.inf))
    directed = True
    world = "dag"
    node_noun, intervene_tool, size_field = "molecule", "intervene", "n_nodes"

    @property
    def always_changes(self) -> bool:
        """Whether an intervention changes every child (no change then proves no edge)."""
        return not self.redraw_may_repeat


@pytree
@dataclass(frozen=True)
class RelationalConfig(_GraphSettings):
    """Undirected relational discovery (``relational``).

    Attributes:
        n_houses: N houses shown, 2..256 (the paper: 3, 5 and 10; default 10). Static.
        edge_density: the probability of each alliance (an undirected edge;
            default 0.3). Traced.
        proposals: "every" (default, the paper's loop) or "final", as
            ``DagConfig``'s; iterations are counted as there. Static.
        observation_noise: as ``DagConfig``'s: each anger shown is
            misread with this probability, replaced by a uniformly random
            other value from 0 to the budget (2N, the most an anger can
            reach). Beyond the paper. Traced.
        n_latent: latent houses, 0..256 (default 0): never shown, never
            attacked, but an attack raises their anger too, and a latent
            house's anger rising raises its allies' in turn (once each per
            attack). The alliances to recover are over the N houses shown:
            i - j iff the hidden graph links them by a path whose inner
            houses are all latent, that is iff attacking i raises j's anger.
            Beyond the paper. Static.
        intervention_cost: the price of an attack, as ``DagConfig``'s. Traced.

    Every house's anger starts at 0; attacking a house raises its anger and
    each neighbour's by 1, so one attack shows every neighbour.
    """

    n_houses: int = setting(10, int_in(2, MAX_NODES), static=True)
    edge_density: float = setting(0.3, probability())
    proposals: str = setting("every", choice(*PROPOSALS), static=True)
    observation_noise: float = setting(0.0, number_in(0, MAX_NOISE))
    n_latent: int = setting(0, int_in(0, MAX_LATENT), static=True)
    intervention_cost: float = setting(0.0, number_in(0, math.inf))
    directed = False
    always_changes = True
    world = "relational"
    node_noun, intervene_tool, size_field = "house", "attack", "n_houses"


def dag_expected_fields(**settings) -> dict:
    """``World.expected_fields`` of ``dag``: the budget a session of these settings records."""
    return {"budget": DagConfig(**settings).budget}


def relational_expected_fields(**settings) -> dict:
    """``World.expected_fields`` of ``relational`` (see :func:`dag_expected_fields`)."""
    return {"budget": RelationalConfig(**settings).budget}
