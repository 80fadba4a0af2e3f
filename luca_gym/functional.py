"""The pure, functional API for training and batched evaluation: whole
batches of sessions as one jit-compiled program, no Python in the loop.

* :func:`organism_batch` -- stacked organism arrays and noise keys for seeds.
* :func:`rollout` -- one session per organism for a fixed number of steps
  (``lax.scan`` over ``vmap(core.step)``), optionally sharded over devices.
* :func:`fresh_rollout` -- the same, with the organisms generated inside the
  compiled program from a key.
* :func:`shard_batch` -- place a batch across local devices.

The flat env, for training learned agents (gymnax style: settings, pool and
state are separate arguments, every function pure and vmappable):

* :class:`FlatEnv` (:func:`make_env`) -- static settings; the action is one of
  :mod:`luca_gym.worlds.luca.core.flat`'s K flat actions, the observation its float32
  vector and legal-action mask.
* :class:`Pool` (:func:`make_pool`) -- training organisms generated once on
  the device, from seeds 10_000 up by default (:data:`TRAINING_SEED_START`),
  disjoint from the evaluation seeds 0-19.
* :func:`reset`, :func:`step` -- one env; ``step`` autoresets on a new pool
  organism inside the jit and reports the ended episode's return and composite.
* :func:`flat_rollout` -- ``num_envs`` envs for ``num_steps`` steps under a
  policy whose weights are a traced argument (no recompile when they change).

The Gymnasium vector env (:class:`luca_gym.envs.LucaVectorEnv`) is an adapter
over the same core; this module does not depend on Gymnasium.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.worlds.luca import analysts, core, spec, generator as world
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.core import flat


def organism_batch(seeds, tier: str, n_genes: int, mode: str, backwards: bool = False, *, sealed=None):
    """Stacked organism arrays (generated as one batch, :func:`world.generate`)
    and session noise keys (B, 2) for ``seeds`` (their sealed seeds under
    ``sealed``, :mod:`luca_gym.seal`)."""
    seeds = np.asarray(list(seeds))
    seal = seal_mod.make_seal(sealed)
    return world.generate(seeds, tier, n_genes, mode, backwards, sealed=seal), core.noise_keys(seeds, tier, n_genes, seal)


def shard_batch(tree, devices=None):
    """Place every array of ``tree`` split along its leading (batch) axis across
    ``devices`` (default: all local devices). The batch must divide evenly."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = list(devices or jax.local_devices())
    leaves = jax.tree_util.tree_leaves(tree)
    batch = leaves[0].shape[0]
    if batch % len(devices):
        raise ValueError(f"batch: {batch} organisms do not split over {len(devices)} devices; use a multiple of {len(devices)}")
    sharding = NamedSharding(Mesh(np.array(devices), ("batch",)), PartitionSpec("batch"))
    return jax.tree_util.tree_map(lambda x: jax.device_put(x, sharding), tree)


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


# -- the flat env: a functional env for training learned agents -----------------
# Organisms an agent trains on come from seeds at or above this, so they never
# include the evaluation seeds (0-19 in the paper's tables and the CLI default).
TRAINING_SEED_START = 10_000
EVAL_SEEDS = range(20)
DEFAULT_POOL_SIZE = 1024


@dataclass(frozen=True)
class FlatEnv:
    """Static settings of the flat env (hashable: a static ``jit`` argument).

    Attributes:
        params: the core's session settings (size, mode, budget, shaping).
        tier: the organisms' tier (the pool's; the core itself does not need it).
        analyst: who writes predictions, the network and the analyst's
            diagnosis for the flat actions (:data:`luca_gym.worlds.luca.analysts.ANALYSTS`).

    The action is ``Discrete(num_actions)`` over :mod:`luca_gym.worlds.luca.core.flat`'s
    layout; the observation a float32 vector (observation_size,) with a bool
    mask (num_actions,) of the legal actions.
    """

    params: core.EnvParams
    tier: str
    analyst: str = "logit-additive"

    def __post_init__(self):
        if not isinstance(self.params, core.EnvParams):
            raise ValueError(f"params: {spec.short_repr(self.params)} is not a core.EnvParams; make one with core.make_params")
        spec.check_tier(self.tier)
        analysts.get(self.analyst)

    @property
    def mode(self) -> str:
        return self.params.mode

    @property
    def num_actions(self) -> int:
        """K: the size of the ``Discrete`` action space."""
        return flat.layout(self.params).size

    @property
    def observation_size(self) -> int:
        """D: the length of the observation vector."""
        return flat.observation_size(self.params)


def make_env(tier: str = "easy", n_genes: int = 20, mode: str = "healthy", *, budget: int | None = None,
             analyst: str = "logit-additive", dense_shaping: bool = False, shaping_gamma: float = 1.0) -> FlatEnv:
    """A :class:`FlatEnv` with the paper's settings for ``(tier, n_genes, mode)``
    (``budget``, shaping: see :func:`luca_gym.worlds.luca.core.make_params`)."""
    params = core.make_params(tier, n_genes, mode, budget=budget, dense_shaping=dense_shaping, shaping_gamma=shaping_gamma)
    return FlatEnv(params, tier, analyst)


@partial(jax.tree_util.register_dataclass, data_fields=["start", "obs", "mask", "seeds"], meta_fields=["env"])
@dataclass(frozen=True)
class Pool:
    """The organisms sessions are drawn from, each as its opening session.

    A session's opening is a pure function of its organism (the noise key
    derives from the organism's triple), so it is computed once here and a
    reset is a gather: an autoreset inside a vmapped step then costs no
    steady-state solve (under ``vmap`` a reset branch would run for every env
    at every step).

    Attributes (M organisms):
        start: core.EnvState stacked (M, ...): each organism's opened session
            (its ``organism`` and ``noise_key`` fields are the organism arrays
            and the session noise keys).
        obs: float32 (M, D) opening observation vectors. mask: bool (M, K).
        seeds: int32 (M,) the organisms' seeds (``make_organism(seeds[i],
            env.tier, ...)`` is organism i).
        env: the :class:`FlatEnv` the sessions were opened for (static).
    """

    start: core.EnvState
    obs: jax.Array
    mask: jax.Array
    seeds: jax.Array
    env: FlatEnv

    @property
    def size(self) -> int:
        return int(self.seeds.shape[0])

    @property
    def organisms(self):
        """The stacked organism arrays (M leading)."""
        return self.start.organism

    @property
    def noise_keys(self) -> jax.Array:
        """uint32 (M, 2) session noise keys."""
        return self.start.noise_key


def training_seeds(size: int = DEFAULT_POOL_SIZE, start: int = TRAINING_SEED_START) -> np.ndarray:
    """int64 (size,): the default training organisms, ``start .. start + size - 1``
    (disjoint from the evaluation seeds :data:`EVAL_SEEDS`)."""
    return np.arange(start, start + spec.check_positive_int(size, "size"), dtype=np.int64)


def make_pool(env: FlatEnv, seeds=None) -> Pool:
    """Generate the organisms of ``seeds`` on the device (one
    :func:`luca_gym.worlds.luca.generator.generate` batch) and open a session on each.

    ``seeds`` defaults to :func:`training_seeds` (10_000 .. 11_023), disjoint
    from the evaluation seeds 0-19. Seeds must lie below 2**31 - 1 (they are
    carried as int32 inside the jit, as drawn seeds are).
    """
    if not isinstance(env, FlatEnv):
        raise ValueError(f"env: {spec.short_repr(env)} is not a FlatEnv; make one with functional.make_env")
    seeds = np.array([spec.check_seed(s, "seeds") for s in (training_seeds() if seeds is None else seeds)], np.int64)
    if seeds.size == 0:
        raise ValueError("seeds: empty; a pool needs at least one organism seed")
    if seeds.max() >= spec.DRAWN_SEED_LIMIT:
        raise ValueError(f"seeds: {int(seeds.max())} out of range for a pool; allowed 0..{spec.DRAWN_SEED_LIMIT - 1}")
    organisms, noise_keys = organism_batch(seeds, env.tier, env.params.n_genes, env.mode)
    obs, mask, start = _open_sessions(noise_keys, organisms, env.params, env.analyst)
    return Pool(start=start, obs=obs, mask=mask, seeds=jnp.asarray(seeds, jnp.int32), env=env)


@partial(jax.jit, static_argnames=("params", "analyst"))
def _open_sessions(noise_keys, organisms, params, analyst):
    return jax.vmap(flat.reset, in_axes=(0, 0, None, None))(noise_keys, organisms, params, analyst)


@partial(jax.tree_util.register_dataclass, data_fields=["session", "seed", "episode_return", "length"], meta_fields=[])
@dataclass(frozen=True)
class FlatState:
    """One env of the flat env (``vmap`` batches it).

    Attributes:
        session: core.EnvState of the session running now.
        seed: int32 () its organism's seed.
        episode_return: float32 () reward summed since the session opened.
        length: int32 () calls made since the session opened.
    """

    session: core.EnvState
    seed: jax.Array
    episode_return: jax.Array
    length: jax.Array


def _check_pool(env: FlatEnv, pool: Pool) -> None:
    if not isinstance(pool, Pool):
        raise ValueError(f"pool: {spec.short_repr(pool)} is not a Pool; make one with functional.make_pool(env)")
    if pool.env != env:
        raise ValueError(f"pool: opened for {pool.env}, not for env {env}; make the pool with this env")


def reset(key: jax.Array, env: FlatEnv, pool: Pool) -> tuple[FlatState, jax.Array, jax.Array]:
    """Open a session on a pool organism drawn uniformly by ``key``. Pure,
    jittable, vmappable over keys. Returns (state, observation vector float32
    (D,), mask bool (K,))."""
    _check_pool(env, pool)
    i = jax.random.randint(key, (), 0, pool.seeds.shape[0])
    session = jax.tree_util.tree_map(lambda x: x[i], pool.start)
    state = FlatState(session=session, seed=pool.seeds[i], episode_return=jnp.float32(0.0), length=jnp.int32(0))
    return state, pool.obs[i], pool.mask[i]


def step(key: jax.Array, state: FlatState, action: jax.Array, env: FlatEnv, pool: Pool):
    """Apply flat action ``action`` (int32 ()), with autoreset: a session that
    ends here is replaced by a new one on a pool organism drawn by ``key``, in
    this same step. Pure, jittable, vmappable.

    Returns (state, observation vector float32 (D,), mask bool (K,), reward
    float32 (), done bool (), info). The observation and mask are the new
    session's where ``done``. ``info`` (arrays, one per env):

    * ``done`` bool: the session ended at this step (terminated or truncated);
    * ``return`` float32, ``composite`` float32, ``length`` int32, ``seed``
      int32: the ended session's undiscounted return, composite score (the
      core's :func:`~luca_gym.worlds.luca.core.session_scores`), calls and organism seed
      (the running session's so far where not ``done``);
    * ``truncated`` bool; ``error`` int32: the core's refusal code of the action.
    """
    _check_pool(env, pool)
    vector, mask, session, reward, terminated, truncated, core_info = flat.step(state.session, action, env.params, env.analyst)
    done = terminated | truncated
    ended = FlatState(session=session, seed=state.seed, episode_return=state.episode_return + reward, length=state.length + 1)
    composite = core.session_scores(session, env.params, network=False)["composite"]
    fresh, fresh_vector, fresh_mask = reset(key, env, pool)
    pick = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), new, old)  # noqa: E731
    info = {
        "done": done, "return": ended.episode_return, "composite": composite, "length": ended.length,
        "seed": state.seed, "truncated": truncated, "error": core_info["error"],
    }
    return pick(fresh, ended), pick(fresh_vector, vector), pick(fresh_mask, mask), reward, done, info


def masked_random(policy_params, key: jax.Array, obs: jax.Array, mask: jax.Array) -> jax.Array:
    """A policy for :func:`flat_rollout`: a uniformly random legal action per
    env (int32 (B,)); ``policy_params`` is ignored."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def flat_rollout(policy_fn, policy_params, key: jax.Array, env: FlatEnv, pool: Pool, num_envs: int, num_steps: int,
                 trajectories: bool = False) -> dict:
    """Run ``num_envs`` flat envs for ``num_steps`` steps each (autoreset on
    pool organisms) as one jitted ``lax.scan``.

    Args:
        policy_fn: jittable ``(policy_params, key, obs float32 (B, D), mask
            bool (B, K)) -> action int32 (B,)`` (static: one compile per
            function).
        policy_params: any pytree, a traced argument: new weights of the same
            shapes run without recompiling.
        trajectories: also return every step's arrays.

    Returns a dict of device arrays: ``episodes`` int32 () sessions that ended
    within the rollout; ``mean_return``, ``mean_composite``, ``mean_length``
    float32 () over those (NaN if none ended). With ``trajectories``, also
    ``trajectory``: {``obs`` float32 (T, B, D), ``mask`` bool (T, B, K)
    (what the policy saw), ``action`` int32 (T, B), ``reward`` float32 (T, B),
    ``done`` bool (T, B), and the step info's ``return``, ``composite``,
    ``length``, ``seed``, ``error`` (T, B)}.
    """
    num_envs = spec.check_positive_int(num_envs, "num_envs")
    num_steps = spec.check_positive_int(num_steps, "num_steps")
    _check_pool(env, pool)
    return _flat_rollout(policy_fn, policy_params, key, env, pool, num_envs, num_steps, bool(trajectories))


@partial(jax.jit, static_argnames=("policy_fn", "env", "num_envs", "num_steps", "trajectories"))
def _flat_rollout(policy_fn, policy_params, key, env, pool, num_envs, num_steps, trajectories):
    reset_key, run_key = jax.random.split(key)
    state, obs, mask = jax.vmap(reset, in_axes=(0, None, None))(jax.random.split(reset_key, num_envs), env, pool)

    def body(carry, k):
        state, obs, mask = carry
        act_key, step_key = jax.random.split(k)
        action = policy_fn(policy_params, act_key, obs, mask)
        new_state, new_obs, new_mask, reward, done, info = jax.vmap(step, in_axes=(0, 0, 0, None, None))(
            jax.random.split(step_key, num_envs), state, action, env, pool
        )
        record = {"obs": obs, "mask": mask, "action": action, "reward": reward, "done": done,
                  **{k: info[k] for k in ("return", "composite", "length", "seed", "error")}}
        return (new_state, new_obs, new_mask), record

    _, record = jax.lax.scan(body, (state, obs, mask), jax.random.split(run_key, num_steps))
    out = episode_statistics(record["done"], record["return"], record["composite"], record["length"])
    if trajectories:
        out["trajectory"] = record
    return out


def episode_statistics(done, returns, composite, length) -> dict:
    """Statistics of the episodes that ended (``done``) among arrays of any
    equal shape: ``episodes`` int32 (), ``mean_return``, ``mean_composite``,
    ``mean_length`` float32 () (NaN if none ended)."""
    count = jnp.sum(done)
    mean = lambda x: jnp.sum(jnp.where(done, x, 0.0)) / count  # noqa: E731 -- 0/0 is NaN: no episode ended
    return {"episodes": count.astype(jnp.int32), "mean_return": mean(returns), "mean_composite": mean(composite),
            "mean_length": mean(length.astype(jnp.float32))}
