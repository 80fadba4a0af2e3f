"""The session's pytrees and codes: settings, action, state, refusal codes.

* :class:`EnvParams` -- static settings (size, mode, budget, costs, reward
  options); hashable, a static ``jit`` argument, so one compiled ``step``
  serves every organism of a size.
* :class:`Action` -- a fixed-shape action of one of :data:`ACTION_KINDS`;
  :func:`make_action` is the one place an action is checked and completed
  with defaults, for one session or a batch.
* :class:`EnvState` -- one session; a pytree that ``vmap`` batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym.validate import check_keys
from luca_gym.worlds.luca import spec, generator as world
from luca_gym.worlds.luca.spec import DAMPEN, N_PHENOTYPES, NO_MALFUNCTION
from luca_gym.worlds.luca.types import OrganismArrays

# -- action kinds -------------------------------------------------------------
EXPERIMENT, REVEAL_TASK, SUBMIT_PREDICTION, SUBMIT_NETWORK, COMMIT_DIAGNOSIS, TEST_RESCUE, END = range(7)
ACTION_KINDS = (
    "experiment",
    "reveal_task",
    "submit_prediction",
    "submit_network",
    "commit_diagnosis",
    "test_rescue",
    "end",
)
N_KINDS = len(ACTION_KINDS)
# Columns of the single-target results table.
SINGLE_TYPES = (spec.BLOCK, spec.BOOST, spec.DAMPEN)

# -- refusal codes (a refused action changes nothing but the step counter) -----
ERRORS = (
    ("ok", ""),
    ("unknown_kind", f"unknown action kind; allowed 0..{N_KINDS - 1}: {', '.join(ACTION_KINDS)}"),
    ("session_ended", "the session has ended; no further calls are accepted"),
    ("budget_spent", "not enough budget left for this call; free calls still work"),
    ("empty_intervention", "the intervention targets no gene and no signal; name at least one target"),
    ("unknown_code", "unknown gene intervention code; allowed 0=NONE, 1=BLOCK, 2=BOOST, 3=DAMPEN"),
    ("latent_target", "a latent gene cannot be targeted; target a gene marked targetable"),
    ("held_out_pair", "the intervention perturbs both genes of a held-out prediction task; refused, free"),
    ("no_task_left", "every prediction task has been revealed"),
    ("prediction_pending", "submit a prediction for the current task before revealing the next"),
    ("no_current_task", "no prediction task is open; reveal one first"),
    ("already_predicted", "the current task already has a prediction"),
    ("bad_prediction", "predictions must be finite numbers in [0, 1], one per phenotype"),
    ("healthy_mode", "diagnosis and rescue exist in disease mode only"),
    ("already_committed", "a diagnosis was already committed; it is one-way"),
    ("bad_diagnosis", "diagnosis: target must be a targetable gene (LOCK_HI=1 or LOCK_LO=2) or a signal (PERSIST=3)"),
    ("not_committed", "test_rescue needs a committed diagnosis first"),
    ("bad_network", "network entries must be -1, 0 or +1, one per gene and phenotype"),
)
ERROR_CODES = {name: code for code, (name, _) in enumerate(ERRORS)}
ERROR_MESSAGES = tuple(message for _, message in ERRORS)


@dataclass(frozen=True)
class EnvParams:
    """Static session settings (hashable: a static ``jit`` argument).

    The tier is not a setting of the core: the organism carries its dynamics, so
    one compiled ``step`` serves every tier of a size and mode.

    Attributes:
        n_genes: N. n_signals: S. budget: B = N + S + 8 by default.
        disease: disease mode (diagnosis, rescue, composite of three).
        experiment_cost / rescue_cost: budget units per call (SPEC: 1 each).
        max_steps: accepted calls after which the session is closed and the
            episode truncated (the max_steps-th is applied first). Refused
            calls do not count: they change nothing.
        dense_shaping: add potential-based shaping F = gamma * Phi(s') - Phi(s)
            with Phi = scale x gene coverage and Phi = 0 once the session has
            closed; off by default. At gamma = 1 it telescopes to zero, so the
            undiscounted return still equals the composite score; at a
            learner's discount gamma < 1 it leaves the optimal policy unchanged.
        shaping_scale: the potential's scale.
        shaping_gamma: the discount in F (set it to the learner's).
    """

    n_genes: int
    n_signals: int
    budget: int
    disease: bool
    experiment_cost: int = 1
    rescue_cost: int = 1
    max_steps: int = 0
    dense_shaping: bool = False
    shaping_scale: float = 0.1
    shaping_gamma: float = 1.0

    @property
    def mode(self) -> str:
        """"disease" or "healthy"."""
        return "disease" if self.disease else "healthy"


def make_params(
    tier: str = "medium",
    n_genes: int = 20,
    mode: str = "healthy",
    *,
    budget: int | None = None,
    max_steps: int | None = None,
    dense_shaping: bool = False,
    shaping_scale: float = 0.1,
    shaping_gamma: float = 1.0,
) -> EnvParams:
    """EnvParams from the paper's scaling rules; ``max_steps`` defaults to
    4 x budget + 64 calls."""
    spec.check_tier(tier)
    n_genes = spec.check_n_genes(n_genes)
    spec.check_mode(mode)
    sz = world.sizes(n_genes)
    budget = sz.budget if budget is None else spec.check_positive_int(budget, "budget")
    max_steps = 4 * budget + 64 if max_steps is None else spec.check_positive_int(max_steps, "max_steps")
    if isinstance(shaping_scale, (bool, np.bool_)) or not isinstance(shaping_scale, (int, float, np.number)) or not np.isfinite(shaping_scale):
        raise ValueError(f"shaping_scale: {shaping_scale!r} not allowed; a finite number")
    if isinstance(shaping_gamma, (bool, np.bool_)) or not isinstance(shaping_gamma, (int, float, np.number)) or not 0 < shaping_gamma <= 1:
        raise ValueError(f"shaping_gamma: {shaping_gamma!r} not allowed; a number in (0, 1]")
    return EnvParams(
        n_genes=n_genes,
        n_signals=sz.n_signals,
        budget=budget,
        disease=mode == "disease",
        max_steps=max_steps,
        dense_shaping=spec.check_bool(dense_shaping, "dense_shaping"),
        shaping_scale=float(shaping_scale),
        shaping_gamma=float(shaping_gamma),
    )


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """A fixed-shape action; fields that the kind does not use are ignored.
    Build one with :func:`make_action` (checked, with defaults).

    Attributes:
        kind: int32 (). One of :data:`ACTION_KINDS` (index).
        gene_codes: int32 (N,). Intervention code per gene (experiment, rescue);
            int32 so an out-of-range code reaches the core's check unwrapped.
        signal_flags: bool (S,). Signals to activate (experiment, rescue).
        prediction: float32 (P,). Predicted phenotypes for the current task.
        diagnosis_target: int32 (). Unified index: gene g, or signal k as N + k.
        diagnosis_type: int32 (). LOCK_HI=1, LOCK_LO=2, PERSIST=3.
        network: int32 (N, P). Submitted gene -> phenotype signs in {-1, 0, +1}.
    """

    kind: jax.Array
    gene_codes: jax.Array
    signal_flags: jax.Array
    prediction: jax.Array
    diagnosis_target: jax.Array
    diagnosis_type: jax.Array
    network: jax.Array


# Each field of an Action: (shape for N genes and S signals, dtype, numpy dtype
# kinds accepted, default). Integer fields take integers only (a float 1.7 is
# not a code), flags take bools or the integers 0 and 1, predictions any real.
ACTION_FIELDS = {
    "kind": (lambda n, s: (), jnp.int32, "iu", None),
    "gene_codes": (lambda n, s: (n,), jnp.int32, "iu", 0),
    "signal_flags": (lambda n, s: (s,), jnp.bool_, "biu", False),
    "prediction": (lambda n, s: (N_PHENOTYPES,), jnp.float32, "fiu", 0.5),
    "diagnosis_target": (lambda n, s: (), jnp.int32, "iu", 0),
    "diagnosis_type": (lambda n, s: (), jnp.int32, "iu", NO_MALFUNCTION),
    "network": (lambda n, s: (n, N_PHENOTYPES), jnp.int32, "iu", 0),
}
_KIND_WORDS = {"i": "integer", "u": "unsigned integer", "b": "bool", "f": "float"}
_INT32 = np.iinfo(np.int32)


def action_shapes(params: EnvParams, batch: tuple = ()) -> dict:
    """{field: shape} of an action, with an optional leading batch shape."""
    return {k: tuple(batch) + f[0](params.n_genes, params.n_signals) for k, f in ACTION_FIELDS.items()}


def make_action(params: EnvParams, kind, gene_codes=None, signal_flags=None, prediction=None,
                diagnosis_target=None, diagnosis_type=None, network=None, *, batch: tuple = ()) -> Action:
    """Check each field's shape, dtype and representable range, and fill the
    fields left out with their defaults (no target, 0.5 prediction, no
    network). ``batch`` is a leading shape shared by every field.

    Raises ValueError naming the field, what it got and what is allowed: a
    value that cannot be represented faithfully (a float code, an integer
    beyond int32, a flag other than 0/1) never reaches the core. Every
    representable value is judged by :func:`luca_gym.worlds.luca.core.step`, which refuses
    an illegal one at no cost.
    """
    given = dict(kind=kind, gene_codes=gene_codes, signal_flags=signal_flags, prediction=prediction,
                 diagnosis_target=diagnosis_target, diagnosis_type=diagnosis_type, network=network)
    shapes = action_shapes(params, batch)
    fields = {}
    for name, (_, dtype, kinds, default) in ACTION_FIELDS.items():
        value = given[name]
        if value is None and default is None:
            raise ValueError(f"action: field '{name}' is required; allowed 0..{N_KINDS - 1} ({', '.join(ACTION_KINDS)})")
        if value is None:
            fields[name] = jnp.full(shapes[name], default, dtype)
            continue
        array = value if isinstance(value, jax.Array) else np.asarray(value)
        if tuple(array.shape) != shapes[name]:
            raise ValueError(f"action['{name}']: shape {tuple(array.shape)} not allowed; expected {shapes[name]}")
        if np.dtype(array.dtype).kind not in kinds:
            words = " or ".join(_KIND_WORDS[k] for k in kinds)
            raise ValueError(f"action['{name}']: dtype {array.dtype} not allowed; expected {words}")
        if np.dtype(array.dtype).kind in "iu" and array.dtype != dtype:
            array = np.asarray(array)
            if array.size and (array.min() < _INT32.min or array.max() > _INT32.max):
                raise ValueError(f"action['{name}']: value {array.min() if array.min() < _INT32.min else array.max()} "
                                 f"out of the int32 range")
            if dtype == jnp.bool_ and np.any((array != 0) & (array != 1)):
                raise ValueError(f"action['{name}']: values must be 0 or 1 (or bools)")
        fields[name] = jnp.asarray(array, dtype)
    return Action(**fields)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EnvState:
    """One session. N genes, S signals, P=3 phenotypes, T=2 tasks, H=budget.

    Attributes:
        organism: the organism's arrays (hidden parts included; never observed).
        noise_key: PRNG key of the session's measurements.
        budget_left: int32 (). measure_count: int32 () measurements taken.
        step_count: int32 () accepted calls made (refused ones do not count).
        baseline_phenotypes: float32 (P,) measured at reset.
        last_phenotypes: float32 (P,), last_converged: bool (), last_steps:
            int32 (), last_in_range: bool (P,), last_restored_fraction: float32
            (), last_error: int32 () -- the previous call's result.
        single_results: float32 (N, 3, P) latest single-gene BLOCK/BOOST/DAMPEN
            measurement; single_mask: bool (N, 3).
        signal_results: float32 (S, P); signal_mask: bool (S,).
        tasks_revealed: int32 (). predictions: float32 (T, P). predicted: bool (T,).
        committed: bool (). diagnosis_target / diagnosis_type: int32 ().
        best_rescue: float32 () noise-free restored fraction. n_rescues: int32 ().
        network: int8 (N, P). network_submitted: bool ().
        history_codes: int8 (H, N), history_signals: bool (H, S), history_kind:
            int8 (H,) (a ``scoring.HISTORY_*`` code), n_history: int32 () --
            every costed call, for the strategy metrics.
        commit_used: int32 () budget used before the first task (-1: none yet).
        ended: bool (). truncated: bool (): ended at the call limit, not by END.
        shaping: float32 () potential paid out so far.
    """

    organism: OrganismArrays
    noise_key: jax.Array
    budget_left: jax.Array
    measure_count: jax.Array
    step_count: jax.Array
    baseline_phenotypes: jax.Array
    last_phenotypes: jax.Array
    last_converged: jax.Array
    last_steps: jax.Array
    last_in_range: jax.Array
    last_restored_fraction: jax.Array
    last_error: jax.Array
    single_results: jax.Array
    single_mask: jax.Array
    signal_results: jax.Array
    signal_mask: jax.Array
    tasks_revealed: jax.Array
    predictions: jax.Array
    predicted: jax.Array
    committed: jax.Array
    diagnosis_target: jax.Array
    diagnosis_type: jax.Array
    best_rescue: jax.Array
    n_rescues: jax.Array
    network: jax.Array
    network_submitted: jax.Array
    history_codes: jax.Array
    history_signals: jax.Array
    history_kind: jax.Array
    n_history: jax.Array
    commit_used: jax.Array
    ended: jax.Array
    truncated: jax.Array
    shaping: jax.Array


assert DAMPEN == len(SINGLE_TYPES)  # single_results columns are codes - 1


def parse_action(action: Any, params: EnvParams, batch: tuple = ()) -> Action:
    """A dict action (fields with a leading ``batch`` shape) -> :class:`Action`.

    Fields a kind does not use may be left out. Raises ValueError naming the
    field for a non-dict, an unknown field, a missing ``kind``, or a field of
    the wrong shape, dtype or range (:func:`make_action`).
    """
    if not isinstance(action, dict):
        raise ValueError(f"action: expected a dict with fields {', '.join(ACTION_FIELDS)}, got {type(action).__name__}")
    check_keys(action, "action", tuple(ACTION_FIELDS))
    if "kind" not in action:
        raise ValueError(f"action: field 'kind' is required; allowed 0..{N_KINDS - 1} ({', '.join(ACTION_KINDS)})")
    return make_action(params, **action, batch=tuple(batch))
