"""The pure, functional API for training and batched evaluation, over any
world with a flat codec (:class:`luca_gym.protocol.FlatCodec`): whole batches
of sessions as one jit-compiled program, no Python in the loop (gymnax style:
settings, pool and state are separate arguments, every function pure and
vmappable).

* :func:`make_env` -- a world's flat codec from its settings
  (``make_env("easy", 20, "healthy", world="luca")``); the codec is the static
  settings of the env: the action is one of its K flat actions, the
  observation a float32 vector with a legal-action mask.
* :class:`Pool` (:func:`make_pool`) -- training instances opened once on
  the device, from seeds 10_000 up by default (:data:`TRAINING_SEED_START`),
  disjoint from the evaluation seeds 0-19: the pool of the world's instance
  source (:mod:`luca_gym.pools`; LUCA's organisms read from its disk store)
  in its device form, drawn inside the jit.
* :func:`reset`, :func:`step` -- one env; ``step`` autoresets on a new pool
  instance inside the jit and reports the ended episode's return and score.
  Each session drawn from the pool is renewed with an episode key of its
  own (:func:`renewed`: LUCA's measurements after the opening baseline draw
  fresh noise from it), so an instance met twice is not met with the same
  noise; the step's info carries the key, which with the seed replays it.
* :func:`flat_rollout` -- ``num_envs`` envs for ``num_steps`` steps under a
  policy whose weights are a traced argument (no recompile when they change),
  on one device or split over several (``devices``).
* :func:`shard_batch` -- place a batch across local devices;
  :func:`env_sharding` -- the one mesh axis over envs that data-parallel
  rollouts and training (:mod:`luca_gym.agents.ppo`) split along.

A world's own batched rollouts live in the world (LUCA's dict-action
:func:`~luca_gym.worlds.luca.functional.rollout`, ``fresh_rollout`` and
``organism_batch``: :mod:`luca_gym.worlds.luca.functional`). This module depends on no world and not on Gymnasium.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import worlds
from luca_gym.pools import InstanceSource, codec_instances
from luca_gym.protocol import FlatCodec
from luca_gym.validate import DRAWN_SEED_LIMIT, check_positive_int, check_seed, short_repr


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


def env_sharding(devices: int | None):
    """A ``NamedSharding`` splitting a leading env axis over the first
    ``devices`` devices JAX sees (one mesh axis, ``"envs"``), or None for one
    device (``devices`` None or 1). In one process these are its local
    devices; after ``jax.distributed.initialize()`` every process's, so
    ``devices=jax.device_count()`` spans the hosts (each process then runs
    the same program on its share). ValueError where JAX sees fewer."""
    if devices is None or devices == 1:
        return None
    check_positive_int(devices, "devices")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    every = jax.devices()
    if devices > len(every):
        raise ValueError(f"devices: {devices} not allowed; JAX sees {len(every)} device(s) ({every[0].platform}); "
                         f"allowed 1 to {len(every)}")
    return NamedSharding(Mesh(np.array(every[:devices]), ("envs",)), PartitionSpec("envs"))


def split_envs(tree, sharding, axis: int = 0):
    """Inside a jit: every array of ``tree`` constrained to split its env
    axis ``axis`` over ``sharding``'s mesh (:func:`env_sharding`; unchanged
    for None)."""
    if sharding is None:
        return tree
    from jax.sharding import NamedSharding, PartitionSpec

    spec = NamedSharding(sharding.mesh, PartitionSpec(*([None] * axis), "envs"))
    return jax.tree_util.tree_map(lambda x: jax.lax.with_sharding_constraint(x, spec), tree)


# -- the flat env: a functional env for training learned agents -----------------
# Instances an agent trains on come from seeds at or above this, so they never
# include the evaluation seeds (0-19 in the paper's tables and the CLI default).
TRAINING_SEED_START = 10_000
EVAL_SEEDS = range(20)
DEFAULT_POOL_SIZE = 1024

# The flat env's static settings are the world's codec.
FlatEnv = FlatCodec


def make_env(*args, world, **settings) -> FlatCodec:
    """The flat codec of ``world`` (a registered name, ``"package.module:attribute"``
    or a :class:`~luca_gym.protocol.World`) for its settings: e.g. LUCA's
    ``make_env("easy", 20, "healthy", world="luca", budget=None, analyst="logit-additive")``
    (:func:`luca_gym.worlds.luca.functional.make_codec`)."""
    return worlds.get(world).make_flat(*args, **settings)


def _check_env(env) -> None:
    if not isinstance(env, FlatCodec):
        raise ValueError(f"env: {short_repr(env)} is not a flat codec; make one with functional.make_env(world=...)")


@partial(jax.tree_util.register_dataclass, data_fields=["start", "obs", "mask", "seeds"], meta_fields=["env"])
@dataclass(frozen=True)
class Pool:
    """The instances sessions are drawn from, each as its opening session.

    The pool of :mod:`luca_gym.pools` (M instances by seed, drawn uniformly
    by row), in the form a jitted program draws from: on the device, each
    instance already opened, drawn by a JAX key inside the step (the vector
    envs' :class:`~luca_gym.pools.InstanceSource` draws on the host with
    the env's numpy RNG). A session's opening is a pure function of its
    instance, so it is computed once here and a reset is a gather: an
    autoreset inside a vmapped step then costs no opening work (under
    ``vmap`` a reset branch would run for every env at every step).

    Attributes (M instances):
        start: the codec's session state stacked (M, ...): each instance's
            opened session (LUCA's carries the organism arrays and noise key).
        obs: float32 (M, D) opening observation vectors. mask: bool (M, K).
        seeds: int32 (M,) the instances' seeds.
        env: the flat codec the sessions were opened for (static).
    """

    start: object
    obs: jax.Array
    mask: jax.Array
    seeds: jax.Array
    env: FlatCodec

    @property
    def size(self) -> int:
        return int(self.seeds.shape[0])


def training_seeds(size: int = DEFAULT_POOL_SIZE, start: int = TRAINING_SEED_START) -> np.ndarray:
    """int64 (size,): the default training instances, ``start .. start + size - 1``
    (disjoint from the evaluation seeds :data:`EVAL_SEEDS`)."""
    return np.arange(start, start + check_positive_int(size, "size"), dtype=np.int64)


def make_pool(env: FlatCodec, seeds=None, source: InstanceSource | None = None) -> Pool:
    """Open a session on each instance of an instance source's pool
    (:class:`luca_gym.pools.InstanceSource`, kind ``"pool"``): its
    instances with their own noise keys (:meth:`~luca_gym.pools.InstanceSource.pool_instances`),
    opened as one batch on the device.

    ``source`` defaults to the world's source for ``seeds``: the codec's
    optional ``instance_source(seeds)`` (LUCA's organisms, read from its disk
    store, so a second run opens at once:
    :class:`~luca_gym.worlds.luca.pools.EpisodeOrganisms`), else a pool of
    ``env.instances(seeds)`` built in one call. ``seeds`` defaults to the
    source's, else :func:`training_seeds` (10_000 .. 11_023), disjoint from
    the evaluation seeds 0-19. Seeds must lie below 2**31 - 1 (they are
    carried as int32 inside the jit, as drawn seeds are).
    """
    _check_env(env)
    if source is not None:
        if not isinstance(source, InstanceSource) or source.kind != "pool":
            raise ValueError(f"source: {short_repr(source)} is not a pool; pass an InstanceSource of kind 'pool'")
        if seeds is None:
            seeds = source.seeds
    seeds = _pool_seeds(training_seeds() if seeds is None else seeds)
    if source is None:
        make = getattr(env, "instance_source", None)
        source = make(seeds) if make is not None else InstanceSource("pool", lambda s: (env.instances(s), None),
                                                                     pool_seeds=seeds)
    elif not np.array_equal(_pool_seeds(source.seeds), seeds):
        raise ValueError(f"seeds: {short_repr(seeds.tolist())} are not the source's pool seeds; pass one or the other")
    start, obs, mask = open_sessions(codec_instances(*source.pool_instances()), env)
    return Pool(start=start, obs=obs, mask=mask, seeds=jnp.asarray(seeds, jnp.int32), env=env)


def _pool_seeds(seeds) -> np.ndarray:
    seeds = np.array([check_seed(s, "seeds") for s in seeds], np.int64)
    if seeds.size == 0:
        raise ValueError("seeds: empty; a pool needs at least one instance seed")
    if seeds.max() >= DRAWN_SEED_LIMIT:
        raise ValueError(f"seeds: {int(seeds.max())} out of range for a pool; allowed 0..{DRAWN_SEED_LIMIT - 1}")
    return seeds


@partial(jax.jit, static_argnames=("env",))
def open_sessions(instances, env):
    """Sessions on a batch of ``env.instances`` (B leading): (state, vectors
    float32 (B, D), masks bool (B, K)), one jitted ``vmap(env.open)``."""
    return jax.vmap(env.open)(instances)


@partial(jax.tree_util.register_dataclass, data_fields=["session", "seed", "episode_key", "episode_return", "length"],
         meta_fields=[])
@dataclass(frozen=True)
class FlatState:
    """One env of the flat env (``vmap`` batches it).

    Attributes:
        session: the codec's state of the session running now.
        seed: int32 () its instance's seed.
        episode_key: uint32 (2,) the key its session was renewed with
            (:func:`renewed`): with the seed, what replays it.
        episode_return: float32 () reward summed since the session opened.
        length: int32 () calls made since the session opened.
    """

    session: object
    seed: jax.Array
    episode_key: jax.Array
    episode_return: jax.Array
    length: jax.Array


def _check_pool(env: FlatCodec, pool: Pool) -> None:
    if not isinstance(pool, Pool):
        raise ValueError(f"pool: {short_repr(pool)} is not a Pool; make one with functional.make_pool(env)")
    if pool.env != env:
        raise ValueError(f"pool: opened for {pool.env}, not for env {env}; make the pool with this env")


def renewed(env: FlatCodec, session, key: jax.Array):
    """``session``, a session of ``env`` just opened, renewed with ``key``
    (uint32 (2,)) where the codec has the optional ``renew``: its noise from
    here on drawn from ``key`` (LUCA: every measurement after the opening
    baseline). Its opening observation and mask do not change, so a pool's
    openings stay valid. Unchanged for a world without ``renew``."""
    renew = getattr(env, "renew", None)
    return session if renew is None else renew(session, key)


def reset(key: jax.Array, env: FlatCodec, pool: Pool) -> tuple[FlatState, jax.Array, jax.Array]:
    """Open a session on a pool instance drawn uniformly by ``key``, renewed
    (:func:`renewed`) with the episode key ``fold_in(key, 1)``. Pure,
    jittable, vmappable over keys. Returns (state, observation vector float32
    (D,), mask bool (K,))."""
    _check_pool(env, pool)
    i = jax.random.randint(key, (), 0, pool.seeds.shape[0])
    episode_key = jax.random.fold_in(key, 1)
    if jnp.issubdtype(episode_key.dtype, jax.dtypes.prng_key):  # a typed key: its raw uint32 words
        episode_key = jax.random.key_data(episode_key)
    session = renewed(env, jax.tree_util.tree_map(lambda x: x[i], pool.start), episode_key)
    state = FlatState(session=session, seed=pool.seeds[i], episode_key=episode_key, episode_return=jnp.float32(0.0),
                      length=jnp.int32(0))
    return state, pool.obs[i], pool.mask[i]


def step(key: jax.Array, state: FlatState, action: jax.Array, env: FlatCodec, pool: Pool):
    """Apply flat action ``action`` (int32 ()), with autoreset: a session that
    ends here is replaced by a new one on a pool instance drawn by ``key``, in
    this same step. Pure, jittable, vmappable.

    Returns (state, observation vector float32 (D,), mask bool (K,), reward
    float32 (), done bool (), info). The observation and mask are the new
    session's where ``done``. ``info`` (arrays, one per env):

    * ``done`` bool: the session ended at this step (terminated or truncated);
    * ``return`` float32, ``score`` float32 (also under the world's headline
      name, e.g. LUCA's ``composite``), ``length`` int32, ``seed`` int32: the
      ended session's undiscounted return, headline score (``env.score``),
      calls and instance seed (the running session's so far where not ``done``);
    * ``episode_key`` uint32 (2,): that session's key (:func:`reset`);
    * ``truncated`` bool; ``error`` int32: the world's refusal code of the action.
    """
    _check_pool(env, pool)
    session, vector, mask, reward, terminated, truncated, error = env.step(state.session, action)
    done = terminated | truncated
    ended = FlatState(session=session, seed=state.seed, episode_key=state.episode_key,
                      episode_return=state.episode_return + reward, length=state.length + 1)
    score = env.score(session)
    fresh, fresh_vector, fresh_mask = reset(key, env, pool)
    pick = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), new, old)  # noqa: E731
    info = {"done": done, "return": ended.episode_return, "score": score, "length": ended.length,
            "seed": state.seed, "episode_key": state.episode_key, "truncated": truncated, "error": error}
    info[env.headline] = score
    return pick(fresh, ended), pick(fresh_vector, vector), pick(fresh_mask, mask), reward, done, info


def masked_random(policy_params, key: jax.Array, obs: jax.Array, mask: jax.Array) -> jax.Array:
    """A policy for :func:`flat_rollout`: a uniformly random legal action per
    env (int32 (B,)); ``policy_params`` is ignored."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def flat_rollout(policy_fn, policy_params, key: jax.Array, env: FlatCodec, pool: Pool, num_envs: int, num_steps: int,
                 trajectories: bool = False, devices: int | None = None) -> dict:
    """Run ``num_envs`` flat envs for ``num_steps`` steps each (autoreset on
    pool instances) as one jitted ``lax.scan``.

    Args:
        policy_fn: jittable ``(policy_params, key, obs float32 (B, D), mask
            bool (B, K)) -> action int32 (B,)`` (static: one compile per
            function).
        policy_params: any pytree, a traced argument: new weights of the same
            shapes run without recompiling.
        trajectories: also return every step's arrays.
        devices: split the envs over this many local devices
            (:func:`env_sharding`; it divides ``num_envs``): the same
            sessions, data-parallel.

    Returns a dict of device arrays: ``episodes`` int32 () sessions that ended
    within the rollout; ``mean_return``, ``mean_score`` (also as
    ``mean_<headline>``, LUCA's ``mean_composite``), ``mean_length`` float32
    () over those (NaN if none ended). With ``trajectories``, also
    ``trajectory``: {``obs`` float32 (T, B, D), ``mask`` bool (T, B, K)
    (what the policy saw), ``action`` int32 (T, B), ``reward`` float32 (T, B),
    ``done`` bool (T, B), and the step info's ``return``, ``score``,
    ``length``, ``seed``, ``error`` (T, B) and ``episode_key`` (T, B, 2)}.
    """
    num_envs = check_positive_int(num_envs, "num_envs")
    num_steps = check_positive_int(num_steps, "num_steps")
    _check_pool(env, pool)
    if devices is not None and num_envs % check_positive_int(devices, "devices"):
        raise ValueError(f"devices: {devices} does not divide num_envs {num_envs}; allowed a divisor of it")
    return _flat_rollout(policy_fn, policy_params, key, env, pool, num_envs, num_steps, bool(trajectories),
                         env_sharding(devices))


@partial(jax.jit, static_argnames=("policy_fn", "env", "num_envs", "num_steps", "trajectories", "sharding"))
def _flat_rollout(policy_fn, policy_params, key, env, pool, num_envs, num_steps, trajectories, sharding=None):
    reset_key, run_key = jax.random.split(key)
    state, obs, mask = split_envs(
        jax.vmap(reset, in_axes=(0, None, None))(jax.random.split(reset_key, num_envs), env, pool), sharding)

    def body(carry, k):
        state, obs, mask = carry
        act_key, step_key = jax.random.split(k)
        action = policy_fn(policy_params, act_key, obs, mask)
        new_state, new_obs, new_mask, reward, done, info = jax.vmap(step, in_axes=(0, 0, 0, None, None))(
            jax.random.split(step_key, num_envs), state, action, env, pool
        )
        record = {"obs": obs, "mask": mask, "action": action, "reward": reward, "done": done,
                  **{k: info[k] for k in ("return", "score", "length", "seed", "episode_key", "error")}}
        if env.headline != "score":
            record[env.headline] = info["score"]
        return split_envs((new_state, new_obs, new_mask), sharding), split_envs(record, sharding, axis=0)

    _, record = jax.lax.scan(body, (state, obs, mask), jax.random.split(run_key, num_steps))
    out = episode_statistics(record["done"], record["return"], record["score"], record["length"], env.headline)
    if trajectories:
        out["trajectory"] = record
    return out


def episode_statistics(done, returns, score, length, headline: str = "score") -> dict:
    """Statistics of the episodes that ended (``done``) among arrays of any
    equal shape: ``episodes`` int32 (), ``mean_return``, ``mean_score`` (also
    as ``mean_<headline>``), ``mean_length`` float32 () (NaN if none ended)."""
    count = jnp.sum(done)
    mean = lambda x: jnp.sum(jnp.where(done, x, 0.0)) / count  # noqa: E731 -- 0/0 is NaN: no episode ended
    out = {"episodes": count.astype(jnp.int32), "mean_return": mean(returns), "mean_score": mean(score),
           "mean_length": mean(length.astype(jnp.float32))}
    out[f"mean_{headline}"] = out["mean_score"]
    return out
