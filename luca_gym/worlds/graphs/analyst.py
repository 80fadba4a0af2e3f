"""The graph worlds' posterior analyst: what every reading so far says of
each edge, and the matrix to state from it. One source of truth for the
``bayes-edges`` baseline (:mod:`~luca_gym.worlds.graphs.baselines`) and the
flat codec's ``analyst="posterior"`` (:mod:`~luca_gym.worlds.graphs.flat`),
so a learner that only chooses experiments is read exactly as the Bayesian
designer is.

* :func:`edge_posterior`: the probability of each edge given the public
  view's change counts (each intervention a trial of its row, a change seen
  with probability q1 across an edge and q0 elsewhere, :func:`reading_odds`;
  directed, summed over the hidden orders up to :data:`EXACT_ORDERS` nodes).
* :func:`best_unrefuted`: the most probable matrix not yet refuted (the MAP,
  and once it has been stated in vain under the paper's loop, the likeliest
  of its flips of the least certain pairs), with the memory of the matrices
  stated (:func:`bayes_memory`, :func:`remember`).
* :class:`AnalystSession`: a core session with that analyst's state (the
  posterior of the current view and the memory), :func:`open_session` and
  :func:`step_session` (jit and vmap apply): the calls of an agent that
  names only a node or the submission.
* :func:`log_odds_features`: the posterior as a network reads it, log-odds
  clipped to +-:data:`LOG_ODDS_CLIP` and scaled into [-1, 1].

Every function here is pure.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.graphs import core

EXACT_ORDERS = 12  # up to this many nodes the posterior sums over every order of the nodes (2**N subsets)
_CLIP = 1e-12  # likelihoods kept off 0 and 1 inside the logs
_IMPOSSIBLE = -1e4  # the log weight of an order the readings rule out (finite: no inf - inf inside the sums)
CANDIDATE_PAIRS = 12  # the least certain pairs whose flips of the MAP make the candidate matrices
CANDIDATE_FLIPS = 3  # at most this many of them flipped at once (1 + 12 + 66 + 220 candidates)
_CYCLIC = -1e3  # the log-probability penalty of a candidate with a cycle (a dag's graphs have none)


def reading_odds(config) -> tuple[float, float]:
    """(q1, q0): the chance that a node's shown state changes across one
    intervention on another, where there is an edge from it (q1) and where
    there is none (q0), under ``config``'s rules: the true change (certain,
    or 1 - 1/S where a redraw may repeat; certain for an anger) seen through
    two readings, each right with probability 1 - p and else a uniformly
    random other of the R values. Without noise, (1 or 1 - 1/S, 0)."""
    p, r = config.observation_noise, config.n_readings
    true_change = 1.0 if config.always_changes else 1.0 - 1.0 / config.n_states
    same_if_same = (1 - p) ** 2 + p ** 2 / (r - 1)
    same_if_changed = 2 * (1 - p) * p / (r - 1) + (r - 2) * p ** 2 / (r - 1) ** 2
    return 1.0 - (true_change * same_if_changed + (1 - true_change) * same_if_same), 1.0 - same_if_same


def edge_prior(config) -> float:
    """The chance of an edge between two shown nodes where the order allows
    one (directed: i before j): the edge density, and with latent nodes the
    chance of a path through one of them too (a latent node sits between two
    ordered nodes with probability 1/3 and links both with probability
    density squared; chains of two or more latent nodes left out)."""
    d, share = config.edge_density, (1 / 3 if config.directed else 1.0)
    return 1 - (1 - d) * (1 - d * d) ** (share * config.n_latent)


def log_likelihood_ratio(view: dict, config) -> jax.Array:
    """float32 (N, N): log P(readings | edge [i, j]) - log P(readings | none),
    from the public view's change counts: each intervention on i a trial of
    (i, j) (undirected: an attack on i or on j), a change of j's shown state
    with probability q1 or q0 (:func:`reading_odds`), the trials independent.
    Pure."""
    n = config.n
    q1, q0 = reading_odds(config)
    log = lambda x: float(np.log(min(max(x, _CLIP), 1 - _CLIP)))  # noqa: E731
    changes = jnp.asarray(view["changes"], jnp.float32)
    trials = jnp.broadcast_to(jnp.asarray(view["intervened"], jnp.float32)[:, None], (n, n))
    if not config.directed:
        changes, trials = changes + changes.T, trials + trials.T
    return changes * (log(q1) - log(q0)) + (trials - changes) * (log(1 - q1) - log(1 - q0))


@lru_cache(maxsize=None)
def _order_levels(n: int):
    """The static index tables of :func:`order_posterior` for N nodes:
    ``member`` bool (2**N, N) (node v in set A), and per set size k the sets
    of that size with, for each, the sets one node smaller (forward: A
    without each member) or larger (backward: A with each non-member) and
    that node."""
    sets = np.arange(2 ** n)
    bits = 1 << np.arange(n)
    member = (sets[:, None] & bits[None, :]) != 0
    size = member.sum(axis=1)
    forward, backward = [], []
    for k in range(1, n + 1):
        of_size = sets[size == k]
        node = np.stack([np.flatnonzero(member[a]) for a in of_size])  # (C, k)
        forward.append((of_size, of_size[:, None] ^ bits[node], node))
    for k in range(n - 1, -1, -1):
        of_size = sets[size == k]
        node = np.stack([np.flatnonzero(~member[a]) for a in of_size])  # (C, N - k)
        backward.append((of_size, of_size[:, None] | bits[node], node))
    return member, forward, backward


def order_posterior(log_weight: jax.Array) -> jax.Array:
    """float32 (N, N): P(i comes before j) over the N! orders of the nodes, an
    order weighted by exp of the sum of ``log_weight`` [i, j] (the log weight
    of the readings where i comes before j) over its ordered pairs: a forward
    and a backward sum over the 2**N sets of nodes that can open an order,
    one set size at a time (O(2**N N) in all). Pure; N at most
    :data:`EXACT_ORDERS`."""
    n = log_weight.shape[0]
    member, forward, backward = _order_levels(n)
    sets, bits = np.arange(2 ** n), 1 << np.arange(n)
    # into[A, v]: the log weight of the pairs (u, v), u in A, when v follows the set A
    into = jnp.asarray(member, jnp.float32) @ log_weight
    f = jnp.full((2 ** n,), -jnp.inf).at[0].set(0.0)  # f[A]: the orders of A, each with the weights of its pairs
    for of_size, smaller, node in forward:
        f = f.at[of_size].set(jax.nn.logsumexp(f[smaller] + into[smaller, node], axis=1))
    b = jnp.full((2 ** n,), -jnp.inf).at[-1].set(0.0)  # b[A]: the orders of the rest after A, the pairs ending outside A
    for of_size, larger, node in backward:
        b = b.at[of_size].set(jax.nn.logsumexp(into[of_size[:, None], node] + b[larger], axis=1))
    # v follows the set A: every u in A comes before v
    follows = jnp.exp(jnp.where(member, -jnp.inf, f[:, None] + into + b[sets[:, None] | bits[None, :]]) - f[-1])
    return (jnp.asarray(member.T, jnp.float32) @ follows).astype(jnp.float32)


def edge_posterior(view: dict, config) -> jax.Array:
    """float32 (N, N): the probability of each edge [i, j] given every reading
    so far (the public view). Undirected: the prior (:func:`edge_prior`)
    times the readings' likelihood ratio (:func:`log_likelihood_ratio`), each
    pair on its own. Directed: the edges are independent given the hidden
    order, so P(i -> j) = P(i before j) x P(edge | i before j, readings),
    the order's posterior (:func:`order_posterior`) summed over every order
    up to :data:`EXACT_ORDERS` nodes, and above it taken pair by pair (the
    pair's two weights alone; then, without noise, what the evidence implies
    adds acyclicity). Without noise, what the evidence implies
    (:func:`~luca_gym.worlds.graphs.core.knowledge`) is certain. Pure."""
    n = config.n
    prior = edge_prior(config)
    ratio = log_likelihood_ratio(view, config)
    given_order = jax.nn.sigmoid(float(np.log(prior) - np.log1p(-prior)) + ratio)
    if config.directed:
        # The weight of the readings of (i, j) where i comes before j, relative to none of the pair's edges there.
        weight = jnp.logaddexp(float(np.log(prior)) + ratio, float(np.log1p(-prior)))
        weight = jnp.where(jnp.eye(n, dtype=bool), 0.0, jnp.maximum(weight, _IMPOSSIBLE))
        before = order_posterior(weight) if n <= EXACT_ORDERS else jax.nn.sigmoid(weight - weight.T)
        posterior = before * given_order
    else:
        posterior = given_order
    if config.observation_noise == 0:
        known = jnp.asarray(view["knowledge"], jnp.int8)
        posterior = jnp.where(known == core.EDGE, 1.0, jnp.where(known == core.NO_EDGE, 0.0, posterior))
    return jnp.where(jnp.eye(n, dtype=bool), 0.0, posterior).astype(jnp.float32)


def _acyclic(graphs: jax.Array) -> jax.Array:
    """bool (...): whether each graph (..., N, N) has no directed cycle: N
    rounds of taking away every node no remaining node points at leave none."""
    alive = jnp.ones(graphs.shape[:-1], bool)
    for _ in range(graphs.shape[-1]):
        alive = alive & jnp.any(graphs & alive[..., :, None], axis=-2)
    return ~jnp.any(alive, axis=-1)


@lru_cache(maxsize=None)
def _hash_weights(n: int) -> np.ndarray:
    """uint32 (2, N, N): fixed random weights of :func:`matrix_hash` (a constant of N alone)."""
    return np.random.default_rng(0x6BA7E5).integers(0, 2 ** 32, (2, n, n), dtype=np.uint64).astype(np.uint32)


def matrix_hash(adjacency: jax.Array, config) -> jax.Array:
    """uint32 (2,): a 64-bit fingerprint of an adjacency matrix, the sums
    (modulo 2**32) of fixed random weights over its edges (undirected: over
    the pairs i < j), so that flipping a pair adds or takes away its weight.
    Two matrices share it with a chance about 2**-64. Pure."""
    n = config.n
    pairs = ~np.eye(n, dtype=bool) if config.directed else np.triu(np.ones((n, n), bool), 1)
    weights = jnp.asarray(np.where(pairs, _hash_weights(n), 0).astype(np.uint32))
    return jnp.sum(jnp.where(adjacency[None], weights, jnp.uint32(0)), axis=(1, 2), dtype=jnp.uint32)


def bayes_memory(config) -> dict:
    """``bayes-edges``' memory at a session's start: ``refuted`` uint32
    (max_calls, 2), the fingerprints (:func:`matrix_hash`) of the matrices it
    has stated and that did not end the session, and ``count`` int32 (), how
    many there are (nothing refuted yet)."""
    return {"refuted": jnp.zeros((config.max_calls, 2), jnp.uint32), "count": jnp.int32(0)}


def best_unrefuted(posterior: jax.Array, memory: dict, config) -> jax.Array:
    """bool (N, N): the most probable matrix not yet refuted. Under the
    paper's loop a stated matrix that did not end the session is wrong, so
    the MAP of the edge posteriors (each edge whose posterior passes 1/2),
    once stated, is no longer worth stating while no reading changes it.
    The candidates: the MAP and its flips of up to :data:`CANDIDATE_FLIPS`
    of the :data:`CANDIDATE_PAIRS` least certain pairs, each scored by the
    sum, over the pairs it flips, of log P(flipped) - log P(as in the MAP)
    (the pairs taken as independent); a candidate with a cycle (directed,
    up to :data:`EXACT_ORDERS` nodes: the graphs are acyclic) is penalised
    below every acyclic one, and one whose fingerprint is in ``memory``
    (:func:`bayes_memory`) is out. The MAP itself where every candidate is
    out. Pure."""
    n = config.n
    pairs = ~np.eye(n, dtype=bool) if config.directed else np.triu(np.ones((n, n), bool), 1)
    m = min(CANDIDATE_PAIRS, int(pairs.sum()))
    subsets = [s for k in range(min(CANDIDATE_FLIPS, m) + 1) for s in itertools.combinations(range(m), k)]
    masks = np.zeros((len(subsets), m), bool)
    for c, subset in enumerate(subsets):
        masks[c, list(subset)] = True
    adjacency = (posterior > 0.5) & ~np.eye(n, dtype=bool)
    p = jnp.clip(posterior, _CLIP, 1 - _CLIP)
    # a flip's log odds (at most 0), only over the pairs
    cost = jnp.where(pairs, jnp.log(jnp.minimum(p, 1 - p)) - jnp.log(jnp.maximum(p, 1 - p)), -jnp.inf)
    flip_cost, flip = jax.lax.top_k(cost.reshape(-1), m)
    at_rows, at_cols = flip // n, flip % n
    score = jnp.sum(jnp.where(masks, flip_cost[None], 0.0), axis=1)  # (C,)
    weights = jnp.asarray(np.where(pairs, _hash_weights(n), 0).astype(np.uint32))[:, at_rows, at_cols]  # (2, m)
    delta = jnp.where(adjacency[at_rows, at_cols][None], jnp.uint32(0) - weights, weights)  # an edge's weight out or in
    hashes = matrix_hash(adjacency, config)[None] + jnp.sum(jnp.where(masks[:, None, :], delta[None], jnp.uint32(0)),
                                                               axis=2, dtype=jnp.uint32)  # (C, 2)
    live = jnp.arange(memory["refuted"].shape[0]) < memory["count"]
    refuted = jnp.any(jnp.all(hashes[:, None, :] == memory["refuted"][None], axis=2) & live[None], axis=1)

    def candidate(mask):  # the MAP with the pairs of ``mask`` (m,) flipped
        flipped = jnp.zeros((n, n), bool).at[at_rows, at_cols].set(mask)
        return adjacency ^ (flipped | flipped.T if not config.directed else flipped)

    if config.directed and n <= EXACT_ORDERS:
        score = score + jnp.where(_acyclic(jax.vmap(candidate)(jnp.asarray(masks))), 0.0, _CYCLIC)
    best = jnp.argmax(jnp.where(refuted, -jnp.inf, score))
    return jnp.where(jnp.all(refuted), adjacency, candidate(jnp.asarray(masks)[best]))


LOG_ODDS_CLIP = 9.0  # |log-odds| observed: a posterior within about 1e-4 of certain reads as certain


def log_odds_features(posterior: jax.Array) -> jax.Array:
    """float32 (N, N) in [-1, 1]: each edge's log-odds, clipped to
    +-:data:`LOG_ODDS_CLIP` and divided by it (0 on the diagonal, where the
    posterior is 0 by definition)."""
    n = posterior.shape[-1]
    p = jnp.clip(posterior, _CLIP, 1 - _CLIP)
    odds = jnp.clip(jnp.log(p) - jnp.log1p(-p), -LOG_ODDS_CLIP, LOG_ODDS_CLIP) / LOG_ODDS_CLIP
    return jnp.where(jnp.eye(n, dtype=bool), 0.0, odds).astype(jnp.float32)


def posterior_of_features(features: jax.Array) -> jax.Array:
    """float32 (..., N, N): the posterior back from :func:`log_odds_features`
    (exact inside the clip; a clipped pair reads as its clip)."""
    return jax.nn.sigmoid(features * LOG_ODDS_CLIP)


def remember(memory: dict, adjacency: jax.Array, config, stated=True) -> dict:
    """``memory`` (:func:`bayes_memory`) with ``adjacency``'s fingerprint
    added where ``stated`` (bool ()): a matrix stated with an intervention
    under the paper's loop that did not end the session is wrong. Where the
    memory is full the last slot is overwritten (it holds ``max_calls``
    slots, one a call, so that happens only after the session's calls)."""
    count = memory["count"]
    slot = jnp.minimum(count, config.max_calls - 1)
    refuted = memory["refuted"].at[slot].set(jnp.where(stated, matrix_hash(adjacency, config), memory["refuted"][slot]))
    return {"refuted": refuted, "count": jnp.where(stated, jnp.minimum(count + 1, config.max_calls), count)}


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class AnalystSession:
    """A core session read by the posterior analyst.

    Attributes:
        session: :class:`~luca_gym.worlds.graphs.core.GraphState`, the core's.
        posterior: float32 (N, N) :func:`edge_posterior` of its public view now.
        memory: :func:`bayes_memory`'s dict: the matrices stated in vain.
    """

    session: core.GraphState
    posterior: jax.Array
    memory: dict

    @property
    def ended(self) -> jax.Array:
        """bool (): whether the session has ended."""
        return self.session.ended


def open_session(instance, config) -> AnalystSession:
    """A session of ``instance`` under the posterior analyst (nothing read yet but the opening states)."""
    session = core.reset(instance, config)
    return AnalystSession(session, edge_posterior(core.public_view(session), config), bayes_memory(config))


def step_session(state: AnalystSession, node, config):
    """One call of an agent that names only ``node`` (int32 (): < N
    intervenes on it, N submits): the analyst states (or submits) the most
    probable matrix not yet refuted (:func:`best_unrefuted`), remembers it
    where the call was an intervention under the paper's loop, and reads the
    new view. A node outside [0, N] reaches the core as a node out of range
    (error 3): like every refused call it costs nothing and changes nothing.
    Returns (state, reward float32 (), error int32 ())."""
    node = jnp.asarray(node, jnp.int32)
    adjacency = best_unrefuted(state.posterior, state.memory, config)
    kind = jnp.where(node == config.n, core.SUBMIT, core.INTERVENE)
    session, reward, error = core.step_pure(state.session, core.Action(kind, node, adjacency), config)
    ok = error == 0
    stated = ok & (kind == core.INTERVENE) & (config.proposals == "every")
    posterior = edge_posterior(core.public_view(session), config)
    return AnalystSession(session, jnp.where(ok, posterior, state.posterior), remember(state.memory, adjacency, config, stated)), \
        reward, error


def play_design(instances, designs, config) -> dict:
    """The sessions of a batch of instances (B leading) whose experiments are
    ``designs`` int32 (B, L) (in order; an entry outside [0, N) and every one
    after it: no more), read by the posterior analyst (:func:`step_session`:
    its matrix stated with each intervention under the paper's loop), then
    submitted by it. The score an agent's experiments earn when the evidence
    is read well, whatever the agent made of it. Returns :func:`core.score_arrays`
    (B,) each, with ``return`` (the sum of the rewards). Pure (jit it with
    ``config`` static)."""
    n = config.n
    designs = jnp.asarray(designs, jnp.int32)
    stopped = jnp.cumsum((designs < 0) | (designs >= n), axis=1) > 0
    nodes = jnp.concatenate([jnp.where(stopped, n, designs), jnp.full((designs.shape[0], 1), n, jnp.int32)], axis=1)

    def one(instance, nodes):
        def body(carry, node):
            state, total = carry
            new, reward, _ = step_session(state, node, config)
            live = ~state.ended
            keep = jax.tree_util.tree_map(lambda a, b: jnp.where(live, a, b), new, state)
            return (keep, total + jnp.where(live, reward, 0.0)), None

        (state, total), _ = jax.lax.scan(body, (open_session(instance, config), jnp.float32(0.0)), nodes)
        return {**core.score_arrays(state.session, bool(config.intervention_cost)), "return": total}

    return jax.vmap(one)(instances, nodes)
