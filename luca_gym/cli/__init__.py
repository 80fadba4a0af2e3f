"""The ``luca-gym`` command: ``eval``, ``train``, ``report``, ``show``, ``mcp``
and ``worlds`` for every registered world (``--world NAME``, default luca;
a world's settings as ``--set KEY=VALUES``), plus each world's own options
and commands from its ``World.cli`` hook (LUCA's ``--tiers/--modes/--n-genes``
and its ``fidelity``, ``info`` and ``play``: :mod:`luca_gym.worlds.luca.cli`).

Bad input (unknown agent or setting, a bad seed range, an unwritable folder,
a corrupt results line, another world's option, a model agent without its
SDK or key) gets one line on stderr naming the problem and what is allowed,
and exit code 2; nothing already written is touched, and no file is made.

The arguments are parsed before any heavy module is imported: ``--help``,
``--version`` and an argument error answer without importing JAX (each
command's handler imports what it runs; a world's command whose options need
a heavy module defers them until it is used: :class:`~luca_gym.cli.common.CommandParser`).

One module a command: :mod:`~luca_gym.cli.eval`, :mod:`~luca_gym.cli.check_model`,
:mod:`~luca_gym.cli.train`, :mod:`~luca_gym.cli.worlds`, :mod:`~luca_gym.cli.report`,
:mod:`~luca_gym.cli.show` and :mod:`~luca_gym.cli.mcp`, each with its parser
(``add_parser``) and its handler; what they share is :mod:`~luca_gym.cli.common`
(also a world's part of the command), :mod:`~luca_gym.cli.world_options` (the
chosen world's options), :mod:`~luca_gym.cli.models` (the model agents' options) and
:mod:`~luca_gym.cli.progress`. This module builds the parser and runs a command.
"""

from __future__ import annotations

import argparse
import sys

from luca_gym.cli.common import EXIT_USAGE, CommandParser, HelpFormatter, UsageError
from luca_gym.cli.world_options import DEFAULT_WORLD, SessionRecording, chosen_world, hooks, world_named


def build_parser(world=None) -> argparse.ArgumentParser:
    """The command's parser, with ``eval``, ``train`` and ``mcp`` built for
    ``world`` (a World, a registered name, or None: the default, LUCA):
    their help shows that world's options only (its CLI hook's, or, for a
    world without one, each field of its config as an option, ``--n-nodes``).
    Another world's hook options are still parsed, hidden, so that one given
    is refused naming its world."""
    from luca_gym import __version__, worlds
    from luca_gym.cli import check_model, mcp, report, show, train
    from luca_gym.cli import eval as eval_command, worlds as worlds_command

    parser = CommandParser(  # its commands' parsers too: a world's command may defer its arguments until used
        prog="luca-gym", formatter_class=HelpFormatter,
        description="Synthetic worlds for experimental reasoning (`luca-gym worlds` lists them; LUCA is the default). "
                    "Run `luca-gym COMMAND --help` for a command's options.",
        epilog="Errors print one line naming the problem and what is allowed, and exit with code 2. JAX compiles on a "
               "first run (cached afterwards; luca_gym.compile_cache, LUCA_GYM_CACHE_DIR=off disables it).",
    )
    parser.add_argument("--version", action="version", version=f"luca-gym {__version__}")
    parser.set_defaults(recording=SessionRecording())  # for a world's own commands (LUCA's play --out)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_parser = sub.add_parser
    world = worlds.get(DEFAULT_WORLD if world is None else world)
    flag_world = world if world.cli is None else None  # its config fields are the options
    # Every command shows defaults; a world's config-field options replace another world's of the same name.
    handler = "error" if flag_world is None else "resolve"
    sub.add_parser = lambda *a, **k: _add_parser(*a, formatter_class=HelpFormatter, conflict_handler=handler, **k)
    eval_command.add_parser(sub, world, flag_world)
    check_model.add_parser(sub)
    train.add_parser(sub, world, flag_world)
    worlds_command.add_parser(sub)
    report.add_parser(sub)
    show.add_parser(sub)
    mcp.add_parser(sub, world, flag_world)
    for hook in hooks().values():  # each world's own commands
        if hasattr(hook, "add_commands"):
            hook.add_commands(sub)
    return parser


def parser_for(argv=None) -> argparse.ArgumentParser:
    """The parser for this command line: ``eval``, ``train`` and ``mcp``
    built for the world ``--world NAME`` names (:func:`build_parser`; a
    world without a CLI hook has its config fields as options,
    ``--n-nodes``); for a name that is not a world's, the default world's
    (the command then refuses the name)."""
    try:
        world = chosen_world(argv)
    except ValueError:
        world = None
    return build_parser(world)


def _as_flags(message: str, args) -> str:
    """An API error names its parameter (``n_genes: ...``); on the command line
    say the option the user typed (``--n-genes: ...``)."""
    name, sep, rest = message.partition(":")
    flag = "--" + name.replace("_", "-")
    typed = hasattr(args, name) or getattr(args, f"setting__{name}", None) is not None
    if sep and name.isidentifier() and typed and name != "results":
        return flag + sep + rest
    return message


def main(argv=None) -> int:
    from luca_gym.harness import ResultsError
    from luca_gym.llm.loop import ProviderError
    from luca_gym.llm.recording import CassetteMiss

    command, _ = world_named(argv)
    try:
        world = chosen_world(argv)
    except ValueError as exc:  # before any parser: the help of a world that is not one cannot be shown
        print(f"luca-gym {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = build_parser(world).parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ResultsError, ValueError) as exc:
        print(f"luca-gym {args.command}: error: {_as_flags(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except CassetteMiss as exc:  # the run differs from the recorded one: a usage error, as the help says
        print(f"luca-gym {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ProviderError as exc:
        print(f"luca-gym {args.command}: error: {exc}; completed sessions are saved and a rerun resumes", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted; {_INTERRUPTED.get(args.command, 'nothing more was written')}", file=sys.stderr)
        return 130


# What an interrupted command leaves behind, said on Ctrl-C.
_INTERRUPTED = {
    "eval": "completed sessions are saved and a rerun resumes",
    "train": "a run stopped before its first update leaves no folder; a later one keeps its learning curve so far",
}

