"""The ``luca-gym`` command: ``eval``, ``report``, ``info`` and ``play``.

Bad input (unknown agent, tier or mode, a bad seed range, an unwritable
folder, a corrupt results line) gets one line on stderr naming the problem and
what is allowed, and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

import numpy as np

from luca_gym import calls, core, world
from luca_gym.baselines import BASELINES

EXIT_USAGE = 2
MAX_SEEDS = 100_000


class UsageError(ValueError):
    pass


def parse_seeds(text: str) -> list[int]:
    """``"0-19"``, ``"0,3,7"`` or ``"0-4,10"`` -> sorted unique seeds."""
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
    if any(s < 0 for s in seeds):
        raise UsageError(f"seeds: {min(seeds)} is negative; seeds are integers >= 0")
    if any(s >= 2**63 for s in seeds):
        raise UsageError(f"seeds: {max(seeds)} is too large; seeds are integers below 2**63")
    return sorted(seeds)


def _names(text: str, allowed, what: str) -> list[str]:
    items = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    for x in items:
        if x not in allowed:
            raise UsageError(f"{what}: {x!r} unknown; allowed {', '.join(allowed)}")
    if not items:
        raise UsageError(f"{what}: empty; allowed {', '.join(allowed)}")
    return items


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a comma-separated list of integers") from None
    if not values:
        raise UsageError(f"{what}: empty; give one or more sizes, e.g. 20 or 20,40,80")
    for v in values:
        if not world.MIN_GENES <= v <= world.MAX_GENES:
            raise UsageError(f"{what}: {v} out of range; allowed {world.MIN_GENES}..{world.MAX_GENES}")
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

    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    for a in agents:
        if a not in BASELINES and not (ev.is_llm_agent(a) and a.partition(":")[2]):
            raise UsageError(f"agent: {a!r} unknown; allowed {', '.join(BASELINES)}, openai:MODEL or anthropic:MODEL")
    if not agents:
        raise UsageError(f"agent: empty; allowed {', '.join(BASELINES)}, openai:MODEL or anthropic:MODEL")
    tiers = _names(args.tiers, list(world.TIERS), "tier")
    modes = _names(args.modes, list(world.MODES), "mode")
    seeds = parse_seeds(args.seeds)
    n_genes = _ints(args.n_genes, "n-genes")
    _writable_dir(args.out)
    specs = ev.plan(agents, tiers, modes, n_genes, seeds, backwards=args.backwards)
    path = ev.sweep(specs, args.out, policy_factory=lambda name: ev.make_runner(name, args.base_url), progress=Progress(args.quiet))
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


def cmd_report(args) -> int:
    from luca_gym.report import write_report

    if args.out:
        _writable_dir(args.out)
    text = write_report(args.results, args.out)
    print(text)
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


def cmd_info(args) -> int:
    from luca_gym.envs.luca_env import cached_organism

    world.check_triple(args.seed, args.tier, args.n_genes, args.mode)
    organism = cached_organism(args.seed, args.tier, args.n_genes, args.mode, args.backwards)
    print(describe(organism))
    if args.graph:
        from luca_gym.report import draw_network

        folder = os.path.dirname(os.path.abspath(args.graph))
        _writable_dir(folder, "graph")
        draw_network(organism, args.graph)
        print(f"  network drawn to {args.graph} (ground truth: for researchers, not for agents)")
    return 0


PLAY_HELP = """calls (the same as an agent's; names as shown by `info`):
  info                                  organism, budget, baseline, aberrant phenotypes
  experiment G003=BLOCK G007=BOOST SIG=ACTIVATE   run_experiment (1 unit)
  task                                  get_next_prediction_task
  predict 0.41 0.62 0.50                submit_prediction (one value per phenotype)
  hypothesis free text ...              submit_hypothesis (stored, not scored)
  network G003:PHENOTYPE:+ ...          submit_network
  diagnose TARGET LOCK_HI|LOCK_LO|PERSIST   submit_malfunction_hypothesis (one-way)
  rescue G003=DAMPEN ...                test_rescue (1 unit, after diagnose)
  end                                   end the session and see the scores
  help | quit"""


def _play_action(meta, params, words: list[str]):
    """One typed command -> an action dict, or a string to print."""
    verb, rest = words[0].lower(), words[1:]
    if verb in ("experiment", "rescue"):
        spec = {}
        for item in rest:
            target, _, kind = item.partition("=")
            spec[target] = {"type": kind or "BLOCK"}
        codes, flags = calls.interventions_from_names(meta, spec)
        kind = core.EXPERIMENT if verb == "experiment" else core.TEST_RESCUE
        return {"kind": kind, "gene_codes": codes.astype(np.int64), "signal_flags": flags.astype(np.int8)}
    if verb == "task":
        return {"kind": core.REVEAL_TASK}
    if verb == "predict":
        if len(rest) != len(meta.phenotype_names):
            raise ValueError(f"predict: give {len(meta.phenotype_names)} numbers, one per phenotype ({', '.join(meta.phenotype_names)})")
        try:
            values = np.asarray([float(x) for x in rest], np.float32)
        except ValueError:
            raise ValueError("predict: values must be numbers") from None
        return {"kind": core.SUBMIT_PREDICTION, "prediction": values}
    if verb == "network":
        edges = [item.split(":") for item in rest]
        return {"kind": core.SUBMIT_NETWORK, "network": calls.network_from_edges(meta, edges)}
    if verb == "diagnose":
        if len(rest) != 2:
            raise ValueError("diagnose: give TARGET and TYPE (LOCK_HI, LOCK_LO or PERSIST)")
        from luca_gym.types import MALFUNCTION_TYPES

        kind = rest[1].upper()
        if kind not in MALFUNCTION_TYPES[1:]:
            raise ValueError(f"diagnose: unknown type {rest[1]!r}; allowed {', '.join(MALFUNCTION_TYPES[1:])}")
        return {
            "kind": core.COMMIT_DIAGNOSIS,
            "diagnosis_target": calls.target_index(meta, rest[0]),
            "diagnosis_type": MALFUNCTION_TYPES.index(kind),
        }
    if verb == "end":
        return {"kind": core.END}
    raise ValueError(f"unknown call {verb!r}; type help")


def cmd_play(args, stdin=None, stdout=None) -> int:
    from luca_gym.envs.luca_env import LucaEnv

    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    world.check_triple(args.seed, args.tier, args.n_genes, args.mode)
    env = LucaEnv(tier=args.tier, mode=args.mode, n_genes=args.n_genes, render_mode="ansi")
    obs, _ = env.reset(options={"organism_seed": args.seed})
    meta = env.organism.meta
    say = lambda text: print(text, file=stdout, flush=True)  # noqa: E731
    say(f"LUCA {args.tier} {args.mode}: {meta.n_genes} genes, budget {env.params.budget}. Type help.")
    hypotheses = []
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
        if verb == "info":
            say(describe_public(meta, obs, env))
            continue
        if verb == "hypothesis":
            hypotheses.append(" ".join(words[1:]))
            say("stored")
            continue
        try:
            action = _play_action(meta, env.params, words)
        except ValueError as exc:
            say(f"error: {exc}")
            continue
        obs, _, terminated, truncated, info = env.step(action)
        say(str(calls.describe_result(meta, int(action["kind"]), obs, info)))
        if terminated or truncated:
            say(f"session over. scores: {info['scores']}")
            return 0


def describe_public(meta, obs, env) -> str:
    """What get_organism_info returns: public facts only."""
    targetable = [g for g, t in zip(meta.gene_names, obs["targetable"]) if t]
    lines = [
        f"genes (targetable): {', '.join(targetable)}",
        f"signals: {', '.join(f'{s} ({m})' for s, m in zip(meta.signal_labels, meta.signal_modes))}",
        f"phenotypes: {', '.join(meta.phenotype_names)}",
        f"baseline: {', '.join(f'{p}={v:.3f}' for p, v in zip(meta.phenotype_names, obs['baseline_phenotypes']))}",
        f"healthy range: [0.35, 0.65]; budget {int(obs['budget_left'])}/{env.params.budget}",
    ]
    if env.params.disease:
        lines.append(f"aberrant: {', '.join(p for p, a in zip(meta.phenotype_names, obs['aberrant']) if a)}")
    return "\n".join(lines)


def cmd_mcp(args) -> int:
    from luca_gym.envs.luca_env import LucaEnv
    from luca_gym.wrappers.llm import ToolSession
    from luca_gym.wrappers.mcp_server import serve

    world.check_triple(args.seed, args.tier, args.n_genes, args.mode)
    session = ToolSession(LucaEnv(tier=args.tier, mode=args.mode, n_genes=args.n_genes), seed=args.seed)
    serve(session)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="luca-gym", description="LUCA: a synthetic world for experimental reasoning.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="run a sweep of agents over organisms (resumable)")
    p.add_argument(
        "--agents", default=",".join(BASELINES), help=f"comma-separated: {', '.join(BASELINES)}, openai:MODEL, anthropic:MODEL"
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai:MODEL agents (local servers too)")
    p.add_argument("--tiers", default=",".join(world.TIERS))
    p.add_argument("--modes", default=",".join(world.MODES))
    p.add_argument("--seeds", default="0-19", help="e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--n-genes", default="20", help="comma-separated, e.g. 20,40,80")
    p.add_argument("--backwards", action="store_true", help="sign-inverted organisms (appendix E.1)")
    p.add_argument("--out", default="results", help="results folder (sessions.jsonl is appended)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="markdown tables and PNG figures from a results folder")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--out", default=None, help="where to write report.md and figures (default: the results folder)")
    p.set_defaults(func=cmd_report)

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
        if name == "mcp":
            p.set_defaults(backwards=False)
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
