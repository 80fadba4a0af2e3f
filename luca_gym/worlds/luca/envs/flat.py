"""``LucaFlatEnv``: the LUCA session on the flat encodings of
:mod:`luca_gym.worlds.luca.core.flat` -- a ``Discrete(K)`` action over single-target
choices, a ``Box(-1, 1, (D,), float32)`` observation vector and an action mask
(``action_masks()``, sb3-contrib's convention, and ``info["action_mask"]``).

An adapter over the core like :class:`~luca_gym.worlds.luca.envs.LucaEnv`: the agent
chooses experiments, the named analyst (:mod:`luca_gym.worlds.luca.analysts`) writes the
values (predictions, network, the analyst's diagnosis), the core decides. An
action that is not an integer in [0, K) raises ``ValueError`` and changes
nothing; a masked action reaches the core, which refuses it at no cost
(``info["error_code"]``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions  # noqa: F401  (re-exported)
from luca_gym.validate import check_render_mode
from luca_gym.worlds.luca import analysts, core, spec
from luca_gym.worlds.luca.core import flat
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.envs.env import ended_scores, open_organism, render_text
from luca_gym.worlds.luca.types import Organism


class LucaFlatEnv(gym.Env):
    """One LUCA session per episode on the flat action and observation.

    Args:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper uses 20).
        budget: experiment budget (default N + S + 8, the paper's).
        analyst: who writes the values a flat action leaves out, one of
            :data:`luca_gym.worlds.luca.analysts.ANALYSTS`.
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        render_mode: None or "ansi".
        max_steps: accepted calls before truncation (default 4 x budget + 64;
            a masked-out action is refused and counts toward nothing; a session
            on the flat space ends within budget + 2 x tasks + 3 accepted calls anyway).
        dense_shaping: potential-based shaping gamma * Phi(s') - Phi(s) with
            Phi = shaping_scale x gene coverage (:class:`core.EnvParams`).
        shaping_scale: the potential's scale.
        shaping_gamma: the shaping's discount; at 1 the undiscounted return
            equals the composite score, set it to the learner's gamma otherwise.
        sealed: None (default), a secret, a :class:`luca_gym.seal.Seal` or
            True (``$LUCA_GYM_SECRET``): organisms from their sealed seeds
            (:mod:`luca_gym.seal`), as :class:`~luca_gym.worlds.luca.envs.LucaEnv`.

    Spaces, for K = :func:`flat.layout` ``(params).size`` and D =
    :func:`flat.observation_size`: observation float32 (D,) in [-1, 1]; action
    ``Discrete(K)``; ``action_masks()`` bool (K,).

    ``reset(seed=...)`` seeds the draw of organism seeds (below
    :data:`spec.DRAWN_SEED_LIMIT`); ``options={"organism_seed": k}`` pins
    organism k. ``info`` carries ``action_mask`` (bool (K,)) on every call,
    ``error_code`` and ``error`` on every step, and the score breakdown
    ``scores`` once the episode has ended.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        tier: str = "medium",
        mode: str = "healthy",
        n_genes: int = 20,
        budget: int | None = None,
        analyst: str = "logit-additive",
        backwards: bool = False,
        render_mode: str | None = None,
        max_steps: int | None = None,
        dense_shaping: bool = False,
        shaping_scale: float = 0.1,
        shaping_gamma: float = 1.0,
        sealed=None,
    ):
        self.seal = seal_mod.make_seal(sealed)
        self.params = core.make_params(
            tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
            shaping_scale=shaping_scale, shaping_gamma=shaping_gamma,
        )
        analysts.get(analyst)
        backwards = spec.check_bool(backwards, "backwards")
        check_render_mode(render_mode)
        self.tier, self.mode, self.n_genes, self.backwards, self.analyst = tier, mode, n_genes, backwards, analyst
        self.render_mode = render_mode
        self.layout = flat.layout(self.params)
        self.action_space = spaces.Discrete(self.layout.size)
        self.observation_space = spaces.Box(-1.0, 1.0, (flat.observation_size(self.params),), np.float32)
        self.state: core.EnvState | None = None
        self.organism: Organism | None = None
        self._mask: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        organism_seed, self.organism, key = open_organism(self, options)
        vector, mask, self.state = flat.reset(key, self.organism.arrays, self.params, self.analyst)
        vector, self._mask = jax.device_get((vector, mask))
        info = {"organism_seed": organism_seed, "budget": self.params.budget, "action_mask": self._mask.copy()}
        return np.array(vector, np.float32), info

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        index = check_flat_actions(action, self.layout.size)
        vector, mask, self.state, reward, terminated, truncated, core_info = flat.step(self.state, index, self.params, self.analyst)
        vector, self._mask, reward, terminated, truncated, code = jax.device_get(
            (vector, mask, reward, terminated, truncated, core_info["error"])
        )
        code = int(code)
        info: dict[str, Any] = {"error_code": code, "error": core.ERROR_MESSAGES[code] or None, "action_mask": self._mask.copy()}
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            info["scores"] = ended_scores(self.state, self.params)
        return np.array(vector, np.float32), float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """bool (K,): the flat actions the rules accept now (all False once the
        session has ended)."""
        if self._mask is None:
            raise RuntimeError("action_masks() called before reset()")
        return self._mask.copy()

    def render(self):
        if self.render_mode != "ansi" or self.state is None:
            return None
        return render_text(self.state, self.params, self.organism)

    def close(self):
        self.state = self._mask = None
