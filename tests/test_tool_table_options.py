"""The tool table's schema forms and session hooks beyond the coin world's
(:mod:`luca_gym.tools.table`): types written once in ``$defs``, objects whose
names each take their own member of a union, optional named properties with
``minProperties``, a bare enum of per-session values, a published key order,
and a core's own config builder and limit ending. LUCA's tools use each
(``tests/worlds/luca/test_tool_session_pinned.py`` pins what they build); the
checks here are on small handlers and a toy core written in the test."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any, Literal, TypedDict

import jsonschema
import pytest

from luca_gym.tools.schema import validate
from luca_gym.tools.table import Field, TableToolSession, per_session, schema_of, spec_of, tool_table


class Knob(TypedDict):
    setting: Literal["low", "high"]


class Lamp(TypedDict):
    on: bool


KnobRef = Annotated[Knob, Field(ref="knob")]
LampRef = Annotated[Lamp, Field(ref="lamp")]
Parts = Annotated[dict[str, KnobRef | LampRef], Field(
    keys=per_session(lambda s: {**{k: KnobRef for k in s.knobs}, **{x: LampRef for x in s.lamps}}),
    optional_keys=True, min_properties=1, description="parts by name", key_order=("type", "description"))]
Name = Annotated[Any, Field(enum=per_session(lambda s: s.knobs))]
Names = Annotated[list[Name], Field(max_items=2, key_order=("type", "maxItems"))]


@dataclass(frozen=True)
class C:
    k: int = 2


SESSION = SimpleNamespace(knobs=["k1", "k2"], lamps=["l1"])


class Handlers:
    def set_parts(self, parts: Parts):
        """Set some parts."""

    def name(self, names: Names):
        """Name up to two knobs."""


def test_a_union_named_per_property_is_written_once_in_defs_and_referenced():
    schema = spec_of(Handlers.set_parts, C(), SESSION)["input_schema"]
    knob = {"type": "object", "properties": {"setting": {"enum": ["low", "high"]}}, "required": ["setting"],
            "additionalProperties": False}
    lamp = {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False}
    assert schema == {
        "type": "object",
        "properties": {"parts": {"type": "object", "description": "parts by name",
                                 "properties": {"k1": {"$ref": "#/$defs/knob"}, "k2": {"$ref": "#/$defs/knob"},
                                                "l1": {"$ref": "#/$defs/lamp"}},
                                 "additionalProperties": False, "minProperties": 1}},
        "required": ["parts"], "additionalProperties": False, "$defs": {"knob": knob, "lamp": lamp}}
    assert list(schema) == ["type", "properties", "required", "additionalProperties", "$defs"]  # $defs last
    assert list(schema["properties"]["parts"]) == ["type", "description", "properties", "additionalProperties",
                                                   "minProperties"]  # key_order first, then the builder's order
    # Every member's def is written, in the union's order, even where no name uses it.
    bare = spec_of(Handlers.set_parts, C(), SimpleNamespace(knobs=[], lamps=["l1"]))["input_schema"]
    assert list(bare["$defs"]) == ["knob", "lamp"]
    # What the schema accepts, the dispatcher's validator and the reference library agree on.
    for value, ok in [({"parts": {"k1": {"setting": "low"}}}, True), ({"parts": {"l1": {"on": True}, "k2": {"setting": "high"}}}, True),
                      ({"parts": {}}, False), ({"parts": {"k1": {"on": True}}}, False), ({"parts": {"l1": {"setting": "low"}}}, False),
                      ({"parts": {"zz": {"on": True}}}, False)]:
        assert (validate(value, schema) is None) is ok, value
        assert jsonschema.Draft202012Validator(schema).is_valid(value) is ok, value


def test_a_bare_enum_of_per_session_values_and_a_published_key_order():
    schema = spec_of(Handlers.name, C(), SESSION)["input_schema"]["properties"]["names"]
    assert schema == {"type": "array", "maxItems": 2, "items": {"enum": ["k1", "k2"]}}
    assert list(schema) == ["type", "maxItems", "items"]
    assert schema_of(Annotated[str, Field(enum=("a", "b"))], C()) == {"type": "string", "enum": ["a", "b"]}  # typed
    with pytest.raises(TypeError, match="not supported"):
        schema_of(Any, C())  # Any only as a bare enum


def test_the_forms_refuse_what_they_cannot_build():
    with pytest.raises(TypeError, match="within a spec"):
        schema_of(KnobRef, C())  # a def needs the spec's $defs
    with pytest.raises(TypeError, match="not a member"):
        schema_of(Annotated[dict[str, KnobRef | LampRef], Field(keys={"x": int})], C(), defs={})
    with pytest.raises(TypeError, match="two types named 'knob'"):
        schema_of(Annotated[dict[str, KnobRef | Annotated[Lamp, Field(ref="knob")]], Field(keys={"a": KnobRef})], C(), defs={})
    with pytest.raises(TypeError, match="one type, or one type"):
        schema_of(int | str, C())


# -- a toy core: a counter with a limit, its config built by the core ----------------------------
@dataclass(frozen=True)
class CounterConfig:
    target: int
    limit: int


class counter_core:  # noqa: N801 -- a module-like namespace, as World.core is
    ERRORS = ("", "the session has ended")

    @staticmethod
    def make_config(*, target=3, limit=5):
        return CounterConfig(target, limit)

    @staticmethod
    def instance(seed, config, seal=None):
        return seed

    @staticmethod
    def reset(instance, config):
        return {"count": 0, "steps": 0, "ended": False, "truncated": False}

    @staticmethod
    def step(state, action, config):
        if state["ended"]:
            return state, 0.0, 1
        count, steps = state["count"] + action, state["steps"] + 1
        done = count == config.target or action == 0
        truncated = not done and steps >= config.limit
        new = {"count": count, "steps": steps, "ended": done or truncated, "truncated": truncated}
        return new, float(count == config.target), 0

    @staticmethod
    def ended(state):
        return state["ended"]

    @staticmethod
    def truncated(state, config):
        return state["truncated"]

    @staticmethod
    def scores(state, config):
        return {"hit": float(state["count"] == config.target), "count": state["count"]}


class CounterSession(TableToolSession):
    core, config_class, world = counter_core, CounterConfig, "counter"

    def add(self, n: Annotated[int, Field(minimum=0, maximum=1)]):
        """Add 0 (stop) or 1."""
        return n

    tools = tool_table(add)

    def shown_scores(self, scores):
        return {"hit": "yes" if scores["hit"] else "no"}

    def limit_note(self):
        return f"{self.config.limit} additions made: the end"


def test_a_core_builds_the_config_and_ends_a_session_at_its_limit_in_its_own_words():
    session = CounterSession(0, limit=2, target=9)
    assert session.config == CounterConfig(9, 2)
    assert "ended" not in session.call("add", {"n": 1})
    last = session.call("add", {"n": 1})
    assert last == {"ended": True, "end_reason": "call_limit", "note": "2 additions made: the end", "scores": {"hit": "no"}}
    assert list(last) == ["ended", "end_reason", "note", "scores"]
    assert session.truncated and session.end_reason == "call_limit" and session.scores == {"hit": 0.0, "count": 2}
    assert session.call("add", {"n": 1}) == {"error": "the session has ended"}  # the core's refusal, nothing changed
    hit = CounterSession(0, target=1)
    assert hit.call("add", {"n": 1}) == {"ended": True, "end_reason": "end", "scores": {"hit": "yes"}}
    assert not hit.truncated and hit.total_reward == 1.0
    built = CounterSession(0, config=CounterConfig(1, 1))
    assert built.config == CounterConfig(1, 1)
    with pytest.raises(ValueError, match="beside a config"):
        CounterSession(0, config=CounterConfig(1, 1), limit=3)
