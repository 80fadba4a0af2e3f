"""``luca-gym report``: markdown tables, PNG figures and ``report.html``
(each session's transcript linked) from a results folder, each step said on
stderr as it starts; what reading the results noted (e.g. duplicate lines
dropped) as one ``note:`` line each (:func:`results_notes`, ``show``'s too)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings

from luca_gym.cli.common import say_steps, writable_dir
from luca_gym.cli.world_options import add_plugin_world_argument, register_plugin_worlds


def add_parser(sub) -> None:
    """``report``'s parser."""
    p = sub.add_parser("report", help="markdown tables, PNG figures and report.html (with each transcript) from a results folder")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--out", default=None, help="where to write report.md, report.html and figures (default: the results folder)")
    add_plugin_world_argument(p)
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    """Write the report; each step it starts is said on stderr (``report: ...``)."""
    from luca_gym.results.report import log, results_folder, write_report

    if args.out:
        writable_dir(args.out)
    register_plugin_worlds(args)
    with results_notes(), say_steps(log, "report"):
        text = write_report(args.results, args.out)
    folder = args.out or results_folder(args.results)
    print(os.path.join(folder, "report.md"))
    print(os.path.join(folder, "report.html"))
    for figure in dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)):
        print(os.path.join(folder, figure))
    return 0


@contextlib.contextmanager
def results_notes():
    """Print what reading a results file noted (e.g. duplicate lines dropped) as one ``note:`` line each on stderr."""
    from luca_gym.harness import ResultsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResultsWarning)
        yield
    for w in caught:
        if issubclass(w.category, ResultsWarning):
            print(f"note: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
