"""LUCA's batched rollouts and its flat codec: the world's side of
:mod:`luca_gym.functional`.

* :func:`organism_batch` -- stacked organism arrays and noise keys for seeds.
* :func:`rollout` -- one session per organism for a fixed number of steps
  (``lax.scan`` over ``vmap(core.step)``) with dict actions, optionally
  sharded over devices; :func:`rollout_scores` the same with the score
  breakdown.
* :func:`fresh_rollout` -- the same, with the organisms generated inside the
  compiled program from a key.
* :class:`LucaFlatCodec` (:func:`make_codec`) -- the flat codec of
  :mod:`luca_gym.worlds.luca.core.flat` for the generic functional env and
  PPO (:class:`luca_gym.protocol.FlatCodec`): ``Discrete(K)`` single-target
  choices, a float32 observation vector and a legal-action mask; the named
  analyst writes the values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import seal as seal_mod
from luca_gym.functional import shard_batch
from luca_gym.worlds.luca import analysts, core, spec
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.core import flat


def organism_batch(seeds, tier: str, n_genes: int, mode: str, backwards: bool = False, *, sealed=None):
    """Stacked organism arrays (generated as one batch, :func:`world.generate`)
    and session noise keys (B, 2) for ``seeds`` (their sealed seeds under
    ``sealed``, :mod:`luca_gym.seal`)."""
    seeds = np.asarray(list(seeds))
    seal = seal_mod.make_seal(sealed)
    return world.generate(seeds, tier, n_genes, mode, backwards, sealed=seal), core.noise_keys(seeds, tier, n_genes, seal)


def rollout(policy_fn, key: jax.Array, organisms, noise_keys, params: core.EnvParams, num_steps: int, shard: bool = False):
    """Run one session per organism for ``num_steps`` steps as one jitted
    ``lax.scan`` (no Python in the loop).

    Args:
        policy_fn: jittable ``(key, obs) -> core.Action`` over a batch.
        organisms: stacked organism arrays (B leading); noise_keys: (B, 2) keys.
        shard: split the batch across all local devices (``jax.sharding``);
            the results are the same as unsharded.
    Returns (returns float32 (B,), composite float32 (B,), ended bool (B,)).
    """
    if shard:
        organisms, noise_keys = shard_batch((organisms, noise_keys))
    return _rollout(policy_fn, key, organisms, noise_keys, params, num_steps)


def rollout_scores(policy_fn, key: jax.Array, organisms, noise_keys, params: core.EnvParams, num_steps: int) -> dict:
    """:func:`rollout`'s sessions (same scan, same per-step keys), returning
    the score breakdown of each: a dict of float32 (B,) ``returns``,
    ``composite``, ``prediction``, ``diagnosis``, ``rescue`` and bool (B,)
    ``ended`` (``luca-gym fidelity`` reads the sub-scores of paper Table 8)."""
    return _rollout_scores(policy_fn, key, organisms, noise_keys, params, num_steps)


@partial(jax.jit, static_argnames=("policy_fn", "params", "num_steps"))
def _rollout(policy_fn, key, organisms, noise_keys, params, num_steps):
    total, scores, ended = _sessions(policy_fn, key, organisms, noise_keys, params, num_steps)
    return total, scores["composite"], ended


@partial(jax.jit, static_argnames=("policy_fn", "params", "num_steps"))
def _rollout_scores(policy_fn, key, organisms, noise_keys, params, num_steps):
    total, scores, ended = _sessions(policy_fn, key, organisms, noise_keys, params, num_steps)
    return dict(scores, returns=total, ended=ended)


def _sessions(policy_fn, key, organisms, noise_keys, params, num_steps):
    obs, state = jax.vmap(core.reset, in_axes=(0, 0, None))(noise_keys, organisms, params)

    def body(carry, k):
        obs, state, total = carry
        action = policy_fn(k, obs)
        obs, state, reward, _, _, _ = jax.vmap(core.step, in_axes=(0, 0, None))(state, action, params)
        return (obs, state, total + reward), None

    (obs, state, total), _ = jax.lax.scan(body, (obs, state, jnp.zeros(noise_keys.shape[0], jnp.float32)), jax.random.split(key, num_steps))
    scores = jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None))(state, params)
    return total, scores, state.ended


def fresh_rollout(policy_fn, key: jax.Array, params: core.EnvParams, tier: str, num_envs: int, num_steps: int,
                  backwards: bool = False):
    """Draw ``num_envs`` organism seeds from ``key``, generate the organisms
    inside the jit (:func:`luca_gym.worlds.luca.generator.traced_generate`) and run one session
    on each for ``num_steps`` steps: generation and sessions in one compiled
    program, no Python in the loop.

    Returns a dict: ``returns``, ``composite``, ``ended`` (B,), ``seeds`` int64
    (B,) (``make_organism(seeds[i], tier, ...)`` is env i's organism) and
    ``generated`` bool (B,) (False only if an organism met no guarantee within
    ``world.MAX_ATTEMPTS`` attempts; its session is then meaningless).
    """
    num_envs = spec.check_positive_int(num_envs, "num_envs")
    mode = params.mode
    tier, n_genes, mode, backwards = spec.check_organism(tier, params.n_genes, mode, backwards)
    plan = world.plan(n_genes, mode, backwards)
    t = world.tier_params(tier, n_genes)
    out = _fresh_rollout(policy_fn, key, params, t, plan, num_envs, num_steps, world.map_batch(), world.MAX_ATTEMPTS)
    out["seeds"] = np.asarray(out["seeds"]).astype(np.int64)
    return out


@partial(jax.jit, static_argnames=("policy_fn", "params", "plan", "num_envs", "num_steps", "group", "max_attempts"))
def _fresh_rollout(policy_fn, key, params, t, plan, num_envs, num_steps, group, max_attempts):
    seed_key, run_key = jax.random.split(key)
    seeds = jax.random.randint(seed_key, (num_envs,), 0, spec.DRAWN_SEED_LIMIT).astype(jnp.uint32)
    zeros = jnp.zeros(num_envs, jnp.uint32)
    organisms, ok = jax.lax.map(
        lambda lo: world.traced_generate(jnp.uint32(0), lo, t, plan, max_attempts), seeds, batch_size=min(group, num_envs)
    )
    noise_keys = core.traced_noise_keys(zeros, seeds, t.index.astype(jnp.uint32), jnp.uint32(params.n_genes))
    returns, scores, ended = _sessions(policy_fn, run_key, organisms, noise_keys, params, num_steps)
    composite = scores["composite"]
    return {"returns": returns, "composite": composite, "ended": ended, "seeds": seeds, "generated": ok}




# rescue_features shows the budget units left one-hot up to this many ("or more").
UNITS_SHOWN = 4


@dataclass(frozen=True)
class LucaFlatCodec:
    """LUCA's flat codec (hashable: a static ``jit`` argument).

    Attributes:
        params: the core's session settings (size, mode, budget, shaping).
        tier: the organisms' tier (the pool's; the core itself does not need it).
        analyst: who writes predictions, the network and the analyst's
            diagnosis for the flat actions (:data:`luca_gym.worlds.luca.analysts.ANALYSTS`).
        rescue_features: opt-in (default off: the observation is
            :func:`~luca_gym.worlds.luca.core.flat.observation_vector` alone).
            On, 2E + 5 more entries follow it (:func:`rescue_features`): for
            each single target in flat-index order, the fraction of the
            aberrant phenotypes its measured result brings into the healthy
            range and how near 0.5 it puts them (0 where unmeasured), so the
            rescue a measured table supports is one weight from input to a
            rescue logit away; then the budget units left, one-hot as 0, 1,
            2, 3 or more (the vector holds them as a fraction of the budget,
            which differs with N: an entity-network policy trained at one N needs
            "only the rescue's unit is left" in units to act at another). A
            function of the observation vector and the budget, nothing more.

    The action is ``Discrete(num_actions)`` over :mod:`luca_gym.worlds.luca.core.flat`'s
    layout; the observation a float32 vector (observation_size,) with a bool
    mask (num_actions,) of the legal actions. An instance is an organism with
    its session noise key (a pool session is renewed with a key of its own:
    :meth:`renew`); the headline score is the composite.
    """

    params: core.EnvParams
    tier: str
    analyst: str = "logit-additive"
    rescue_features: bool = False

    world = "luca"
    headline = "composite"

    def __post_init__(self):
        if not isinstance(self.params, core.EnvParams):
            raise ValueError(f"params: {spec.short_repr(self.params)} is not a core.EnvParams; make one with core.make_params")
        spec.check_tier(self.tier)
        analysts.get(self.analyst)
        if not isinstance(self.rescue_features, (bool, np.bool_)):
            raise ValueError(f"rescue_features: {spec.short_repr(self.rescue_features)} not allowed; true or false")

    @property
    def mode(self) -> str:
        return self.params.mode

    @property
    def num_actions(self) -> int:
        """K: the size of the ``Discrete`` action space."""
        return flat.layout(self.params).size

    @property
    def observation_size(self) -> int:
        """D: the length of the observation vector (2E + 5 more with ``rescue_features``)."""
        extra = 2 * flat.layout(self.params).targets + UNITS_SHOWN + 1 if self.rescue_features else 0
        return flat.observation_size(self.params) + extra

    def token_layout(self) -> dict:
        """Each gene's and signal's observation slots and flat actions, for
        the entity-attention network (:func:`luca_gym.worlds.luca.core.flat.token_layout`).
        With ``rescue_features``, each entity's features gain its own entries
        of them: gene g its three singles' restored fraction and nearness (6
        more, 24 in all), signal k its activation's (2 more, 7), and the
        global features the budget units left (5 more)."""
        tokens = flat.token_layout(self.params)
        if not self.rescue_features:
            return tokens
        n, s = self.params.n_genes, self.params.n_signals
        start, e = flat.observation_size(self.params), flat.layout(self.params).targets
        genes, signals = np.arange(n)[:, None], np.arange(s)[:, None]
        codes = np.arange(spec.DAMPEN) * n
        extra = {"gene": np.concatenate([start + codes + genes, start + e + codes + genes], axis=1),
                 "signal": np.concatenate([start + spec.DAMPEN * n + signals, start + e + spec.DAMPEN * n + signals], axis=1)}
        groups = tuple((name, np.concatenate([obs, extra[name]], axis=1).astype(np.int32), actions)
                       for name, obs, actions in tokens["groups"])
        units = start + 2 * e + np.arange(UNITS_SHOWN + 1)
        return dict(tokens, global_obs=np.concatenate([tokens["global_obs"], units]).astype(np.int32), groups=groups)

    def settings(self) -> dict:
        """The keyword settings that rebuild this codec through :func:`make_codec`."""
        p = self.params
        return {"tier": self.tier, "n_genes": p.n_genes, "mode": p.mode, "budget": p.budget, "analyst": self.analyst,
                "dense_shaping": p.dense_shaping, "shaping_gamma": p.shaping_gamma, "rescue_features": self.rescue_features}

    def describe(self) -> str:
        """The settings in a few words: tier, mode and N."""
        return f"{self.tier} {self.mode} N={self.params.n_genes}"

    # -- the pure part (jit, vmap) ---------------------------------------------
    def instances(self, seeds):
        """(organism arrays, noise keys) of ``seeds``, B leading (host side: one generator batch)."""
        return organism_batch(seeds, self.tier, self.params.n_genes, self.mode)

    def instance_source(self, seeds):
        """The pool of ``seeds``'s organisms (:class:`~luca_gym.worlds.luca.pools.EpisodeOrganisms`):
        read from LUCA's disk store where it holds them, else generated and
        stored; with their own noise keys, bitwise :meth:`instances`'
        (:func:`luca_gym.functional.make_pool`'s default source)."""
        from luca_gym.worlds.luca.config import LucaConfig
        from luca_gym.worlds.luca.pools import EpisodeOrganisms

        return EpisodeOrganisms("pool", LucaConfig(tier=self.tier, mode=self.mode, n_genes=self.params.n_genes), None,
                                seeds=seeds)

    def open(self, instance):
        """Open a session on (organism arrays, noise key): (state, vector, mask)."""
        organism, noise_key = instance
        vector, mask, state = flat.reset(noise_key, organism, self.params, self.analyst)
        return state, self._extend(vector), mask

    def renew(self, state, key):
        """The session ``state``, just opened, with ``key`` as its noise key:
        the baseline (measurement 0, in the opening observation) stays the
        instance's, every later measurement draws fresh noise from ``key``
        (:func:`luca_gym.functional.renewed`)."""
        return replace(state, noise_key=jnp.asarray(key, jnp.uint32).reshape(state.noise_key.shape))

    def step(self, state, action):
        """One flat action through the core: (state, vector, mask, reward, terminated, truncated, error)."""
        vector, mask, state, reward, terminated, truncated, info = flat.step(state, action, self.params, self.analyst)
        return state, self._extend(vector), mask, reward, terminated, truncated, info["error"]

    def _extend(self, vector: jax.Array) -> jax.Array:
        """The observation vector, with :func:`rescue_features` appended where they are on."""
        if not self.rescue_features:
            return vector
        return jnp.concatenate([vector, rescue_features(vector, self.params)], axis=-1)

    def score(self, state) -> jax.Array:
        """The session's composite so far (the network not scored), float32 ()."""
        return core.session_scores(state, self.params, network=False)["composite"]

    # -- a host session's observation (a learned agent in the harness) -------------
    def for_session(self, params: core.EnvParams) -> "LucaFlatCodec":
        """This codec for a session of settings ``params`` (its size may differ from the training one)."""
        return replace(self, params=params)

    def encode(self, obs: dict):
        """(vector float32 (D,), mask bool (K,)) of a session's observation dict."""
        vector, mask = _encode(obs, self.params, self.rescue_features)
        return vector, mask

    def decode(self, index, obs: dict) -> dict:
        """The dict action of flat action ``index`` given the observation it answers."""
        action = jax.device_get(_decode(np.int32(index), obs, self.params, self.analyst))
        return {k: np.asarray(v) for k, v in vars(action).items()}


@partial(jax.jit, static_argnames=("params", "with_rescue_features"))
def _encode(obs: dict, params: core.EnvParams, with_rescue_features: bool = False):
    vector = flat.observation_vector(obs, params)
    if with_rescue_features:
        vector = jnp.concatenate([vector, rescue_features(vector, params)])
    return vector, flat.mask(obs, params)


def rescue_features(vector: jax.Array, params: core.EnvParams) -> jax.Array:
    """float32 (..., 2E + 5) from observation vectors float32 (..., D): for each
    single target in flat-index order (BLOCK g, BOOST g, DAMPEN g, then each
    signal), the fraction of the baseline's aberrant phenotypes that its
    measured result puts in the healthy range (first E), then how near 0.5
    those phenotypes lie, 1 - 2 x their mean distance from 0.5, clipped to
    [0, 1] (next E: the tie-break); 0 where it is unmeasured or nothing is
    aberrant. Read from the vector alone (baseline, aberrant
    flags, the measured shifts and their masks), so it adds no information,
    only a form a linear map can use: the rule of
    :func:`~luca_gym.worlds.luca.analysts.best_measured_rescue` ranks these.
    Then the budget units left, one-hot over 0, 1, 2, 3 and ``UNITS_SHOWN``
    or more (the vector's fraction times the budget)."""
    n, s, p = params.n_genes, params.n_signals, spec.N_PHENOTYPES
    at, part = 0, {}
    for name, size in flat.observation_parts(params):
        part[name] = vector[..., at:at + size]
        at += size
    lead = vector.shape[:-1]
    # The vector holds genes gene-major (gene, code); flat indices are code-major (code, gene), then the signals.
    singles = jnp.swapaxes(part["singles"].reshape(*lead, n, spec.DAMPEN, p), -3, -2).reshape(*lead, spec.DAMPEN * n, p)
    shifts = jnp.concatenate([singles, part["signals"].reshape(*lead, s, p)], axis=-2)
    measured = jnp.concatenate([jnp.swapaxes(part["single_mask"].reshape(*lead, n, spec.DAMPEN), -2, -1).reshape(*lead, -1),
                                part["signal_mask"]], axis=-1) > 0
    phenotypes = shifts + part["baseline"][..., None, :]
    aberrant = part["aberrant"][..., None, :] > 0
    restored = jnp.sum((phenotypes >= spec.HEALTHY_LOW) & (phenotypes <= spec.HEALTHY_HIGH) & aberrant, axis=-1)
    count = jnp.maximum(jnp.sum(aberrant, axis=-1), 1)
    nearness = jnp.clip(1.0 - 2.0 * jnp.sum(jnp.abs(phenotypes - 0.5) * aberrant, axis=-1) / count, 0.0, 1.0)
    units = jnp.minimum(jnp.round(part["budget_left"] * params.budget), UNITS_SHOWN).astype(jnp.int32)[..., 0]
    return jnp.concatenate([jnp.where(measured, restored / count, 0.0), jnp.where(measured, nearness, 0.0),
                            jax.nn.one_hot(units, UNITS_SHOWN + 1)], axis=-1).astype(jnp.float32)


@partial(jax.jit, static_argnames=("params", "analyst"))
def _decode(index, obs: dict, params: core.EnvParams, analyst: str):
    return flat.decode(index, obs, params, analyst)


def make_codec(tier: str = "easy", n_genes: int = 20, mode: str = "healthy", *, budget: int | None = None,
               analyst: str = "logit-additive", dense_shaping: bool = False, shaping_gamma: float = 1.0,
               rescue_features: bool = False) -> LucaFlatCodec:
    """A :class:`LucaFlatCodec` with the paper's settings for ``(tier, n_genes, mode)``
    (``budget``, shaping: see :func:`luca_gym.worlds.luca.core.make_params`;
    ``rescue_features``: opt-in observation entries, see :class:`LucaFlatCodec`)."""
    params = core.make_params(tier, n_genes, mode, budget=budget, dense_shaping=dense_shaping, shaping_gamma=shaping_gamma)
    return LucaFlatCodec(params, tier, analyst, rescue_features)
