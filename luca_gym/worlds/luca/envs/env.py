"""``LucaEnv``: the LUCA session as a ``gymnasium.Env``: the generic env over
LUCA's core (:class:`luca_gym.envs.core.CoreEnv` with
:mod:`luca_gym.worlds.luca.core.protocol`) under LUCA's signature and with
the host :class:`~luca_gym.worlds.luca.session.Session`'s names; it
translates, the core decides.

At the boundary (:mod:`luca_gym.worlds.luca.envs.spaces`, shared with the vector env):
numpy arrays in the observation, Python ``float`` rewards and ``bool`` flags.
The action is a dict; a malformed one (unknown field, wrong shape or dtype, a
value that cannot be represented) raises ``ValueError`` naming the field and
changes nothing, while its representable *values* go to the core, which
refuses an illegal one without cost and reports it in ``info["error"]``.
"""

from __future__ import annotations

import gymnasium as gym
import jax

from luca_gym.envs.core import CoreEnv, reset_seed
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.core import protocol
from luca_gym.worlds.luca.core.protocol import RENDER_MODES
from luca_gym.worlds.luca.render import RGB_SHAPE, render_rgb, render_text  # noqa: F401  (re-exported: their old home)
from luca_gym.worlds.luca.session import LucaNames, config_organism, ended_scores  # noqa: F401  (ended_scores: re-exported)
from luca_gym.worlds.luca.types import Organism


def organism_seed_of(env: gym.Env, options) -> int:
    """The organism seed a single env's ``reset`` opens: ``options["organism_seed"]``
    (checked), or one drawn with the env's ``np_random`` (from 0 up), as
    :class:`~luca_gym.envs.core.CoreEnv` does under LUCA's core."""
    return reset_seed(env.np_random, options, protocol.SEED_OPTION, protocol.DRAWN_SEEDS)


def open_organism(env: gym.Env, options) -> tuple[int, Organism, jax.Array]:
    """The organism a single env's ``reset`` opens: ``options["organism_seed"]``
    (checked before any cache), or a seed drawn with the env's ``np_random``.
    Returns (organism seed, organism, session noise key). ``env`` carries
    ``organism_settings`` (a :class:`~luca_gym.worlds.luca.config.LucaConfig`)
    and ``seal`` (None unsealed)."""
    organism_seed = organism_seed_of(env, options)
    seal, settings = getattr(env, "seal", None), env.organism_settings
    organism = config_organism(organism_seed, settings, sealed=seal)
    return organism_seed, organism, core.noise_key(organism_seed, settings.tier, settings.n_genes, seal)


class LucaEnv(LucaNames, CoreEnv):
    """One LUCA session per episode: the generic :class:`~luca_gym.envs.core.CoreEnv`
    over LUCA's core with Gymnasium's signature (the settings positional,
    ``render_mode`` among them) and the names of the host
    :class:`~luca_gym.worlds.luca.session.Session` (``params``, ``organism``,
    ``organism_settings``, ...: :class:`~luca_gym.worlds.luca.session.LucaNames`).

    Args:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper uses 20; the scaling study up to 1280).
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        vocabulary: "invented" (genes G001...) or "real" (real human gene
            symbols, N <= 50; appendix E.2): only the names in the organism's
            ``meta`` (and so in any text) change, never the arrays.
        render_mode: None, "ansi" (:func:`render_text`) or "rgb_array"
            (:func:`render_rgb`: uint8 (112, 160, 3), what
            ``gymnasium.wrappers.RecordVideo`` and SB3's ``make_vec_env`` want).
        budget: experiment and rescue units (default N + S + 8, paper Table 5).
        max_steps: accepted calls before truncation (default 4 x budget + 64);
            the max_steps-th accepted call is applied, then the episode is
            truncated with the scores in ``info``. A refused action changes
            nothing and counts toward nothing (bound an RL agent's episodes
            of refused actions with ``gymnasium.wrappers.TimeLimit`` if needed).
        dense_shaping: potential-based shaping gamma * Phi(s') - Phi(s) with
            Phi = shaping_scale x gene coverage; at shaping_gamma = 1 it
            telescopes to zero (the return still equals the composite score);
            set shaping_gamma to the learner's discount. Off by default.

        sealed: None (the default: the paper's reproducible organisms), a
            secret string, a :class:`luca_gym.seal.Seal`, or True for
            ``$LUCA_GYM_SECRET``: organism k is then generated from its sealed
            seed, so the public package and seed do not give it away.

    ``reset(seed=...)`` seeds the draw of organism seeds; ``options={
    "organism_seed": k}`` pins organism k. The score breakdown appears in
    ``info["scores"]`` only once the episode has ended.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        tier: str = "medium",
        mode: str = "healthy",
        n_genes: int = 20,
        backwards: bool = False,
        render_mode: str | None = None,
        max_steps: int | None = None,
        dense_shaping: bool = False,
        shaping_scale: float = 0.1,
        shaping_gamma: float = 1.0,
        budget: int | None = None,
        sealed=None,
        vocabulary: str = "invented",
    ):
        super().__init__("luca", render_mode, sealed=sealed, tier=tier, mode=mode, n_genes=n_genes,
                         backwards=backwards, vocabulary=vocabulary, budget=budget, max_steps=max_steps,
                         dense_shaping=dense_shaping, shaping_scale=shaping_scale, shaping_gamma=shaping_gamma)
        self._name_settings(tier, mode, n_genes)


def render_frame(env):
    """A single LUCA env's frame for its ``render_mode`` (None before the first
    reset or without a render mode); ``env`` carries ``state``, ``params``,
    ``organism`` and ``render_mode``."""
    if env.render_mode is None or env.state is None:
        return None
    if env.render_mode == "rgb_array":
        return render_rgb(env.state, env.params)
    return render_text(env.state, env.params, env.organism)
