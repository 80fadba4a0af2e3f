"""LUCA's part of the ``luca-gym`` command (``World.cli``): its settings as
options of the generic commands (``eval --tiers/--modes/--n-genes``, ``train
--tier/--mode/--n-genes``, ``mcp`` and ``show``), what ``eval`` prints after a
sweep (the paper-format composite and scaling tables, the ablations), and its
own commands: ``fidelity`` (the paper's tables against ours), ``info`` (one
organism) and ``play`` (a session at the terminal; ``--out`` records it for
``show`` and ``report``). Importing this module imports no JAX: the generic
command builds its parser from it for ``--help``.

``info``, ``play`` and ``mcp`` take the same arguments and show the same
organism (``info`` generates it alone, without compiling a session);
``play`` and ``mcp`` drive it through the very dispatcher an LLM agent uses
(:class:`~luca_gym.worlds.luca.tools.ToolSession`).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from luca_gym.cli.common import UsageError, defer_arguments, ints, names, parse_seeds, seal_of, sealed_arguments, writable_dir
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

# Choices shown in --help; the values are checked by the library, so a bad one
# gets the same one-line error (and exit code 2) as every other user error.
TIER_CHOICES = "{" + ",".join(TIER_NAMES) + "}"
MODE_CHOICES = "{" + ",".join(MODES) + "}"

ABLATIONS = ("backwards", "vocabulary", "stance")  # WORLD.contrasts' names (the generic eval's --ablation)


def ablation_arguments(p) -> None:
    p.add_argument("--vocabulary", default=None, metavar="{invented,real}",
                   help="gene names: invented G001... (default) or real human gene symbols, N <= 50 (appendix E.2)")
    p.add_argument("--stance", default=None, metavar="{suppress,permit}",
                   help="the system prompt on biological knowledge: suppress (default) or permit (appendix E.2; "
                        "tool-calling agents read it, baselines do not)")


def conditions(args) -> dict:
    """``backwards``, ``vocabulary`` and ``stance`` for :func:`luca_gym.harness.plan_world`
    from ``--backwards``, ``--vocabulary`` and ``--stance`` (``--ablation``, the
    generic command's, then plans both arms of a contrast)."""
    return {"backwards": args.backwards, "vocabulary": args.vocabulary or "invented", "stance": args.stance or "suppress"}


def given_settings(args) -> set:
    """The conditions the user fixed with an option (``--ablation`` refuses to vary them)."""
    return {name for name, given in (("backwards", args.backwards), ("vocabulary", args.vocabulary is not None),
                                     ("stance", args.stance is not None)) if given}


def cmd_fidelity(args) -> int:
    from luca_gym.worlds.luca import fidelity

    seeds = parse_seeds(args.seeds)
    scaling_seeds = None if args.scaling_seeds is None else parse_seeds(args.scaling_seeds)
    tiers = names(args.tiers, "tier", ", ".join(TIER_NAMES))
    agents = names(args.agents, "agent", "the batched baselines")
    tables = names(args.tables, "tables", ", ".join(fidelity.TABLES))
    n_genes = ints(args.n_genes, "n-genes")
    # Every argument checked (naming it and what is allowed) before the folder is made: a refusal leaves nothing behind.
    fidelity.check_arguments(seeds, tiers, agents, n_genes, scaling_seeds, tables)
    writable_dir(args.out)
    report = fidelity.run(seeds, tiers, agents, n_genes, scaling_seeds, tables, log=None if args.quiet else fidelity.stderr_log)
    fidelity.write_report(report, args.out)
    print(fidelity.format_tables(report))
    print(f"{fidelity.summary_line(report)} ({report['wall_s']:.0f} s); report: {os.path.join(args.out, 'fidelity.md')}")
    return 0


def _abbreviated(items: list[str], what: str, head: int = 6, tail: int = 2) -> str:
    """``items`` comma-separated; more than ``head + tail + 1`` of them (N of a
    few hundred has 40 signals or more): the first ``head``, ``...``, the last
    ``tail`` and the count, so that a description stays a few lines (``play``'s
    ``info`` lists them all)."""
    if len(items) <= head + tail + 1:
        return ", ".join(items)
    return f"{', '.join(items[:head])}, ..., {', '.join(items[-tail:])} ({len(items)} {what})"


def describe(organism) -> str:
    """A short public description of an organism plus its size figures."""
    from luca_gym.worlds.luca.generator import sizes

    a, m = organism.arrays, organism.meta
    sz = sizes(m.n_genes)
    signals = _abbreviated([f"{label} ({mode})" for label, mode in zip(m.signal_labels, m.signal_modes)], "signals")
    return "\n".join(
        [
            f"organism seed={m.seed} tier={m.tier} N={m.n_genes} mode={m.mode}"
            f"{' backwards' if m.backwards else ''}{' real-names' if m.vocabulary == 'real' else ''}"
            f"{f' sealed {m.sealed}' if m.sealed else ''}  fingerprint {organism.fingerprint()[:16]}",
            f"  modules {sz.n_modules}, GRN edges {int(np.count_nonzero(np.asarray(a.weights)))}, "
            f"readout genes {int(np.sum(np.asarray(a.readout_mask)))}, latent genes {int(np.sum(np.asarray(a.latent_mask)))}, "
            f"budget {sz.budget}",
            f"  signals: {signals}",
            f"  phenotypes: {', '.join(m.phenotype_names)}",
        ]
    )


def open_session(args):
    """The session ``info``, ``play`` and ``mcp`` all open: a
    :class:`~luca_gym.worlds.luca.tools.ToolSession` from ``--seed``, ``--tier``,
    ``--mode``, ``--n-genes``, ``--backwards``, ``--vocabulary`` and ``--stance``."""
    from luca_gym.worlds.luca.tools import ToolSession

    from luca_gym.compile_cache import compile_notice

    seal = seal_of(args)
    with compile_notice(f"luca-gym {args.command}"):
        return ToolSession(args.seed, tier=args.tier, mode=args.mode, n_genes=args.n_genes, backwards=args.backwards,
                           sealed=seal, vocabulary=args.vocabulary, stance=getattr(args, "stance", "suppress"))


def cmd_info(args) -> int:
    from luca_gym.compile_cache import compile_notice
    from luca_gym.worlds.luca.session import cached_organism

    if args.graph:  # a bad path is refused before any work
        writable_dir(os.path.dirname(os.path.abspath(args.graph)), "graph")
    seal = seal_of(args)
    with compile_notice("luca-gym info"):
        # The organism alone (the one play and mcp open): no session to compile.
        organism = cached_organism(args.seed, args.tier, args.n_genes, args.mode, args.backwards, sealed=seal,
                                   vocabulary=args.vocabulary)
    print(describe(organism))
    if args.graph:
        from luca_gym.worlds.luca.viewer import draw_network

        draw_network(organism, args.graph)
        print(f"  network drawn to {args.graph} (ground truth: for researchers, not for agents)")
    return 0


def cmd_play(args, stdin=None, stdout=None) -> int:
    """The REPL of :mod:`luca_gym.worlds.luca.play` over the session of ``args`` (``--json``:
    one JSON object a reply); ``stdin`` and ``stdout`` default to the terminal.

    With ``--out``, the session, once ended (``end``, or the budget spent),
    is appended to ``OUT/sessions.jsonl`` under ``--agent``, in the
    harness's format (``luca-gym show`` and ``report`` read it), its
    transcript (``PlayShell.messages``) inline as ``messages``, by the
    generic command's ``args.recording`` (a world does not import the
    harness); whether it can be recorded there is checked before the first
    call. A session left open (``quit``, end of input) is not recorded."""
    from luca_gym.worlds.luca.play import PlayShell

    out = getattr(args, "out", None)
    if out:
        writable_dir(out, "out")
        if not args.agent.strip():
            raise UsageError("agent: an empty name; give the name the session is recorded under, e.g. human")
    session = open_session(args)
    if out:
        args.recording.check(session, out, args.agent)
    started = time.perf_counter()
    shell = PlayShell(session, stdin=stdin, stdout=stdout, json_output=args.json)
    code = shell.run()
    if out and session.ended:  # with the shell's transcript (PlayShell.messages)
        path = args.recording.record(session, out, args.agent, wall_s=time.perf_counter() - started, messages=shell.messages)
        print(f"luca-gym play: session {session.instance_id} ({session.end_reason}) recorded in {path}", file=sys.stderr)
    elif out:
        print(f"luca-gym play: the session did not end (end ends it), so it is not recorded in {out}", file=sys.stderr)
    return code


def _organism_arguments(p, stance: bool = True) -> None:
    p.add_argument("--seed", type=int, default=0, help="organism seed (a non-negative integer)")
    p.add_argument("--tier", default="medium", metavar=TIER_CHOICES, help="organism tier")
    p.add_argument("--mode", default="healthy", metavar=MODE_CHOICES, help="healthy, or disease (one hidden malfunction)")
    p.add_argument("--n-genes", type=int, default=20, metavar="N", help="organism size N (4..4096)")
    p.add_argument("--backwards", action="store_true", help="the sign-inverted organism (appendix E.1)")
    p.add_argument("--vocabulary", default="invented", metavar="{invented,real}",
                   help="gene names: invented G001... or real human gene symbols, N <= 50 (appendix E.2)")
    if stance:
        p.add_argument("--stance", default="suppress", metavar="{suppress,permit}",
                       help="the prompt's stance on biological knowledge (appendix E.2)")
    sealed_arguments(p)


def _fidelity_arguments(p) -> None:
    from luca_gym.worlds.luca.fidelity import DEFAULT_AGENTS, DEFAULT_SCALING_N, SCALING_SEEDS, TABLES

    p.add_argument("--seeds", default="0-19", help="organisms for Tables 3, 6, 7, 8 (the paper: 20 per tier), e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--tiers", default=",".join(TIER_NAMES), help=f"comma-separated tiers for Tables 3, 6, 7, 8 (default {','.join(TIER_NAMES)})")
    p.add_argument("--agents", default=",".join(DEFAULT_AGENTS),
                   help="comma-separated batched baselines (luca_gym.worlds.luca.baselines.batched.POLICIES; the paper has figures "
                        f"for {', '.join(DEFAULT_AGENTS)})")
    p.add_argument("--n-genes", default=",".join(map(str, DEFAULT_SCALING_N)),
                   help="sizes for Table 11, comma-separated (default %(default)s, for speed on a CPU; the paper also "
                        "has 320, 640, 1280, allowed but slow)")
    p.add_argument("--scaling-seeds", default=None,
                   help=f"organisms for Table 11 (the paper: 10 per cell; default the first {SCALING_SEEDS} of --seeds)")
    p.add_argument("--tables", default=",".join(TABLES), help=f"which tables to compute, comma-separated (default {','.join(TABLES)})")
    p.add_argument("--out", default="results/fidelity", help="folder for fidelity.md, fidelity.json and figures (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _given(value, default):
    """An option's value, or its default where it was not given (None)."""
    return default if value is None else value


class LucaCLI:
    """What the generic ``luca-gym`` command asks of LUCA (``World.cli``).

    Options a world adds to a generic command default to None (or False), so
    that the command can tell a given option of another world from an unused
    one and refuse it."""

    @property
    def default_agents(self) -> tuple:
        """The paper's three baselines (``eval``'s agents when ``--agents`` is left out)."""
        from luca_gym.worlds.luca.baselines import PAPER_BASELINES

        return PAPER_BASELINES

    # -- eval ---------------------------------------------------------------------------
    def add_eval_arguments(self, p) -> None:
        p.add_argument("--tiers", default=None, help=f"LUCA: comma-separated, of {', '.join(TIER_NAMES)} (default: all)")
        p.add_argument("--modes", default=None, help=f"LUCA: comma-separated, of {', '.join(MODES)} (default: both)")
        p.add_argument("--n-genes", default=None, help="LUCA: organism sizes N (4..4096), comma-separated, e.g. 20,40,80 (default 20)")
        p.add_argument("--backwards", action="store_true", help="LUCA: sign-inverted organisms (appendix E.1)")
        ablation_arguments(p)

    def eval_settings(self, args) -> dict:
        """The key settings of ``--tiers``, ``--modes``, ``--n-genes`` and the conditions (lists: a sweep's axes)."""
        return {
            "tier": names(_given(args.tiers, ",".join(TIER_NAMES)), "tier", ", ".join(TIER_NAMES)),
            "mode": names(_given(args.modes, ",".join(MODES)), "mode", ", ".join(MODES)),
            "n_genes": ints(_given(args.n_genes, "20"), "n-genes"),
            **conditions(args),
        }

    def given_settings(self, args) -> set:
        return given_settings(args)

    def progress_label(self, spec) -> str:
        """The progress bar's line for a session: its organism and the arms that differ from the default."""
        arms = [a for a, on in (("backwards", spec.backwards), (spec.vocabulary, spec.vocabulary != "invented"),
                                (spec.stance, spec.stance != "suppress")) if on]
        budget = spec.options().get("budget")
        arms += [f"budget {budget}"] if budget is not None else []
        return f"{spec.agent} {spec.tier} {spec.mode} N={spec.n_genes}{''.join(' ' + a for a in arms)} seed {spec.seed}"

    def eval_summary(self, records, specs) -> str:
        """The composite table per N (the paper's figures in brackets), the
        ablations when both arms ran, and the scaling table when several N did.
        At a budget of ``--budget`` the tables say so and leave out the
        paper's figures (measured at the default budget), and the scaling
        table (its budget column is the default's) gives way to a note."""
        from luca_gym.worlds.luca import ablation, tables

        n_genes = list(dict.fromkeys(s.n_genes for s in specs))
        seeds = {s.seed for s in specs}
        budget = next((s.options()["budget"] for s in specs if "budget" in s.options()), None)
        at = "" if budget is None else f", budget {budget}"
        paper = "paper figures in brackets" if budget is None else "the paper's figures are at the default budget: not shown"
        main, note = ablation.main_records(records)
        parts = []
        for n in n_genes:
            parts.append(f"\nComposite score, N={n}{at} ({len(seeds)} seed{'' if len(seeds) == 1 else 's'}; mean ± population std; {paper})")
            parts.append(tables.composite_table(main, n, with_paper=budget is None))
        parts += tables.baseline_notes(main)
        if note:
            parts.append(f"({note})\n\n{ablation.section(records)}")
        scaling = any((r["tier"], r["mode"]) == ("medium", "healthy") for r in records)  # the paper's table is of those
        if len(n_genes) > 1 and budget is None and scaling:
            parts.append("\nScaling (medium healthy, prediction accuracy)")
            parts.append(tables.scaling_table(records))
        elif len(n_genes) > 1 and scaling:
            parts.append(f"\n(Scaling table left out: it is the paper's, at the default budget of each N; this sweep ran at budget {budget}.)")
        return "\n".join(parts)

    # -- train --------------------------------------------------------------------------
    def add_train_arguments(self, p) -> None:
        p.add_argument("--tier", default=None, metavar=TIER_CHOICES, help="LUCA: organism tier (default easy)")
        p.add_argument("--mode", default=None, metavar=MODE_CHOICES, help="LUCA: healthy or disease (default healthy)")
        p.add_argument("--n-genes", type=int, default=None, metavar="N", help="LUCA: organism size N (4..4096; default 20)")
        p.add_argument("--analyst", default=None, metavar="{logit-additive,constant}",
                       help="LUCA: who writes predictions, network and diagnosis (default logit-additive)")

    def train_settings(self, args) -> dict:
        # The budget is the generic command's --budget (luca_gym.cli.world_options.with_budget), checked by LucaConfig.
        return {"tier": _given(args.tier, "easy"), "mode": _given(args.mode, "healthy"), "n_genes": _given(args.n_genes, 20),
                "analyst": _given(args.analyst, "logit-additive")}

    # -- mcp and show -------------------------------------------------------------------
    def add_session_arguments(self, p) -> None:
        """``mcp``'s organism options (its ``--seed`` and seal options are the command's own)."""
        p.add_argument("--tier", default=None, metavar=TIER_CHOICES, help="LUCA: organism tier (default medium)")
        p.add_argument("--mode", default=None, metavar=MODE_CHOICES, help="LUCA: healthy, or disease (default healthy)")
        p.add_argument("--n-genes", type=int, default=None, metavar="N", help="LUCA: organism size N (4..4096; default 20)")
        p.add_argument("--backwards", action="store_true", help="LUCA: the sign-inverted organism (appendix E.1)")
        p.add_argument("--vocabulary", default=None, metavar="{invented,real}",
                       help="LUCA: gene names, invented G001... (default) or real human gene symbols, N <= 50")
        p.add_argument("--stance", default=None, metavar="{suppress,permit}",
                       help="LUCA: the prompt's stance on biological knowledge (default suppress; appendix E.2)")

    def session_settings(self, args) -> dict:
        return {"tier": _given(args.tier, "medium"), "mode": _given(args.mode, "healthy"), "n_genes": _given(args.n_genes, 20),
                "backwards": args.backwards, "vocabulary": _given(args.vocabulary, "invented"),
                "stance": _given(args.stance, "suppress")}

    def instructions(self, settings: dict) -> str:
        """The MCP server's instructions (the system prompt), before the organism is generated."""
        from luca_gym.worlds.luca.core import make_params
        from luca_gym.worlds.luca.tools import system_prompt

        params = make_params(settings["tier"], settings["n_genes"], settings["mode"])
        return system_prompt(params.disease, params.max_steps, vocabulary=settings["vocabulary"], stance=settings["stance"])

    def add_show_arguments(self, p) -> None:
        p.add_argument("--tier", default=None, metavar=TIER_CHOICES, help="LUCA: narrow to this tier (default: any; the first session matching is drawn)")
        p.add_argument("--mode", default=None, metavar=MODE_CHOICES, help="LUCA: narrow to this mode (default: any)")
        p.add_argument("--n-genes", type=int, default=None, help="LUCA: narrow to this organism size (default: any)")

    def show_filters(self, args) -> dict:
        return {"tier": args.tier, "mode": args.mode, "n_genes": args.n_genes}

    # -- LUCA's own commands ------------------------------------------------------------
    def add_commands(self, sub) -> None:
        p = sub.add_parser(
            "fidelity",
            help="our world's figures against the paper's Tables 3, 6, 7, 8 and 11, with bands and verdicts",
            description="Measure the world's organism statistics (Table 3 and Table 1's loop counts) and the batched "
            "baselines' scores (Tables 6, 7, 8 at N=20; Table 11, medium healthy, against N), compare each figure with "
            "the paper's within its band (see the docstring of luca_gym.worlds.luca.fidelity), print the verdicts and write "
            "fidelity.md, fidelity.json and PNG figures into --out. Exit code 0 whatever the verdicts (a report); "
            "2 on bad arguments.",
        )
        defer_arguments(p, _fidelity_arguments)  # its defaults live in the fidelity module, which imports JAX
        p.set_defaults(func=cmd_fidelity)

        for name, helptext, func in (("info", "describe one organism", cmd_info),
                                     ("play", "run a session at the terminal", cmd_play)):
            p = sub.add_parser(name, help=f"LUCA: {helptext}", description=helptext[0].upper() + helptext[1:] + ".")
            _organism_arguments(p, stance=name != "info")
            if name == "info":
                p.add_argument("--graph", default=None, help="draw the true network to this PNG")
            if name == "play":
                p.add_argument("--json", action="store_true",
                               help="for scripts: each reply as one JSON object a line (the call's result as an agent gets it), "
                                    "no banner, no prompt")
                p.add_argument("--out", default=None, metavar="DIR",
                               help="record the session, once ended, in DIR/sessions.jsonl, the harness's format: "
                                    "luca-gym show and report read it")
                p.add_argument("--agent", default="human", metavar="NAME",
                               help="the agent's name in the record (default %(default)s); one session per agent and instance")
            p.set_defaults(func=func)


CLI = LucaCLI()
