"""What every command line of luca-gym shares, the generic ``luca-gym``
command (:mod:`luca_gym.cli`, one module a command) and a world's own options
and commands (its ``World.cli`` hook, e.g. :mod:`luca_gym.worlds.luca.cli`)
alike: the usage error (one line, exit code 2), seed ranges, comma lists,
``--set`` values and bool settings, writable folders, the seal options, the
python sandbox's limits, the help formatter, the parser whose arguments may
wait until its command is used (:class:`CommandParser`), and the steps a
slow command says on stderr (:class:`say_steps`). It stands on the ground
floor (the seal, the sandbox's limits, the tool session): a world's hook
imports it, so it imports nothing that could import a world back. A sweep's and a training run's progress
lines are :mod:`luca_gym.cli.progress`; the chosen world's options
:mod:`luca_gym.cli.world_options`."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_USAGE = 2
MAX_SEEDS = 100_000


class UsageError(ValueError):
    """A bad command line: one line on stderr, exit code 2."""


def parse_seeds(text: str) -> list[int]:
    """``"0-19"``, ``"0,3,7"`` or ``"0-4,10"`` -> sorted unique seeds (each
    checked by :func:`luca_gym.validate.check_seed` when the sweep is planned)."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                lo, hi = int(lo), int(hi)
                if lo > hi:
                    raise UsageError(f"seeds: range {part!r} runs backwards; write LOW-HIGH with LOW <= HIGH")
                if hi - lo >= MAX_SEEDS:
                    raise UsageError(f"seeds: range {part!r} has more than {MAX_SEEDS} seeds")
                seeds.update(range(lo, hi + 1))
            else:
                seeds.add(int(part))
        except ValueError as exc:
            if isinstance(exc, UsageError):
                raise
            raise UsageError(f"seeds: {part!r} is not a seed or range; allowed e.g. 0-19, 0,3,7 or 0-4,10") from None
    return sorted(seeds)


def names(text: str, what: str, allowed: str) -> list[str]:
    """A comma-separated list -> its unique non-empty items (checked by the sweep's plan)."""
    items = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not items:
        raise UsageError(f"{what}: empty; allowed {allowed}")
    return items


def ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a comma-separated list of integers") from None
    if not values:
        raise UsageError(f"{what}: empty; give one or more sizes, e.g. 20 or 20,40,80")
    return list(dict.fromkeys(values))


def price(text: str | None) -> tuple[float, float] | None:
    """``"2.5,10"`` -> (2.5, 10.0): USD per million input and output tokens."""
    if text is None:
        return None
    parts = text.split(",")
    try:
        values = tuple(float(x) for x in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or not all(0 <= v < float("inf") for v in values):
        raise UsageError(f"price: {text!r}; allowed IN,OUT, USD per million input and output tokens, e.g. 2.5,10")
    return values


def writable_dir(path: str, what: str = "out") -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what}: cannot create folder {path!r} ({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"{what}: folder {path!r} is not writable")


def seal_of(args, out: str | None = None):
    """The seal of ``--sealed`` / ``--secret-file`` (None unsealed): the file's
    secret, else ``$LUCA_GYM_SECRET``, else (for ``eval``) a secret drawn once
    and kept in ``OUT/secret.key``. One line on stderr says which, with the
    fingerprint; the secret itself is never printed."""
    from luca_gym import seal as seal_mod

    if getattr(args, "secret_file", None):
        seal, source = seal_mod.read_secret_file(args.secret_file), args.secret_file
    elif not getattr(args, "sealed", False):
        return None
    elif os.environ.get(seal_mod.SECRET_ENV):
        seal, source = seal_mod.from_env(), f"${seal_mod.SECRET_ENV}"
    elif out is not None:
        seal, created = seal_mod.load_or_create(out)
        source = os.path.join(out, seal_mod.SECRET_FILE) + (" (drawn now; keep it private)" if created else "")
    else:
        raise UsageError(f"sealed: set {seal_mod.SECRET_ENV} or give --secret-file FILE")
    print(f"sealed: secret from {source}, fingerprint {seal.fingerprint}", file=sys.stderr)
    return seal


def setting_values(text: str) -> tuple[str, list]:
    """``KEY=V1,V2`` -> (KEY, [values]): each a JSON number, bool or null when it reads as one, else a string."""
    import json

    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise UsageError(f"set: {text!r}; write KEY=VALUE or KEY=V1,V2")

    def value(v):
        try:
            return json.loads(v)
        except ValueError:
            return v

    return key.strip(), [value(v.strip()) for v in values.split(",") if v.strip()]


def bool_setting(value, name: str) -> bool:
    """A bool setting's value as :func:`setting_values` read it from the
    command line: ``True``/``False`` as the config writes them, in any case
    (so ``true``/``false`` too), or ``1``/``0``. UsageError naming ``name``
    for anything else: the config's own check takes Python bools only, and a
    word that is not one must not reach it as a string."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise UsageError(f"{name}: {shown} is not a bool; allowed True or False (also true/false, 1/0)")


def sealed_arguments(p, eval_: bool = False) -> None:
    from luca_gym.seal import SECRET_ENV

    drawn = " or, if unset, a secret drawn once and kept in OUT/secret.key" if eval_ else ""
    p.add_argument("--sealed", action="store_true",
                   help=f"sealed instances: a secret folded into every instance's key, from ${SECRET_ENV}{drawn}, so the "
                        f"public package and seed do not give the instance away")
    p.add_argument("--secret-file", default=None, metavar="FILE", help="sealed, with the secret in FILE (implies --sealed)")


def sandbox_arguments(p) -> None:
    """``--sandbox-memory`` and ``--sandbox-time``: the python tool's sandbox
    limits, with ``--python`` (:func:`python_option`)."""
    from luca_gym.sandbox import GiB, Limits

    default = Limits()
    p.add_argument("--sandbox-memory", default=None, metavar="SIZE",
                   help=f"with --python: the memory of all the processes of a session's sandbox together, e.g. 512M, 2G, "
                        f"8G (default {default.session_memory_bytes / GiB:g}G; a memory cgroup where "
                        f"the host offers one, else each process's address space: the tool's description says which)")
    p.add_argument("--sandbox-time", default=None, metavar="SECONDS",
                   help=f"with --python: the wall-clock seconds of each code block (default {default.timeout_s:g}; each "
                        f"process may use twice that in CPU seconds)")


def python_option(args):
    """``--python`` with ``--sandbox-memory`` / ``--sandbox-time``: True,
    False, or the sandbox's :class:`~luca_gym.sandbox.Limits` (the
    python tool under them: :func:`~luca_gym.tools.session.python_with_limits`).
    ValueError names the flag's option (``sandbox_memory: ...``) for a bad
    value or one given without ``--python``."""
    from luca_gym.tools.session import python_with_limits

    return python_with_limits(args.python, sandbox_memory=args.sandbox_memory, sandbox_time=args.sandbox_time)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (where it has one and the help
    does not already say it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is x for x in (None, False, argparse.SUPPRESS)) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose arguments may be added when it is first used
    (:meth:`defer`): a command whose options need a heavy module (its
    defaults live beside JAX code) costs nothing until that command is
    parsed or its help shown, so ``luca-gym --help`` and every other
    command's errors answer without importing it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._deferred = []

    def defer(self, add_arguments) -> None:
        """Call ``add_arguments(self)`` before this parser first parses or formats its help or usage."""
        self._deferred.append(add_arguments)

    def _complete(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args=None, namespace=None):
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self):
        self._complete()
        return super().format_usage()

    def format_help(self):
        self._complete()
        return super().format_help()

    def error(self, message):
        """A bad command line in one line on stderr, as every other usage error
        (argparse's own would print the whole usage first), exit code 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def defer_arguments(p, add_arguments) -> None:
    """``add_arguments(p)`` on first use where ``p`` is a :class:`CommandParser`, else now."""
    if isinstance(p, CommandParser):
        p.defer(add_arguments)
    else:
        add_arguments(p)


class say_steps:
    """A context in which ``logger``'s INFO lines go to stderr, each as
    ``<prefix>: <message>``: a slow command (``report``) says what it is
    computing as it starts each step."""

    def __init__(self, logger, prefix: str):
        import logging

        self.logger, self.handler = logger, logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter(f"{prefix}: %(message)s"))
        self.level, self.propagate = logger.level, logger.propagate

    def __enter__(self):
        import logging

        self.handler.setStream(sys.stderr)  # the stderr of the moment (tests capture it)
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        self.logger.propagate = self.propagate
        return False
