"""The ``luca-gym`` command: ``eval``, ``train``, ``report``, ``show``, ``fidelity``, ``info``, ``play`` and ``mcp``.

``info``, ``play`` and ``mcp`` take the same arguments and show the same
organism (``info`` generates it alone, without compiling a session);
``play`` and ``mcp`` drive it through the very dispatcher an LLM agent uses
(:class:`~luca_gym.worlds.luca.tools.ToolSession`).

Bad input (unknown agent, tier or mode, a bad seed range, an unwritable
folder, a corrupt results line) gets one line on stderr naming the problem and
what is allowed, and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import threading
import warnings

import numpy as np

from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.baselines import BASELINES, PAPER_BASELINES
from luca_gym.worlds.luca.spec import MODES, TIER_NAMES

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
    checked by :func:`luca_gym.worlds.luca.spec.check_seed` when the sweep is planned)."""
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


def _price(text: str | None) -> tuple[float, float] | None:
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


def _writable_dir(path: str, what: str = "out") -> None:
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


ABLATIONS = ("backwards", "vocabulary", "stance")  # luca_gym.ablation.CONTRASTS


def _ablation_arguments(p) -> None:
    p.add_argument("--vocabulary", default=None, metavar="{invented,real}",
                   help="gene names: invented G001... (default) or real human gene symbols, N <= 50 (appendix E.2)")
    p.add_argument("--stance", default=None, metavar="{suppress,permit}",
                   help="the system prompt on biological knowledge: suppress (default) or permit (appendix E.2; "
                        "tool-calling agents read it, baselines do not)")
    p.add_argument("--ablation", default=None, metavar="NAMES",
                   help=f"comma-separated, of {', '.join(ABLATIONS)}: run both arms of each (e.g. vocabulary,stance: "
                        f"the 2x2), paired by seed; `luca-gym report` adds the paired tests")


def conditions(args) -> dict:
    """``backwards``, ``vocabulary`` and ``stance`` for :func:`luca_gym.harness.plan`
    from ``--backwards``, ``--vocabulary``, ``--stance`` and ``--ablation``
    (which plans both arms of each contrast it names)."""
    from luca_gym.ablation import CONTRASTS

    values = {"backwards": args.backwards, "vocabulary": args.vocabulary or "invented", "stance": args.stance or "suppress"}
    given = {"backwards": args.backwards, "vocabulary": args.vocabulary is not None, "stance": args.stance is not None}
    for name in _names(args.ablation, "ablation", ", ".join(ABLATIONS)) if args.ablation is not None else []:
        if name not in CONTRASTS:
            raise UsageError(f"ablation: {name!r} unknown; allowed {', '.join(ABLATIONS)}")
        if given[name]:
            raise UsageError(f"ablation: {name} runs both arms; drop --{name}, which fixes one")
        values[name] = list(CONTRASTS[name].arms)
    return values


class Progress:
    """The sweep's progress bar on stderr (tqdm: count, rate, ETA, the session
    running). While the first session takes longer than 3 s (it compiles),
    the bar says so."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar = None
        self.timer = None

    def __call__(self, i: int, total: int, spec) -> None:
        if self.quiet or total == 0:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="session", file=sys.stderr, dynamic_ncols=True)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.bar.n = i
        if spec is None:
            self.bar.set_postfix_str("done")
            self.bar.close()
            return
        if spec.world == "luca":
            arms = [a for a, on in (("backwards", spec.backwards), (spec.vocabulary, spec.vocabulary != "invented"),
                                    (spec.stance, spec.stance != "suppress")) if on]
            what = f"{spec.agent} {spec.tier} {spec.mode} N={spec.n_genes}{''.join(' ' + a for a in arms)} seed {spec.seed}"
        else:
            what = f"{spec.agent} {spec.world} {' '.join(f'{k}={v}' for k, v in spec.settings)} seed {spec.seed}"
        self.bar.set_postfix_str(what)
        if i == 0:
            from luca_gym.compile_cache import cache_dir

            note = f"{what} (compiling: first run only{'; cached' if cache_dir() else ''})"
            self.timer = threading.Timer(3.0, lambda: self.bar.set_postfix_str(note))
            self.timer.daemon = True
            self.timer.start()


def cmd_eval(args) -> int:
    from luca_gym import ablation, worlds
    from luca_gym import harness as ev
    from luca_gym.tools.loop import check_retry

    world = worlds.get(args.world)
    if world.name != "luca":
        return _eval_world(args, world)
    if args.set:
        raise UsageError("set: LUCA's settings are --tiers, --modes, --n-genes, --backwards, --vocabulary and --stance")
    agents = _names(args.agents, "agent", ev.AGENTS_ALLOWED)
    tiers = _names(args.tiers, "tier", ", ".join(TIER_NAMES))
    modes = _names(args.modes, "mode", ", ".join(MODES))
    seeds = parse_seeds(args.seeds)
    n_genes = _ints(args.n_genes, "n-genes")
    specs = ev.plan(agents, tiers, modes, n_genes, seeds, **conditions(args))
    price, concurrency = _price(args.price), ev.check_concurrency(args.concurrency)
    check_retry(args.retries, args.backoff)
    _writable_dir(args.out)
    seal = seal_of(args, out=args.out)
    # Learned agents load once, before any session: a bad checkpoint stops the
    # sweep before it starts, and every session reuses the loaded weights.
    learned = {a: ev.make_runner(a) for a in agents if ev.is_learned_agent(a)}
    factory = lambda name: learned[name] if name in learned else ev.make_runner(name, args.base_url)  # noqa: E731
    path = ev.sweep(specs, args.out, policy_factory=factory, progress=Progress(args.quiet), sealed=seal, base_url=args.base_url,
                    concurrency=concurrency, retries=args.retries, backoff=args.backoff, price=price)
    wanted = {spec.key() for spec in specs}
    results = ev.read_results(path, seal=seal)
    for note in results.notes():
        print(f"note: {note}", file=sys.stderr)
    records = [r for r in results.records if ev.record_key(r) in wanted]
    main, note = ablation.main_records(records)
    for n in n_genes:
        print(f"\nComposite score, N={n} ({len(seeds)} seeds; mean ± population std; paper figures in brackets)")
        print(ev.composite_table(main, n))
    if note:
        print(f"({note})\n\n{ablation.section(records)}")
    if len(n_genes) > 1:
        print("\nScaling (medium healthy, prediction accuracy)")
        print(ev.scaling_table(records))
    usage = [r["usage"] for r in records if r.get("usage")]
    if usage:
        print(f"\n{usage_line(usage, [r.get('cost_usd') for r in records if r.get('usage')])}")
    print(f"\nsessions: {path}")
    return 0


def _setting_values(text: str) -> tuple[str, list]:
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


def _eval_world(args, world) -> int:
    """``luca-gym eval --world NAME``: the world's baselines or tool agents over
    its settings (``--set``) and seeds, through the same sweep and results file."""
    from luca_gym import harness as ev
    from luca_gym.tools.loop import check_retry

    default_agents = args.agents == ",".join(PAPER_BASELINES)  # LUCA's default: the world's own baselines instead
    agents = list(world.baseline_policies()) if default_agents else _names(args.agents, "agent", "the world's baselines")
    if not agents:
        raise UsageError(f"agents: world {world.name!r} has no baselines; give --agents openai:MODEL or anthropic:MODEL")
    settings = dict(_setting_values(text) for text in args.set)
    specs = ev.plan_world(world, agents, parse_seeds(args.seeds), **settings)
    price, concurrency = _price(args.price), ev.check_concurrency(args.concurrency)
    check_retry(args.retries, args.backoff)
    _writable_dir(args.out)
    seal = seal_of(args, out=args.out)
    path = ev.sweep(specs, args.out, policy_factory=lambda name: ev.make_runner(name, args.base_url, world=world.name),
                    progress=Progress(args.quiet), sealed=seal, base_url=args.base_url, concurrency=concurrency,
                    retries=args.retries, backoff=args.backoff, price=price)
    wanted = {spec.key() for spec in specs}
    results = ev.read_results(path, seal=seal)
    records = [r for r in results.records if ev.record_key(r) in wanted]
    print(f"\n{world.name}: {world.headline} ({len({s.seed for s in specs})} seeds; mean ± population std)")
    print(ev.world_table(records, world))
    print(f"\nsessions: {path}")
    return 0


def usage_line(usage: list, costs: list) -> str:
    """One line summing the ``usage`` of tool-calling sessions (and their ``cost_usd``, when priced)."""
    total = lambda key: sum(u.get(key) or 0 for u in usage)  # noqa: E731
    failed = sum(len(u.get("failed_calls") or []) for u in usage)
    cost = f", cost ${sum(costs):.4f}" if costs and all(c is not None for c in costs) else ""
    return (f"usage: {len(usage)} tool-calling session(s), {total('provider_calls')} provider calls ({failed} failed, "
            f"{total('retries')} retried), {total('input_tokens')} input and {total('output_tokens')} output tokens{cost}")


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
            f"score {row['mean_score']:.3f}"
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
          f"last update's mean score {summary['final_score']:.3f}")
    print(f"run folder: {args.out}  (evaluate: luca-gym eval --agents ppo:{args.out})")
    return 0


@contextlib.contextmanager
def _results_notes():
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


def cmd_worlds(args) -> int:
    """One block per registered world (built-in and entry points)."""
    from luca_gym import worlds

    for name in worlds.names():
        w = worlds.get(name)
        print(f"{w.name} (version {w.version}): {w.summary}")
        print(f"  headline score: {w.headline};  settings: {', '.join(k for k in w.session_keys if k != 'seed') or 'none'}")
        print(f"  gymnasium: {', '.join(w.gym_ids()) or 'none'}")
        print(f"  baselines: {', '.join(w.baseline_policies()) or 'none'}" + (f"\n  reference: {w.reference}" if w.reference else ""))
    return 0


def cmd_report(args) -> int:
    from luca_gym.report import results_folder, write_report

    if args.out:
        _writable_dir(args.out)
    with _results_notes():
        text = write_report(args.results, args.out)
    folder = args.out or results_folder(args.results)
    print(os.path.join(folder, "report.md"))
    for figure in dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)):
        print(os.path.join(folder, figure))
    return 0


def cmd_show(args) -> int:
    """Draw one recorded session as a timeline PNG and print its path (one
    line); when several sessions match, a note on stderr names the one drawn."""
    from luca_gym import harness as ev
    from luca_gym import report

    with _results_notes():
        records = ev.load_sessions(args.results)
    record, note = report.pick_session(records, args.seed, args.agent,
                                       tier=args.tier, mode=args.mode, n_genes=args.n_genes)
    out = args.out or os.path.join(report.results_folder(args.results), report.session_file_name(record))
    _writable_dir(os.path.dirname(os.path.abspath(out)), "out")
    report.draw_session(record, out)
    if note:
        print(f"luca-gym show: note: {note}", file=sys.stderr)
    print(out)
    return 0


def cmd_fidelity(args) -> int:
    from luca_gym.worlds.luca import fidelity

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
        _writable_dir(os.path.dirname(os.path.abspath(args.graph)), "graph")
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
    """The REPL of :mod:`luca_gym.play` over the session of ``args`` (``--json``:
    one JSON object a reply); ``stdin`` and ``stdout`` default to the terminal."""
    from luca_gym.play import PlayShell

    return PlayShell(open_session(args), stdin=stdin, stdout=stdout, json_output=args.json).run()


def cmd_mcp(args) -> int:
    """Serve the session of ``args`` over MCP (stdio); with ``--out``, record it there when it ends.

    The settings are checked first (a bad one: one line, exit 2); the organism
    is then generated in the background while the server already answers
    ``initialize``, so a client connects at once."""
    from luca_gym import worlds
    from luca_gym.worlds.luca import core, spec
    from luca_gym import harness as ev
    from luca_gym.worlds.luca.tools import ToolSession, system_prompt
    from luca_gym.tools.mcp_server import serve

    world = worlds.get(args.world)
    if world.name != "luca":
        return _mcp_world(args, world)
    if args.set:
        raise UsageError("set: LUCA's settings are --tier, --mode, --n-genes, --backwards, --vocabulary and --stance")
    if args.out:
        _writable_dir(args.out, "out")
    if not args.agent.strip():
        raise UsageError("agent: an empty name; give the name the session is recorded under, e.g. mcp-client")
    seed = spec.check_seed(args.seed)
    tier, n_genes, mode, backwards = spec.check_organism(args.tier, args.n_genes, args.mode, args.backwards)
    vocabulary, stance = spec.check_vocabulary(args.vocabulary, n_genes), spec.check_stance(args.stance)
    seal = seal_of(args)
    params = core.make_params(tier, n_genes, mode)
    if args.out:
        ev.check_recordable_spec(args.out, ev.luca_spec(args.agent, tier, mode, n_genes, seed, backwards, vocabulary, stance),
                                 seal, params)

    def open_it():
        return ToolSession(seed, tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, sealed=seal,
                           vocabulary=vocabulary, stance=stance)

    serve(open_it, out=args.out, agent=args.agent, title=ToolSession.title,
          instructions=system_prompt(params.disease, params.max_steps, vocabulary=vocabulary, stance=stance))
    return 0


def _mcp_world(args, world) -> int:
    """``luca-gym mcp --world NAME``: one session of another world's tools over MCP."""
    from luca_gym.protocol import load
    from luca_gym.tools.mcp_server import serve
    from luca_gym.validate import check_seed

    if world.tools is None:
        raise UsageError(f"world: {world.name!r} has no tools to serve")
    if args.out:
        raise UsageError(f"out: recording an MCP session is LUCA's for now; serve {world.name!r} without --out")
    settings = {}
    for text in args.set:
        key, values = _setting_values(text)
        if len(values) != 1:
            raise UsageError(f"set: {key} takes one value for one session, got {len(values)}")
        settings[key] = values[0]
    session = load(world.tools)(check_seed(args.seed), sealed=seal_of(args), **settings)
    serve(session)
    return 0


def _sealed_arguments(p, eval_: bool = False) -> None:
    from luca_gym.seal import SECRET_ENV

    drawn = " or, if unset, a secret drawn once and kept in OUT/secret.key" if eval_ else ""
    p.add_argument("--sealed", action="store_true",
                   help=f"sealed organisms: a secret folded into every organism key, from ${SECRET_ENV}{drawn}, so the "
                        f"public package and seed do not give the organism away")
    p.add_argument("--secret-file", default=None, metavar="FILE", help="sealed, with the secret in FILE (implies --sealed)")


# Choices shown in --help; the values are checked by the library, so a bad one
# gets the same one-line error (and exit code 2) as every other user error.
TIER_CHOICES = "{" + ",".join(TIER_NAMES) + "}"
MODE_CHOICES = "{" + ",".join(MODES) + "}"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (where it has one and the help
    does not already say it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is x for x in (None, False, argparse.SUPPRESS)) or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    from luca_gym import __version__
    from luca_gym.tools.loop import BACKOFF_S, RETRIES

    parser = argparse.ArgumentParser(
        prog="luca-gym", formatter_class=HelpFormatter,
        description="Synthetic worlds for experimental reasoning (LUCA first; `luca-gym worlds` lists them). "
                    "Run `luca-gym COMMAND --help` for a command's options.",
        epilog="Errors print one line naming the problem and what is allowed, and exit with code 2. JAX compiles on a "
               "first run (cached afterwards; luca_gym.compile_cache, LUCA_GYM_CACHE_DIR=off disables it).",
    )
    parser.add_argument("--version", action="version", version=f"luca-gym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_parser = sub.add_parser
    sub.add_parser = lambda *a, **k: _add_parser(*a, formatter_class=HelpFormatter, **k)  # every command shows defaults

    p = sub.add_parser("eval", help="run a sweep of agents over organisms (resumable)")
    p.add_argument(
        "--agents", default=",".join(PAPER_BASELINES),
        help=f"comma-separated: {', '.join(BASELINES)}, openai:MODEL, anthropic:MODEL, ppo:RUN_DIR, sb3:FILE.zip",
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai:MODEL agents (local servers too)")
    p.add_argument("--concurrency", type=int, default=1, metavar="K",
                   help="sessions of openai:/anthropic: agents run at once (baselines and learned agents: one at a time)")
    p.add_argument("--retries", type=int, default=RETRIES, metavar="N",
                   help="times a failed provider call (rate limit, overload, timeout, connection, malformed answer) is "
                        "made again; a session still failing is not recorded and a rerun runs it")
    p.add_argument("--backoff", type=float, default=BACKOFF_S, metavar="SECONDS",
                   help="wait before the first retry, doubled at each next one, with jitter")
    p.add_argument("--price", default=None, metavar="IN,OUT",
                   help="USD per million input and output tokens: each record gets its cost_usd (default: none)")
    p.add_argument("--tiers", default=",".join(TIER_NAMES), help=f"comma-separated, of {', '.join(TIER_NAMES)}")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--seeds", default="0-19", help="organism seeds, e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--n-genes", default="20", help="organism sizes N (4..4096), comma-separated, e.g. 20,40,80")
    p.add_argument("--backwards", action="store_true", help="sign-inverted organisms (appendix E.1)")
    _ablation_arguments(p)
    p.add_argument("--world", default="luca",
                   help="the world: luca (the default; its settings are the options above), another registered world's "
                        "name, or package.module:WORLD")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUES",
                   help="a setting of a world other than luca, one value or a comma-separated list, e.g. --set n_bits=6,8 "
                        "(repeatable; a setting left out takes its default)")
    p.add_argument("--out", default="results", help="results folder (sessions.jsonl is appended)")
    _sealed_arguments(p, eval_=True)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("train", help="train a learned agent on the flat action space (experiments chosen, values by an analyst)")
    p.add_argument("--algo", default="ppo", metavar="{" + ",".join(TRAIN_ALGOS) + "}",
                   help="ppo (pure JAX, this package) or maskable-ppo (sb3-contrib, the rl extra)")
    p.add_argument("--tier", default="easy", metavar=TIER_CHOICES, help="organism tier")
    p.add_argument("--mode", default="healthy", metavar=MODE_CHOICES, help="healthy or disease")
    p.add_argument("--n-genes", type=int, default=20, metavar="N", help="organism size N (4..4096)")
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
    p.add_argument("--analyst", default="logit-additive", metavar="{logit-additive,constant}",
                   help="who writes predictions, network and diagnosis")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("worlds", help="the registered worlds: name, version, headline score, Gymnasium ids, baselines")
    p.set_defaults(func=cmd_worlds)

    p = sub.add_parser("report", help="markdown tables and PNG figures from a results folder")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--out", default=None, help="where to write report.md and figures (default: the results folder)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="draw one recorded session as a timeline PNG (calls, phenotypes, predictions, diagnosis, rescue)")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--seed", type=int, required=True, help="the session's organism seed")
    p.add_argument("--agent", required=True, help="the session's agent, as recorded (e.g. random, openai:MODEL)")
    p.add_argument("--tier", default=None, metavar=TIER_CHOICES, help="narrow to this tier (default: any; the first session matching is drawn)")
    p.add_argument("--mode", default=None, metavar=MODE_CHOICES, help="narrow to this mode (default: any)")
    p.add_argument("--n-genes", type=int, default=None, help="narrow to this organism size (default: any)")
    p.add_argument("--out", default=None,
                   help="PNG to write (default: RESULTS_FOLDER/session_<agent>_<tier>_<mode>_<seed>.png, "
                        "with _N<n> for N other than 20 and _backwards for a backwards organism)")
    p.set_defaults(func=cmd_show)

    from luca_gym.worlds.luca.fidelity import DEFAULT_AGENTS, DEFAULT_SCALING_N, SCALING_SEEDS, TABLES

    p = sub.add_parser(
        "fidelity",
        help="our world's figures against the paper's Tables 3, 6, 7, 8 and 11, with bands and verdicts",
        description="Measure the world's organism statistics (Table 3 and Table 1's loop counts) and the batched "
        "baselines' scores (Tables 6, 7, 8 at N=20; Table 11, medium healthy, against N), compare each figure with "
        "the paper's within its band (see the docstring of luca_gym.worlds.luca.fidelity), print the verdicts and write "
        "fidelity.md, fidelity.json and PNG figures into --out. Exit code 0 whatever the verdicts (a report); "
        "2 on bad arguments.",
    )
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
    p.set_defaults(func=cmd_fidelity)

    for name, helptext, func in (
        ("info", "describe one organism", cmd_info),
        ("play", "run a session at the terminal", cmd_play),
        ("mcp", "serve one session's tools over MCP (stdio)", cmd_mcp),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:] + ".")
        p.add_argument("--seed", type=int, default=0, help="organism seed (a non-negative integer)")
        p.add_argument("--tier", default="medium", metavar=TIER_CHOICES, help="organism tier")
        p.add_argument("--mode", default="healthy", metavar=MODE_CHOICES, help="healthy, or disease (one hidden malfunction)")
        p.add_argument("--n-genes", type=int, default=20, metavar="N", help="organism size N (4..4096)")
        p.add_argument("--backwards", action="store_true", help="the sign-inverted organism (appendix E.1)")
        p.add_argument("--vocabulary", default="invented", metavar="{invented,real}",
                       help="gene names: invented G001... or real human gene symbols, N <= 50 (appendix E.2)")
        if name != "info":
            p.add_argument("--stance", default="suppress", metavar="{suppress,permit}",
                           help="the prompt's stance on biological knowledge (appendix E.2)")
        _sealed_arguments(p)
        if name == "info":
            p.add_argument("--graph", default=None, help="draw the true network to this PNG")
        if name == "mcp":
            p.add_argument("--world", default="luca",
                           help="the world: luca (the default; its settings are the options above), another registered "
                                "world's name, or package.module:WORLD")
            p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                           help="a setting of a world other than luca (repeatable)")
            p.add_argument("--out", default=None, metavar="DIR",
                           help="record the session, once it ends (end, the call limit or the client gone after a "
                                "tool call), in DIR/sessions.jsonl, the harness's format: luca-gym report reads it")
            p.add_argument("--agent", default="mcp-client", metavar="NAME",
                           help="the agent's name in the record (default %(default)s); one session per agent and organism")
        if name == "play":
            p.add_argument("--json", action="store_true",
                           help="for scripts: each reply as one JSON object a line (the call's result as an agent gets it), "
                                "no banner, no prompt")
        p.set_defaults(func=func)
    return parser


def _as_flags(message: str, args) -> str:
    """An API error names its parameter (``n_genes: ...``); on the command line
    say the option the user typed (``--n-genes: ...``)."""
    name, sep, rest = message.partition(":")
    flag = "--" + name.replace("_", "-")
    if sep and name.isidentifier() and hasattr(args, name) and name != "results":
        return flag + sep + rest
    return message


def main(argv=None) -> int:
    from luca_gym.harness import ResultsError
    from luca_gym.tools.loop import ProviderError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ResultsError, ValueError) as exc:
        print(f"luca-gym {args.command}: error: {_as_flags(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except ProviderError as exc:
        print(f"luca-gym {args.command}: error: {exc}; completed sessions are saved and a rerun resumes", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; completed sessions are saved and a rerun resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
