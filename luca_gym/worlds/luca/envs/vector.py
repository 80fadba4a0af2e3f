"""``LucaVectorEnv``: many LUCA sessions at once over ``jit(vmap(core.step))``.

The session state stays on the device as one batched pytree; observations
cross to numpy only at the Gymnasium boundary (``numpy=False`` keeps them as
JAX arrays). Actions are parsed by :func:`luca_gym.worlds.luca.core.parse_action`,
the same code as :class:`~luca_gym.worlds.luca.envs.LucaEnv`'s, with a leading batch axis.
Every autoreset draws a fresh organism seed and generates that organism with
:func:`luca_gym.worlds.luca.generator.generate` (batched, for the finished
sub-envs only); it never replays a cached first state. An explicit reset to
the seeds of the last explicit reset reuses their organisms (a pure function
of the seed: the same sessions, without generating them again). ``benchmarks/rollout.py`` measures what
that costs. The pure rollouts live in :mod:`luca_gym.functional`.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.envs.spaces import action_space, observation_space, organism_seeds, parse_action, reset_options, to_numpy_observation
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.functional import organism_batch

_batched_reset = jax.jit(jax.vmap(core.reset, in_axes=(0, 0, None)), static_argnums=2)
_batched_step = jax.jit(jax.vmap(core.step, in_axes=(0, 0, None)), static_argnums=2)
_batched_scores = jax.jit(jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None)), static_argnums=1)


@jax.jit
def _select(mask, new, old):
    """Rows of ``new`` where ``mask``, else rows of ``old`` (any pytree)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


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
        tier, mode, n_genes, backwards, budget, max_steps, dense_shaping,
            shaping_scale, shaping_gamma: as LucaEnv.
        autoreset_mode: "next_step" (default: the step after an episode ends
            resets that sub-env and ignores its action) or "same_step" (the
            ending step returns the new episode's first observation; the last
            one is in ``info["final_obs"]``).
        numpy: return numpy observations (default) or JAX arrays.
        sealed: None (default), a secret, a :class:`luca_gym.seal.Seal` or
            True (``$LUCA_GYM_SECRET``): organisms from their sealed seeds
            (:mod:`luca_gym.seal`), as :class:`~luca_gym.worlds.luca.envs.LucaEnv`.

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
        budget: int | None = None,
        shaping_scale: float = 0.1,
        shaping_gamma: float = 1.0,
        sealed=None,
    ):
        num_envs = spec.check_positive_int(num_envs, "num_envs")
        self.seal = seal_mod.make_seal(sealed)
        modes = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
        if autoreset_mode not in modes and autoreset_mode not in modes.values():
            raise ValueError(f"autoreset_mode: {autoreset_mode!r} not allowed; allowed 'next_step' or 'same_step'")
        self.autoreset_mode = modes.get(autoreset_mode, autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.params = core.make_params(tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
                                       shaping_scale=shaping_scale, shaping_gamma=shaping_gamma)
        self.num_envs = int(num_envs)
        backwards = spec.check_bool(backwards, "backwards")
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, backwards
        self.numpy = spec.check_bool(numpy, "numpy")
        self.single_observation_space = observation_space(self.params)
        self.single_action_space = action_space(self.params)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.state = None
        self._organisms = self._keys = None
        self._given = None  # (seeds, (organisms, keys)) of the last reset with organism_seeds
        self.organism_seeds = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)

    # -- helpers -----------------------------------------------------------------
    def _draw_seeds(self, count: int) -> np.ndarray:
        return self.np_random.integers(0, spec.DRAWN_SEED_LIMIT, size=count)

    def _fresh(self, mask: np.ndarray, obs, state, seeds=None):
        """Reset the sub-envs in ``mask`` on new organisms (drawn seeds unless
        ``seeds`` are given); only those organisms are generated."""
        count = int(mask.sum())
        given = seeds is not None
        seeds = self._draw_seeds(count) if seeds is None else seeds
        if given and self._given is not None and np.array_equal(self._given[0], seeds):
            # The same organisms asked for again (an organism is a pure function of its seed): no regeneration.
            organisms, keys = self._given[1]
        else:
            organisms, keys = organism_batch(seeds, self.tier, self.n_genes, self.mode, self.backwards, sealed=self.seal)
            if given:
                self._given = (np.array(seeds, copy=True), (organisms, keys))
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

    # -- gymnasium API -----------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = reset_options(options, ("organism_seeds",))
        seeds = organism_seeds(options["organism_seeds"], self.num_envs) if "organism_seeds" in options else None
        obs, self.state = self._fresh(np.ones(self.num_envs, bool), None, None, seeds=seeds)
        self._autoreset[:] = False
        return self._out(obs), {"organism_seed": self.organism_seeds.copy()}

    def step(self, actions):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        action = parse_action(actions, self.params, (self.num_envs,))
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
        self.state = state
        return self._out(obs), reward.astype(np.float32), terminated, truncated, info


