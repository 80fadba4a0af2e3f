"""An actor-critic over a world's entities: self-attention over one token
per entity, permutation-equivariant, one set of weights for any number of
entities, in equinox (PPO's and behaviour cloning's ``network="entity"``).

A world's flat observation vector (D,) and its K flat actions grow with the
instance's size (more genes, more nodes), so an MLP over them is tied to one
size. Here the world's flat codec says which observation slots and which
flat actions belong to each entity, in named groups (:meth:`TokenLayout.of`
reads the codec's ``token_layout()``): LUCA's groups are its genes and its
signals (:func:`luca_gym.worlds.luca.core.flat.token_layout`), the graph
worlds' (dag, relational) their nodes
(:meth:`luca_gym.worlds.graphs.flat.GraphFlat.token_layout`). Any world whose
codec has ``token_layout()`` can use the network. It reads the vector as a
set of tokens:

* one token per entity of each group (LUCA: N genes and S signals; dag: its
  nodes): the entity's own features beside the global ones, embedded by the
  group's linear map;
* one global token: the slots of no entity (LUCA: budget left, phase, task
  codes; the graph worlds: the budget left);
* ``layers`` pre-norm transformer blocks: self-attention across all tokens
  (no positions, so permuting a group's entities permutes its tokens), then a
  per-token MLP;
* per entity, its group's head scores the entity's actions (LUCA's gene: 3
  experiments, 2 diagnoses, 3 rescues; a dag node: intervening on it), plus a
  linear path from the entity's own features (the flat MLP's lesson: much of
  a good policy is one input to one logit, such as "measure what the task
  still needs"); the global token with each group's mean token scores the
  world's other actions (LUCA's reveal, the analyst's answers and end; a
  graph's submission) and the value.

The logits are put back in the flat action order, so the network is a drop-in
for the PPO's MLP (:func:`luca_gym.agents.ppo.apply`): same masked
categorical, same loss. Its weights do not depend on the number of entities,
only on the layout's :meth:`~TokenLayout.signature` (the global token's
width, and each group's features and actions per entity); the layout is a
static field, and :func:`rebind` puts the same weights on another size's
layout of the same signature. LUCA's is the same at every N, so one network
plays every organism size; a graph node's features are its row of the n x n
evidence matrix, so there the signature, and the weights, are one n's.

Attention is quadratic in the tokens (LUCA: N + S + 1) and far dearer than
the MLP on a CPU: PPO with the default sizes (width 32, 2 blocks, 4 heads)
ran 789 steps/s on LUCA at N=20 on 2 shared cores
(``benchmarks/entity_attention.py``).

Equinox rather than flax: an equinox module is a plain pytree of arrays, so
the PPO's ``jax.grad``, ``optax`` and ``jax.jit`` over its weights work
unchanged, and a checkpoint is the same flat npz of named leaves (named by
the fields below, not by the class, so a checkpoint does not depend on the
module's or the class's name).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.validate import short_repr

HEAD_SCALE = 0.01  # the heads start near 0, so the first policy is near uniform over the legal actions


class TokenLayout:
    """Which observation slots and flat actions belong to which entity (hashable,
    compared by value: a static field of :class:`EntityAttentionNetwork`).

    Attributes:
        global_obs: int32 (G,) observation slots read by the global token.
        global_actions: int32 (A0,) flat actions scored from the global token.
        groups: ``((name, obs int32 (M, F), actions int32 (M, A)), ...)``:
            one entry per kind of entity (LUCA: "gene" and "signal"; the
            graph worlds: "node"), row i of its tables its entity i: F
            features and A actions each, M entities at this size.
        observation_size: D. num_actions: K. inverse: int32 (K,) where each
            flat action's logit lies in the concatenation [global, group 0
            rows, group 1 rows, ...].

    Raises ValueError unless every observation slot 0..D-1 and every flat
    action 0..K-1 appears exactly once.
    """

    def __init__(self, global_obs, global_actions, groups):
        def table(x, name, ndim):
            x = np.asarray(x)
            if x.ndim != ndim or not np.issubdtype(x.dtype, np.integer) or (x.size and x.min() < 0):
                raise ValueError(f"token_layout: {name} {short_repr(x)} not allowed; non-negative integers of {ndim} dimensions")
            return x.astype(np.int32)

        self.global_obs = table(global_obs, "global_obs", 1)
        self.global_actions = table(global_actions, "global_actions", 1)
        try:
            self.groups = tuple((str(name), table(obs, f"{name} obs", 2), table(actions, f"{name} actions", 2))
                                for name, obs, actions in groups)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"token_layout: groups not allowed ({exc}); (name, obs (M, F), actions (M, A)) triples") from None
        for name, obs, actions in self.groups:
            if obs.shape[0] != actions.shape[0]:
                raise ValueError(f"token_layout: group {name!r} has {obs.shape[0]} rows of features, {actions.shape[0]} of actions")
        order = np.concatenate([self.global_actions] + [a.ravel() for _, _, a in self.groups])
        self.num_actions = order.size
        if not np.array_equal(np.sort(order), np.arange(order.size)):
            raise ValueError(f"token_layout: the action tables must hold each flat action 0..{order.size - 1} exactly once")
        slots = np.concatenate([self.global_obs] + [o.ravel() for _, o, _ in self.groups])
        self.observation_size = slots.size
        if not np.array_equal(np.sort(slots), np.arange(slots.size)):
            raise ValueError(f"token_layout: the observation tables must hold each slot 0..{slots.size - 1} of the "
                             "vector exactly once")
        self.inverse = np.argsort(order).astype(np.int32)
        self._key = (self.signature(), tuple(x.tobytes() for x in (self.global_obs, self.global_actions, slots, order)),
                     tuple(o.shape[0] for _, o, _ in self.groups))

    @classmethod
    def of(cls, codec) -> "TokenLayout":
        """The layout of a flat codec that has ``token_layout()`` (ValueError
        naming the codec otherwise); cached per codec."""
        if not callable(getattr(codec, "token_layout", None)):
            world = getattr(codec, "world", short_repr(codec))
            raise ValueError(f"network: the entity network needs a flat codec with token_layout() (which slots and "
                             f"actions belong to each entity); the codec of world {world!r} has none; use network='mlp'")
        return _layout_of(codec)

    def signature(self) -> tuple:
        """What the weights depend on: (G, A0, ((name, F, A), ...)); LUCA's is the same at every N."""
        return (self.global_obs.size, self.global_actions.size,
                tuple((name, obs.shape[1], actions.shape[1]) for name, obs, actions in self.groups))

    def sizes(self) -> dict:
        """{group name: entities} of this instance size (LUCA: {"gene": N, "signal": S})."""
        return {name: obs.shape[0] for name, obs, _ in self.groups}

    def __eq__(self, other):
        return isinstance(other, TokenLayout) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"TokenLayout({self.sizes()}, signature={self.signature()})"


@functools.lru_cache(maxsize=64)
def _layout_of(codec) -> TokenLayout:
    spec = codec.token_layout()
    try:
        return TokenLayout(spec["global_obs"], spec["global_actions"], spec["groups"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"token_layout: {type(codec).__name__}.token_layout() returned {short_repr(spec)} ({exc}); "
                         "a dict with global_obs, global_actions and groups") from None


class _Block(eqx.Module):
    """A pre-norm transformer block over tokens (T, width): multi-head
    self-attention, then a per-token MLP, each added back."""

    norm1: eqx.nn.LayerNorm
    qkv: eqx.nn.Linear
    out: eqx.nn.Linear
    norm2: eqx.nn.LayerNorm
    mlp1: eqx.nn.Linear
    mlp2: eqx.nn.Linear
    heads: int = eqx.field(static=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        t, width = x.shape
        q, k, v = jnp.split(jax.vmap(self.qkv)(jax.vmap(self.norm1)(x)), 3, axis=-1)
        q, k, v = (y.reshape(t, self.heads, width // self.heads) for y in (q, k, v))
        scores = jnp.einsum("thd,shd->hts", q, k) / np.sqrt(width // self.heads)
        mixed = jnp.einsum("hts,shd->thd", jax.nn.softmax(scores, axis=-1), v).reshape(t, width)
        x = x + jax.vmap(self.out)(mixed)
        return x + jax.vmap(self.mlp2)(jax.nn.gelu(jax.vmap(self.mlp1)(jax.vmap(self.norm2)(x))))


class EntityAttentionNetwork(eqx.Module):
    """The actor-critic over tokens (see the module doc). Build one with
    :func:`init`; call it on a batch: ``network(obs float32 (..., D))`` ->
    (logits float32 (..., K) in the flat action order, unmasked; value
    float32 (...)).

    Every leaf is a float32 array (the weights); ``layout`` is static."""

    global_embed: eqx.nn.Linear
    group_embeds: tuple
    blocks: tuple
    norm: eqx.nn.LayerNorm
    global_head: eqx.nn.Linear
    global_skip: eqx.nn.Linear
    group_heads: tuple
    group_skips: tuple
    value_hidden: eqx.nn.Linear
    value_out: eqx.nn.Linear
    layout: TokenLayout = eqx.field(static=True)

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch = obs.shape[:-1]
        logits, value = jax.vmap(self.single)(obs.reshape(-1, obs.shape[-1]))
        return logits.reshape(batch + logits.shape[-1:]), value.reshape(batch)

    def single(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(logits float32 (K,), value float32 ()) of one observation float32 (D,)."""
        lay = self.layout
        g = obs[lay.global_obs]
        features = [obs[slots] for _, slots, _ in lay.groups]
        tokens = [self.global_embed(g)[None]]
        for embed, x in zip(self.group_embeds, features):
            both = jnp.concatenate([x, jnp.broadcast_to(g, (x.shape[0], g.shape[0]))], axis=1)
            tokens.append(jax.vmap(embed)(both))
        h = jnp.concatenate(tokens)
        for block in self.blocks:
            h = block(h)
        h = jax.vmap(self.norm)(h)
        ends = np.cumsum([1] + [x.shape[0] for x in features])
        parts = [h[a:b] for a, b in zip(ends[:-1], ends[1:])]
        # Mean, not sum: a pooled token keeps its scale at every size (an empty group pools to 0).
        pooled = jnp.concatenate([h[0]] + [p.mean(0) if p.shape[0] else jnp.zeros(h.shape[1]) for p in parts])
        logits = [self.global_head(pooled) + self.global_skip(g)]
        for head, skip, p, x in zip(self.group_heads, self.group_skips, parts, features):
            logits.append((jax.vmap(head)(p) + jax.vmap(skip)(x)).reshape(-1))
        value = self.value_out(jax.nn.gelu(self.value_hidden(pooled)))[0]
        return jnp.concatenate(logits)[lay.inverse], value


def init(key: jax.Array, layout: TokenLayout, width: int = 64, layers: int = 2, heads: int = 4) -> EntityAttentionNetwork:
    """A fresh :class:`EntityAttentionNetwork` for ``layout``'s signature (equinox's
    default initialisation; heads scaled by :data:`HEAD_SCALE`, linear paths
    zero, so the first policy is near uniform over the legal actions)."""
    if not isinstance(layout, TokenLayout):
        raise ValueError(f"layout: {short_repr(layout)} is not a TokenLayout; use TokenLayout.of(codec)")
    if width % heads:
        raise ValueError(f"heads: {heads} does not divide the width {width}; allowed a divisor of it")
    n_global, n_global_actions, groups = layout.signature()
    keys = iter(jax.random.split(key, 8 + 2 * len(groups) + 4 * layers))

    def linear(a, b, scale=1.0, bias=True):
        lin = eqx.nn.Linear(a, b, use_bias=bias, key=next(keys))
        lin = eqx.tree_at(lambda m: m.weight, lin, lin.weight * scale)
        return eqx.tree_at(lambda m: m.bias, lin, lin.bias * scale) if bias else lin

    pooled = width * (1 + len(groups))
    blocks = tuple(
        _Block(eqx.nn.LayerNorm(width), linear(width, 3 * width), linear(width, width), eqx.nn.LayerNorm(width),
               linear(width, 2 * width), linear(2 * width, width), heads)
        for _ in range(layers)
    )
    return EntityAttentionNetwork(
        global_embed=linear(n_global, width),
        group_embeds=tuple(linear(f + n_global, width) for _, f, _ in groups),
        blocks=blocks,
        norm=eqx.nn.LayerNorm(width),
        global_head=linear(pooled, n_global_actions, HEAD_SCALE),
        global_skip=linear(n_global, n_global_actions, 0.0, bias=False),
        group_heads=tuple(linear(width, a, HEAD_SCALE) for _, _, a in groups),
        group_skips=tuple(linear(f, a, 0.0, bias=False) for _, f, a in groups),
        value_hidden=linear(pooled, width),
        value_out=linear(width, 1),
        layout=layout,
    )


def rebind(network: EntityAttentionNetwork, layout: TokenLayout) -> EntityAttentionNetwork:
    """The same weights on another instance size's ``layout`` (ValueError
    naming both if its groups or feature sizes differ from the network's)."""
    if not isinstance(network, EntityAttentionNetwork):
        raise ValueError(f"network: {short_repr(network)} is not a EntityAttentionNetwork")
    if not isinstance(layout, TokenLayout):
        raise ValueError(f"layout: {short_repr(layout)} is not a TokenLayout; use TokenLayout.of(codec)")
    if layout.signature() != network.layout.signature():
        raise ValueError(f"layout: signature {layout.signature()} (global slots, global actions, (group, features, "
                         f"actions)...) differs from the network's {network.layout.signature()}; the entity network's "
                         "weights act on any number of entities of the same kinds, not on other features")
    return replace(network, layout=layout)
