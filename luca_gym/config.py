"""One config base for every world: :func:`setting`, the shared validators
and :class:`ConfigBase`.

A world's config is a frozen dataclass of its settings. Each field is
declared with :func:`setting`: its default, its check (one of the validators
here, or any ``(value, name) -> normalised value`` that raises ValueError
naming the field, the value and what is allowed) and whether it is *static*:
a setting that fixes an array's shape (a trajectory's length, the number of
coins) is static, so a compiled step is specialised to it; every other
setting (a probability, a budget) is traced, so one compiled step serves
every value of it (gymnax's environment parameters).

    @dataclass(frozen=True)
    class CoinConfig(ConfigBase):
        n_coins: int = setting(12, int_in(3, 64), static=True)
        weighings: int = setting(3, int_in(1, 64))

:meth:`ConfigBase.settings` is derived from the fields (the key settings of
a session but the seed), never listed by hand. :func:`pytree` registers a
config class as a JAX pytree whose static settings are its structure and the
rest its leaves, so ``jax.jit(step)(state, action, config)`` compiles once per
shape; this module imports JAX only there (a config is imported by commands
that must not load JAX).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, field, fields

import numpy as np

from luca_gym.validate import check_bool, is_integer, short_repr


# When a hypothesis world checks the agent's proposal (the discovery worlds' ``proposals``
# setting: dag, relational, equation): after every experiment ("every", the paper's protocol)
# or once, at the end ("final").
PROPOSALS = ("every", "final")


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def int_in(low: int, high: int):
    """A validator: an integer in ``low..high`` (returned as ``int``)."""

    def check(value, name: str) -> int:
        if not is_integer(value) or not low <= value <= high:
            raise ValueError(f"{name}: {short_repr(value)} not allowed; an integer in {low}..{high}")
        return int(value)

    return check


def number_in(low: float, high: float):
    """A validator: a finite number in ``[low, high]`` (returned as ``float``)."""

    def check(value, name: str) -> float:
        if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
            raise ValueError(f"{name}: {short_repr(value)} not allowed; a number in [{low:g}, {high:g}]")
        return float(value)

    return check


def probability():
    """A validator: a number in [0, 1] (returned as ``float``)."""
    return number_in(0, 1)


def choice(*allowed):
    """A validator: one of ``allowed`` (returned as given)."""

    def check(value, name: str):
        if isinstance(value, bool) or value not in allowed:
            raise ValueError(f"{name}: {short_repr(value)} not allowed; one of {', '.join(map(repr, allowed))}")
        return value

    return check


def boolean():
    """A validator: True or False."""

    return check_bool


def setting(default, check, *, static: bool = False):
    """A config field: its ``default``, its ``check`` (a validator) and
    whether it is ``static`` (fixes a shape: a compiled step is specialised
    to it) or traced (the default)."""
    if default is MISSING:
        raise ValueError("setting: a default is needed (a config is built from keyword settings)")
    return field(default=default, metadata={"check": check, "static": bool(static)})


class ConfigBase:
    """The base of a world's config (subclass it as a frozen dataclass whose
    fields are :func:`setting` s). On construction each field is checked and
    normalised by its validator, so a config that exists is a valid one."""

    def __post_init__(self):
        for f in fields(self):
            check = f.metadata.get("check")
            if check is not None:
                object.__setattr__(self, f.name, check(getattr(self, f.name), f.name))

    def settings(self) -> dict:
        """The fields as keyword settings (a session's key settings but the seed)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def static_fields(cls) -> tuple[str, ...]:
        """The settings that fix shapes (static under jit)."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("static"))

    @classmethod
    def traced_fields(cls) -> tuple[str, ...]:
        """The settings traced under jit (one compiled step serves every value)."""
        return tuple(f.name for f in fields(cls) if not f.metadata.get("static"))


def pytree(cls):
    """Register config class ``cls`` as a JAX pytree: its static settings
    are the tree's structure (a new value compiles anew), the others its
    leaves (traced). A tree rebuilt inside jit skips the checks (its leaves
    are tracers); one built by a caller was checked. Returns ``cls``; a
    second call is a no-op."""
    import jax

    if getattr(cls, "_luca_gym_pytree", None) is cls:
        return cls
    static, traced = cls.static_fields(), cls.traced_fields()

    def flatten(config):
        return [getattr(config, name) for name in traced], tuple(getattr(config, name) for name in static)

    def unflatten(aux, leaves):
        config = object.__new__(cls)
        for name, value in (*zip(static, aux), *zip(traced, leaves)):
            object.__setattr__(config, name, value)
        return config

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    cls._luca_gym_pytree = cls
    return cls


__all__ = ["ConfigBase", "boolean", "choice", "int_in", "number_in", "probability", "pytree", "setting"]
