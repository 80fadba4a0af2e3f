"""The graph worlds' flat codec (:class:`luca_gym.protocol.FlatCodec`) for
learners: K = N + 1 actions, D = N*N + N + 1 observations.

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
* The mask allows every intervention while the budget lasts and the
  submission until the session ends. An action outside [0, N] is refused
  inside the jit at no cost (the core's error 3); the Gymnasium flat env and
  :meth:`GraphFlat.decode` raise ValueError for it on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.boundary import check_flat_actions
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig


@partial(jax.jit, static_argnames=("config",))
def observation(view: dict, config) -> tuple[jax.Array, jax.Array]:
    """(vector float32 (D,), mask bool (K,)) of a session's public view
    (:func:`core.public_view`). Pure."""
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


def knowledge_of(vector: jax.Array, n: int) -> jax.Array:
    """int8 (..., N, N): what the evidence implies, as an observation vector carries it (its first N*N entries)."""
    return jnp.round(vector[..., : n * n]).astype(jnp.int8).reshape(*vector.shape[:-1], n, n)


def interventions_of(vector: jax.Array, n: int) -> jax.Array:
    """float32 (..., N): each node's interventions over the budget."""
    return vector[..., n * n: n * n + n]


def budget_left_of(vector: jax.Array, n: int) -> jax.Array:
    """float32 (...,): the budget left over the budget."""
    return vector[..., n * n + n]


@dataclass(frozen=True)
class GraphFlat:
    """The flat codec of a graph world's ``config``
    (:class:`~luca_gym.worlds.graphs.config.DagConfig` or
    :class:`~luca_gym.worlds.graphs.config.RelationalConfig`)."""

    config: DagConfig | RelationalConfig
    headline = "success"
    observation_bounds = (-1.0, 1.0)

    @property
    def world(self) -> str:
        return self.config.world

    @property
    def num_actions(self) -> int:
        return self.config.n + 1

    @property
    def observation_size(self) -> int:
        n = self.config.n
        return n * n + n + 1

    def settings(self) -> dict:
        """The world's settings, as a dict."""
        return self.config.settings()

    def describe(self) -> str:
        """The settings in a few words."""
        return self.config.describe()

    def instances(self, seeds):
        """The instances of ``seeds``, a leading batch axis."""
        return core.instances(seeds, self.config)

    def _view(self, state):
        vector, mask = observation(core.public_view(state), self.config)
        return state, vector, mask

    def open(self, instance):
        """Open a session on one instance: (state, vector, mask)."""
        return self._view(core.reset(instance, self.config))

    def step(self, state, action):
        """Action i < N intervenes on node i; action N submits what the
        evidence implies. Any other action (outside [0, N]) reaches the core
        as an intervention on a node out of range, which it refuses
        (error 3): it costs nothing, earns nothing and changes nothing."""
        action = jnp.asarray(action, jnp.int32)
        kind = jnp.where(action == self.config.n, core.SUBMIT, core.INTERVENE)
        state, reward, error = core.step_pure(state, kind, action, core.implied_hypothesis(state.evidence), self.config)
        state, vector, mask = self._view(state)
        return state, vector, mask, reward, state.ended, jnp.bool_(False), error

    def score(self, state):
        """The headline score: success, float32 ()."""
        return state.success.astype(jnp.float32)

    def scores(self, state) -> dict:
        """Every score of a session (:func:`core.scores`)."""
        return core.scores(state, self.config.directed)

    # -- a learned agent on a host session (luca_gym.agents.FlatPolicy) ---------------
    def for_session(self, params) -> GraphFlat:
        """The codec of a session of config ``params``."""
        return GraphFlat(params)

    def encode(self, obs: dict):
        """A host session's observation as the flat (vector, mask)."""
        return observation(obs, self.config)

    def decode(self, index: int, obs: dict) -> dict:
        """Flat index -> a tool call ``{"tool", "arguments"}`` of the session.
        An index that is not an integer in [0, N] raises ValueError."""
        config = self.config
        index = int(check_flat_actions(index, self.num_actions, name="index"))
        hypothesis = np.asarray(core.implied_hypothesis(jnp.asarray(obs["evidence"]))).astype(int).tolist()
        if index < config.n:
            arguments = {config.node_noun: index}
            if config.proposals == "every":
                arguments["adjacency"] = hypothesis
            return {"tool": config.intervene_tool, "arguments": arguments}
        return {"tool": "submit_graph", "arguments": {"adjacency": hypothesis}}


def dag_codec(**settings) -> GraphFlat:
    """``World.flat`` of ``dag``: the codec of ``DagConfig(**settings)``."""
    return GraphFlat(DagConfig(**settings))


def relational_codec(**settings) -> GraphFlat:
    """``World.flat`` of ``relational``: the codec of ``RelationalConfig(**settings)``."""
    return GraphFlat(RelationalConfig(**settings))


def session_keys(seeds) -> jax.Array:
    """uint32 (B, 2): the key a baseline's session of each seed starts from
    (:class:`~luca_gym.worlds.graphs.baselines.FlatBaseline` and
    :func:`play_batch` alike)."""
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray([int(s) % 2**31 for s in seeds], jnp.uint32))


@partial(jax.jit, static_argnames=("codec", "policy_fn", "num_steps"))
def play_batch(policy_fn, policy_params, keys, codec: GraphFlat, instances, num_steps: int):
    """Each of a batch of instances (B leading) played once by ``policy_fn``
    (``(params, key, obs (B, D), mask (B, K)) -> actions (B,)``) for at most
    ``num_steps`` calls, without autoreset. Each session draws from its own
    key (``keys`` uint32 (B, 2), :func:`session_keys`), split at every call,
    and the policy sees it alone (a batch of one), as the harness plays a
    :class:`~luca_gym.worlds.graphs.baselines.FlatBaseline`: a session here
    takes the calls the harness's session of that seed takes. Returns the
    scores (B,) of :func:`core.scores` and the return."""
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
