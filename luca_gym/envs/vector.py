"""``LucaVectorEnv``: many LUCA sessions at once over ``jit(vmap(core.step))``,
and :func:`rollout`, a whole batch of sessions as one jit-compiled ``lax.scan``.

The session state stays on the device as one batched pytree; observations
cross to numpy only at the Gymnasium boundary (``numpy=False`` keeps them as
JAX arrays). Every autoreset draws a fresh organism seed and generates that
organism; it never replays a cached first state.

An autoreset generates the new organisms with :func:`luca_gym.world.generate`
(the JAX generator, batched on the device) for the finished sub-envs only and
writes them into the batch. ``benchmarks/rollout.py`` measures what that costs.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from luca_gym import core, world
from luca_gym.envs.luca_env import (
    ORGANISM_SEED_HIGH,
    action_shapes,
    action_space,
    observation_space,
    to_numpy_observation,
)

_batched_reset = jax.jit(jax.vmap(core.reset, in_axes=(0, 0, None)), static_argnums=2)
_batched_step = jax.jit(jax.vmap(core.step, in_axes=(0, 0, None)), static_argnums=2)


@jax.jit
def _select(mask, new, old):
    """Rows of ``new`` where ``mask``, else rows of ``old`` (any pytree)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def organism_batch(seeds, tier: str, n_genes: int, mode: str, backwards: bool = False):
    """Stacked organism arrays (generated as one batch, :func:`world.generate`)
    and session noise keys (B, 2) for ``seeds``."""
    seeds = np.asarray(list(seeds))
    return world.generate(seeds, tier, n_genes, mode, backwards), core.noise_keys(seeds, tier, n_genes)


def _pad_rows(count: int) -> int:
    return 1 << max(0, (count - 1).bit_length())


@jax.jit
def _merge(mask, new, old):
    """``old`` with the rows where ``mask`` replaced, in order, by the rows of
    ``new`` (padded to a power of two, so few shapes compile)."""
    position = jnp.clip(jnp.cumsum(mask) - 1, 0, None)
    return _select(mask, jax.tree_util.tree_map(lambda x: x[position], new), old)


class LucaVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` LUCA sessions stepped together.

    Args:
        num_envs: the batch size.
        tier, mode, n_genes, backwards, max_steps, dense_shaping: as LucaEnv.
        autoreset_mode: "next_step" (default: the step after an episode ends
            resets that sub-env and ignores its action) or "same_step" (the
            ending step returns the new episode's first observation; the last
            one is in ``info["final_obs"]``).
        numpy: return numpy observations (default) or JAX arrays.

    Actions are the LucaEnv dict with a leading ``num_envs`` axis. ``info``
    holds ``error_code`` per sub-env and, where an episode ended on this step,
    ``composite``, ``prediction``, ``diagnosis``, ``rescue``, ``organism_seed``
    (with the ``_name`` masks Gymnasium uses).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        tier: str = "medium",
        mode: str = "healthy",
        n_genes: int = 20,
        backwards: bool = False,
        autoreset_mode: str = "next_step",
        max_steps: int | None = None,
        dense_shaping: bool = False,
        numpy: bool = True,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs: {num_envs!r} not allowed; a positive integer")
        modes = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
        if autoreset_mode not in modes and autoreset_mode not in modes.values():
            raise ValueError(f"autoreset_mode: {autoreset_mode!r} not allowed; allowed 'next_step' or 'same_step'")
        self.autoreset_mode = modes.get(autoreset_mode, autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.params = core.make_params(tier, n_genes, mode, max_steps=max_steps, dense_shaping=dense_shaping)
        self.num_envs = int(num_envs)
        self.tier, self.mode, self.n_genes, self.backwards, self.numpy = tier, mode, n_genes, bool(backwards), numpy
        self.single_observation_space = observation_space(self.params)
        self.single_action_space = action_space(self.params)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.state = None
        self._organisms = self._keys = None
        self.organism_seeds = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)

    # -- helpers -----------------------------------------------------------------
    def _draw_seeds(self, count: int) -> np.ndarray:
        return self.np_random.integers(0, ORGANISM_SEED_HIGH, size=count)

    def _fresh(self, mask: np.ndarray, obs, state, seeds=None):
        """Reset the sub-envs in ``mask`` on new organisms (drawn seeds unless
        ``seeds`` are given); only those organisms are generated."""
        count = int(mask.sum())
        seeds = self._draw_seeds(count) if seeds is None else seeds
        organisms, keys = organism_batch(seeds, self.tier, self.n_genes, self.mode, self.backwards)
        rows = np.concatenate([np.arange(count), np.zeros(_pad_rows(count) - count, np.int64)])
        organisms, keys = jax.tree_util.tree_map(lambda x: x[rows], (organisms, keys))
        self.organism_seeds = self.organism_seeds.copy()
        self.organism_seeds[mask] = seeds
        if self._organisms is None or mask.all():
            self._organisms = jax.tree_util.tree_map(lambda x: x[: self.num_envs], organisms)
            self._keys = keys[: self.num_envs]
        else:
            m = jnp.asarray(mask)
            self._organisms, self._keys = _merge(m, (organisms, keys), (self._organisms, self._keys))
        new_obs, new_state = _batched_reset(self._keys, self._organisms, self.params)
        if state is None:
            return new_obs, new_state
        m = jnp.asarray(mask)
        return _select(m, new_obs, obs), _select(m, new_state, state)

    def _out(self, obs):
        return to_numpy_observation(obs) if self.numpy else obs

    def _actions(self, actions: dict) -> core.Action:
        if not isinstance(actions, dict):
            raise ValueError(f"actions: expected a dict of batched fields, got {type(actions).__name__}")
        b, n, s = self.num_envs, self.params.n_genes, self.params.n_signals
        shapes = action_shapes(self.params, (b,))
        unknown = sorted(set(actions) - set(shapes))
        if unknown:
            raise ValueError(f"actions: unknown field {unknown[0]!r}; allowed {sorted(shapes)}")
        if "kind" not in actions:
            raise ValueError("actions: field 'kind' is required")
        fields = {}
        for name, shape in shapes.items():
            if name in actions:
                value = np.asarray(actions[name]) if self.numpy else actions[name]
                if tuple(value.shape) != shape:
                    raise ValueError(f"actions['{name}']: shape {tuple(value.shape)} not allowed; expected {shape}")
                fields[name] = value
        defaults = {
            "gene_codes": jnp.zeros((b, n), jnp.int32),
            "signal_flags": jnp.zeros((b, s), bool),
            "prediction": jnp.full((b, 3), 0.5, jnp.float32),
            "diagnosis_target": jnp.zeros(b, jnp.int32),
            "diagnosis_type": jnp.zeros(b, jnp.int32),
            "network": jnp.zeros((b, n, 3), jnp.int32),
        }
        dtypes = {"kind": jnp.int32, "gene_codes": jnp.int32, "signal_flags": bool, "prediction": jnp.float32,
                  "diagnosis_target": jnp.int32, "diagnosis_type": jnp.int32, "network": jnp.int32}
        return core.Action(**{k: jnp.asarray(fields.get(k, defaults.get(k)), dtypes[k]) for k in dtypes})

    # -- gymnasium API -----------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"organism_seeds"})
        if unknown:
            raise ValueError(f"options: unknown key {unknown[0]!r}; allowed 'organism_seeds'")
        if "organism_seeds" in options:
            seeds = np.asarray(options["organism_seeds"], np.int64)
            if seeds.shape != (self.num_envs,) or np.any(seeds < 0):
                raise ValueError(f"options['organism_seeds']: {self.num_envs} non-negative seeds required")
            obs, self.state = self._fresh(np.ones(self.num_envs, bool), None, None, seeds=seeds)
        else:
            obs, self.state = self._fresh(np.ones(self.num_envs, bool), None, None)
        self._obs = obs
        self._autoreset[:] = False
        return self._out(obs), {"organism_seed": self.organism_seeds.copy()}

    def step(self, actions):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        action = self._actions(actions)
        obs, state, reward, terminated, truncated, core_info = _batched_step(self.state, action, self.params)
        reward, terminated, truncated = np.asarray(reward), np.asarray(terminated), np.asarray(truncated)
        info = {"error_code": np.asarray(core_info["error"])}
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset.any():
            # Sub-envs whose episode ended last step start a new one; their action is ignored.
            obs, state = self._fresh(self._autoreset, obs, state)
            reward = np.where(self._autoreset, 0.0, reward)
            terminated = np.where(self._autoreset, False, terminated)
            truncated = np.where(self._autoreset, False, truncated)
            info["error_code"] = np.where(self._autoreset, 0, info["error_code"])
        done = terminated | truncated
        if done.any():
            scores = jax.device_get(_batched_scores(state, self.params))
            for name in ("composite", "prediction", "diagnosis", "rescue"):
                info[name] = np.where(done, scores[name], 0.0)
                info[f"_{name}"] = done.copy()
            info["organism_seed"] = np.where(done, self.organism_seeds, -1)
            info["_organism_seed"] = done.copy()
        if self.autoreset_mode == AutoresetMode.SAME_STEP and done.any():
            info["final_obs"] = self._out(obs)
            info["_final_obs"] = done.copy()
            obs, state = self._fresh(done, obs, state)
        else:
            self._autoreset = done
        self.state, self._obs = state, obs
        return self._out(obs), reward.astype(np.float32), terminated, truncated, info


_batched_scores = jax.jit(jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None)), static_argnums=1)


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


@partial(jax.jit, static_argnames=("policy_fn", "params", "num_steps"))
def _rollout(policy_fn, key, organisms, noise_keys, params, num_steps):
    return _sessions(policy_fn, key, organisms, noise_keys, params, num_steps)


def _sessions(policy_fn, key, organisms, noise_keys, params, num_steps):
    obs, state = jax.vmap(core.reset, in_axes=(0, 0, None))(noise_keys, organisms, params)

    def body(carry, k):
        obs, state, total = carry
        action = policy_fn(k, obs)
        obs, state, reward, _, _, _ = jax.vmap(core.step, in_axes=(0, 0, None))(state, action, params)
        return (obs, state, total + reward), None

    (obs, state, total), _ = jax.lax.scan(body, (obs, state, jnp.zeros(noise_keys.shape[0], jnp.float32)), jax.random.split(key, num_steps))
    scores = jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None))(state, params)
    return total, scores["composite"], state.ended


def fresh_rollout(policy_fn, key: jax.Array, params: core.EnvParams, tier: str, num_envs: int, num_steps: int,
                  backwards: bool = False):
    """Draw ``num_envs`` organism seeds from ``key``, generate the organisms
    inside the jit (:func:`luca_gym.world.traced_generate`) and run one session
    on each for ``num_steps`` steps: generation and sessions in one compiled
    program, no Python in the loop.

    Returns a dict: ``returns``, ``composite``, ``ended`` (B,), ``seeds`` int64
    (B,) (``make_organism(seeds[i], tier, ...)`` is env i's organism) and
    ``generated`` bool (B,) (False only if an organism met no guarantee within
    ``world.MAX_ATTEMPTS`` attempts; its session is then meaningless).
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise ValueError(f"num_envs: {num_envs!r} not allowed; a positive integer")
    mode = "disease" if params.disease else "healthy"
    world.check_triple(0, tier, params.n_genes, mode)
    plan = world.plan(params.n_genes, mode, bool(backwards))
    t = world.tier_params(tier, params.n_genes)
    out = _fresh_rollout(policy_fn, key, params, t, plan, int(num_envs), num_steps, world.map_batch(), world.MAX_ATTEMPTS)
    out["seeds"] = np.asarray(out["seeds"]).astype(np.int64)
    return out


@partial(jax.jit, static_argnames=("policy_fn", "params", "plan", "num_envs", "num_steps", "group", "max_attempts"))
def _fresh_rollout(policy_fn, key, params, t, plan, num_envs, num_steps, group, max_attempts):
    seed_key, run_key = jax.random.split(key)
    seeds = jax.random.randint(seed_key, (num_envs,), 0, ORGANISM_SEED_HIGH).astype(jnp.uint32)
    zeros = jnp.zeros(num_envs, jnp.uint32)
    organisms, ok = jax.lax.map(
        lambda lo: world.traced_generate(jnp.uint32(0), lo, t, plan, max_attempts), seeds, batch_size=min(group, num_envs)
    )
    noise_keys = core._noise_keys(zeros, seeds, t.index.astype(jnp.uint32), jnp.uint32(params.n_genes))
    returns, composite, ended = _sessions(policy_fn, run_key, organisms, noise_keys, params, num_steps)
    return {"returns": returns, "composite": composite, "ended": ended, "seeds": seeds, "generated": ok}
