"""``LucaFlatEnv``: the LUCA session on the flat encodings of
:mod:`luca_gym.worlds.luca.core.flat` -- a ``Discrete(K)`` action over single-target
choices, a ``Box(-1, 1, (D,), float32)`` observation vector and an action mask
(``action_masks()``, sb3-contrib's convention, and ``info["action_mask"]``).

The generic :class:`luca_gym.envs.codec.CodecEnv` over LUCA's flat codec
(:class:`~luca_gym.worlds.luca.functional.LucaFlatCodec`): the agent
chooses experiments, the named analyst (:mod:`luca_gym.worlds.luca.analysts`) writes the
values (predictions, network, the analyst's diagnosis), the core decides. An
action that is not an integer in [0, K) raises ``ValueError`` and changes
nothing; a masked action reaches the core, which refuses it at no cost
(``info["error_code"]``). What LUCA adds to the generic env: its organisms
opened through the organism memo (sealed where asked, ``organism_seed``
options, any seed below the drawn-seed limit, as
:class:`~luca_gym.worlds.luca.envs.LucaEnv` opens them), the core's session
settings (``max_steps``, shaping), its frames and the score breakdown.

Torch's threads: PyTorch (under SB3) on as many threads as the process has
cores runs a small policy network many times slower; the first ``reset`` in
a process puts torch on one thread where that is so, and warns
(:func:`torch_on_one_thread_where_needed`).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions  # noqa: F401  (re-exported)
from luca_gym.envs.codec import CodecEnv
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.core import flat
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.envs.env import RENDER_MODES, ended_scores, open_organism, render_frame
from luca_gym.worlds.luca.functional import LucaFlatCodec
from luca_gym.worlds.luca.types import Organism

_torch_checked = False  # torch_on_one_thread_where_needed acts once per process


class TorchThreadsWarning(UserWarning):
    """Torch was put on one thread for the LUCA envs' sake (see :func:`torch_on_one_thread_where_needed`)."""


def torch_on_one_thread_where_needed() -> bool:
    """Put torch on one thread where its threads would take every core this
    process may use (``os.sched_getaffinity``), and warn; True if it did.

    Acts once per process, and only if torch is already imported (as SB3 does):
    a later ``torch.set_num_threads(n)`` is left alone. Why: SB3's networks
    for this env are small, and on a 2-core machine with other work running
    (JAX stepping the sessions, other processes), torch's parallel regions
    wait for a core on every call: ``torch.exp`` of 100 floats took 3.6 ms on
    2 threads against 1 us on one; MaskablePPO on one LucaFlatEnv ran 35
    steps/s against 456, on 64 LucaSB3VecEnv sessions 250-740 against
    3,300-7,900. Where torch has fewer threads than cores nothing is changed
    (measured on 2 cores only).
    """
    global _torch_checked
    torch = sys.modules.get("torch")
    if _torch_checked or torch is None:
        return False
    _torch_checked = True
    threads = torch.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if threads <= 1 or threads < cores:
        return False
    torch.set_num_threads(1)
    warnings.warn(f"luca_gym: torch set to 1 thread (was {threads}, on {cores} cores): on this few cores torch's threads "
                  f"made SB3 training on a LUCA env 6-13x slower (luca_gym.worlds.luca.envs.flat."
                  f"torch_on_one_thread_where_needed); call torch.set_num_threads(n) after the first reset to choose "
                  f"otherwise", TorchThreadsWarning, stacklevel=3)
    return True


class LucaFlatEnv(CodecEnv):
    """One LUCA session per episode on the flat action and observation.

    Args:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper uses 20).
        budget: experiment budget (default N + S + 8, the paper's).
        analyst: who writes the values a flat action leaves out, one of
            :data:`luca_gym.worlds.luca.analysts.ANALYSTS`.
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        render_mode: None, "ansi" (text) or "rgb_array" (uint8 (112, 160, 3),
            :func:`~luca_gym.worlds.luca.envs.env.render_rgb`: what
            ``gymnasium.wrappers.RecordVideo`` and SB3's ``make_vec_env`` want).
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

    For SB3 on a machine of few cores: the first ``reset`` in a process puts
    torch on one thread where its threads would take every core, and warns
    (:func:`torch_on_one_thread_where_needed`); ``luca_gym.agents.sb3`` trains
    on one thread anyway. For speed, train on
    :class:`~luca_gym.worlds.luca.envs.LucaSB3VecEnv` (all sessions in one JAX
    call) rather than on ``make_vec_env`` of this env.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}
    world = "luca"

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
        codec = LucaFlatCodec(self.params, tier, analyst)  # checks the tier and the analyst
        backwards = spec.check_bool(backwards, "backwards")
        super().__init__(render_mode, codec=codec)
        self.tier, self.mode, self.n_genes, self.backwards, self.analyst = tier, mode, n_genes, backwards, analyst
        self.organism_settings = LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards)
        self.layout = flat.layout(self.params)
        self.observation_space = spaces.Box(-1.0, 1.0, (flat.observation_size(self.params),), np.float32)
        self.organism: Organism | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        torch_on_one_thread_where_needed()
        return super().reset(seed=seed, options=options)

    def open_session(self, options):
        """Organism ``options["organism_seed"]`` (or one drawn below the
        drawn-seed limit) from the organism memo, with its own noise key."""
        organism_seed, self.organism, key = open_organism(self, options)
        state, vector, mask = self.codec.open((self.organism.arrays, key))
        return state, vector, mask, {"organism_seed": organism_seed, "budget": self.params.budget}

    def step(self, action):
        vector, reward, terminated, truncated, info = super().step(action)
        error = core.ERROR_MESSAGES[info["error_code"]] or None
        return vector, reward, terminated, truncated, {"error_code": info["error_code"], "error": error, **info}

    def scores(self) -> dict:
        """The ended session's score breakdown (JSON-ready)."""
        return ended_scores(self.state, self.params)

    def render(self):
        return render_frame(self)
