"""The curriculum (luca_gym.curriculum): levels per attribute checked by the
world's config, moved by the caller or by the success-rate rule, feeding the
functional env (a codec per level) and a Gymnasium env (rebuilt at reset
when the level changes). Small N, few episodes."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pytest

from luca_gym import functional as F
from luca_gym.curriculum import Curriculum, CurriculumWrapper

N = 20  # each level compiles once


def budgets(**kw) -> Curriculum:
    return Curriculum({"budget": [None, 6, 3]}, world="luca", defaults={"tier": "easy", "mode": "healthy", "n_genes": N}, **kw)


def test_levels_move_per_attribute_and_globally():
    c = Curriculum({"tier": ["easy", "medium", "hard"], "budget": [None, 8]}, world="luca", defaults={"mode": "disease", "n_genes": 20})
    assert c.num_levels == 3 and c.level == 0
    assert c.settings() == {"mode": "disease", "n_genes": 20, "tier": "easy", "budget": None}
    assert c.increment("budget") and c.settings()["budget"] == 8 and c.level == 0  # tier still at level 0
    assert not c.increment("budget")  # its last level: nothing moves
    assert c.increment() and c.settings() == {"mode": "disease", "n_genes": 20, "tier": "medium", "budget": 8}
    assert c.level == 1
    c.set_level(2)
    assert c.settings()["tier"] == "hard" and c.settings()["budget"] == 8  # each at most its last
    assert c.decrement("tier") and c.settings()["tier"] == "medium"
    c.set_level(0)
    assert c.levels == {"tier": 0, "budget": 0}


@pytest.mark.parametrize("kwargs, words", [
    ({"attributes": {"tier": ["easy", "extreme"]}}, ["tier", "'extreme'"]),
    ({"attributes": {"budget": [None, 0]}}, ["budget", "0 not allowed"]),
    ({"attributes": {"budget": [8.5]}}, ["budget", "8.5"]),
    ({"attributes": {"n_genes": [20, 3]}}, ["n_genes", "3"]),
    ({"attributes": {}}, ["attributes", "non-empty"]),
    ({"attributes": {"tier": []}}, ["attributes", "non-empty list"]),
    ({"attributes": {"tier": "easy"}}, ["attributes", "non-empty list"]),
    ({"attributes": {"tier": ["easy"]}, "defaults": {"tier": "hard"}}, ["tier", "also an attribute"]),
    ({"attributes": {"tier": ["easy"]}, "advance_at": 1.5}, ["advance_at", "(0, 1]"]),
    ({"attributes": {"tier": ["easy"]}, "advance_at": 0}, ["advance_at"]),
    ({"attributes": {"tier": ["easy"]}, "window": 0}, ["window"]),
    ({"attributes": {"tier": ["easy"]}, "success_score": float("nan")}, ["success_score"]),
    ({"attributes": {"tier": ["easy"]}, "world": "nowhere"}, ["nowhere"]),
])
def test_bad_schedules_are_refused_when_made(kwargs, words):
    with pytest.raises(ValueError) as err:
        Curriculum(**{"world": "luca", **kwargs})
    for w in words:
        assert w in str(err.value)


def test_bad_calls_change_nothing():
    c = budgets()
    for bad in (-1, 3, 1.0, True, "1"):
        with pytest.raises(ValueError, match="level"):
            c.set_level(bad)
    with pytest.raises(ValueError, match="attribute: 'tier' unknown; allowed budget"):
        c.increment("tier")
    with pytest.raises(ValueError, match="scores"):
        c.record([0.5, float("nan")])
    with pytest.raises(ValueError, match="scores"):
        c.record(["high"])
    with pytest.raises(ValueError, match="done"):
        c.record([0.5, 0.5], done=[1, 0])
    with pytest.raises(ValueError, match="done"):
        c.record([0.5, 0.5], done=np.array([True]))
    assert c.levels == {"budget": 0} and c.success_rate() is None


def test_the_success_rate_rule():
    """The level goes up once a full window's success rate reaches the bar;
    the window then starts afresh, and the last level stays."""
    c = budgets(advance_at=0.75, success_score=0.5, window=4)
    assert not c.record([0.1, 0.9, 0.9])  # not a full window yet
    assert not c.record(0.1)  # 2 of 4
    assert c.level == 0 and c.success_rate() == 0.5
    assert c.record(0.9)  # the last 4: 0.9, 0.9, 0.1, 0.9 -> 3 of 4
    assert c.level == 1 and c.settings()["budget"] == 6 and c.success_rate() is None
    # done masks: only the ended episodes count
    assert not c.record(np.array([0.9, 0.0, 0.9]), done=np.array([True, False, True]))
    assert c.success_rate() == 1.0
    assert c.record([0.9, 0.9]) and c.settings()["budget"] == 3
    assert not c.record([1.0] * 8) and c.level == 2  # the last level stays
    manual = budgets()
    assert not manual.record([1.0] * 100) and manual.level == 0  # no rule: only the caller moves levels


def test_functional_env_gets_a_codec_per_level():
    """A training loop over the functional env: the codec of the current
    level, a rollout, the ended sessions' scores fed back; the next level's
    codec has its budget."""
    c = budgets(advance_at=0.5, success_score=0.0, window=4)
    env = c.make_env()
    assert env.params.budget == F.make_env("easy", N, "healthy", world="luca").params.budget
    pool = F.make_pool(env, np.arange(100, 104))
    out = F.flat_rollout(F.masked_random, None, jax.random.PRNGKey(0), env, pool, 8, 40, trajectories=True)
    t = out["trajectory"]
    assert int(out["episodes"]) >= 4
    assert c.record(np.asarray(t["score"]), done=np.asarray(t["done"]))
    env = c.make_env()
    assert env.params.budget == 6 and env.params.n_genes == N
    assert c.make_env(analyst="constant").analyst == "constant"


def test_gymnasium_wrapper_rebuilds_at_reset_when_the_level_changes():
    built = []

    def make(**settings):
        built.append(settings)
        return gym.make("luca_gym/LucaFlat-v0", **settings)

    c = Curriculum({"budget": [None, 6]}, world="luca", defaults={"tier": "easy", "mode": "healthy", "n_genes": N},
                   advance_at=1.0, success_score=-1.0, window=2)  # every episode succeeds: two episodes a level
    env = CurriculumWrapper(c, make)
    levels, budgets_seen = [], []
    for episode in range(4):
        obs, info = env.reset(seed=episode)
        levels.append(info["curriculum_level"])
        budgets_seen.append(env.unwrapped.params.budget)
        done = False
        while not done:
            mask = info["action_mask"]
            obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(mask)[-1]))  # the last legal: end
            done = terminated or truncated
            assert env.observation_space.contains(obs)
    assert levels == [0, 0, 1, 1]
    assert budgets_seen[2:] == [6, 6]
    assert [b["budget"] for b in built] == [None, 6]  # rebuilt once per level, not per episode


def test_gymnasium_wrapper_by_id_and_bad_arguments():
    env = CurriculumWrapper(Curriculum({"n_genes": [N]}, world="luca", defaults={"tier": "easy"}), "luca_gym/LucaFlat-v0")
    obs, info = env.reset(seed=0)
    assert env.unwrapped.params.n_genes == N and info["curriculum_level"] == 0
    with pytest.raises(ValueError, match="curriculum"):
        CurriculumWrapper({"tier": ["easy"]}, "luca_gym/LucaFlat-v0")
    with pytest.raises(ValueError, match="make"):
        CurriculumWrapper(budgets(), 3)
