"""``luca-gym mcp``: one session of a world's tools served over MCP (stdio),
recorded with ``--out`` when it ends in the harness's format (``report``
and ``show`` read it). The settings are checked first (a bad one: one line,
exit 2); the instance is then generated in the background while the server
already answers ``initialize``, so a client connects at once."""

from __future__ import annotations

from luca_gym.cli.common import UsageError, python_option, sandbox_arguments, seal_of, sealed_arguments, writable_dir
from luca_gym.cli.world_options import (
    DEFAULT_WORLD,
    PYTHON_ANALYSIS_HELP,
    PYTHON_HELP,
    WORLD_HELP,
    add_world_arguments,
    config_flags,
    described,
    world_of,
    world_settings,
)


def add_parser(sub, world, flag_world) -> None:
    """``mcp``'s parser, its options ``world``'s (a world without a CLI hook, ``flag_world``: its settings as
    options, one value each)."""
    text = "serve one session's tools over MCP (stdio)"
    p = sub.add_parser("mcp", help=text, description=described("mcp", text, world))
    p.add_argument("--world", default=DEFAULT_WORLD, help=WORLD_HELP)
    p.add_argument("--seed", type=int, default=0, help="instance seed (a non-negative integer)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the world (repeatable)")
    add_world_arguments(p, "add_session_arguments", shown=world.name)
    if flag_world is not None:
        config_flags(p, flag_world, many=False)
    sealed_arguments(p)
    p.add_argument("--python", action="store_true", help=PYTHON_HELP)
    p.add_argument("--python-analysis-tools", action="store_true", help=PYTHON_ANALYSIS_HELP)
    sandbox_arguments(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="record the session, once it ends (end, the call limit or the client gone after a "
                        "tool call), in DIR/sessions.jsonl, the harness's format: luca-gym report reads it")
    p.add_argument("--agent", default="mcp-client", metavar="NAME",
                   help="the agent's name in the record (default %(default)s); one session per agent and instance")
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args) -> int:
    """Serve one session of the world's tools over MCP (stdio); with ``--out``,
    record it there when it ends.

    The settings are checked first (a bad one: one line, exit 2); the instance
    is then generated in the background while the server already answers
    ``initialize``, so a client connects at once."""
    from luca_gym import harness as ev
    from luca_gym.harness.spec import check_setting_names
    from luca_gym.protocol import SessionSpec, load
    from luca_gym.mcp.server import serve
    from luca_gym.tools.session import tool_options
    from luca_gym.validate import check_seed

    world, hook = world_of(args)
    if world.tools is None:
        raise UsageError(f"world: {world.name!r} has no tools to serve")
    if not args.agent.strip():
        raise UsageError("agent: an empty name; give the name the session is recorded under, e.g. mcp-client")
    seed = check_seed(args.seed)
    settings = world_settings(args, world, hook, "session_settings", one=True)
    for option, flag in (("python", "--python"), ("analysis_tools", "--python-analysis-tools")):
        if option in settings:
            raise UsageError(f"set: {option} is not a setting of the world; give {flag}")
    check_setting_names(world, settings)  # an unknown one named at once, before a folder is made or a session opened
    if args.out:
        writable_dir(args.out, "out")
    keys = [k for k in world.session_keys if k != "seed"]
    key_settings = ev.complete_settings(world, {k: v for k, v in settings.items() if k in keys})  # checked, defaults filled
    spec = SessionSpec(args.agent, seed, world.name, tuple(key_settings.items()))
    open_tools = load(world.tools)
    options = tool_options(open_tools, python=python_option(args), sealed=args.sealed or args.secret_file or None,
                           analysis_tools=args.python_analysis_tools)
    if args.python:
        from luca_gym.sandbox import check_analysis_packages

        check_analysis_packages()
    seal = seal_of(args)
    if args.out:
        ev.check_recordable_spec(args.out, spec, seal, ev.expected_fields(spec), python=args.python,
                                 analysis_tools=args.python_analysis_tools)

    def open_it():
        return open_tools(seed, sealed=seal, **options, **settings)

    if hook is not None and hasattr(hook, "instructions"):  # the instance is generated while the client connects
        serve(open_it, out=args.out, agent=args.agent, title=open_tools.title, instructions=hook.instructions(settings))
    else:
        serve(open_it(), out=args.out, agent=args.agent)
    return 0
