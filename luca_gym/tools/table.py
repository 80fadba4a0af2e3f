"""A world's tool session from its pure core and a tool table:
:class:`TableToolSession`, :func:`tool` and :class:`Field`.

A world supplies its core (:class:`luca_gym.protocol.Core`), its config
class and its tools as methods with typed signatures; the JSON Schemas are
built from the signatures (inspect_ai's way: written once, never beside the
handler), and everything a session does around the core is done here once:
the opening instance, a refusal of the core (error code -> ``self.error``,
nothing changed, nothing paid), the reward paid into ``total_reward``, the
ending (``ended``, ``end_reason``, ``scores``) and the record. Parsing and
the schema check stay in :class:`~luca_gym.tools.session.ToolSessionBase`.
:func:`luca_gym.tools.play.play_policy` plays a scripted policy
(``reset``/``act``) through the same session a tool agent or a model plays.

A handler is a method whose parameters are annotated with ``int``,
``float``, ``str``, ``bool``, ``list[...]``, ``dict[str, T]`` (an object
whose property names are ``Field(keys=...)``, each a required ``T``, or a
mapping of any names, ``Field(max_properties=...)``), a ``TypedDict`` (an
object of named properties; ``NotRequired`` ones optional),
``Literal[...]`` or ``Annotated[T, Field(...)]`` (bounds, an enum and a description;
any value of a Field may be a function of the session's config, as a shape
is, or, wrapped in :func:`per_session`, of the session itself, as an
instance's variable names are). Its docstring's first paragraph is the
tool's description, formatted with the config as ``c`` (``"Y ({c.length}
rows)"``; write braces as ``{{ }}``), unless ``@tool(description=...)``
gives it (a string or a function of the config). It returns the core's
action (stepped by the session, refused or not by the core) or a dict (an
answer that touches no core state), or raises :class:`Refusal` (what the
core never sees, such as text that cannot be read: an error that costs
nothing and changes nothing). A parameter with a default is optional, unless
its Field says ``required=True`` (the default then serves where ``when``
leaves the parameter out). ``@tool(title=..., readOnlyHint=...)`` adds MCP
annotations::

    class CoinToolSession(TableToolSession):
        core, config_class, world = coin_core, CoinConfig, "coin"

        @tool(readOnlyHint=False)
        def guess(self, coin: Annotated[int, Field(minimum=0, maximum=lambda c: c.n_coins - 1)]):
            \"\"\"Name the counterfeit coin; ends the session.\"\"\"
            return coin_core.Action.guess(coin)

        tools = tool_table(guess, ...)
"""

from __future__ import annotations

import inspect
import textwrap
import types
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal

from luca_gym import seal as seal_mod
from luca_gym.tools.session import ToolSessionBase
from luca_gym.validate import check_keys

_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean"}


class Refusal(Exception):
    """Raised by a handler to refuse a call before the core sees it (its
    message is the error the agent reads); the call costs nothing and
    changes nothing."""


@dataclass(frozen=True)
class per_session:  # noqa: N801 -- read as a function: Field(keys=per_session(lambda s: s.variables))
    """A Field value that is a function of the session (read once the session
    holds its instance), not of its config."""

    of: Any


@dataclass(frozen=True)
class Field:
    """What an ``Annotated`` parameter (or list item) adds to its schema.
    Each value may be a function of the session's config, or, wrapped in
    :func:`per_session`, of the session.

    Attributes:
        description: words for the agent.
        minimum, maximum: a number's bounds.
        min_items, max_items: a list's length; ``items`` sets both.
        min_length, max_length: a string's length.
        keys: a ``dict[str, T]``'s property names (each required).
        enum: the values a string (or number) may take, with its type
            (``{"type": "string", "enum": [...]}``; a bare ``Literal`` gives
            the bare enum).
        max_properties: a ``dict[str, T]`` without ``keys``: a mapping of
            any names to ``T``, at most this many.
        when: a function of the config: the parameter is offered only where
            it is true (a setting that adds an argument).
        required: a parameter with a default is required where it is offered.
    """

    description: Any = None
    minimum: Any = None
    maximum: Any = None
    items: Any = None
    min_items: Any = None
    max_items: Any = None
    min_length: Any = None
    max_length: Any = None
    keys: Any = None
    enum: Any = None
    max_properties: Any = None
    when: Any = None
    required: bool = False


_KEYWORDS = (("enum", "enum"), ("minimum", "minimum"), ("maximum", "maximum"), ("min_items", "minItems"),
             ("max_items", "maxItems"), ("min_length", "minLength"), ("max_length", "maxLength"),
             ("max_properties", "maxProperties"))


def tool(*, description=None, **annotations):
    """Mark a handler with its MCP annotations (``title``, ``readOnlyHint``,
    ...) and, where its words depend on the settings in ways a format string
    cannot say, its ``description`` (a string or a function of the config)."""

    def mark(handler):
        handler.annotations = dict(annotations)
        handler.description = description
        return handler

    return mark


def tool_table(*handlers) -> dict:
    """``{name: handler}`` in the order given (the tools' order in the specs)."""
    return {h.__name__: h for h in handlers}


def _value(value, config, session=None):
    if isinstance(value, per_session):
        if session is None:
            raise TypeError("tool parameter: a per_session value needs the session (spec_of(handler, config, session))")
        return value.of(session)
    return value(config) if callable(value) else value


def _fields(extra) -> list:
    return [e for e in extra if isinstance(e, Field)]


def schema_of(annotation, config, session=None) -> dict:
    """The JSON Schema of one annotated type under ``config`` (and ``session``, for :func:`per_session` values)."""
    extra = ()
    if typing.get_origin(annotation) in (typing.NotRequired, typing.Required):  # a TypedDict's key: its type
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is Annotated:
        annotation, *extra = typing.get_args(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        if len(kept) != 1:
            raise TypeError(f"tool parameter: {annotation!r} not supported; one type, or one type | None")
        schema = schema_of(kept[0], config, session)
    elif annotation in _SCALARS:
        schema = {"type": _SCALARS[annotation]}
    elif origin is list:
        schema = {"type": "array", "items": schema_of(args[0], config, session)}
    elif typing.is_typeddict(annotation):  # an object of named properties (typing.NotRequired: optional)
        hints = typing.get_type_hints(annotation, include_extras=True)
        schema = {"type": "object", "properties": {k: schema_of(t, config, session) for k, t in hints.items()},
                  "required": [k for k, t in hints.items() if k in annotation.__required_keys__
                               and typing.get_origin(t) is not typing.NotRequired], "additionalProperties": False}
    elif origin is dict and args[:1] == (str,):
        keys = [_value(f.keys, config, session) for f in _fields(extra) if f.keys is not None]
        item = schema_of(args[1], config, session)
        if len(keys) == 1:
            schema = {"type": "object", "properties": {k: dict(item) for k in keys[0]}, "required": list(keys[0]),
                      "additionalProperties": False}
        elif not keys and any(f.max_properties is not None for f in _fields(extra)):  # a mapping of any names
            schema = {"type": "object", "additionalProperties": item}
        else:
            raise TypeError(f"tool parameter: {annotation!r} needs its property names, Annotated[..., Field(keys=...)], "
                            "or, a mapping of any names, its size, Field(max_properties=...)")
    elif origin is Literal:
        schema = {"enum": list(args)}
    else:
        raise TypeError(f"tool parameter: {annotation!r} not supported; int, float, str, bool, list[...], "
                        "dict[str, ...], Literal[...], Annotated[..., Field(...)]")
    for field in _fields(extra):
        if field.items is not None:
            schema["minItems"] = schema["maxItems"] = _value(field.items, config, session)
        for name, keyword in _KEYWORDS:
            if getattr(field, name) is not None:
                value = _value(getattr(field, name), config, session)
                schema[keyword] = list(value) if name == "enum" else value
        if field.description is not None:
            schema["description"] = _value(field.description, config, session)
    return schema


def _extras(annotation) -> list:
    return _fields(typing.get_args(annotation)[1:]) if typing.get_origin(annotation) is Annotated else []


def spec_of(handler, config, session=None) -> dict:
    """A handler's spec ``{"name", "description", "input_schema"}`` under
    ``config`` (and ``session``, for :func:`per_session` values), from its
    signature and docstring (or ``@tool(description=...)``)."""
    hints = typing.get_type_hints(handler, include_extras=True)
    properties, required = {}, []
    for name, parameter in list(inspect.signature(handler).parameters.items())[1:]:  # past self
        if name not in hints:
            raise TypeError(f"tool {handler.__name__}: parameter {name!r} has no type annotation")
        extras = _extras(hints[name])
        if not all(_value(f.when, config, session) for f in extras if f.when is not None):
            continue
        properties[name] = schema_of(hints[name], config, session)
        if parameter.default is inspect.Parameter.empty or any(f.required for f in extras):
            required.append(name)
    description = getattr(handler, "description", None)
    if description is None:
        doc = textwrap.dedent(handler.__doc__ or "").strip().split("\n\n")[0]
        description = " ".join(doc.split()).format(c=config)
    return {"name": handler.__name__, "description": _value(description, config, session),
            "input_schema": {"type": "object", "properties": properties, "required": required, "additionalProperties": False}}


class TableToolSession(ToolSessionBase):
    """A tool session over a world's pure core, its tools a table of typed handlers.

    Class attributes a world sets: ``core`` (its core: ``instance``,
    ``reset``, ``step``, ``ended``, ``scores``, ``ERRORS``), ``config_class``
    (its config), ``tools`` (:func:`tool_table` of its handlers), ``world``
    (its name, the instance id's prefix unless ``id_prefix`` names another);
    and as on any tool session
    ``opening``, ``status_keys``, ``title``, :meth:`status`,
    :meth:`system_prompt` and :meth:`demo_calls`. :meth:`answer` adds what a
    stepped call reports beyond its ending (default nothing).

    Args:
        seed: the instance's seed (sealed: of its sealed seed).
        sealed: a seal, a secret or None (:mod:`luca_gym.seal`).
        settings: the config's fields (any other key refused by name).
    """

    core: Any = None
    config_class: type | None = None
    tools: dict = {}
    id_prefix: str | None = None

    def __init__(self, seed: int = 0, *, sealed=None, **settings):
        super().__init__()
        check_keys(settings, "settings", [f.name for f in fields(self.config_class)])
        self.config, self.seed = self.config_class(**settings), seed
        self.seal = seal_mod.make_seal(sealed)
        self.instance = self.core.instance(seed, self.config, self.seal)  # host side: never shown
        self.state = self.core.reset(self.instance, self.config)
        self.instance_id = seal_mod.instance_id(seed, self.seal, prefix=self.id_prefix or self.world)
        self.set_specs([spec_of(handler, self.config, self) for handler in self.tools.values()])

    def dispatch(self, name: str, args: dict) -> dict:
        """Run handler ``name``; step the core with the action it returns:
        a refusal (the handler's :class:`Refusal`, or the core's error != 0)
        is ``self.error`` of its message, a step pays its reward into
        ``total_reward`` and, where it ended the session, sets ``ended``,
        ``end_reason`` and ``scores``."""
        try:
            action = self.tools[name](self, **args)
        except Refusal as refusal:
            return self.error(str(refusal))
        if isinstance(action, dict):
            return {**action, **self.status()}
        self.state, reward, error = self.core.step(self.state, action, self.config)
        if int(error):
            return self.error(self.core.ERRORS[int(error)])
        self.total_reward += float(reward)
        result = self.answer(name, args)
        if bool(self.core.ended(self.state)):
            self.ended, self.end_reason = True, "end"
            self.scores = self.core.scores(self.state, self.config)
            result.update(ended=True, end_reason="end", scores=self.scores)
        return {**result, **self.status()}

    def answer(self, name: str, args: dict) -> dict:
        """What a call that the core took reports (read from ``self.state``, after the step)."""
        return {}

    def key_settings(self) -> dict:
        return self.config.settings()

    def annotations(self, name: str) -> dict | None:
        return getattr(self.tools.get(name), "annotations", None)

    def record(self) -> dict:
        return {"instance_id": self.instance_id, **super().record()}

    def observation(self):
        """What a policy sees (:func:`luca_gym.tools.play.play_policy`): the core's ``public_view``, as numpy values."""
        import jax

        return jax.device_get(self.core.public_view(self.state, self.config))


__all__ = ["Field", "Refusal", "TableToolSession", "per_session", "schema_of", "spec_of", "tool", "tool_table"]
