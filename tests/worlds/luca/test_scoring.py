"""Tests of luca_gym.worlds.luca.scoring (SPEC §3): hand-computed cases for every metric,
property tests for the agent-facing inputs, and jit / vmap agreement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luca_gym.worlds.luca import spec
from luca_gym.worlds.luca.spec import BLOCK, BOOST, DAMPEN, LOCK_HI, LOCK_LO, NO_MALFUNCTION, NONE, PERSIST
from luca_gym.worlds.luca.scoring import (
    composite_score,
    diagnosis_score,
    in_healthy_range,
    network_scores,
    network_truth,
    prediction_accuracy,
    rescue_score,
    restored_fraction,
    strategy_metrics,
    task_scores,
)

NAN = float("nan")


def assert_float32_scalar(value, expected):
    assert value.shape == ()
    assert value.dtype == jnp.float32
    np.testing.assert_allclose(float(value), expected, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- constants

def test_codes_index_their_names():
    assert spec.MALFUNCTION_TYPES[NO_MALFUNCTION] == "NONE"
    assert spec.MALFUNCTION_TYPES[LOCK_HI] == "LOCK_HI"
    assert spec.MALFUNCTION_TYPES[LOCK_LO] == "LOCK_LO"
    assert spec.MALFUNCTION_TYPES[PERSIST] == "PERSIST"
    assert spec.INTERVENTION_TYPES[NONE] == "NONE"
    assert spec.INTERVENTION_TYPES[BLOCK] == "BLOCK"
    assert spec.INTERVENTION_TYPES[BOOST] == "BOOST"
    assert spec.INTERVENTION_TYPES[DAMPEN] == "DAMPEN"
    assert (spec.ACCURACY_THRESHOLD, spec.HEALTHY_LOW, spec.HEALTHY_HIGH,
            spec.NETWORK_SHIFT_THRESHOLD) == (0.10, 0.35, 0.65, 0.05)


# ---------------------------------------------------------------- prediction

TRUTHS = np.array([[0.5, 0.5, 0.5], [0.2, 0.4, 0.6]])
PREDICTIONS = np.array([[0.59, 0.41, 0.61], [0.2, 0.4, 0.6]])


def test_prediction_all_answered():
    # task 0: |0.09|, |0.09| within, |0.11| not -> 2/3; task 1 exact -> 1.
    # mean (2/3 + 1) / 2 = 5/6.
    answered = np.array([True, True])
    np.testing.assert_allclose(
        task_scores(PREDICTIONS, TRUTHS, answered), [2 / 3, 1.0], rtol=1e-6)
    assert_float32_scalar(prediction_accuracy(PREDICTIONS, TRUTHS, answered), 5 / 6)


def test_unanswered_task_scores_zero_but_stays_in_the_mean():
    # task 1 is perfect but unanswered -> 0; mean (2/3 + 0) / 2 = 1/3.
    answered = np.array([True, False])
    np.testing.assert_allclose(
        task_scores(PREDICTIONS, TRUTHS, answered), [2 / 3, 0.0], rtol=1e-6)
    assert_float32_scalar(prediction_accuracy(PREDICTIONS, TRUTHS, answered), 1 / 3)
    # Nothing answered -> 0 even with perfect values.
    assert_float32_scalar(
        prediction_accuracy(TRUTHS, TRUTHS, np.array([False, False])), 0.0)


def test_nan_prediction_counts_wrong():
    # NaN, 0.5, 0.5 vs 0.5, 0.5, 0.5 -> 2/3; a NaN never scores.
    predictions = np.array([[NAN, 0.5, 0.5]])
    truths = np.full((1, 3), 0.5)
    assert_float32_scalar(
        prediction_accuracy(predictions, truths, np.array([True])), 2 / 3)
    assert_float32_scalar(
        prediction_accuracy(np.full((1, 3), NAN), truths, np.array([True])), 0.0)


def test_threshold_is_inclusive():
    # |0.1 - 0| and |-0.1 - 0| are float32(0.1) == the float32 threshold ->
    # counted; 0.1001 is clearly beyond -> not. 2/3.
    predictions = np.array([[0.1, -0.1, 0.1001]])
    truths = np.zeros((1, 3))
    assert_float32_scalar(
        prediction_accuracy(predictions, truths, np.array([True])), 2 / 3)


def test_custom_threshold():
    # With threshold 0.2 the 0.11 miss of task 0 counts: both tasks 1 -> 1.0.
    answered = np.array([True, True])
    assert_float32_scalar(
        prediction_accuracy(PREDICTIONS, TRUTHS, answered, threshold=0.2), 1.0)


def test_prediction_shape_mismatch_names_the_argument():
    with pytest.raises(ValueError, match="truths"):
        prediction_accuracy(np.zeros((2, 3)), np.zeros((2, 4)), np.ones(2, bool))
    with pytest.raises(ValueError, match="answered"):
        prediction_accuracy(np.zeros((2, 3)), np.zeros((2, 3)), np.ones(3, bool))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.floats(-2, 2, width=32), st.just(NAN)),
             min_size=6, max_size=6),
    st.lists(st.floats(0, 1, width=32), min_size=6, max_size=6),
    st.lists(st.booleans(), min_size=2, max_size=2),
)
def test_prediction_matches_reference(predictions, truths, answered):
    predictions = np.array(predictions, np.float32).reshape(2, 3)
    truths = np.array(truths, np.float32).reshape(2, 3)
    answered = np.array(answered)
    within = np.abs(predictions - truths) <= np.float32(0.10)
    expected = np.mean(within.mean(axis=1) * answered)
    value = float(prediction_accuracy(predictions, truths, answered))
    assert 0.0 <= value <= 1.0
    np.testing.assert_allclose(value, expected, rtol=1e-6)


# ---------------------------------------------------------------- diagnosis

@pytest.mark.parametrize(
    "guess_target, guess_type, true_target, true_type, expected",
    [
        (3, LOCK_HI, 3, LOCK_HI, 1.0),  # target and type right
        (3, LOCK_LO, 3, LOCK_HI, 0.5),  # target right, type wrong
        (4, LOCK_HI, 3, LOCK_HI, 0.0),  # type right, target wrong
        (4, LOCK_LO, 3, LOCK_HI, 0.0),  # both wrong
        (12, PERSIST, 12, PERSIST, 1.0),  # a signal (unified index N + s)
        (12, LOCK_HI, 12, PERSIST, 0.5),
        (3, NO_MALFUNCTION, 3, LOCK_HI, 0.0),  # nothing committed
        (-1, LOCK_HI, 3, LOCK_HI, 0.0),  # nothing committed
        (-1, NO_MALFUNCTION, -1, NO_MALFUNCTION, 0.0),  # placeholders never match
    ],
)
def test_diagnosis_score(guess_target, guess_type, true_target, true_type, expected):
    assert_float32_scalar(
        diagnosis_score(guess_target, guess_type, true_target, true_type), expected)


# ---------------------------------------------------------------- rescue

def test_in_healthy_range_inclusive():
    phenotypes = np.array([0.34, 0.35, 0.5, 0.65, 0.66, NAN])
    result = in_healthy_range(phenotypes)
    assert result.dtype == jnp.bool_
    np.testing.assert_array_equal(result, [False, True, True, True, False, False])
    np.testing.assert_array_equal(
        in_healthy_range(np.array([0.1, 0.3]), low=0.2, high=0.3), [False, True])


def test_restored_fraction_divides_by_aberrant_only():
    # 1 aberrant of 3, still at 0.9: 0 restored / 1 aberrant = 0 (÷ all
    # phenotypes would give the two untouched healthy ones 2/3).
    assert_float32_scalar(
        restored_fraction(np.array([0.9, 0.5, 0.5]), np.array([True, False, False])),
        0.0)
    # 2 aberrant, one back at 0.5, one still at 0.1: 1/2.
    assert_float32_scalar(
        restored_fraction(np.array([0.5, 0.1, 0.5]), np.array([True, True, False])),
        0.5)
    # Both aberrant restored; the healthy one pushed out (0.9) does not count: 2/2.
    assert_float32_scalar(
        restored_fraction(np.array([0.4, 0.6, 0.9]), np.array([True, True, False])),
        1.0)
    # No aberrant phenotype: 0, not NaN.
    assert_float32_scalar(
        restored_fraction(np.array([0.5, 0.5]), np.array([False, False])), 0.0)


def test_rescue_score():
    assert_float32_scalar(rescue_score(0.5, 0), 0.0)  # no test -> 0
    assert_float32_scalar(rescue_score(0.5, 2), 0.5)
    assert_float32_scalar(rescue_score(1.0, 1), 1.0)


def test_composite_score():
    # healthy: prediction only.
    assert_float32_scalar(composite_score(False, 0.6, 1.0, 1.0), 0.6)
    # disease: (0.6 + 0.5 + 1.0) / 3 = 0.7.
    assert_float32_scalar(composite_score(True, 0.6, 0.5, 1.0), 0.7)
    # disease with nothing diagnosed or rescued: 0.9 / 3 = 0.3.
    assert_float32_scalar(composite_score(True, 0.9, 0.0, 0.0), 0.3)


# ---------------------------------------------------------------- network

BASELINE = np.array([0.5, 0.5])
BLOCKED = np.array([
    [0.3, 0.5],    # gene 0
    [0.5, 0.52],   # gene 1
    [0.6, 0.46],   # gene 2
    [0.8, 0.5],    # gene 3
])
BOOSTED = np.array([
    [0.7, 0.5],
    [0.5, 0.58],
    [0.6, 0.54],
    [0.45, 0.44],
])
# gene 0: ph0 shift 0.2, boost > block -> +1; ph1 no shift -> 0.
# gene 1: ph0 -> 0; ph1 shift max(0.02, 0.08) = 0.08 > 0.05, 0.58 > 0.52 -> +1.
# gene 2: ph0 shift 0.1 but boost == block -> 0; ph1 shift 0.04 <= 0.05 -> 0.
# gene 3: ph0 shift 0.3, 0.45 < 0.8 -> -1; ph1 shift 0.06 > 0.05, 0.44 < 0.5 -> -1.
TRUTH = np.array([[1, 0], [0, 1], [0, 0], [-1, -1]], np.int8)


def test_network_truth():
    result = network_truth(BASELINE, BLOCKED, BOOSTED)
    assert result.dtype == jnp.int8
    np.testing.assert_array_equal(result, TRUTH)
    # A looser threshold of 0.03 adds gene 2 / ph1 (shift 0.04, +1).
    expected = TRUTH.copy()
    expected[2, 1] = 1
    np.testing.assert_array_equal(
        network_truth(BASELINE, BLOCKED, BOOSTED, threshold=0.03), expected)
    # The shift must exceed the threshold: |0.05 - 0| is float32(0.05), equal
    # to the float32 threshold -> no edge; 0.0501 -> an edge, +1.
    np.testing.assert_array_equal(
        network_truth(np.zeros(2), np.zeros((1, 2)), np.array([[0.05, 0.0501]])),
        [[0, 1]])


def test_network_scores_hand_example():
    # Mask drops gene 3. Truth edges: (0,0,+), (1,1,+) -> 2.
    # Submitted in mask: (0,0,+) TP, (1,1,-) wrong sign, (2,0,+) FP -> 3.
    # precision 1/3, recall 1/2, f1 = 2 (1/3)(1/2) / (5/6) = 0.4.
    submitted = np.array([[1, 0], [0, -1], [1, 0], [-1, -1]], np.int8)
    mask = np.array([True, True, True, False])
    scores = network_scores(submitted, TRUTH, mask)
    assert_float32_scalar(scores["precision"], 1 / 3)
    assert_float32_scalar(scores["recall"], 1 / 2)
    assert_float32_scalar(scores["f1"], 0.4)
    # All genes count: gene 3's two right edges join. TP 3 of 5 submitted,
    # of 4 true: p 0.6, r 0.75, f1 = 2 (0.45) / 1.35 = 2/3.
    scores = network_scores(submitted, TRUTH, np.ones(4, bool))
    assert_float32_scalar(scores["precision"], 0.6)
    assert_float32_scalar(scores["recall"], 0.75)
    assert_float32_scalar(scores["f1"], 2 / 3)


def test_network_scores_edge_cases():
    mask = np.ones(4, bool)
    perfect = network_scores(TRUTH, TRUTH, mask)
    for name in ("precision", "recall", "f1"):
        assert_float32_scalar(perfect[name], 1.0)
    nothing = network_scores(np.zeros_like(TRUTH), TRUTH, mask)
    for name in ("precision", "recall", "f1"):
        assert_float32_scalar(nothing[name], 0.0)
    empty_truth = network_scores(TRUTH, np.zeros_like(TRUTH), mask)
    for name in ("precision", "recall", "f1"):
        assert_float32_scalar(empty_truth[name], 0.0)
    all_wrong_sign = network_scores(-TRUTH, TRUTH, mask)
    for name in ("precision", "recall", "f1"):
        assert_float32_scalar(all_wrong_sign[name], 0.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([-1, 0, 1]), min_size=12, max_size=12),
    st.lists(st.sampled_from([-1, 0, 1]), min_size=12, max_size=12),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_network_scores_bounded_and_consistent(submitted, truth, mask):
    submitted = np.array(submitted, np.int8).reshape(4, 3)
    truth = np.array(truth, np.int8).reshape(4, 3)
    mask = np.array(mask)
    scores = {k: float(v) for k, v in network_scores(submitted, truth, mask).items()}
    rows = mask[:, None]
    tp = np.sum((submitted == truth) & (truth != 0) & rows)
    n_sub = np.sum((submitted != 0) & rows)
    n_true = np.sum((truth != 0) & rows)
    for value in scores.values():
        assert 0.0 <= value <= 1.0
    np.testing.assert_allclose(scores["precision"], tp / n_sub if n_sub else 0.0, rtol=1e-6)
    np.testing.assert_allclose(scores["recall"], tp / n_true if n_true else 0.0, rtol=1e-6)
    assert (scores["f1"] > 0) == (tp > 0)


# ---------------------------------------------------------------- strategy

# G = 4 genes, S = 2 signals, a 6-row buffer.
HISTORY_CODES = np.array([
    [BLOCK, NONE, NONE, NONE],      # 0 experiment: one gene, no signal
    [BLOCK, BOOST, NONE, NONE],     # 1 experiment: gene 0 again -> redundant
    [NONE, NONE, NONE, DAMPEN],     # 2 rescue test on gene 3
    [NONE, NONE, NONE, DAMPEN],     # 3 experiment: gene 3 + a signal
    [NONE, NONE, BLOCK, NONE],      # 4 experiment, counted only if n_steps > 4
    [NONE, NONE, NONE, NONE],       # 5 empty slot
], np.int8)
HISTORY_SIGNALS = np.array([
    [False, False], [False, False], [False, False],
    [True, False], [False, False], [False, False],
])
HISTORY_KIND = np.array([1, 1, 2, 1, 1, 0], np.int8)


def test_strategy_metrics_first_four_rows():
    # n_steps 4: experiments rows 0, 1, 3 (3), rescues row 2 (1).
    # budget_fraction (3 + 1) / 10 = 0.4.
    # coverage: genes 0, 1, 3 by experiments (gene 2 only in row 4) -> 3/4.
    # single gene: row 0 only -> 1/3 (row 3 has a signal).
    # BLOCK: 2 of 1 + 2 + 1 = 4 gene-interventions -> 0.5.
    # redundancy: row 1 only; row 3 repeats gene 3 of a rescue, not an
    # experiment -> 1/3.  commit point 3 / 10 = 0.3.
    metrics = strategy_metrics(
        HISTORY_CODES, HISTORY_SIGNALS, HISTORY_KIND, 4, 10, np.ones(4, bool), 3)
    expected = {"budget_fraction": 0.4, "gene_coverage": 0.75,
                "single_gene_fraction": 1 / 3, "block_fraction": 0.5,
                "redundancy": 1 / 3, "commit_point": 0.3}
    assert set(metrics) == set(expected)
    for name, value in expected.items():
        assert_float32_scalar(metrics[name], value)


def test_strategy_metrics_all_rows_and_targetable_mask():
    # n_steps 6: row 4 joins (row 5 is empty): experiments 0, 1, 3, 4 (4),
    # rescue 1 -> 5 / 10 = 0.5. Targetable genes 0, 1 both covered -> 1.0.
    # single gene: rows 0, 4 -> 2/4. BLOCK 3 of 5 -> 0.6. redundancy row 1 ->
    # 1/4. Never requested a task -> commit point 1.0.
    metrics = strategy_metrics(
        HISTORY_CODES, HISTORY_SIGNALS, HISTORY_KIND, 6, 10,
        np.array([True, True, False, False]), -1)
    expected = {"budget_fraction": 0.5, "gene_coverage": 1.0,
                "single_gene_fraction": 0.5, "block_fraction": 0.6,
                "redundancy": 0.25, "commit_point": 1.0}
    for name, value in expected.items():
        assert_float32_scalar(metrics[name], value)


def test_strategy_metrics_empty_history():
    metrics = strategy_metrics(
        np.zeros((3, 4), np.int8), np.zeros((3, 2), bool), np.zeros(3, np.int8),
        0, 10, np.ones(4, bool), 0)
    for name in ("budget_fraction", "gene_coverage", "single_gene_fraction",
                 "block_fraction", "redundancy", "commit_point"):
        assert_float32_scalar(metrics[name], 0.0)


def test_strategy_metrics_shape_mismatch_names_the_argument():
    with pytest.raises(ValueError, match="targetable"):
        strategy_metrics(HISTORY_CODES, HISTORY_SIGNALS, HISTORY_KIND, 4, 10,
                         np.ones(3, bool), 3)
    with pytest.raises(ValueError, match="history_kind"):
        strategy_metrics(HISTORY_CODES, HISTORY_SIGNALS, HISTORY_KIND[:4], 4, 10,
                         np.ones(4, bool), 3)


# ---------------------------------------------------------------- jit / vmap

def _batched_cases():
    """(function, batch of 3 argument tuples) for every metric."""
    rng = np.random.default_rng(0)
    truths = rng.uniform(0, 1, (3, 2, 4)).astype(np.float32)
    predictions = truths + rng.uniform(-0.2, 0.2, (3, 2, 4)).astype(np.float32)
    answered = np.array([[True, True], [True, False], [False, False]])
    phenotypes = rng.uniform(0, 1, (3, 5)).astype(np.float32)
    aberrant = np.array([[True, False, True, False, True],
                         [False] * 5,
                         [True] * 5])
    block = rng.uniform(0, 1, (3, 4, 5)).astype(np.float32)
    boost = rng.uniform(0, 1, (3, 4, 5)).astype(np.float32)
    signed = rng.integers(-1, 2, (3, 2, 4, 5)).astype(np.int8)
    histories = [
        (HISTORY_CODES, HISTORY_SIGNALS, HISTORY_KIND, n, 10, targetable, commit)
        for n, targetable, commit in [
            (4, np.ones(4, bool), 3),
            (6, np.array([True, True, False, False]), -1),
            (0, np.ones(4, bool), 0),
        ]
    ]
    return [
        (task_scores, [(predictions[i], truths[i], answered[i]) for i in range(3)]),
        (prediction_accuracy,
         [(predictions[i], truths[i], answered[i]) for i in range(3)]),
        (diagnosis_score, [(3, LOCK_HI, 3, LOCK_HI), (3, LOCK_LO, 3, LOCK_HI),
                           (-1, NO_MALFUNCTION, 3, LOCK_HI)]),
        (in_healthy_range, [(phenotypes[i],) for i in range(3)]),
        (restored_fraction, [(phenotypes[i], aberrant[i]) for i in range(3)]),
        (rescue_score, [(0.5, 0), (0.5, 2), (1.0, 1)]),
        (composite_score, [(False, 0.6, 1.0, 1.0), (True, 0.6, 0.5, 1.0),
                           (True, 0.9, 0.0, 0.0)]),
        (network_truth, [(phenotypes[i], block[i], boost[i]) for i in range(3)]),
        (network_scores, [(signed[i, 0], signed[i, 1], aberrant[i, :4])
                          for i in range(3)]),
        (strategy_metrics, histories),
    ]


def _assert_same(expected, got):
    # Integers and bools must match exactly; floats to a few ulps, because XLA
    # may fuse differently under jit (e.g. x / 3 becomes x * (1/3)).
    expected, got = np.asarray(expected), np.asarray(got)
    assert got.dtype == expected.dtype
    if np.issubdtype(expected.dtype, np.floating):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "function, batch", _batched_cases(), ids=lambda x: getattr(x, "__name__", ""))
def test_jit_and_vmap_agree_with_plain_calls(function, batch):
    plain = [function(*args) for args in batch]
    jitted = [jax.jit(function)(*args) for args in batch]
    stacked = jax.tree_util.tree_map(
        lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *batch)
    vmapped = jax.jit(jax.vmap(function))(*stacked)
    for i, (expected, got) in enumerate(zip(plain, jitted)):
        jax.tree_util.tree_map(_assert_same, expected, got)
        jax.tree_util.tree_map(lambda e, v: _assert_same(e, v[i]), expected, vmapped)
