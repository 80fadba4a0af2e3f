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

import math
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.analyst import (_CLIP, bayes_memory, best_unrefuted, edge_posterior, edge_prior,
                                            posterior_of_features, reading_odds, remember)
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
    if codec.posterior:
        raise ValueError(f"codec: {codec.describe()} observes the posterior, and systematic reads what the evidence "
                         "implies; the posterior analyst's designers are information-gain and round-robin")
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


@lru_cache(maxsize=None)
def information_gain_policy(codec: GraphFlat):
    """``information-gain``, the designer of ``bayes-edges`` on the flat
    observation: :func:`information_design` on the posterior the observation
    holds. Under ``analyst="posterior"`` (what it is for) the posterior read
    back from the observed log-odds
    (:func:`~luca_gym.worlds.graphs.analyst.posterior_of_features`; exact
    but for pairs within about 1e-4 of certain), the analyst stating the
    matrices; under ``"implied"`` what the evidence implies taken as
    certain, the prior where it says nothing (see :func:`systematic_policy`
    for the signature). A raw codec is refused."""
    if codec.raw:
        raise ValueError(f"codec: {codec.describe()} observes no inference; information-gain reads the evidence codec's")
    n, budget, config = codec.config.n, codec.config.budget, codec.config

    def read(matrix):
        if codec.posterior:
            return posterior_of_features(matrix)
        return jnp.where(matrix > 0.5, 1.0, jnp.where(matrix < -0.5, 0.0, edge_prior(config)))

    def choose(vector):
        posterior = read(vector[: n * n].reshape(n, n)) * ~np.eye(n, dtype=bool)
        intervened = jnp.round(interventions_of(vector, n) * budget)
        return information_design(posterior, intervened, jnp.round(budget_left_of(vector, n) * budget), config)

    def policy(params, key, obs, mask):
        return jax.vmap(choose)(obs)

    return policy


@lru_cache(maxsize=None)
def round_robin_policy(codec: GraphFlat):
    """``round-robin``, for an ``analyst="posterior"`` codec: the node of fewest
    interventions, then the lowest index, until the budget is spent, then the
    submission: the sweep that adapts to nothing (see
    :func:`systematic_policy` for the signature). It reads only the
    interventions and the budget, so it plays either analyst's codec; a raw
    codec is refused."""
    if codec.raw:
        raise ValueError(f"codec: {codec.describe()} has another layout; round-robin plays the evidence codec's")
    n, budget = codec.config.n, codec.config.budget

    def choose(vector):
        target = jnp.argmin(jnp.round(interventions_of(vector, n) * budget) * n + jnp.arange(n))
        return jnp.where(budget_left_of(vector, n) > 0, target, n).astype(jnp.int32)

    def policy(params, key, obs, mask):
        return jax.vmap(choose)(obs)

    return policy


POLICIES = {"systematic": systematic_policy, "random": random_policy, "information-gain": information_gain_policy,
            "round-robin": round_robin_policy}


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
PLAN_TRIALS = 4  # trials of one node the stopping rule looks ahead to


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


def information_design(posterior: jax.Array, intervened: jax.Array, budget_left: jax.Array, config) -> jax.Array:
    """int32 (): the information-gain designer's choice from the edge
    posterior (float32 (N, N), :func:`~luca_gym.worlds.graphs.analyst.edge_posterior`),
    each node's interventions (N,) and the budget left (): the node (< N)
    whose trial most reduces the expected entropy of the pairs it tests
    (:func:`information_gain` summed over a molecule's row, a house's
    pairs), ties to the fewest interventions, then the lowest index; or N,
    stop, when the budget is spent, when nothing is left to learn (at the
    paper's settings: once every pair is certain), or, where interventions
    cost, when no number h of further interventions (up to the budget left)
    is worth its price: the rise it is expected to bring in the chance that
    the MAP is right (:func:`plan_rises`, the best h trials) is at most h
    times the cost, times, under the paper's loop, the chance that the MAP
    is wrong (a right MAP stated with an intervention ends the session
    before the intervention is made, and paid for). The designer of
    ``bayes-edges`` and of the flat ``information-gain``. Pure."""
    n = config.n
    off_diagonal = ~np.eye(n, dtype=bool)
    pairs = off_diagonal if config.directed else np.triu(np.ones((n, n), bool), 1)
    steps = np.arange(1, n * PLAN_TRIALS + 1)
    gain = jnp.sum(jnp.where(off_diagonal, information_gain(posterior, config), 0.0), axis=1)
    best = jnp.max(gain)
    order = jnp.asarray(intervened, jnp.float32) * (n + 1) + jnp.arange(n) / n
    target = jnp.argmin(jnp.where(gain >= best * (1 - 1e-6), order, jnp.inf))
    budget_left = jnp.asarray(budget_left)
    stop = (budget_left <= 0) | (best <= 0)
    if config.intervention_cost:
        right = jnp.sum(jnp.where(pairs, jnp.log(jnp.maximum(posterior, 1 - posterior)), 0.0))
        rise = jnp.exp(right + jnp.cumsum(plan_rises(posterior, config))) - jnp.exp(right)
        wrong = -jnp.expm1(right) if config.proposals == "every" else 1.0
        worth = (rise > config.intervention_cost * steps * wrong) & (steps <= budget_left)
        stop = stop | ~jnp.any(worth)
    return jnp.where(stop, n, target).astype(jnp.int32)


@lru_cache(maxsize=None)
def bayes_choice(config):
    """The ``bayes-edges`` choice of ``config``, jitted once: (public view,
    memory) -> (node int32 (), adjacency bool (N, N), memory), the memory
    that of :func:`~luca_gym.worlds.graphs.analyst.bayes_memory`, carried
    from call to call. ``node`` < N: intervene on it (stating the adjacency
    under the paper's loop); N: submit the adjacency. The adjacency is the
    posterior analyst's, the most probable matrix not yet refuted
    (:func:`~luca_gym.worlds.graphs.analyst.best_unrefuted`: the MAP of the
    edge posteriors until it has been stated in vain); under the paper's
    loop the memory comes back with its fingerprint added (if the session
    goes on, it was wrong). The node is :func:`information_design`'s. Pure."""

    def choose(view, memory):
        posterior = edge_posterior(view, config)
        adjacency = best_unrefuted(posterior, memory, config)
        node = information_design(posterior, view["intervened"], view["budget_left"], config)
        if config.proposals == "every":
            memory = remember(memory, adjacency, config)
        return node, adjacency, memory

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
    (B,) of :func:`core.score_arrays` (with ``cost`` and ``return`` where
    interventions cost) and ``total`` (B,), the sum of the rewards."""
    choose = bayes_choice(config)

    def one(instance):
        def body(carry, _):
            state, memory, total = carry
            node, adjacency, new_memory = choose(core.public_view(state), memory)
            kind = jnp.where(node == config.n, core.SUBMIT, core.INTERVENE)
            new, reward, _ = core.step_pure(state, core.Action(kind, node, adjacency), config)
            live = ~state.ended
            keep = lambda a, b: jnp.where(live, a, b)  # noqa: E731
            return (jax.tree_util.tree_map(keep, new, state), jax.tree_util.tree_map(keep, new_memory, memory),
                    total + jnp.where(live, reward, 0.0)), None

        start = (core.reset(instance, config), bayes_memory(config), jnp.float32(0.0))
        (state, _, total), _ = jax.lax.scan(body, start, None, length=config.max_calls)
        return {**core.score_arrays(state, bool(config.intervention_cost)), "total": total}

    return jax.vmap(one)(instances)


BASELINES = {"systematic": Systematic, "random": Random, "bayes-edges": BayesEdges}
# The flat-space form of systematic (World.flat_baselines): the teacher of `luca-gym train --algo bc`.
FLAT_BASELINES = {"systematic": systematic_policy, "information-gain": information_gain_policy,
                  "round-robin": round_robin_policy}
