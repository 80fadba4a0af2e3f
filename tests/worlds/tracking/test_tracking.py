"""The tracking world (Auto-Discovery-Bench's long-trajectory probe): the world
API test, instances and the change rule against numpy, the scorer, the
settings' errors, hostile input (property test), the baselines run through
the harness, and the report's Table 2 and Figure 5 from those runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from luca_gym import harness, worlds
from luca_gym.testing import check_world, count_traces
from luca_gym.worlds.tracking import baselines, core, report
from luca_gym.worlds.tracking.config import TrackingConfig
from luca_gym.worlds.tracking.tools import COT_INSTRUCTION, TrackingToolSession

WORLD = worlds.get("luca_gym.worlds.tracking:WORLD")  # the entry-point form registers it

SMALL = {"length": 4, "n_nodes": 3}  # the check_world and hostile-input shape: Y is 3 x 3
TOOL_CHECKS = ["registry", "return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace", "text-env",
               "mcp", "core", "check_env"]


def numpy_changes(x) -> np.ndarray:
    """Y recomputed cell by cell, apart from the core: 1 where a node's colour differs from the step before."""
    x = np.asarray(x)
    return np.array([[int(x[i, j] != x[i + 1, j]) for j in range(x.shape[1])] for i in range(x.shape[0] - 1)])


def test_check_world_passes_under_cot():
    """The chain-of-thought condition (a reason argument first); the default settings are tests/test_api.py's."""
    assert check_world(WORLD, settings={**SMALL, "cot": True}) == TOOL_CHECKS


def test_the_world_declares_its_keys_scores_and_gym_id():
    assert (WORLD.name, WORLD.headline, WORLD.gym_ids()) == (
        "tracking", "exact", {"luca_gym/StateTracking-v0": ("luca_gym.envs.core:CoreEnv", {"world": "tracking"}),
                              "luca_gym/StateTrackingTools-v0": ("luca_gym.envs.tools:ToolsEnv", {"world": "tracking"})})
    assert WORLD.session_keys == ("length", "n_nodes", "n_colors", "change_prob", "cot", "seed")
    assert list(WORLD.baseline_policies()) == ["systematic", "forgetful", "random"]
    assert TrackingConfig() == TrackingConfig(10, 5, 3, 0.3, False)


@pytest.mark.parametrize("settings_, message", [
    ({"length": 1}, "length: 1 not allowed; an integer in 2..64"),
    ({"length": 65}, "length: 65 not allowed; an integer in 2..64"),
    ({"length": 3.0}, "length: 3.0 not allowed; an integer in 2..64"),
    ({"n_nodes": 0}, "n_nodes: 0 not allowed; an integer in 1..64"),
    ({"n_colors": 1}, "n_colors: 1 not allowed; an integer in 2..16"),
    ({"n_colors": True}, "n_colors: True not allowed"),
    ({"change_prob": 1.5}, r"change_prob: 1.5 not allowed; a number in \[0, 1\]"),
    ({"change_prob": math.nan}, "change_prob: nan not allowed"),
    ({"change_prob": "0.3"}, "change_prob: '0.3' not allowed"),
    ({"cot": "yes"}, "cot: 'yes' is not a bool; allowed True or False"),
])
def test_a_bad_setting_is_refused_by_name(settings_, message):
    with pytest.raises(ValueError, match=message):
        TrackingConfig(**settings_)


def test_a_bad_session_option_or_seed_is_refused_by_name():
    with pytest.raises(ValueError, match="settings: unknown key 'colours'; allowed 'length'"):
        TrackingToolSession(0, colours=3)
    with pytest.raises(ValueError, match="seed: -1 out of range"):
        TrackingToolSession(-1, **SMALL)
    with pytest.raises(ValueError, match="n_colors: 1 not allowed"):
        harness.plan_world(WORLD, ["systematic"], [0], n_colors=1)


def test_instances_are_pure_functions_of_seed_and_settings():
    config = TrackingConfig(length=6, n_nodes=4, n_colors=4)
    x = np.asarray(core.instance(3, config))
    assert x.shape == (6, 4) and x.dtype == np.int32 and x.min() >= 0 and x.max() <= 3
    assert (x == np.asarray(core.instance(3, config))).all()
    assert TrackingToolSession(3, **config.settings()).observations() == x.tolist()
    xs = {np.asarray(core.instance(s, config)).tobytes() for s in range(12)}
    assert len(xs) == 12  # different seeds, different trajectories
    # Both 32-bit words of a seed count: seeds equal in the low word differ.
    high, low = 2**63 - 1, (2**63 - 1) & 0xFFFFFFFF
    assert (np.asarray(core.instance(high, config)) != np.asarray(core.instance(low, config))).any()


def test_a_change_happens_at_its_rate_and_always_picks_another_colour():
    big = TrackingConfig(length=64, n_nodes=64, n_colors=3, change_prob=0.3)
    x = np.asarray(core.instance(0, big))
    y = numpy_changes(x)
    assert abs(y.mean() - 0.3) < 0.03  # 4032 cells: std of the mean 0.007
    step = (x[1:] - x[:-1]) % 3
    assert set(np.unique(step[y == 1])) == {1, 2} and abs((step[y == 1] == 1).mean() - 0.5) < 0.05
    assert abs(np.bincount(x[0], minlength=3) / 64 - 1 / 3).max() < 0.2
    never = np.asarray(core.instance(0, TrackingConfig(length=64, n_nodes=64, change_prob=0.0)))
    always = np.asarray(core.instance(0, TrackingConfig(length=64, n_nodes=64, change_prob=1.0, n_colors=2)))
    assert not numpy_changes(never).any() and numpy_changes(always).all()


@pytest.mark.parametrize("seed", range(6))
def test_the_core_scores_a_guess_as_numpy_does(seed):
    config = TrackingConfig(length=6, n_nodes=4)
    x = np.asarray(core.instance(seed, config))
    y = numpy_changes(x)
    assert (np.asarray(core.changes(x)) == y).all()
    rng = np.random.default_rng(seed)
    # The truth, a guess with one row wrong in one cell, and a random guess.
    near = y.copy()
    near[seed % 5, seed % 4] ^= 1
    for guess in (y, near, rng.integers(0, 2, y.shape)):
        state, reward, error = core.step(core.reset(x, config), core.Action.make(core.SUBMIT, config, guess), config)
        rows = (guess == y).all(axis=1).astype(float)
        assert int(error) == 0 and bool(state.ended)
        scores = core.scores(state)
        assert scores["position_correct"] == list(rows)
        assert (scores["exact"], scores["trajectory_accuracy"], scores["cell_accuracy"]) == pytest.approx(
            (float(rows.all()), rows.mean(), (guess == y).mean()))
        assert float(reward) == float(rows.all())  # the return is the headline


def test_a_session_ends_once_and_a_call_after_its_end_is_refused():
    session = TrackingToolSession(5, **SMALL)
    y = numpy_changes(session.observations()).tolist()
    answer = session.call("submit_changes", {"changes": y})
    assert answer["ended"] and answer["scores"]["exact"] == 1.0 and answer["submissions_left"] == 0
    again = session.call("submit_changes", {"changes": [[0] * 3] * 3})
    assert again == {"error": "the session has ended", "submissions_left": 0}
    assert session.call("get_observations", {}) == again
    assert session.scores["exact"] == 1.0 and session.total_reward == 1.0
    ended = TrackingToolSession(5, **SMALL)
    assert ended.call("end", {})["scores"] == {"exact": 0.0, "trajectory_accuracy": 0.0, "cell_accuracy": 0.0,
                                                "position_correct": [0.0, 0.0, 0.0]}
    assert ended.ended and ended.total_reward == 0.0


def test_the_prompt_shows_x_and_the_cot_condition_adds_the_papers_instruction():
    plain, cot = TrackingToolSession(2, **SMALL), TrackingToolSession(2, **SMALL, cot=True)
    for row in plain.observations():
        assert json.dumps(row) in plain.system_prompt()
    assert COT_INSTRUCTION == "Please also include the reason for your answer"
    assert COT_INSTRUCTION in cot.system_prompt() and COT_INSTRUCTION not in plain.system_prompt()
    reason = {"changes": [[0] * 3] * 3, "reason": "none changes"}
    assert "reason" in plain.validate("submit_changes", reason) and cot.validate("submit_changes", reason) is None


def test_one_compiled_step_serves_every_instance_and_setting_of_a_shape():
    first = TrackingToolSession(0, length=5, n_nodes=2)
    first.call("get_observations", {})
    first.call("submit_changes", {"changes": [[0, 0]] * 4})
    with count_traces() as traced:
        other = TrackingToolSession(9, length=5, n_nodes=2, n_colors=7, change_prob=0.6, cot=True)
        other.call("get_observations", {})
        other.call("submit_changes", {"changes": [[1, 0]] * 4, "reason": "r"})
    assert traced == [] and other.ended


# -- hostile input: refused, free, changes nothing, and says nothing of Y ----------------------
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=20,
)
CELL = st.sampled_from([0, 1, 1, 0, 2, -1, 0.5, "1", True, None, [0], 1e300])
NEAR_MISS = st.integers(0, 5).flatmap(lambda r: st.lists(st.lists(CELL, min_size=0, max_size=5), min_size=r, max_size=r))
HOSTILE = st.one_of(
    st.tuples(st.just("submit_changes"), st.builds(lambda c: {"changes": c}, NEAR_MISS | JUNK)),
    st.tuples(st.just("submit_changes"), st.dictionaries(st.text(max_size=10), JUNK, max_size=3)),
    st.tuples(st.sampled_from(["submit_changes", "get_observations", "end"]),
              st.builds(lambda n: {"changes": [[0] * 3] * 3, "x" * n: 1}, st.integers(1, 3))),
    st.tuples(st.sampled_from(["submit_changes", "end"]), JUNK.filter(lambda v: not isinstance(v, dict)) | st.text(max_size=20)),
    st.tuples(st.just("submit_changes"), st.builds(lambda n: '{"changes": "' + "1" * n + '"}', st.integers(70_000, 80_000))),
    st.tuples(JUNK.filter(lambda v: v not in ("submit_changes", "get_observations", "end")), st.just({})),
)


@pytest.fixture(scope="module")
def two_instances():
    """Two open sessions of the small shape whose truths differ."""
    a, b = TrackingToolSession(0, **SMALL), TrackingToolSession(1, **SMALL)
    assert (numpy_changes(a.observations()) != numpy_changes(b.observations())).any()
    return a, b


def _snapshot(session) -> tuple:
    s = session.state
    return (session.status(), session.ended, session.scores, session.total_reward,
            *(np.asarray(v).tobytes() for v in (s.observations, s.ended, s.exact, s.trajectory_accuracy, s.cell_accuracy,
                                                  s.position_correct)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(call=HOSTILE)
def test_hostile_calls_are_refused_free_unchanged_and_reveal_nothing(two_instances, call):
    name, arguments = call
    a, b = two_instances
    assume(a.validate(name, arguments) is not None)  # a well-formed answer is not hostile
    before = _snapshot(a)
    answer_a, answer_b = a.call(name, arguments), b.call(name, arguments)
    assert set(answer_a) == {"error", "submissions_left"} and answer_a["submissions_left"] == 1
    assert _snapshot(a) == before  # changed nothing, cost nothing
    assert answer_a == answer_b  # the same refusal on an instance with another Y: it says nothing of Y


# -- the baselines through the harness, and the report from their records ------------------------
LENGTHS = (3, 12)
SEEDS = range(5)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The three baselines x M in LENGTHS x CoT off and on x SEEDS, run by the harness's sweep."""
    out = str(tmp_path_factory.mktemp("tracking"))
    specs = harness.plan_world(WORLD, list(WORLD.baseline_policies()), SEEDS, length=list(LENGTHS), cot=[False, True])
    harness.sweep(specs, out, lambda name: harness.make_runner(name, world=WORLD.name))
    return out, harness.load_sessions(out)


def test_the_baselines_score_as_designed(swept):
    _, records = swept
    assert len(records) == 3 * len(LENGTHS) * 2 * len(SEEDS)
    by = harness.group(records, "agent", "length")
    for r in records:
        assert r["world"] == "tracking" and r["return"] == r["scores"]["exact"] and r["end_reason"] == "end"
        assert len(r["scores"]["position_correct"]) == r["length"] - 1 and r["instance_id"] == f"tracking_{r['seed']:08d}"
    assert all(r["scores"]["exact"] == 1.0 for m in LENGTHS for r in by[("systematic", m)])
    assert all(r["scores"]["exact"] == 0.0 for m in LENGTHS for r in by[("random", m)])  # 2**-10 at M=3, N=5
    assert 0.3 < np.mean([r["scores"]["cell_accuracy"] for m in LENGTHS for r in by[("random", m)]]) < 0.7
    # Forgetful: exact while M-1 <= K = 4 transitions, then right on the first K positions only.
    assert all(r["scores"]["exact"] == 1.0 for r in by[("forgetful", 3)])
    late = report.position_accuracy(by[("forgetful", 12)])
    assert baselines.FORGETFUL_ROWS == 4 and (late[:4] == 1.0).all() and late[4:].mean() < 0.5
    # The CoT condition gave every submission a reason.
    cot_calls = [r["calls"][-1] for r in records if r["cot"]]
    assert all(c["call"] == "submit_changes" and c["arguments"]["reason"] for c in cot_calls)


def test_the_report_writes_table_2_and_figure_5(swept):
    from luca_gym.results.report import write_report

    out, records = swept
    text = write_report(out)
    assert "# State tracking results" in text and f"{len(records)} sessions" in text
    assert "## Table 2: accuracy by trajectory length (N=5, 3 colours, change_prob=0.3)" in text
    assert "| agent | CoT | M=3 | M=12 |" in text
    assert "| systematic | no | 1.000 / 1.000 (5) | 1.000 / 1.000 (5) |" in text
    assert "| random | yes | 0.000 / " in text
    forgetful = harness.group(records, "agent", "cot", "length")[("forgetful", False, 12)]
    at = np.mean([r["scores"]["trajectory_accuracy"] for r in forgetful])
    assert f"| forgetful | no | 1.000 / 1.000 (5) | 0.000 / {at:.3f} (5) |" in text
    assert "## Figure 5: accuracy by trajectory position (M=12)" in text and "](tracking_positions.png)" in text
    with open(f"{out}/{report.FIGURE}", "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_the_gymnasium_env_scores_one_submission():
    """``luca_gym/StateTracking-v0``: X in, Y out; the one step ends it, its reward the exact score."""
    import gymnasium as gym

    env = gym.make("luca_gym/StateTracking-v0", **SMALL)
    x, info = env.reset(options={"instance_seed": 7})
    assert np.array_equal(x, np.asarray(core.instance(7, TrackingConfig(**SMALL))))
    _, reward, ended, truncated, info = env.step((x[1:] != x[:-1]).astype(np.int8))
    assert (reward, ended, truncated, info["scores"]["exact"]) == (1.0, True, False, 1.0)
    with pytest.raises(ValueError, match="(?s)action: .* not allowed; an element of MultiBinary"):
        env.step(np.full((3, 3), 2))
    with pytest.raises(ValueError, match="not allowed"):
        env.step(np.zeros((2, 3), np.int8))


def test_the_session_figure_draws_a_submission_beside_the_trajectory(tmp_path):
    x = np.asarray(core.instance(0, TrackingConfig(length=12, n_nodes=5)))
    guess = baselines.Forgetful().answer(x)
    report.figure_session(x, guess, str(tmp_path / "t.png"), agent="forgetful")
    png = (tmp_path / "t.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(png) < 150_000
