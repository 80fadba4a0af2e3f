"""``luca_gym/BiobankFlat-v0``: the biobank world's structured tools as a
multi-step Gymnasium env for learners that neither write code nor call
tools: one ``Discrete(K)`` action, a float32 ``(D,)`` observation and an
action mask (``action_masks()``, sb3-contrib's convention, and
``info["action_mask"]``). The learner chooses a phenotype, spends the budget
on experiments, nominates proteins and submits.

Every number comes from the tool session's own calls
(:class:`~.tools.BiobankToolSession`): the free analyses through
:func:`~.envs.observe` (as ``luca_gym/Biobank-v0``), each experiment through
``experiment`` (its price and the budget live there), the score through
``submit``; nothing is re-implemented. The biobank step runs on the host
(pandas and numpy over the released tables), so this world has no jittable
flat codec (``World.flat``): the JAX functional env and the JAX PPO do not
apply, this env does.

For P proteins (the profile's), M = 6 clinic MRI measures
(:data:`~.generator.IMAGING`) and the two experiment kinds
(:data:`~.oracle.EXPERIMENTS`: cell perturbation, knockdown):

Actions (K = M + 2P + 3P + 1; 487 for ``tiny``, 1,507 for ``small``), in order:

* ``[0, M)``: choose measure m as the phenotype to submit (``imaging.<m>``);
* ``[M, M + 2P)``: run experiment kind k on protein p (index M + k P + p);
* ``[M + 2P, M + 5P)``: nominate protein p "down" (lower it), "up" (raise
  it), or clear its nomination (index M + 2P + d P + p, d in that order);
* ``K - 1``: submit (ends the episode).

Nominations are submitted with confidence :data:`CONFIDENCE` (the cis-MR
baseline's); rejections are not among the actions, so ``bias_identification``
stays 0 here (85 of the 100 points are reachable).

Observation (D = 2PM + 8P + 4M + 1; 1,945 for ``tiny``, 6,025 for ``small``), in
order (``BiobankFlatEnv.slices`` names each part):

* ``association_z`` (P x M), ``mr_z`` (P x M), ``instrument_f`` (P),
  ``endpoint_r`` (M x 3): :func:`~.envs.observe`'s arrays, row-major;
* ``experiments`` (5P): per protein, the cell perturbation's imaging effect
  z and its done flag, then the knockdown's imaging effect z, five-year log
  hazard ratio z and done flag (kind-major: P values per field); z is the
  delivered estimate over its delivered SE, 0 where not done;
* ``budget_left`` (1): the fraction of the budget regime's dollars left (0
  under ``budget="none"``);
* ``nominated`` (2P): 1 where protein p is nominated down (first P), up (next P);
* ``phenotype`` (M): one-hot of the chosen measure (all 0 until one is chosen).

The mask allows: a measure other than the chosen one; an experiment not yet
run on that protein (one of each kind per protein) whose price the budget
left covers; a nomination that changes the protein's (down or up where it is
not so nominated, clear where it is nominated); submit, always. An action
that is not an integer in [0, K) raises ValueError and changes nothing; a
masked action is refused: it costs nothing, changes nothing, the episode
goes on, and ``info["error_code"]`` / ``info["error"]`` (:data:`ERRORS`)
say why.

Reward: 0 before submit; at submit the headline score (``total``), so the
undiscounted return equals it; ``info["scores"]`` holds every part. Step
limit: ``max_steps`` accepted actions (default 2P + 16: room to choose a
phenotype, spend any budget, nominate every protein and change one's mind);
a refused action counts toward nothing. An episode that reaches it without
submitting is truncated through the session's ``end`` tool: every score 0,
as a tool session that runs out of turns without a submission. Zero, not an
empty submission's score, so that never submitting earns nothing (an empty
submission is worth full marks in a null world, and a phenotype's points).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from luca_gym.boundary import check_flat_actions
from luca_gym.envs.codec import instance_seed
from luca_gym.validate import check_keys, check_positive_int, check_render_mode
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.envs import ENDPOINTS, observe
from luca_gym.worlds.biobank.generator import IMAGING
from luca_gym.worlds.biobank.oracle import EXPERIMENTS
from luca_gym.worlds.biobank.tools import BiobankToolSession

CONFIDENCE = 0.8  # of every nomination (the cis-MR baseline's MR_CONFIDENCE)
KINDS = tuple(EXPERIMENTS)  # cell_perturbation, knockdown
# The estimates each kind delivers, as (estimate, its SE) fields of the tool's answer.
ESTIMATES = {"cell_perturbation": (("imaging_effect", "imaging_se"),),
             "knockdown": (("imaging_effect", "imaging_se"), ("log_hazard_ratio", "log_hazard_ratio_se"))}
NOMINATE = ("down", "up", "clear")
# Refusal codes (a refused action changes nothing and counts toward no limit).
ERRORS = (
    ("ok", ""),
    ("phenotype_chosen", "that measure is the chosen phenotype already"),
    ("experiment_done", "that experiment was run on that protein already"),
    ("over_budget", "the experiment costs more than the budget left; nothing was spent"),
    ("nomination_unchanged", "the protein's nomination is that already (clear: it is not nominated)"),
)
ERROR_CODES = {name: code for code, (name, _) in enumerate(ERRORS)}


class BiobankFlatEnv(gym.Env):
    """One biobank world per episode, many steps, on the flat action and
    observation of the module's docstring.

    Args:
        profile, tier, budget: :class:`~.config.BiobankConfig`'s fields.
        max_steps: accepted actions before truncation (default 2P + 16).
        render_mode: None or "ansi" (one line: the world, the budget left,
            the nominations, the steps).

    Spaces: observation ``Box(-inf, inf, (D,), float32)``; action
    ``Discrete(K)``; ``action_masks()`` bool (K,) (all False once the
    episode has ended). ``slices`` names each part of the observation
    (name -> slice), ``steps`` counts the episode's accepted actions, and
    :meth:`describe_action` says what an index does.

    ``reset(seed=...)`` seeds the draw of instance seeds (from 10,000 up:
    never a panel seed); ``options={"instance_seed": k}`` pins world k.
    ``info`` carries ``action_mask`` on every call, ``instance_seed``,
    ``proteins`` and ``measures`` on reset, ``error_code`` and ``error`` on
    every step, and ``scores`` (every part) once the episode has ended.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, max_steps: int | None = None, **settings):
        check_keys(settings, "settings", BiobankConfig.__dataclass_fields__)
        self.config = BiobankConfig(**settings)
        self.settings = settings
        self.render_mode = check_render_mode(render_mode)
        p, m = self.config.sizes.proteins, len(IMAGING)
        self.max_steps = 2 * p + 16 if max_steps is None else check_positive_int(max_steps, "max_steps")
        self.num_actions = m + len(KINDS) * p + len(NOMINATE) * p + 1
        sizes = {"association_z": p * m, "mr_z": p * m, "instrument_f": p, "endpoint_r": m * len(ENDPOINTS),
                 "experiments": p * sum(len(ESTIMATES[k]) + 1 for k in KINDS), "budget_left": 1, "nominated": 2 * p,
                 "phenotype": m}
        ends = np.cumsum(list(sizes.values()))
        self.slices = {name: slice(int(end - size), int(end)) for (name, size), end in zip(sizes.items(), ends)}
        self.action_space = spaces.Discrete(self.num_actions)
        self.observation_space = spaces.Box(-np.inf, np.inf, (int(ends[-1]),), np.float32)
        self.session: BiobankToolSession | None = None
        self._mask: np.ndarray | None = None
        self._fixed, self._fixed_of = None, None  # observe()'s part of the observation, and the instance it is of

    # -- the action layout -------------------------------------------------------------
    def _decode(self, index: int) -> tuple:
        """A flat index as ("phenotype", m), ("experiment", k, i),
        ("nominate", d, i) or ("submit",): the layout, read in one place."""
        p, m = self.config.sizes.proteins, len(IMAGING)
        if index < m:
            return ("phenotype", index)
        if index < m + len(KINDS) * p:
            return ("experiment", *divmod(index - m, p))
        if index < self.num_actions - 1:
            return ("nominate", *divmod(index - m - len(KINDS) * p, p))
        return ("submit",)

    def describe_action(self, index) -> str:
        """Action ``index`` in words (``"experiment knockdown PROT_0003"``):
        ValueError outside [0, K), RuntimeError before ``reset`` (the names
        are the release's)."""
        index = int(check_flat_actions(index, self.num_actions))
        if self.session is None:
            raise RuntimeError("describe_action() called before reset()")
        part, *where = self._decode(index)
        proteins = self.session.release.proteins
        if part == "phenotype":
            return f"phenotype imaging.{IMAGING[where[0]]}"
        if part == "experiment":
            return f"experiment {KINDS[where[0]]} {proteins[where[1]]}"
        if part == "nominate":
            return f"nominate {NOMINATE[where[0]]} {proteins[where[1]]}"
        return "submit"

    # -- Gymnasium -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        seed_ = instance_seed(self.np_random, options)
        self.session = BiobankToolSession(seed_, **self.settings)
        p = self.config.sizes.proteins
        if self._fixed_of != seed_:  # the free analyses of a world are a pure function of its release: kept for its next episode
            fixed = observe(self.session)
            self._fixed = np.concatenate([fixed[k].ravel() for k in ("association_z", "mr_z", "instrument_f", "endpoint_r")])
            self._fixed_of = seed_
        self._results = {k: np.zeros((len(ESTIMATES[k]), p), np.float32) for k in KINDS}
        self._done = np.zeros((len(KINDS), p), bool)
        self._nominated = np.zeros(p, np.int8)  # 0 none, 1 down, 2 up
        self._phenotype = -1
        self.steps = 0
        self._mask = self._legal()
        return self._observation(), {"instance_seed": seed_, "proteins": list(self.session.release.proteins),
                                     "measures": list(IMAGING), "action_mask": self._mask.copy()}

    def step(self, action):
        if self.session is None:
            raise RuntimeError("step() called before reset()")
        if self.session.ended:
            raise RuntimeError("step() called after the episode ended; call reset()")
        index = int(check_flat_actions(action, self.num_actions))
        if not self._mask[index]:
            code = self._refusal(index)
            info = {"error_code": code, "error": ERRORS[code][1], "action_mask": self._mask.copy()}
            return self._observation(), 0.0, False, False, info
        self._apply(index)
        self.steps += 1
        truncated = not self.session.ended and self.steps >= self.max_steps
        if truncated:  # no submission: the session's own ending, every score 0
            self.session.call("end", {})
        self._mask = self._legal()
        info: dict[str, Any] = {"error_code": 0, "error": None, "action_mask": self._mask.copy()}
        if self.session.ended:
            info["scores"] = dict(self.session.scores)
        terminated = self.session.ended and not truncated
        reward = float(self.session.total_reward) if self.session.ended else 0.0  # the headline, once
        return self._observation(), reward, bool(terminated), bool(truncated), info

    def action_masks(self) -> np.ndarray:
        """bool (K,): the actions the env accepts now (all False once the episode has ended)."""
        if self._mask is None:
            raise RuntimeError("action_masks() called before reset()")
        return self._mask.copy()

    def render(self):
        if self.render_mode != "ansi" or self.session is None:
            return None
        state = "ended" if self.session.ended else "open"
        return (f"biobank world {self.session.instance_id} ({self.config.profile}), {state}: "
                f"${self.session.budget_left:,} left, {int((self._nominated > 0).sum())} nominated, {self.steps} steps")

    def close(self):
        self.session = self._mask = None

    # -- the episode -----------------------------------------------------------------------
    def _apply(self, index: int) -> None:
        """Carry out an allowed action through the session's tools (or the pending claims)."""
        part, *where = self._decode(index)
        proteins = self.session.release.proteins
        if part == "phenotype":
            self._phenotype = where[0]
        elif part == "experiment":
            k, i = where
            answer = self.session.call("experiment", {"protein": proteins[i], "kind": KINDS[k]})
            if "error" in answer:  # the mask mirrors the session's rule; a disagreement is a bug, not a refusal
                raise RuntimeError(f"the experiment tool refused an allowed action: {answer['error']}")
            self._results[KINDS[k]][:, i] = [answer[e] / answer[se] for e, se in ESTIMATES[KINDS[k]]]
            self._done[k, i] = True
        elif part == "nominate":
            d, i = where
            self._nominated[i] = (1, 2, 0)[d]
        else:
            nominations = [{"protein": proteins[i], "direction": NOMINATE[self._nominated[i] - 1], "confidence": CONFIDENCE}
                           for i in np.flatnonzero(self._nominated)]
            claims: dict[str, Any] = {"nominations": nominations}
            if self._phenotype >= 0:
                claims["phenotype"] = f"imaging.{IMAGING[self._phenotype]}"
            answer = self.session.call("submit", claims)
            if "error" in answer:
                raise RuntimeError(f"the submit tool refused the claims: {answer['error']}")

    def _legal(self) -> np.ndarray:
        """bool (K,): the mask of the current state (all False once the session has ended)."""
        p, m = self.config.sizes.proteins, len(IMAGING)
        mask = np.zeros(self.num_actions, bool)
        if self.session.ended:
            return mask
        mask[:m] = np.arange(m) != self._phenotype
        affordable = np.array([EXPERIMENTS[k]["cost"] <= self.session.budget_left for k in KINDS])
        mask[m:m + len(KINDS) * p] = (~self._done & affordable[:, None]).ravel()
        start = m + len(KINDS) * p
        mask[start:start + len(NOMINATE) * p] = np.concatenate(
            [self._nominated != 1, self._nominated != 2, self._nominated != 0])
        mask[-1] = True
        return mask

    def _refusal(self, index: int) -> int:
        """The code of a masked action's refusal (:data:`ERRORS`)."""
        part, *where = self._decode(index)
        if part == "phenotype":
            return ERROR_CODES["phenotype_chosen"]
        if part == "experiment":
            return ERROR_CODES["experiment_done" if self._done[tuple(where)] else "over_budget"]
        return ERROR_CODES["nomination_unchanged"]

    def _observation(self) -> np.ndarray:
        experiments = np.concatenate([np.concatenate([self._results[k], self._done[KINDS.index(k)][None]]).ravel()
                                      for k in KINDS])
        dollars = self.config.dollars
        nominated = np.concatenate([self._nominated == 1, self._nominated == 2])
        phenotype = np.arange(len(IMAGING)) == self._phenotype
        return np.concatenate([self._fixed, experiments, [self.session.budget_left / dollars if dollars else 0.0],
                               nominated, phenotype]).astype(np.float32)
