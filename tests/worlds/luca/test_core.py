"""The pure session core (SPEC §2-3): a reference model of the protocol run
against ``core.step`` over random action sequences, and the compile-once rule.

Sessions are driven through ``core.reset`` / ``core.step`` directly (jitted), so
each ``EnvParams`` compiles once per test process. The reference model below is
written from SPEC §2 independently of the core: it decides which refusals an
action deserves, tracks what a session has stored, and recomputes the composite
score with the ``luca_gym.worlds.luca.scoring`` functions.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from luca_gym.testing import count_traces
from luca_gym.worlds.luca import core, scoring, sim, generator as world
from luca_gym.worlds.luca.spec import BLOCK, DAMPEN, LOCK_HI, LOCK_LO, N_PHENOTYPES, N_TASKS, PERSIST

TIERS = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
N = 20
SEEDS = range(20)
SMALL_BUDGET = 3
E = core.ERROR_CODES


@functools.lru_cache(maxsize=None)
def organism(seed: int, tier: str, mode: str):
    return world.make_organism(seed, tier, N, mode)


@functools.lru_cache(maxsize=None)
def params_of(tier: str, mode: str, dense: bool = False, budget: int | None = None) -> core.EnvParams:
    """One EnvParams per setting, so ``core.step`` compiles once per setting."""
    return core.make_params(tier, N, mode, budget=budget, dense_shaping=dense)


def state_leaves(state: core.EnvState) -> dict[str, np.ndarray]:
    """Every pytree leaf of a session state, by path, as numpy."""
    return {
        jax.tree_util.keystr(path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(jax.device_get(state))
    }


def changed_leaves(before: dict, after: dict) -> list[str]:
    """Paths whose dtype, shape or bytes differ (bitwise: NaN equals NaN)."""
    return [
        k
        for k in before
        if before[k].dtype != after[k].dtype
        or before[k].shape != after[k].shape
        or before[k].tobytes() != after[k].tobytes()
    ]


# -- the reference model of SPEC §2 --------------------------------------------


class Reference:
    """What a session must have stored, and which refusals an action earns.

    Written from SPEC §2, not from the core: refusal *reasons* are sets, so
    the core may pick any reason that applies when several do.
    """

    def __init__(self, o, params: core.EnvParams):
        a = o.arrays
        self.params = params
        self.n, self.s = params.n_genes, params.n_signals
        self.latent = np.asarray(a.latent_mask)
        self.task_genes = np.asarray(a.task_genes)
        self.task_truth = np.asarray(a.task_truth)
        self.aberrant = np.asarray(a.aberrant)
        self.arrays = a
        self.budget_left = params.budget
        self.tasks_revealed = 0
        self.predicted = np.zeros(N_TASKS, bool)
        self.predictions = np.zeros((N_TASKS, N_PHENOTYPES), np.float32)
        self.committed = False
        self.diagnosis = (-1, 0)
        self.best_rescue = 0.0
        self.n_rescues = 0
        self.ended = False
        self.costed = 0

    def _intervention(self, codes, flags) -> set[str]:
        reasons = set()
        touched = codes != 0
        if np.any((codes < 0) | (codes > DAMPEN)):
            reasons.add("unknown_code")
        if np.any(touched & self.latent):
            reasons.add("latent_target")
        if not touched.any() and not flags.any():
            reasons.add("empty_intervention")
        if any(touched[g0] and touched[g1] for g0, g1 in self.task_genes):
            reasons.add("held_out_pair")
        return reasons

    def _pending(self) -> bool:
        return self.tasks_revealed > 0 and not self.predicted[self.tasks_revealed - 1]

    def reasons(self, act: dict) -> set[str]:
        """The refusals ``act`` deserves now (empty: it must be accepted)."""
        if self.ended:
            return {"session_ended"}
        kind, disease = act["kind"], self.params.disease
        reasons = set()
        if kind == core.EXPERIMENT:
            if self.budget_left < self.params.experiment_cost:
                reasons.add("budget_spent")
            reasons |= self._intervention(act["gene_codes"], act["signal_flags"])
        elif kind == core.REVEAL_TASK:
            if self.tasks_revealed >= N_TASKS:
                reasons.add("no_task_left")
            if self._pending():
                reasons.add("prediction_pending")
        elif kind == core.SUBMIT_PREDICTION:
            values = act["prediction"]
            if self.tasks_revealed == 0:
                reasons.add("no_current_task")
            elif self.predicted[self.tasks_revealed - 1]:
                reasons.add("already_predicted")
            if not np.all(np.isfinite(values) & (values >= 0) & (values <= 1)):
                reasons.add("bad_prediction")
        elif kind == core.SUBMIT_NETWORK:
            if np.any(np.abs(act["network"].astype(int)) > 1):
                reasons.add("bad_network")
        elif kind == core.COMMIT_DIAGNOSIS:
            target, kind_ = act["diagnosis_target"], act["diagnosis_type"]
            gene_ok = 0 <= target < self.n and not self.latent[target] and kind_ in (LOCK_HI, LOCK_LO)
            signal_ok = self.n <= target < self.n + self.s and kind_ == PERSIST
            if not disease:
                reasons.add("healthy_mode")
            if self.committed:
                reasons.add("already_committed")
            if not (gene_ok or signal_ok):
                reasons.add("bad_diagnosis")
        elif kind == core.TEST_RESCUE:
            if not disease:
                reasons.add("healthy_mode")
            if not self.committed:
                reasons.add("not_committed")
            if self.budget_left < self.params.rescue_cost:
                reasons.add("budget_spent")
            reasons |= self._intervention(act["gene_codes"], act["signal_flags"])
        elif kind != core.END:
            reasons.add("unknown_kind")
        return reasons

    def accept(self, act: dict) -> None:
        """Apply an accepted action to the model."""
        kind = act["kind"]
        if kind == core.EXPERIMENT:
            self.budget_left -= self.params.experiment_cost
            self.costed += 1
        elif kind == core.REVEAL_TASK:
            self.tasks_revealed += 1
        elif kind == core.SUBMIT_PREDICTION:
            self.predictions[self.tasks_revealed - 1] = act["prediction"]
            self.predicted[self.tasks_revealed - 1] = True
        elif kind == core.COMMIT_DIAGNOSIS:
            self.committed = True
            self.diagnosis = (act["diagnosis_target"], act["diagnosis_type"])
        elif kind == core.TEST_RESCUE:
            self.budget_left -= self.params.rescue_cost
            self.costed += 1
            self.n_rescues += 1
            # The score uses the noise-free truth, recomputed here by a fresh solve.
            truth = sim.solve(self.arrays, act["gene_codes"].astype(np.int8), act["signal_flags"]).phenotypes
            self.best_rescue = max(self.best_rescue, float(scoring.restored_fraction(truth, self.aberrant)))
        elif kind == core.END:
            self.ended = True

    def composite(self) -> float:
        a = self.arrays
        prediction = scoring.prediction_accuracy(self.predictions, self.task_truth, self.predicted)
        diagnosis = scoring.diagnosis_score(*self.diagnosis, a.malfunction_target, a.malfunction_type)
        rescue = scoring.rescue_score(self.best_rescue, self.n_rescues)
        return float(scoring.composite_score(self.params.disease, prediction, diagnosis, rescue))


# -- random actions from an agent ------------------------------------------------

# Kinds by weight (per 100): END is rare so most sessions run long enough to
# spend a small budget; -1, 7, 9 and 100 are unknown kinds.
KIND_WEIGHTS = (
    (core.EXPERIMENT, 34),
    (core.REVEAL_TASK, 10),
    (core.SUBMIT_PREDICTION, 10),
    (core.SUBMIT_NETWORK, 5),
    (core.COMMIT_DIAGNOSIS, 8),
    (core.TEST_RESCUE, 28),
    (core.END, 1),
    (-1, 1),
    (7, 1),
    (9, 1),
    (100, 1),
)
KIND_TABLE = np.repeat([k for k, _ in KIND_WEIGHTS], [w for _, w in KIND_WEIGHTS])
ILLEGAL_CODES = (-1, 4, 7, 9, 127, -128)
SPECIAL_VALUES = (math.nan, math.inf, -math.inf, 2.0, -0.1, 1.0, 0.0, 1.0000001)


def draw_action(data, o, n_signals: int) -> dict:
    """A random action, mostly well-formed in shape, often illegal in value."""
    a = o.arrays
    latent = np.flatnonzero(np.asarray(a.latent_mask))
    targetable = np.flatnonzero(~np.asarray(a.latent_mask))
    task_genes = np.asarray(a.task_genes)
    codes = np.zeros(N, np.int64)
    how = data.draw(st.sampled_from(["empty", "single", "single", "some", "task_pair", "latent", "illegal"]))
    if how == "latent" and not latent.size:
        how = "single"
    if how == "single":
        codes[data.draw(st.sampled_from(list(targetable)))] = data.draw(st.integers(1, DAMPEN))
    elif how == "some":
        for g in data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=5)):
            codes[g] = data.draw(st.integers(1, DAMPEN))
    elif how == "task_pair":
        t = data.draw(st.integers(0, N_TASKS - 1))
        codes[task_genes[t]] = data.draw(st.lists(st.integers(1, DAMPEN), min_size=2, max_size=2))
    elif how == "latent":
        codes[data.draw(st.sampled_from(list(latent)))] = data.draw(st.integers(1, DAMPEN))
    elif how == "illegal":
        codes[data.draw(st.integers(0, N - 1))] = data.draw(st.sampled_from(ILLEGAL_CODES))
    flags = np.array(data.draw(st.lists(st.booleans(), min_size=n_signals, max_size=n_signals)))
    flags &= data.draw(st.booleans())  # half the actions activate no signal

    pred_how = data.draw(st.sampled_from(["truth", "near", "uniform", "special"]))
    task = data.draw(st.integers(0, N_TASKS - 1))
    if pred_how == "truth":
        prediction = np.asarray(a.task_truth[task], np.float32)
    elif pred_how == "near":
        offsets = np.array(data.draw(st.lists(st.floats(-0.2, 0.2), min_size=3, max_size=3)), np.float32)
        prediction = np.clip(np.asarray(a.task_truth[task]) + offsets, 0, 1).astype(np.float32)
    elif pred_how == "uniform":
        prediction = np.array(data.draw(st.lists(st.floats(0, 1, width=32), min_size=3, max_size=3)), np.float32)
    else:
        prediction = np.array(data.draw(st.lists(st.sampled_from(SPECIAL_VALUES), min_size=3, max_size=3)), np.float32)

    diag_how = data.draw(st.sampled_from(["truth", "truth_target", "valid", "latent", "random"]))
    diag_type = data.draw(st.integers(-1, 4))
    if diag_how == "truth":
        target, diag_type = int(a.malfunction_target), int(a.malfunction_type)
    elif diag_how == "truth_target":
        target = int(a.malfunction_target)
    elif diag_how == "valid":
        target = data.draw(st.sampled_from(list(targetable) + list(range(N, N + n_signals))))
        diag_type = PERSIST if target >= N else data.draw(st.sampled_from([LOCK_HI, LOCK_LO]))
    elif diag_how == "latent" and latent.size:
        target = int(latent[0])
    else:
        target = data.draw(st.integers(-2, N + n_signals + 1))

    network = np.array(data.draw(st.lists(st.integers(-1, 1), min_size=N * 3, max_size=N * 3)), np.int64).reshape(N, 3)
    if data.draw(st.integers(0, 3)) == 0:
        network[data.draw(st.integers(0, N - 1)), data.draw(st.integers(0, 2))] = data.draw(st.sampled_from([-2, 2, 127, -128]))
    return {
        "kind": int(KIND_TABLE[data.draw(st.integers(0, KIND_TABLE.size - 1))]),
        "gene_codes": codes,
        "signal_flags": flags,
        "prediction": prediction,
        "diagnosis_target": target,
        "diagnosis_type": diag_type,
        "network": network,
    }


def to_action(params: core.EnvParams, act: dict) -> core.Action:
    return core.make_action(
        params,
        act["kind"],
        gene_codes=act["gene_codes"].astype(np.int8),
        signal_flags=act["signal_flags"],
        prediction=act["prediction"],
        diagnosis_target=act["diagnosis_target"],
        diagnosis_type=act["diagnosis_type"],
        network=act["network"].astype(np.int8),
    )


ORGANISMS = st.tuples(st.sampled_from(SEEDS), st.sampled_from(TIERS), st.sampled_from(MODES))


def run_session(data, params_for, min_actions: int, max_actions: int):
    """Draw an organism and a random action sequence ended by END; check every
    step against the reference model. Returns (return, reference, state, params)."""
    seed, tier, mode = data.draw(ORGANISMS, label="organism")
    params = params_for(tier, mode)
    o = organism(seed, tier, mode)
    ref = Reference(o, params)
    obs, state = core.reset(core.noise_key(seed, tier, N), o.arrays, params)
    n_actions = data.draw(st.integers(min_actions, max_actions), label="n_actions")
    actions = [draw_action(data, o, params.n_signals) for _ in range(n_actions)]
    actions.append({**draw_action(data, o, params.n_signals), "kind": core.END})
    total = 0.0
    for act in actions:
        before = state_leaves(state)
        expected = ref.reasons(act)
        obs, state, reward, terminated, truncated, info = core.step(state, to_action(params, act), params)
        code = int(info["error"])
        event(f"kind {act['kind']}: {core.ERRORS[code][0]}")
        after = state_leaves(state)
        total += float(reward)
        assert not bool(truncated)
        # Only accepted calls count toward max_steps.
        assert int(state.step_count) == int(before[".step_count"]) + (0 if expected else 1)
        assert int(obs["last_error"]) == code
        if expected:
            assert code in {E[r] for r in expected}, (act["kind"], expected, core.ERRORS[code][0])
            # (c) a refused call changes nothing but the error code.
            assert set(changed_leaves(before, after)) <= {".last_error"}
            assert float(reward) == 0.0
            assert not bool(terminated)
        else:
            assert code == 0, (act["kind"], core.ERRORS[code][0])
            ref.accept(act)
            assert bool(terminated) == (act["kind"] == core.END)
        # (b) the budget never goes negative and is the budget minus costed valid calls.
        assert 0 <= int(obs["budget_left"]) == params.budget - ref.costed * params.experiment_cost
        assert bool(obs["ended"]) == ref.ended
    assert ref.ended and bool(state.ended)
    return total, ref, state, params, o


def check_return_is_composite(total: float, ref: Reference, state, params, o) -> None:
    a = state.organism
    # Independent recomputation from the final state's stored evidence.
    prediction = scoring.prediction_accuracy(state.predictions, a.task_truth, state.predicted)
    diagnosis = scoring.diagnosis_score(state.diagnosis_target, state.diagnosis_type, a.malfunction_target, a.malfunction_type)
    rescue = scoring.rescue_score(state.best_rescue, state.n_rescues)
    from_state = float(scoring.composite_score(params.disease, prediction, diagnosis, rescue))
    from_core = float(core.session_scores(state, params)["composite"])
    assert total == pytest.approx(ref.composite(), abs=1e-6)
    assert total == pytest.approx(from_state, abs=1e-6)
    assert total == pytest.approx(from_core, abs=1e-6)
    # The model's stored evidence agrees with the state's.
    np.testing.assert_array_equal(np.asarray(state.predicted), ref.predicted)
    np.testing.assert_array_equal(np.asarray(state.predictions)[ref.predicted], ref.predictions[ref.predicted])
    assert int(state.n_rescues) == ref.n_rescues
    assert float(state.best_rescue) == pytest.approx(ref.best_rescue, abs=1e-6)


PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(data=st.data())
def test_random_sessions_follow_the_protocol_and_return_the_composite(data):
    """(a) return == composite, (b) budget accounting, (c) refusals change nothing,
    and every refusal names a reason that applies, every legal call is accepted."""
    total, ref, state, params, o = run_session(data, lambda tier, mode: params_of(tier, mode), min_actions=0, max_actions=30)
    check_return_is_composite(total, ref, state, params, o)


@PROPERTY
@given(data=st.data())
def test_dense_shaping_and_small_budget_keep_return_equal_to_composite(data):
    """With potential-based shaping (and a budget small enough to run out) the
    return still equals the composite score."""
    total, ref, state, params, o = run_session(
        data, lambda tier, mode: params_of(tier, mode, True, SMALL_BUDGET), min_actions=12, max_actions=30
    )
    check_return_is_composite(total, ref, state, params, o)


def test_dense_shaping_pays_for_coverage_before_the_end():
    """Shaping is not a no-op: a first experiment on a new gene is rewarded at
    once, and the END pays it back."""
    params = params_of("easy", "healthy", True, SMALL_BUDGET)
    o = organism(0, "easy", "healthy")
    _, state = core.reset(core.noise_key(0, "easy", N), o.arrays, params)
    codes = np.zeros(N, np.int8)
    codes[0] = BLOCK
    _, state, reward, *_ = core.step(state, core.make_action(params, core.EXPERIMENT, gene_codes=codes), params)
    assert float(reward) > 0.0
    _, state, close, terminated, *_ = core.step(state, core.make_action(params, core.END), params)
    assert bool(terminated)
    assert float(reward) + float(close) == pytest.approx(0.0, abs=1e-7)


# -- compile once ------------------------------------------------------------------


def test_step_compiles_once_across_organisms_and_tiers():
    """One compiled step serves every organism of a size: 100 steps over
    organisms of different seeds and tiers trace neither step nor reset again."""
    params = params_of("medium", "disease")
    rng = np.random.default_rng(0)
    warm = organism(0, "medium", "disease")
    _, state = core.reset(core.noise_key(0, "medium", N), warm.arrays, params)
    core.step(state, core.make_action(params, core.END), params)
    steps = 0
    instances = [(seed, tier, organism(seed, tier, "disease")) for seed in (1, 2, 3, 4) for tier in TIERS]
    with count_traces() as traced:
        for seed, tier, o in instances:
            _, state = core.reset(core.noise_key(seed, tier, N), o.arrays, params)
            for _ in range(100 // 12 + 1):
                kind = int(rng.integers(0, core.N_KINDS))
                codes = np.zeros(N, np.int8)
                codes[rng.integers(0, N)] = rng.integers(1, DAMPEN + 1)
                _, state, *_ = core.step(state, core.make_action(params, kind, gene_codes=codes), params)
                steps += 1
    assert steps >= 100
    assert not {"step", "reset"} & set(traced)


def test_params_of_each_tier_share_one_compiled_step():
    """make_params(tier, N, mode) for the three tiers of one size and mode
    serves one compiled step (the organism carries the dynamics), so LucaEnv
    of every tier shares it."""
    states = {}
    for tier in TIERS:
        params = core.make_params(tier, N, "healthy", max_steps=77)
        _, states[tier] = core.reset(core.noise_key(5, tier, N), organism(5, tier, "healthy").arrays, params)
    first = core.make_params("easy", N, "healthy", max_steps=77)
    core.step(states["easy"], core.make_action(first, core.END), first)
    with count_traces() as traced:
        for tier in ("medium", "hard"):
            params = core.make_params(tier, N, "healthy", max_steps=77)
            core.step(states[tier], core.make_action(params, core.END), params)
    assert "step" not in traced


# -- core-level details ------------------------------------------------------------


def test_make_action_does_not_wrap_out_of_range_codes_into_legal_ones():
    params = params_of("easy", "healthy")
    o = organism(0, "easy", "healthy")
    _, state = core.reset(core.noise_key(0, "easy", N), o.arrays, params)
    codes = np.zeros(N, np.int64)
    codes[0] = 257
    try:
        action = core.make_action(params, core.EXPERIMENT, gene_codes=codes)
    except (ValueError, OverflowError):
        return  # refusing to build the action is fine too
    _, _, _, _, _, info = core.step(state, action, params)
    assert int(info["error"]) == E["unknown_code"]


def test_observation_matches_observation_shapes():
    """Every observation field has the declared shape and lies in its bounds."""
    params = params_of("hard", "disease")
    o = organism(3, "hard", "disease")
    obs, state = core.reset(core.noise_key(3, "hard", N), o.arrays, params)
    shapes = core.observation_shapes(params)
    assert set(obs) == set(shapes)
    for name, (shape, dtype, low, high) in shapes.items():
        value = np.asarray(obs[name])
        assert value.shape == shape, name
        assert np.all((value >= low) & (value <= high)), name


def test_reset_is_a_pure_function_of_key_and_organism():
    params = params_of("hard", "healthy")
    o = organism(2, "hard", "healthy")
    key = core.noise_key(2, "hard", N)
    obs1, s1 = core.reset(key, o.arrays, params)
    obs2, s2 = core.reset(key, o.arrays, params)
    assert changed_leaves(state_leaves(s1), state_leaves(s2)) == []
    _, s3 = core.reset(core.noise_key(3, "hard", N), o.arrays, params)
    # A different key gives a different noisy baseline (the hard tier's sigma is 0.03).
    assert ".baseline_phenotypes" in changed_leaves(state_leaves(s1), state_leaves(s3))


def test_reset_refuses_an_organism_of_another_size():
    params = core.make_params("easy", 2 * N, "healthy")  # an N=20 organism (compiled for the other tests) is the wrong size
    small = world.make_organism(0, "easy", N, "healthy")
    with pytest.raises(ValueError, match="organism"):
        core.reset(core.noise_key(0, "easy", N), small.arrays, params)
