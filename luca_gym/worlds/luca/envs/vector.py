"""``LucaVectorEnv``: many LUCA sessions at once over ``jit(vmap(core.step))``.

The session state stays on the device as one batched pytree; observations
cross to numpy only at the Gymnasium boundary (``numpy=False`` keeps them as
JAX arrays). Actions are parsed by :func:`luca_gym.worlds.luca.core.parse_action`,
the same code as :class:`~luca_gym.worlds.luca.envs.LucaEnv`'s, with a leading batch axis.
Every autoreset opens a new session on the finished sub-envs only (one jitted
call); it never replays a cached first state. Its organism comes from
:class:`luca_gym.worlds.luca.pools.EpisodeOrganisms`: by default drawn from a
pool of training organisms stored on disk, with a fresh noise key
(``organisms="fresh"``: a newly generated organism every episode, generated
ahead of need). An explicit reset to the seeds of the last explicit reset
reuses their organisms (a pure function of the seed: the same sessions,
without generating them again). ``benchmarks/rollout.py`` measures what each
costs. The pure rollouts live in :mod:`luca_gym.functional`.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import jax
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.envs.spaces import action_space, observation_space, organism_seeds, parse_action, reset_options, to_numpy_observation
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.functional import organism_batch
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.pools import DEFAULT_POOL_SIZE, EpisodeOrganisms

_batched_reset = jax.jit(jax.vmap(core.reset, in_axes=(0, 0, None)), static_argnums=2)
REOPEN_ROWS = 16  # the fewest rows one autoreset opens (padding), so few shapes compile
SCORE_NAMES = ("composite", "prediction", "diagnosis", "rescue")


@partial(jax.jit, static_argnames=("params",))
def _step(state, action, params):
    """``vmap(core.step)`` and the scores of the sessions after it (read where one ended)."""
    obs, state, reward, terminated, truncated, info = jax.vmap(core.step, in_axes=(0, 0, None))(state, action, params)
    scores = jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None))(state, params)
    return obs, state, reward, terminated, truncated, info["error"], {k: scores[k] for k in SCORE_NAMES}


# ``state`` is donated (updated in place, not copied): callers pass a state no one else holds.
@partial(jax.jit, static_argnames=("params",), donate_argnames=("state",))
def _open_rows(rows, keys, source, index, obs, state, params):
    """``obs`` and ``state`` with the sessions at ``rows`` (int32 (R,)) opened
    anew on the organisms ``source[index]`` (index (R,)) with noise ``keys``
    (R, 2); a row may repeat with the same organism and key (padding)."""
    organisms = jax.tree_util.tree_map(lambda x: x[index], source)
    new_obs, new_state = jax.vmap(core.reset, in_axes=(0, 0, None))(keys, organisms, params)
    put = lambda full, new: full.at[rows].set(new)  # noqa: E731
    return jax.tree_util.tree_map(put, obs, new_obs), jax.tree_util.tree_map(put, state, new_state)


class LucaVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` LUCA sessions stepped together.

    Args:
        num_envs: the batch size.
        tier: and mode, n_genes, backwards, budget, max_steps, dense_shaping,
            shaping_scale, shaping_gamma: as LucaEnv.
        autoreset_mode: "next_step" (default: the step after an episode ends
            resets that sub-env and ignores its action) or "same_step" (the
            ending step returns the new episode's first observation; the last
            one is in ``info["final_obs"]``).
        numpy: return numpy observations (default) or JAX arrays.
        sealed: None (default), a secret, a :class:`luca_gym.seal.Seal` or
            True (``$LUCA_GYM_SECRET``): organisms from their sealed seeds
            (:mod:`luca_gym.seal`), as :class:`~luca_gym.worlds.luca.envs.LucaEnv`.
        organisms: where a new episode's organism comes from when no seed is
            given: ``"pool"`` (default: drawn uniformly from the organisms of
            the training seeds 10 000 .. 10 000 + pool_size - 1, generated at
            the first draw and stored beside the compilation cache, each
            episode with a fresh noise key from the env's RNG; see
            :mod:`luca_gym.worlds.luca.pools` for what the pool's size means
            for held-out organisms) or ``"fresh"`` (a new organism seed per
            episode drawn from [0, 2**31 - 1), its organism generated ahead of
            need, with the seed's own noise key).
        pool_size: the pool's organisms (default 1024: generated in about
            3 s for medium organisms on a 2-core CPU, about 65 s for hard
            disease ones, once; 10^4 and more for training that is to
            generalise to held-out organisms).
        generation_batch: ``organisms="fresh"`` generates at least this many
            organisms per call, kept for later episodes (default 16; an
            accelerator, whose generator calls hold 256, wants 256).

    Actions are the LucaEnv dict with a leading ``num_envs`` axis. ``info``
    holds ``error_code`` per sub-env and, where an episode ended on this step,
    ``composite``, ``prediction``, ``diagnosis``, ``rescue``, ``organism_seed``
    (with the ``_name`` masks Gymnasium uses). ``reset(options={"organism_seeds":
    [...]})`` pins every sub-env's organism, with the seed's own noise key
    (the sessions a single env opens).
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
        organisms: str = "pool",
        pool_size: int = DEFAULT_POOL_SIZE,
        generation_batch: int = 16,
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
        self.episodes = EpisodeOrganisms(organisms, LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards),
                                         self.seal, pool_size=pool_size, generation_batch=generation_batch)
        self.organisms = self.episodes.organisms
        self.numpy = spec.check_bool(numpy, "numpy")
        self.single_observation_space = observation_space(self.params)
        self.single_action_space = action_space(self.params)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.state = None
        self._given = None  # (seeds, (organisms, keys)) of the last reset with organism_seeds
        self._pool = None  # the pool's organisms on the device, once drawn from
        self.organism_seeds = np.zeros(self.num_envs, np.int64)
        self._autoreset = np.zeros(self.num_envs, bool)

    @property
    def _organisms(self):
        """The sessions' organism arrays (num_envs leading), on the device."""
        return None if self.state is None else self.state.organism

    @property
    def _keys(self):
        """The sessions' noise keys uint32 (num_envs, 2)."""
        return None if self.state is None else self.state.noise_key

    # -- helpers -----------------------------------------------------------------
    def _reopen(self, mask: np.ndarray, obs, state):
        """``obs`` and ``state`` with new sessions in the sub-envs of ``mask``
        (organisms from :attr:`episodes`), opened in one jitted call."""
        rows = np.flatnonzero(mask)
        size = 1 << (max(rows.size, min(REOPEN_ROWS, self.num_envs)) - 1).bit_length()
        pad = np.concatenate([np.arange(rows.size), np.zeros(size - rows.size, np.int64)])
        if self.organisms == "pool":
            if self._pool is None:
                self._pool = jax.device_put(self.episodes.pool)  # gathered on the device: no organism crosses per step
            seeds, index, keys = self.episodes.draw_rows(self.np_random, rows.size)
            source, index = self._pool, index[pad]
        else:
            seeds, organisms, keys = self.episodes.draw(self.np_random, rows.size)
            source, index = jax.tree_util.tree_map(lambda x: x[pad], organisms), np.arange(size)
        obs, state = _open_rows(rows[pad].astype(np.int32), keys[pad], source, index, obs, state, self.params)
        self.organism_seeds = self.organism_seeds.copy()  # the arrays handed out in infos stay as they were
        self.organism_seeds[rows] = seeds
        return obs, state

    def _pinned(self, seeds: np.ndarray):
        """(organisms, noise keys) of ``seeds``, each organism with its own key."""
        if self._given is not None and np.array_equal(self._given[0], seeds):
            # The same organisms asked for again (an organism is a pure function of its seed): no regeneration.
            return self._given[1]
        organisms, keys = organism_batch(seeds, self.tier, self.n_genes, self.mode, self.backwards, sealed=self.seal)
        self._given = (np.array(seeds, copy=True), (organisms, keys))
        return organisms, keys

    # -- gymnasium API -----------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.episodes.clear()
        options = reset_options(options, ("organism_seeds",))
        if "organism_seeds" in options:
            seeds = organism_seeds(options["organism_seeds"], self.num_envs)
            organisms, keys = self._pinned(seeds)
        else:
            seeds, organisms, keys = self.episodes.draw(self.np_random, self.num_envs)
        obs, self.state = _batched_reset(keys, organisms, self.params)
        self.organism_seeds = np.array(seeds, np.int64)
        self._autoreset[:] = False
        return (to_numpy_observation(obs) if self.numpy else obs), {"organism_seed": self.organism_seeds.copy()}

    def step(self, actions):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        action = parse_action(actions, self.params, (self.num_envs,))
        obs, state, reward, terminated, truncated, error, scores = _step(self.state, action, self.params)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset.any():
            # Sub-envs whose episode ended last step start a new one; their action is ignored.
            obs, state = self._reopen(self._autoreset, obs, state)
        # One transfer of everything the host reads (the reopening above runs meanwhile).
        host_obs, reward, terminated, truncated, error, scores = jax.device_get(
            (obs if self.numpy else None, reward, terminated, truncated, error, scores))
        info = {"error_code": error}
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset.any():
            reward = np.where(self._autoreset, 0.0, reward)
            terminated = np.where(self._autoreset, False, terminated)
            truncated = np.where(self._autoreset, False, truncated)
            info["error_code"] = np.where(self._autoreset, 0, info["error_code"])
        done = terminated | truncated
        if done.any():
            for name in SCORE_NAMES:
                info[name] = np.where(done, scores[name], 0.0)
                info[f"_{name}"] = done.copy()
            info["organism_seed"] = np.where(done, self.organism_seeds, -1)
            info["_organism_seed"] = done.copy()
        if self.autoreset_mode == AutoresetMode.SAME_STEP and done.any():
            info["final_obs"] = to_numpy_observation(host_obs) if self.numpy else obs
            info["_final_obs"] = done.copy()
            obs, state = self._reopen(done, obs, state)
            host_obs = obs
        else:
            self._autoreset = done
        self.state = state
        return (to_numpy_observation(host_obs) if self.numpy else obs), reward.astype(np.float32), terminated, truncated, info
