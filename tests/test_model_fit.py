"""model-fit: the ensemble fit recovers a known network's behaviour, the
experiment choice prefers what informs the target, and the agent plays whole
sessions through the harness (small settings here; the figures in
BENCHMARKS.md use the defaults)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym import eval as ev
from luca_gym.baselines import BASELINES, make_policy
from luca_gym.baselines import model_fit as mf
from luca_gym.spec import BLOCK, BOOST

SMALL = mf.AgentConfig(
    fit=mf.FitConfig(members=4, steps=40),
    refit=mf.FitConfig(members=4, steps=10),
    hypothesis_fit=mf.FitConfig(members=2, steps=20),
    finalists=2,
    finalist_fit=mf.FitConfig(members=3, steps=20),
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
    cfg = mf.FitConfig(members=4, steps=300, noise=0.01)
    n, s, p = 8, 2, 3
    rng = np.random.default_rng(0)
    truth = mf.init_theta(jax.random.PRNGKey(42), n, s, p, mf.FitConfig(init_scale=1.0))
    truth["R"] = truth["R"] * 2.0
    lock, persist = jnp.zeros(n, jnp.int8), jnp.zeros(s, bool)
    codes, flags = _interventions(n, s, 24, rng)
    y = np.asarray(mf.predict(truth, lock, persist, jnp.asarray(codes), jnp.asarray(flags), cfg))
    y = y + rng.normal(0, 0.01, y.shape)
    train = 18
    data = mf.pad_data(codes[:train], flags[:train], y[:train], np.ones(train), 20)
    starts = jax.vmap(lambda k: mf.init_theta(k, n, s, p, cfg))(jax.random.split(jax.random.PRNGKey(0), 4))
    locks, persists = jnp.zeros((4, n), jnp.int8), jnp.zeros((4, s), bool)
    _, before, _ = mf.fit(starts, locks, persists, data, mf.FitConfig(members=4, steps=0, noise=0.01))
    thetas, after, _ = mf.fit(starts, locks, persists, data, cfg)
    assert float(np.min(after)) < 0.05 * float(np.min(before))
    pred = np.asarray(mf.predict_batch(thetas, locks, persists, jnp.asarray(codes[train:]), jnp.asarray(flags[train:]), cfg))
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
    assert ev.check_agent("model-fit") == "model-fit"


@pytest.mark.parametrize("tier,mode,seed", [("hard", "healthy", 1), ("easy", "disease", 2)])
def test_plays_whole_sessions_through_the_harness(tier, mode, seed):
    """A whole session through eval.run_session: it spends the budget on
    accepted experiments, answers both tasks, commits a diagnosis and tests
    rescues in disease mode, ends by itself, and replays exactly."""
    spec = ev.SessionSpec("model-fit", tier, mode, 20, seed)
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
