"""``LucaVectorEnv``: many LUCA sessions at once: LUCA's configuration of
the generic :class:`luca_gym.envs.core_vector.CoreVectorEnv`.

The generic env does the batching (the state on the device, autoreset on
the finished rows only in one padded jitted call that gathers pool
organisms on the device and updates the donated state in place, one
transfer per step). LUCA gives it two things (the design at the top of
:mod:`luca_gym.envs.core_vector`):

* its program, :class:`LucaProgram`: the session's own ``reset`` and
  ``step`` (which return the observation they compute) and the jitted
  scorer, so the four scores of a session that ended come out of the same
  compiled step (``extras``) rather than from the host; the call limit ends
  a session as ``truncated``;
* its instance source, :class:`luca_gym.worlds.luca.pools.EpisodeOrganisms`:
  by default organisms drawn from a pool of training organisms stored on
  disk, with a fresh noise key per episode (``organisms="fresh"``: a newly
  generated organism every episode, generated ahead of need).

Actions are parsed by :func:`luca_gym.worlds.luca.core.parse_action`, the
same code as :class:`~luca_gym.worlds.luca.envs.LucaEnv`'s, with a leading
batch axis; observations cross to numpy only at the Gymnasium boundary
(``numpy=False`` keeps them as JAX arrays). An explicit reset to the seeds
of the last explicit reset reuses their organisms (a pure function of the
seed: the same sessions, without generating them again).
``benchmarks/rollout.py`` measures what each costs. The pure rollouts live
in :mod:`luca_gym.functional`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium.vector import AutoresetMode

from luca_gym import seal as seal_mod
from luca_gym.envs.core_vector import AUTORESET_MODES, CoreVectorEnv
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.envs.spaces import action_space, observation_space, parse_action, to_numpy_observation
from luca_gym.worlds.luca.pools import DEFAULT_POOL_SIZE, EpisodeOrganisms

SCORE_NAMES = ("composite", "prediction", "diagnosis", "rescue")


@dataclass(frozen=True)
class LucaProgram:
    """LUCA's session as :class:`~luca_gym.envs.core_vector.CoreVectorEnv`
    vmaps it (static: one compile per ``params``): an instance is an
    organism's arrays, its key the session's noise key."""

    params: core.EnvParams

    def open(self, organism, key):
        """(observation, state) of a fresh session (its baseline measured)."""
        return core.reset(key, organism, self.params)

    def step(self, state, action):
        """``core.step`` and the scores of the session after it (read where it ended)."""
        obs, state, reward, terminated, truncated, info = core.step(state, action, self.params)
        scores = core.session_scores(state, self.params, network=False)
        return obs, state, reward, terminated, truncated, info["error"], {k: scores[k] for k in SCORE_NAMES}


class LucaVectorEnv(CoreVectorEnv):
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
    seed_name = "organism_seed"

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
        if autoreset_mode not in AUTORESET_MODES and autoreset_mode not in AUTORESET_MODES.values():
            raise ValueError(f"autoreset_mode: {autoreset_mode!r} not allowed; allowed 'next_step' or 'same_step'")
        self.params = core.make_params(tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
                                       shaping_scale=shaping_scale, shaping_gamma=shaping_gamma)
        backwards = spec.check_bool(backwards, "backwards")
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, backwards
        self.episodes = EpisodeOrganisms(organisms, LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards),
                                         self.seal, pool_size=pool_size, generation_batch=generation_batch)
        self.organisms = self.episodes.organisms
        self._setup(num_envs, LucaProgram(self.params), self.episodes, observation_space(self.params),
                    action_space(self.params), autoreset_mode, numpy)

    @property
    def organism_seeds(self) -> np.ndarray:
        """int64 (num_envs,): the organism seed of each sub-env's session."""
        return self.instance_seeds

    @property
    def _organisms(self):
        """The sessions' organism arrays (num_envs leading), on the device."""
        return None if self.state is None else self.state.organism

    @property
    def _keys(self):
        """The sessions' noise keys uint32 (num_envs, 2)."""
        return None if self.state is None else self.state.noise_key

    # -- LUCA's part of the generic env ----------------------------------------------
    def _parse_actions(self, actions):
        return parse_action(actions, self.params, (self.num_envs,))

    def _to_numpy(self, obs):
        return to_numpy_observation(obs)

    def _observation(self, obs):
        return to_numpy_observation(obs) if self.numpy else obs

    def _ended_info(self, info: dict, done: np.ndarray, state, extras: dict) -> None:
        for name in SCORE_NAMES:
            info[name] = np.where(done, extras[name], 0.0)
            info[f"_{name}"] = done.copy()
