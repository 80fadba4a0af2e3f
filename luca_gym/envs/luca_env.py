"""``LucaEnv``: the LUCA session as a ``gymnasium.Env`` (an adapter over
:mod:`luca_gym.core`; it translates, the core decides).

At the boundary (:mod:`luca_gym.envs.spaces`, shared with the vector env):
numpy arrays in the observation, Python ``float`` rewards and ``bool`` flags.
The action is a dict; a malformed one (unknown field, wrong shape or dtype, a
value that cannot be represented) raises ``ValueError`` naming the field and
changes nothing, while its representable *values* go to the core, which
refuses an illegal one without cost and reports it in ``info["error"]``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import gymnasium as gym
import jax
import numpy as np

from luca_gym import core, spec, world
from luca_gym import seal as seal_mod
from luca_gym.envs.spaces import action_space, observation_space, parse_action, reset_options, to_numpy_observation
from luca_gym.spec import INTERVENTION_TYPES
from luca_gym.types import Organism


def organism_seed_of(env: gym.Env, options) -> int:
    """The organism seed a single env's ``reset`` opens: ``options["organism_seed"]``
    (checked), or one drawn with the env's ``np_random``."""
    options = reset_options(options, ("organism_seed",))
    if "organism_seed" in options:
        return spec.check_seed(options["organism_seed"], "options['organism_seed']")
    return int(env.np_random.integers(0, spec.DRAWN_SEED_LIMIT))


def open_organism(env: gym.Env, options) -> tuple[int, Organism, jax.Array]:
    """The organism a single env's ``reset`` opens: ``options["organism_seed"]``
    (checked before any cache), or a seed drawn with the env's ``np_random``.
    Returns (organism seed, organism, session noise key). ``env`` carries
    ``tier``, ``n_genes``, ``mode``, ``backwards``, ``seal`` (None unsealed)
    and, if it names genes in text, ``vocabulary`` (default invented)."""
    organism_seed = organism_seed_of(env, options)
    seal = getattr(env, "seal", None)
    organism = cached_organism(organism_seed, env.tier, env.n_genes, env.mode, env.backwards, sealed=seal,
                               vocabulary=getattr(env, "vocabulary", "invented"))
    return organism_seed, organism, core.noise_key(organism_seed, env.tier, env.n_genes, seal)


def ended_scores(state: core.EnvState | None, params: core.EnvParams) -> dict:
    """The score breakdown of an ended session as Python numbers and lists
    (JSON-ready); refuses while the session is open."""
    if state is None or not bool(state.ended):
        raise RuntimeError("scores are revealed only once the session has ended")
    out = {}
    for k, v in jax.device_get(core.session_scores(state, params)).items():
        v = np.asarray(v)
        out[k] = v.tolist() if v.ndim else (int(v) if v.dtype.kind in "iu" else float(v))
    return out


@lru_cache(maxsize=512)
def _cached_organism(seed: int, tier: str, n_genes: int, mode: str, backwards: bool, seal, vocabulary: str) -> Organism:
    return world.make_organism(seed, tier, n_genes, mode, backwards, sealed=seal, vocabulary=vocabulary)


def cached_organism(seed: int, tier: str, n_genes: int, mode: str = "healthy", backwards: bool = False, *, sealed=None,
                    vocabulary: str = "invented") -> Organism:
    """``world.make_organism`` memoised: an organism is a pure function of its
    arguments, so reusing one is indistinguishable from regenerating it. The
    arguments are checked first, so the cache never decides what is valid."""
    tier, n_genes, mode, backwards = spec.check_organism(tier, n_genes, mode, backwards)
    vocabulary = spec.check_vocabulary(vocabulary, n_genes)
    return _cached_organism(spec.check_seed(seed), tier, n_genes, mode, backwards, seal_mod.make_seal(sealed), vocabulary)


class LucaEnv(gym.Env):
    """One LUCA session per episode.

    Args:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper uses 20; the scaling study up to 1280).
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        vocabulary: "invented" (genes G001...) or "real" (real human gene
            symbols, N <= 50; appendix E.2): only the names in the organism's
            ``meta`` (and so in any text) change, never the arrays.
        render_mode: None or "ansi".
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

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

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
        self.seal = seal_mod.make_seal(sealed)
        self.params = core.make_params(
            tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
            shaping_scale=shaping_scale, shaping_gamma=shaping_gamma,
        )
        backwards = spec.check_bool(backwards, "backwards")
        self.vocabulary = spec.check_vocabulary(vocabulary, n_genes)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} not supported; allowed None or 'ansi'")
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, bool(backwards)
        self.render_mode = render_mode
        self.action_space = action_space(self.params)
        self.observation_space = observation_space(self.params)
        self.state: core.EnvState | None = None
        self.organism: Organism | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        organism_seed, self.organism, key = open_organism(self, options)
        obs, self.state = core.reset(key, self.organism.arrays, self.params)
        return to_numpy_observation(obs), {"organism_seed": organism_seed, "budget": self.params.budget}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        act = parse_action(action, self.params)
        obs, self.state, reward, terminated, truncated, core_info = core.step(self.state, act, self.params)
        code = int(core_info["error"])
        info: dict[str, Any] = {"error_code": code, "error": core.ERROR_MESSAGES[code] or None}
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            info["scores"] = self.scores()
        return to_numpy_observation(obs), float(reward), terminated, truncated, info

    def scores(self) -> dict:
        """The score breakdown of the ended session; refuses while it is open."""
        return ended_scores(self.state, self.params)

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        return render_text(self.state, self.params, self.organism)

    def close(self):
        self.state = None


def render_text(state: core.EnvState, params: core.EnvParams, organism: Organism) -> str:
    """The session as text (public information only)."""
    m = organism.meta
    obs = to_numpy_observation(core.observe(state, params))
    fmt = lambda v: "[" + ", ".join(f"{float(x):.3f}" for x in v) + "]"  # noqa: E731
    lines = [
        f"LUCA {m.tier} {m.mode} N={m.n_genes}  budget {int(obs['budget_left'])}/{params.budget}  "
        f"calls {int(state.step_count)}{'  [ended]' if obs['ended'] else ''}",
        f"phenotypes {', '.join(m.phenotype_names)}",
        f"baseline  {fmt(obs['baseline_phenotypes'])}"
        + (f"  aberrant {[n for n, a in zip(m.phenotype_names, obs['aberrant']) if a]}" if params.disease else ""),
        f"last      {fmt(obs['last_phenotypes'])}  steps {int(obs['last_steps'])}"
        + ("" if obs["last_converged"] else " (not converged)"),
    ]
    code = int(obs["last_error"])
    if code:
        lines.append(f"last call refused: {core.ERROR_MESSAGES[code]}")
    tested = obs["single_mask"]
    for g in np.flatnonzero(tested.any(axis=1)):
        for c in np.flatnonzero(tested[g]):
            lines.append(f"  {INTERVENTION_TYPES[core.SINGLE_TYPES[c]]:<6} {m.gene_names[g]}: {fmt(obs['single_results'][g, c])}")
    for k in np.flatnonzero(obs["signal_mask"]):
        lines.append(f"  ACTIVATE {m.signal_labels[k]}: {fmt(obs['signal_results'][k])}")
    if int(obs["task_index"]) >= 0:
        genes = [m.gene_names[g] for g in obs["task_genes"]]
        types = [INTERVENTION_TYPES[c] for c in obs["task_codes"]]
        lines.append(f"task {int(obs['task_index']) + 1}: {types[0]} {genes[0]} + {types[1]} {genes[1]}")
    if params.disease:
        lines.append(f"diagnosis committed: {bool(obs['diagnosis_committed'])}")
    return "\n".join(lines)
