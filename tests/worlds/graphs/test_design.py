"""Learned experimental design on the graph worlds: the flat codec's
posterior analyst (``analyst="posterior"``), the designers that read
through it (information-gain, round-robin, random) and the value of design.

The posterior analyst is ``bayes-edges``' reading: a learner on it chooses
only the experiments. Its sessions are pure functions of the seed and the
actions, jittable in the functional env; bad names are refused in one line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from luca_gym import functional as F
from luca_gym.agents import FlatPolicy, PPOConfig
from luca_gym.worlds.graphs import analyst, core
from luca_gym.worlds.graphs.baselines import (information_gain_policy, play_bayes_batch, random_policy,
                                              round_robin_policy, systematic_policy)
from luca_gym.worlds.graphs.flat import ANALYSTS, dag_codec, play_batch, relational_codec, session_keys
from luca_gym.worlds.graphs.report import value_of_design
from luca_gym.worlds.graphs.tools import play_dag, play_relational

NOISY = {"dag": dict(n_nodes=5, n_states=3, observation_noise=0.05),
         "relational": dict(n_houses=5, observation_noise=0.1)}
MAKE = {"dag": dag_codec, "relational": relational_codec}
PLAY = {"dag": play_dag, "relational": play_relational}
SEEDS = list(range(60_000, 60_024))  # no figure was tuned on these


def _posterior(world, **more):
    return MAKE[world](analyst="posterior", **NOISY[world], **more)


def _play(codec, policy, seeds=SEEDS):
    return jax.device_get(play_batch(policy, None, session_keys(seeds), codec, codec.instances(seeds), codec.max_calls))


# -- the setting -------------------------------------------------------------------
def test_the_default_analyst_is_what_the_evidence_implies():
    assert ANALYSTS[0] == "implied" and dag_codec().analyst == "implied"
    assert dag_codec().settings()["analyst"] == "implied"
    assert PPOConfig("dag", {}).make_env() == dag_codec()


@pytest.mark.parametrize("value", ["bayes", "", 1, None])
def test_a_bad_analyst_is_one_line_naming_the_allowed(value):
    with pytest.raises(ValueError) as error:
        dag_codec(analyst=value)
    assert str(error.value).startswith("analyst:") and "implied, posterior" in str(error.value)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="^analyst:"):
        PPOConfig("relational", {"analyst": value})


def test_the_posterior_analyst_is_refused_under_raw_observations():
    with pytest.raises(ValueError, match="^analyst: 'posterior'.*observation='evidence' only"):
        dag_codec(analyst="posterior", observation="raw")


def test_a_designer_refuses_a_codec_it_cannot_read():
    with pytest.raises(ValueError, match="information-gain"):
        information_gain_policy(dag_codec(observation="raw"))
    with pytest.raises(ValueError, match="round-robin"):
        round_robin_policy(relational_codec(observation="raw"))
    with pytest.raises(ValueError, match="systematic reads what the evidence implies"):
        systematic_policy(dag_codec(analyst="posterior"))


def test_information_gain_on_the_implied_codec_sweeps_the_open_rows():
    """Under the default analyst what the evidence implies is certain: at
    the paper's settings the designer solves what systematic solves."""
    codec = MAKE["dag"](n_nodes=5, n_states=3)
    assert _play(codec, information_gain_policy(codec))["success"].mean() == 1.0


# -- the observation and the calls -----------------------------------------------------
@pytest.mark.parametrize("world", ["dag", "relational"])
def test_the_observation_is_the_posterior_log_odds_and_hides_nothing_else(world):
    codec = _posterior(world)
    n = codec.config.n
    assert (codec.num_actions, codec.observation_size) == (n + 1, n * n + n + 1)
    instance = jax.tree_util.tree_map(lambda x: x[0], codec.instances([SEEDS[0]]))
    state, vector, mask = jax.jit(codec.open)(instance)
    state, vector, mask, *_ = jax.jit(codec.step)(state, jnp.int32(1))
    view = core.public_view(state.session)
    posterior = jax.jit(analyst.edge_posterior, static_argnums=1)(view, codec.config)
    assert np.allclose(vector[: n * n], analyst.log_odds_features(posterior).reshape(-1))
    assert np.all(np.abs(vector) <= 1.0)
    # the observation is a function of the public view alone (no hidden field read)
    assert np.allclose(analyst.posterior_of_features(vector[: n * n].reshape(n, n)) * (1 - np.eye(n)),
                       np.where(np.abs(vector[: n * n].reshape(n, n)) < 1, posterior, np.round(posterior)), atol=1e-4)
    assert vector[n * n + 1] == pytest.approx(1 / codec.config.budget) and mask.all()


def test_a_refused_call_costs_nothing_and_changes_nothing():
    codec = _posterior("dag", intervention_cost=0.1)
    instance = jax.tree_util.tree_map(lambda x: x[0], codec.instances([SEEDS[1]]))
    step = jax.jit(codec.step)
    state, vector, _ = jax.jit(codec.open)(instance)
    new, new_vector, _, reward, done, _, error = step(state, jnp.int32(codec.config.n + 7))
    assert int(error) == 3 and float(reward) == 0.0 and not bool(done)
    assert all(jnp.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(state)))
    assert np.array_equal(new_vector, vector)
    ended, *_ = step(state, jnp.int32(codec.config.n))
    again, _, _, reward, _, _, error = step(ended, jnp.int32(0))
    assert int(error) == 2 and float(reward) == 0.0
    assert all(jnp.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(again), jax.tree_util.tree_leaves(ended)))


@pytest.mark.parametrize("world", ["dag", "relational"])
def test_information_gain_on_the_codec_is_bayes_edges(world):
    """The flat designer reading the codec's observation, the analyst
    stating the matrices, takes bayes-edges' calls: the same scores on every
    seed (so the codec reads the evidence exactly as bayes-edges does)."""
    codec = _posterior(world)
    ours = _play(codec, information_gain_policy(codec))
    theirs = jax.device_get(play_bayes_batch(codec.instances(SEEDS), codec.config))
    for name in ("success", "iterations", "interventions", "shd"):
        assert np.array_equal(ours[name], theirs[name]), name


@pytest.mark.parametrize("world", ["dag", "relational"])
def test_a_learner_on_the_posterior_plays_the_host_session_as_the_batch(world):
    codec = _posterior(world)
    designer = jax.jit(round_robin_policy(codec))
    policy = FlatPolicy("round-robin", lambda v, m, rng: int(designer(None, None, v[None], m[None])[0]), codec)
    seeds = SEEDS[:3]
    batch = _play(codec, round_robin_policy(codec), seeds)
    settings = NOISY[world]
    for i, seed in enumerate(seeds):
        record = PLAY[world](policy, seed, **settings)
        for name in ("success", "iterations", "interventions", "shd"):
            assert record["scores"][name] == pytest.approx(float(batch[name][i])), (seed, name)


def test_the_flat_env_pools_and_steps_the_posterior_codec_in_one_jit():
    codec = _posterior("dag")
    pool = F.make_pool(codec, [10_000, 10_001, 10_002])
    out = F.flat_rollout(round_robin_policy(codec), None, jax.random.PRNGKey(0), codec, pool, 4, 30)
    assert np.isfinite(float(out["mean_score"]))
    assert int(out["episodes"]) >= 4  # each session ends within budget + 1 calls


def test_design_matters_with_the_same_analyst():
    """Read by the same analyst, a random design earns less than a sweep or
    the information-gain designer (24 seeds: a bound, not the figure; which
    of the two leads is the design settings' question)."""
    codec = _posterior("dag")
    scores = {name: float(_play(codec, make(codec))["success"].mean())
              for name, make in (("random", random_policy), ("round-robin", round_robin_policy),
                                 ("information-gain", information_gain_policy))}
    assert scores["random"] < min(scores["round-robin"], scores["information-gain"])


def test_the_value_of_design_is_the_score_less_a_random_design_read_alike():
    """A design replayed by the analyst scores as the designer that made it
    (round-robin's sweep), and the random design is random's sessions on the
    same keys: the value is the difference."""
    codec = _posterior("dag")
    config, instances = codec.config, codec.instances(SEEDS)
    sweep = np.tile(np.arange(config.budget) % config.n, (len(SEEDS), 1)).astype(np.int32)
    value = value_of_design(config, instances, sweep, session_keys(SEEDS))
    assert np.array_equal(value["agent"], _play(codec, round_robin_policy(codec))["success"])
    assert np.array_equal(value["random"], _play(codec, random_policy(codec))["success"])
    assert np.array_equal(value["value"], value["agent"] - value["random"])
    nothing = value_of_design(config, instances, np.full_like(sweep, config.n), session_keys(SEEDS))
    assert nothing["agent"].mean() < value["agent"].mean()  # stopping at once earns less than the sweep


@pytest.mark.slow  # harness sessions and the report's compiles: about a minute on a quiet machine
def test_the_report_gives_the_value_of_design_where_readings_are_uncertain():
    from luca_gym import harness as ev
    from luca_gym.harness.runner import run_session
    from luca_gym.worlds.graphs.baselines import BayesEdges
    from luca_gym.worlds.graphs.report import sections

    settings = {"n_nodes": 5, "n_states": 3, "observation_noise": 0.05}
    records = [run_session(BayesEdges(), spec) for spec in ev.plan_world("dag", ["bayes-edges"], SEEDS[:4], **settings)]
    text = "\n".join(sections(records, "", source="test"))
    assert "## The value of design" in text
    row = next(line for line in text.splitlines() if line.startswith("| bayes-edges | (5 nodes, 3 states) |")
               and line.count("|") == 7)
    # bayes-edges' own experiments read by its own analyst: its own success
    assert float(row.split("|")[3]) == pytest.approx(np.mean([r["scores"]["success"] for r in records]))
    quiet = [run_session(BayesEdges(), spec) for spec in ev.plan_world("dag", ["bayes-edges"], SEEDS[:2], n_nodes=4)]
    assert "value of design" not in "\n".join(sections(quiet, "", source="test"))
