"""The chosen world's part of a command line: ``eval``, ``train`` and ``mcp``
take the options of the world ``--world NAME`` names (its ``World.cli``
hook's, e.g. LUCA's ``--tiers/--modes/--n-genes``, or, for a world without
one, each field of its config as an option, ``--n-nodes``), then ``--set
KEY=VALUES`` and ``--budget``; another world's option given is refused
naming its world. Also the help texts those commands share and the results
writer a world's own commands are handed (:class:`SessionRecording`).

Nothing here imports JAX or a world's core: the registry loads each world's
CLI hook by name, and the hooks import no JAX either."""

from __future__ import annotations

import argparse
import sys

from luca_gym.cli.common import UsageError, bool_setting, setting_values

DEFAULT_WORLD = "luca"
# The commands whose options are the chosen world's (``--world NAME``): their parser is built for that world.
WORLD_COMMANDS = ("eval", "train", "mcp")
WORLD_HELP = "the world: a registered world's name (luca_gym worlds) or package.module:WORLD"
SET_HELP = ("a setting of the world, one value or a comma-separated list, e.g. --set n_bits=6,8 (repeatable; "
            "a setting left out takes its default)")
# Settings every world may have, given by an option of eval and train rather than the world's own (parsed and
# checked by the world's config; a world whose config lacks one refuses it).
GENERIC_SETTINGS = ("budget",)
BUDGET_HELP = ("the session budget, parsed and checked by the world's config (LUCA: experiment and rescue units, an "
               "integer in 1..65536; equation: queries, 1..1000; biobank: none, limited or expanded, a comma list "
               "sweeping them); default: the world's own (LUCA's N + S + 8)")

PYTHON_HELP = ("offer the python tool: the agent's code run in a sandbox beside the world's data, 30 turns a session, "
               "output truncated, and none of the world's structured analysis tools, as the DrugTargetWorld harness (a "
               "world that offers it, e.g. biobank; needs --sealed; eval: tool agents only, and a results folder holds "
               "sessions with it or without it)")
PYTHON_ANALYSIS_HELP = ("with --python: keep the world's structured analysis tools beside the python tool (biobank's "
                        "describe_release, define_phenotype, association_scan, cis_mr, ...); a results folder holds "
                        "sessions with them or without them")


def hooks() -> dict:
    """{world name: its CLI hook} for every registered world that has one."""
    from luca_gym import worlds
    from luca_gym.protocol import load

    return {name: load(worlds.get(name).cli) for name in worlds.names() if worlds.get(name).cli is not None}


class _HiddenOptions:
    """A command's parser as another world's hook sees it: the options the
    hook adds are parsed (so that one given is refused by name, with the
    world it belongs to: :func:`world_of`) but left out of the help and
    usage, which show the chosen world's options only."""

    def __init__(self, parser):
        self._parser = parser

    def add_argument(self, *args, **kwargs):
        """The parser's ``add_argument``, with the help suppressed."""
        return self._parser.add_argument(*args, **{**kwargs, "help": argparse.SUPPRESS})

    def __getattr__(self, name):
        return getattr(self._parser, name)


def add_world_arguments(p, method: str, shown: str | None = None) -> None:
    """Each world's options for this command (hook ``method``), remembering
    which world owns which option; only world ``shown``'s appear in the help
    (every world's where None)."""
    owners = {}
    for name, hook in hooks().items():
        if hasattr(hook, method):
            before = {a.dest for a in p._actions}
            getattr(hook, method)(p if shown is None or name == shown else _HiddenOptions(p))
            owners.update({a.dest: name for a in p._actions if a.dest not in before})
    p.set_defaults(_owners=owners)


def world_of(args):
    """The world of ``--world`` and its CLI hook (or None); an option of another world given is refused."""
    from luca_gym import worlds

    world = worlds.get(args.world)
    for dest, owner in getattr(args, "_owners", {}).items():
        if owner != world.name and getattr(args, dest, None) not in (None, False):
            raise UsageError(f"{dest.replace('_', '-')}: an option of world {owner!r}, not of {world.name!r}; "
                             f"give {world.name!r}'s settings with --set KEY=VALUE")
    return world, hooks().get(world.name)


def config_flags(p, world, many: bool) -> None:
    """A world without a CLI hook: each field of its config as an option
    (``n_nodes`` -> ``--n-nodes``), a comma list where the command sweeps
    (there, the fields that key a session: ``World.session_keys``); a field
    the command has an option of its own for (:data:`GENERIC_SETTINGS`:
    ``--budget``) is set by that option. An option of the same name another
    world's hook added gives way: the command names this world."""
    from dataclasses import MISSING, fields

    from luca_gym.protocol import load

    names = []
    for f in fields(load(world.config)):
        if many and f.name not in world.session_keys:
            continue  # a sweep plans key settings only
        if f.name in GENERIC_SETTINGS:
            continue  # the command's own option (--budget) sets it
        default = "" if f.default is MISSING else f" (default {f.default})"
        kind = "; True or False" if f.type in (bool, "bool") else ""
        p.add_argument(f"--{f.name.replace('_', '-')}", dest=f"setting__{f.name}", default=None,
                       metavar="VALUES" if many else "VALUE",
                       help=f"{world.name}: {f.name}{default}{kind}" + ("; a comma list sweeps" if many else ""))
        names.append(f.name)
    p.set_defaults(_config_flags=names)


def world_named(argv) -> tuple[str | None, str | None]:
    """(the command, the world ``--world`` names, or None) of the command
    line, read before the command's parser is built (which depends on the
    world); the world is read for :data:`WORLD_COMMANDS` only."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in WORLD_COMMANDS:
        return command, None
    pre = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    pre.add_argument("--world", default=None)
    try:
        known, _ = pre.parse_known_args(argv[argv.index(command) + 1:])
    except (argparse.ArgumentError, SystemExit):  # e.g. --world without a value: the command's parser says so
        return command, None
    return command, known.world


def add_plugin_world_argument(p) -> None:
    """``--world`` on a command that reads results (``report``, ``show``): a
    world outside the registry that the results name, as
    ``package.module:WORLD``, loaded and registered before they are read (a
    registered world's name is accepted too, and changes nothing)."""
    p.add_argument("--world", action="append", default=[], metavar="WORLD",
                   help="a world the results name that is not registered (package.module:WORLD, as eval's --world "
                        "took it): loaded and registered before reading (repeatable)")


def register_plugin_worlds(args) -> None:
    """Load and register each world ``--world`` names (ValueError naming one
    that is not a world, from the registry)."""
    from luca_gym import worlds

    for name in getattr(args, "world", None) or ():
        worlds.get(name)


def chosen_world(argv):
    """The world whose options ``eval``, ``train`` and ``mcp`` take on this
    command line: the one ``--world`` names, else the default (LUCA).
    ValueError (naming the world and those registered) for a world that is
    not one."""
    from luca_gym import worlds

    _, name = world_named(argv)
    return worlds.get(DEFAULT_WORLD if name is None else name)


def bool_fields(world) -> set[str]:
    """The names of the world's bool settings (its config's fields typed ``bool``)."""
    from dataclasses import fields

    from luca_gym.protocol import load

    return {f.name for f in fields(load(world.config)) if f.type in (bool, "bool")}


def world_settings(args, world, hook, method: str, one: bool = False) -> dict:
    """The world's settings: its hook's options (``method``) or its config
    fields' options, then ``--set`` (which wins). A bool setting takes
    ``True``/``False`` as the config does (``true``/``false``, ``1``/``0``
    too: :func:`~luca_gym.cli.common.bool_setting`)."""
    settings = getattr(hook, method)(args) if hook is not None and hasattr(hook, method) else {}
    bools = bool_fields(world)

    def read(key: str, text: str) -> list:
        values = setting_values(text)[1]
        return [bool_setting(v, key) for v in values] if key in bools else values

    for name in getattr(args, "_config_flags", ()):
        text = getattr(args, f"setting__{name}")
        if text is not None:
            values = read(name, f"{name}={text}")
            if one and len(values) != 1:
                raise UsageError(f"{name}: takes one value here, got {len(values)}")
            settings[name] = values[0] if one else values
    for text in args.set:
        key = setting_values(text)[0]
        values = read(key, text)
        if one and len(values) != 1:
            raise UsageError(f"set: {key} takes one value here, got {len(values)}")
        settings[key] = values[0] if one else values
    return settings


def with_budget(args, world, settings: dict) -> dict:
    """``settings`` with ``--budget``'s value (read as ``--set budget=VALUE``
    reads one: ``8`` is an integer, ``8.5`` a float the config refuses), where
    given: one value where the budget is a run option (LUCA, equation), a
    comma list to sweep where it is a key field (biobank's ``none,limited,
    expanded``); UsageError for a world without a budget setting, or a budget
    given twice."""
    text = getattr(args, "budget", None)
    if text is None:
        return settings
    if "budget" not in world.config_fields():
        raise UsageError(f"budget: world {world.name!r} has no budget setting (its settings: "
                         f"{', '.join(world.config_fields()) or 'none'})")
    if "budget" in settings:
        raise UsageError("budget: given twice (--budget and --set budget=...); give it once")
    if not text.strip():
        raise UsageError("budget: empty; give one value, e.g. --budget 8")
    values = setting_values(f"budget={text}")[1]
    if "budget" in world.session_keys:  # a key field (biobank's regimes): a comma list sweeps it, as --set does
        return {**settings, "budget": values}
    if len(values) != 1:
        raise UsageError(f"budget: {text!r}; one value, e.g. --budget 8 (each budget is a sweep of its own, into its own --out)")
    if values[0] is None:  # JSON null would read as "the world's default": leaving the option out says that
        raise UsageError(f"budget: {text!r} not allowed; one value, e.g. --budget 8 (leave --budget out for the world's default)")
    return {**settings, "budget": values[0]}


def described(command: str, text: str, world) -> str:
    """A world command's description: ``text``, then which world's options
    the help shows and how to see another's."""
    import textwrap

    default = " (the default world)" if world.name == DEFAULT_WORLD else ""
    line = (f"The options shown are {world.name}'s{default}; other worlds have their own: "
            f"luca-gym {command} --world NAME --help (luca-gym worlds lists them).")
    return f"{text[0].upper()}{text[1:]}.\n\n" + textwrap.fill(line, 79)


class SessionRecording:
    """The harness's results writer handed to a world's own commands as
    ``args.recording`` (a world does not import the harness): LUCA's ``play
    --out`` records its session with it, in the format ``show`` and
    ``report`` read."""

    def check(self, session, out: str, agent: str) -> None:
        """Raise (ResultsError) before the first call if ``session`` could not be recorded in ``out`` under ``agent``."""
        from luca_gym.harness import check_recordable

        check_recordable(session, out, agent=agent)

    def record(self, session, out: str, agent: str, wall_s: float = 0.0, messages: list | None = None) -> str:
        """Append the ended ``session`` (with its transcript ``messages``, where
        its driver kept one) to ``out/sessions.jsonl``; returns the file's path."""
        from luca_gym.harness import record_tool_session

        return record_tool_session(session, out, agent=agent, wall_s=wall_s, messages=messages)
