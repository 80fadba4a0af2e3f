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
whose property names are ``Field(keys=...)``, each a required ``T`` or, with
``optional_keys``, an optional one; ``keys`` a mapping of names to the
members of a union ``T = A | B`` gives each name its own type; or a mapping
of any names, ``Field(max_properties=...)``), a ``TypedDict`` (an object of
named properties; ``NotRequired`` ones optional), ``Literal[...]``,
``Annotated[Any, Field(enum=...)]`` (a bare enum of values known only per
session) or ``Annotated[T, Field(...)]`` (bounds, an enum and a description;
any value of a Field may be a function of the session's config, as a shape
is, or, wrapped in :func:`per_session`, of the session itself, as an
instance's variable names are). A type marked ``Field(ref=NAME)`` is
written once, in the input schema's ``$defs``, and referenced
(``{"$ref": "#/$defs/NAME"}``) wherever it is used; ``Field(key_order=...)``
puts the named schema keywords first, where a published order must be kept. Its docstring's first paragraph is the
tool's description, formatted with the config as ``c`` (``"Y ({c.length}
rows)"``; write braces as ``{{ }}``), unless ``@tool(description=...)``
gives it (a string or a function of the config). It returns the core's
action (stepped by the session, refused or not by the core) or a dict (an
answer that touches no core state), or raises :class:`Refusal` (what the
core never sees, such as text that cannot be read: an error that costs
nothing and changes nothing). A parameter with a default is optional, unless
its Field says ``required=True`` (the default then serves where ``when``
leaves the parameter out). ``@tool(title=..., readOnlyHint=...)`` adds MCP
annotations. A core with ``make_config`` builds the session's config from
its settings (else ``config_class`` does), and one with ``truncated`` ends a
session at its limit (``end_reason: "call_limit"``, ``truncated``, the
world's words in :meth:`TableToolSession.limit_note`)::

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
from collections.abc import Mapping
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
        keys: a ``dict[str, T]``'s property names (each required, unless
            ``optional_keys``), or a mapping of each name to its type, a
            member of the union ``T``.
        optional_keys: the ``keys`` are all optional (the object has no
            ``required``; ``min_properties`` may ask for some).
        enum: the values a string (or number) may take, with its type
            (``{"type": "string", "enum": [...]}``); on ``Any``, or a bare
            ``Literal``, the bare enum (``{"enum": [...]}``).
        min_properties, max_properties: an object's least and most
            properties; a ``dict[str, T]`` without ``keys`` and with
            ``max_properties`` is a mapping of any names to ``T``.
        ref: the type's name in the input schema's ``$defs``: its schema is
            written there once and referenced where the type is used.
        key_order: schema keywords put first, in this order (the rest
            follow in the builder's order): a published order kept.
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
    optional_keys: bool = False
    enum: Any = None
    min_properties: Any = None
    max_properties: Any = None
    ref: str | None = None
    key_order: tuple = ()
    when: Any = None
    required: bool = False


_KEYWORDS = (("enum", "enum"), ("minimum", "minimum"), ("maximum", "maximum"), ("min_items", "minItems"),
             ("max_items", "maxItems"), ("min_length", "minLength"), ("max_length", "maxLength"),
             ("max_properties", "maxProperties"), ("min_properties", "minProperties"))


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


def _union(annotation) -> list:
    """The members of a union (a single type: itself)."""
    return list(typing.get_args(annotation)) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else [annotation]


def _named_object(annotation, item, names, optional: bool, config, session, defs) -> dict:
    """A ``dict[str, item]`` with its property names: ``names`` a sequence
    (each an ``item``) or a mapping of names to members of the union ``item``
    (each member's schema built once, in the union's order, so each
    ``$defs`` entry is written whichever names use it)."""
    if isinstance(names, Mapping):
        members = _union(item)
        built = [schema_of(m, config, session, defs) for m in members]
        unknown = [t for t in names.values() if t not in members]
        if unknown:
            raise TypeError(f"tool parameter: {annotation!r}: Field(keys=...) maps a name to {unknown[0]!r}, not a member of "
                            f"{item!r}")
        properties = {k: dict(built[members.index(t)]) for k, t in names.items()}
    else:
        schema = schema_of(item, config, session, defs)
        properties = {k: dict(schema) for k in names}
    return {"type": "object", "properties": properties, **({} if optional else {"required": list(names)}),
            "additionalProperties": False}


def schema_of(annotation, config, session=None, defs: dict | None = None) -> dict:
    """The JSON Schema of one annotated type under ``config`` (and
    ``session``, for :func:`per_session` values). A type marked
    ``Field(ref=NAME)`` is written into ``defs`` (the input schema's
    ``$defs``, which :func:`spec_of` gives) and returned as its reference."""
    extra = ()
    if typing.get_origin(annotation) in (typing.NotRequired, typing.Required):  # a TypedDict's key: its type
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is Annotated:
        annotation, *extra = typing.get_args(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        if len(kept) != 1:
            raise TypeError(f"tool parameter: {annotation!r} not supported; one type, or one type | None (a union "
                            "of several: as a dict's values, each name's member given by Field(keys={name: member}))")
        schema = schema_of(kept[0], config, session, defs)
    elif annotation in _SCALARS:
        schema = {"type": _SCALARS[annotation]}
    elif annotation is Any and any(f.enum is not None for f in _fields(extra)):  # the bare enum
        schema = {}
    elif origin is list:
        schema = {"type": "array", "items": schema_of(args[0], config, session, defs)}
    elif typing.is_typeddict(annotation):  # an object of named properties (typing.NotRequired: optional)
        hints = typing.get_type_hints(annotation, include_extras=True)
        schema = {"type": "object", "properties": {k: schema_of(t, config, session, defs) for k, t in hints.items()},
                  "required": [k for k, t in hints.items() if k in annotation.__required_keys__
                               and typing.get_origin(t) is not typing.NotRequired], "additionalProperties": False}
    elif origin is dict and args[:1] == (str,):
        keys = [_value(f.keys, config, session) for f in _fields(extra) if f.keys is not None]
        if len(keys) == 1:
            optional = any(f.optional_keys for f in _fields(extra))
            schema = _named_object(annotation, args[1], keys[0], optional, config, session, defs)
        elif not keys and any(f.max_properties is not None for f in _fields(extra)):  # a mapping of any names
            schema = {"type": "object", "additionalProperties": schema_of(args[1], config, session, defs)}
        else:
            raise TypeError(f"tool parameter: {annotation!r} needs its property names, Annotated[..., Field(keys=...)], "
                            "or, a mapping of any names, its size, Field(max_properties=...)")
    elif origin is Literal:
        schema = {"enum": list(args)}
    else:
        raise TypeError(f"tool parameter: {annotation!r} not supported; int, float, str, bool, list[...], "
                        "dict[str, ...], Literal[...], Annotated[Any, Field(enum=...)], Annotated[..., Field(...)]")
    for field in _fields(extra):
        if field.items is not None:
            schema["minItems"] = schema["maxItems"] = _value(field.items, config, session)
        for name, keyword in _KEYWORDS:
            if getattr(field, name) is not None:
                value = _value(getattr(field, name), config, session)
                schema[keyword] = list(value) if name == "enum" else value
        if field.description is not None:
            schema["description"] = _value(field.description, config, session)
        if field.key_order:
            schema = {**{k: schema[k] for k in field.key_order if k in schema}, **schema}
    refs = [f.ref for f in _fields(extra) if f.ref is not None]
    if refs:
        if defs is None:
            raise TypeError(f"tool parameter: {annotation!r} is written once in $defs (Field(ref={refs[0]!r})): build "
                            "it within a spec (spec_of), which holds the $defs")
        if defs.setdefault(refs[0], schema) != schema:
            raise TypeError(f"tool parameter: two types named {refs[0]!r} in $defs (Field(ref=...))")
        return {"$ref": f"#/$defs/{refs[0]}"}
    return schema


def _extras(annotation) -> list:
    return _fields(typing.get_args(annotation)[1:]) if typing.get_origin(annotation) is Annotated else []


def spec_of(handler, config, session=None) -> dict:
    """A handler's spec ``{"name", "description", "input_schema"}`` under
    ``config`` (and ``session``, for :func:`per_session` values), from its
    signature and docstring (or ``@tool(description=...)``); the types
    marked ``Field(ref=...)`` in the input schema's ``$defs``, last."""
    hints = typing.get_type_hints(handler, include_extras=True)
    properties, required, defs = {}, [], {}
    for name, parameter in list(inspect.signature(handler).parameters.items())[1:]:  # past self
        if name not in hints:
            raise TypeError(f"tool {handler.__name__}: parameter {name!r} has no type annotation")
        extras = _extras(hints[name])
        if not all(_value(f.when, config, session) for f in extras if f.when is not None):
            continue
        properties[name] = schema_of(hints[name], config, session, defs)
        if parameter.default is inspect.Parameter.empty or any(f.required for f in extras):
            required.append(name)
    description = getattr(handler, "description", None)
    if description is None:
        doc = textwrap.dedent(handler.__doc__ or "").strip().split("\n\n")[0]
        description = " ".join(doc.split()).format(c=config)
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"name": handler.__name__, "description": _value(description, config, session),
            "input_schema": {**schema, "$defs": defs} if defs else schema}


class TableToolSession(ToolSessionBase):
    """A tool session over a world's pure core, its tools a table of typed handlers.

    Class attributes a world sets: ``core`` (its core: ``instance``,
    ``reset``, ``step``, ``ended``, ``scores``, ``ERRORS``; optionally
    ``make_config`` and ``truncated``), ``config_class`` (its config),
    ``tools`` (:func:`tool_table` of its handlers), ``world`` (its name, the
    instance id's prefix unless ``id_prefix`` names another); and as on any
    tool session ``opening``, ``status_keys``, ``title``, :meth:`status`,
    :meth:`system_prompt` and :meth:`demo_calls`. Hooks where a world says
    its own words: :meth:`answer` (what a stepped call reports beyond its
    ending, default nothing), :meth:`shown_scores` (the scores as an agent
    reads them at the end, default as the core gives them),
    :meth:`limit_note` (a session ended at the core's limit) and
    :meth:`refused` (a refusal of the core).

    Args:
        seed: the instance's seed (sealed: of its sealed seed).
        sealed: a seal, a secret or None (:mod:`luca_gym.seal`).
        config: a config already built (then no settings), e.g. one a
            world's own env holds; default: built from ``settings`` by
            :meth:`make_config`.
        settings: the config's fields (any other key refused by name).
    """

    core: Any = None
    config_class: type | None = None
    tools: dict = {}
    id_prefix: str | None = None

    def __init__(self, seed: int = 0, *, sealed=None, config=None, **settings):
        super().__init__()
        if config is not None and settings:
            raise ValueError(f"settings: {', '.join(settings)} given beside a config; give one or the other")
        self.config, self.seed = config if config is not None else self.make_config(**settings), seed
        self.seal = seal_mod.make_seal(sealed)
        self.instance = self.core.instance(seed, self.config, self.seal)  # host side: never shown
        self.state = self.core.reset(self.instance, self.config)
        self.instance_id = seal_mod.instance_id(seed, self.seal, prefix=self.id_prefix or self.world)
        self.set_specs([spec_of(handler, self.config, self) for handler in self.tools.values()])

    @classmethod
    def make_config(cls, **settings):
        """The session's config from its settings: the core's ``make_config``
        where it has one (a session's options beyond the world's config, such
        as LUCA's call limit), else ``config_class`` (any other key refused by name)."""
        if hasattr(cls.core, "make_config"):
            return cls.core.make_config(**settings)
        check_keys(settings, "settings", [f.name for f in fields(cls.config_class)])
        return cls.config_class(**settings)

    def dispatch(self, name: str, args: dict) -> dict:
        """Run handler ``name``; step the core with the action it returns:
        a refusal (the handler's :class:`Refusal`: ``self.error``; the
        core's error != 0: :meth:`refused`) is its message, a step pays its
        reward into ``total_reward`` and, where it ended the session, sets
        ``ended``, ``truncated`` (at the core's limit: ``end_reason``
        "call_limit" and :meth:`limit_note`, else "end") and ``scores``."""
        try:
            action = self.tools[name](self, **args)
        except Refusal as refusal:
            return self.error(str(refusal))
        if isinstance(action, dict):
            return {**action, **self.status()}
        self.state, reward, error = self.core.step(self.state, action, self.config)
        if int(error):
            return self.refused(self.core.ERRORS[int(error)])
        self.total_reward += float(reward)
        result = self.answer(name, args)
        if bool(self.core.ended(self.state)):
            truncated = hasattr(self.core, "truncated") and bool(self.core.truncated(self.state, self.config))
            self.ended, self.truncated, self.end_reason = True, truncated, "call_limit" if truncated else "end"
            self.scores = self.core.scores(self.state, self.config)
            result.update(ended=True, end_reason=self.end_reason)
            if truncated:
                result["note"] = self.limit_note()
            result["scores"] = self.shown_scores(self.scores)
        return {**result, **self.status()}

    def answer(self, name: str, args: dict) -> dict:
        """What a call that the core took reports (read from ``self.state``, after the step)."""
        return {}

    def refused(self, message: str) -> dict:
        """The answer to a call the core refused: ``message`` (its
        ``ERRORS`` entry) and the status (:meth:`error`)."""
        return self.error(message)

    def shown_scores(self, scores: dict) -> dict:
        """The scores as the last answer shows them to an agent (``self.scores`` keeps the core's)."""
        return scores

    def limit_note(self) -> str:
        """What the last answer of a session ended at the core's limit (``core.truncated``) says."""
        return "The session reached its limit and has ended."

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
