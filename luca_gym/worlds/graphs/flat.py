"""The graph worlds' flat codec (:class:`luca_gym.protocol.FlatCodec`) for
learners, in one of two observations (``observation=``).

``"evidence"`` (the default): K = N + 1 actions, D = N*N + N + 1.

* Action i < N intervenes on node i (under ``proposals="every"``, the
  paper's loop and the default, with the adjacency the evidence implies
  attached as the cycle's proposal); action N submits the adjacency the
  evidence implies (:func:`~luca_gym.worlds.graphs.core.implied_hypothesis`:
  the "analyst" of this world, which writes the matrix the flat action leaves out).
* The observation is what the evidence implies
  (:func:`~luca_gym.worlds.graphs.core.knowledge`), each pair +1 (an edge was
  seen), -1 (no edge: no change where a change was certain, or, directed, a
  path already seen runs the other way) or 0 (unknown), row-major; then each
  node's interventions over the budget; then the budget left over the budget.
  The world does the state tracking: a learner only chooses experiments.

``analyst=`` (under ``"evidence"``) names who reads the evidence for the
learner: ``"implied"`` (the default, as above) or ``"posterior"``, the
Bayesian reading ``bayes-edges`` keeps (:mod:`~luca_gym.worlds.graphs.analyst`),
for noisy or uncertain readings, where what the evidence implies takes every
misread change as an edge. Under ``"posterior"`` the matrix stated with each
intervention (and submitted by action N) is the most probable one not yet
refuted (:func:`~luca_gym.worlds.graphs.analyst.best_unrefuted`), and the
observation's first N*N entries are each edge's posterior log-odds, clipped
and scaled into [-1, 1] (:func:`~luca_gym.worlds.graphs.analyst.log_odds_features`);
the rest as above. K and D are the same: the learner chooses only the
experiments and when to stop.

``"raw"``: the learner tracks the state. K = N + 1 + N*N actions,
D = N*N + 5N + 2.

* Action i < N intervenes on node i, action N submits, as above, but the
  matrix proposed (with each intervention under ``proposals="every"``) or
  submitted is the learner's own: a hypothesis the codec holds for it, empty
  at the start, which action N + 1 + i*N + j edits by toggling the pair
  (i, j) (undirected: (i, j) and (j, i) together). An edit is no call of the
  session: it costs no budget and is no iteration, but a session allows at
  most N*(N-1) of them (:func:`edit_budget`), so every session ends.
* The observation holds no inference and no history beyond what the learner
  wrote: the hypothesis (N*N, 0/1, row-major), the last node intervened on
  (one-hot, N; zeros before the first), every node's state before and after
  that intervention (N + N, over the largest state: ``dag``'s n_states - 1,
  ``relational``'s budget; before the first intervention both are the
  opening states), which of them differ (N, 0/1: the two vectors' difference,
  given so that a small network need not learn equality), each node's
  interventions over the budget (N), the budget left over the budget and the
  edits left over :func:`edit_budget`. What an earlier intervention showed
  is in the observation only where the learner wrote it into its hypothesis.

``raw_actions="commit"`` (under ``"raw"``; the default ``"toggle"`` is the
above) replaces the N*N edits by actions a learner can explore: K = 2N + 2,
actions 0..N as above, and action N + 1 + a commits what the last
intervention showed, then takes action a (intervenes on node a, or a = N
submits) with the matrix so committed. A commit switches on in the
learner's matrix the pair from the node last intervened on to each other
node that changed (undirected: both ways); pairs already on stay on, and
before the first intervention it writes nothing. A commit that switches a
pair on is one edit of :func:`edit_budget` (pairs only switch on, so the
edits never run out). The observation is the same; whether and when to
commit (a commit after a second intervention on a node can only add what
the first missed) is the learner's to work out.

Either way the mask allows every intervention while the budget lasts and the
submission until the session ends; under ``"raw"`` also every edit off the
diagonal while edits are left and the session is open (under ``"commit"``:
action N + 1 + a where action a is allowed; a refused one commits nothing).
A refused action
costs nothing and changes nothing: an action outside [0, K) reaches the core
as a node out of range (error 3); an edit of the diagonal is error 4, an
edit of an ended session error 2, an edit once the edits are spent
:data:`EDITS_SPENT`. The Gymnasium flat env and :meth:`GraphFlat.decode`
raise ValueError for an index outside [0, K) on the host.

The reward is the core's under either observation: 1 on the call that ends
the session on the truth, less the config's ``intervention_cost`` on each
intervention made; an edit earns nothing.

One module for the pure codec and what plays it batched: both observations
share one action layout, one mask and :class:`GraphFlat`'s ``step``, and
the raw codec's teacher (:func:`raw_systematic_policy`) and
:func:`play_batch` read the layout defined here. The codec held on one host
session across its calls (a learned agent in the harness) is
:mod:`~luca_gym.worlds.graphs.flat_host`.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, fields
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.boundary import check_flat_actions
from luca_gym.validate import short_repr
from luca_gym.worlds.graphs import analyst as posterior_analyst
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig

OBSERVATIONS = ("evidence", "raw")  # GraphFlat.observation; the first is the default
ANALYSTS = ("implied", "posterior")  # GraphFlat.analyst; the first is the default
RAW_ACTIONS = ("toggle", "commit")  # GraphFlat.raw_actions: N*N pair toggles (the default) or commit-then-act
EDITS_SPENT = len(core.ERRORS)  # a raw codec's refusal code beyond the core's: an edit with no edits left
ERRORS = (*core.ERRORS, "the edits of the hypothesis are spent: intervene or submit")  # by refusal code


@partial(jax.jit, static_argnames=("config",))
def observation(view: dict, config) -> tuple[jax.Array, jax.Array]:
    """(vector float32 (D,), mask bool (K,)) of a session's public view
    (:func:`core.public_view`) under ``observation="evidence"``. Pure."""
    budget = jnp.float32(config.budget)
    vector = jnp.concatenate([
        jnp.asarray(view["knowledge"], jnp.float32).reshape(-1),
        jnp.asarray(view["intervened"], jnp.float32) / budget,
        jnp.asarray(view["budget_left"], jnp.float32)[None] / budget,
    ])
    open_ = ~jnp.asarray(view["ended"], bool)
    can_intervene = open_ & (jnp.asarray(view["budget_left"]) > 0)
    mask = jnp.concatenate([jnp.broadcast_to(can_intervene, (config.n,)), open_[None]])
    return vector, mask


@partial(jax.jit, static_argnames=("config",))
def posterior_observation(view: dict, posterior, config) -> tuple[jax.Array, jax.Array]:
    """(vector float32 (D,), mask bool (K,)) under ``analyst="posterior"``:
    :func:`observation`'s, with each edge's posterior log-odds (``posterior``
    float32 (N, N), :func:`~luca_gym.worlds.graphs.analyst.log_odds_features`)
    in place of what the evidence implies. Pure."""
    vector, mask = observation(view, config)
    n = config.n
    return vector.at[: n * n].set(posterior_analyst.log_odds_features(posterior).reshape(-1)), mask


def knowledge_of(vector: jax.Array, n: int) -> jax.Array:
    """int8 (..., N, N): what the evidence implies, as an ``"evidence"`` observation vector carries it (its first N*N entries)."""
    return jnp.round(vector[..., : n * n]).astype(jnp.int8).reshape(*vector.shape[:-1], n, n)


def interventions_of(vector: jax.Array, n: int) -> jax.Array:
    """float32 (..., N): each node's interventions over the budget (an ``"evidence"`` vector)."""
    return vector[..., n * n: n * n + n]


def budget_left_of(vector: jax.Array, n: int) -> jax.Array:
    """float32 (...,): the budget left over the budget (an ``"evidence"`` vector)."""
    return vector[..., n * n + n]


# -- the raw observation ----------------------------------------------------------
def edit_budget(n: int) -> int:
    """The edits of the hypothesis a raw session allows: N*(N-1), every ordered pair once."""
    return n * (n - 1)


def _largest_state(config) -> int:
    """The largest state a node can show: ``dag``'s n_states - 1, ``relational``'s anger after the whole budget."""
    return config.n_states - 1 if config.directed else config.budget


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class RawSession:
    """A session under ``observation="raw"``: the core's session and what the
    codec holds for the learner (N nodes).

    Attributes:
        session: :class:`~luca_gym.worlds.graphs.core.GraphState`, the core's.
        hypothesis: bool (N, N) the learner's matrix, as its edits left it.
        last: int32 () the last node intervened on (-1: none yet).
        before: int32 (N,) the states before that intervention (the opening
            states before the first).
        edits_left: int32 () edits of the hypothesis still allowed.
    """

    session: core.GraphState
    hypothesis: jax.Array
    last: jax.Array
    before: jax.Array
    edits_left: jax.Array

    @property
    def ended(self) -> jax.Array:
        """bool (): whether the session has ended."""
        return self.session.ended


def _committed(hypothesis, last, before, after, directed: bool):
    """``hypothesis`` bool (N, N) with the pairs from node ``last`` to each
    other node whose state differs between ``before`` and ``after`` switched
    on (undirected: both ways); unchanged where ``last`` is -1."""
    n = hypothesis.shape[0]
    seen = (after != before) & (jnp.arange(n) != last) & (last >= 0)
    row = jnp.clip(last, 0, n - 1)
    hypothesis = hypothesis.at[row].set(hypothesis[row] | seen)
    return hypothesis if directed else hypothesis.at[:, row].set(hypothesis[:, row] | seen)


@partial(jax.jit, static_argnames=("config", "raw_actions"))
def raw_observation(view: dict, hypothesis, last, before, edits_left, config,
                    raw_actions: str = "toggle") -> tuple[jax.Array, jax.Array]:
    """(vector float32 (D,), mask bool (K,)) under ``observation="raw"`` (see
    the module) from the session's public view (``states``, ``intervened``,
    ``budget_left``, ``ended``: nothing it infers) and what the codec holds
    for the learner (:class:`RawSession`'s fields), for the action layout
    ``raw_actions``. Pure."""
    n = config.n
    budget, top = jnp.float32(config.budget), jnp.float32(_largest_state(config))
    after, before, last = jnp.asarray(view["states"], jnp.int32), jnp.asarray(before, jnp.int32), jnp.asarray(last, jnp.int32)
    vector = jnp.concatenate([
        jnp.asarray(hypothesis, jnp.float32).reshape(-1),
        (jnp.arange(n) == last).astype(jnp.float32),
        before.astype(jnp.float32) / top,
        after.astype(jnp.float32) / top,
        (after != before).astype(jnp.float32),
        jnp.asarray(view["intervened"], jnp.float32) / budget,
        jnp.asarray(view["budget_left"], jnp.float32)[None] / budget,
        jnp.asarray(edits_left, jnp.float32)[None] / edit_budget(n),
    ])
    open_ = ~jnp.asarray(view["ended"], bool)
    can_intervene = open_ & (jnp.asarray(view["budget_left"]) > 0)
    if raw_actions == "commit":  # commit, then intervene or submit: allowed where the call is
        can_edit = jnp.concatenate([jnp.broadcast_to(can_intervene, (n,)), open_[None]])
    else:
        can_edit = (open_ & (jnp.asarray(edits_left) > 0) & ~jnp.eye(n, dtype=bool)).reshape(-1)
    mask = jnp.concatenate([jnp.broadcast_to(can_intervene, (n,)), open_[None], can_edit])
    return vector, mask


def raw_fields(vector: jax.Array, n: int) -> dict:
    """A ``"raw"`` observation vector (..., D) in its parts (see the module):
    ``hypothesis`` bool (..., N, N), ``last`` bool (..., N) (one-hot),
    ``before``, ``after`` float32 (..., N), ``changed`` bool (..., N),
    ``interventions`` float32 (..., N), ``budget_left`` and ``edits_left``
    float32 (...,), as fractions."""
    parts = np.cumsum([n * n, n, n, n, n, n, 1])
    hypothesis, last, before, after, changed, interventions, budget_left, edits_left = jnp.split(vector, parts, axis=-1)
    return {"hypothesis": (hypothesis > 0.5).reshape(*vector.shape[:-1], n, n), "last": last > 0.5, "before": before,
            "after": after, "changed": changed > 0.5, "interventions": interventions, "budget_left": budget_left[..., 0],
            "edits_left": edits_left[..., 0]}


def _edit(hypothesis, pair, directed: bool):
    """``hypothesis`` with pair ``(i, j)`` (an int32 () index i*N + j) toggled; undirected, (j, i) with it."""
    n = hypothesis.shape[0]
    i, j = pair // n, pair % n
    value = ~hypothesis[i, j]
    hypothesis = hypothesis.at[i, j].set(value)
    return hypothesis if directed else hypothesis.at[j, i].set(value)


@dataclass(frozen=True)
class GraphFlat:
    """The flat codec of a graph world's ``config``
    (``DagConfig`` or ``RelationalConfig`` (the world pages
    document each)).

    Attributes:
        config: the world's settings.
        observation: "evidence" (default: the world's inference observed, its
            matrix proposed) or "raw" (the learner tracks the state and edits
            the matrix it proposes); see the module.
        raw_actions: under "raw", how the learner edits its matrix: "toggle"
            (default: one action per pair) or "commit" (each call with or
            without a commit of what the last intervention showed first);
            see the module. Ignored
            under "evidence".
        analyst: under "evidence", "implied" (default: what the evidence
            implies) or "posterior" (the edge posterior and its most probable
            unrefuted matrix); see the module.
    """

    config: DagConfig | RelationalConfig
    observation: str = "evidence"
    raw_actions: str = "toggle"
    analyst: str = "implied"
    headline = "success"
    observation_bounds = (-1.0, 1.0)

    def __post_init__(self):
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"observation: {short_repr(self.observation)} not allowed; allowed {', '.join(OBSERVATIONS)}")
        if self.raw_actions not in RAW_ACTIONS:
            raise ValueError(f"raw_actions: {short_repr(self.raw_actions)} not allowed; allowed {', '.join(RAW_ACTIONS)}")
        if self.analyst not in ANALYSTS:
            raise ValueError(f"analyst: {short_repr(self.analyst)} not allowed; allowed {', '.join(ANALYSTS)}")
        if self.raw and self.analyst != ANALYSTS[0]:
            raise ValueError(f"analyst: {self.analyst!r} reads the evidence for the learner, and observation='raw' leaves "
                             "it to the learner; allowed with observation='evidence' only")

    @property
    def posterior(self) -> bool:
        """Whether the posterior analyst reads the evidence (``analyst="posterior"``)."""
        return self.analyst == "posterior"

    @property
    def raw(self) -> bool:
        """Whether the learner tracks the state (``observation="raw"``)."""
        return self.observation == "raw"

    @property
    def commits(self) -> bool:
        """Whether the learner edits its matrix by commits (``"raw"`` with ``raw_actions="commit"``)."""
        return self.raw and self.raw_actions == "commit"

    @property
    def world(self) -> str:
        return self.config.world

    @property
    def num_actions(self) -> int:
        n = self.config.n
        return n + 1 + (n + 1 if self.commits else n * n if self.raw else 0)

    @property
    def observation_size(self) -> int:
        n = self.config.n
        return n * n + 5 * n + 2 if self.raw else n * n + n + 1

    @property
    def max_calls(self) -> int:
        """The most actions a session can take: the session's calls, and under ``"raw"`` the edits."""
        return self.config.max_calls + (edit_budget(self.config.n) if self.raw else 0)

    def settings(self) -> dict:
        """The keyword settings that rebuild this codec: the world's and the codec's own."""
        return {**self.config.settings(), "observation": self.observation, "raw_actions": self.raw_actions,
                "analyst": self.analyst}

    def describe(self) -> str:
        """The settings in a few words."""
        return (self.config.describe() + (" raw commit" if self.commits else " raw" if self.raw else "")
                + (" analyst=posterior" if self.posterior else ""))

    def token_layout(self) -> dict:
        """Each node's observation slots and flat action, for a policy that
        treats the nodes as a set of entities (``network="entity"``,
        :mod:`luca_gym.agents.entity_attention`), under ``observation="evidence"``
        (either analyst): node i's token reads row i of the matrix (what the
        evidence implies of, or the posterior log-odds of, the pairs (i, j):
        its trial tests them) and its interventions, and scores intervening
        on i; the global token reads the budget left and scores the
        submission. Raises ValueError under ``"raw"``."""
        if self.raw:
            raise ValueError("network: the entity network reads observation='evidence'; observation='raw' has no "
                             "token layout; use network='mlp'")
        n = self.config.n
        nodes = np.arange(n)[:, None]
        return {"global_obs": np.array([n * n + n]), "global_actions": np.array([n]),
                "groups": (("node", np.concatenate([nodes * n + np.arange(n)[None], n * n + nodes], axis=1), nodes),)}

    def instances(self, seeds):
        """The instances of ``seeds``, a leading batch axis."""
        return core.instances(seeds, self.config)

    def _view(self, state):
        if self.posterior:
            vector, mask = posterior_observation(core.public_view(state.session), state.posterior, self.config)
            return state, vector, mask
        if not self.raw:
            vector, mask = observation(core.public_view(state), self.config)
            return state, vector, mask
        vector, mask = raw_observation(core.public_view(state.session), state.hypothesis, state.last, state.before,
                                       state.edits_left, self.config, self.raw_actions)
        return state, vector, mask

    def open(self, instance):
        """Open a session on one instance: (state, vector, mask)."""
        if self.posterior:
            return self._view(posterior_analyst.open_session(instance, self.config))
        session = core.reset(instance, self.config)
        if not self.raw:
            return self._view(session)
        n = self.config.n
        return self._view(RawSession(session, jnp.zeros((n, n), bool), jnp.int32(-1), core.public_view(session)["states"],
                                     jnp.int32(edit_budget(n))))

    def step(self, state, action):
        """Action i < N intervenes on node i, action N submits (the matrix
        the evidence implies, or under ``"raw"`` the learner's); under
        ``"raw"`` action N + 1 + p edits pair p of the learner's matrix
        (``raw_actions="commit"``: action N + 1 + a commits what the last
        intervention showed, then takes action a). Any
        other action (outside [0, K)) reaches the core as an intervention on
        a node out of range, which it refuses (error 3): it costs nothing,
        earns nothing and changes nothing."""
        action = jnp.asarray(action, jnp.int32)
        n = self.config.n
        if self.posterior:
            state, reward, error = posterior_analyst.step_session(state, action, self.config)
            state, vector, mask = self._view(state)
            return state, vector, mask, reward, state.ended, jnp.bool_(False), error
        session = state.session if self.raw else state
        if self.commits:
            return self._commit_step(state, action)
        kind = jnp.where(action == n, core.SUBMIT, core.INTERVENE)
        # An edit is no call of the session: the core sees an index out of range, refuses it and the edit replaces that.
        hypothesis = state.hypothesis if self.raw else core.implied_hypothesis(session.evidence)
        called, reward, error = core.step_pure(session, core.Action(kind, action, hypothesis), self.config)
        if self.raw:
            made = called.interventions > session.interventions
            pair = action - (n + 1)
            editing = (pair >= 0) & (pair < n * n)
            pair = jnp.clip(pair, 0, n * n - 1)
            edit_error = jnp.where(session.ended, 2, jnp.where(pair // n == pair % n, 4,
                                                                jnp.where(state.edits_left <= 0, EDITS_SPENT, 0)))
            edited = (edit_error == 0) & editing
            new = RawSession(
                session=called,
                hypothesis=jnp.where(edited, _edit(state.hypothesis, pair, self.config.directed), state.hypothesis),
                last=jnp.where(made, action, state.last),
                before=jnp.where(made, core.public_view(session)["states"], state.before),
                edits_left=state.edits_left - edited.astype(jnp.int32),
            )
            error = jnp.where(editing, edit_error, error).astype(jnp.int32)
            reward = jnp.where(editing, 0.0, reward)
            state = new
        else:
            state = called
        state, vector, mask = self._view(state)
        return state, vector, mask, reward, self._session(state).ended, jnp.bool_(False), error

    def _commit_step(self, state: RawSession, action):
        """:meth:`step` under ``raw_actions="commit"``: action N + 1 + a
        commits (:func:`_committed`) then calls as action a; the commit
        stands only where the core accepts the call."""
        n = self.config.n
        committing = (action > n) & (action <= 2 * n + 1)
        call = jnp.where(committing, action - (n + 1), action)
        states = core.public_view(state.session)["states"]
        committed = jnp.where(committing, _committed(state.hypothesis, state.last, state.before, states,
                                                     self.config.directed), state.hypothesis)
        kind = jnp.where(call == n, core.SUBMIT, core.INTERVENE)
        called, reward, error = core.step_pure(state.session, core.Action(kind, call, committed), self.config)
        kept = error == 0
        made = called.interventions > state.session.interventions
        new = RawSession(
            session=called,
            hypothesis=jnp.where(kept, committed, state.hypothesis),
            last=jnp.where(made, call, state.last),
            before=jnp.where(made, states, state.before),
            edits_left=state.edits_left - (kept & jnp.any(committed != state.hypothesis)).astype(jnp.int32),
        )
        new, vector, mask = self._view(new)
        return new, vector, mask, reward, new.ended, jnp.bool_(False), jnp.asarray(error, jnp.int32)

    def _session(self, state) -> core.GraphState:
        return state.session if self.raw or self.posterior else state

    def score(self, state):
        """The headline score: success, float32 ()."""
        return self._session(state).success.astype(jnp.float32)

    def scores(self, state) -> dict:
        """Every score of a session (:func:`core.score_arrays`)."""
        return core.score_arrays(self._session(state), bool(self.config.intervention_cost))

    # -- a learned agent on a host session (luca_gym.agents.FlatPolicy) ---------------
    def for_session(self, params):
        """The codec of a session of config ``params``: under ``"raw"`` a
        :class:`~luca_gym.worlds.graphs.flat_host.RawHostSession`, which holds
        the learner's matrix across the session's calls, under
        ``analyst="posterior"`` a
        :class:`~luca_gym.worlds.graphs.flat_host.PosteriorHostSession`."""
        # the host side builds on this module, so it is imported where a session asks for it
        from luca_gym.worlds.graphs.flat_host import PosteriorHostSession, RawHostSession

        codec = dataclasses.replace(self, config=params)
        return RawHostSession(codec) if self.raw else PosteriorHostSession(codec) if self.posterior else codec

    def encode(self, obs: dict):
        """A host session's observation as the flat (vector, mask) (``"evidence"``; see :meth:`for_session`)."""
        if self.posterior:
            raise ValueError(f"codec: {self.describe()} keeps state across a session's calls; encode through "
                             "codec.for_session(params)")
        return observation(obs, self.config)

    def decode(self, index: int, obs: dict) -> dict:
        """Flat index -> a tool call ``{"tool", "arguments"}`` of the session
        (``"evidence"``; see :meth:`for_session`). An index that is not an
        integer in [0, N] raises ValueError."""
        if self.posterior:
            raise ValueError(f"codec: {self.describe()} keeps state across a session's calls; decode through "
                             "codec.for_session(params)")
        index = int(check_flat_actions(index, self.num_actions, name="index"))
        return _call(self.config, index, np.asarray(core.implied_hypothesis(jnp.asarray(obs["evidence"]))))


def _call(config, index: int, hypothesis: np.ndarray) -> dict:
    """The tool call of flat index ``index`` < N + 1 proposing (or submitting) ``hypothesis`` bool (N, N)."""
    hypothesis = hypothesis.astype(int).tolist()
    if index < config.n:
        arguments = {config.node_noun: index}
        if config.proposals == "every":
            arguments["adjacency"] = hypothesis
        return {"tool": config.intervene_tool, "arguments": arguments}
    return {"tool": "submit_graph", "arguments": {"adjacency": hypothesis}}


def _config_keywords(config_class):
    """A codec factory's signature as the keywords it takes: ``observation``,
    ``raw_actions`` and each of ``config_class``'s fields, with their defaults. The generic
    layers read a flat factory's signature (the batched flat env's settings,
    a PPO run's defaults), and ``**settings`` would hide the config's."""
    def sign(factory):
        keyword = inspect.Parameter.KEYWORD_ONLY
        factory.__signature__ = inspect.Signature(
            [inspect.Parameter("observation", keyword, default=OBSERVATIONS[0]),
             inspect.Parameter("raw_actions", keyword, default=RAW_ACTIONS[0]),
             inspect.Parameter("analyst", keyword, default=ANALYSTS[0])]
            + [inspect.Parameter(f.name, keyword, default=f.default) for f in fields(config_class)],
            return_annotation=GraphFlat)
        return factory
    return sign


@_config_keywords(DagConfig)
def dag_codec(observation: str = "evidence", raw_actions: str = "toggle", analyst: str = "implied",
              **settings) -> GraphFlat:
    """``World.flat`` of ``dag``: the codec of ``DagConfig(**settings)``
    under ``observation``, ``raw_actions`` and ``analyst`` (:class:`GraphFlat`'s)."""
    return GraphFlat(DagConfig(**settings), observation, raw_actions, analyst)


@_config_keywords(RelationalConfig)
def relational_codec(observation: str = "evidence", raw_actions: str = "toggle", analyst: str = "implied",
                     **settings) -> GraphFlat:
    """``World.flat`` of ``relational``: the codec of ``RelationalConfig(**settings)`` (see :func:`dag_codec`)."""
    return GraphFlat(RelationalConfig(**settings), observation, raw_actions, analyst)


# -- the raw codec's teacher ------------------------------------------------------
@lru_cache(maxsize=None)
def raw_systematic_policy(codec: GraphFlat):
    """``systematic`` for a ``"raw"`` codec, reading only the raw observation
    and writing its own matrix: ``(params, key, obs (B, D), mask (B, K)) ->
    actions int32 (B,)`` (one function per codec, so it compiles once).

    After an intervention it switches on, one edit a call, the pair from the
    node intervened on to each other node that changed and is not yet in its
    matrix (lowest first); then it intervenes on the node of fewest
    interventions (then the lowest index); it submits once the budget is
    spent, or, where an intervention always changes every child, once every
    node has been intervened on (one pass decides every pair). Under the
    paper's loop each intervention proposes its matrix, so it stops where
    ``systematic`` (which reads what the evidence implies) stops, but for
    the rows that ``systematic`` infers by acyclicity alone. Under
    ``raw_actions="commit"`` the call after an intervention commits
    instead of the edits of a row."""
    if not codec.raw:
        raise ValueError(f"codec: {codec.describe()} observes the evidence; raw_systematic_policy plays "
                         "observation='raw' (the evidence codec's is baselines.systematic_policy)")
    n, budget, once = codec.config.n, codec.config.budget, codec.config.always_changes

    def choose(vector):
        f = raw_fields(vector, n)
        last = jnp.argmax(f["last"])
        pending = f["changed"] & ~f["hypothesis"][last] & (jnp.arange(n) != last) & f["last"][last]
        edit = n + 1 + last * n + jnp.argmax(pending)
        target = jnp.argmin(jnp.round(f["interventions"] * budget) * n + jnp.arange(n))  # fewest, then lowest
        done = jnp.all(f["interventions"] > 0) if once else jnp.bool_(False)
        go = (f["budget_left"] > 0) & ~done
        if codec.commits:
            return (jnp.where(go, target, n) + jnp.where(jnp.any(pending), n + 1, 0)).astype(jnp.int32)
        return jnp.where(jnp.any(pending) & (f["edits_left"] > 0), edit, jnp.where(go, target, n)).astype(jnp.int32)

    def policy(params, key, obs, mask):
        return jax.vmap(choose)(obs)

    return policy


def session_keys(seeds) -> jax.Array:
    """uint32 (B, 2): the key a baseline's session of each seed starts from
    (:class:`~luca_gym.worlds.graphs.baselines.FlatBaseline` and
    :func:`play_batch` alike)."""
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray([int(s) % 2**31 for s in seeds], jnp.uint32))


@partial(jax.jit, static_argnames=("codec", "policy_fn", "num_steps"))
def play_batch(policy_fn, policy_params, keys, codec: GraphFlat, instances, num_steps: int):
    """Each of a batch of instances (B leading) played once by ``policy_fn``
    (``(params, key, obs (B, D), mask (B, K)) -> actions (B,)``) for at most
    ``num_steps`` calls (:attr:`GraphFlat.max_calls` plays every session to
    its end), without autoreset. Each session draws from its own
    key (``keys`` uint32 (B, 2), :func:`session_keys`), split at every call,
    and the policy sees it alone (a batch of one), as the harness plays a
    :class:`~luca_gym.worlds.graphs.baselines.FlatBaseline`: a session here
    takes the calls the harness's session of that seed takes. Returns the
    scores (B,) of :func:`core.score_arrays` and the return."""
    state, vector, mask = jax.vmap(codec.open)(instances)

    def choose(key, vector, mask):
        key, k = jax.random.split(key)
        return key, policy_fn(policy_params, k, vector[None], mask[None])[0]

    def body(carry, _):
        state, vector, mask, keys, total = carry
        keys_n, action = jax.vmap(choose)(keys, vector, mask)
        new, vector_n, mask_n, reward, *_ = jax.vmap(codec.step)(state, action)
        live = ~state.ended  # an ended session stays as it ended
        pick = lambda a, b: jnp.where(live.reshape(live.shape + (1,) * (a.ndim - 1)), a, b)  # noqa: E731
        return (jax.tree_util.tree_map(pick, new, state), pick(vector_n, vector), pick(mask_n, mask), keys_n,
                total + jnp.where(live, reward, 0.0)), None

    (state, *_, total), _ = jax.lax.scan(body, (state, vector, mask, keys, jnp.zeros(vector.shape[0])), None,
                                         length=num_steps)
    return {**jax.vmap(codec.scores)(state), "return": total}
