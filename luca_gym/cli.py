"""The ``luca-gym`` command: ``eval``, ``train``, ``report``, ``fidelity``, ``info``, ``play`` and ``mcp``.

``info``, ``play`` and ``mcp`` open their session from the same arguments
through one function (:func:`open_session`), so all three show the same
organism; ``play`` and ``mcp`` drive it through the very dispatcher an LLM
agent uses (:class:`~luca_gym.wrappers.llm.ToolSession`).

Bad input (unknown agent, tier or mode, a bad seed range, an unwritable
folder, a corrupt results line) gets one line on stderr naming the problem and
what is allowed, and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import numpy as np

from luca_gym import world
from luca_gym.baselines import BASELINES, PAPER_BASELINES
from luca_gym.spec import MALFUNCTION_TYPES, MODES, TIER_NAMES

EXIT_USAGE = 2
MAX_SEEDS = 100_000
TRAIN_ALGOS = ("ppo", "maskable-ppo")
# Defaults per algorithm: the JAX PPO steps thousands of envs in one program;
# MaskablePPO steps a vector env from Python and learns from far fewer steps.
TRAIN_DEFAULTS = {"ppo": {"steps": 5_000_000, "num_envs": 1024}, "maskable-ppo": {"steps": 200_000, "num_envs": 64}}


class UsageError(ValueError):
    pass


def parse_seeds(text: str) -> list[int]:
    """``"0-19"``, ``"0,3,7"`` or ``"0-4,10"`` -> sorted unique seeds (each
    checked by :func:`luca_gym.spec.check_seed` when the sweep is planned)."""
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


def _names(text: str, what: str, allowed: str) -> list[str]:
    """A comma-separated list -> its unique non-empty items (checked by the sweep's plan)."""
    items = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not items:
        raise UsageError(f"{what}: empty; allowed {allowed}")
    return items


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a comma-separated list of integers") from None
    if not values:
        raise UsageError(f"{what}: empty; give one or more sizes, e.g. 20 or 20,40,80")
    return list(dict.fromkeys(values))


def _writable_dir(path: str, what: str = "out") -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what}: cannot create folder {path!r} ({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"{what}: folder {path!r} is not writable")


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet or not sys.stderr.isatty()
        self.started = time.perf_counter()

    def __call__(self, i: int, total: int, spec) -> None:
        if self.quiet or total == 0:
            return
        width = 30
        filled = int(width * i / total)
        elapsed = time.perf_counter() - self.started
        what = f"{spec.agent} {spec.tier} {spec.mode} N={spec.n_genes} seed {spec.seed}" if spec else "done"
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {i}/{total} {elapsed:6.1f}s  {what:<48}")
        if spec is None:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_eval(args) -> int:
    from luca_gym import eval as ev

    agents = _names(args.agents, "agent", ev.AGENTS_ALLOWED)
    tiers = _names(args.tiers, "tier", ", ".join(TIER_NAMES))
    modes = _names(args.modes, "mode", ", ".join(MODES))
    seeds = parse_seeds(args.seeds)
    n_genes = _ints(args.n_genes, "n-genes")
    specs = ev.plan(agents, tiers, modes, n_genes, seeds, backwards=args.backwards)
    _writable_dir(args.out)
    # Learned agents load once, before any session: a bad checkpoint stops the
    # sweep before it starts, and every session reuses the loaded weights.
    learned = {a: ev.make_runner(a) for a in agents if ev.is_learned_agent(a)}
    factory = lambda name: learned[name] if name in learned else ev.make_runner(name, args.base_url)  # noqa: E731
    path = ev.sweep(specs, args.out, policy_factory=factory, progress=Progress(args.quiet))
    wanted = {spec.key() for spec in specs}
    records = [r for r in ev.load_sessions(path) if tuple(r[k] for k in ev.KEY_FIELDS) in wanted]
    for n in n_genes:
        print(f"\nComposite score, N={n} ({len(seeds)} seeds; mean ± population std; paper figures in brackets)")
        print(ev.composite_table(records, n))
    if len(n_genes) > 1:
        print("\nScaling (medium healthy, prediction accuracy)")
        print(ev.scaling_table(records))
    print(f"\nsessions: {path}")
    return 0


class TrainProgress:
    """A one-line training progress line on stderr, one update per call; the
    rate is that of the last update (the first one also compiles)."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet or not sys.stderr.isatty()
        self.last = (0, 0.0)

    def __call__(self, row: dict) -> None:
        if self.quiet:
            return
        width = 30
        filled = int(width * row["update"] / row["updates"])
        rate = (row["env_steps"] - self.last[0]) / max(row["wall_s"] - self.last[1], 1e-9)
        self.last = (row["env_steps"], row["wall_s"])
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] update {row['update']}/{row['updates']} "
            f"{row['env_steps'] / 1e6:.2f}M steps {row['wall_s']:7.1f}s {rate / 1e3:5.1f}k steps/s  "
            f"composite {row['mean_composite']:.3f}"
        )
        if row["update"] == row["updates"]:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_train(args) -> int:
    if args.algo not in TRAIN_ALGOS:
        raise UsageError(f"algo: {args.algo!r} unknown; allowed {', '.join(TRAIN_ALGOS)}")
    defaults = TRAIN_DEFAULTS[args.algo]
    steps = defaults["steps"] if args.steps is None else args.steps
    num_envs = defaults["num_envs"] if args.num_envs is None else args.num_envs
    if args.pool_size is not None and args.algo != "ppo":
        raise UsageError(f"pool-size: applies to --algo ppo only (a fixed pool of training organisms), not {args.algo}")
    if args.algo == "maskable-ppo":
        try:
            from luca_gym.agents.sb3 import train_maskable_ppo
        except ImportError:
            raise UsageError('algo: maskable-ppo needs the rl extra (sb3-contrib); pip install -e ".[rl]"') from None
        _writable_dir(args.out)
        summary = train_maskable_ppo(args.tier, args.mode, args.n_genes, args.budget, steps, num_envs, args.out,
                                     seed=args.seed, analyst=args.analyst)
        print(f"trained maskable-ppo: {summary['steps']} steps in {summary['wall_s']:.1f} s "
              f"({summary['steps_per_s']:.0f} steps/s), mean return {summary['mean_return']:.3f}")
        print(f"run folder: {args.out}  (evaluate: luca-gym eval --agents sb3:{os.path.join(args.out, 'model.zip')})")
        return 0
    from luca_gym.agents import ppo

    settings = {"pool_size": args.pool_size} if args.pool_size is not None else {}
    config = ppo.PPOConfig(tier=args.tier, mode=args.mode, n_genes=args.n_genes, budget=args.budget, analyst=args.analyst,
                           steps=steps, num_envs=num_envs, seed=args.seed, **settings)
    _writable_dir(args.out)
    summary = ppo.train(config, args.out, progress=TrainProgress(args.quiet))
    rate = f"{summary['steps_per_s']:.0f} steps/s after the first update" if summary["steps_per_s"] else "one update"
    print(f"trained ppo: {summary['env_steps']} steps in {summary['wall_s']:.1f} s ({rate}), "
          f"last update's composite {summary['final_composite']:.3f}")
    print(f"run folder: {args.out}  (evaluate: luca-gym eval --agents ppo:{args.out})")
    return 0


def cmd_report(args) -> int:
    from luca_gym.report import write_report

    if args.out:
        _writable_dir(args.out)
    text = write_report(args.results, args.out)
    print(text)
    return 0


def cmd_fidelity(args) -> int:
    from luca_gym import fidelity

    seeds = parse_seeds(args.seeds)
    scaling_seeds = None if args.scaling_seeds is None else parse_seeds(args.scaling_seeds)
    tiers = _names(args.tiers, "tier", ", ".join(TIER_NAMES))
    agents = _names(args.agents, "agent", "the batched baselines")
    tables = _names(args.tables, "tables", ", ".join(fidelity.TABLES))
    n_genes = _ints(args.n_genes, "n-genes")
    _writable_dir(args.out)
    # run() checks every argument (naming it and what is allowed) before any work.
    report = fidelity.run(seeds, tiers, agents, n_genes, scaling_seeds, tables, log=None if args.quiet else fidelity.stderr_log)
    fidelity.write_report(report, args.out)
    print(fidelity.format_tables(report))
    print(f"{fidelity.summary_line(report)} ({report['wall_s']:.0f} s); report: {os.path.join(args.out, 'fidelity.md')}")
    return 0


def describe(organism) -> str:
    """A short public description of an organism plus its size figures."""
    a, m = organism.arrays, organism.meta
    sz = world.sizes(m.n_genes)
    signals = ", ".join(f"{label} ({mode})" for label, mode in zip(m.signal_labels, m.signal_modes))
    return "\n".join(
        [
            f"organism seed={m.seed} tier={m.tier} N={m.n_genes} mode={m.mode}"
            f"{' backwards' if m.backwards else ''}  fingerprint {organism.fingerprint()[:16]}",
            f"  modules {sz.n_modules}, GRN edges {int(np.count_nonzero(np.asarray(a.weights)))}, "
            f"readout genes {int(np.sum(np.asarray(a.readout_mask)))}, latent genes {int(np.sum(np.asarray(a.latent_mask)))}, "
            f"budget {sz.budget}",
            f"  signals: {signals}",
            f"  phenotypes: {', '.join(m.phenotype_names)}",
        ]
    )


def open_session(args):
    """The session ``info``, ``play`` and ``mcp`` all open: a
    :class:`~luca_gym.wrappers.llm.ToolSession` from ``--seed``, ``--tier``,
    ``--mode``, ``--n-genes`` and ``--backwards``."""
    from luca_gym.wrappers.llm import ToolSession

    return ToolSession(args.seed, tier=args.tier, mode=args.mode, n_genes=args.n_genes, backwards=args.backwards)


def cmd_info(args) -> int:
    organism = open_session(args).env.organism
    print(describe(organism))
    if args.graph:
        from luca_gym.report import draw_network

        folder = os.path.dirname(os.path.abspath(args.graph))
        _writable_dir(folder, "graph")
        draw_network(organism, args.graph)
        print(f"  network drawn to {args.graph} (ground truth: for researchers, not for agents)")
    return 0


PLAY_HELP = """calls (the same as an agent's; names as shown by `info`; each result prints as JSON):
  info                                  get_organism_info: organism, budget, baseline, aberrant phenotypes
  experiment G003=BLOCK G007=BOOST SIG=ACTIVATE   run_experiment (1 unit)
  task                                  get_next_prediction_task
  predict 0.41 0.62 0.50                submit_prediction (one value per phenotype, in order)
  hypothesis free text ...              submit_hypothesis (stored, not scored)
  network G003:PHENOTYPE:+ ...          submit_network (+ raises, - lowers)
  diagnose TARGET LOCK_HI|LOCK_LO|PERSIST   submit_malfunction_hypothesis (one-way)
  rescue G003=DAMPEN ...                test_rescue (1 unit, after diagnose)
  end                                   end the session and see the scores
  help | quit"""


def _interventions(words: list[str]) -> dict:
    return {"interventions": {target: {"type": kind} for target, _, kind in (w.partition("=") for w in words)}}


def play_call(meta, words: list[str]) -> tuple[str, dict]:
    """One typed command -> (call name, arguments), for :meth:`ToolSession.call`,
    which checks the arguments. Raises ValueError for words that make no call."""
    verb, rest = words[0].lower(), words[1:]
    if verb == "info":
        return "get_organism_info", {}
    if verb == "experiment":
        return "run_experiment", _interventions(rest)
    if verb == "rescue":
        return "test_rescue", _interventions(rest)
    if verb == "task":
        return "get_next_prediction_task", {}
    if verb == "predict":
        names = meta.phenotype_names
        if len(rest) != len(names):
            raise ValueError(f"predict: give {len(names)} numbers, one per phenotype ({', '.join(names)}); got {len(rest)}")
        try:
            return "submit_prediction", {"predictions": {p: float(x) for p, x in zip(names, rest)}}
        except ValueError:
            raise ValueError(f"predict: {' '.join(rest)[:60]!r} are not all numbers") from None
    if verb == "hypothesis":
        return "submit_hypothesis", {"text": " ".join(rest)}
    if verb == "network":
        edges = [item.split(":") for item in rest]
        for item, parts in zip(rest, edges):
            if len(parts) != 3:
                raise ValueError(f"network: {item[:40]!r} is not an edge; write GENE:PHENOTYPE:+ or GENE:PHENOTYPE:-")
        return "submit_network", {"edges": [{"gene": g, "phenotype": p, "direction": d} for g, p, d in edges]}
    if verb == "diagnose":
        if len(rest) != 2:
            raise ValueError(f"diagnose: give TARGET and TYPE ({', '.join(MALFUNCTION_TYPES[1:])})")
        return "submit_malfunction_hypothesis", {"target_name": rest[0], "malfunction_type": rest[1]}
    if verb == "end":
        return "end", {}
    raise ValueError(f"unknown call {verb!r}; type help")


def cmd_play(args, stdin=None, stdout=None) -> int:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    session = open_session(args)
    say = lambda text: print(text, file=stdout, flush=True)  # noqa: E731
    say(
        f"LUCA {args.tier} {args.mode}{' backwards' if args.backwards else ''}: {session.meta.n_genes} genes, "
        f"budget {session.env.params.budget}. Type help."
    )
    while True:
        stdout.write("luca> ")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return 0
        try:
            words = shlex.split(line)
        except ValueError as exc:
            say(f"error: {exc}; quote text with matching quotes")
            continue
        if not words:
            continue
        verb = words[0].lower()
        if verb in ("quit", "exit"):
            return 0
        if verb == "help":
            say(PLAY_HELP)
            continue
        try:
            name, arguments = play_call(session.meta, words)
        except ValueError as exc:
            say(f"error: {exc}")
            continue
        say(json.dumps(session.call(name, arguments)))
        if session.ended:
            say("session over")
            return 0


def cmd_mcp(args) -> int:
    from luca_gym.wrappers.mcp_server import serve

    serve(open_session(args))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="luca-gym", description="LUCA: a synthetic world for experimental reasoning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="run a sweep of agents over organisms (resumable)")
    p.add_argument(
        "--agents", default=",".join(PAPER_BASELINES),
        help=f"comma-separated: {', '.join(BASELINES)}, openai:MODEL, anthropic:MODEL, ppo:RUN_DIR, sb3:FILE.zip",
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai:MODEL agents (local servers too)")
    p.add_argument("--tiers", default=",".join(TIER_NAMES))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--seeds", default="0-19", help="e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--n-genes", default="20", help="comma-separated, e.g. 20,40,80")
    p.add_argument("--backwards", action="store_true", help="sign-inverted organisms (appendix E.1)")
    p.add_argument("--out", default="results", help="results folder (sessions.jsonl is appended)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("train", help="train a learned agent on the flat action space (experiments chosen, values by an analyst)")
    p.add_argument("--algo", default="ppo", help="ppo (pure JAX, this package) or maskable-ppo (sb3-contrib, the rl extra)")
    p.add_argument("--tier", default="easy")
    p.add_argument("--mode", default="healthy")
    p.add_argument("--n-genes", type=int, default=20)
    p.add_argument("--budget", type=int, default=None, help="experiment budget (default: the paper's N + S + 8)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"env steps (default: ppo {TRAIN_DEFAULTS['ppo']['steps']}, maskable-ppo {TRAIN_DEFAULTS['maskable-ppo']['steps']})")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"envs side by side (default: ppo {TRAIN_DEFAULTS['ppo']['num_envs']}, "
                        f"maskable-ppo {TRAIN_DEFAULTS['maskable-ppo']['num_envs']})")
    p.add_argument("--pool-size", type=int, default=None,
                   help="ppo: training organisms, seeds 10000 .. 10000+SIZE-1 (default 1024; never the evaluation seeds 0-19)")
    p.add_argument("--out", required=True, help="run folder (checkpoint, config, learning curve CSV and PNG)")
    p.add_argument("--seed", type=int, default=0, help="the run's random seed")
    p.add_argument("--analyst", default="logit-additive", help="who writes predictions, network and diagnosis: logit-additive or constant")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("report", help="markdown tables and PNG figures from a results folder")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--out", default=None, help="where to write report.md and figures (default: the results folder)")
    p.set_defaults(func=cmd_report)

    from luca_gym.fidelity import DEFAULT_AGENTS, DEFAULT_SCALING_N, SCALING_SEEDS, TABLES

    p = sub.add_parser(
        "fidelity",
        help="our world's figures against the paper's Tables 3, 6, 7, 8 and 11, with bands and verdicts",
        description="Measure the world's organism statistics (Table 3 and Table 1's loop counts) and the batched "
        "baselines' scores (Tables 6, 7, 8 at N=20; Table 11, medium healthy, against N), compare each figure with "
        "the paper's within its band (see the docstring of luca_gym.fidelity), print the verdicts and write "
        "fidelity.md, fidelity.json and PNG figures into --out. Exit code 0 whatever the verdicts (a report); "
        "2 on bad arguments.",
    )
    p.add_argument("--seeds", default="0-19", help="organisms for Tables 3, 6, 7, 8 (the paper: 20 per tier), e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--tiers", default=",".join(TIER_NAMES), help=f"comma-separated tiers for Tables 3, 6, 7, 8 (default {','.join(TIER_NAMES)})")
    p.add_argument("--agents", default=",".join(DEFAULT_AGENTS),
                   help="comma-separated batched baselines (luca_gym.baselines.batched.POLICIES; the paper has figures "
                        f"for {', '.join(DEFAULT_AGENTS)})")
    p.add_argument("--n-genes", default=",".join(map(str, DEFAULT_SCALING_N)),
                   help="sizes for Table 11, comma-separated (default %(default)s, for speed on a CPU; the paper also "
                        "has 320, 640, 1280, allowed but slow)")
    p.add_argument("--scaling-seeds", default=None,
                   help=f"organisms for Table 11 (the paper: 10 per cell; default the first {SCALING_SEEDS} of --seeds)")
    p.add_argument("--tables", default=",".join(TABLES), help=f"which tables to compute, comma-separated (default {','.join(TABLES)})")
    p.add_argument("--out", default="results/fidelity", help="folder for fidelity.md, fidelity.json and figures (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_fidelity)

    for name, helptext, func in (
        ("info", "describe one organism", cmd_info),
        ("play", "run a session at the terminal", cmd_play),
        ("mcp", "serve one session's tools over MCP (stdio)", cmd_mcp),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--tier", default="medium")
        p.add_argument("--mode", default="healthy")
        p.add_argument("--n-genes", type=int, default=20)
        p.add_argument("--backwards", action="store_true")
        if name == "info":
            p.add_argument("--graph", default=None, help="draw the true network to this PNG")
        p.set_defaults(func=func)
    return parser


def main(argv=None) -> int:
    from luca_gym.eval import ResultsError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ResultsError, ValueError) as exc:
        print(f"luca-gym {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted; completed sessions are saved and a rerun resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
