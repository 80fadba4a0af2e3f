"""The baselines as jittable batched policies for :func:`luca_gym.worlds.luca.functional.rollout`.

Each is ``policy(params) -> act(key, obs) -> core.Action`` over a batch of
observations, stateless (what a per-session policy remembers is read back
from the observation), so a sweep over thousands of organisms runs on the
device. They make the same decisions as :mod:`luca_gym.worlds.luca.baselines.policies`
(random: in healthy mode; its disease draws come from a JAX key instead).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from luca_gym.worlds.luca import analysts, core
from luca_gym.worlds.luca.baselines import fitting, model_fit as mf
from luca_gym.worlds.luca.baselines.policies import PAPER_RULES
from luca_gym.worlds.luca.baselines.sweep_flat import batched_policy as causal_sweep_flat_policy
from luca_gym.worlds.luca.spec import BLOCK, BOOST

def random_policy(params: core.EnvParams):
    """The random baseline as a jittable batched policy: reveal each task and
    predict 0.5; in disease mode a random diagnosis and one random
    single-target rescue (its only costed call); then end."""
    n, s = params.n_genes, params.n_signals

    def random_target(key, targetable):
        """A random targetable gene (B,) or, with probability S/(N+S), a signal."""
        k1, k2, k3 = jax.random.split(key, 3)
        b = targetable.shape[0]
        start = jax.random.randint(k1, (b,), 0, n)
        order = (jnp.arange(n)[None, :] - start[:, None]) % n
        gene = jnp.argmin(jnp.where(targetable, order, n + 1), axis=1)
        is_signal = jax.random.randint(k2, (b,), 0, n + s) >= n
        return gene, is_signal, jax.random.randint(k3, (b,), 0, s)

    def act(key, obs):
        mask, targetable = obs["action_mask"], obs["targetable"].astype(bool)
        b = mask.shape[0]
        k_diag, k_lock, k_rescue, k_code = jax.random.split(key, 4)
        gene, is_signal, signal = random_target(k_diag, targetable)
        lock = jax.random.randint(k_lock, (b,), 1, 3)  # LOCK_HI or LOCK_LO
        r_gene, r_is_signal, r_signal = random_target(k_rescue, targetable)
        r_code = jax.random.randint(k_code, (b,), 1, 4)  # BLOCK, BOOST or DAMPEN
        untouched = obs["budget_left"] == params.budget
        kind = jnp.select(
            [mask[:, core.REVEAL_TASK], mask[:, core.SUBMIT_PREDICTION], mask[:, core.COMMIT_DIAGNOSIS],
             mask[:, core.TEST_RESCUE] & untouched],
            [core.REVEAL_TASK, core.SUBMIT_PREDICTION, core.COMMIT_DIAGNOSIS, core.TEST_RESCUE],
            core.END,
        )
        codes, flags = single_target(r_is_signal, r_gene, r_code, r_signal, n, s)
        return core.Action(
            kind=kind.astype(jnp.int32),
            gene_codes=codes.astype(jnp.int32),
            signal_flags=flags,
            prediction=jnp.full((b, 3), 0.5, jnp.float32),
            diagnosis_target=jnp.where(is_signal, n + signal, gene).astype(jnp.int32),
            diagnosis_type=jnp.where(is_signal, 3, lock).astype(jnp.int32),
            network=jnp.zeros((b, n, 3), jnp.int32),
        )

    return act


def single_target(is_signal, gene, code, signal, n: int, s: int) -> tuple[jax.Array, jax.Array]:
    """Batched single-target interventions: gene codes (B, N) with ``code`` on
    ``gene``, or signal flags (B, S) with ``signal`` on where ``is_signal``."""
    codes = jnp.where(is_signal[:, None], 0, jax.nn.one_hot(gene, n, dtype=jnp.int32) * code[:, None])
    return codes, is_signal[:, None] & jax.nn.one_hot(signal, s, dtype=bool)


def open_task(obs) -> jax.Array:
    """Batched: bool (B,), a task is revealed and not yet answered."""
    rows = jnp.arange(obs["task_index"].shape[0])
    return (obs["task_index"] >= 0) & ~obs["predicted"].astype(bool)[rows, jnp.clip(obs["task_index"], 0, None)]


def network_from_singles(obs) -> jax.Array:
    """Batched :func:`luca_gym.worlds.luca.analysts.network_from_singles`: int32 (B, N, P)."""
    return jax.vmap(analysts.network_from_singles)(obs)


def sweep_policy(params: core.EnvParams, codes: tuple[int, ...], predict, diagnose, rescue):
    """A paper-style baseline, batched: experiments first -- each code of
    ``codes`` in turn (BLOCK, then BOOST...) on every targetable gene in index
    order, keeping the rescue's unit in disease mode, until the sweep is done
    or the budget is spent; then each task is revealed and answered with
    ``predict(obs)``; in disease mode ``diagnose(obs) -> (target, type)`` is
    committed and ``rescue(obs, target, type)`` tested once; then the network
    read from the singles is submitted and the session ended. ``predict``,
    ``diagnose`` and ``rescue`` are per-session functions of
    :mod:`luca_gym.worlds.luca.analysts`."""
    n, s = params.n_genes, params.n_signals
    reserve = params.rescue_cost if params.disease else 0
    code_of = jnp.asarray(codes, jnp.int32)

    def act(key, obs):
        mask = obs["action_mask"]
        rows = jnp.arange(mask.shape[0])
        targetable = obs["targetable"].astype(bool)
        single = obs["single_mask"].astype(bool)
        todo = jnp.stack([targetable & ~single[:, :, c - 1] for c in codes], axis=1)  # (B, C, N)
        column = jnp.argmax(todo.any(axis=2), axis=1)
        sweep_gene = jnp.argmax(todo[rows, column], axis=1)
        afford = (obs["budget_left"] - params.experiment_cost >= reserve) & mask[:, core.EXPERIMENT]
        sweep = afford & todo.any(axis=(1, 2))

        target, type_ = jax.vmap(diagnose)(obs)
        r_is_signal, r_gene, r_code, r_signal = jax.vmap(rescue)(obs, target, type_)
        experiments = jnp.sum(single, axis=(1, 2)) + jnp.sum(obs["signal_mask"], axis=1)
        rescued = obs["budget_left"] < params.budget - experiments * params.experiment_cost
        kind = jnp.select(
            [sweep, mask[:, core.REVEAL_TASK], mask[:, core.SUBMIT_PREDICTION], mask[:, core.COMMIT_DIAGNOSIS],
             ~rescued & mask[:, core.TEST_RESCUE], ~obs["network_submitted"].astype(bool)],
            [core.EXPERIMENT, core.REVEAL_TASK, core.SUBMIT_PREDICTION, core.COMMIT_DIAGNOSIS, core.TEST_RESCUE, core.SUBMIT_NETWORK],
            core.END,
        )
        is_rescue = kind == core.TEST_RESCUE
        gene_codes, flags = single_target(
            is_rescue & r_is_signal, jnp.where(is_rescue, r_gene, sweep_gene),
            jnp.where(is_rescue, r_code, code_of[column]), r_signal, n, s,
        )
        return core.Action(
            kind=kind.astype(jnp.int32),
            gene_codes=gene_codes.astype(jnp.int32),
            signal_flags=flags,
            prediction=jax.vmap(predict)(obs).astype(jnp.float32),
            diagnosis_target=target.astype(jnp.int32),
            diagnosis_type=type_.astype(jnp.int32),
            network=network_from_singles(obs),
        )

    return act


def heuristic_policy(params: core.EnvParams):
    """:class:`~luca_gym.worlds.luca.baselines.HeuristicPolicy`, batched (see
    :data:`luca_gym.worlds.luca.baselines.policies.PAPER_RULES`)."""
    return sweep_policy(params, (BLOCK,), *PAPER_RULES["heuristic"])


def causal_sweep_policy(params: core.EnvParams):
    """:class:`~luca_gym.worlds.luca.baselines.CausalSweepPolicy`, batched (see
    :data:`luca_gym.worlds.luca.baselines.policies.PAPER_RULES`)."""
    return sweep_policy(params, (BLOCK, BOOST), *PAPER_RULES["causal-sweep"])


def task_directed_policy(params: core.EnvParams):
    """:class:`~luca_gym.worlds.luca.baselines.TaskDirectedPolicy`, batched: for each task,
    measure the two singles it combines and predict in logit space; then sweep
    (signals first in disease mode, then BLOCK, then BOOST) keeping the
    rescue's unit; diagnose from lock signatures; rescue with the best measured
    single; submit the network; end."""
    n, s = params.n_genes, params.n_signals
    reserve = params.rescue_cost if params.disease else 0
    analyst = analysts.get("logit-additive")

    def act(key, obs):
        mask = obs["action_mask"]
        b = mask.shape[0]
        rows = jnp.arange(b)
        targetable = obs["targetable"].astype(bool)
        single = obs["single_mask"].astype(bool)
        signal_mask = obs["signal_mask"].astype(bool)

        # 1. the open task: its missing singles, then the analyst's prediction.
        task_open = open_task(obs)
        genes, codes = obs["task_genes"], obs["task_codes"].astype(jnp.int32)
        columns = jnp.clip(codes - 1, 0, 2)
        genes_c = jnp.clip(genes, 0, n - 1)
        measured = single[rows[:, None], genes_c, columns]  # (B, 2)
        need = ~measured & mask[:, core.EXPERIMENT][:, None]
        task_gene = jnp.where(need[:, 0], genes_c[:, 0], genes_c[:, 1])
        task_code = jnp.where(need[:, 0], codes[:, 0], codes[:, 1])
        prediction = jax.vmap(analyst.predict)(obs)

        # 3. the sweep: unmeasured signals (disease), then BLOCK, then BOOST.
        afford = (obs["budget_left"] - params.experiment_cost >= reserve) & mask[:, core.EXPERIMENT]
        todo_signal = ~signal_mask if params.disease else jnp.zeros_like(signal_mask)
        todo_block = targetable & ~single[:, :, 0]
        todo_boost = targetable & ~single[:, :, 1]
        sweep_signal = todo_signal.any(axis=1)
        sweep_block = ~sweep_signal & todo_block.any(axis=1)
        sweep_boost = ~sweep_signal & ~sweep_block & todo_boost.any(axis=1)
        sweep = afford & (sweep_signal | sweep_block | sweep_boost)
        sweep_gene = jnp.where(sweep_block, jnp.argmax(todo_block, axis=1), jnp.argmax(todo_boost, axis=1))
        sweep_code = jnp.where(sweep_block, 1, 2)

        # 4. diagnosis and 5. rescue: the analyst's.
        diag_target, diag_type = jax.vmap(analyst.diagnose)(obs)
        rescue_is_signal, rescue_gene, rescue_code, rescue_signal = jax.vmap(analyst.rescue)(obs)
        experiments = jnp.sum(single, axis=(1, 2)) + jnp.sum(signal_mask, axis=1)
        rescued = obs["budget_left"] < params.budget - experiments * params.experiment_cost

        open_task_experiment = task_open & need.any(axis=1)
        kind = jnp.select(
            [open_task_experiment, task_open, mask[:, core.REVEAL_TASK], sweep, mask[:, core.COMMIT_DIAGNOSIS],
             ~rescued & mask[:, core.TEST_RESCUE], ~obs["network_submitted"].astype(bool)],
            [core.EXPERIMENT, core.SUBMIT_PREDICTION, core.REVEAL_TASK, core.EXPERIMENT, core.COMMIT_DIAGNOSIS,
             core.TEST_RESCUE, core.SUBMIT_NETWORK],
            core.END,
        )
        use_task = open_task_experiment
        is_rescue = kind == core.TEST_RESCUE
        exp_signal = ~use_task & sweep_signal
        gene = jnp.select([use_task, is_rescue], [task_gene, rescue_gene], sweep_gene)
        code = jnp.select([use_task, is_rescue], [task_code, rescue_code], sweep_code)
        signal_on = jnp.where(is_rescue, rescue_is_signal, exp_signal)
        signal = jnp.where(is_rescue, rescue_signal, jnp.argmax(todo_signal, axis=1))
        gene_codes, flags = single_target(signal_on, gene, code, signal, n, s)

        return core.Action(
            kind=kind.astype(jnp.int32),
            gene_codes=gene_codes.astype(jnp.int32),
            signal_flags=flags,
            prediction=prediction.astype(jnp.float32),
            diagnosis_target=diag_target.astype(jnp.int32),
            diagnosis_type=diag_type.astype(jnp.int32),
            network=jax.vmap(analyst.network)(obs),
        )

    return act


def model_fit_policy(params: core.EnvParams, config=None):
    """:class:`~luca_gym.worlds.luca.baselines.ModelFitPolicy`'s local family, batched
    (healthy sessions, any N): for each task, the singles of its two genes
    under BLOCK, BOOST and DAMPEN (the task's own codes first), then the
    weighted mean of an ensemble of local networks fitted to them inside the
    jit (:func:`~luca_gym.worlds.luca.baselines.model_fit.local_prediction`, vmapped over
    the sessions; it runs only on steps where some session predicts); then
    the network read from the singles, then end.

    It is stateless, so it sees one result per single (the observation's
    table): the per-session agent's repeats chosen by information gain are
    not part of it. ``config``: an :class:`~luca_gym.worlds.luca.baselines.model_fit.AgentConfig`
    (its ``mediators`` and ``local_fit``). ValueError in disease mode."""
    config = config or mf.AgentConfig()
    if params.disease:
        raise ValueError("model-fit: the batched form plays healthy sessions only (the local family models prediction tasks)")
    n = params.n_genes
    cfg, mediators = config.local_fit, config.mediators

    def predict(keys, obs, genes, codes):
        run = jax.vmap(lambda k, r, m, g, c: fitting.local_prediction(k, r, m, g, c, mediators, cfg))
        return run(keys, obs["single_results"], obs["single_mask"], genes, codes)

    def act(key, obs):
        mask = obs["action_mask"]
        b = mask.shape[0]
        rows = jnp.arange(b)
        single = obs["single_mask"].astype(bool)
        genes = jnp.clip(obs["task_genes"], 0, n - 1)
        codes = obs["task_codes"].astype(jnp.int32)
        task_open = open_task(obs)
        # The six local singles, the task's own two first: (B, 8) genes and codes.
        plan_genes = jnp.concatenate([genes, jnp.repeat(genes, 3, axis=1)], axis=1)
        plan_codes = jnp.concatenate([codes, jnp.broadcast_to(jnp.arange(6) % 3 + 1, (b, 6))], axis=1)
        done = single[rows[:, None], plan_genes, jnp.clip(plan_codes - 1, 0, 2)]
        afford = (obs["budget_left"] >= params.experiment_cost) & mask[:, core.EXPERIMENT]
        need = task_open & ~done.all(axis=1) & afford
        first = jnp.argmax(~done, axis=1)
        kind = jnp.select(
            [need, task_open, mask[:, core.REVEAL_TASK], ~obs["network_submitted"].astype(bool)],
            [core.EXPERIMENT, core.SUBMIT_PREDICTION, core.REVEAL_TASK, core.SUBMIT_NETWORK],
            core.END,
        )
        predicting = kind == core.SUBMIT_PREDICTION
        prediction = jax.lax.cond(
            predicting.any(),
            lambda: predict(jax.random.split(key, b), obs, genes, codes),
            lambda: jnp.full((b, 3), 0.5, jnp.float32),
        )
        gene_codes, flags = single_target(jnp.zeros(b, bool), plan_genes[rows, first], plan_codes[rows, first], jnp.zeros(b, jnp.int32), n, params.n_signals)
        return core.Action(
            kind=kind.astype(jnp.int32),
            gene_codes=gene_codes.astype(jnp.int32),
            signal_flags=flags,
            prediction=prediction.astype(jnp.float32),
            diagnosis_target=jnp.zeros(b, jnp.int32),
            diagnosis_type=jnp.zeros(b, jnp.int32),
            network=network_from_singles(obs),
        )

    return act


# The batched baselines by name (the names of :data:`luca_gym.worlds.luca.baselines.BASELINES`).
POLICIES = {"random": random_policy, "heuristic": heuristic_policy, "causal-sweep": causal_sweep_policy,
            "task-directed": task_directed_policy, "model-fit": model_fit_policy,
            "causal-sweep-flat": causal_sweep_flat_policy}
