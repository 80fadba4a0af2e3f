"""``LucaEnv``: the LUCA session as a ``gymnasium.Env`` (an adapter over
:mod:`luca_gym.core`; it translates, the core decides).

At the boundary: numpy arrays in the observation, Python ``float`` rewards and
``bool`` flags. The action is a dict; its *structure* (field names, shapes,
dtypes) is checked here and a wrong one raises ``ValueError`` naming the
field, while its *values* go to the core, which refuses an illegal one without
cost and reports it in ``info["error"]``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import gymnasium as gym
import jax
import numpy as np
from gymnasium import spaces

from luca_gym import core, world
from luca_gym.types import DAMPEN, INTERVENTION_TYPES, MALFUNCTION_TYPES, N_PHENOTYPES, Organism

ORGANISM_SEED_HIGH = 2**31 - 1


@lru_cache(maxsize=512)
def cached_organism(seed: int, tier: str, n_genes: int, mode: str, backwards: bool) -> Organism:
    """``world.make_organism`` memoised: an organism is a pure function of its
    arguments, so reusing one is indistinguishable from regenerating it."""
    return world.make_organism(seed, tier, n_genes, mode, backwards)


def _box(shape, dtype, low, high) -> spaces.Box:
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, np.int8)
    return spaces.Box(low, high, shape, dtype)


def observation_space(params: core.EnvParams) -> spaces.Dict:
    return spaces.Dict({k: _box(*v) for k, v in core.observation_shapes(params).items()})


def action_space(params: core.EnvParams) -> spaces.Dict:
    n, s = params.n_genes, params.n_signals
    return spaces.Dict(
        {
            "kind": spaces.Discrete(core.N_KINDS),
            "gene_codes": spaces.MultiDiscrete(np.full(n, DAMPEN + 1)),
            "signal_flags": spaces.MultiBinary(s),
            "prediction": spaces.Box(0.0, 1.0, (N_PHENOTYPES,), np.float32),
            "diagnosis_target": spaces.Discrete(n + s),
            "diagnosis_type": spaces.Discrete(len(MALFUNCTION_TYPES)),
            "network": spaces.Box(-1, 1, (n, N_PHENOTYPES), np.int8),
        }
    )


def to_numpy_observation(obs: dict) -> dict:
    """Core observation (JAX arrays) -> numpy, bools as int8 (0/1)."""
    obs = jax.device_get(obs)
    return {k: (np.asarray(v, np.int8) if np.asarray(v).dtype == np.bool_ else np.asarray(v)) for k, v in obs.items()}


_FIELD_KINDS = {
    "kind": "iu",
    "gene_codes": "iu",
    "signal_flags": "biu",
    "prediction": "fiu",
    "diagnosis_target": "iu",
    "diagnosis_type": "iu",
    "network": "iu",
}


def action_shapes(params: core.EnvParams, batch: tuple = ()) -> dict:
    """{field: shape} of a dict action, with an optional leading batch shape."""
    n, s = params.n_genes, params.n_signals
    single = {
        "kind": (),
        "gene_codes": (n,),
        "signal_flags": (s,),
        "prediction": (N_PHENOTYPES,),
        "diagnosis_target": (),
        "diagnosis_type": (),
        "network": (n, N_PHENOTYPES),
    }
    return {k: tuple(batch) + v for k, v in single.items()}


def action_from_dict(action: Any, params: core.EnvParams) -> core.Action:
    """Check the structure of a dict action and build a :class:`core.Action`.

    Fields a kind does not use may be omitted. Raises ValueError naming the
    offending field for a non-dict, an unknown field, a wrong shape or dtype.
    Values (codes, targets, predictions) are judged by the core, not here.
    """
    if not isinstance(action, dict):
        raise ValueError(f"action: expected a dict with fields {sorted(_FIELD_KINDS)}, got {type(action).__name__}")
    unknown = sorted(set(action) - set(_FIELD_KINDS))
    if unknown:
        raise ValueError(f"action: unknown field {unknown[0]!r}; allowed fields {sorted(_FIELD_KINDS)}")
    if "kind" not in action:
        raise ValueError(f"action: field 'kind' is required; allowed 0..{core.N_KINDS - 1} ({', '.join(core.ACTION_KINDS)})")
    shapes = action_shapes(params)
    values = {}
    for name, value in action.items():
        array = np.asarray(value)
        if array.shape != shapes[name]:
            raise ValueError(f"action['{name}']: shape {array.shape} not allowed; expected {shapes[name]}")
        if array.dtype.kind not in _FIELD_KINDS[name]:
            raise ValueError(f"action['{name}']: dtype {array.dtype} not allowed; expected {_dtype_words(_FIELD_KINDS[name])}")
        if array.dtype.kind in "iu" and name != "prediction":
            info = np.iinfo(np.int32)
            if np.any(array < info.min) or np.any(array > info.max):
                raise ValueError(f"action['{name}']: value out of the int32 range")
        values[name] = array
    if "signal_flags" in values:
        flags = values["signal_flags"]
        if np.any((flags != 0) & (flags != 1)):
            raise ValueError("action['signal_flags']: values must be 0 or 1")
    return core.make_action(params, **{k: v for k, v in values.items()})


def _dtype_words(kinds: str) -> str:
    words = {"i": "integer", "u": "unsigned integer", "b": "bool", "f": "float"}
    return " or ".join(words[k] for k in kinds)


class LucaEnv(gym.Env):
    """One LUCA session per episode.

    Args:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper uses 20; the scaling study up to 1280).
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        render_mode: None or "ansi".
        max_steps: calls before truncation (default 4 x budget + 64).
        dense_shaping: potential-based shaping that telescopes to zero (the
            return still equals the composite score); off by default.

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
    ):
        self.params = core.make_params(
            tier, n_genes, mode, max_steps=max_steps, dense_shaping=dense_shaping, shaping_scale=shaping_scale
        )
        if not isinstance(backwards, (bool, np.bool_)):
            raise ValueError(f"backwards: {backwards!r} is not a bool; allowed True or False")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} not supported; allowed None or 'ansi'")
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, bool(backwards)
        self.render_mode = render_mode
        self.action_space = action_space(self.params)
        self.observation_space = observation_space(self.params)
        self.state: core.EnvState | None = None
        self.organism: Organism | None = None
        self._last_info: dict = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"organism_seed"})
        if unknown:
            raise ValueError(f"options: unknown key {unknown[0]!r}; allowed 'organism_seed'")
        if "organism_seed" in options:
            organism_seed = options["organism_seed"]
        else:
            organism_seed = int(self.np_random.integers(0, ORGANISM_SEED_HIGH))
        self.organism = cached_organism(organism_seed, self.tier, self.n_genes, self.mode, self.backwards)
        key = core.noise_key(organism_seed, self.tier, self.n_genes)
        obs, self.state = core.reset(key, self.organism.arrays, self.params)
        info = {"organism_seed": int(organism_seed), "budget": self.params.budget}
        self._last_info = info
        return to_numpy_observation(obs), info

    def step(self, action):
        if self.state is None:
            raise RuntimeError("step() called before reset()")
        act = action_from_dict(action, self.params)
        obs, self.state, reward, terminated, truncated, core_info = core.step(self.state, act, self.params)
        code = int(core_info["error"])
        info: dict[str, Any] = {"error_code": code, "error": core.ERROR_MESSAGES[code] or None}
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            info["scores"] = self.scores()
        self._last_info = info
        return to_numpy_observation(obs), float(reward), terminated, truncated, info

    def scores(self) -> dict:
        """The score breakdown of the ended session; refuses while it is open."""
        if self.state is None or not bool(self.state.ended):
            raise RuntimeError("scores are revealed only once the session has ended")
        raw = jax.device_get(core.session_scores(self.state, self.params))
        out = {}
        for k, v in raw.items():
            v = np.asarray(v)
            out[k] = v.tolist() if v.ndim else (int(v) if v.dtype.kind in "iu" else float(v))
        return out

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
