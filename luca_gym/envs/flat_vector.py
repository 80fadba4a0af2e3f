"""``FlatVectorEnv``: the functional env (:mod:`luca_gym.functional`) as a
Gymnasium vector env, for any world with a flat codec.

``gymnasium.make_vec("luca_gym/<Stem>Flat-v0", num_envs=...)`` builds it (the
flat ids' ``vector_entry_point``): ``num_envs`` sessions stepped as one
``jit(vmap(functional.step))``, each new session opened on an instance drawn
from a pool (:func:`luca_gym.functional.make_pool`: ``pool_size`` training
seeds from 10 000 up, never the evaluation seeds 0-19; opened once, so an
autoreset is a gather). A score on the pool is a training score; held-out
instances measure generalisation. ``vectorization_mode="sync"`` still gives
Gymnasium's ``SyncVectorEnv`` of the single flat env, with every option of it.

Spaces: ``Box`` observation vectors (num_envs, D) and ``MultiDiscrete`` actions
(num_envs,) of K each, the legal ones in ``info["action_mask"]`` (num_envs, K).
Autoreset is Gymnasium's ``SAME_STEP``: where an episode ends, the step
returns the next session's first observation, the ended one's last in
``info["final_obs"]``, and its undiscounted ``return``, headline score
(``score``, also under the world's headline name), ``length``, instance
``seed`` and ``episode_key`` (the key its noise was renewed with,
:func:`luca_gym.functional.renewed`) where ``info["_score"]`` (etc.) is
True; ``info["instance_seed"]``
is the seed of the session each env runs now (the new one where one ended).

Actions are checked on the host before anything runs: a batch that is not
``num_envs`` integers in [0, K) raises ValueError naming the first bad one,
and no session moves. An illegal (masked) action inside [0, K) is the world's
to refuse: at no cost, with its code in ``info["error"]``.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from luca_gym import functional as F
from luca_gym import worlds
from luca_gym.boundary import check_flat_actions, reset_options
from luca_gym.validate import check_positive_int, check_seed, short_repr


@partial(jax.jit, static_argnames=("env", "num_envs"))
def _reset(key, env, pool, num_envs):
    return jax.vmap(lambda k: F.reset(k, env, pool))(jax.random.split(key, num_envs))


@partial(jax.jit, static_argnames=("env",))
def _step(key, state, actions, env, pool):
    """``functional.step`` for the batch, and each session's own next
    observation before any autoreset (the codec's step again: the same
    computation in the same program, which XLA computes once)."""
    keys = jax.random.split(key, actions.shape[0])
    out = jax.vmap(lambda k, s, a: F.step(k, s, a, env, pool))(keys, state, actions)
    final = jax.vmap(lambda s, a: env.step(s.session, a)[1])(state, actions)
    return out, final


class FlatVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` sessions of ``world``'s flat codec stepped together on a pool.

    Args:
        num_envs: sessions side by side.
        world: a registered world's name (keyword-only, required).
        pool_size: training instances, seeds 10 000 .. 10 000 + pool_size - 1
            (default 1024).
        pool_seeds: the pool's instance seeds instead (e.g. a held-out range
            for evaluation); excludes ``pool_size``.
        settings: the world's flat-codec settings as a dict, instead of
            (or beside) keyword arguments: ``make_vec(id, num_envs=8,
            settings=dict(n_nodes=5))`` is ``make_vec(id, num_envs=8,
            n_nodes=5)``.
        **kwargs: the world's flat-codec settings (LUCA: ``tier``,
            ``n_genes``, ``mode``, ``budget``, ``analyst``...; dag:
            ``n_nodes``, ``n_states``...), checked by the codec; a setting it
            does not take raises ValueError naming it.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, num_envs: int, *, world: str, pool_size: int | None = None, pool_seeds=None,
                 settings: dict | None = None, **kwargs):
        settings = worlds.unfold_settings(settings, kwargs)
        self.num_envs = check_positive_int(num_envs, "num_envs")
        self.world = worlds.get(world)
        if self.world.flat is None:
            raise ValueError(f"world {self.world.name!r} has no flat codec; FlatVectorEnv needs one")
        self.env = _make_codec(self.world, settings)
        if pool_seeds is not None and pool_size is not None:
            raise ValueError("pool_size and pool_seeds: give one (pool_seeds are the pool)")
        seeds = F.training_seeds(F.DEFAULT_POOL_SIZE if pool_size is None else check_positive_int(pool_size, "pool_size")) \
            if pool_seeds is None else pool_seeds
        self.pool = F.make_pool(self.env, seeds)
        self.num_actions, self.observation_size = int(self.env.num_actions), int(self.env.observation_size)
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (self.observation_size,), np.float32)
        self.single_action_space = spaces.Discrete(self.num_actions)
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.num_envs, self.observation_size), np.float32)
        self.action_space = spaces.MultiDiscrete(np.full(self.num_envs, self.num_actions))
        self._key = jax.random.PRNGKey(0)
        self._state = None
        self._mask = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Open ``num_envs`` sessions on pool instances drawn by ``seed`` (None:
        the env's own key, moved on). No options are taken."""
        reset_options(options, ())
        if seed is not None:
            self._key = jax.random.PRNGKey(check_seed(seed, "seed"))
        self._key, key = jax.random.split(self._key)
        self._state, obs, mask = _reset(key, self.env, self.pool, self.num_envs)
        obs, self._mask, seeds = jax.device_get((obs, mask, self._state.seed))
        return np.asarray(obs), {"action_mask": self._mask, "_action_mask": np.ones(self.num_envs, bool),
                                 "instance_seed": seeds, "_instance_seed": np.ones(self.num_envs, bool)}

    def step(self, actions):
        """One flat action per env (``num_envs`` integers in [0, K)); see the
        module's notes for the autoreset and the ``info`` keys."""
        if self._state is None:
            raise RuntimeError("step() before reset(): call reset() first")
        actions = check_flat_actions(actions, self.num_actions, (self.num_envs,), name="actions")
        self._key, key = jax.random.split(self._key)
        (self._state, obs, mask, reward, done, info), final = _step(key, self._state, actions, self.env, self.pool)
        obs, mask, reward, done, info = jax.device_get((obs, mask, reward, done, info))
        truncated = np.asarray(info.pop("truncated")) & done
        terminated = done & ~truncated
        self._mask = mask
        every = np.ones(self.num_envs, bool)
        out = {"action_mask": mask, "_action_mask": every, "error": np.asarray(info.pop("error")), "_error": every,
               "instance_seed": np.asarray(jax.device_get(self._state.seed)), "_instance_seed": every}
        info.pop("done")
        if done.any():
            for name, values in info.items():  # the ended sessions' figures, where they ended
                ended = done.reshape((-1,) + (1,) * (np.ndim(values) - 1))
                out[name] = np.where(ended, values, np.zeros_like(values))
                out[f"_{name}"] = done.copy()
            out["final_obs"] = np.where(done[:, None], np.asarray(final), 0.0).astype(np.float32)
            out["_final_obs"] = done.copy()
        return np.asarray(obs), np.asarray(reward), terminated, truncated, out

    def close(self, **kwargs):
        """Drop the sessions (a closed env must be reset before it steps)."""
        self._state = None
        super().close(**kwargs)

    def __repr__(self) -> str:
        return f"FlatVectorEnv({self.num_envs}, world={self.world.name!r}, env={self.env}, pool of {self.pool.size})"


def _make_codec(world, settings: dict):
    import inspect

    from luca_gym.protocol import load

    parameters = inspect.signature(load(world.flat)).parameters.values()
    accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    # A codec declared (**settings) takes what its config takes: it checks the names itself (TypeError, below).
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters)
    unknown = [] if open_ended else sorted(k for k in settings if k not in accepted)
    if unknown:
        raise ValueError(f"settings: {', '.join(map(repr, unknown))} not taken by the batched flat env of world "
                         f"{world.name!r} (allowed {', '.join(accepted)}, pool_size, pool_seeds); "
                         f"gymnasium.make_vec(..., vectorization_mode='sync') gives every option of the single env")
    try:
        return world.make_flat(**settings)
    except TypeError as error:
        raise ValueError(f"settings: {short_repr(settings)} not allowed: {error}") from None


def vector_entry_point(world: str):
    """The ``vector_entry_point`` of ``world``'s flat Gymnasium id."""
    return partial(FlatVectorEnv, world=world)
