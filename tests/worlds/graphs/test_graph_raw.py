"""The graph worlds' flat codec under ``observation="raw"`` (the learner
tracks the state and edits the matrix it proposes) beside ``"evidence"``
(the default, unchanged): the evidence vectors as they were, no inference in
a raw observation, edits of the learner's matrix and its proposals, the raw
teacher, the host session's form, one compile per config and the settings
refused by name."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luca_gym import functional as F
from luca_gym.agents import FlatPolicy, PPOConfig
from luca_gym.testing import count_traces
from luca_gym.worlds.graphs import core
from luca_gym.worlds.graphs.baselines import systematic_policy
from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig
from luca_gym.worlds.graphs.flat import (EDITS_SPENT, GraphFlat, dag_codec, edit_budget, play_batch, raw_fields,
                                         raw_systematic_policy, relational_codec, session_keys)
from luca_gym.worlds.graphs.tools import play_dag, play_relational


def _one(instances, i=0):
    return jax.tree_util.tree_map(lambda x: x[i], instances)


def _edit(codec, i, j) -> int:
    """The flat action that toggles pair (i, j) of a raw codec's matrix."""
    return codec.config.n + 1 + i * codec.config.n + j


# -- "evidence": the vectors as they were ----------------------------------------
# Each observation vector times the budget (8) after actions 3, 0, 1 on seeds 0-2, written by the codec
# before the raw observation existed (proposals "final", so the sessions run on).
EVIDENCE_BEFORE = {
    "dag": {
        0: [[-8, 0, 0, -8, 0, -8, 0, 0, 0, 0, -8, 0, 8, -8, -8, -8, 0, 0, 0, 1, 7],
            [-8, -8, -8, -8, 0, -8, 0, 0, 0, 0, -8, 0, 8, -8, -8, -8, 1, 0, 0, 1, 6],
            [-8, -8, -8, -8, -8, -8, -8, -8, 0, 0, -8, 0, 8, -8, -8, -8, 1, 1, 0, 1, 5]],
        1: [[-8, 0, 0, 0, 0, -8, 0, -8, 0, 0, -8, 0, -8, 8, -8, -8, 0, 0, 0, 1, 7],
            [-8, -8, -8, -8, 0, -8, 0, -8, 0, 0, -8, 0, -8, 8, -8, -8, 1, 0, 0, 1, 6],
            [-8, -8, -8, -8, -8, -8, -8, -8, 0, 0, -8, 0, -8, 8, -8, -8, 1, 1, 0, 1, 5]],
        2: [[-8, 0, 0, 0, 0, -8, 0, 0, 0, 0, -8, 0, -8, -8, -8, -8, 0, 0, 0, 1, 7],
            [-8, 8, -8, -8, -8, -8, 0, 0, 0, 0, -8, 0, -8, -8, -8, -8, 1, 0, 0, 1, 6],
            [-8, 8, -8, -8, -8, -8, -8, -8, 0, 0, -8, 0, -8, -8, -8, -8, 1, 1, 0, 1, 5]],
    },
    "relational": {
        0: [[-8, 0, 0, -8, 0, -8, 0, -8, 0, 0, -8, -8, -8, -8, -8, -8, 0, 0, 0, 1, 7],
            [-8, -8, -8, -8, -8, -8, 0, -8, -8, 0, -8, -8, -8, -8, -8, -8, 1, 0, 0, 1, 6],
            [-8, -8, -8, -8, -8, -8, 8, -8, -8, 8, -8, -8, -8, -8, -8, -8, 1, 1, 0, 1, 5]],
        1: [[-8, 0, 0, -8, 0, -8, 0, -8, 0, 0, -8, 8, -8, -8, 8, -8, 0, 0, 0, 1, 7],
            [-8, -8, -8, -8, -8, -8, 0, -8, -8, 0, -8, 8, -8, -8, 8, -8, 1, 0, 0, 1, 6],
            [-8, -8, -8, -8, -8, -8, -8, -8, -8, -8, -8, 8, -8, -8, 8, -8, 1, 1, 0, 1, 5]],
        2: [[-8, 0, 0, -8, 0, -8, 0, -8, 0, 0, -8, -8, -8, -8, -8, -8, 0, 0, 0, 1, 7],
            [-8, 8, 8, -8, 8, -8, 0, -8, 8, 0, -8, -8, -8, -8, -8, -8, 1, 0, 0, 1, 6],
            [-8, 8, 8, -8, 8, -8, -8, -8, 8, -8, -8, -8, -8, -8, -8, -8, 1, 1, 0, 1, 5]],
    },
}


@pytest.mark.parametrize("world", ["dag", "relational"])
def test_evidence_is_the_default_and_its_vectors_are_as_before(world):
    codec = (dag_codec(n_nodes=4, n_states=3, proposals="final") if world == "dag"
             else relational_codec(n_houses=4, proposals="final"))
    assert codec == GraphFlat(codec.config, "evidence") and codec.observation == "evidence"
    assert (codec.num_actions, codec.observation_size) == (5, 21)
    for seed, rows in EVIDENCE_BEFORE[world].items():
        state, vector, mask = codec.open(_one(codec.instances([seed])))
        assert np.array_equal(vector * 8, [-8, 0, 0, 0, 0, -8, 0, 0, 0, 0, -8, 0, 0, 0, 0, -8, 0, 0, 0, 0, 8])
        for action, row in zip((3, 0, 1), rows):
            state, vector, mask, reward, *_ = codec.step(state, action)
            assert np.array_equal(np.round(np.asarray(vector) * 8), row), (seed, action)
            assert np.asarray(mask).tolist() == [True] * 5 and float(reward) == 0.0


# -- "raw": what the observation holds -------------------------------------------
def test_raw_sizes_and_opening_observation():
    codec = dag_codec(observation="raw")
    n = 10
    assert (codec.num_actions, codec.observation_size) == (n + 1 + n * n, n * n + 5 * n + 2)
    assert codec.max_calls == 2 * n + 1 + edit_budget(n) and codec.describe() == "dag N=10 S=5 raw"
    assert codec.settings()["observation"] == "raw" and dag_codec(**codec.settings()) == codec
    inst = _one(codec.instances([5]))
    state, vector, mask = codec.open(inst)
    f = raw_fields(vector, n)
    assert not f["hypothesis"].any() and not f["last"].any() and not f["changed"].any()
    assert np.allclose(f["before"], np.asarray(inst.states[:n]) / 4) and np.allclose(f["after"], f["before"])
    assert float(f["budget_left"]) == 1.0 and float(f["edits_left"]) == 1.0
    mask = np.asarray(mask)
    assert mask[: n + 1].all() and np.array_equal(mask[n + 1:].reshape(n, n), ~np.eye(n, dtype=bool))


def test_raw_observation_carries_no_inference():
    """Two dag sessions with different truths (A: 0 -> 2; B: no edge) whose
    opening states make the same raw history from the second intervention on:
    the evidence codec tells them apart (an edge seen, no edge proven), the
    raw codec shows the same vector, in which nothing is -1 (one matrix at
    the end, so that B's empty matrix does not end its session at once)."""
    config = DagConfig(n_nodes=3, n_states=3, proposals="final")
    raw, evidence = GraphFlat(config, "raw"), GraphFlat(config)
    base = _one(core.instances([0], config))
    edge = np.zeros((3, 3), bool)
    edge[0, 2] = True
    a = dataclasses.replace(base, adjacency=edge, graph=edge, states=np.array([0, 0, 0], np.int32))
    after_a = np.asarray(raw.step(raw.open(a)[0], 0)[0].session.states)
    assert after_a[2] != 0  # A's intervention on 0 moved node 2 to after_a[2]; B starts there and nothing moves
    b = dataclasses.replace(base, adjacency=np.zeros((3, 3), bool), graph=np.zeros((3, 3), bool),
                            states=np.array([0, 0, after_a[2]], np.int32))
    vectors = {}
    for name, codec in (("raw", raw), ("evidence", evidence)):
        for which, inst in (("a", a), ("b", b)):
            state = codec.open(inst)[0]
            for action in (0, 1):
                state, vector, *_ = codec.step(state, action)
            vectors[name, which] = np.asarray(vector)
    assert np.array_equal(vectors["raw", "a"], vectors["raw", "b"])
    assert not np.array_equal(vectors["evidence", "a"], vectors["evidence", "b"])
    assert vectors["raw", "a"].min() >= 0.0


def test_raw_observation_reads_no_inferred_field():
    """Whatever the session's evidence, closure, change counts and truth, a
    raw observation is the same: it reads the shown states, the
    interventions and the budget only."""
    codec = dag_codec(n_nodes=6, n_states=3, observation="raw")
    state = codec.open(_one(codec.instances([4])))[0]
    for action in (0, 1, 2):
        state = codec.step(state, action)[0]
    session = state.session
    other = dataclasses.replace(session, evidence=-session.evidence, reach=~session.reach, changes=session.changes + 3,
                                adjacency=~session.adjacency, graph=~session.graph)
    mine = jax.device_get(codec._view(state)[1:])
    theirs = jax.device_get(codec._view(dataclasses.replace(state, session=other))[1:])
    assert all(np.array_equal(x, y) for x, y in zip(mine, theirs))


# -- "raw": edits and proposals ---------------------------------------------------
@pytest.mark.parametrize("proposals", ["every", "final"])
def test_edits_write_the_matrix_and_the_right_one_proposed_succeeds(proposals):
    codec = dag_codec(n_nodes=5, n_states=3, observation="raw", proposals=proposals)
    inst = _one(codec.instances([7]))
    truth = np.asarray(inst.adjacency)
    assert truth.any()
    state, vector, mask = codec.open(inst)
    state, vector, mask, reward, terminated, _, error = codec.step(state, 0)  # an intervention with the empty matrix
    assert int(error) == 0 and not terminated and int(state.last) == 0
    for i, j in zip(*np.nonzero(truth)):
        state, vector, mask, reward, terminated, _, error = codec.step(state, _edit(codec, i, j))
        assert int(error) == 0 and float(reward) == 0.0 and not terminated
    assert np.array_equal(raw_fields(vector, 5)["hypothesis"], truth)
    assert int(state.edits_left) == edit_budget(5) - truth.sum() and int(state.session.interventions) == 1
    action = 1 if proposals == "every" else 5  # the next intervention proposes it; under "final" the submission
    state, vector, mask, reward, terminated, _, error = codec.step(state, action)
    assert int(error) == 0 and bool(terminated) and float(reward) == 1.0
    scores = jax.device_get(codec.scores(state))
    assert scores["success"] == 1.0 and scores["iterations"] == 1 and scores["edge_f1"] == 1.0
    assert not np.asarray(mask).any()
    *_, error = codec.step(state, _edit(codec, 0, 1))
    assert int(error) == 2  # an ended session refuses an edit


def test_a_wrong_matrix_proposed_goes_on_and_refused_edits_change_nothing():
    codec = relational_codec(n_houses=4, observation="raw")
    state, vector, mask = codec.open(_one(codec.instances([3])))
    state, vector, mask, *_ = codec.step(state, _edit(codec, 1, 2))  # undirected: the pair both ways
    hypothesis = raw_fields(vector, 4)["hypothesis"]
    assert hypothesis[1, 2] and hypothesis[2, 1] and hypothesis.sum() == 2
    state, vector, mask, *_ = codec.step(state, _edit(codec, 2, 1))  # toggled back
    assert not raw_fields(vector, 4)["hypothesis"].any()
    before = jax.device_get((state, vector, mask))
    for action, code in ((_edit(codec, 2, 2), 4), (codec.num_actions, 3), (-1, 3)):
        new, vector_n, mask_n, reward, terminated, _, error = codec.step(state, action)
        assert int(error) == code and float(reward) == 0.0 and not terminated
        assert all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(jax.device_get((new, vector_n, mask_n))),
                                                        jax.tree_util.tree_leaves(before)))
    spent = dataclasses.replace(state, edits_left=np.int32(0))
    _, vector, mask = codec._view(spent)
    assert not np.asarray(mask)[5:].any() and np.asarray(mask)[:5].all()
    new, *_, error = codec.step(spent, _edit(codec, 0, 1))
    assert int(error) == EDITS_SPENT and not raw_fields(codec._view(new)[1], 4)["hypothesis"].any()


def test_the_gymnasium_flat_env_takes_the_observation_setting():
    env = gym.make("luca_gym/DagDiscoveryFlat-v0", observation="raw", n_nodes=4, n_states=3)
    obs, info = env.reset(seed=0)
    assert obs.shape == (4 * 4 + 5 * 4 + 2,) and env.action_space.n == 4 + 1 + 16
    obs, reward, terminated, truncated, info = env.step(0)
    obs, reward, terminated, truncated, info = env.step(4 + 1 + 0 * 4 + 1)
    assert info["error_code"] == 0 and reward == 0.0 and obs[1] == 1.0
    with pytest.raises(ValueError, match="observation"):
        gym.make("luca_gym/DagDiscoveryFlat-v0", observation="states")
    # The batched flat env takes the codec's settings and the config's (the factory's signature names them).
    envs = gym.make_vec("luca_gym/RelationalDiscoveryFlat-v0", num_envs=2, observation="raw", n_houses=4, pool_size=8)
    assert envs.observation_space.shape == (2, 16 + 5 * 4 + 2) and envs.single_action_space.n == 21
    with pytest.raises(ValueError, match="n_nodes"):
        gym.make_vec("luca_gym/RelationalDiscoveryFlat-v0", num_envs=2, n_nodes=4)


# -- the raw teacher and the host session --------------------------------------------
@pytest.mark.parametrize("world", ["dag", "relational"])
def test_the_raw_teacher_stops_where_systematic_stops(world):
    make, size = (dag_codec, {"n_nodes": 6, "n_states": 3}) if world == "dag" else (relational_codec, {"n_houses": 6})
    raw, evidence = make(observation="raw", **size), make(**size)
    seeds = range(40)
    ours = jax.device_get(play_batch(raw_systematic_policy(raw), None, session_keys(seeds), raw, raw.instances(seeds),
                                     raw.max_calls))
    theirs = jax.device_get(play_batch(systematic_policy(evidence), None, session_keys(seeds), evidence,
                                       evidence.instances(seeds), evidence.max_calls))
    assert (ours["success"] == 1).all()
    assert np.array_equal(ours["iterations"], theirs["iterations"])


@pytest.mark.parametrize("world, play", [("dag", play_dag), ("relational", play_relational)])
def test_a_raw_learner_plays_the_host_session_as_the_batch(world, play):
    """A flat policy on the raw codec in the harness (its edits kept by the
    codec's host form, the tool calls carrying its matrix) takes the calls
    of the batched session: the same scores."""
    settings = {"n_nodes": 5, "n_states": 3} if world == "dag" else {"n_houses": 5}
    codec = (dag_codec if world == "dag" else relational_codec)(observation="raw", **settings)
    teacher = jax.jit(raw_systematic_policy(codec))
    policy = FlatPolicy("raw-teacher", lambda v, m, rng: int(teacher(None, None, v[None], m[None])[0]), codec)
    seeds = [0, 1, 2, 3]
    batch = jax.device_get(play_batch(raw_systematic_policy(codec), None, session_keys(seeds), codec,
                                      codec.instances(seeds), codec.max_calls))
    for i, seed in enumerate(seeds):
        record = play(policy, seed, **settings)
        assert record["scores"] == {k: float(v[i]) if k in ("success", "edge_f1") else int(v[i])
                                    for k, v in batch.items() if k != "return"}


# -- one compile per config; settings refused by name --------------------------------
def test_the_raw_codec_compiles_once_per_config():
    codec = dag_codec(n_nodes=5, n_states=3, observation="raw")
    teacher = raw_systematic_policy(codec)
    first, other = F.make_pool(codec, [10_000, 10_001]), F.make_pool(codec, [20_000, 20_001])
    jax.block_until_ready(F.flat_rollout(teacher, None, jax.random.PRNGKey(0), codec, first, 4, 40))
    with count_traces() as traced:
        jax.block_until_ready(F.flat_rollout(teacher, None, jax.random.PRNGKey(1), codec, other, 4, 40))
        jax.block_until_ready(F.flat_rollout(teacher, None, jax.random.PRNGKey(2), dag_codec(n_nodes=5, n_states=3,
                                                                                              observation="raw"), first, 4, 40))
    assert traced == []


@pytest.mark.parametrize("settings, name", [({"observation": "states"}, "observation"), ({"observation": 1}, "observation"),
                                            ({"intervention_cost": -1.0}, "intervention_cost")])
def test_a_bad_setting_is_refused_by_name(settings, name):
    with pytest.raises(ValueError, match=name):
        dag_codec(**settings)
    with pytest.raises(ValueError, match=name):
        PPOConfig("dag", settings)
    with pytest.raises(ValueError, match="observation"):
        raw_systematic_policy(dag_codec())


def test_ppo_config_carries_the_observation():
    config = PPOConfig("relational", {"observation": "raw", "n_houses": 4}, steps=256, num_envs=8)
    assert config.observation == "raw" and config.make_env() == relational_codec(n_houses=4, observation="raw")
    assert PPOConfig("dag", {}).observation == "evidence"
    assert RelationalConfig(n_houses=4) == config.make_env().config


# -- raw_actions="commit": commit what the last intervention showed, then call --------
def _commit(codec, a) -> int:
    """The flat action that commits, then takes action a (intervenes on node a; a = N submits)."""
    return codec.config.n + 1 + a


def test_commit_sizes_mask_and_settings():
    codec = dag_codec(observation="raw", raw_actions="commit")
    n = 10
    assert (codec.num_actions, codec.observation_size) == (2 * n + 2, n * n + 5 * n + 2)
    assert codec.describe() == "dag N=10 S=5 raw commit" and dag_codec(**codec.settings()) == codec
    assert dag_codec(observation="raw").raw_actions == "toggle"  # the default layout is the toggles, as before
    state, vector, mask = codec.open(_one(codec.instances([5])))
    assert np.asarray(mask).all()
    spent = dataclasses.replace(state, session=dataclasses.replace(state.session, budget_left=np.int32(0)))
    mask = np.asarray(codec._view(spent)[2])
    assert mask.tolist() == ([False] * n + [True]) * 2  # the commit goes with the call it precedes
    with pytest.raises(ValueError, match="raw_actions"):
        dag_codec(observation="raw", raw_actions="rows")


@pytest.mark.parametrize("world", ["dag", "relational"])
def test_a_commit_writes_what_the_last_intervention_showed(world):
    codec = (dag_codec(n_nodes=6, n_states=3, observation="raw", raw_actions="commit", proposals="final") if world == "dag"
             else relational_codec(n_houses=6, observation="raw", raw_actions="commit", proposals="final"))
    n = 6
    state, vector, mask = codec.open(_one(codec.instances([11])))
    state, vector, *_, error = codec.step(state, _commit(codec, 0))  # nothing seen yet: the commit writes nothing
    assert int(error) == 0 and not raw_fields(vector, n)["hypothesis"].any() and int(state.edits_left) == edit_budget(n)
    want = np.zeros((n, n), bool)
    for node, following in ((2, 4), (4, 1), (1, 3)):
        state, vector, *_ = codec.step(state, node)
        f = raw_fields(vector, n)
        seen = np.asarray(f["changed"]) & (np.arange(n) != node)
        want[node] |= seen
        if world == "relational":
            want[:, node] |= seen
        edits = int(state.edits_left)
        state, vector, *_, error = codec.step(state, _commit(codec, following))
        assert int(error) == 0 and int(state.last) == following
        assert np.array_equal(raw_fields(vector, n)["hypothesis"], want)
        assert int(state.edits_left) == edits - int(seen.any())
    truth = np.asarray(codec.instances([11]).adjacency[0])
    assert not (want & ~truth).any()  # one intervention shows children only (dag) or neighbours (relational)


def test_a_refused_commit_commits_nothing():
    codec = dag_codec(n_nodes=5, n_states=3, observation="raw", raw_actions="commit", proposals="final")
    state = codec.open(_one(codec.instances([7])))[0]
    state = codec.step(state, 0)[0]
    spent = dataclasses.replace(state, session=dataclasses.replace(state.session, budget_left=np.int32(0)))
    for before, action, code in ((spent, _commit(codec, 1), 1), (state, codec.num_actions, 3), (state, -1, 3)):
        leaves = jax.tree_util.tree_leaves(jax.device_get(codec._view(before)))
        new, vector, mask, reward, terminated, _, error = codec.step(before, action)
        assert int(error) == code and float(reward) == 0.0 and not terminated
        assert all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(jax.device_get((new, vector, mask))), leaves))
    ended = codec.step(state, _commit(codec, 5))[0]  # commit, then submit: ends the session
    assert bool(ended.ended) and raw_fields(codec._view(ended)[1], 5)["hypothesis"].any()
    new, *_, error = codec.step(ended, _commit(codec, 1))
    assert int(error) == 2 and np.array_equal(new.hypothesis, ended.hypothesis)


@pytest.mark.parametrize("world, play", [("dag", play_dag), ("relational", play_relational)])
def test_the_commit_teacher_solves_and_plays_the_host_session_as_the_batch(world, play):
    settings = {"n_nodes": 5, "n_states": 3} if world == "dag" else {"n_houses": 5}
    codec = (dag_codec if world == "dag" else relational_codec)(observation="raw", raw_actions="commit", **settings)
    toggles = (dag_codec if world == "dag" else relational_codec)(observation="raw", **settings)
    seeds = list(range(24))
    batch = jax.device_get(play_batch(raw_systematic_policy(codec), None, session_keys(seeds), codec,
                                      codec.instances(seeds), codec.max_calls))
    theirs = jax.device_get(play_batch(raw_systematic_policy(toggles), None, session_keys(seeds), toggles,
                                       toggles.instances(seeds), toggles.max_calls))
    assert (batch["success"] == 1).all() and np.array_equal(batch["iterations"], theirs["iterations"])
    teacher = jax.jit(raw_systematic_policy(codec))
    policy = FlatPolicy("commit-teacher", lambda v, m, rng: int(teacher(None, None, v[None], m[None])[0]), codec)
    for i, seed in enumerate(seeds[:3]):
        record = play(policy, seed, **settings)
        assert record["scores"] == {k: float(v[i]) if k in ("success", "edge_f1") else int(v[i])
                                    for k, v in batch.items() if k != "return"}


_COMMIT = dag_codec(n_nodes=4, n_states=3, observation="raw", raw_actions="commit", proposals="final")
_commit_step = jax.jit(_COMMIT.step)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 2), actions=st.lists(st.integers(-3, 13), min_size=1, max_size=14))
def test_any_commit_actions_refused_change_nothing_and_the_matrix_only_grows(seed, actions):
    """Whatever an agent sends (indices out of [0, K) included): a refused
    action changes nothing and earns nothing, an accepted one never switches
    a pair of the learner's matrix off, and every pair it holds is one an
    intervention showed changing (a commit writes what was seen, nothing else)."""
    state = _COMMIT.open(_one(_COMMIT.instances([seed])))[0]
    for action in actions:
        before = jax.device_get(state)
        state, vector, mask, reward, terminated, _, error = _commit_step(state, action)
        if int(error):
            assert float(reward) == 0.0
            assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(jax.device_get(state)),
                                                             jax.tree_util.tree_leaves(before)))
        else:
            assert not (before.hypothesis & ~np.asarray(state.hypothesis)).any()
    truth = np.asarray(state.session.adjacency)
    assert not (np.asarray(state.hypothesis) & ~truth).any()  # one intervention shows children only
