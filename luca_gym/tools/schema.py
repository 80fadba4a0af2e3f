"""A small JSON Schema validator for the subset the tool schemas use.

The dispatcher validates tool arguments with the very schemas it publishes, so
what a schema allows and what the dispatcher accepts cannot drift apart (the
tests check this against the reference ``jsonschema`` library both ways).

Supported keywords: ``type``, ``properties``, ``required``,
``additionalProperties``, ``minProperties``, ``maxProperties``, ``enum``,
``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``items``,
``minItems``, ``maxItems`` and local ``$ref`` to ``#/$defs/NAME``.
"""

from __future__ import annotations

import math

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _allowed(values, limit: int = 8) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate(value, schema: dict, root: dict | None = None, path: str = "") -> str | None:
    """Return None if ``value`` satisfies ``schema``, else one message naming
    the place, the problem and what is allowed."""
    root = root if root is not None else schema
    where = path or "arguments"
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return validate(value, root["$defs"][name], root, path)
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        return f"{where}: expected {kind}, got {type(value).__name__} {_short(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {_short(value)} not allowed; allowed {_allowed(schema['enum'])}"
    if kind in ("number", "integer"):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where}: {value} not allowed; a finite number"
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: {_short(value)} below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: {_short(value)} above the maximum {schema['maximum']}"
    if kind == "string":
        if len(value) < schema.get("minLength", 0):
            return f"{where}: shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: longer than {schema['maxLength']} characters"
    if kind == "array":
        if len(value) < schema.get("minItems", 0):
            return f"{where}: fewer than {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where}: more than {schema['maxItems']} items"
        for i, item in enumerate(value):
            error = validate(item, schema.get("items", {}), root, f"{where}[{i}]")
            if error:
                return error
    if kind == "object":
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name in schema.get("required", []):
            if name not in value:
                # A field not allowed beside it is named too: a misspelt field is the usual cause of a missing one.
                unknown = [_short(k) for k in value if k not in properties] if extra is False else []
                if unknown:
                    return (f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} and missing "
                            f"required field {name!r}; allowed {_allowed(properties) if properties else 'none'}")
                return f"{where}: missing required field {name!r}"
        if len(value) < schema.get("minProperties", 0):
            return f"{where}: needs at least {schema['minProperties']} entries"
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            return f"{where}: more than {schema['maxProperties']} entries"
        for name, item in value.items():
            sub = f"{where}.{name}" if isinstance(name, str) and len(name) <= 40 else f"{where}[{_short(name)}]"
            if name in properties:
                error = validate(item, properties[name], root, sub)
            elif extra is False:
                return f"{where}: unknown field {_short(name)}; allowed {_allowed(properties) if properties else 'none'}"
            elif isinstance(extra, dict):
                error = validate(item, extra, root, sub)
            else:
                error = None
            if error:
                return error
    return None
