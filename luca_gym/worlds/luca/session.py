"""One LUCA session on the host: the pure core behind the numpy boundary.

:class:`Session` is what the tool layer, the harness and the Gymnasium env all
stand on: it builds the core's params from the settings, opens organism k,
steps dict actions through :func:`~luca_gym.worlds.luca.core.parse_action` and
the core, and reveals the scores once the session has ended. It decides no
rule; the core does. :func:`config_organism` (and :func:`cached_organism`, the
same with the settings one by one) is the organism memo beside it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from luca_gym import seal as seal_mod
from luca_gym.boundary import to_numpy_observation, to_python
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.spec import INTERVENTION_TYPES
from luca_gym.worlds.luca.types import Organism


@lru_cache(maxsize=512)
def _cached_organism(seed: int, config: LucaConfig, seal) -> Organism:
    return config.organism(seed, sealed=seal)


def config_organism(seed: int, config: LucaConfig, *, sealed=None) -> Organism:
    """The organism ``seed`` of ``config``'s settings (its budget aside),
    memoised: an organism is a pure function of its seed and settings, so
    reusing one is indistinguishable from regenerating it. The seed is
    checked first, so the cache never decides what is valid."""
    return _cached_organism(spec.check_seed(seed), config.organism_settings(), seal_mod.make_seal(sealed))


def cached_organism(seed: int, tier: str, n_genes: int, mode: str = "healthy", backwards: bool = False, *, sealed=None,
                    vocabulary: str = "invented") -> Organism:
    """``make_organism`` memoised (:func:`config_organism`; the settings are
    checked by :class:`~luca_gym.worlds.luca.config.LucaConfig` first)."""
    config = LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, vocabulary=vocabulary)
    return config_organism(seed, config, sealed=sealed)


def ended_scores(state: core.EnvState | None, params: core.EnvParams) -> dict:
    """The score breakdown of an ended session as Python numbers and lists
    (JSON-ready); refuses while the session is open."""
    if state is None or not bool(state.ended):
        raise RuntimeError("scores are revealed only once the session has ended")
    return to_python(core.session_scores(state, params))


class Session:
    """One LUCA session at a time, over the pure core.

    Args:
        tier, mode, n_genes, backwards, vocabulary: the organism's settings
            (:class:`~luca_gym.worlds.luca.config.LucaConfig`).
        budget: experiment and rescue units (default N + S + 8, paper Table 5).
        max_steps: accepted calls before truncation (default 4 x budget + 64).
        dense_shaping, shaping_scale, shaping_gamma: potential-based shaping
            (:func:`~luca_gym.worlds.luca.core.make_params`).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): organism k is generated from its sealed seed.

    :meth:`open` starts a session on organism k; :meth:`step` takes a dict
    action (ValueError naming the field for a malformed one, nothing spent) and
    returns ``(obs, reward, terminated, truncated, info)`` with numpy arrays and
    Python scalars; ``info["scores"]`` appears once the session has ended.
    """

    def __init__(self, tier: str = "medium", mode: str = "healthy", n_genes: int = 20, backwards: bool = False, *,
                 max_steps: int | None = None, dense_shaping: bool = False, shaping_scale: float = 0.1,
                 shaping_gamma: float = 1.0, budget: int | None = None, sealed=None, vocabulary: str = "invented"):
        self.seal = seal_mod.make_seal(sealed)
        self.params = core.make_params(
            tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
            shaping_scale=shaping_scale, shaping_gamma=shaping_gamma,
        )
        backwards = spec.check_bool(backwards, "backwards")
        # The organism's settings (the budget is the session's: params.budget, any size make_params allows).
        self.organism_settings = LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=bool(backwards),
                                            vocabulary=vocabulary)
        self.vocabulary = self.organism_settings.vocabulary
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, bool(backwards)
        self.state: core.EnvState | None = None
        self.organism: Organism | None = None

    def open(self, organism_seed: int) -> tuple[dict, dict]:
        """Start a session on organism ``organism_seed`` (checked). Returns
        (first observation, ``{"organism_seed", "budget"}``)."""
        organism_seed = spec.check_seed(organism_seed, "organism_seed")
        self.organism = config_organism(organism_seed, self.organism_settings, sealed=self.seal)
        key = core.noise_key(organism_seed, self.tier, self.n_genes, self.seal)
        obs, self.state = core.reset(key, self.organism.arrays, self.params)
        return to_numpy_observation(obs), {"organism_seed": organism_seed, "budget": self.params.budget}

    def step(self, action):
        """One action, checked: (observation, reward, terminated, truncated, info); an ended session adds ``info["scores"]``."""
        if self.state is None:
            raise RuntimeError("step() called before reset(): no session is open")
        act = core.parse_action(action, self.params)
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

    def close(self):
        """Forget the session; ``step`` refuses until the next ``reset``."""
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
