"""``FlatSB3VecEnv``: many sessions of any world with a flat codec
(:class:`luca_gym.protocol.FlatCodec`) as one stable-baselines3 ``VecEnv``,
stepped by ``jit(vmap(codec.step))``.

The sessions' state stays on the device as one batched pytree; only the
observation vectors, masks, rewards and flags cross to numpy. A finished
session is replaced on the same step (SB3's convention) by a session on a
*fresh* instance: a new seed drawn from the env's RNG, its instance built by
``codec.instances`` and never used twice. Instances are built a batch ahead
of need (``generation_batch`` at a time), so the host-side generator runs a
few large calls rather than one per finished session (LUCA, 64 envs, when its
CPU generator padded calls to 16 organisms: 2.7-4.6x faster, ``benchmarks/sb3.py``).
The last observation of the finished episode is in
``infos[i]["terminal_observation"]``. With ``pool_size`` M, each new episode
draws its instance instead from a pool: the instances of the M seeds from
``min_instance_seed`` up, built once at the first reset; each session drawn
from it is renewed with a key from the env's RNG, as the functional env's
are (:func:`luca_gym.functional.renewed`), so an instance met twice is not
met with the same noise. A world may pass its own instance source
(``source``, a :class:`luca_gym.pools.InstanceSource`: LUCA's
:class:`~luca_gym.worlds.luca.envs.LucaSB3VecEnv` passes its disk-stored
organism pool, whose episodes draw their noise keys with the row); a source
that draws keys hands the codec (instance, key) pairs
(:func:`luca_gym.pools.codec_instances`) and its sessions are not renewed
again.

Training instances are drawn from ``[min_instance_seed, DRAWN_SEED_LIMIT)``,
by default from 10 000 up, so that they never include the evaluation seeds
(0-19 by default in the harness).

Needs the ``rl`` extra (``pip install 'luca-gym[rl]'``).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as error:
    raise ImportError("luca_gym.envs.sb3_vec needs stable-baselines3: pip install 'luca-gym[rl]'") from error
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions, reset_options
from luca_gym.functional import TRAINING_SEED_START, open_sessions, renewed
from luca_gym.pools import InstanceSource, codec_instances, take
from luca_gym.protocol import FlatCodec
from luca_gym.validate import DRAWN_SEED_LIMIT, check_positive_int, check_seed, short_repr

TRAINING_SEED_LOW = TRAINING_SEED_START  # 10 000: above the evaluation seeds 0-19 with room to spare
GENERATION_BATCH = 16  # instances built ahead per refill
REOPEN_ROWS = 16  # the fewest rows one autoreset opens (padding), fewer compiles


@partial(jax.jit, static_argnames=("codec",))
def _reopen(rows, instances, keys, state, codec):
    """``state`` with the sessions at ``rows`` (int32 (R,)) opened anew on
    ``instances`` (renewed with ``keys`` uint32 (R, 2) where not None); a row
    may repeat with the same instance (padding). Returns (state, the new
    sessions' vectors (R, D) and masks (R, K))."""
    fresh, vectors, masks = _opened(instances, keys, codec)
    state = jax.tree_util.tree_map(lambda full, new: full.at[rows].set(new), state, fresh)
    return state, vectors, masks


@partial(jax.jit, static_argnames=("codec",))
def _opened(instances, keys, codec, which=None):
    """Sessions on ``instances`` (:func:`luca_gym.functional.open_sessions`),
    each renewed with its row of ``keys`` where ``keys`` is not None (only
    the rows ``which`` bool (R,) marks, where given)."""
    fresh, vectors, masks = open_sessions(instances, codec)
    if keys is not None:
        renewed_all = jax.vmap(lambda session, key: renewed(codec, session, key))(fresh, keys)
        if which is not None:
            pick = lambda new, old: jnp.where(which.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)  # noqa: E731
            renewed_all = jax.tree_util.tree_map(pick, renewed_all, fresh)
        fresh = renewed_all
    return fresh, vectors, masks


@partial(jax.jit, static_argnames=("codec",))
def _step(state, actions, codec):
    return jax.vmap(codec.step)(state, actions)


@partial(jax.jit, static_argnames=("codec",))
def _scores(state, codec):
    return jax.vmap(codec.score)(state)


def check_min_seed(value, name: str) -> int:
    """The lowest training seed: an integer in ``0 .. DRAWN_SEED_LIMIT - 1`` (ValueError naming ``name``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value < DRAWN_SEED_LIMIT:
        raise ValueError(f"{name}: {short_repr(value)} not allowed; an integer in 0..{DRAWN_SEED_LIMIT - 1}")
    return int(value)


def _padded(values: np.ndarray, least: int) -> np.ndarray:
    """``values`` padded by repeating the first to a power of two no smaller
    than ``least``, so that ``_reopen`` compiles for a few batch sizes only."""
    size = 1 << max(0, (max(values.size, least) - 1).bit_length())
    return np.concatenate([values, np.full(size - values.size, values[0])])


class FlatSB3VecEnv(VecEnv):
    """``num_envs`` sessions of a world's flat codec, for SB3.

    Args:
        codec: the world's flat codec (``luca_gym.functional.make_env(world=..., **settings)``).
        num_envs: the batch size B.
        min_instance_seed: instance seeds are drawn uniformly from
            [min_instance_seed, DRAWN_SEED_LIMIT); the default 10 000 keeps
            training instances apart from the evaluation seeds 0-19.
        generation_batch: the fewest instances built in one call. Fresh
            instances are built ahead in batches of this many times a power
            of two, and each is used once.
        seed: seeds the draw of instance seeds (``seed()`` before a
            ``reset()`` reseeds it, SB3's convention).
        pool_size: None (default): a fresh instance every episode. M: every
            episode on an instance drawn uniformly from seeds
            min_instance_seed .. min_instance_seed + M - 1, built in one call
            at the first reset; many times faster where building an instance
            costs more than its episode (LUCA easy, 256 envs on a 2-core CPU:
            37,700 masked-random steps/s on a pool against 3,900 fresh).
        source: each new episode's instance from this
            :class:`~luca_gym.pools.InstanceSource` in place of the one
            ``pool_size`` describes (a world's own: its kind, pool and
            generation are the source's; ``pool_size`` must then be None).

    Observations float32 (B, D), actions int (B,) in [0, K),
    ``action_masks()`` bool (B, K). ``reset()`` and every step return numpy.
    ``set_options([{"instance_seed": k}, ...])`` pins instances for the next
    ``reset()``.

    ``infos[i]`` holds ``error_code`` (0: accepted; a masked action is
    refused at no cost); where sub-env i's episode ended on this step, also
    ``terminal_observation`` (float32 (D,)), ``episode`` (``r`` return, ``l``
    length, ``t`` seconds since construction: SB3's Monitor format),
    ``TimeLimit.truncated``, ``score`` (the world's headline score, also under
    its name) and ``instance_seed``. ``reset_infos[i]`` holds ``instance_seed``.
    """

    # Sessions drawn from the pool are renewed (unless the source draws each
    # episode's noise key itself; a subclass may also set this False).
    renews_pool_sessions = True

    seed_name = "instance_seed"  # the key of an instance's seed in infos, options and get_attr

    def __init__(self, codec: FlatCodec, num_envs: int, *, min_instance_seed: int = TRAINING_SEED_LOW,
                 generation_batch: int = GENERATION_BATCH, seed: int | None = None, pool_size: int | None = None,
                 source: InstanceSource | None = None):
        if not isinstance(codec, FlatCodec):
            raise ValueError(f"codec: {short_repr(codec)} is not a flat codec; make one with functional.make_env(world=...)")
        num_envs = check_positive_int(num_envs, "num_envs")
        self.codec = codec
        self.generation_batch = check_positive_int(generation_batch, "generation_batch")
        name = self._min_seed_name()
        self.min_instance_seed = check_min_seed(min_instance_seed, name)
        self.pool_size = None if pool_size is None else check_positive_int(pool_size, "pool_size")
        if self.pool_size is not None and self.min_instance_seed + self.pool_size > DRAWN_SEED_LIMIT:
            raise ValueError(f"pool_size: {self.pool_size} not allowed from {name} {self.min_instance_seed}; "
                             f"the pool's seeds must lie below {DRAWN_SEED_LIMIT}")
        self.render_mode = None
        self.rng = np.random.default_rng(None if seed is None else check_seed(seed))
        observation_space = spaces.Box(-1.0, 1.0, (codec.observation_size,), np.float32)
        super().__init__(num_envs, observation_space, spaces.Discrete(codec.num_actions))
        self.state = None
        self.instance_seeds = np.zeros(num_envs, np.int64)
        self._vectors = np.zeros((num_envs, codec.observation_size), np.float32)
        self._masks = np.zeros((num_envs, codec.num_actions), bool)
        self._returns = np.zeros(num_envs, np.float64)
        self._lengths = np.zeros(num_envs, np.int64)
        self._actions: np.ndarray | None = None
        # Each new episode's instance (luca_gym.pools): the pool's, built at the first reset, or fresh ones built ahead.
        seeds = None if self.pool_size is None else np.arange(self.min_instance_seed, self.min_instance_seed + self.pool_size,
                                                              dtype=np.int64)
        if source is None:
            source = InstanceSource("fresh" if seeds is None else "pool", lambda seeds: (self._instances(seeds), None),
                                    pool_seeds=seeds, generation_batch=self.generation_batch, low=self.min_instance_seed)
        elif not isinstance(source, InstanceSource) or self.pool_size is not None:
            raise ValueError(f"source: {short_repr(source)} not allowed; an InstanceSource, with pool_size None")
        self.source = source
        self._started = time.perf_counter()

    def _min_seed_name(self) -> str:
        return f"min_{self.seed_name}"

    # -- hooks a world's subclass may override ----------------------------------------
    def _instances(self, seeds: np.ndarray):
        """The instances of ``seeds`` (B leading), as numpy."""
        return jax.device_get(self.codec.instances(seeds))

    def _ended_info(self, state, rows: np.ndarray) -> list[dict]:
        """What ``infos[i]`` reports of the session that ended at each of ``rows``
        (``state``: the batch after the step): the headline score."""
        scores = np.asarray(jax.device_get(_scores(state, self.codec)))
        return [{"score": float(scores[i]), self.codec.headline: float(scores[i])} for i in rows]

    # -- sessions ---------------------------------------------------------------------
    def _fresh(self, count: int):
        """(seeds int64 (count,), instances as numpy) of ``count`` new
        episodes, from :attr:`source`: instances never used before (built
        ahead, ``generation_batch`` x a power of two at a time) or, with
        a pool, drawn uniformly from the pool; as the codec opens them
        (:func:`luca_gym.pools.codec_instances`: with the keys the source
        drew, where it draws them)."""
        seeds, instances, keys = self.source.draw(self.rng, count)
        return seeds, codec_instances(instances, keys)

    def _episode_keys(self, count: int) -> np.ndarray | None:
        """uint32 (count, 2): keys renewing sessions drawn from the pool
        (:func:`luca_gym.functional.renewed`); None without a pool (a fresh
        instance is never met twice)."""
        if self.source.kind != "pool" or self.source.renew or not self.renews_pool_sessions:
            return None
        return self.rng.integers(0, 2**32, size=(count, 2), dtype=np.uint32)

    def _reopen(self, rows: np.ndarray) -> None:
        """Open sessions on fresh instances at ``rows`` (int (R,))."""
        seeds, instances = self._fresh(rows.size)
        pad = _padded(np.arange(rows.size), min(REOPEN_ROWS, self.num_envs))
        keys = self._episode_keys(rows.size)
        self.state, vectors, masks = _reopen(rows[pad].astype(np.int32), take(instances, pad),
                                             None if keys is None else keys[pad], self.state, self.codec)
        vectors, masks = jax.device_get((vectors, masks))
        self._vectors[rows], self._masks[rows] = vectors[: rows.size], masks[: rows.size]
        self.instance_seeds[rows] = seeds
        self._returns[rows], self._lengths[rows] = 0.0, 0

    # -- VecEnv API -------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Open a session in every sub-env: on the instance pinned by
        ``set_options``, else on a new one (:meth:`_fresh`). Returns float32 (B, D)."""
        if self._seeds[0] is not None:
            self.rng = np.random.default_rng(check_seed(self._seeds[0], "seed"))
        self.source.clear()
        pinned = {}
        for i, options in enumerate(self._options):
            options = reset_options(options, (self.seed_name,))
            if self.seed_name in options:
                pinned[i] = check_seed(options[self.seed_name], f"options[{i}][{self.seed_name!r}]")
        free = np.array([i for i in range(self.num_envs) if i not in pinned], np.int64)
        rows = np.array(list(pinned), np.int64)
        parts = [(free, *self._fresh(free.size))] if free.size else []
        if pinned:
            given = np.array(list(pinned.values()), np.int64)
            parts.append((rows, given, self._instances(given)))
        seeds = np.zeros(self.num_envs, np.int64)
        instances = jax.tree_util.tree_map(lambda x: np.zeros((self.num_envs,) + x.shape[1:], x.dtype), parts[0][2])
        for at, part_seeds, part in parts:
            seeds[at] = part_seeds
            for full, values in zip(jax.tree_util.tree_leaves(instances), jax.tree_util.tree_leaves(part)):
                full[at] = values
        keys = self._episode_keys(self.num_envs)
        drawn = np.ones(self.num_envs, bool)
        drawn[rows] = False  # a pinned instance opens as the codec builds it
        self.state, vectors, masks = _opened(instances, keys, self.codec, None if keys is None else drawn)
        vectors, masks = jax.device_get((vectors, masks))
        self._vectors, self._masks = np.array(vectors), np.array(masks)
        self.instance_seeds = seeds
        self._returns[:], self._lengths[:] = 0.0, 0
        self.reset_infos = [{self.seed_name: int(s)} for s in seeds]
        self._reset_seeds()
        self._reset_options()
        return self._vectors.copy()

    def step_async(self, actions: np.ndarray) -> None:
        """Check ``actions`` (integers (B,) in [0, K)); ValueError otherwise, and nothing changes."""
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        self._actions = check_flat_actions(actions, self.codec.num_actions, (self.num_envs,), "actions")

    def step_wait(self):
        """Returns (observations float32 (B, D), rewards float32 (B,), dones
        bool (B,), infos list of B dicts)."""
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        state, vectors, masks, reward, terminated, truncated, codes = _step(self.state, self._actions, self.codec)
        self._actions = None
        self.state = state
        vectors, masks, reward, terminated, truncated, codes = jax.device_get(
            (vectors, masks, reward, terminated, truncated, codes)
        )
        self._vectors, self._masks = np.array(vectors), np.array(masks)  # writable: finished rows are replaced below
        self._returns += reward
        self._lengths += 1
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{"error_code": int(c)} for c in codes]
        rows = np.flatnonzero(dones)
        if rows.size:
            wall = round(time.perf_counter() - self._started, 6)
            for i, ended in zip(rows, self._ended_info(state, rows)):
                infos[i].update(
                    terminal_observation=self._vectors[i].copy(),
                    episode={"r": float(self._returns[i]), "l": int(self._lengths[i]), "t": wall},
                    **ended,
                )
                infos[i][self.seed_name] = int(self.instance_seeds[i])
                # SB3 bootstraps the value of an episode cut by the call limit, not of one that ended.
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            self._reopen(rows)
        return self._vectors.copy(), reward.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        """bool (B, K): each sub-env's legal flat actions now."""
        if self.state is None:
            raise RuntimeError("action_masks() called before reset()")
        return self._masks.copy()

    def close(self) -> None:
        self.state = None

    def get_attr(self, attr_name: str, indices=None) -> list:
        """The sub-envs share one compiled setting, so every attribute is this
        env's, repeated per index; the instance seed is per sub-env."""
        rows = list(self._get_indices(indices))
        if attr_name == self.seed_name:
            return [int(self.instance_seeds[i]) for i in rows]
        value = getattr(self, attr_name)
        return [value for _ in rows]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise AttributeError(
            f"set_attr: {attr_name!r} cannot be set; the sub-envs share one compiled setting "
            f"(build a new {type(self).__name__})"
        )

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        """Only ``action_masks`` (sb3-contrib's ``get_action_masks``): one
        bool (K,) row per index."""
        if method_name != "action_masks":
            raise AttributeError(f"env_method: {method_name!r} not available; allowed 'action_masks'")
        masks = self.action_masks(*method_args, **method_kwargs)
        return [masks[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        """No sub-env is a wrapped Gymnasium env."""
        return [False for _ in self._get_indices(indices)]
