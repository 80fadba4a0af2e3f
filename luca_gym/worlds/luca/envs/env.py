"""``LucaEnv``: the LUCA session as a ``gymnasium.Env`` (an adapter over
:mod:`luca_gym.worlds.luca.core`; it translates, the core decides).

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
import numpy as np

from luca_gym.worlds.luca.envs.spaces import action_space, observation_space, reset_options
from luca_gym.validate import DRAWN_SEED_LIMIT, check_render_mode
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.session import Session, config_organism, ended_scores, render_text  # noqa: F401  (ended_scores: re-exported)
from luca_gym.worlds.luca.types import Organism

RENDER_MODES = ("ansi", "rgb_array")
RGB_SHAPE = (112, 160, 3)  # height, width, RGB: even sides, as video encoders want
_observe = jax.jit(core.observe, static_argnums=1)  # eager, observe runs op by op: 16 ms a frame, jitted 1 ms

# render_rgb's palette and layout (pixel rows and columns).
_WHITE, _TRACK, _GREEN, _GREY, _BLUE = (255, 255, 255), (232, 232, 232), (60, 160, 80), (150, 150, 150), (50, 100, 200)
_RED, _BAND, _LATENT, _RUN, _TASK = (200, 50, 50), (214, 240, 214), (190, 190, 190), (40, 40, 40), (240, 150, 30)
_MARGIN, _BUDGET_ROWS, _PLOT_TOP, _PLOT_BOTTOM, _TASK_ROWS, _GRID_TOP, _CELL = 4, (4, 12), 18, 78, (81, 83), 84, 6


def render_rgb(state: core.EnvState, params: core.EnvParams) -> np.ndarray:
    """The session as a picture of its public observation: uint8
    ``RGB_SHAPE`` (112, 160, 3), the same for the same observation.

    From the top: the budget left (green, the full width being the whole
    budget); per phenotype, the healthy range (pale green band) behind its
    baseline (grey bar; red where aberrant) and its last measurement (blue),
    height = value in [0, 1]; an orange tick over the current task's two
    genes; the experiments run (dark cells), one row per single intervention
    (BLOCK, BOOST, DAMPEN) with the genes across, latent genes light grey, and
    a last row of the signals activated. The frame turns red once the session
    has ended. With more genes than the 152 columns, a column shows a group of
    genes (dark if any of them was tested).
    """
    obs = jax.device_get(_observe(state, params))
    _, width, _ = RGB_SHAPE
    inner = width - 2 * _MARGIN
    image = np.full(RGB_SHAPE, _WHITE, np.uint8)
    left, right = _MARGIN, width - _MARGIN

    top, bottom = _BUDGET_ROWS
    image[top:bottom, left:right] = _TRACK
    image[top:bottom, left:left + round(inner * int(obs["budget_left"]) / params.budget)] = _GREEN

    span = _PLOT_BOTTOM - _PLOT_TOP
    level = lambda value: _PLOT_BOTTOM - round(span * float(np.clip(value, 0.0, 1.0)))  # noqa: E731
    group = inner // len(obs["baseline_phenotypes"])
    for p, (baseline, last) in enumerate(zip(obs["baseline_phenotypes"], obs["last_phenotypes"])):
        x = left + p * group
        low, high = obs["healthy_range"][p]
        image[level(high):level(low), x + 2:x + group - 2] = _BAND
        image[level(baseline):_PLOT_BOTTOM, x + 6:x + group // 2 - 2] = _RED if obs["aberrant"][p] else _GREY
        image[level(last):_PLOT_BOTTOM, x + group // 2 + 2:x + group - 6] = _BLUE

    def columns(values: np.ndarray) -> np.ndarray:
        """bool (inner, ...): ``values`` (count, ...) spread over the inner columns, any() over a group."""
        starts = np.arange(inner) * len(values) // inner
        return np.logical_or.reduceat(values.astype(bool), starts, axis=0)

    task = np.zeros(params.n_genes, bool)
    task[obs["task_genes"][obs["task_genes"] >= 0]] = True
    image[_TASK_ROWS[0]:_TASK_ROWS[1], left:right][:, columns(task)] = _TASK
    tested = obs["single_mask"]
    for row, run in enumerate([*tested.T, None]):
        y = _GRID_TOP + row * _CELL
        cells = image[y:y + _CELL - 1, left:right]
        if run is None:  # the signals' row
            cells[:] = np.where(columns(obs["signal_mask"])[:, None], _RUN, _TRACK)
            continue
        cells[:] = _TRACK
        cells[:, ~columns(obs["targetable"])] = _LATENT
        cells[:, columns(run)] = _RUN
    edge = _RED if obs["ended"] else _GREY
    image[:2], image[-2:], image[:, :2], image[:, -2:] = edge, edge, edge, edge
    return image


def organism_seed_of(env: gym.Env, options) -> int:
    """The organism seed a single env's ``reset`` opens: ``options["organism_seed"]``
    (checked), or one drawn with the env's ``np_random``."""
    options = reset_options(options, ("organism_seed",))
    if "organism_seed" in options:
        return spec.check_seed(options["organism_seed"], "options['organism_seed']")
    return int(env.np_random.integers(0, DRAWN_SEED_LIMIT))


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


class LucaEnv(Session, gym.Env):
    """One LUCA session per episode: a :class:`~luca_gym.worlds.luca.session.Session`
    with Gymnasium's spaces, seeding and rendering.

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
        super().__init__(tier, mode, n_genes, backwards, max_steps=max_steps, dense_shaping=dense_shaping,
                         shaping_scale=shaping_scale, shaping_gamma=shaping_gamma, budget=budget, sealed=sealed,
                         vocabulary=vocabulary)
        check_render_mode(render_mode, RENDER_MODES)
        self.render_mode = render_mode
        self.action_space = action_space(self.params)
        self.observation_space = observation_space(self.params)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        gym.Env.reset(self, seed=seed)
        return self.open(organism_seed_of(self, options))

    def render(self):
        return render_frame(self)


def render_frame(env):
    """A single LUCA env's frame for its ``render_mode`` (None before the first
    reset or without a render mode); ``env`` carries ``state``, ``params``,
    ``organism`` and ``render_mode``."""
    if env.render_mode is None or env.state is None:
        return None
    if env.render_mode == "rgb_array":
        return render_rgb(env.state, env.params)
    return render_text(env.state, env.params, env.organism)
