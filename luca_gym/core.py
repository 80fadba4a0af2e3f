"""The LUCA session protocol (SPEC §2-3) as one pure, jit-compiled JAX core.

Every rule of a session lives here once: budget and costs, phases, the honesty
refusals, measurement noise, scoring and reward. The Gymnasium environment, the
vector environment and the LLM tool interface are adapters over these
functions; none re-implements a rule.

* :class:`EnvParams` -- static settings (size, mode, budget, costs, reward
  options); hashable, passed as a static argument, so one compiled ``step``
  serves every organism of a size.
* :class:`EnvState` -- the session (organism, evidence, budget, flags,
  predictions, diagnosis, best rescue, noise key); a pytree that ``vmap`` batches.
* :class:`Action` -- a fixed-shape action of one of :data:`ACTION_KINDS`.
* :func:`reset` / :func:`step` -- pure; :func:`observe` builds the observation
  (only what an agent may know), :func:`session_scores` the hidden score
  breakdown an adapter may show once the session has ended.

Noise is a pure function of the session key (an adapter derives it from the
organism's triple) and the measurement counter, so a replayed session
reproduces exactly and two repeats of one experiment differ. ``step`` therefore
takes no key of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import scoring, sim, world
from luca_gym.types import (
    BLOCK,
    BOOST,
    DAMPEN,
    LOCK_HI,
    LOCK_LO,
    N_PHENOTYPES,
    N_TASKS,
    NO_MALFUNCTION,
    PERSIST,
    OrganismArrays,
    SteadyState,
)

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
SINGLE_TYPES = (BLOCK, BOOST, DAMPEN)

# -- error codes (an illegal action changes nothing but the step counter) -----
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

# Counts traces of the step body (tests assert no retrace across organisms).
TRACE_COUNT = {"step": 0, "reset": 0}


@dataclass(frozen=True)
class EnvParams:
    """Static session settings (hashable: a static ``jit`` argument).

    The tier is not a setting of the core: the organism carries its dynamics, so
    one compiled ``step`` serves every tier of a size and mode.

    Attributes:
        n_genes: N. n_signals: S. budget: B = N + S + 8 by default.
        disease: disease mode (diagnosis, rescue, composite of three).
        experiment_cost / rescue_cost: budget units per call (SPEC: 1 each).
        max_steps: calls (valid or not) after which the session is closed and
            the episode truncated.
        dense_shaping: add potential-based shaping (scale x gene coverage) that
            telescopes to zero at the session's close, so the return still
            equals the composite score; off by default.
        shaping_scale: the potential's scale.
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


def make_params(
    tier: str = "medium",
    n_genes: int = 20,
    mode: str = "healthy",
    *,
    budget: int | None = None,
    max_steps: int | None = None,
    dense_shaping: bool = False,
    shaping_scale: float = 0.1,
) -> EnvParams:
    """EnvParams from the paper's scaling rules; ``max_steps`` defaults to
    4 x budget + 64 calls."""
    world.check_triple(0, tier, n_genes, mode)
    sz = world.sizes(n_genes)
    budget = sz.budget if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise ValueError(f"budget: {budget!r} not allowed; a positive integer")
    max_steps = 4 * budget + 64 if max_steps is None else max_steps
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"max_steps: {max_steps!r} not allowed; a positive integer")
    if not np.isfinite(shaping_scale):
        raise ValueError(f"shaping_scale: {shaping_scale!r} not allowed; a finite number")
    return EnvParams(
        n_genes=n_genes,
        n_signals=sz.n_signals,
        budget=int(budget),
        disease=mode == "disease",
        max_steps=int(max_steps),
        dense_shaping=bool(dense_shaping),
        shaping_scale=float(shaping_scale),
    )


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Action:
    """A fixed-shape action; fields that the kind does not use are ignored.

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


def make_action(
    params: EnvParams,
    kind: int,
    gene_codes=None,
    signal_flags=None,
    prediction=None,
    diagnosis_target: int = 0,
    diagnosis_type: int = NO_MALFUNCTION,
    network=None,
) -> Action:
    """Build an :class:`Action` with defaults (no target, 0.5 prediction).
    Integer values outside the int32 range raise ValueError (they cannot be
    represented); every other value is judged by :func:`step`."""
    n, s = params.n_genes, params.n_signals
    return Action(
        kind=jnp.int32(kind),
        gene_codes=jnp.zeros(n, jnp.int32) if gene_codes is None else _int32("gene_codes", gene_codes),
        signal_flags=jnp.zeros(s, bool) if signal_flags is None else jnp.asarray(signal_flags, bool),
        prediction=jnp.full(N_PHENOTYPES, 0.5, jnp.float32) if prediction is None else jnp.asarray(prediction, jnp.float32),
        diagnosis_target=jnp.int32(diagnosis_target),
        diagnosis_type=jnp.int32(diagnosis_type),
        network=jnp.zeros((n, N_PHENOTYPES), jnp.int32) if network is None else _int32("network", network),
    )


def _int32(name: str, values) -> jax.Array:
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        info = np.iinfo(np.int32)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise ValueError(f"{name}: values must fit in int32, got {array.min()}..{array.max()}")
    elif array.dtype.kind != "b":
        raise ValueError(f"{name}: dtype {array.dtype} not allowed; expected integers")
    return jnp.asarray(array, jnp.int32)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class EnvState:
    """One session. N genes, S signals, P=3 phenotypes, T=2 tasks, H=budget.

    Attributes:
        organism: the organism's arrays (hidden parts included; never observed).
        noise_key: PRNG key of the session's measurements.
        budget_left: int32 (). measure_count: int32 () measurements taken.
        step_count: int32 () calls made, valid or not.
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
            int8 (H,), n_history: int32 () -- every costed call, for strategy.
        commit_used: int32 () budget used before the first task (-1: none yet).
        ended: bool (). shaping: float32 () potential paid out so far.
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
    shaping: jax.Array


def _measure(state_key, count, organism, codes, flags):
    """Solve, then measure with the noise of measurement number ``count``."""
    result = sim.solve(organism, codes, flags)
    noisy = sim.measure(jax.random.fold_in(state_key, count), organism, result.states)
    return result, noisy


@partial(jax.jit, static_argnames=("params",))
def reset(key: jax.Array, organism: OrganismArrays, params: EnvParams) -> tuple[dict, EnvState]:
    """Open a session on ``organism``; ``key`` seeds its measurement noise.
    Returns (observation, state). The baseline is measurement number 0."""
    TRACE_COUNT["reset"] += 1
    n, s, p, h = params.n_genes, params.n_signals, N_PHENOTYPES, params.budget
    if organism.n_genes != n or organism.n_signals != s:
        raise ValueError(f"organism: size ({organism.n_genes} genes, {organism.n_signals} signals) does not match params ({n}, {s})")
    _, baseline = _measure(key, 0, organism, jnp.zeros(n, jnp.int8), jnp.zeros(s, bool))
    f32, i32 = jnp.float32, jnp.int32
    state = EnvState(
        organism=organism,
        noise_key=key,
        budget_left=i32(params.budget),
        measure_count=i32(1),
        step_count=i32(0),
        baseline_phenotypes=baseline,
        last_phenotypes=baseline,
        last_converged=jnp.bool_(True),
        last_steps=i32(0),
        last_in_range=scoring.in_healthy_range(baseline),
        last_restored_fraction=f32(0.0),
        last_error=i32(0),
        single_results=jnp.zeros((n, len(SINGLE_TYPES), p), f32),
        single_mask=jnp.zeros((n, len(SINGLE_TYPES)), bool),
        signal_results=jnp.zeros((s, p), f32),
        signal_mask=jnp.zeros(s, bool),
        tasks_revealed=i32(0),
        predictions=jnp.zeros((N_TASKS, p), f32),
        predicted=jnp.zeros(N_TASKS, bool),
        committed=jnp.bool_(False),
        diagnosis_target=i32(-1),
        diagnosis_type=i32(NO_MALFUNCTION),
        best_rescue=f32(0.0),
        n_rescues=i32(0),
        network=jnp.zeros((n, p), jnp.int8),
        network_submitted=jnp.bool_(False),
        history_codes=jnp.zeros((h, n), jnp.int8),
        history_signals=jnp.zeros((h, s), bool),
        history_kind=jnp.zeros(h, jnp.int8),
        n_history=i32(0),
        commit_used=i32(-1),
        ended=jnp.bool_(False),
        shaping=f32(0.0),
    )
    return observe(state, params), state


def legal_kinds(state: EnvState, params: EnvParams) -> jax.Array:
    """bool (N_KINDS,): which action kinds are legal now (the action mask)."""
    open_ = ~state.ended
    current = jnp.clip(state.tasks_revealed - 1, 0, N_TASKS - 1)
    has_task = state.tasks_revealed > 0
    pending = has_task & ~state.predicted[current]
    return jnp.array(
        [
            open_ & (state.budget_left >= params.experiment_cost),
            open_ & (state.tasks_revealed < N_TASKS) & ~pending,
            open_ & pending,
            open_,
            open_ & params.disease & ~state.committed,
            open_ & params.disease & state.committed & (state.budget_left >= params.rescue_cost),
            open_,
        ]
    )


def _intervention_error(state: EnvState, action: Action) -> jax.Array:
    codes = action.gene_codes.astype(jnp.int32)
    touched = codes != 0
    task_genes = state.organism.task_genes
    both = touched[task_genes[:, 0]] & touched[task_genes[:, 1]]
    return jnp.select(
        [
            jnp.any((codes < 0) | (codes > DAMPEN)),
            jnp.any(touched & state.organism.latent_mask),
            ~jnp.any(touched) & ~jnp.any(action.signal_flags),
            jnp.any(both),
        ],
        [ERROR_CODES[k] for k in ("unknown_code", "latent_target", "empty_intervention", "held_out_pair")],
        0,
    )


def _error(state: EnvState, action: Action, params: EnvParams) -> jax.Array:
    """int32 error code of ``action`` in ``state`` (0: legal)."""
    n, s = params.n_genes, params.n_signals
    e = ERROR_CODES
    kind = action.kind
    current = jnp.clip(state.tasks_revealed - 1, 0, N_TASKS - 1)
    has_task = state.tasks_revealed > 0
    pending = has_task & ~state.predicted[current]
    intervention = _intervention_error(state, action)

    experiment = jnp.where(state.budget_left < params.experiment_cost, e["budget_spent"], intervention)
    reveal = jnp.select(
        [state.tasks_revealed >= N_TASKS, pending], [e["no_task_left"], e["prediction_pending"]], 0
    )
    values = action.prediction
    predict = jnp.select(
        [~has_task, state.predicted[current], ~jnp.all(jnp.isfinite(values) & (values >= 0) & (values <= 1))],
        [e["no_current_task"], e["already_predicted"], e["bad_prediction"]],
        0,
    )
    net = action.network.astype(jnp.int32)
    network = jnp.where(jnp.all((net >= -1) & (net <= 1)), 0, e["bad_network"])
    target, kind_ = action.diagnosis_target, action.diagnosis_type
    is_gene = (target >= 0) & (target < n)
    is_signal = (target >= n) & (target < n + s)
    gene_ok = is_gene & ~state.organism.latent_mask[jnp.clip(target, 0, n - 1)] & ((kind_ == LOCK_HI) | (kind_ == LOCK_LO))
    diagnosis_valid = gene_ok | (is_signal & (kind_ == PERSIST))
    diagnose = jnp.select(
        [not params.disease, state.committed, ~diagnosis_valid],
        [e["healthy_mode"], e["already_committed"], e["bad_diagnosis"]],
        0,
    )
    rescue = jnp.select(
        [not params.disease, ~state.committed, state.budget_left < params.rescue_cost],
        [e["healthy_mode"], e["not_committed"], e["budget_spent"]],
        intervention,
    )
    by_kind = jnp.array([experiment, reveal, predict, network, diagnose, rescue, 0])
    code = jnp.where((kind >= 0) & (kind < N_KINDS), by_kind[jnp.clip(kind, 0, N_KINDS - 1)], e["unknown_kind"])
    return jnp.where(state.ended, e["session_ended"], code).astype(jnp.int32)


def _coverage(state: EnvState) -> jax.Array:
    tested = jnp.any((state.history_codes != 0) & (state.history_kind == 1)[:, None], axis=0)
    targetable = ~state.organism.latent_mask
    return jnp.sum(tested & targetable) / jnp.maximum(jnp.sum(targetable), 1)


def _close_reward(state: EnvState, params: EnvParams) -> jax.Array:
    """Reward paid when the session closes: diagnosis and rescue credit (disease),
    minus the shaping potential paid so far (so shaping telescopes to zero)."""
    if not params.disease:
        return -state.shaping
    o = state.organism
    diagnosis = scoring.diagnosis_score(state.diagnosis_target, state.diagnosis_type, o.malfunction_target, o.malfunction_type)
    rescue = scoring.rescue_score(state.best_rescue, state.n_rescues)
    return (diagnosis + rescue) / 3.0 - state.shaping


@partial(jax.jit, static_argnames=("params",))
def step(state: EnvState, action: Action, params: EnvParams):
    """Apply ``action``. Returns (observation, state, reward, terminated,
    truncated, info) with ``info = {"error": int32 code}``.

    An illegal action returns the state unchanged except ``step_count`` and
    ``last_error``, with reward 0.
    """
    TRACE_COUNT["step"] += 1
    o = state.organism
    kind = action.kind
    error = _error(state, action, params)
    ok = error == 0
    is_experiment = ok & (kind == EXPERIMENT)
    is_rescue = ok & (kind == TEST_RESCUE)
    measured = is_experiment | is_rescue
    codes = jnp.where(measured, action.gene_codes, 0).astype(jnp.int8)
    flags = action.signal_flags & measured
    # Free calls skip the solver (under vmap the cond becomes a select).
    result, noisy = jax.lax.cond(
        measured,
        lambda: _measure(state.noise_key, state.measure_count, o, codes, flags),
        lambda: (
            SteadyState(
                states=o.baseline_state,
                phenotypes=state.last_phenotypes,
                converged=jnp.bool_(True),
                steps=jnp.int32(0),
            ),
            state.last_phenotypes,
        ),
    )
    cost = jnp.where(is_experiment, params.experiment_cost, 0) + jnp.where(is_rescue, params.rescue_cost, 0)

    # Single-target tables: one gene and no signal, or one signal and no gene.
    touched = codes != 0
    n_genes_hit, n_signals_hit = jnp.sum(touched), jnp.sum(flags)
    single_gene = is_experiment & (n_genes_hit == 1) & (n_signals_hit == 0)
    gene = jnp.argmax(touched)
    column = jnp.clip(codes[gene].astype(jnp.int32) - 1, 0, len(SINGLE_TYPES) - 1)
    single_results = jnp.where(single_gene, state.single_results.at[gene, column].set(noisy), state.single_results)
    single_mask = jnp.where(single_gene, state.single_mask.at[gene, column].set(True), state.single_mask)
    single_signal = is_experiment & (n_genes_hit == 0) & (n_signals_hit == 1)
    signal = jnp.argmax(flags)
    signal_results = jnp.where(single_signal, state.signal_results.at[signal].set(noisy), state.signal_results)
    signal_mask = jnp.where(single_signal, state.signal_mask.at[signal].set(True), state.signal_mask)

    # Rescue: the agent sees its measurement; the score uses the noise-free truth.
    measured_fraction = scoring.restored_fraction(noisy, o.aberrant)
    true_fraction = scoring.restored_fraction(result.phenotypes, o.aberrant)

    row = jnp.clip(state.n_history, 0, params.budget - 1)
    kind_code = jnp.where(is_experiment, 1, 2).astype(jnp.int8)
    history_codes = jnp.where(measured, state.history_codes.at[row].set(codes), state.history_codes)
    history_signals = jnp.where(measured, state.history_signals.at[row].set(flags), state.history_signals)
    history_kind = jnp.where(measured, state.history_kind.at[row].set(kind_code), state.history_kind)

    # Prediction: per-task credit paid at submission.
    current = jnp.clip(state.tasks_revealed - 1, 0, N_TASKS - 1)
    is_prediction = ok & (kind == SUBMIT_PREDICTION)
    predictions = jnp.where(is_prediction, state.predictions.at[current].set(action.prediction), state.predictions)
    predicted = jnp.where(is_prediction, state.predicted.at[current].set(True), state.predicted)
    task_score = scoring.task_scores(action.prediction[None], o.task_truth[current][None], jnp.ones(1, bool))[0]
    weight = 1.0 / (N_TASKS * (3.0 if params.disease else 1.0))
    reward = jnp.where(is_prediction, task_score * weight, 0.0)

    is_reveal = ok & (kind == REVEAL_TASK)
    spent = params.budget - state.budget_left
    is_commit = ok & (kind == COMMIT_DIAGNOSIS)
    is_network = ok & (kind == SUBMIT_NETWORK)
    step_count = state.step_count + 1

    new = dataclasses.replace(
        state,
        budget_left=state.budget_left - cost,
        measure_count=state.measure_count + measured.astype(jnp.int32),
        last_phenotypes=jnp.where(measured, noisy, state.last_phenotypes),
        last_converged=jnp.where(measured, result.converged, state.last_converged),
        last_steps=jnp.where(measured, result.steps, state.last_steps),
        last_in_range=jnp.where(measured, scoring.in_healthy_range(noisy), state.last_in_range),
        last_restored_fraction=jnp.where(is_rescue, measured_fraction, state.last_restored_fraction),
        single_results=single_results,
        single_mask=single_mask,
        signal_results=signal_results,
        signal_mask=signal_mask,
        tasks_revealed=state.tasks_revealed + is_reveal.astype(jnp.int32),
        predictions=predictions,
        predicted=predicted,
        committed=state.committed | is_commit,
        diagnosis_target=jnp.where(is_commit, action.diagnosis_target, state.diagnosis_target),
        diagnosis_type=jnp.where(is_commit, action.diagnosis_type, state.diagnosis_type),
        best_rescue=jnp.where(is_rescue, jnp.maximum(state.best_rescue, true_fraction), state.best_rescue),
        n_rescues=state.n_rescues + is_rescue.astype(jnp.int32),
        network=jnp.where(is_network, action.network.astype(jnp.int8), state.network),
        network_submitted=state.network_submitted | is_network,
        history_codes=history_codes,
        history_signals=history_signals,
        history_kind=history_kind,
        n_history=state.n_history + measured.astype(jnp.int32),
        commit_used=jnp.where(is_reveal & (state.commit_used < 0), spent, state.commit_used),
    )
    if params.dense_shaping:
        potential = params.shaping_scale * _coverage(new)
        reward = reward + jnp.where(ok, potential - state.shaping, 0.0)
        new = dataclasses.replace(new, shaping=jnp.where(ok, potential, state.shaping))

    # A valid END closes the session (terminated); running out of calls closes
    # it too (truncated). Either way the closing credit is paid once.
    terminated = ok & (kind == END)
    truncated = ~state.ended & ~terminated & (step_count >= params.max_steps)
    closing = terminated | truncated
    reward = reward + jnp.where(closing, _close_reward(new, params), 0.0)
    new = dataclasses.replace(
        new, ended=state.ended | closing, shaping=jnp.where(closing, 0.0, new.shaping)
    )
    # An illegal action changes nothing but the step counter and the error code.
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(ok | truncated, a, b), new, state)
    new = dataclasses.replace(new, step_count=step_count, last_error=error)
    return observe(new, params), new, reward.astype(jnp.float32), terminated, truncated, {"error": error}


def observe(state: EnvState, params: EnvParams) -> dict:
    """The observation: only what an agent may know (no weights, latent states,
    malfunction, task answers or scores). Shapes in :func:`observation_shapes`."""
    o = state.organism
    current = jnp.clip(state.tasks_revealed - 1, 0, N_TASKS - 1)
    has_task = state.tasks_revealed > 0
    return {
        "budget_left": state.budget_left,
        "baseline_phenotypes": state.baseline_phenotypes,
        "healthy_range": jnp.tile(jnp.array([scoring.HEALTHY_LOW, scoring.HEALTHY_HIGH], jnp.float32), (N_PHENOTYPES, 1)),
        "aberrant": o.aberrant,
        "targetable": ~o.latent_mask,
        "last_phenotypes": state.last_phenotypes,
        "last_converged": state.last_converged,
        "last_steps": state.last_steps,
        "last_in_range": state.last_in_range,
        "last_restored_fraction": state.last_restored_fraction,
        "last_error": state.last_error,
        "single_results": state.single_results,
        "single_mask": state.single_mask,
        "signal_results": state.signal_results,
        "signal_mask": state.signal_mask,
        "task_index": jnp.where(has_task, current, -1).astype(jnp.int32),
        "task_genes": jnp.where(has_task, o.task_genes[current], -1).astype(jnp.int32),
        "task_codes": jnp.where(has_task, o.task_codes[current], 0).astype(jnp.int8),
        "predicted": state.predicted,
        "diagnosis_committed": state.committed,
        "network_submitted": state.network_submitted,
        "ended": state.ended,
        "action_mask": legal_kinds(state, params),
    }


def observation_shapes(params: EnvParams) -> dict:
    """{name: (shape, dtype, low, high)} of every observation field."""
    n, s, p, t = params.n_genes, params.n_signals, N_PHENOTYPES, N_TASKS
    f, i, b, i8 = np.float32, np.int32, np.bool_, np.int8
    return {
        "budget_left": ((), i, 0, params.budget),
        "baseline_phenotypes": ((p,), f, 0.0, 1.0),
        "healthy_range": ((p, 2), f, 0.0, 1.0),
        "aberrant": ((p,), b, 0, 1),
        "targetable": ((n,), b, 0, 1),
        "last_phenotypes": ((p,), f, 0.0, 1.0),
        "last_converged": ((), b, 0, 1),
        "last_steps": ((), i, 0, sim.MAX_STEPS),
        "last_in_range": ((p,), b, 0, 1),
        "last_restored_fraction": ((), f, 0.0, 1.0),
        "last_error": ((), i, 0, len(ERRORS) - 1),
        "single_results": ((n, len(SINGLE_TYPES), p), f, 0.0, 1.0),
        "single_mask": ((n, len(SINGLE_TYPES)), b, 0, 1),
        "signal_results": ((s, p), f, 0.0, 1.0),
        "signal_mask": ((s,), b, 0, 1),
        "task_index": ((), i, -1, t - 1),
        "task_genes": ((2,), i, -1, n - 1),
        "task_codes": ((2,), i8, 0, DAMPEN),
        "predicted": ((t,), b, 0, 1),
        "diagnosis_committed": ((), b, 0, 1),
        "network_submitted": ((), b, 0, 1),
        "ended": ((), b, 0, 1),
        "action_mask": ((N_KINDS,), b, 0, 1),
    }


@partial(jax.jit, static_argnames=("params", "network"))
def session_scores(state: EnvState, params: EnvParams, network: bool = True) -> dict:
    """The hidden score breakdown of a session (SPEC §3). Adapters show it only
    once ``state.ended``. Network truth is solved here (2N noise-free solves);
    ``network=False`` returns the four headline scores only (cheap, batched use)."""
    o = state.organism
    n = params.n_genes
    prediction = scoring.prediction_accuracy(state.predictions, o.task_truth, state.predicted)
    diagnosis = scoring.diagnosis_score(state.diagnosis_target, state.diagnosis_type, o.malfunction_target, o.malfunction_type)
    rescue = scoring.rescue_score(state.best_rescue, state.n_rescues)
    composite = scoring.composite_score(params.disease, prediction, diagnosis, rescue)
    if not network:
        return {"composite": composite, "prediction": prediction, "diagnosis": diagnosis, "rescue": rescue}
    eye = jnp.eye(n, dtype=jnp.int8)
    no_signal = jnp.zeros((n, params.n_signals), bool)
    block = sim.solve_interventions(o, eye * BLOCK, no_signal).phenotypes
    boost = sim.solve_interventions(o, eye * BOOST, no_signal).phenotypes
    truth = scoring.network_truth(o.baseline_phenotypes, block, boost)
    edges = scoring.network_scores(state.network, truth, ~o.latent_mask)
    strategy = scoring.strategy_metrics(
        state.history_codes,
        state.history_signals,
        state.history_kind,
        state.n_history,
        params.budget,
        ~o.latent_mask,
        state.commit_used,
    )
    return {
        "composite": composite,
        "prediction": prediction,
        "diagnosis": diagnosis,
        "rescue": rescue,
        "task_scores": scoring.task_scores(state.predictions, o.task_truth, state.predicted),
        "network_precision": edges["precision"],
        "network_recall": edges["recall"],
        "network_f1": edges["f1"],
        **strategy,
        "n_alt": o.n_alt,
        "malfunction_target": o.malfunction_target,
        "malfunction_type": o.malfunction_type,
        "n_experiments": jnp.sum(state.history_kind == 1),
        "n_rescue_tests": state.n_rescues,
    }


def noise_key(seed: int, tier: str, n_genes: int) -> jax.Array:
    """The session noise key of an organism triple: measurement noise is a pure
    function of the organism and the measurement counter."""
    return noise_keys(np.asarray([seed], np.int64), tier, n_genes)[0]


def noise_keys(seeds, tier: str, n_genes: int) -> jax.Array:
    """:func:`noise_key` of many seeds at once: (B, 2) uint32."""
    seeds = np.asarray(seeds, np.int64)
    hi, lo = (seeds >> 32).astype(np.uint32), (seeds & 0xFFFFFFFF).astype(np.uint32)
    return _noise_keys(hi, lo, np.uint32(world.TIERS[tier].index), np.uint32(n_genes))


@jax.jit
def _noise_keys(hi, lo, tier_index, n_genes):
    def one(hi, lo):
        key = jax.random.fold_in(jax.random.PRNGKey(lo), hi)
        return jax.random.fold_in(jax.random.fold_in(key, tier_index), n_genes)

    return jax.vmap(one)(hi, lo)
