"""``luca-gym show``: one recorded session drawn by its world's viewer (LUCA's:
a timeline PNG of calls, phenotypes, predictions, diagnosis and rescue), or
its whole transcript printed (``--transcript``, any world); a session picked
by seed, agent and key settings (each world's hook may add options that
narrow it, LUCA's ``--tier``, ...)."""

from __future__ import annotations

import os
import sys

from luca_gym.cli.common import bool_setting, setting_values, writable_dir
from luca_gym.cli.report import results_notes
from luca_gym.cli.world_options import add_plugin_world_argument, bool_fields, hooks, register_plugin_worlds


def add_parser(sub) -> None:
    """``show``'s parser (every world's hook may add options that narrow the sessions)."""
    p = sub.add_parser("show", help="draw one recorded session with its world's viewer (LUCA's: a timeline PNG of calls, "
                                    "phenotypes, predictions, diagnosis, rescue)")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--seed", type=int, required=True, help="the session's instance seed")
    p.add_argument("--agent", required=True, help="the session's agent, as recorded (e.g. random, openai:MODEL)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="narrow to sessions with this key setting (repeatable; the first session matching is drawn)")
    for hook in hooks().values():
        if hasattr(hook, "add_show_arguments"):
            hook.add_show_arguments(p)
    p.add_argument("--transcript", action="store_true",
                   help="print the session's whole transcript (any world: every message, tool call and result) "
                        "instead of drawing it")
    p.add_argument("--out", default=None,
                   help="PNG to write (default: RESULTS_FOLDER/ + the viewer's name for the session, LUCA's "
                        "session_<agent>_<tier>_<mode>_<seed>.png, with _N<n> for N other than 20 and _backwards)")
    add_plugin_world_argument(p)
    p.set_defaults(func=cmd_show)


def cmd_show(args) -> int:
    """Draw one recorded session with its world's viewer and print the path (one
    line); when several sessions match, a note on stderr names the one drawn."""
    from luca_gym import harness as ev
    from luca_gym import worlds
    from luca_gym.results import report

    register_plugin_worlds(args)
    with results_notes():
        records = ev.load_sessions(args.results)
    filters = {}
    for name, hook in hooks().items():
        if hasattr(hook, "show_filters"):
            filters.update({k: v for k, v in hook.show_filters(args).items() if v is not None})
    # A record is of any world: a key read as a bool where each world that has it types it bool.
    every = [worlds.get(name) for name in worlds.names()]
    bools = set().union(*map(bool_fields, every)) - {f for w in every for f in set(w.config_fields()) - bool_fields(w)}
    for text in args.set:
        key, values = setting_values(text)
        values = [bool_setting(v, key) for v in values] if key in bools else values
        filters[key] = values[0] if len(values) == 1 else values
    if args.transcript:
        from luca_gym.results.transcripts import transcript_text

        record, note = report.pick_session(records, args.seed, args.agent, **filters)
        if note:
            print(f"luca-gym show: note: {note}", file=sys.stderr)
        print(transcript_text(record), end="")
        return 0
    record, viewer, out, note = report.session_to_draw(records, args.results, args.seed, args.agent, args.out, **filters)
    writable_dir(os.path.dirname(os.path.abspath(out)), "out")
    # The viewer may rebuild the instance and starts matplotlib: seconds (more while JAX compiles a first run).
    print(f"luca-gym show: drawing the session (agent {record.get('agent')}, seed {record.get('seed')}) into {out} ...",
          file=sys.stderr, flush=True)
    viewer.draw_session(record, out)
    if note:
        print(f"luca-gym show: note: {note}", file=sys.stderr)
    print(out)
    return 0
