"""A world written as config + core + tool table only (``tests/coin_world.py``)
gets every front end from the generic layers: the Gymnasium env
(:class:`luca_gym.envs.core.CoreEnv`), the tool session
(:class:`luca_gym.tools.table.TableToolSession`, its schemas built from the
handlers' signatures), MCP, the text env, the harness and the report, and
passes ``check_world``. Also the config base (:mod:`luca_gym.config`)."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Literal

import gymnasium as gym
import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coin_world
from luca_gym import harness, worlds
from luca_gym.protocol import World
from luca_gym.config import ConfigBase, choice, int_in, number_in, probability, setting
from luca_gym.results.report import write_report
from luca_gym.testing import check_world, count_traces
from luca_gym.tools.table import Field, Refusal, per_session, schema_of, spec_of, tool

SMALL = {"n_coins": 5, "weighings": 2}
# Module level: the handlers' annotations are strings (postponed), read in the module's namespace.
Inputs = Annotated[dict[str, Annotated[float, Field(minimum=1)]], Field(keys=per_session(lambda s: s.names))]
Text = Annotated[str, Field(min_length=1, when=lambda c: c.on, required=True)]
ALL_CHECKS = ["registry", "return-equals-headline", "refusals", "schemas", "replay", "sealed", "no-retrace", "text-env", "mcp",
              "core", "flat", "flat-no-retrace", "check_env"]


def test_the_world_is_config_core_and_tool_table_only():
    source = inspect.getsource(coin_world)
    assert len(source.splitlines()) < 250
    world = worlds.get("coin")
    assert world is coin_world.WORLD and world.env is None and world.tools_env is None
    assert world.gym_ids() == {"luca_gym/CoinWeighing-v0": ("luca_gym.envs.core:CoreEnv", {"world": "coin"}),
                               "luca_gym/CoinWeighingFlat-v0": ("coin_world:CoinFlatEnv", {}),
                               "luca_gym/CoinWeighingTools-v0": ("luca_gym.envs.tools:ToolsEnv", {"world": "coin"})}
    # The session class names no rule: it has no dispatch, no refusal, no ending of its own.
    assert {"dispatch", "error", "record", "key_settings"}.isdisjoint(vars(coin_world.CoinToolSession))


@pytest.mark.parametrize("settings", [SMALL, pytest.param({}, marks=pytest.mark.slow)])
def test_check_world_passes(settings):
    assert check_world("coin", settings=settings) == ALL_CHECKS


def test_the_schemas_are_built_from_the_signatures():
    session = coin_world.CoinToolSession(0, **SMALL)
    coin = {"type": "integer", "minimum": 0, "maximum": 4}
    pan = {"type": "array", "items": coin, "maxItems": 5, "description": "the coins on this pan, by number"}
    assert session.tool_specs() == [
        {"name": "weigh", "description": "Costs one weighing: put coins on the two pans; the balance says which side is heavier.",
         "input_schema": {"type": "object", "properties": {"left": pan, "right": pan}, "required": ["left", "right"],
                          "additionalProperties": False}},
        {"name": "guess", "description": "Name the counterfeit coin (one of the 5); the session ends, scored 1 if right.",
         "input_schema": {"type": "object", "properties": {"coin": {**coin, "description": "the coin's number"}},
                          "required": ["coin"], "additionalProperties": False}},
        {"name": "end", "description": "End the session without a guess (score 0).",
         "input_schema": {"type": "object", "properties": {}, "required": [], "additionalProperties": False}},
    ]
    assert session.annotations("guess") == {"title": "Name the counterfeit (ends the session)", "readOnlyHint": False,
                                            "destructiveHint": True}


def test_the_schema_builder_reads_every_supported_annotation_and_refuses_others():
    @dataclass(frozen=True)
    class C:
        k: int = 3
        on: bool = False

    assert schema_of(Annotated[list[float], Field(items=lambda c: c.k)], C()) == {
        "type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
    assert schema_of(Literal["a", "b"], C()) == {"enum": ["a", "b"]}
    assert schema_of(bool | None, C()) == {"type": "boolean"}
    with pytest.raises(TypeError, match="not supported"):
        schema_of(dict, C())

    class Handlers:
        def f(self, x: int, note: Annotated[str, Field(max_length=9, when=lambda c: c.on)] = ""):
            """Uses {c.k} things.

            Not in the description."""

        def g(self, y):
            """No annotation."""

    assert spec_of(Handlers.f, C())["input_schema"]["properties"] == {"x": {"type": "integer"}}
    assert spec_of(Handlers.f, C(on=True))["input_schema"]["properties"]["note"] == {"type": "string", "maxLength": 9}
    assert spec_of(Handlers.f, C())["description"] == "Uses 3 things."
    with pytest.raises(TypeError, match="parameter 'y' has no type annotation"):
        spec_of(Handlers.g, C())


def test_the_schema_builder_reads_objects_named_per_session_and_descriptions_from_the_config():
    @dataclass(frozen=True)
    class C:
        k: int = 3
        on: bool = True

    session = SimpleNamespace(names=["mass", "time"])
    assert schema_of(Inputs, C(), session) == {
        "type": "object", "properties": {"mass": {"type": "number", "minimum": 1}, "time": {"type": "number", "minimum": 1}},
        "required": ["mass", "time"], "additionalProperties": False}
    with pytest.raises(TypeError, match="needs the session"):
        schema_of(Inputs, C())
    with pytest.raises(TypeError, match="property names"):
        schema_of(dict[str, int], C())

    class Handlers:
        @tool(description=lambda c: f"{c.k} things" + (", on" if c.on else ""), title="t")
        def f(self, inputs: Inputs, text: Text = ""):
            """Not the description."""

    spec = spec_of(Handlers.f, C(), session)
    assert spec["description"] == "3 things, on" and spec["input_schema"]["required"] == ["inputs", "text"]
    assert spec["input_schema"]["properties"]["text"] == {"type": "string", "minLength": 1}
    off = spec_of(Handlers.f, C(on=False), session)
    assert off["description"] == "3 things" and off["input_schema"]["required"] == ["inputs"]
    assert list(off["input_schema"]["properties"]) == ["inputs"] and Handlers.f.annotations == {"title": "t"}


def test_a_handler_refusal_costs_nothing_and_changes_nothing():
    class Refusing(coin_world.CoinToolSession):
        def guess(self, coin: int):
            """Refuses coin 0 before the core."""
            if coin == 0:
                raise Refusal("coin 0 is not offered")
            return coin_world.CoinToolSession.tools["guess"](self, coin)

        tools = {**coin_world.CoinToolSession.tools, "guess": guess}

    session = Refusing(3, **SMALL)
    before = jax.tree.map(np.asarray, session.state)
    assert session.call("guess", {"coin": 0}) == {"error": "coin 0 is not offered", "weighings_left": 2}
    assert not session.ended and session.total_reward == 0
    jax.tree.map(np.testing.assert_array_equal, before, jax.tree.map(np.asarray, session.state))


def test_the_core_refuses_by_its_rules_and_a_refusal_changes_nothing():
    session = coin_world.CoinToolSession(3, **SMALL)
    twice = session.call("weigh", {"left": [1, 1], "right": [2]})
    assert twice == {"error": "a coin is on the balance twice", "weighings_left": 2}
    assert session.call("weigh", {"left": [1], "right": [1]})["error"] == "a coin is on the balance twice"
    assert "reading" in session.call("weigh", {"left": [0], "right": [1]})
    assert "reading" in session.call("weigh", {"left": [2], "right": [3]})
    assert session.call("weigh", {"left": [0], "right": [1]}) == {"error": "no weighings left", "weighings_left": 0}
    assert session.total_reward == 0 and not session.ended
    counterfeit = int(coin_world.instance(3, session.config))
    answer = session.call("guess", {"coin": counterfeit})
    assert answer == {"ended": True, "end_reason": "end", "scores": {"found": 1.0, "weighings_left": 0}, "weighings_left": 0}
    assert session.call("end", {}) == {"error": "the session has ended", "weighings_left": 0}
    assert session.total_reward == 1.0 and session.record()["instance_id"] == "coin_00000003"
    assert session.key_settings() == SMALL


def test_the_balance_points_to_the_heavy_coin():
    config = coin_world.CoinConfig(**SMALL)
    for seed in range(6):
        heavy = int(coin_world.instance(seed, config))
        state = coin_world.reset(heavy, config)
        other = (heavy + 1) % config.n_coins
        for left, right, reading in (([heavy], [other], "left heavier"), ([other], [heavy], "right heavier"),
                                     ([other], [], "left heavier"), ([], [], "balance")):
            after, reward, error = coin_world.step(state, coin_world.Action.make(coin_world.WEIGH, config, left, right), config)
            assert int(error) == 0 and float(reward) == 0 and coin_world.READINGS[int(after.reading)] == reading


def test_one_compiled_step_serves_every_budget_and_instance():
    """weighings is traced (a leaf of the config's pytree), n_coins static (its structure)."""
    first = coin_world.CoinConfig(n_coins=7, weighings=2)
    state = coin_world.reset(coin_world.instance(0, first), first)
    coin_world.step(state, coin_world.Action.make(coin_world.WEIGH, first, [0], [1]), first)
    with count_traces() as traced:
        for seed, budget in ((1, 5), (2, 0), (3, 31)):
            config = coin_world.CoinConfig(n_coins=7, weighings=budget)
            state = coin_world.reset(coin_world.instance(seed, config), config)
            jax.block_until_ready(coin_world.step(state, coin_world.Action.make(coin_world.GUESS, config, coin=2), config))
    assert traced == []
    assert jax.tree_util.tree_leaves(first) == [2] and coin_world.CoinConfig.static_fields() == ("n_coins",)


def test_the_gymnasium_env_is_the_generic_one_over_the_core():
    env = gym.make("luca_gym/CoinWeighing-v0", render_mode="ansi", **SMALL)
    observation, info = env.reset(options={"instance_seed": 9})
    heavy = int(coin_world.instance(9, coin_world.CoinConfig(**SMALL)))
    assert observation == {"weighings_left": 2, "reading": 0} and info == {"instance_seed": 9}
    empty = np.zeros(5, np.int8)
    weigh = {"kind": 0, "left": np.eye(5, dtype=np.int8)[heavy], "right": empty, "coin": 0}
    observation, reward, terminated, truncated, info = env.step(weigh)
    assert observation["reading"] == 1
    assert (reward, terminated, truncated, info) == (0.0, False, False, {"error_code": 0, "error": None})
    assert env.render() == "weighings left 1; last reading: left heavier"
    for bad in ({"kind": 0}, {**weigh, "kind": 3}, "weigh", {**weigh, "left": np.full(5, 2)}):
        with pytest.raises(ValueError, match="not allowed; an element of Dict"):
            env.step(bad)
    assert env.unwrapped.state.weighings_left == 1  # the bad actions changed nothing
    _, reward, terminated, _, info = env.step({**weigh, "kind": 1, "coin": heavy})
    assert (reward, terminated, info["scores"]) == (1.0, True, {"found": 1.0, "weighings_left": 1})


_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 7), st.floats(allow_nan=True), st.text(max_size=4))
_ACTION = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=6), st.dictionaries(
    st.sampled_from(["kind", "left", "right", "coin", "other"]),
    st.one_of(_SCALAR, st.lists(st.integers(-1, 2), min_size=4, max_size=6)), max_size=5))


@settings(max_examples=40, deadline=None)
@given(action=_ACTION)
def test_any_agent_action_is_taken_or_refused_with_nothing_changed(action):
    """Hostile input at the Gymnasium boundary: an action is an element of the space (stepped by the core), or a
    ValueError that leaves the state as it was."""
    env = _ENV
    env.reset(options={"instance_seed": 1})
    before = jax.tree_util.tree_leaves(jax.device_get(env.unwrapped.state))
    try:
        env.step(action)
    except ValueError as error:
        assert "not allowed; an element of Dict" in str(error)
        after = jax.tree_util.tree_leaves(jax.device_get(env.unwrapped.state))
        assert all(np.array_equal(a, b) for a, b in zip(before, after))
    else:
        assert env.unwrapped.action_space.contains(action)


_ENV = gym.make("luca_gym/CoinWeighing-v0", **SMALL)


def test_the_harness_and_the_report_run_the_world(tmp_path):
    world = worlds.get("coin")
    specs = harness.plan_world(world, ["ternary-search"], range(6), n_coins=[9, 12], weighings=[1, 3])
    path = harness.sweep(specs, str(tmp_path), policy_factory=lambda agent: harness.make_runner(agent, world="coin"))
    lines = [json.loads(line) for line in open(path)]
    found = {(r["n_coins"], r["weighings"]): [] for r in lines}
    for r in lines:
        assert r["world"] == "coin" and r["return"] == r["scores"]["found"]
        found[(r["n_coins"], r["weighings"])].append(r["scores"]["found"])
    # Three weighings find one coin of up to 27; one weighing finds it only where its third is a single coin.
    assert found[(9, 3)] == found[(12, 3)] == [1.0] * 6 and sum(found[(12, 1)]) < 6
    text = write_report(path)
    assert "## coin" in text and "ternary-search" in text


def _pays_for_every_step(state, action, config):
    new, reward, error = coin_world.step(state, action, config)
    return new, reward + 0.5 * (error == 0), error


def _takes_anything(sample, config):
    return coin_world.Action.make(coin_world.END, config)


PAYS = SimpleNamespace(**{**vars(coin_world), "step": _pays_for_every_step})


@pytest.mark.parametrize("name, core, check", [("coin_pays", "PAYS", "return"), ("coin_wide", "WIDE", "outside the space")])
def test_check_world_catches_a_core_that_breaks_a_rule(name, core, check):
    """A core whose return is not its headline (it pays for every step taken), and one whose space takes anything."""
    world = World(name=name, version="1", gym_stem=name.title().replace("_", ""), summary="broken", config="coin_world:CoinConfig",
                  headline="found", core=f"test_core_world:{core}")
    with pytest.raises(AssertionError, match=f"check_world \\[core\\]: .*{check}"):
        check_world(world, settings=SMALL, gym_ids=False)


class _Anything(gym.spaces.Space):
    def contains(self, x):
        return True

    def sample(self, mask=None, probability=None):
        return None


WIDE = SimpleNamespace(**{**vars(coin_world), "action_space": lambda config: _Anything(), "to_action": _takes_anything})


class FirstTwo:
    """A reset/act policy: weigh coin 0 against coin 1, then name the heavier, or coin 2 where they balance."""

    def reset(self, config, seed):
        self.weighed = False

    def act(self, observation):
        if not self.weighed:
            self.weighed = True
            return {"tool": "weigh", "arguments": {"left": [0], "right": [1]}}
        return {"tool": "guess", "arguments": {"coin": {1: 0, 2: 2, 3: 1}[int(observation["reading"])]}}


def test_a_policy_plays_through_the_same_tool_session(tmp_path):
    """A reset/act policy's record (World.play, the generic loop) holds the tool session's transcript, as a tool agent's does."""
    world = worlds.get("coin")
    specs = harness.plan_world(world, ["test_core_world:FirstTwo"], range(8), n_coins=3, weighings=1)
    path = harness.sweep(specs, str(tmp_path), policy_factory=lambda agent: FirstTwo())
    lines = [json.loads(line) for line in open(path)]
    assert all(r["scores"]["found"] == 1.0 == r["return"] for r in lines)  # three coins: one weighing finds the heavy one
    assert [c["call"] for c in lines[0]["calls"]] == ["weigh", "guess"] and lines[0]["calls"][0]["weighings_left"] == 0
    agent_line = harness.run_tool_session(coin_world.TernarySearch(), specs[0])
    assert {k for k in lines[0]["calls"][0]} == {k for k in agent_line["calls"][0]}
    assert lines[0]["calls"][0]["result"] == agent_line["calls"][0]["result"]  # the same first call, the same answer
    with pytest.raises(RuntimeError, match="did not end the session within 1 calls"):
        coin_world.play(FirstTwo(), 0, max_calls=1, n_coins=3, weighings=1)


def test_the_config_base_checks_by_name_and_derives_its_settings():
    @dataclass(frozen=True)
    class Settings(ConfigBase):
        size: int = setting(4, int_in(1, 8), static=True)
        noise: float = setting(0.1, probability())
        scale: float = setting(1.0, number_in(0.5, 2))
        mode: str = setting("a", choice("a", "b"))

    assert Settings().settings() == {"size": 4, "noise": 0.1, "scale": 1.0, "mode": "a"}
    assert Settings(size=np.int64(3)).size == 3 and type(Settings(noise=1).noise) is float
    assert (Settings.static_fields(), Settings.traced_fields()) == (("size",), ("noise", "scale", "mode"))
    for bad, message in (({"size": 9}, "size: 9 not allowed; an integer in 1..8"),
                         ({"size": True}, "size: True not allowed"),
                         ({"noise": float("nan")}, r"noise: nan not allowed; a number in \[0, 1\]"),
                         ({"scale": "1"}, r"scale: '1' not allowed; a number in \[0.5, 2\]"),
                         ({"mode": "c"}, "mode: 'c' not allowed; one of 'a', 'b'")):
        with pytest.raises(ValueError, match=message):
            Settings(**bad)
    with pytest.raises(ValueError, match="a default is needed"):
        setting(__import__("dataclasses").MISSING, int_in(0, 1))


def test_the_flat_codec_is_the_core_over_its_action_table():
    """K = N(N-1)/2 weighings of one coin against another + N guesses; the mask is what the core would not refuse."""
    from luca_gym import functional as F

    codec = F.make_env(world="coin", **SMALL)
    assert (codec.num_actions, codec.observation_size, codec.headline) == (15, 2, "found")
    state, vector, mask = codec.open(jax.tree_util.tree_map(lambda x: x[0], codec.instances([4])))
    assert mask.all() and list(vector) == [0.0, 2.0]  # the view's leaves in key order: reading, weighings_left
    assert [list(b) for b in codec.observation_bounds] == [[0, 0], [3, 32]]
    heavy = int(coin_world.instance(4, codec.config))
    for index in (0, 1):  # two weighings spend the budget: every weighing is masked after them
        state, vector, mask, reward, terminated, truncated, error = codec.step(state, jax.numpy.int32(index))
        assert int(error) == 0 and not bool(terminated)
    assert not mask[:10].any() and mask[10:].all()
    for outside in (-1, 15):
        after, _, same, reward, _, _, error = codec.step(state, jax.numpy.int32(outside))
        assert int(error) == len(coin_world.ERRORS) and float(reward) == 0 and (same == mask).all()
    state, _, _, reward, terminated, _, error = codec.step(state, jax.numpy.int32(10 + heavy))
    assert (int(error), float(reward), bool(terminated), float(codec.score(state))) == (0, 1.0, True, 1.0)
    env = gym.make("luca_gym/CoinWeighingFlat-v0", **SMALL)
    _, info = env.reset(options={"instance_seed": 4})
    assert info["action_mask"].all()
