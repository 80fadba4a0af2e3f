"""The graph worlds' baselines, written once as batched JAX policies over the
flat observation (:mod:`~luca_gym.worlds.graphs.flat`) and run by the harness
through the same functions (:class:`FlatBaseline`), so the two forms are held
equal: on an instance, the harness's session and the batched one
(:func:`~luca_gym.worlds.graphs.flat.play_batch`, each session from its
seed's key) take the same calls, ``random``'s draws included. ``luca-gym
report`` computes the ``random`` floor that way.

Under either protocol a baseline's matrix is what the evidence implies
(unknown pairs taken as no edge): under ``proposals="every"`` (the paper's
loop) the flat codec attaches it to every intervention, so each cycle
proposes the baseline's current best hypothesis and the session ends the
first time it is right; under ``"final"`` only the submission carries it.

* ``systematic``: intervene on each node whose row (undirected: row or
  column) the evidence still leaves open, fewest interventions first, then
  lowest index; submit what the evidence implies once nothing is open or the
  budget is spent. With changes certain (the default) one pass decides every
  pair, and acyclicity spares the nodes every other node is known to reach;
  with redraws that may repeat, it comes back to the open rows while the
  budget lasts. It is the ceiling a budget allows, beside the paper's models.
* ``random``: intervene on uniformly random nodes until the budget is spent,
  then submit what the evidence implies: random experiments, exact inference
  (under the paper's loop it stops as soon as what it has seen implies the
  truth).
* ``bayes-edges``: a posterior over each edge from every reading
  (:func:`edge_posterior`), the intervention that most reduces the expected
  uncertainty of the edges it tests, the most probable adjacency not yet
  refuted stated with every intervention (:func:`best_unrefuted`: the MAP,
  and once the MAP has been stated in vain under the paper's loop, the
  likeliest of its flips of the least certain pairs), a submission once the
  chance that the MAP is wrong is no more than the cost of an intervention
  (at cost 0: once it is certain, or the budget is spent). It reads the
  public view's per-pair change counts, which the flat observation leaves
  out, so it has no flat form: the harness runs it on the session's
  observation (:class:`BayesEdges`, its memory of the matrices stated in
  vain in its attributes) and :func:`play_bayes_batch` runs the same jitted
  choice on the core (the memory in the scan's carry), the two taking the
  same calls. Under the paper's settings (changes certain, no
  noise) every pair is certain after one intervention on its row and it
  solves what ``systematic`` solves; where changes are not certain
  (``redraw_may_repeat``), readings are misread (``observation_noise``) or
  interventions cost, it weighs what each reading is worth.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.flat import (GraphFlat, budget_left_of, interventions_of, knowledge_of, raw_systematic_policy,
                                         session_keys)


@lru_cache(maxsize=None)
def systematic_policy(codec: GraphFlat):
    """The ``systematic`` policy of ``codec``: ``(params, key, obs (B, D),
    mask (B, K)) -> actions int32 (B,)`` (one function per codec, so it
    compiles once). A raw-observation codec gets the raw teacher
    (:func:`~luca_gym.worlds.graphs.flat.raw_systematic_policy`), which tracks state itself."""
    if codec.raw:
        return raw_systematic_policy(codec)
    n, directed, budget = codec.config.n, codec.config.directed, codec.config.budget

    def choose(vector):
        open_ = core.open_rows(knowledge_of(vector, n), directed)
        # fewest interventions first, then the lowest index (the vector holds interventions over the budget:
        # back to counts, so that one intervention more always outweighs the index)
        order = jnp.round(interventions_of(vector, n) * budget) * n + jnp.arange(n)
        target = jnp.argmin(jnp.where(open_, order, jnp.inf))
        go = jnp.any(open_) & (budget_left_of(vector, n) > 0)
        return jnp.where(go, target, n).astype(jnp.int32)

    def policy(params, key, obs, mask):
        return jax.vmap(choose)(obs)

    return policy


@lru_cache(maxsize=None)
def random_policy(codec: GraphFlat):
    """The ``random`` policy of ``codec`` (see :func:`systematic_policy`)."""
    n = codec.config.n

    def policy(params, key, obs, mask):
        target = jax.random.randint(key, (obs.shape[0],), 0, n, jnp.int32)
        return jnp.where(mask[:, 0], target, n).astype(jnp.int32)

    return policy


POLICIES = {"systematic": systematic_policy, "random": random_policy}


@lru_cache(maxsize=None)
def _jitted(name: str, codec: GraphFlat):
    return jax.jit(POLICIES[name](codec))


class FlatBaseline:
    """A batched baseline as a harness policy (``reset(params, seed)``,
    ``act(observation) -> tool call``): the session's observation through the
    codec, the batched policy on a batch of one, the index back to a call."""

    name = ""

    def reset(self, params, seed: int) -> None:
        """Start a session of these settings: their codec, the jitted policy and a key from ``seed``."""
        self.codec = GraphFlat(params)
        self.policy = _jitted(self.name, self.codec)
        self.key = session_keys([seed])[0]

    def act(self, obs: dict) -> dict:
        """The session's action for ``obs``: the batched policy's choice on the flat codec, decoded."""
        vector, mask = self.codec.encode(obs)
        self.key, k = jax.random.split(self.key)
        index = self.policy(None, k, vector[None], mask[None])[0]
        return self.codec.decode(int(np.asarray(index)), obs)


class Systematic(FlatBaseline):
    """``systematic`` in the harness: intervenes on every node the evidence leaves open, then submits."""
    name = "systematic"


class Random(FlatBaseline):
    """``random`` in the harness: intervenes at random for the whole budget, then submits what the evidence implies."""
    name = "random"


# -- bayes-edges ------------------------------------------------------------------------------
EXACT_ORDERS = 12  # up to this many nodes the posterior sums over every order of the nodes (2**N subsets)
PLAN_TRIALS = 4  # trials of one node the stopping rule looks ahead to
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


def order_posterior(log_weight: jax.Array) -> jax.Array:
    """float32 (N, N): P(i comes before j) over the N! orders of the nodes, an
    order weighted by exp of the sum of ``log_weight`` [i, j] (the log weight
    of the readings where i comes before j) over its ordered pairs: a forward
    and a backward sum over the 2**N sets of nodes that can open an order
    (O(2**N N) a pass). Pure; N at most :data:`EXACT_ORDERS`."""
    n = log_weight.shape[0]
    sets = jnp.arange(2 ** n)
    bits = 1 << jnp.arange(n)
    member = (sets[:, None] & bits[None, :]) != 0  # (2**N, N)
    size = jnp.sum(member, axis=1)
    # into[A, v]: the log weight of the pairs (u, v), u in A, when v follows the set A
    into = member.astype(jnp.float32) @ log_weight
    without, with_ = sets[:, None] ^ bits[None, :], sets[:, None] | bits[None, :]
    last = jnp.arange(n)[None, :]

    def forward(k, f):  # f[A]: the orders of A, each with the weights of its pairs
        return jnp.where(size == k, jax.nn.logsumexp(jnp.where(member, f[without] + into[without, last], -jnp.inf), axis=1), f)

    def backward(k, b):  # b[A]: the orders of the rest after A, with the weights of the pairs ending outside A
        return jnp.where(size == n - 1 - k, jax.nn.logsumexp(jnp.where(member, -jnp.inf, into + b[with_]), axis=1), b)

    f = jax.lax.fori_loop(1, n + 1, forward, jnp.where(size == 0, 0.0, -jnp.inf))
    b = jax.lax.fori_loop(0, n, backward, jnp.where(size == n, 0.0, -jnp.inf))
    # v follows the set A: every u in A comes before v
    follows = jnp.exp(jnp.where(member, -jnp.inf, f[:, None] + into + b[with_]) - f[-1])
    return (member.T.astype(jnp.float32) @ follows).astype(jnp.float32)


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


def _entropy(x):
    x = jnp.clip(x, 1e-6, 1 - 1e-6)  # float32: 1 - 1e-6 is still below 1
    return -(x * jnp.log(x) + (1 - x) * jnp.log1p(-x))


def information_gain(posterior: jax.Array, config) -> jax.Array:
    """float32 (N, N): the expected fall in each pair's entropy (nats) from one
    more trial of it, whose reading changes with probability q1 (an edge) or
    q0 (none) (:func:`reading_odds`). Pure, elementwise."""
    q1, q0 = reading_odds(config)
    changed = posterior * q1 + (1 - posterior) * q0
    after_change = posterior * q1 / jnp.maximum(changed, _CLIP)
    after_none = posterior * (1 - q1) / jnp.maximum(1 - changed, _CLIP)
    return _entropy(posterior) - changed * _entropy(after_change) - (1 - changed) * _entropy(after_none)


def right_after(posterior: jax.Array, config) -> jax.Array:
    """float32 (PLAN_TRIALS + 1, N, N): [k, i, j] the expected chance that the
    pair's MAP (edge iff the posterior passes 1/2) is right after k more
    trials of it, each changing its reading with probability q1 (an edge) or
    q0 (none): the sum, over the count c of changes in k trials, of the
    likelier of edge-and-c and none-and-c. Pure."""
    q1, q0 = reading_odds(config)
    k = np.arange(PLAN_TRIALS + 1)[:, None]
    c = np.arange(PLAN_TRIALS + 1)[None, :]
    log = lambda x: float(np.log(min(max(x, _CLIP), 1 - _CLIP)))  # noqa: E731
    ways = np.log([[math.comb(kk, cc) or 1 for cc in range(PLAN_TRIALS + 1)] for kk in range(PLAN_TRIALS + 1)])
    valid = c <= k
    edge = np.where(valid, ways + c * log(q1) + (k - c) * log(1 - q1), -np.inf)[..., None, None]
    none = np.where(valid, ways + c * log(q0) + (k - c) * log(1 - q0), -np.inf)[..., None, None]
    p = jnp.clip(posterior, _CLIP, 1 - _CLIP)[None, None]
    likelier = jnp.maximum(jnp.log(p) + edge, jnp.log1p(-p) + none)
    return jnp.exp(jax.nn.logsumexp(likelier, axis=1)).astype(jnp.float32)


def plan_rises(posterior: jax.Array, config) -> jax.Array:
    """float32 (N * PLAN_TRIALS,): the log factors by which successive trials
    are expected to raise the chance that the MAP matrix is right, best
    first: each node's k-th trial (k up to PLAN_TRIALS) raises it by the log
    ratio of its pairs' :func:`right_after` at k and at k - 1 (pairs taken as
    independent), and the increments of every node are sorted together, so
    the sum of the first h is the rise from the best h trials. Pure."""
    n = config.n
    logs = jnp.log(jnp.maximum(right_after(posterior, config), _CLIP))
    rows = jnp.sum(jnp.where(~np.eye(n, dtype=bool), logs, 0.0), axis=2)  # (PLAN_TRIALS + 1, N)
    increments = jnp.maximum(jnp.diff(rows, axis=0), 0.0).reshape(-1)
    return -jnp.sort(-increments)


def _acyclic(graphs: jax.Array) -> jax.Array:
    """bool (...): whether each graph (..., N, N) has no directed cycle (its
    transitive closure, by repeated squaring, has an empty diagonal)."""
    n = graphs.shape[-1]
    reach = graphs.astype(jnp.float32)
    for _ in range(max(1, int(np.ceil(np.log2(n))))):
        reach = jnp.minimum(reach + reach @ reach, 1.0)
    return ~jnp.any(jnp.diagonal(reach, axis1=-2, axis2=-1) > 0, axis=-1)


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


@lru_cache(maxsize=None)
def bayes_choice(config):
    """The ``bayes-edges`` choice of ``config``, jitted once: (public view,
    memory) -> (node int32 (), adjacency bool (N, N), memory), the memory
    that of :func:`bayes_memory`, carried from call to call. ``node`` < N:
    intervene on it (stating the adjacency under the paper's loop); N:
    submit the adjacency. The adjacency is the most probable matrix not yet
    refuted (:func:`best_unrefuted`: the MAP of the edge posteriors,
    :func:`edge_posterior`, until it has been stated in vain); under the
    paper's loop the memory comes back with its fingerprint added (if the
    session goes on, it was wrong). The node is the one whose trial most
    reduces the expected entropy of the pairs it tests
    (:func:`information_gain` summed over a molecule's row, a house's
    pairs), ties to the fewest interventions, then the lowest index. It
    submits when the budget is spent, when nothing is left to learn (at the
    paper's settings: once every pair is certain), or, where interventions
    cost, when no number h of further interventions (up to the budget left)
    is worth its price: the rise it is expected to bring in the chance that
    the MAP is right (:func:`plan_rises`, the best h trials) is at most h
    times the cost, times, under the paper's loop, the chance that the MAP
    is wrong (a right MAP stated with an intervention ends the session
    before the intervention is made, and paid for). Pure."""
    n = config.n
    # numpy constants: this closure is cached, and may first be built inside another function's trace
    off_diagonal = ~np.eye(n, dtype=bool)
    pairs = off_diagonal if config.directed else np.triu(np.ones((n, n), bool), 1)
    steps = np.arange(1, n * PLAN_TRIALS + 1)

    def choose(view, memory):
        posterior = edge_posterior(view, config)
        adjacency = best_unrefuted(posterior, memory, config)
        gain = jnp.sum(jnp.where(off_diagonal, information_gain(posterior, config), 0.0), axis=1)
        best = jnp.max(gain)
        order = jnp.asarray(view["intervened"], jnp.float32) * (n + 1) + jnp.arange(n) / n
        target = jnp.argmin(jnp.where(gain >= best * (1 - 1e-6), order, jnp.inf))
        budget_left = jnp.asarray(view["budget_left"])
        stop = (budget_left <= 0) | (best <= 0)
        if config.intervention_cost:
            right = jnp.sum(jnp.where(pairs, jnp.log(jnp.maximum(posterior, 1 - posterior)), 0.0))
            rise = jnp.exp(right + jnp.cumsum(plan_rises(posterior, config))) - jnp.exp(right)
            wrong = -jnp.expm1(right) if config.proposals == "every" else 1.0
            worth = (rise > config.intervention_cost * steps * wrong) & (steps <= budget_left)
            stop = stop | ~jnp.any(worth)
        if config.proposals == "every":
            count = memory["count"]
            memory = {"refuted": memory["refuted"].at[jnp.minimum(count, config.max_calls - 1)].set(
                matrix_hash(adjacency, config)), "count": jnp.minimum(count + 1, config.max_calls)}
        return jnp.where(stop, n, target).astype(jnp.int32), adjacency, memory

    return jax.jit(choose)


class BayesEdges:
    """``bayes-edges`` in the harness: :func:`bayes_choice` on the session's
    observation (the public view) and the memory it keeps between calls (the
    matrices it has stated in vain), its choice as a tool call."""

    def reset(self, params, seed: int) -> None:
        """Start a session of these settings (the choice is deterministic: the seed draws nothing)."""
        self.config = params
        self.choose = bayes_choice(params)
        self.memory = bayes_memory(params)

    def act(self, obs: dict) -> dict:
        """The call for ``obs``: intervene on the chosen node with the stated matrix (under the paper's loop), or
        submit it."""
        c = self.config
        node, adjacency, self.memory = self.choose({k: jnp.asarray(v) for k, v in obs.items()}, self.memory)
        node, adjacency = jax.device_get((node, adjacency))
        adjacency = np.asarray(adjacency).astype(int).tolist()
        if int(node) == c.n:
            return {"tool": "submit_graph", "arguments": {"adjacency": adjacency}}
        arguments = {c.node_noun: int(node)}
        if c.proposals == "every":
            arguments["adjacency"] = adjacency
        return {"tool": c.intervene_tool, "arguments": arguments}


@partial(jax.jit, static_argnames=("config",))
def play_bayes_batch(instances, config) -> dict:
    """``bayes-edges`` on each of a batch of instances (B leading), on the core,
    for the session's most calls (``config.max_calls``): the calls the
    harness's session of each takes (:class:`BayesEdges`), its memory
    (:func:`bayes_memory`) in the scan's carry. Returns the scores
    (B,) of :func:`core.scores` (with ``cost`` and ``return`` where
    interventions cost) and ``total`` (B,), the sum of the rewards."""
    choose = bayes_choice(config)

    def one(instance):
        def body(carry, _):
            state, memory, total = carry
            node, adjacency, new_memory = choose(core.public_view(state), memory)
            kind = jnp.where(node == config.n, core.SUBMIT, core.INTERVENE)
            new, reward, _ = core.step_pure(state, kind, node, adjacency, config)
            live = ~state.ended
            keep = lambda a, b: jnp.where(live, a, b)  # noqa: E731
            return (jax.tree_util.tree_map(keep, new, state), jax.tree_util.tree_map(keep, new_memory, memory),
                    total + jnp.where(live, reward, 0.0)), None

        start = (core.reset(instance, config), bayes_memory(config), jnp.float32(0.0))
        (state, _, total), _ = jax.lax.scan(body, start, None, length=config.max_calls)
        return {**core.scores(state, config.directed, config.intervention_cost), "total": total}

    return jax.vmap(one)(instances)


BASELINES = {"systematic": Systematic, "random": Random, "bayes-edges": BayesEdges}
# The flat-space form of systematic (World.flat_baselines): the teacher of `luca-gym train --algo bc`.
FLAT_BASELINES = {"systematic": systematic_policy}
