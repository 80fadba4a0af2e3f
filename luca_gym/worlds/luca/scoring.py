"""The hidden-ground-truth scorer (SPEC §3, paper Table 2).

Every metric is a pure function written with ``jax.numpy``: no Python control
flow on array values and fixed output shapes, so each one can be ``jax.jit``-ed,
``jax.vmap``-ed over a batch of sessions, and called from inside the core's
``step``. They accept plain numpy arrays and Python scalars as well. Results are
float32 (``network_truth`` is int8, ``in_healthy_range`` bool).

Shape checks are done on static shapes only, so they work under ``jit`` and
``vmap`` (where they see the per-example shapes).
"""

from __future__ import annotations

import jax.numpy as jnp

from luca_gym.worlds.luca.spec import ACCURACY_THRESHOLD, BLOCK, HEALTHY_HIGH, HEALTHY_LOW, NETWORK_SHIFT_THRESHOLD, NO_MALFUNCTION, NONE

__all__ = [
    "HISTORY_EMPTY",
    "HISTORY_EXPERIMENT",
    "HISTORY_RESCUE",
    "task_scores",
    "prediction_accuracy",
    "diagnosis_score",
    "in_healthy_range",
    "restored_fraction",
    "rescue_score",
    "composite_score",
    "composite_terms",
    "network_truth",
    "network_scores",
    "gene_coverage",
    "strategy_metrics",
]

# Kinds of a row of the costed-call history (``EnvState.history_kind``).
HISTORY_EMPTY = 0
HISTORY_EXPERIMENT = 1
HISTORY_RESCUE = 2


def _check_shape(name, array, shape):
    """Raise if ``array``'s static shape is not ``shape`` (None: any size)."""
    expected = tuple(shape)
    if len(array.shape) != len(expected) or any(
        want is not None and got != want for got, want in zip(array.shape, expected)
    ):
        shown = tuple("any" if want is None else want for want in expected)
        raise ValueError(f"{name} has shape {array.shape}; expected {shown}")


def _ratio(numerator, denominator):
    """numerator / denominator as float32, 0.0 where the denominator is 0.

    The inner ``where`` keeps the division itself finite, so neither the value
    nor a gradient ever sees 0/0.
    """
    numerator = jnp.asarray(numerator, jnp.float32)
    denominator = jnp.asarray(denominator, jnp.float32)
    nonzero = denominator != 0
    return jnp.where(nonzero, numerator / jnp.where(nonzero, denominator, 1.0), 0.0)


def task_scores(predictions, truths, answered, threshold=ACCURACY_THRESHOLD):
    """Per-task prediction score.

    Args:
      predictions: float (T, P), the submitted phenotype values per task.
      truths: float (T, P), the noise-free ground truth per task.
      answered: bool (T,), whether a prediction was submitted for the task.
      threshold: float, the inclusive tolerance |pred - truth| <= threshold.

    Returns:
      float32 (T,): for each task the fraction of its P phenotypes predicted
      within the threshold; 0.0 for an unanswered task. A NaN prediction
      counts as wrong (every comparison with NaN is False).

    Comparisons are made in float32, so a difference that is exactly the
    threshold in decimal (e.g. 0.6 vs 0.5) may land either side of it; truths
    are continuous, so such ties do not arise in practice.
    """
    predictions = jnp.asarray(predictions, jnp.float32)
    truths = jnp.asarray(truths, jnp.float32)
    answered = jnp.asarray(answered, bool)
    _check_shape("predictions", predictions, (None, None))
    _check_shape("truths", truths, predictions.shape)
    _check_shape("answered", answered, predictions.shape[:1])
    within = jnp.abs(predictions - truths) <= jnp.float32(threshold)
    fraction = jnp.mean(within, axis=-1, dtype=jnp.float32)
    return jnp.where(answered, fraction, jnp.float32(0.0))


def prediction_accuracy(predictions, truths, answered, threshold=ACCURACY_THRESHOLD):
    """Prediction accuracy: the mean of ``task_scores`` over all T tasks.

    Args: as ``task_scores`` (predictions, truths float (T, P); answered bool
    (T,)). Unanswered tasks stay in the denominator, so skipping a task costs
    as much as getting it all wrong.

    Returns:
      float32 scalar in [0, 1].
    """
    return jnp.mean(task_scores(predictions, truths, answered, threshold))


def diagnosis_score(guess_target, guess_type, true_target, true_type):
    """Score of the committed malfunction hypothesis.

    Args:
      guess_target: int scalar, unified target index (genes 0..N-1, signals
        N..N+S-1); negative means no diagnosis was committed.
      guess_type: int scalar, a malfunction code (NO_MALFUNCTION means none
        was committed).
      true_target: int scalar, the malfunction's unified target index.
      true_type: int scalar, the malfunction's type code.

    Returns:
      float32 scalar: 1.0 target and type right; 0.5 target right, type
      wrong; 0.0 otherwise or when nothing was committed.
    """
    guess_target = jnp.asarray(guess_target)
    guess_type = jnp.asarray(guess_type)
    committed = (guess_type != NO_MALFUNCTION) & (guess_target >= 0)
    target_right = committed & (guess_target == jnp.asarray(true_target))
    type_right = guess_type == jnp.asarray(true_type)
    return jnp.where(
        target_right, jnp.where(type_right, jnp.float32(1.0), jnp.float32(0.5)), jnp.float32(0.0)
    )


def in_healthy_range(phenotypes, low=HEALTHY_LOW, high=HEALTHY_HIGH):
    """Whether each phenotype lies in the healthy range [low, high], inclusive.

    Args:
      phenotypes: float, any shape.
      low, high: float bounds.

    Returns:
      bool, the shape of ``phenotypes``; NaN is out of range.
    """
    phenotypes = jnp.asarray(phenotypes, jnp.float32)
    return (phenotypes >= jnp.float32(low)) & (phenotypes <= jnp.float32(high))


def restored_fraction(phenotypes, aberrant):
    """Fraction of the aberrant phenotypes that an intervention brings into range.

    Args:
      phenotypes: float (P,), phenotypes after the rescue intervention.
      aberrant: bool (P,), which phenotypes are out of range in the disease
        baseline.

    Returns:
      float32 scalar: aberrant phenotypes now in range / aberrant phenotypes.
      The denominator is the aberrant count, not P (the paper's correction):
      dividing by P would reward an intervention that changes nothing with the
      already-healthy phenotypes. 0.0 when no phenotype is aberrant.
    """
    phenotypes = jnp.asarray(phenotypes, jnp.float32)
    aberrant = jnp.asarray(aberrant, bool)
    _check_shape("phenotypes", phenotypes, (None,))
    _check_shape("aberrant", aberrant, phenotypes.shape)
    restored = aberrant & in_healthy_range(phenotypes)
    return _ratio(jnp.sum(restored), jnp.sum(aberrant))


def rescue_score(best_restored, n_rescue_tests):
    """Rescue score of a session.

    Args:
      best_restored: float scalar, the best ``restored_fraction`` over the
        session's rescue tests.
      n_rescue_tests: int scalar, how many rescue tests were run.

    Returns:
      float32 scalar: ``best_restored``, or 0.0 when no test was run (so a
      placeholder best value can never score).
    """
    return jnp.where(
        jnp.asarray(n_rescue_tests) > 0,
        jnp.asarray(best_restored, jnp.float32),
        jnp.float32(0.0),
    )


def composite_score(disease, prediction, diagnosis, rescue):
    """Composite score of a session.

    Args:
      disease: bool scalar, whether the session is in disease mode.
      prediction, diagnosis, rescue: float scalars, the three metric scores.

    Returns:
      float32 scalar: ``prediction`` for a healthy session; the mean of the
      three for a disease session.
    """
    prediction = jnp.asarray(prediction, jnp.float32)
    diagnosis = jnp.asarray(diagnosis, jnp.float32)
    rescue = jnp.asarray(rescue, jnp.float32)
    disease_score = (prediction + diagnosis + rescue) / jnp.float32(composite_terms(True))
    return jnp.where(jnp.asarray(disease, bool), disease_score, prediction)


def network_truth(
    baseline_phenotypes, block_phenotypes, boost_phenotypes,
    threshold=NETWORK_SHIFT_THRESHOLD,
):
    """The true (gene, phenotype, direction) edges.

    Args:
      baseline_phenotypes: float (P,), noise-free phenotypes, no intervention.
      block_phenotypes: float (G, P), noise-free phenotypes after BLOCK of
        each single gene.
      boost_phenotypes: float (G, P), the same after BOOST.
      threshold: float, the shift (strict >) that makes an edge.

    Returns:
      int8 (G, P) in {-1, 0, +1}: +1 where the gene raises the phenotype
      (boost > block), -1 where it lowers it, 0 where neither BLOCK nor BOOST
      shifts it by more than the threshold, or where boost == block (no
      direction to score).
    """
    baseline = jnp.asarray(baseline_phenotypes, jnp.float32)
    block = jnp.asarray(block_phenotypes, jnp.float32)
    boost = jnp.asarray(boost_phenotypes, jnp.float32)
    _check_shape("block_phenotypes", block, (None, None))
    _check_shape("boost_phenotypes", boost, block.shape)
    _check_shape("baseline_phenotypes", baseline, block.shape[-1:])
    shift = jnp.maximum(jnp.abs(block - baseline), jnp.abs(boost - baseline))
    direction = jnp.sign(boost - block).astype(jnp.int8)
    return jnp.where(shift > jnp.float32(threshold), direction, jnp.int8(0))


def network_scores(submitted, truth, gene_mask):
    """Precision, recall and F1 of a submitted network.

    Args:
      submitted: int8 (G, P) in {-1, 0, +1}, the agent's signed edges.
      truth: int8 (G, P) in {-1, 0, +1}, from ``network_truth``.
      gene_mask: bool (G,), the genes that count (targetable genes); rows of
        other genes are ignored in both.

    Returns:
      dict of float32 scalars ``precision``, ``recall``, ``f1``. A submitted
      edge is a true positive only with the right sign. Precision is 0 when
      nothing is submitted, recall 0 when the truth is empty, F1 0 when
      precision + recall == 0.
    """
    submitted = jnp.asarray(submitted, jnp.int8)
    truth = jnp.asarray(truth, jnp.int8)
    gene_mask = jnp.asarray(gene_mask, bool)
    _check_shape("submitted", submitted, (None, None))
    _check_shape("truth", truth, submitted.shape)
    _check_shape("gene_mask", gene_mask, submitted.shape[:1])
    rows = gene_mask[:, None]
    claimed = (submitted != 0) & rows
    real = (truth != 0) & rows
    true_positive = real & (submitted == truth)
    n_true_positive = jnp.sum(true_positive)
    precision = _ratio(n_true_positive, jnp.sum(claimed))
    recall = _ratio(n_true_positive, jnp.sum(real))
    f1 = _ratio(2.0 * precision * recall, precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1}


def gene_coverage(history_codes, history_kind, n_steps, targetable):
    """Fraction of the targetable genes perturbed (any code) by at least one
    experiment among the first ``n_steps`` rows of the history (float32 ()).
    Arguments as :func:`strategy_metrics`."""
    codes = jnp.asarray(history_codes, jnp.int8)
    kind = jnp.asarray(history_kind, jnp.int8)
    targetable = jnp.asarray(targetable, bool)
    filled = jnp.arange(codes.shape[0]) < jnp.asarray(n_steps)
    experiment = filled & (kind == HISTORY_EXPERIMENT)
    ever_perturbed = jnp.any((codes != NONE) & experiment[:, None], axis=0)
    return _ratio(jnp.sum(ever_perturbed & targetable), jnp.sum(targetable))


def composite_terms(disease: bool) -> float:
    """How many metrics the composite averages: 1 (prediction) in healthy
    mode, 3 (prediction, diagnosis, rescue) in disease mode. The reward pays
    each metric with this weight, so a return sums to the composite."""
    return 3.0 if disease else 1.0


def strategy_metrics(
    history_codes, history_signals, history_kind, n_steps, budget, targetable,
    commit_used,
):
    """How the session spent its budget (the strategy row of SPEC §3).

    Args:
      history_codes: int8 (H, G), gene intervention codes (NONE, BLOCK, BOOST,
        DAMPEN) of each logged costed call.
      history_signals: bool (H, S), signals activated by each call.
      history_kind: int8 (H,), HISTORY_EMPTY / HISTORY_EXPERIMENT /
        HISTORY_RESCUE.
      n_steps: int scalar, the number of filled rows; rows at or past it are
        ignored even if their kind is set, so a preallocated buffer is safe.
      budget: int scalar, the session's total budget.
      targetable: bool (G,), which genes can be targeted.
      commit_used: int scalar, budget units spent before the first prediction
        task was requested, or -1 if none was.

    Returns:
      dict of float32 scalars:
        budget_fraction: (experiments + rescue tests) / budget.
        gene_coverage: fraction of targetable genes perturbed (any code) in at
          least one experiment.
        single_gene_fraction: experiments with exactly one gene and no signal
          / experiments.
        block_fraction: BLOCK gene-interventions / all gene-interventions, over
          experiments.
        redundancy: fraction of experiments perturbing at least one gene
          already perturbed by an earlier experiment.
        commit_point: commit_used / budget; 1.0 when no task was ever
          requested, i.e. the agent is treated as committing only at the end
          of its budget, the latest possible point.
      Ratios with a zero denominator are 0.0. Only experiments count for
      coverage, single-gene, BLOCK and redundancy; rescue tests only spend
      budget.
    """
    codes = jnp.asarray(history_codes, jnp.int8)
    signals = jnp.asarray(history_signals, bool)
    kind = jnp.asarray(history_kind, jnp.int8)
    targetable = jnp.asarray(targetable, bool)
    _check_shape("history_codes", codes, (None, None))
    n_rows, n_genes = codes.shape
    _check_shape("history_kind", kind, (n_rows,))
    _check_shape("history_signals", signals, (n_rows, None))
    _check_shape("targetable", targetable, (n_genes,))

    filled = jnp.arange(n_rows) < jnp.asarray(n_steps)
    experiment = filled & (kind == HISTORY_EXPERIMENT)
    rescue = filled & (kind == HISTORY_RESCUE)
    n_experiments = jnp.sum(experiment)

    # (H, G): which genes each experiment perturbs; rescue rows are zeroed so
    # they never count as "earlier perturbation" for redundancy.
    perturbed = (codes != NONE) & experiment[:, None]
    genes_per_row = jnp.sum(perturbed, axis=1)
    # Exclusive cumulative count: how many earlier experiments hit each gene.
    earlier = jnp.cumsum(perturbed, axis=0) - perturbed
    repeated = jnp.any(perturbed & (earlier > 0), axis=1)
    single_gene = experiment & (genes_per_row == 1) & ~jnp.any(signals, axis=1)
    n_block = jnp.sum((codes == BLOCK) & experiment[:, None])

    commit_used = jnp.asarray(commit_used)
    commit_point = jnp.where(
        commit_used >= 0, _ratio(commit_used, budget), jnp.float32(1.0)
    )
    return {
        "budget_fraction": _ratio(n_experiments + jnp.sum(rescue), budget),
        "gene_coverage": gene_coverage(codes, kind, n_steps, targetable),
        "single_gene_fraction": _ratio(jnp.sum(single_gene), n_experiments),
        "block_fraction": _ratio(n_block, jnp.sum(genes_per_row)),
        "redundancy": _ratio(jnp.sum(repeated), n_experiments),
        "commit_point": commit_point,
    }
