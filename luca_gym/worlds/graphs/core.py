"""The graph worlds' pure core (``World.core`` of both,
:class:`luca_gym.protocol.Core`): instances, ``reset``, a jitted ``step`` on
a typed :class:`Action`, what the evidence implies, the scores, what an agent
sees and the spaces. One module for both worlds: they differ only in static
settings of the config (directed or not, whether an intervention always
shows every child). The config is a pytree whose shape-fixing settings are
static and whose probabilities and price are traced
(:mod:`~luca_gym.worlds.graphs.config`), so one compiled step serves every
instance and every value of ``edge_density``, ``observation_noise`` and
``intervention_cost`` of a shape, and ``vmap`` runs thousands at once. The
generic layers build the rest on it: the Gymnasium env
(:class:`luca_gym.envs.core.CoreEnv`) and the tool session
(:mod:`luca_gym.tools.table`).

Directed (``dag``): intervening on molecule i re-draws the state of each child
of i (the molecule itself keeps its state). Undirected (``relational``):
attacking house i raises its anger and each neighbour's by 1. Either way the
agent sees every node's state after each intervention and must recover the
adjacency matrix.

Beyond the paper (each off by default, where the rules are exactly the
paper's): with ``observation_noise`` each state shown is misread with that
probability (a uniformly random other value, drawn from the instance's key
and the reading's index), and the evidence is what the readings showed; with
``n_latent`` the hidden graph holds latent nodes after the N shown ones
(indices N..N+L-1 of :attr:`GraphInstance.graph`), never shown and never
intervened on, which pass an effect on when their own state changes, and the
adjacency to recover is the graph's projection on the shown nodes
(:func:`project`); with ``intervention_cost`` each intervention made costs
that much of the reward.

Each world draws its graphs from a stream of its own (its name folded into
the instance key), so ``dag`` and ``relational`` of one seed are unrelated
graphs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from luca_gym.validate import check_seed

# Action kinds and the core's refusal codes (0: accepted).
INTERVENE, SUBMIT, END = 0, 1, 2
ERRORS = (
    "",
    "the budget is spent: submit your adjacency matrix",
    "the session has ended",
    "node out of range",
    "a node cannot be its own neighbour: the adjacency matrix's diagonal must be 0",
    "the graph is undirected: the adjacency matrix must be symmetric",
)
# What the evidence says of an ordered pair (i, j): an edge i -> j (i - j
# undirected), no edge, or nothing yet.
EDGE, NO_EDGE, UNKNOWN = 1, -1, 0
# The misreadings' stream of the instance key (the redraws fold in the intervention's index, below 2N).
_MISREAD_STREAM = 0x7FFFFFFF


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """One call of a session.

    Attributes:
        kind: int32 (): INTERVENE, SUBMIT or END.
        node: int32 (): the node intervened on (read by INTERVENE only; one
            outside 0..N-1 is refused, error 3).
        hypothesis: bool (N, N): the adjacency the agent proposes (read by
            SUBMIT, and by INTERVENE under ``proposals="every"``).
    """

    kind: jax.Array
    node: jax.Array
    hypothesis: jax.Array

    @classmethod
    def make(cls, kind: int, config, node: int = 0, hypothesis=None) -> "Action":
        """An action of ``kind`` under ``config``: ``node`` for INTERVENE,
        ``hypothesis`` (0/1, (N, N); default the empty graph) where read."""
        hypothesis = np.zeros((config.n, config.n), bool) if hypothesis is None else np.asarray(hypothesis, bool)
        return cls(np.int32(kind), np.int32(node), hypothesis)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GraphInstance:
    """A hidden graph (N nodes shown, L latent, M = N + L).

    Attributes:
        adjacency: bool (N, N) the truth to recover: [i, j] an edge i -> j
            (symmetric, for an undirected world) of the graph's projection on
            the shown nodes (:func:`project`; the graph itself without latent
            nodes); the diagonal is False.
        states: int32 (M,) the nodes' true states before the first
            intervention, the shown nodes first.
        key: uint32 (2,) the instance's key for the re-drawn states (a
            directed world's children) and the misreadings: a pure function
            of the seed.
        graph: bool (M, M) the hidden graph, latent nodes included (equal to
            ``adjacency`` without them).
    """

    adjacency: jax.Array
    states: jax.Array
    key: jax.Array
    graph: jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GraphState:
    """A session (N nodes shown, M with the latent ones). Hidden:
    ``adjacency``, ``graph``, ``key`` and ``states``; everything else is what
    the agent has seen or done.

    Attributes:
        adjacency: bool (N, N) the truth. graph: bool (M, M) the hidden graph.
        key: uint32 (2,) the redraw and misreading key.
        states: int32 (M,) the nodes' true states now.
        shown: int32 (N,) the states as last shown (misread or not; without
            observation noise, the shown nodes' states).
        evidence: int8 (N, N) what the interventions showed directly: [i, j]
            EDGE (j's shown state changed when i was intervened on), NO_EDGE
            (it did not where a change was certain), UNKNOWN. A misreading
            makes it wrong; it is what the readings would prove were they
            right.
        changes: int32 (N, N) [i, j]: the interventions on i after which j's
            shown state changed (with ``intervened``, every reading's count).
        reach: bool (N, N) directed: [i, j] a path of seen edges runs from i
            to j (the closure of the seen edges, kept as they are seen);
            undirected: all False.
        intervened: int32 (N,) interventions on each node.
        budget_left: int32 () interventions left. interventions: int32 () made.
        wasted: int32 () interventions whose outcome the evidence already implied.
        hypothesis: bool (N, N) the last adjacency the agent proposed.
        proposed: bool () whether the session ended on a proposal.
        ended: bool (). success: bool () the session ended on the truth.
        intervention_cost: float32 () the price of an intervention (the
            config's, fixed at reset: the rewards and the scores read it).
        directed: bool, static: the world's direction (the scores count
            ordered pairs directed, unordered pairs undirected).
    """

    adjacency: jax.Array
    graph: jax.Array
    key: jax.Array
    states: jax.Array
    shown: jax.Array
    evidence: jax.Array
    changes: jax.Array
    reach: jax.Array
    intervened: jax.Array
    budget_left: jax.Array
    interventions: jax.Array
    wasted: jax.Array
    hypothesis: jax.Array
    proposed: jax.Array
    ended: jax.Array
    success: jax.Array
    intervention_cost: jax.Array
    directed: bool = field(metadata={"static": True})


def _seed_key(lo, hi, world: str):
    """The instance key of seed ``hi * 2**32 + lo`` in ``world``'s stream (its name folded in)."""
    stream = zlib.crc32(world.encode()) & 0x7FFFFFFF
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(lo), hi), stream)


def _closure(steps: jax.Array, rounds: int) -> jax.Array:
    """bool (K, K): the reflexive-transitive closure of ``steps`` (paths of up
    to 2**rounds steps), by repeated squaring."""
    k = steps.shape[0]
    start = steps | jnp.eye(k, dtype=bool)
    return jax.lax.fori_loop(0, rounds, lambda _, c: c | (c.astype(jnp.int32) @ c.astype(jnp.int32) > 0), start)


def project(graph: jax.Array, n: int) -> jax.Array:
    """bool (n, n): the projection of ``graph`` (M, M; nodes n.. latent) on
    its first n nodes: [i, j] iff a path runs from i to j whose inner nodes
    are all latent (a direct edge among them), the diagonal False. What an
    intervention on i can change (directed), or which houses an attack on i
    reaches (undirected, symmetric as the graph is). Pure."""
    m = graph.shape[0]
    if m == n:
        return graph
    rounds = max(1, int(np.ceil(np.log2(m - n))))
    through = _closure(graph[n:, n:], rounds).astype(jnp.int32)
    via = (graph[:n, n:].astype(jnp.int32) @ through @ graph[n:, :n].astype(jnp.int32)) > 0
    return (graph[:n, :n] | via) & ~jnp.eye(n, dtype=bool)


def _generate(lo, hi, config) -> GraphInstance:
    n, m = config.n, config.n_total
    k_order, k_edges, k_states, k_redraw = jax.random.split(_seed_key(lo, hi, config.world), 4)
    upper = jnp.triu(jnp.ones((m, m), bool), 1)
    drawn = (jax.random.uniform(k_edges, (m, m)) < config.edge_density) & upper
    if config.directed:
        # Edges only from earlier to later in a random order: acyclic by construction.
        order = jax.random.permutation(k_order, m)
        graph = jnp.zeros((m, m), bool).at[order[:, None], order[None, :]].set(drawn)
        states = jax.random.randint(k_states, (m,), 0, config.n_states, jnp.int32)
    else:
        graph = drawn | drawn.T
        states = jnp.zeros((m,), jnp.int32)
    return GraphInstance(project(graph, n), states, k_redraw, graph)


@jax.jit
def _generate_batch(lo, hi, config) -> GraphInstance:
    return jax.vmap(_generate, in_axes=(0, 0, None))(lo, hi, config)


def instances(seeds, config, seal=None) -> GraphInstance:
    """The instances of ``seeds`` (B leading), one jitted batch: each a pure
    function of its seed (under ``seal``, of its sealed seed), the world and
    ``config`` (one compile per shape: ``edge_density`` is traced)."""
    seeds = [check_seed(s, "seeds") for s in np.asarray(seeds, object).reshape(-1)]
    if seal is not None:
        seeds = [seal.organism_seed(s) for s in seeds]
    seeds = np.asarray(seeds, np.uint64)
    return _generate_batch(jnp.asarray(seeds & 0xFFFFFFFF, jnp.uint32), jnp.asarray(seeds >> 32, jnp.uint32), config)


def instance(seed: int, config, seal=None) -> GraphInstance:
    """The instance of ``seed`` (see :func:`instances`)."""
    return jax.tree_util.tree_map(lambda x: x[0], instances([check_seed(seed)], config, seal))


def read(states: jax.Array, key: jax.Array, index, config) -> jax.Array:
    """int32 (N,): the shown nodes' ``states`` as reading ``index`` shows
    them (0: the opening states; k: the states after the k-th
    intervention): each misread, with probability ``observation_noise``, as
    a uniformly random other value of the ``config.n_readings``, drawn from
    ``key`` and ``index`` alone. Without noise, the states. Pure; the noise
    may be traced (a concrete 0, as a flat codec's config holds, skips the draw)."""
    if isinstance(config.observation_noise, (int, float)) and config.observation_noise == 0:
        return states
    bits = jax.random.bits(jax.random.fold_in(jax.random.fold_in(key, _MISREAD_STREAM), index), (2, states.shape[0]),
                           jnp.uint32)
    misread = (bits[0] >> 8).astype(jnp.float32) * jnp.float32(2.0**-24) < config.observation_noise
    other = (states + 1 + (bits[1] % (config.n_readings - 1)).astype(jnp.int32)) % config.n_readings
    return jnp.where(misread, other, states).astype(jnp.int32)


def reset(inst: GraphInstance, config) -> GraphState:
    """A session's opening state on ``inst``. Pure."""
    n = config.n
    return GraphState(
        adjacency=inst.adjacency, graph=inst.graph, key=inst.key, states=inst.states,
        shown=read(inst.states[:n], inst.key, 0, config), evidence=jnp.zeros((n, n), jnp.int8),
        changes=jnp.zeros((n, n), jnp.int32), reach=jnp.zeros((n, n), bool), intervened=jnp.zeros((n,), jnp.int32),
        budget_left=jnp.int32(config.budget), interventions=jnp.int32(0), wasted=jnp.int32(0),
        hypothesis=jnp.zeros((n, n), bool), proposed=jnp.bool_(False), ended=jnp.bool_(False), success=jnp.bool_(False),
        intervention_cost=jnp.float32(config.intervention_cost), directed=config.directed,
    )


def knowledge(evidence: jax.Array, reach: jax.Array) -> jax.Array:
    """What the evidence implies, int8 (N, N): EDGE, NO_EDGE or UNKNOWN for
    each pair, the diagonal NO_EDGE. ``reach`` (:attr:`GraphState.reach`)
    adds, for a directed graph, that no edge runs back along a path already
    seen (j reaches i, so no i -> j: acyclicity); an undirected graph allows
    no such inference (its ``reach`` is empty). Pure, elementwise."""
    n = evidence.shape[0]
    absent = (evidence == NO_EDGE) | jnp.eye(n, dtype=bool) | reach.T
    return jnp.where(evidence == EDGE, EDGE, jnp.where(absent, NO_EDGE, UNKNOWN)).astype(jnp.int8)


def open_rows(known: jax.Array, directed: bool) -> jax.Array:
    """bool (N,): the nodes an intervention could still tell something new
    of, from :func:`knowledge`: a pair of their row (undirected: row or
    column) still unknown. Pure."""
    unknown = known == UNKNOWN
    return jnp.any(unknown, axis=1) | (jnp.any(unknown, axis=0) if not directed else False)


def implied_hypothesis(evidence: jax.Array) -> jax.Array:
    """bool (N, N): the adjacency the evidence implies, unknown pairs taken as
    no edge (the likelier at the default density). Pure."""
    return evidence == EDGE


def _check_hypothesis(hypothesis, directed: bool):
    """The core's refusal code for a proposed adjacency (0: well formed)."""
    diagonal = jnp.any(jnp.diagonal(hypothesis))
    asymmetric = jnp.bool_(False) if directed else jnp.any(hypothesis != hypothesis.T)
    return jnp.where(diagonal, 4, jnp.where(asymmetric, 5, 0))


def _reached(children: jax.Array, passes: jax.Array, graph: jax.Array, config) -> jax.Array:
    """bool (M,): the nodes an intervention reaches: ``children`` (its own),
    and the children of each latent node reached whose ``passes`` is True
    (its state changed), through chains of latent nodes. Without latent
    nodes, ``children``."""
    if config.n_latent == 0:
        return children
    passing = passes & (jnp.arange(config.n_total) >= config.n)
    graph = graph.astype(jnp.int32)
    # A chain of latent nodes is at most L long: L rounds reach its end.
    return jax.lax.fori_loop(0, config.n_latent,
                             lambda _, reached: children | ((reached & passing).astype(jnp.int32) @ graph > 0), children)


def _intervene(state: GraphState, node, config) -> GraphState:
    n, m = config.n, config.n_total
    children = state.graph[node]
    itself = jnp.arange(m) == node
    others = jnp.arange(n) != node
    if config.directed:
        # One threefry block per intervention; 32 random bits modulo S (or S - 1) are uniform to within 2^-27.
        bits = jax.random.bits(jax.random.fold_in(state.key, state.interventions), (m,), jnp.uint32)
        if config.redraw_may_repeat:
            drawn = (bits % config.n_states).astype(jnp.int32)
        else:  # a different state: old + 1..S-1, modulo the number of states
            drawn = (state.states + 1 + (bits % (config.n_states - 1)).astype(jnp.int32)) % config.n_states
        states = jnp.where(_reached(children, drawn != state.states, state.graph, config), drawn, state.states)
    else:
        states = state.states + (_reached(children, True, state.graph, config) | itself).astype(jnp.int32)
    shown = read(states[:n], state.key, state.interventions + 1, config)
    changed = (shown != state.shown) & others
    seen = jnp.where(changed, EDGE, jnp.where(others & config.always_changes, NO_EDGE, UNKNOWN)).astype(jnp.int8)
    # What was seen before stays: an edge seen once is an edge (redraws that may repeat show it only sometimes).
    new_row = jnp.where(state.evidence[node] == EDGE, EDGE, jnp.where(seen == UNKNOWN, state.evidence[node], seen))
    evidence = state.evidence.at[node].set(new_row.astype(jnp.int8))
    if config.directed:
        # The closure grows by the paths through the new edges: whatever reaches node (or is node)
        # now reaches each seen child and whatever the children reach.
        seen_children = new_row == EDGE
        below = seen_children | jnp.any(state.reach & seen_children[:, None], axis=0)
        above = state.reach[:, node] | ~others
        reach = state.reach | (above[:, None] & below[None, :])
    else:
        evidence = evidence.at[:, node].set(new_row.astype(jnp.int8))
        reach = state.reach
    wasted = ~open_rows(knowledge(state.evidence, state.reach), config.directed)[node]
    return replace(
        state, states=states, shown=shown, evidence=evidence, changes=state.changes.at[node].add(changed.astype(jnp.int32)),
        reach=reach, intervened=state.intervened.at[node].add(1), budget_left=state.budget_left - 1,
        interventions=state.interventions + 1, wasted=state.wasted + wasted.astype(jnp.int32),
    )


def _pick(flag, new: GraphState, old: GraphState) -> GraphState:
    return jax.tree_util.tree_map(lambda a, b: jnp.where(flag, a, b), new, old)


def step_pure(state: GraphState, action: Action, config):
    """One :class:`Action`: INTERVENE on ``action.node`` (with
    ``action.hypothesis`` under ``proposals="every"``), SUBMIT
    ``action.hypothesis`` (bool (N, N)) or END. Returns (state, reward
    float32 (), error int32 ()). A refused call (error != 0) changes nothing
    and earns nothing; the reward is 1 on the call that ends the session on
    the truth, less the session's ``intervention_cost`` on each call that
    makes an intervention, so the return equals ``success`` less the cost
    times the interventions (``success`` itself at the default cost 0).
    Pure (jit and vmap apply): :func:`step` is it jitted, the config traced
    (one compile per static settings); a flat codec, which holds a concrete
    config, calls it inside its own jit, so a setting that is off there
    (no observation noise) costs nothing.

    Under ``proposals="every"`` (the paper's loop) the matrix that comes with
    an intervention is the agent's hypothesis from the cycles seen so far,
    checked first: right, it ends the session solved and the intervention is
    not made; wrong, the intervention is made. A SUBMIT ends the session
    under either protocol."""
    kind, node = jnp.asarray(action.kind, jnp.int32), jnp.asarray(action.node, jnp.int32)
    hypothesis = jnp.asarray(action.hypothesis, bool)
    proposing = (kind == SUBMIT) | ((kind == INTERVENE) & (config.proposals == "every"))
    error = jnp.where(
        state.ended, 2,
        jnp.where((kind == INTERVENE) & ((node < 0) | (node >= config.n)), 3,
                  jnp.where(proposing, _check_hypothesis(hypothesis, config.directed), 0)))
    error = jnp.where((error == 0) & (kind == INTERVENE) & (state.budget_left <= 0), 1, error).astype(jnp.int32)
    ok = error == 0
    right = jnp.all(hypothesis == state.adjacency)
    ends = ok & ((kind == SUBMIT) | (kind == END) | (proposing & right))
    success = ends & proposing & right
    intervened = _intervene(state, jnp.clip(node, 0, config.n - 1), config)
    made = ok & (kind == INTERVENE) & ~success
    acted = _pick(made, intervened, state)
    new = replace(
        acted, hypothesis=jnp.where(ok & proposing, hypothesis, state.hypothesis),
        proposed=state.proposed | (ends & proposing), ended=state.ended | ends, success=state.success | success,
    )
    reward = success.astype(jnp.float32) - state.intervention_cost * made.astype(jnp.float32)
    return new, reward, error


step = jax.jit(step_pure)  # the config a pytree: its static settings compile, its traced ones do not


def iterations(state: GraphState) -> jax.Array:
    """int32 (): the paper's cycles (Auto-Discovery-Bench counts the cycles
    of intervention and observation until the agent's matrix matches the
    truth): the interventions made, a proposal closing the cycle of the last
    one, so one intervention and then the right matrix is 1 iteration; a
    session that ended on a proposal before any intervention counts 1 (its
    one cycle), one that ended without a proposal counts its interventions."""
    return jnp.maximum(state.interventions, state.proposed.astype(jnp.int32))


def edge_counts(hypothesis: jax.Array, adjacency: jax.Array, directed: bool):
    """(true positives, false positives, false negatives) over the pairs that
    can hold an edge: ordered pairs directed, unordered pairs undirected."""
    n = adjacency.shape[0]
    pairs = ~jnp.eye(n, dtype=bool) if directed else jnp.triu(jnp.ones((n, n), bool), 1)
    tp = jnp.sum(hypothesis & adjacency & pairs)
    fp = jnp.sum(hypothesis & ~adjacency & pairs)
    fn = jnp.sum(~hypothesis & adjacency & pairs)
    return tp, fp, fn


def edge_f1(hypothesis, adjacency, directed: bool) -> jax.Array:
    """float32 (): F1 of the hypothesis's edges against the truth's (1 when both have none)."""
    tp, fp, fn = edge_counts(hypothesis, adjacency, directed)
    return jnp.where(tp + fp + fn == 0, 1.0, 2 * tp / jnp.maximum(2 * tp + fp + fn, 1)).astype(jnp.float32)


def shd(hypothesis, adjacency) -> jax.Array:
    """int32 (): structural Hamming distance: the node pairs whose relation
    (no edge, either direction, both) differs, so a reversed edge counts once."""
    n = adjacency.shape[0]
    differs = (hypothesis != adjacency) | (hypothesis.T != adjacency.T)
    return jnp.sum(differs & jnp.triu(jnp.ones((n, n), bool), 1)).astype(jnp.int32)


@partial(jax.jit, static_argnames=("priced",))
def score_arrays(state: GraphState, priced: bool = False) -> dict:
    """A session's scores (arrays; a batch of sessions: B leading):
    ``success`` (the headline), ``iterations``, ``edge_f1`` and ``shd`` of
    the last proposal (none: the empty graph), ``interventions`` and
    ``wasted``; ``priced`` (an ``intervention_cost`` above 0, as the
    config's), ``cost`` (the cost times the interventions) and ``return``
    (success less the cost, the sum of the step's rewards). Pure."""
    out = {
        "success": state.success.astype(jnp.float32),
        "iterations": iterations(state),
        "edge_f1": edge_f1(state.hypothesis, state.adjacency, state.directed),
        "shd": shd(state.hypothesis, state.adjacency),
        "interventions": state.interventions,
        "wasted": state.wasted,
    }
    if priced:
        out["cost"] = state.intervention_cost * state.interventions.astype(jnp.float32)
        out["return"] = out["success"] - out["cost"]
    return out


def scores(state: GraphState, config=None) -> dict:
    """A session's scores as JSON-ready Python values (:func:`score_arrays`,
    ``cost`` and ``return`` where its intervention cost is above 0): floats
    ``success`` and ``edge_f1``, ``cost`` and ``return`` to 6 decimals (float32
    sums: 0.15, not 0.15000000596), the rest ints."""
    values = jax.device_get(score_arrays(state, bool(state.intervention_cost)))
    return {k: round(float(v), 6) if k in ("cost", "return") else float(v) if k in ("success", "edge_f1") else int(v)
            for k, v in values.items()}


def ended(state: GraphState) -> jax.Array:
    """Whether the session has ended, bool ()."""
    return state.ended


def public_view(state: GraphState, config=None) -> dict:
    """What the agent may see of a session (no hidden field): ``states`` (as
    last shown, misread or not), ``evidence``, ``knowledge`` (what the
    evidence implies), ``changes`` (per pair, the interventions after which
    the column's shown state changed), ``intervened``, ``budget_left``,
    ``ended``. Latent nodes appear nowhere: every array is over the N shown.
    ``config`` is not read (the state holds the shapes). The Gymnasium
    observation (:func:`observation_space`) is four of them."""
    return {"states": state.shown, "evidence": state.evidence, "knowledge": knowledge(state.evidence, state.reach),
            "changes": state.changes, "intervened": state.intervened, "budget_left": state.budget_left,
            "ended": state.ended}


def observation_space(config) -> spaces.Dict:
    """The Gymnasium observation, four keys of :func:`public_view`:
    ``states`` int32 (N,) (0..n_states-1 directed, 0..2N undirected),
    ``evidence`` int8 (N, N) in -1..1, ``intervened`` int32 (N,) and
    ``budget_left`` int32 (), both in 0..2N."""
    top = config.n_states - 1 if config.directed else config.budget
    return spaces.Dict({
        "states": spaces.Box(0, top, (config.n,), np.int32),
        "evidence": spaces.Box(-1, 1, (config.n, config.n), np.int8),
        "intervened": spaces.Box(0, config.budget, (config.n,), np.int32),
        "budget_left": spaces.Box(0, config.budget, (), np.int32),
    })


def action_space(config) -> spaces.Dict:
    """The whole action: ``kind`` (0 intervene, 1 submit, 2 end), ``node``
    and ``adjacency`` (0/1 (N, N), read by a submission and, under
    ``proposals="every"``, by an intervention)."""
    n = config.n
    return spaces.Dict({"kind": spaces.Discrete(3), "node": spaces.Discrete(n), "adjacency": spaces.MultiBinary((n, n))})


def to_action(sample, config) -> Action:
    """An element of :func:`action_space` as the core's :class:`Action`."""
    return Action.make(int(sample["kind"]), config, int(sample["node"]), sample["adjacency"])


def render(state: GraphState, config) -> str:
    """The session in a line: the settings, the states as shown and the budget left."""
    view = jax.device_get(public_view(state))
    return f"{config.describe()}: states {view['states'].tolist()}, budget left {int(view['budget_left'])}"
