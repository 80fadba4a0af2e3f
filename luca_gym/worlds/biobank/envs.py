"""``luca_gym/Biobank-v0``: the biobank world as a one-step Gymnasium env.

A learner that does not write code or call tools sees what the structured
tools compute for every clinic MRI measure (:data:`~.generator.IMAGING`, M = 6)
and answers with claims in one step:

Observation (``Dict``; P proteins of the profile):

* ``association_z`` float32 (P, M): each protein's z (beta / SE) in the
  covariate-adjusted association scan against each MRI measure;
* ``mr_z`` float32 (P, M): each protein's cis-MR Wald ratio z against each
  measure (its lead cis instrument);
* ``instrument_f`` float32 (P,): the instrument's first-stage F;
* ``endpoint_r`` float32 (M, 3): each measure's correlation with the five-year
  event, log NT-proBNP and a recorded cardiac diagnosis.

A value the tools leave untested (an empty cis window, no spread) is 0.

Action (``Dict``): ``nominate`` ``MultiDiscrete([3] * P)`` (0 not nominated,
1 nominated "down": lower it, 2 nominated "up"), ``confidence``
``Box(0, 1, (P,))`` (read for the nominated), ``phenotype`` ``Discrete(M)``
(the MRI measure submitted as the phenotype). The step submits the claims;
the reward is the total score (the headline), the episode ends, and
``info["scores"]`` holds every part.

Every number comes from the tool session's own calls
(:class:`~.tools.BiobankToolSession`: ``validate_phenotype``,
``association_scan``, ``cis_mr``, ``submit``): the same released data and
the same scorer, nothing re-implemented. An action outside the space raises
ValueError and changes nothing.

Why the biobank keeps its own env and declares no ``World.core``: a
session's state is a released data set, the phenotypes an agent defines,
an audit log of experiments and (with the python tool) a sandbox process,
and its steps are numpy analyses run on the host over the release, the
truth kept in the oracle in this process; no array pytree a jitted step
could carry holds that, so a host "core" would be the tool session under
other names. This env is therefore an adapter over
:class:`~.tools.BiobankToolSession`, the one place the tools' rules live.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from luca_gym.envs.codec import instance_seed
from luca_gym.validate import check_render_mode, short_repr
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.generator import IMAGING
from luca_gym.worlds.biobank.tool_args import MAX_TOP
from luca_gym.worlds.biobank.tools import BiobankToolSession

ENDPOINTS = ("cv_event", "log_ntprobnp", "cardiac_diagnosis")
NOMINATION = ("none", "down", "up")


def observe(session: BiobankToolSession) -> dict:
    """What the free tools compute over every clinic MRI measure in
    ``session`` (a :class:`~.tools.BiobankToolSession`): the observation of
    ``luca_gym/Biobank-v0`` (the module's docstring lists its arrays), and
    the fixed part of ``luca_gym/BiobankFlat-v0``'s (:mod:`~.flat`). Every
    number is one of the session's own answers (``validate_phenotype``,
    ``association_scan``, ``cis_mr``); a value they leave untested is 0."""
    p, m = session.config.sizes.proteins, len(IMAGING)
    index = {name: i for i, name in enumerate(session.release.proteins)}
    association, mr = np.zeros((p, m), np.float32), np.zeros((p, m), np.float32)
    f, endpoint = np.zeros(p, np.float32), np.zeros((m, len(ENDPOINTS)), np.float32)

    def z(beta, se):
        return 0.0 if beta is None or not se else beta / se

    for j, measure in enumerate(IMAGING):
        phenotype = f"imaging.{measure}"
        checked = session.call("validate_phenotype", {"phenotype": phenotype})["endpoints"]
        endpoint[j] = [checked[e]["r"] or 0.0 for e in ENDPOINTS]
        for row in session.call("association_scan", {"phenotype": phenotype, "top": MAX_TOP})["results"]:
            association[index[row["protein"]], j] = z(row["beta"], row["se"])
        for row in session.call("cis_mr", {"phenotype": phenotype, "top": MAX_TOP})["results"]:
            mr[index[row["protein"]], j] = z(row["wald_ratio"], row["se"])
            f[index[row["protein"]]] = row["instrument_f"] or 0.0
    return {"association_z": association, "mr_z": mr, "instrument_f": f, "endpoint_r": np.clip(endpoint, -1.0, 1.0)}


class BiobankEnv(gym.Env):
    """One biobank world per episode, one step (keyword settings:
    :class:`~.config.BiobankConfig`'s fields). ``reset`` seeds the draw of
    instance seeds (from 10,000 up: never a panel seed);
    ``options={"instance_seed": k}`` pins world k."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, **settings):
        self.config = BiobankConfig(**settings)
        self.settings = settings
        self.render_mode = check_render_mode(render_mode)
        p, m = self.config.sizes.proteins, len(IMAGING)
        self.observation_space = spaces.Dict({
            "association_z": spaces.Box(-np.inf, np.inf, (p, m), np.float32),
            "mr_z": spaces.Box(-np.inf, np.inf, (p, m), np.float32),
            "instrument_f": spaces.Box(0.0, np.inf, (p,), np.float32),
            "endpoint_r": spaces.Box(-1.0, 1.0, (m, len(ENDPOINTS)), np.float32),
        })
        self.action_space = spaces.Dict({
            "nominate": spaces.MultiDiscrete([len(NOMINATION)] * p),
            "confidence": spaces.Box(0.0, 1.0, (p,), np.float32),
            "phenotype": spaces.Discrete(m),
        })
        self.session: BiobankToolSession | None = None
        self._obs: dict | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        seed_ = instance_seed(self.np_random, options)
        self.session = BiobankToolSession(seed_, **self.settings)
        self._obs = observe(self.session)
        return self._copy(), {"instance_seed": seed_, "proteins": list(self.session.release.proteins),
                              "measures": list(IMAGING)}

    def _copy(self) -> dict:
        return {k: v.copy() for k, v in self._obs.items()}

    def step(self, action):
        if self.session is None:
            raise RuntimeError("step() called before reset()")
        if self.session.ended:
            raise RuntimeError("step() called after the episode ended; call reset()")
        if not isinstance(action, dict) or set(action) != {"nominate", "confidence", "phenotype"}:
            raise ValueError(f"action: {short_repr(action)} not allowed; a dict of nominate, confidence and phenotype")
        p = self.config.sizes.proteins
        nominate = np.asarray(action["nominate"])
        confidence = np.asarray(action["confidence"], np.float64)
        if nominate.shape != (p,) or nominate.dtype.kind not in "iu" or not np.isin(nominate, (0, 1, 2)).all():
            raise ValueError(f"action: nominate {short_repr(action['nominate'])} not allowed; {p} integers in 0..2")
        if confidence.shape != (p,) or not (np.isfinite(confidence) & (confidence >= 0) & (confidence <= 1)).all():
            raise ValueError(f"action: confidence {short_repr(action['confidence'])} not allowed; {p} numbers in [0, 1]")
        phenotype = int(action["phenotype"]) if np.ndim(action["phenotype"]) == 0 else -1
        if phenotype not in range(len(IMAGING)):
            raise ValueError(f"action: phenotype {short_repr(action['phenotype'])} not allowed; an integer in 0..{len(IMAGING) - 1}")
        proteins = self.session.release.proteins
        nominations = [{"protein": proteins[i], "direction": NOMINATION[int(nominate[i])], "confidence": float(confidence[i])}
                       for i in np.flatnonzero(nominate)]
        answer = self.session.call("submit", {"nominations": nominations, "phenotype": f"imaging.{IMAGING[phenotype]}"})
        info = {"error": answer.get("error")}
        if self.session.ended:
            info["scores"] = dict(self.session.scores)
        return self._copy(), float(self.session.total_reward), bool(self.session.ended), False, info

    def render(self):
        if self.render_mode != "ansi" or self.session is None:
            return None
        state = "ended" if self.session.ended else "open"
        return f"biobank world {self.session.instance_id} ({self.config.profile}), {state}"

    def close(self):
        self.session = None
