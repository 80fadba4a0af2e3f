"""PPO in pure JAX on any world's flat env (:mod:`luca_gym.functional`): an
actor-critic over the flat observation vector (``network="mlp"``, one
instance size; or ``network="entity"``,
:mod:`luca_gym.agents.entity_attention`, attention over one token per entity
of the world's token layout -- LUCA's genes and signals, a graph's nodes --
the same weights for any number of entities of the same features, LUCA's at
every N; or ``network="recurrent"``, :mod:`luca_gym.agents.recurrent`, a GRU
carrying a memory through each session, for observations that leave the
history to the learner), a masked categorical over the K flat actions, GAE,
the clipped objective with an entropy bonus and a value loss, Adam with
gradient clipping (optax).

One call of :func:`update` is one jitted program: a rollout of ``num_envs x
num_steps`` steps (autoreset on the pool's instances), GAE, then ``epochs`` passes
of ``minibatches`` minibatches. :func:`train` calls it in a Python loop for
progress reporting, and writes a run folder:

* ``config.json`` -- the :class:`PPOConfig` and the network's sizes;
* ``params.npz`` -- the network weights (``actor/0/w``, ``actor/0/b``, ...,
  ``actor_linear/w``, ``critic/0/w``, ...; an entity network's
  ``blocks/0/qkv/weight``, ...);
* ``learning_curve.csv`` / ``.png`` -- per update: env steps, wall seconds,
  mean episode return and mean headline score (LUCA's composite) over the
  episodes that ended;
* ``summary.json`` -- what :func:`train` returns.

``devices`` > 1 runs the same program data-parallel: the envs, their
rollouts and every per-env array are split over that many local devices
along one mesh axis (``jax.sharding``, :func:`luca_gym.functional.env_sharding`), the weights
and Adam's state replicated; XLA inserts the cross-device reductions of
the loss's means and gradients. On several hosts, each process calls
``jax.distributed.initialize()`` first and ``devices`` counts its local
ones (docs/guides/training.md, "Several devices").

A run stopped before its first update (Ctrl-C, an error) leaves no run folder
it created (:func:`remove_unfinished_run`); one stopped later keeps its curve.

:func:`load` turns a run folder into a :class:`~luca_gym.agents.FlatPolicy`
(greedy: the legal action of highest logit) for the evaluation harness; an
entity network's checkpoint plays sessions of any size of the same token
layout signature (LUCA's: any N) (:func:`bind`).
Training instances come from seeds ``pool_start`` (10_000) up, disjoint from
the evaluation seeds 0-19.

One module, as purejaxrl writes PPO, because the algorithm is read top to
bottom as one piece: its config, the actor-critic's apply, the jitted
update (rollout, GAE, loss, minibatches) and the training loop around it,
then saving and loading what it trained; the networks beyond the MLP
(:mod:`~luca_gym.agents.entity_attention`, :mod:`~luca_gym.agents.recurrent`) and
the flat env it runs on (:mod:`luca_gym.functional`) live apart.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import time
import zipfile
from dataclasses import dataclass
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from luca_gym import __version__, worlds
from luca_gym import functional as F
from luca_gym.agents import entity_attention, recurrent
from luca_gym.agents.base import FlatPolicy
from luca_gym.protocol import LEGACY_WORLD
from luca_gym.validate import check_bool, check_positive_int, check_seed, short_repr

NETWORKS = ("mlp", "entity", "recurrent")  # PPOConfig.network: over the whole vector, one token per entity, a GRU
# A network's former name -> its name: run folders written before the rename store "pergene", and it is still taken.
FORMER_NETWORK_NAMES = {"pergene": "entity"}
MASKED_LOGIT = -1e9  # a masked action's logit: probability exactly 0 in float32, and no NaN from -inf
CONFIG_FILE, PARAMS_FILE, SUMMARY_FILE = "config.json", "params.npz", "summary.json"
CURVE_CSV, CURVE_PNG = "learning_curve.csv", "learning_curve.png"
def curve_fields(headline: str = "score") -> tuple[str, ...]:
    """The learning curve's columns for a world whose headline score is ``headline``."""
    return ("update", "env_steps", "wall_s", "episodes", "mean_return", f"mean_{headline}", "mean_length",
            "policy_loss", "value_loss", "entropy", "approx_kl")
FORMAT = 1


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class CheckpointError(ValueError):
    """A run folder that cannot be loaded (names the file and the problem)."""


# Hyperparameter names: any other keyword of PPOConfig is a setting of the world's flat codec.
_WORLD_FIELDS = ("world", "settings")


@dataclass(frozen=True, init=False)
class PPOConfig:
    """Settings of a PPO run. Defaults after purejaxrl's PPO, except where
    runs on LUCA's easy healthy N=20 (1024 envs, training composite) said otherwise:

    * ``gamma`` 1: the return is the headline score and a session is bounded
      (LUCA's lasts at most budget + 7 calls). At 0.99 the discount made
      predicting right after each reveal the best the agent found (0.64 for
      12M steps): measuring first delays the reward.
    * ``learning_rate`` 1e-3, ``ent_coef`` 0.01: with the actor's linear path
      (:func:`init_network`) these reached 0.96 at 1.5M steps and 0.999 at
      2M; with 3e-4 and 0.05 the same network stayed at 0.78 after 3M (the
      policy near uniform over the experiments).

    ``PPOConfig(world="luca", tier="easy", n_genes=20, steps=...)``: a keyword
    that is not a hyperparameter below is a setting of the world's flat codec
    (:func:`luca_gym.functional.make_env`); the settings are completed with
    the codec factory's defaults and read back as attributes (``config.tier``).

    Attributes:
        world: the world (registry name) with a flat codec; required (the
            first argument: ``PPOConfig("dag", {"n_nodes": 5})``).
        settings: the codec's settings, sorted ``(name, value)`` pairs (LUCA:
            tier, n_genes, mode, budget, analyst, ...; ``budget`` None: the
            paper's N + S + 8).
        steps: env steps in all; a run makes steps // (num_envs x num_steps)
            whole updates, so it runs ``steps`` rounded down to a multiple of
            num_envs x num_steps (:func:`plan` says how many).
        num_envs: envs stepped side by side. num_steps: steps per env per update.
        epochs: passes over each update's batch. minibatches: per pass.
        learning_rate: Adam's, annealed linearly to 0 over the run's updates
            when ``anneal_lr``: ``steps`` is both the run's length and the
            schedule's horizon (a longer run anneals more slowly).
        gamma, gae_lambda: discount and GAE parameter.
        clip_eps: PPO's ratio clip (also the value clip).
        ent_coef, vf_coef: entropy bonus and value-loss weights.
        max_grad_norm: global gradient-norm clip.
        hidden: hidden layer widths of the actor and of the critic (tanh;
            network "mlp").
        network: "mlp" (:func:`init_network`: over the whole vector, so tied
            to the codec's size), "entity"
            (:mod:`luca_gym.agents.entity_attention`: attention over one
            token per entity, LUCA's genes and signals, a graph's nodes; the
            same weights act at every size whose entities have the same
            features, LUCA's at every N; the world's codec must have
            ``token_layout()``) or "recurrent" (below). "pergene", the
            entity network's former name (:data:`FORMER_NETWORK_NAMES`),
            reads as "entity": a config or run folder that says it loads as
            the entity network.
        token_width, attention_layers, attention_heads: the entity
            network's token width, transformer blocks and attention heads
            (network "entity"; the heads divide the width).
        memory_width: the recurrent network's memory (GRU) width (network
            "recurrent", which needs a codec whose observation leaves the
            history to the learner: the graph worlds' ``observation="raw"``;
            its minibatches are sets of whole env trajectories, so they
            divide ``num_envs``).
        devices: local devices the envs are split over (data-parallel, one
            mesh axis over the envs); it divides ``num_envs``.
        pool_size, pool_start: training instances are seeds pool_start ..
            pool_start + pool_size - 1 (pool_start >= 20: never the
            evaluation seeds 0-19).
        seed: the run's PRNG seed.
    """

    world: str
    settings: tuple = ()
    steps: int = 5_000_000
    num_envs: int = 1024
    num_steps: int = 32
    epochs: int = 4
    minibatches: int = 8
    learning_rate: float = 1e-3
    anneal_lr: bool = True
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: tuple[int, ...] = (64, 64)
    network: str = "mlp"
    token_width: int = 32
    attention_layers: int = 2
    attention_heads: int = 4
    memory_width: int = 128
    devices: int = 1
    pool_size: int = F.DEFAULT_POOL_SIZE
    pool_start: int = F.TRAINING_SEED_START
    seed: int = 0

    def __init__(self, world: str, settings=(), **kwargs):
        hyper = {f.name: f.default for f in dataclasses.fields(PPOConfig) if f.name not in _WORLD_FIELDS}
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in hyper}
        if isinstance(given.get("network"), str):
            given["network"] = FORMER_NETWORK_NAMES.get(given["network"], given["network"])
        try:
            settings = {**dict(settings), **kwargs}
        except (TypeError, ValueError):
            raise ValueError(f"settings: {short_repr(settings)} not allowed; (name, value) pairs or a dict") from None
        if not isinstance(world, str):
            raise ValueError(f"world: {short_repr(world)} not allowed; a registered world's name")
        codec = worlds.get(world).make_flat(**settings)  # checks the world's settings (ValueError naming one)
        settings = {**_factory_defaults(worlds.get(world)), **settings}
        object.__setattr__(self, "world", world)
        object.__setattr__(self, "settings", tuple(sorted(settings.items())))
        for name, default in hyper.items():
            object.__setattr__(self, name, given.get(name, default))
        self._check(codec)

    def __getattr__(self, name: str):
        # Only reached for names that are not fields: the world's settings (config.tier).
        if name.startswith("__"):
            raise AttributeError(name)
        for key, value in object.__getattribute__(self, "settings"):
            if key == name:
                return value
        raise AttributeError(f"PPOConfig has no field or {self.world} setting {name!r}")

    def _check(self, codec) -> None:
        for name in ("steps", "num_envs", "num_steps", "epochs", "minibatches", "pool_size"):
            check_positive_int(getattr(self, name), name)
        if self.steps < self.batch_size:
            raise ValueError(f"steps: {self.steps} is less than one update (num_envs x num_steps = {self.batch_size})")
        if self.batch_size % self.minibatches:
            raise ValueError(f"minibatches: {self.minibatches} does not divide the batch of {self.batch_size} steps "
                             f"(num_envs x num_steps); allowed a divisor of it")
        for name, low, high in (("learning_rate", 0, np.inf), ("gamma", 0, 1), ("gae_lambda", 0, 1), ("clip_eps", 0, np.inf),
                                ("ent_coef", 0, np.inf), ("vf_coef", 0, np.inf), ("max_grad_norm", 0, np.inf)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low <= value <= high) or not np.isfinite(value):
                raise ValueError(f"{name}: {short_repr(value)} not allowed; a number in [{low}, {high}]")
        if not isinstance(self.hidden, tuple) or not self.hidden or not all(_is_int(h) and h > 0 for h in self.hidden):
            raise ValueError(f"hidden: {short_repr(self.hidden)} not allowed; a non-empty tuple of positive widths")
        if not isinstance(self.network, str) or self.network not in NETWORKS:
            raise ValueError(f"network: {short_repr(self.network)} not allowed; one of {', '.join(map(repr, NETWORKS))}")
        for name in ("token_width", "attention_layers", "attention_heads"):
            check_positive_int(getattr(self, name), name)
        if self.token_width % self.attention_heads:
            raise ValueError(f"attention_heads: {self.attention_heads} does not divide token_width {self.token_width}; "
                             "allowed a divisor of it")
        if self.network == "entity":
            entity_attention.TokenLayout.of(codec)  # ValueError naming the world if its codec has no token layout
        for name in ("memory_width", "devices"):
            check_positive_int(getattr(self, name), name)
        if self.network == "recurrent":
            if not getattr(codec, "raw", False):
                raise ValueError(f"network: 'recurrent' remembers what the observation leaves out, and {codec.describe()}'s "
                                 "observation carries the session's whole state; allowed with observation='raw' (the graph "
                                 "worlds), or use network 'mlp'")
            if self.num_envs % self.minibatches:
                raise ValueError(f"minibatches: {self.minibatches} does not divide num_envs {self.num_envs} (the recurrent "
                                 "network's minibatches are whole env trajectories); allowed a divisor of it")
        if self.num_envs % self.devices:
            raise ValueError(f"devices: {self.devices} does not divide num_envs {self.num_envs} (each device steps an "
                             "equal share of the envs); allowed a divisor of it")
        if not _is_int(self.pool_start) or self.pool_start < len(F.EVAL_SEEDS):
            raise ValueError(f"pool_start: {short_repr(self.pool_start)} would train on the evaluation seeds "
                             f"0-{len(F.EVAL_SEEDS) - 1}; allowed an integer >= {len(F.EVAL_SEEDS)}")
        check_bool(self.anneal_lr, "anneal_lr")
        check_seed(self.seed)

    @property
    def batch_size(self) -> int:
        """Steps per update: num_envs x num_steps."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.steps // self.batch_size

    def make_env(self) -> F.FlatEnv:
        """The flat codec this run trains on (no shaping by default: the return is the headline score)."""
        return F.make_env(world=self.world, **dict(self.settings))

    def to_json(self) -> dict:
        """The config as a JSON-able dict (``config.json``'s ``config``): the
        world, its codec's settings as a dict, and every hyperparameter
        (``hidden`` as a list); :meth:`from_json` reads it back."""
        hyper = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _WORLD_FIELDS}
        return {"world": self.world, "settings": dict(self.settings), **hyper, "hidden": list(self.hidden)}

    @classmethod
    def from_json(cls, data: dict) -> "PPOConfig":
        """Inverse of :meth:`to_json` (ValueError on an unknown or bad field). A
        config written before worlds (LUCA's ``tier``, ``mode``, ``n_genes``,
        ``budget`` and ``analyst`` at the top level) reads as LUCA's
        (:func:`top_level_settings`); one that names the network "pergene"
        reads as the entity network (:data:`FORMER_NETWORK_NAMES`)."""
        data = dict(data)
        hyper = {f.name for f in dataclasses.fields(cls)} - set(_WORLD_FIELDS)
        world, settings = data.pop("world", LEGACY_WORLD), dict(data.pop("settings", {}))
        if "world" not in data and not settings:  # format 1: the world's settings at the top level
            settings = top_level_settings(worlds.get(world), data)
            data = {k: v for k, v in data.items() if k not in settings}
        unknown = set(data) - hyper
        if unknown:
            raise ValueError(f"config: unknown fields {', '.join(sorted(unknown))}")
        return cls(world, settings, **{**data, "hidden": tuple(data.get("hidden", cls.hidden))})


def _factory_parameters(world) -> dict:
    """The named parameters of ``world``'s flat codec factory (``inspect.Parameter`` by name)."""
    import inspect

    from luca_gym.protocol import load

    return {name: p for name, p in inspect.signature(load(world.flat)).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _factory_defaults(world) -> dict:
    """The keyword defaults of ``world``'s flat codec factory."""
    return {name: p.default for name, p in _factory_parameters(world).items() if p.default is not p.empty}


def top_level_settings(world, data: dict) -> dict:
    """The entries of a run's config ``data`` that are settings of
    ``world``'s flat codec (its factory's parameters): a config written before
    configs kept the codec's settings apart (a PPO run's of format 1, an SB3
    run's: LUCA's ``tier``, ``mode``, ``n_genes``, ``budget``, ``analyst``)
    holds them at its top level, beside the run's own fields."""
    return {name: data[name] for name in _factory_parameters(world) if name in data}


# -- the network ------------------------------------------------------------------
def init_network(key: jax.Array, observation_size: int, num_actions: int, hidden: tuple[int, ...]) -> dict:
    """The actor-critic's weights. Returns {"actor": [{"w": float32 (in, out),
    "b": float32 (out,)}, ...], "actor_linear": {"w": float32 (D, K)},
    "critic": [...]}.

    The actor is a tanh MLP plus a linear map from the observation straight to
    the logits. Much of a good policy here is one input to one logit (the
    observation marks the single experiments the current task still needs,
    in the action layout's own order), which a narrow tanh layer passes only
    with difficulty: on easy healthy N=20 the 64 x 64 MLP alone stayed at a
    training composite of 0.77 after 3M steps; with the linear path it
    reached 0.96 at 1.5M. Orthogonal init (gain sqrt 2 in hidden layers, 0.01
    on the actor's head, 1 on the critic's) and a zero linear map, so the
    first policy is near uniform over the legal actions.
    """

    def mlp(key, out_size, head_gain):
        sizes = (observation_size, *hidden, out_size)
        gains = [np.sqrt(2.0)] * len(hidden) + [head_gain]
        keys = jax.random.split(key, len(gains))
        return [{"w": jax.nn.initializers.orthogonal(g)(k, (a, b), jnp.float32), "b": jnp.zeros(b, jnp.float32)}
                for k, a, b, g in zip(keys, sizes[:-1], sizes[1:], gains)]

    actor_key, critic_key = jax.random.split(key)
    return {"actor": mlp(actor_key, num_actions, 0.01),
            "actor_linear": {"w": jnp.zeros((observation_size, num_actions), jnp.float32)},
            "critic": mlp(critic_key, 1, 1.0)}


def _mlp(layers: list, x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def make_network(key: jax.Array, config: PPOConfig, env: F.FlatEnv):
    """A fresh network of ``config.network`` for ``env``: the MLP's weights
    (:func:`init_network`, a dict), an
    :class:`~luca_gym.agents.entity_attention.EntityAttentionNetwork` on
    ``env``'s token layout or a recurrent network."""
    if config.network == "entity":
        return entity_attention.init(key, entity_attention.TokenLayout.of(env), config.token_width,
                                     config.attention_layers, config.attention_heads)
    if config.network == "recurrent":
        return recurrent.init(key, env.observation_size, env.num_actions, config.memory_width)
    return init_network(key, env.observation_size, env.num_actions, config.hidden)


def bind(network, env: F.FlatEnv, trained_on: str = "its training codec"):
    """``network`` for sessions of ``env``'s size: an entity network's same
    weights on ``env``'s token layout (:func:`luca_gym.agents.entity_attention.rebind`);
    an MLP's weights unchanged where ``env`` has its sizes, else ValueError
    naming both (an MLP is tied to one size; ``network="entity"`` acts at
    every size of the same token layout signature)."""
    if isinstance(network, entity_attention.EntityAttentionNetwork):
        return entity_attention.rebind(network, entity_attention.TokenLayout.of(env))
    size, actions = _sizes(network)
    if (size, actions) != (env.observation_size, env.num_actions):
        raise ValueError(f"network: an MLP trained on {trained_on} (observation size {size}, {actions} actions) cannot "
                         f"act on {env.describe()} (observation size {env.observation_size}, {env.num_actions} actions); "
                         "an MLP acts at one size only: train with network='entity' to act at every size where the world's "
                         "entities keep their features (LUCA: every N)")
    return network


def _sizes(network) -> tuple[int, int]:
    """(D, K) of an MLP's or a recurrent network's weights."""
    if isinstance(network, recurrent.RecurrentNetwork):
        return network.sizes
    return tuple(network["actor_linear"]["w"].shape)


def is_recurrent(network) -> bool:
    """Whether ``network`` carries a memory (:mod:`luca_gym.agents.recurrent`)."""
    return isinstance(network, recurrent.RecurrentNetwork)


def initial_memory(network, batch: int) -> jax.Array:
    """float32 (batch, H): a recurrent network's memory at a session's start
    (zeros); (batch, 0) for a network without memory."""
    return recurrent.initial_memory(network, batch) if is_recurrent(network) else jnp.zeros((batch, 0), jnp.float32)


def apply_step(network, memory: jax.Array, obs: jax.Array, mask: jax.Array, start: jax.Array):
    """One step of any network with its memory: (masked logits float32 (B,
    K), value float32 (B,), memory). ``memory`` float32 (B, H)
    (:func:`initial_memory`), ``start`` bool (B,) (a session's first
    observation: the memory starts from zero there). Without memory it is
    :func:`apply`, the memory passed through."""
    if is_recurrent(network):
        logits, value, memory = recurrent.step(network, memory, obs, start)
        return jnp.where(mask, logits, MASKED_LOGIT), value, memory
    logits, value = apply(network, obs, mask)
    return logits, value, memory


def apply(network, obs: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(masked logits float32 (B, K), value float32 (B,)) for observations
    float32 (B, D) and masks bool (B, K); a masked action's logit is
    :data:`MASKED_LOGIT`. ``network`` is the MLP's weights or an entity
    network (a recurrent one acts through :func:`apply_step`)."""
    if is_recurrent(network):
        raise ValueError("network: a recurrent network acts with its memory; use apply_step")
    if isinstance(network, entity_attention.EntityAttentionNetwork):
        logits, value = network(obs)
        return jnp.where(mask, logits, MASKED_LOGIT), value
    logits = _mlp(network["actor"], obs) + obs @ network["actor_linear"]["w"]
    return jnp.where(mask, logits, MASKED_LOGIT), _mlp(network["critic"], obs)[..., 0]


def sample_policy(network: dict, key: jax.Array, obs: jax.Array, mask: jax.Array) -> jax.Array:
    """A :func:`~luca_gym.functional.flat_rollout` policy: an action int32 (B,)
    sampled from the masked categorical."""
    return jax.random.categorical(key, apply(network, obs, mask)[0]).astype(jnp.int32)


def greedy_policy(network: dict, key: jax.Array, obs: jax.Array, mask: jax.Array) -> jax.Array:
    """A :func:`~luca_gym.functional.flat_rollout` policy: the legal action of
    highest logit, int32 (B,) (``key`` is ignored)."""
    return jnp.argmax(apply(network, obs, mask)[0], axis=-1).astype(jnp.int32)


# -- the update -------------------------------------------------------------------
@partial(jax.tree_util.register_dataclass, data_fields=["network", "opt_state", "state", "obs", "mask", "key", "memory",
                                                    "start"], meta_fields=[])
@dataclass(frozen=True)
class Runner:
    """Everything an update carries to the next: the weights (the MLP's dict,
    an entity or a recurrent network), Adam's state, the envs (FlatState
    batched (B,)), their observation float32 (B, D) and mask bool (B, K),
    the PRNG key, the network's memory float32 (B, H) ((B, 0) without one)
    and whether each observation is a session's first, bool (B,)."""

    network: dict | entity_attention.EntityAttentionNetwork | recurrent.RecurrentNetwork
    opt_state: optax.OptState
    state: F.FlatState
    obs: jax.Array
    mask: jax.Array
    key: jax.Array
    memory: jax.Array
    start: jax.Array


def _optimizer(max_grad_norm) -> optax.GradientTransformation:
    # The learning rate is applied outside (a traced scalar), so changing it or
    # the schedule's length does not recompile the update.
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.scale_by_adam(eps=1e-5))


def hyperparameters(config: PPOConfig, learning_rate: float) -> dict:
    """The update's traced scalars (float32 ()): new values never recompile."""
    names = ("gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm")
    return {"learning_rate": jnp.float32(learning_rate), **{n: jnp.float32(getattr(config, n)) for n in names}}


@partial(jax.jit, static_argnames=("env", "num_envs"))
def _reset_envs(key, env, pool, num_envs):
    return jax.vmap(F.reset, in_axes=(0, None, None))(jax.random.split(key, num_envs), env, pool)


def init_runner(key: jax.Array, config: PPOConfig, env: F.FlatEnv, pool: F.Pool, sharding=None) -> Runner:
    """A fresh network, Adam state and ``config.num_envs`` opened envs (the
    envs' arrays placed over ``sharding``, :func:`luca_gym.functional.env_sharding`, if given)."""
    net_key, reset_key, run_key = jax.random.split(key, 3)
    network = make_network(net_key, config, env)
    state, obs, mask = _reset_envs(reset_key, env, pool, config.num_envs)
    memory, start = initial_memory(network, config.num_envs), jnp.ones(config.num_envs, bool)
    if sharding is not None:
        state, obs, mask, memory, start = jax.device_put((state, obs, mask, memory, start), sharding)
    return Runner(network, _optimizer(config.max_grad_norm).init(network), state, obs, mask, run_key, memory, start)


def gae(reward, value, done, last_value, gamma, gae_lambda) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates over a rollout: reward, value, done
    float32/bool (T, B), last_value (B,). Returns (advantages, value targets)
    float32 (T, B). An ended session bootstraps nothing (the next observation
    is a new session's)."""

    def back(carry, x):
        next_advantage, next_value = carry
        r, v, d = x
        live = 1.0 - d.astype(jnp.float32)
        delta = r + gamma * next_value * live - v
        advantage = delta + gamma * gae_lambda * live * next_advantage
        return (advantage, v), advantage

    _, advantages = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value), (reward, value, done), reverse=True)
    return advantages, advantages + value


def _loss(network, batch, hyper):
    if is_recurrent(network):  # whole trajectories (T, B): unroll again from each env's first memory
        logits, value = recurrent.unroll(network, batch["memory"], batch["obs"], batch["start"])
        logits = jnp.where(batch["mask"], logits, MASKED_LOGIT)
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        logits, value = flat(logits), flat(value)
        batch = {k: flat(batch[k]) for k in ("action", "log_prob", "value", "advantage", "target")}
    else:
        logits, value = apply(network, batch["obs"], batch["mask"])
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, batch["action"][:, None], axis=-1)[:, 0]
    entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1).mean()
    clip = hyper["clip_eps"]
    value_clipped = batch["value"] + jnp.clip(value - batch["value"], -clip, clip)
    value_loss = 0.5 * jnp.maximum((value - batch["target"]) ** 2, (value_clipped - batch["target"]) ** 2).mean()
    advantage = (batch["advantage"] - batch["advantage"].mean()) / (batch["advantage"].std() + 1e-8)
    log_ratio = log_prob - batch["log_prob"]
    ratio = jnp.exp(log_ratio)
    policy_loss = -jnp.minimum(ratio * advantage, jnp.clip(ratio, 1 - clip, 1 + clip) * advantage).mean()
    total = policy_loss + hyper["vf_coef"] * value_loss - hyper["ent_coef"] * entropy
    approx_kl = ((ratio - 1) - log_ratio).mean()
    return total, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy, "approx_kl": approx_kl}


@partial(jax.jit, static_argnames=("env", "num_steps", "epochs", "minibatches", "sharding"))
def update(runner: Runner, pool: F.Pool, hyper: dict, env: F.FlatEnv, num_steps: int, epochs: int, minibatches: int,
           sharding=None):
    """One PPO update as one program: collect ``num_steps`` steps of every env,
    GAE, then ``epochs`` x ``minibatches`` Adam steps on the clipped loss.
    A recurrent network's minibatches are sets of whole env trajectories,
    each unrolled again from the memory its env had at the rollout's start;
    any other network's are sets of steps.

    ``hyper`` holds the traced scalars (:func:`hyperparameters`).
    ``sharding`` (:func:`luca_gym.functional.env_sharding`; static) splits every per-env array
    over devices. Returns
    (runner, metrics) with metrics float32 (): ``episodes`` (sessions that
    ended in this rollout), ``mean_return``, ``mean_score`` (and
    ``mean_<headline>``),
    ``mean_length`` over them (NaN if none ended), and the loss terms averaged
    over the minibatches.
    """
    num_envs = runner.obs.shape[0]
    envs = (runner.state, runner.obs, runner.mask, runner.memory, runner.start)
    envs = F.split_envs(envs, sharding)

    def collect(carry, key):
        state, obs, mask, memory, start = carry
        act_key, step_key = jax.random.split(key)
        logits, value, memory = apply_step(runner.network, memory, obs, mask, start)
        action = jax.random.categorical(act_key, logits).astype(jnp.int32)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
        state, next_obs, next_mask, reward, done, info = jax.vmap(F.step, in_axes=(0, 0, 0, None, None))(
            jax.random.split(step_key, num_envs), state, action, env, pool
        )
        record = {"obs": obs, "mask": mask, "action": action, "log_prob": log_prob, "value": value, "reward": reward,
                  "done": done, "return": info["return"], "score": info["score"], "length": info["length"], "start": start}
        return F.split_envs((state, next_obs, next_mask, memory, done), sharding), F.split_envs(record, sharding)

    key, collect_key, shuffle_key = jax.random.split(runner.key, 3)
    (state, obs, mask, memory, start), rollout = jax.lax.scan(collect, envs, jax.random.split(collect_key, num_steps))
    _, last_value, _ = apply_step(runner.network, memory, obs, mask, start)
    advantage, target = gae(rollout["reward"], rollout["value"], rollout["done"], last_value, hyper["gamma"], hyper["gae_lambda"])
    fields = ("obs", "mask", "action", "log_prob", "value")
    batch = {**{k: rollout[k] for k in fields}, "advantage": advantage, "target": target}
    sequences = is_recurrent(runner.network)
    if sequences:  # env-major (B, T, ...) so that a minibatch is a set of envs; each env's memory before its first step
        batch = {**jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), {**batch, "start": rollout["start"]}),
                 "memory": envs[3]}
        size = num_envs
    else:
        batch = jax.tree_util.tree_map(lambda x: x.reshape((num_steps * num_envs,) + x.shape[2:]), batch)
        size = num_steps * num_envs
    optimizer = _optimizer(hyper["max_grad_norm"])

    def minibatch_step(carry, minibatch):
        network, opt_state = carry
        if sequences:  # back to time-major (T, B, ...) for the unroll
            minibatch = {k: v if k == "memory" else jnp.swapaxes(v, 0, 1) for k, v in minibatch.items()}
        grads, metrics = jax.grad(_loss, has_aux=True)(network, minibatch, hyper)
        updates, opt_state = optimizer.update(grads, opt_state, network)
        network = jax.tree_util.tree_map(lambda p, u: p - hyper["learning_rate"] * u, network, updates)
        return (network, opt_state), metrics

    def epoch(carry, key):
        order = jax.random.permutation(key, size)
        shuffled = jax.tree_util.tree_map(lambda x: x[order].reshape((minibatches, -1) + x.shape[1:]), batch)
        return jax.lax.scan(minibatch_step, carry, shuffled)

    (network, opt_state), losses = jax.lax.scan(epoch, (runner.network, runner.opt_state), jax.random.split(shuffle_key, epochs))
    metrics = F.episode_statistics(rollout["done"], rollout["return"], rollout["score"], rollout["length"], env.headline)
    metrics = {**metrics, **jax.tree_util.tree_map(jnp.mean, losses)}
    return Runner(network, opt_state, state, obs, mask, key, memory, start), metrics


# -- training ---------------------------------------------------------------------
def plan(config: PPOConfig) -> str:
    """One line saying what :func:`train` runs for ``config``: the env steps
    (whole updates, so ``steps`` rounded down), the learning rate's
    schedule, whose horizon is the run's length, and the entity network's
    sizes where it is the one."""
    run = config.num_updates * config.batch_size
    rounded = "" if run == config.steps else f" ({config.steps:,} rounded down to whole updates)"
    if config.anneal_lr:
        rate = (f"learning rate {config.learning_rate:g} annealed linearly to 0 over these {config.num_updates} updates "
                "(the step count sets both the run's length and the schedule's horizon)")
    else:
        rate = f"learning rate {config.learning_rate:g}, constant"
    network = {"mlp": "", "entity": (
        f"; the entity network (tokens of width {config.token_width}, {config.attention_layers} attention blocks of "
        f"{config.attention_heads} heads: the same weights act at every size of its token layout's signature)"),
        "recurrent": (f"; the recurrent network (a GRU memory of width {config.memory_width}, reset at each session's "
                      f"start; minibatches of {config.num_envs // config.minibatches} whole env trajectories)")}[config.network]
    devices = "" if config.devices == 1 else f"; the envs split over {config.devices} devices ({config.num_envs // config.devices} each)"
    return (f"{run:,} env steps = {config.num_updates} updates x {config.num_envs} envs x {config.num_steps} steps"
            f"{rounded}; {rate}{network}{devices}")


def network_fits(network, like) -> bool:
    """Whether ``network`` has the structure, shapes and dtypes of ``like``
    (e.g. :func:`make_network`'s for a config, or its ``jax.eval_shape``)."""
    try:
        if jax.tree_util.tree_structure(network) != jax.tree_util.tree_structure(like):
            return False
        want = [(tuple(x.shape), jnp.dtype(x.dtype)) for x in jax.tree_util.tree_leaves(like)]
        got = [(tuple(jnp.shape(x)), jnp.result_type(x)) for x in jax.tree_util.tree_leaves(network)]
    except TypeError:
        return False
    return want == got


def train(config: PPOConfig, out: str | None = None, progress: Callable[[dict], None] | None = None,
          network=None, started_from: str | None = None) -> dict:
    """Train PPO per ``config``; with ``out``, write the run folder (see the
    module doc; the learning curve grows one line per update, so an
    interrupted run keeps its curve).

    ``network`` starts the run from these weights instead of fresh ones (a
    warm start, e.g. :func:`luca_gym.agents.bc.clone`'s; the same structure
    and shapes as :func:`make_network` gives for ``config``, else ValueError);
    ``started_from`` (e.g. the run folder they came from) is recorded in the
    summary.

    ``progress`` is called after every update with that update's curve row
    (:func:`curve_fields` of the world's headline) plus ``updates`` (the total). Returns a summary
    dict: ``env_steps``, ``updates``, ``wall_s`` (all of it), ``setup_s``
    (pool generation, the first update's compile and run), ``steps_per_s``
    (after the first update), ``final_composite`` / ``final_return`` (the last
    update's means), ``out``; and ``network`` (the trained weights, not in
    summary.json).
    """
    if not isinstance(config, PPOConfig):
        raise ValueError(f"config: {short_repr(config)} is not a PPOConfig")
    created = out is not None and not os.path.isdir(out)
    try:
        return _train(config, out, progress, network, started_from)
    except BaseException:  # Ctrl-C (KeyboardInterrupt) included: a run stopped before its first update leaves no folder
        if created:
            remove_unfinished_run(out)
        raise


def remove_unfinished_run(out: str) -> bool:
    """Remove what a training run stopped before its first update (Ctrl-C,
    an error) left in run folder ``out``: a learning curve with no line past
    its header, then the folder itself if that leaves it empty. A curve with
    lines stays (an interrupted run keeps its curve), as does any other file.
    Returns whether the folder is gone."""
    curve = os.path.join(out, CURVE_CSV)
    try:
        with open(curve, encoding="utf-8") as f:
            empty = sum(1 for _ in f) <= 1
        if empty:
            os.remove(curve)
    except OSError:
        pass
    try:
        os.rmdir(out)  # only if empty
    except OSError:
        return not os.path.exists(out)
    return True


def _train(config: PPOConfig, out: str | None, progress, network, started_from) -> dict:
    """:func:`train`'s run (``config`` checked)."""
    started = time.perf_counter()
    if out is not None:
        os.makedirs(out, exist_ok=True)
    env = config.make_env()
    pool = F.make_pool(env, F.training_seeds(config.pool_size, config.pool_start))
    sharding = F.env_sharding(config.devices)
    if sharding is not None:  # the pool on every device once, not copied to them at each update
        from jax.sharding import NamedSharding, PartitionSpec

        pool = jax.device_put(pool, NamedSharding(sharding.mesh, PartitionSpec()))
    runner = init_runner(jax.random.PRNGKey(config.seed), config, env, pool, sharding)
    if network is not None:
        if not network_fits(network, runner.network):
            raise ValueError(f"network: not a network of this config ({config.network} on {env.describe()}, observation "
                             f"size {env.observation_size}, {env.num_actions} actions); allowed make_network's structure "
                             "and shapes")
        runner = dataclasses.replace(runner, network=network, opt_state=_optimizer(config.max_grad_norm).init(network))
    curve_file = open(os.path.join(out, CURVE_CSV), "w", newline="", encoding="utf-8") if out is not None else None
    try:
        writer = csv.DictWriter(curve_file, curve_fields(env.headline), extrasaction="ignore") if curve_file else None
        if writer:
            writer.writeheader()
        rows, first_done = [], None
        for u in range(config.num_updates):
            fraction = 1.0 - u / config.num_updates if config.anneal_lr else 1.0
            runner, metrics = update(runner, pool, hyperparameters(config, config.learning_rate * fraction), env,
                                     config.num_steps, config.epochs, config.minibatches, sharding)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            wall = time.perf_counter() - started
            first_done = wall if first_done is None else first_done
            row = {"update": u + 1, "env_steps": (u + 1) * config.batch_size, "wall_s": round(wall, 3), **metrics}
            row["episodes"] = int(row["episodes"])
            rows.append(row)
            if writer:
                writer.writerow(row)
                curve_file.flush()
            if progress:
                progress({**row, "updates": config.num_updates})
    finally:
        if curve_file:
            curve_file.close()
    wall = time.perf_counter() - started
    later = config.batch_size * (config.num_updates - 1)
    summary = {
        "algo": "ppo",
        "env_steps": config.num_updates * config.batch_size,
        "updates": config.num_updates,
        "wall_s": round(wall, 3),
        "setup_s": round(first_done, 3),
        "steps_per_s": round(later / (wall - first_done), 1) if later else None,
        "final_score": rows[-1]["mean_score"],
        f"final_{env.headline}": rows[-1]["mean_score"],
        "final_return": rows[-1]["mean_return"],
        "out": out,
    }
    if network is not None:
        summary["started_from"] = started_from or "given weights"
    if out is not None:
        save(out, config, runner.network, summary)
        plot_curve(rows, os.path.join(out, CURVE_PNG), title=f"PPO {config.world} {env.describe()}",
                   ylabel=f"mean {env.headline} of the sessions ended")
    return {**summary, "network": runner.network}


def save(out: str, config: PPOConfig, network: dict, summary: dict | None = None) -> None:
    """Write ``config.json``, ``params.npz`` (and ``summary.json``) into ``out``."""
    os.makedirs(out, exist_ok=True)
    env = config.make_env()
    meta = {"algo": "ppo", "format": FORMAT, "version": __version__, "observation_size": env.observation_size,
            "num_actions": env.num_actions, "config": config.to_json()}
    with open(os.path.join(out, CONFIG_FILE), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    arrays = {_leaf_name(path): np.asarray(leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(network)}
    np.savez(os.path.join(out, PARAMS_FILE), **arrays)
    if summary is not None:
        with open(os.path.join(out, SUMMARY_FILE), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)


def plot_curve(rows: list[dict], path: str, title: str = "PPO", baselines: dict | None = None,
               ylabel: str = "mean score of the sessions ended") -> None:
    """The mean headline score per update against env steps, as a PNG (the
    return is the same number: no shaping); ``baselines`` ({name: score})
    draws horizontal reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([r["env_steps"] for r in rows], float) / 1e6
    # The score column: mean_score in a run's rows, mean_<headline> (LUCA's mean_composite) in its CSV.
    column = "mean_score" if rows and "mean_score" in rows[0] else next(
        (k for k in (rows[0] if rows else {}) if k.startswith("mean_") and k not in ("mean_return", "mean_length")), "mean_score")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(steps, [r[column] for r in rows], color="black", label="PPO, training (sampled actions)")  # no baseline's colour
    from luca_gym.results.figures import agent_color, short_name

    for name, value in (baselines or {}).items():  # each baseline in its colour of every other figure
        ax.axhline(value, color=agent_color(name), linestyle=":", linewidth=1.2)
        ax.annotate(short_name(name), (steps[0] if steps.size else 0, value), fontsize=8, va="bottom", color=agent_color(name))
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- loading ----------------------------------------------------------------------
def load_network(path: str) -> tuple[PPOConfig, dict]:
    """(config, network) of a run folder; :class:`CheckpointError` names the
    file and the problem."""
    if not os.path.isdir(path):
        raise CheckpointError(f"{path}: no such run folder; write one with `luca-gym train --algo ppo --out {path}`")
    config_path, params_path = os.path.join(path, CONFIG_FILE), os.path.join(path, PARAMS_FILE)
    for file in (config_path, params_path):
        if not os.path.isfile(file):
            raise CheckpointError(f"{file}: missing; is {path} a PPO run folder?")
    try:
        with open(config_path, encoding="utf-8") as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or meta.get("algo") != "ppo" or meta.get("format") != FORMAT:
            raise ValueError(f"not a PPO checkpoint of format {FORMAT}")
        config = PPOConfig.from_json(meta["config"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{config_path}: corrupt ({exc})") from None
    env = config.make_env()
    expected = jax.eval_shape(lambda: make_network(jax.random.PRNGKey(0), config, env))
    paths, treedef = jax.tree_util.tree_flatten_with_path(expected)
    try:
        with np.load(params_path) as arrays:
            leaves = [np.asarray(arrays[_leaf_name(where)], np.float32) for where, _ in paths]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{params_path}: corrupt ({exc})") from None
    for (where, want), got in zip(paths, leaves):
        if got.shape != want.shape:
            raise CheckpointError(f"{params_path}: {_leaf_name(where)} has shape {got.shape}, the config's network needs {want.shape}")
    return config, jax.tree_util.tree_unflatten(treedef, [jnp.asarray(x) for x in leaves])


def _leaf_name(path) -> str:
    """A weight's name in params.npz, e.g. ``actor/0/w`` (an entity network's ``blocks/0/qkv/weight``)."""
    return "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


@jax.jit
def _greedy_one(network, vector, mask):
    return greedy_policy(network, None, vector[None], mask[None])[0]


@jax.jit
def _greedy_step(network, memory, vector, mask, start):
    logits, _, memory = apply_step(network, memory[None], vector[None], mask[None], jnp.asarray(start)[None])
    return jnp.argmax(logits[0]).astype(jnp.int32), memory[0]


@partial(jax.jit, static_argnames=("env", "num_steps"))
def play_greedy(network, env: F.FlatEnv, instances, num_steps: int) -> dict:
    """Each of a batch of ``env.instances`` (B leading) played once to its
    end by ``network`` acting greedily (the legal action of highest logit),
    its memory, if it has one, carried through the session from zero; at
    most ``num_steps`` actions (``env.max_calls`` plays every session to its
    end), no autoreset. Returns ``{"score": float32 (B,) (the headline),
    "return": float32 (B,), "actions": int32 (B,), "ended": bool (B,)}``,
    and under ``"scores"`` the codec's ``scores`` of each session where it
    has them (the graph worlds')."""
    state, obs, mask = jax.vmap(env.open)(instances)
    batch = obs.shape[0]

    def body(carry, _):
        state, obs, mask, memory, start, ended, total, actions = carry
        logits, _, memory = apply_step(network, memory, obs, mask, start)
        action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        new, obs_n, mask_n, reward, terminated, truncated, _ = jax.vmap(env.step)(state, action)
        live = ~ended  # an ended session stays as it ended
        pick = lambda a, b: jnp.where(live.reshape(live.shape + (1,) * (a.ndim - 1)), a, b)  # noqa: E731
        return (jax.tree_util.tree_map(pick, new, state), pick(obs_n, obs), pick(mask_n, mask), memory,
                jnp.zeros(batch, bool), ended | terminated | truncated, total + jnp.where(live, reward, 0.0),
                actions + live), None

    carry = (state, obs, mask, initial_memory(network, batch), jnp.ones(batch, bool), jnp.zeros(batch, bool),
             jnp.zeros(batch), jnp.zeros(batch, jnp.int32))
    (state, *_, ended, total, actions), _ = jax.lax.scan(body, carry, None, length=num_steps)
    out = {"score": jax.vmap(env.score)(state), "return": total, "actions": actions, "ended": ended}
    if hasattr(env, "scores"):
        out["scores"] = jax.vmap(env.scores)(state)
    return out


class NetworkPolicy(FlatPolicy):
    """A trained network as a harness policy: greedy (the legal action of
    highest logit). Each session binds the network to the session's codec
    (:func:`bind`): an entity network acts at every size of its layout's
    signature (LUCA's: every N) with the same weights, an MLP at its
    training size only (ValueError at ``reset`` naming both sizes
    otherwise). A recurrent network's memory starts from
    zero at ``reset`` and is carried through the session's actions (edits
    of a raw codec's matrix included).

    Args:
        name: the agent's name (``ppo:<path>``).
        network: the MLP's weights, an entity or a recurrent network.
        codec: the flat codec it was trained on.
    """

    def __init__(self, name: str, network, codec):
        super().__init__(name, self._choose, codec)
        self.network = self.session_network = network

    def reset(self, params, seed: int) -> None:
        """Start a session of settings ``params``: bind the network to the
        session's codec (:func:`bind`); an MLP on a session of another size
        raises ValueError naming the agent and both sizes."""
        super().reset(params, seed)
        try:
            self.session_network = bind(self.network, self.session_codec, self.codec.describe())
        except ValueError as exc:
            raise ValueError(f"agent {self.name}: {exc}") from None
        self.memory, self.start = initial_memory(self.network, 1)[0], True

    def _choose(self, vector: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        network = self.session_network
        if isinstance(network, entity_attention.EntityAttentionNetwork):
            size, actions = network.layout.observation_size, network.layout.num_actions
        else:
            size, actions = _sizes(network)
        if np.shape(vector) != (size,) or np.shape(mask) != (actions,):
            raise ValueError(f"agent {self.name}: trained on {self.codec.describe()}, acting with observation size {size} "
                             f"and {actions} actions; this session's observation has shape {np.shape(vector)} and its "
                             f"mask {np.shape(mask)}")
        if is_recurrent(network):
            action, self.memory = _greedy_step(network, self.memory, vector, mask, self.start)
            self.start = False
            return int(action)
        return int(_greedy_one(network, vector, mask))


def load(path: str) -> NetworkPolicy:
    """The run folder's policy for the harness (:class:`NetworkPolicy`),
    named ``ppo:<path>``. An entity network plays sessions of any size of its
    layout's signature (LUCA's: any N); an
    MLP's session of another size raises ValueError naming both."""
    config, network = load_network(path)
    return NetworkPolicy(f"ppo:{path}", network, config.make_env())
