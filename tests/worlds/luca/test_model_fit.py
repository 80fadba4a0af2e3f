"""model-fit: the ensemble fit recovers a known network's behaviour, the
experiment choice prefers what informs the target, and the agent plays whole
sessions through the harness (small settings here; the figures in
BENCHMARKS.md use the defaults)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym import harness as ev
from luca_gym.worlds.luca.baselines import BASELINES, make_policy
from luca_gym.worlds.luca.baselines import fitting, model_fit as mf
from luca_gym.worlds.luca.spec import BLOCK, BOOST
from luca_gym.worlds.luca.evaluation import luca_spec

SMALL = mf.AgentConfig(
    fit=fitting.FitConfig(members=4, steps=40),
    refit=fitting.FitConfig(members=4, steps=10),
    hypothesis_fit=fitting.FitConfig(members=2, steps=20),
    finalists=2,
    finalist_fit=fitting.FitConfig(members=3, steps=20),
    discriminate=1,
)


def _interventions(n, s, count, rng):
    codes = np.zeros((count, n), np.int8)
    flags = np.zeros((count, s), bool)
    for i in range(count):
        genes = rng.choice(n, 1 + i % 2, replace=False)
        codes[i, genes] = rng.choice([BLOCK, BOOST], len(genes))
    return codes, flags


def test_fit_recovers_a_known_network():
    """Data from a known candidate network (noise 0.01): the fitted ensemble
    explains it (the fit term falls far below its starting value) and predicts
    held-out interventions better than knowing nothing (0.5)."""
    cfg = fitting.FitConfig(members=4, steps=300, noise=0.01)
    n, s, p = 8, 2, 3
    rng = np.random.default_rng(0)
    truth = fitting.init_theta(jax.random.PRNGKey(42), n, s, p, fitting.FitConfig(init_scale=1.0))
    truth["R"] = truth["R"] * 2.0
    lock, persist = jnp.zeros(n, jnp.int8), jnp.zeros(s, bool)
    codes, flags = _interventions(n, s, 24, rng)
    y = np.asarray(fitting.predict(truth, lock, persist, jnp.asarray(codes), jnp.asarray(flags), cfg))
    y = y + rng.normal(0, 0.01, y.shape)
    train = 18
    data = fitting.pad_data(codes[:train], flags[:train], y[:train], np.ones(train), 20)
    starts = jax.vmap(lambda k: fitting.init_theta(k, n, s, p, cfg))(jax.random.split(jax.random.PRNGKey(0), 4))
    locks, persists = jnp.zeros((4, n), jnp.int8), jnp.zeros((4, s), bool)
    _, before, _ = fitting.fit(starts, locks, persists, data, fitting.FitConfig(members=4, steps=0, noise=0.01))
    thetas, after, _ = fitting.fit(starts, locks, persists, data, cfg)
    assert float(np.min(after)) < 0.05 * float(np.min(before))
    pred = np.asarray(fitting.predict_batch(thetas, locks, persists, jnp.asarray(codes[train:]), jnp.asarray(flags[train:]), cfg))
    w = mf._weights(np.asarray(after))
    mean = np.einsum("k,kcp->cp", w, pred)
    err_fit = np.abs(mean - y[train:]).mean()
    err_null = np.abs(0.5 - y[train:]).mean()
    assert err_fit < 0.5 * err_null, (err_fit, err_null)


def test_information_gain_prefers_what_tells_about_the_target():
    rng = np.random.default_rng(1)
    k = 32
    target = rng.normal(0, 0.1, (k, 3))
    informative = target + rng.normal(0, 0.01, (k, 3))  # tracks the target
    unrelated = rng.normal(0, 0.1, (k, 3))  # disagrees, but says nothing about it
    agreed = np.zeros((k, 3))  # every member agrees
    gain = mf.information_gain(np.stack([informative, unrelated, agreed]), target, np.ones(k), noise=0.03)
    assert gain[0] > 5 * gain[1]
    assert gain[2] == pytest.approx(0.0, abs=1e-12)
    assert np.all(gain >= -1e-12)


def test_registered_as_an_agent():
    assert BASELINES["model-fit"] is mf.ModelFitPolicy
    assert isinstance(make_policy("model-fit"), mf.ModelFitPolicy)
    assert ev.check_agent("model-fit", "luca") == "model-fit"


@pytest.mark.parametrize("tier,mode,seed", [("easy", "disease", 2)])
def test_plays_whole_sessions_through_the_harness(tier, mode, seed):
    """A whole session through eval.run_session: it spends the budget on
    accepted experiments, answers both tasks, commits a diagnosis and tests
    rescues in disease mode, ends by itself, and replays exactly. (Disease
    only: a healthy session is its first half, and the local family's test
    below plays a healthy one through the harness.)"""
    spec = luca_spec("model-fit", tier, mode, 20, seed)
    record = ev.run_session(mf.ModelFitPolicy(SMALL), spec)
    calls = [c["call"] for c in record["calls"]]
    assert record["end_reason"] == "end" and calls[-1] == "end"
    assert calls.count("submit_prediction") == 2
    # The only refusal it may meet: a pair that turns out to be a held-out
    # task's (free, never tried twice).
    refused = [c for c in record["calls"] if "error" in c["result"]]
    assert all("held-out prediction task" in c["result"]["error"] for c in refused), refused
    tried = [str(c["arguments"]) for c in refused]
    assert len(tried) == len(set(tried))
    rescues = [c for c in record["calls"] if c["call"] == "test_rescue"]
    # The budget is spent, or left once a rescue restored every aberrant phenotype.
    assert record["calls"][-1]["budget_remaining"] == 0 or rescues[-1]["result"]["restored_fraction"] == 1.0
    if mode == "disease":
        assert calls.count("submit_malfunction_hypothesis") == 1
        first_rescue = calls.index("test_rescue")
        assert calls.index("submit_malfunction_hypothesis") < first_rescue
    again = ev.run_session(mf.ModelFitPolicy(SMALL), spec)
    assert again["calls"] == record["calls"] and again["scores"] == record["scores"]


# -- the local family (organisms of any size) -----------------------------------

LOCAL = mf.AgentConfig(
    family="local",
    local_fit=fitting.FitConfig(members=4, steps=80),
    local_refit=fitting.FitConfig(members=4, steps=20),
    local_rounds=2,
)


def test_local_fit_predicts_a_known_local_network():
    """Singles from a known 4-node network (two task genes, two mediators; noise
    0.01): the fitted local ensemble predicts the pair, which it never saw,
    far better than knowing nothing, and close to the truth."""
    cfg = fitting.FitConfig(members=8, steps=300)
    truth = fitting.init_theta(jax.random.PRNGKey(1), 4, 1, 3, fitting.FitConfig(init_scale=0.5))
    truth["R"] = truth["R"].at[:, :2].set(jnp.array([[2.0, 1.5], [-1.5, 0.0], [0.0, 2.0]]))
    lock, persist = jnp.zeros(4, jnp.int8), jnp.zeros(1, bool)
    singles = fitting.local_interventions(2)
    y = np.asarray(fitting.predict(truth, lock, persist, singles, jnp.zeros((6, 1), bool), cfg))
    y = y + np.random.default_rng(0).normal(0, 0.01, y.shape)
    pairs = [(BLOCK, BLOCK), (BOOST, BOOST), (BLOCK, BOOST), (BOOST, BLOCK)]
    data = {"codes": singles, "flags": jnp.zeros((6, 1), bool), "y": jnp.asarray(y, jnp.float32), "weight": jnp.ones(6)}
    thetas, fit_terms = fitting.local_fit(fitting.local_init(jax.random.PRNGKey(0), 2, cfg), data, 2, cfg)
    for codes in pairs:
        task = fitting.local_task(jnp.array(codes), 2)
        true = np.asarray(fitting.predict(truth, lock, persist, task, jnp.zeros((1, 1), bool), cfg))[0]
        pred = mf._weights(fit_terms) @ np.asarray(fitting.local_outcomes(thetas, task, 2, cfg))[:, 0]
        assert np.abs(pred - true).max() < 0.1, (codes, pred, true)
        assert np.abs(pred - true).max() < 0.3 * np.abs(0.5 - true).max(), (codes, pred, true)


def test_local_data_reads_the_singles_table_and_the_agents_memory_alike():
    """The batched form reads the observation's singles table, the agent its
    own measurements: with each single measured once they are the same data;
    repeats become a mean weighted by their count."""
    n, p = 12, 3
    rng = np.random.default_rng(3)
    results = rng.uniform(0, 1, (n, 3, p)).astype(np.float32)
    mask = np.zeros((n, 3), bool)
    genes = [4, 9]
    mask[4, [0, 2]] = mask[9, :] = True
    mask[1, 0] = True  # another gene: not the task's
    table = fitting.local_data(jnp.asarray(results), jnp.asarray(mask), jnp.asarray(genes), 2)
    agent = mf.ModelFitPolicy(LOCAL)
    agent.codes, agent.flags, agent.y, agent.weight = [], [], [], []
    for g, c in zip(*np.nonzero(mask)):
        codes = np.zeros(n, np.int8)
        codes[g] = c + 1
        agent._add(codes, np.zeros(2, bool), results[g, c], 1.0)
    memory = agent._local_data(genes)
    for key in ("codes", "weight"):
        np.testing.assert_array_equal(np.asarray(table[key]), np.asarray(memory[key]))
    measured = np.asarray(table["weight"]) > 0
    np.testing.assert_allclose(np.asarray(table["y"])[measured], np.asarray(memory["y"])[measured], atol=1e-7)
    assert np.asarray(table["weight"]).tolist() == [1, 0, 1, 1, 1, 1]
    # A repeat: the mean, counted twice.
    agent._add(np.eye(n, dtype=np.int8)[9] * BOOST, np.zeros(2, bool), np.zeros(p, np.float32), 1.0)
    again = agent._local_data(genes)
    assert float(again["weight"][4]) == 2.0
    np.testing.assert_allclose(np.asarray(again["y"][4]), results[9, 1] / 2, atol=1e-7)


@pytest.mark.parametrize("field,value", [("family", "sparse"), ("local_share", 0.0), ("local_share", 0.9),
                                         ("local_rounds", 0), ("mediators", -1)])
def test_agent_config_refuses_bad_settings(field, value):
    with pytest.raises(ValueError, match=field):
        mf.AgentConfig(**{field: value})


def test_disease_beyond_the_dense_family_is_refused_up_front():
    """model-fit plays disease sessions with its dense family only (N <= 40):
    planning a larger one is refused before anything runs, naming the limit."""
    with pytest.raises(ValueError, match="N=40"):
        ev.plan_world("luca", ["model-fit"], [0], tier=["medium"], mode=["disease"], n_genes=[80])
    assert len(ev.plan_world("luca", ["model-fit"], [0], tier=["medium"], mode=["healthy", "disease"], n_genes=[20, 40])) == 4
    assert len(ev.plan_world("luca", ["model-fit"], [0], tier=["medium"], mode=["healthy"], n_genes=[320])) == 1
    from luca_gym.worlds.luca import core

    with pytest.raises(ValueError, match="disease"):
        mf.ModelFitPolicy(LOCAL).reset(core.make_params("medium", 20, "disease"), 0)


@pytest.mark.xdist_group("n40")
def test_local_family_plays_a_large_organism_through_the_harness():
    """N=40, above the family's dense_max (30 here, so the organism is one the
    other N=40 tests generate): per task the six singles of its genes, the
    task's own first, then repeats of them; nothing else is measured; each
    task keeps to its share of the budget; both tasks answered well; the
    session replays exactly."""
    config = mf.AgentConfig(local_rounds=2, local_fit=LOCAL.local_fit, local_refit=LOCAL.local_refit, dense_max=30)
    assert config.family == "auto" and config.uses_local(40) and not config.uses_local(30)
    spec = luca_spec("model-fit", "medium", "healthy", 40, 1)  # its two tasks share no gene: each task's singles are its own
    record = ev.run_session(mf.ModelFitPolicy(config), spec)
    calls = record["calls"]
    assert calls[-1]["call"] == "end" and [c["call"] for c in calls].count("submit_prediction") == 2
    assert not [c for c in calls if "error" in c["result"]]
    budget = record["budget"]
    share = int(0.25 * budget)
    tasks = [i for i, c in enumerate(calls) if c["call"] == "get_next_prediction_task"]
    for start, stop in zip(tasks, tasks[1:] + [len(calls)]):
        genes = set(calls[start]["result"]["interventions"])
        experiments = [c for c in calls[start:stop] if c["call"] == "run_experiment"]
        assert 6 <= len(experiments) <= share
        first = [next(iter(c["arguments"]["interventions"].items())) for c in experiments[:2]]
        assert first == [(g, {"type": t["type"]}) for g, t in calls[start]["result"]["interventions"].items()]
        for c in experiments:
            (gene, how), = c["arguments"]["interventions"].items()
            assert gene in genes
        kinds = {(g, t["type"]) for c in experiments for g, t in c["arguments"]["interventions"].items()}
        assert len(kinds) == 6
    assert record["scores"]["prediction"] >= 0.5
    again = ev.run_session(mf.ModelFitPolicy(config), spec)
    assert again["calls"] == calls and again["scores"] == record["scores"]


def test_batched_form_runs_the_local_plan_and_answers_with_the_local_fit():
    """``baselines.batched.POLICIES["model-fit"]``, stepped by hand over three
    sessions: each task is revealed, its six singles run (the task's own two
    first), and the prediction submitted is exactly :func:`local_prediction`
    on the observation's singles; then the network, then end; new organisms
    of the same size trace nothing new."""
    from luca_gym.worlds.luca import core
    from luca_gym.worlds.luca.baselines.batched import POLICIES
    from luca_gym.worlds.luca.functional import organism_batch

    params = core.make_params("medium", 20, "healthy")
    act = POLICIES["model-fit"](params, LOCAL)
    traces = []

    def counted(key, obs):
        traces.append(1)
        return act(key, obs)

    policy = jax.jit(counted)
    step = jax.jit(jax.vmap(core.step, in_axes=(0, 0, None)), static_argnums=2)
    organisms, keys = organism_batch([0, 1, 2], "medium", 20, "healthy")
    obs, state = jax.vmap(core.reset, in_axes=(0, 0, None))(keys, organisms, params)
    kinds, answered = [], 0
    for i in range(24):
        key = jax.random.PRNGKey(i)
        action = policy(key, obs)
        kinds.append(np.asarray(action.kind))
        for b in np.flatnonzero(np.asarray(action.kind) == core.SUBMIT_PREDICTION):
            sub = jax.random.split(key, 3)[b]
            expected = fitting.local_prediction(sub, obs["single_results"][b], obs["single_mask"][b], obs["task_genes"][b],
                                           obs["task_codes"][b].astype(jnp.int32), LOCAL.mediators, LOCAL.local_fit)
            np.testing.assert_allclose(np.asarray(action.prediction[b]), np.asarray(expected), atol=1e-5)
            answered += 1
        for b in np.flatnonzero(np.asarray(action.kind) == core.EXPERIMENT):
            genes = set(np.asarray(obs["task_genes"][b]).tolist())
            hit = np.flatnonzero(np.asarray(action.gene_codes[b]))
            assert hit.size == 1 and int(hit[0]) in genes
        obs, state, *_ = step(state, action, params)
    assert answered == 6 and np.asarray(state.ended).all()
    scores = jax.vmap(core.session_scores, in_axes=(0, None))(state, params)
    assert np.all(np.asarray(scores["prediction"]) >= 0.5)
    for row in np.array(kinds).T:
        row = row[: list(row).index(core.END) + 1]
        assert row[0] == core.REVEAL_TASK and row[-2:].tolist() == [core.SUBMIT_NETWORK, core.END]
        assert list(row).count(core.EXPERIMENT) <= 12 and list(row).count(core.SUBMIT_PREDICTION) == 2
    # New organisms, same shapes: no new trace.
    organisms, keys = organism_batch([3, 4, 5], "medium", 20, "healthy")
    policy(jax.random.PRNGKey(0), jax.vmap(core.reset, in_axes=(0, 0, None))(keys, organisms, params)[0])
    assert len(traces) == 1


def test_batched_form_refuses_disease_mode():
    from luca_gym.worlds.luca import core
    from luca_gym.worlds.luca.baselines.batched import POLICIES

    with pytest.raises(ValueError, match="healthy sessions only"):
        POLICIES["model-fit"](core.make_params("medium", 20, "disease"))
