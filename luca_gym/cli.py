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
a heavy module defers them until it is used: :class:`~luca_gym.cli_common.CommandParser`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import threading
import warnings

from luca_gym.cli_common import (  # noqa: F401  (parse_seeds and UsageError: the command's public helpers)
    EXIT_USAGE,
    CommandParser,
    HelpFormatter,
    Progress,
    UsageError,
    bool_setting as _bool_setting,
    names as _names,
    parse_seeds,
    price as _price,
    python_option as _python_option,
    sandbox_arguments as _sandbox_arguments,
    seal_of,
    sealed_arguments as _sealed_arguments,
    setting_values as _setting_values,
    say_steps,
    spec_label,
    writable_dir as _writable_dir,
)

DEFAULT_WORLD = "luca"
TRAIN_ALGOS = ("ppo", "maskable-ppo", "bc")
# Defaults per algorithm: the JAX PPO steps thousands of envs in one program;
# MaskablePPO steps a vector env from Python and learns from far fewer steps;
# behaviour cloning fits a network to a scripted teacher's steps (512 envs x 128 steps: two N=20 sessions each).
TRAIN_DEFAULTS = {"ppo": {"steps": 5_000_000, "num_envs": 1024}, "maskable-ppo": {"steps": 800_000, "num_envs": 256},
                  "bc": {"steps": 65_536, "num_envs": 512}}
BC_EPOCHS, BC_MINIBATCH = 15, 512
CLONING_CSV = "cloning_curve.csv"
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


# -- the worlds' hooks ----------------------------------------------------------------
def _hooks() -> dict:
    """{world name: its CLI hook} for every registered world that has one."""
    from luca_gym import worlds
    from luca_gym.protocol import load

    return {name: load(worlds.get(name).cli) for name in worlds.names() if worlds.get(name).cli is not None}


class _HiddenOptions:
    """A command's parser as another world's hook sees it: the options the
    hook adds are parsed (so that one given is refused by name, with the
    world it belongs to: :func:`_world_of`) but left out of the help and
    usage, which show the chosen world's options only."""

    def __init__(self, parser):
        self._parser = parser

    def add_argument(self, *args, **kwargs):
        """The parser's ``add_argument``, with the help suppressed."""
        return self._parser.add_argument(*args, **{**kwargs, "help": argparse.SUPPRESS})

    def __getattr__(self, name):
        return getattr(self._parser, name)


def _add_world_arguments(p, method: str, shown: str | None = None) -> None:
    """Each world's options for this command (hook ``method``), remembering
    which world owns which option; only world ``shown``'s appear in the help
    (every world's where None)."""
    owners = {}
    for name, hook in _hooks().items():
        if hasattr(hook, method):
            before = {a.dest for a in p._actions}
            getattr(hook, method)(p if shown is None or name == shown else _HiddenOptions(p))
            owners.update({a.dest: name for a in p._actions if a.dest not in before})
    p.set_defaults(_owners=owners)


def _world_of(args):
    """The world of ``--world`` and its CLI hook (or None); an option of another world given is refused."""
    from luca_gym import worlds

    world = worlds.get(args.world)
    for dest, owner in getattr(args, "_owners", {}).items():
        if owner != world.name and getattr(args, dest, None) not in (None, False):
            raise UsageError(f"{dest.replace('_', '-')}: an option of world {owner!r}, not of {world.name!r}; "
                             f"give {world.name!r}'s settings with --set KEY=VALUE")
    return world, _hooks().get(world.name)


def _config_flags(p, world, many: bool) -> None:
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


# The commands whose options are the chosen world's (``--world NAME``): their parser is built for that world.
WORLD_COMMANDS = ("eval", "train", "mcp")


def _world_named(argv) -> tuple[str | None, str | None]:
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


def _chosen_world(argv):
    """The world whose options ``eval``, ``train`` and ``mcp`` take on this
    command line: the one ``--world`` names, else the default (LUCA).
    ValueError (naming the world and those registered) for a world that is
    not one."""
    from luca_gym import worlds

    _, name = _world_named(argv)
    return worlds.get(DEFAULT_WORLD if name is None else name)


def _bool_fields(world) -> set[str]:
    """The names of the world's bool settings (its config's fields typed ``bool``)."""
    from dataclasses import fields

    from luca_gym.protocol import load

    return {f.name for f in fields(load(world.config)) if f.type in (bool, "bool")}


def _settings(args, world, hook, method: str, one: bool = False) -> dict:
    """The world's settings: its hook's options (``method``) or its config
    fields' options, then ``--set`` (which wins). A bool setting takes
    ``True``/``False`` as the config does (``true``/``false``, ``1``/``0``
    too: :func:`~luca_gym.cli_common.bool_setting`)."""
    settings = getattr(hook, method)(args) if hook is not None and hasattr(hook, method) else {}
    bools = _bool_fields(world)

    def read(key: str, text: str) -> list:
        values = _setting_values(text)[1]
        return [_bool_setting(v, key) for v in values] if key in bools else values

    for name in getattr(args, "_config_flags", ()):
        text = getattr(args, f"setting__{name}")
        if text is not None:
            values = read(name, f"{name}={text}")
            if one and len(values) != 1:
                raise UsageError(f"{name}: takes one value here, got {len(values)}")
            settings[name] = values[0] if one else values
    for text in args.set:
        key = _setting_values(text)[0]
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
    values = _setting_values(f"budget={text}")[1]
    if "budget" in world.session_keys:  # a key field (biobank's regimes): a comma list sweeps it, as --set does
        return {**settings, "budget": values}
    if len(values) != 1:
        raise UsageError(f"budget: {text!r}; one value, e.g. --budget 8 (each budget is a sweep of its own, into its own --out)")
    if values[0] is None:  # JSON null would read as "the world's default": leaving the option out says that
        raise UsageError(f"budget: {text!r} not allowed; one value, e.g. --budget 8 (leave --budget out for the world's default)")
    return {**settings, "budget": values[0]}


def ablation_arms(args, world, hook, settings: dict) -> dict:
    """``settings`` with both arms of each contrast ``--ablation`` names
    (``World.contrasts``); a setting the user fixed (a world option the hook's
    ``given_settings(args)`` reports, or ``--set``) is refused."""
    if args.ablation is None:
        return settings
    allowed = ", ".join(c.name for c in world.contrasts) or f"none (world {world.name!r} declares no contrasts)"
    by_option = set(hook.given_settings(args)) if hook is not None and hasattr(hook, "given_settings") else set()
    by_set = {_setting_values(text)[0] for text in args.set}
    for name in _names(args.ablation, "ablation", allowed):
        try:
            contrast = world.contrast(name)
        except ValueError as error:
            raise UsageError(str(error)) from None
        if contrast.field in by_option | by_set:
            option = f"--{contrast.field.replace('_', '-')}" if contrast.field in by_option else f"--set {contrast.field}=..."
            raise UsageError(f"ablation: {name} runs both arms; drop {option}, which fixes one")
        settings[contrast.field] = list(contrast.arms)
    return settings


def sweep_progress(quiet: bool) -> Progress:
    """The sweep's progress on stderr (:class:`~luca_gym.cli_common.Progress`:
    a bar on a terminal, a line every few seconds elsewhere), a session named
    by its world's ``progress_label`` where the world's CLI hook has one."""

    def label(spec) -> str:
        hook = _hooks().get(spec.world)
        return hook.progress_label(spec) if hook is not None and hasattr(hook, "progress_label") else spec_label(spec)

    return Progress(quiet, label=label)


def cmd_eval(args) -> int:
    """Plan the sweep and check every argument and agent (a model agent's SDK
    and key, a learned agent's checkpoint) before creating any file; then run
    it, resuming what ``--out`` holds, and print the world's tables."""
    from luca_gym import harness as ev
    from luca_gym.llm.loop import check_retry

    world, hook = _world_of(args)
    seeds = parse_seeds(args.seeds)  # the command's own options first: they need no world module
    price, concurrency = _price(args.price), ev.check_concurrency(args.concurrency)
    check_retry(args.retries, args.backoff)
    python = _python_option(args)  # --python, under --sandbox-memory / --sandbox-time where given
    if args.agents is None:
        agents = list(getattr(hook, "default_agents", None) or world.baseline_policies())
        if not agents:
            raise UsageError(f"agents: world {world.name!r} has no baselines; give --agents openai:MODEL or anthropic:MODEL")
    else:
        agents = _names(args.agents, "agent", ev.agents_allowed(world))
    settings = with_budget(args, world, _settings(args, world, hook, "eval_settings"))
    specs = ev.plan_world(world, agents, seeds, **ablation_arms(args, world, hook, settings))
    cassette = _cassette(args, [a for a in agents if ev.is_llm_agent(a)])
    request = _request_settings(args, [a for a in agents if ev.is_llm_agent(a)])
    sent = {k: v for k, v in request.items() if k != "max_turns"}
    _check_server(args, agents, cassette)

    def runner(name: str):
        if cassette is not None and ev.is_llm_agent(name):
            from luca_gym.llm.providers import make_agent

            return make_agent(name, args.base_url, cassette=cassette, request=sent)
        return ev.make_runner(name, args.base_url, world=world.name, **({"request": sent} if sent else {}))

    for agent in agents:
        if ev.is_llm_agent(agent):  # its SDK and key, before a file is made (a runner is made again for each session)
            _check_model_key(agent, runner(agent), args.base_url)
    # Learned agents load once, before any session: a bad checkpoint stops the
    # sweep before it starts, and every session reuses the loaded weights.
    learned = {a: ev.make_runner(a, world=world.name) for a in agents if ev.is_learned_agent(a)}
    factory = lambda name: learned[name] if name in learned else runner(name)  # noqa: E731
    ev.check_python(specs, python, args.sealed or args.secret_file or None,  # before a file is made
                    args.python_analysis_tools)
    if python:
        from luca_gym.sandbox import check_analysis_packages

        check_analysis_packages()
    created = not os.path.isdir(args.out)
    _writable_dir(args.out)
    progress = sweep_progress(args.quiet)
    try:
        seal = seal_of(args, out=args.out)
        path = ev.sweep(specs, args.out, policy_factory=factory, progress=progress, sealed=seal,
                        base_url=args.base_url, concurrency=concurrency, retries=args.retries,
                        backoff=0 if cassette is not None and cassette.replaying else args.backoff,  # replay: no waits
                        price=price, log=None if args.quiet else _say, python=python,
                        analysis_tools=args.python_analysis_tools, request=request)
    except BaseException:
        if created:
            _remove_if_empty(args.out)
        raise
    finally:
        progress.close()
        if cassette is not None:
            cassette.close()
    wanted = {ev.session_key(spec) for spec in specs}
    results = ev.read_results(path, seal=seal)
    for note in results.notes():
        print(f"note: {note}", file=sys.stderr)
    records = [r for r in results.records if ev.record_key(r) in wanted]
    if hook is not None and hasattr(hook, "eval_summary"):
        print(hook.eval_summary(records, specs))
    else:
        given = {k: v for spec in specs[:1] for k, v in spec.options().items() if k in ev.run_options(world)}
        at = "".join(f", {k} {v}" for k, v in given.items())
        print(f"\n{world.name}: {world.headline}{at} ({len(set(seeds))} seed{'' if len(set(seeds)) == 1 else 's'}; mean ± population std)")
        print(ev.world_table(records, world))
    models = [r for r in records if r.get("usage") and ev.is_llm_agent(r["agent"])]  # a tool-agent baseline spends no tokens
    if models:
        print(f"\n{usage_line([r['usage'] for r in models], [r.get('cost_usd') for r in models])}")
        if request:
            print("request: " + ", ".join(f"{k} {v}" for k, v in request.items()))
        failed = sum(r.get("end_reason") == "model_error" for r in models)
        if failed:
            print(f"model errors: {failed} session(s) ended on a turn the model or its server could not complete "
                  "(end_reason model_error, scored; the error is in each line's model_error)", file=sys.stderr)
    from luca_gym.llm.providers import no_tool_call_warning

    warning = no_tool_call_warning(records)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"\nsessions: {path}")
    return 0


def _say(line: str) -> None:
    """One line on stderr (the sweep's ``log``)."""
    print(line, file=sys.stderr, flush=True)


def _cassette(args, models: list[str]):
    """The :class:`~luca_gym.llm.recording.Cassette` of ``--record-responses``
    or ``--replay-responses`` (None without either); UsageError where no agent
    of ``--agents`` is a model (``models``), or for a cassette that cannot be
    read (replay) or made (record)."""
    path = args.record_responses or args.replay_responses
    if path is None:
        return None
    flag = "--record-responses" if args.record_responses else "--replay-responses"
    if not models:
        raise UsageError(f"{flag}: no openai:MODEL, anthropic:MODEL or mock agent in --agents; only a model's responses are "
                         "recorded and replayed")
    from luca_gym.llm.recording import Cassette

    try:
        return Cassette(path, "record" if args.record_responses else "replay")
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _check_server(args, agents: list[str], cassette) -> None:
    """UsageError, in seconds, where ``--base-url`` names no server that accepts
    a connection and an openai: agent would call it (not when replaying)."""
    if args.base_url is None or (cassette is not None and cassette.replaying) or not any(a.startswith("openai:") for a in agents):
        return
    from luca_gym.llm.providers import server_reachable

    why = server_reachable(args.base_url)
    if why is not None:
        raise UsageError(f"--base-url: {why}; start the server, or check the URL with luca-gym check-model")


def _check_model_key(agent: str, runner, base_url: str | None) -> None:
    """UsageError where model agent ``agent`` has no API key to send
    (``runner.api_key_env`` unset), unless ``--base-url`` names an
    OpenAI-compatible server (a local one may need no key) or the runner
    came with a client of its own (a mock, a proxy)."""
    key_env = getattr(runner, "api_key_env", None)
    own_client = getattr(runner, "_client", None) is not None
    if key_env is None or own_client or os.environ.get(key_env) or (base_url and agent.startswith("openai:")):
        return
    local = "; or give --base-url for a local OpenAI-compatible server" if agent.startswith("openai:") else ""
    raise UsageError(f"agents: {agent} needs an API key in ${key_env}, which is not set; export it{local}")


def _remove_if_empty(folder: str) -> None:
    """Remove the results folder this command created, if a refused or failed
    sweep left nothing in it but an empty sessions file."""
    from luca_gym.harness import SESSIONS_FILE

    path = os.path.join(folder, SESSIONS_FILE)
    with contextlib.suppress(OSError):
        if os.path.getsize(path) == 0:
            os.remove(path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)  # only if empty


def usage_line(usage: list, costs: list) -> str:
    """One line summing the ``usage`` of tool-calling sessions (and their ``cost_usd``, when priced)."""
    total = lambda key: sum(u.get(key) or 0 for u in usage)  # noqa: E731
    failed = sum(len(u.get("failed_calls") or []) for u in usage)
    cost = f", cost ${sum(costs):.4f}" if costs and all(c is not None for c in costs) else ""
    return (f"usage: {len(usage)} tool-calling session(s), {total('provider_calls')} provider calls ({failed} failed, "
            f"{total('retries')} retried), {total('input_tokens')} input and {total('output_tokens')} output tokens{cost}")


class TrainProgress:
    """Training progress on stderr, the same for both algorithms: one line if
    the first update takes longer than :attr:`notice_after_s` (instances
    generated and programs compiled: on a first run, up to two minutes), then a line per
    update with the rate since the last line shown (the first also sets up).
    On a terminal the line is redrawn in place; elsewhere (a log) it is
    printed after the first update, at each tenth of the run and at the end.
    ``quiet``: nothing."""

    notice_after_s = 3.0

    def __init__(self, quiet: bool = False, algo: str = "train"):
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self.last = (0, 0.0)
        self.timer = None
        if not quiet:
            from luca_gym.compile_cache import cache_dir

            where = cache_dir()
            cached = f"cached in {where} for next time" if where else "the compilation cache is off"
            note = f"{algo}: setting up: generating training instances and compiling (a first run: up to two minutes; {cached})"
            self.timer = threading.Timer(self.notice_after_s, self._write, (note + "\n",))
            self.timer.daemon = True
            self.timer.start()

    @staticmethod
    def _write(text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed: progress is not worth a failure
            pass

    def close(self) -> None:
        """Cancel the setup notice if it has not shown yet."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def __call__(self, row: dict) -> None:
        self.close()
        cloning = "epoch" in row  # behaviour cloning reports epochs, the learners updates
        update, updates = (row["epoch"], row["epochs"]) if cloning else (row["update"], row["updates"])
        tenth = update * 10 // updates != (update - 1) * 10 // updates
        if self.quiet or not (self.tty or update == 1 or tenth):
            return
        width = 30
        bar = f"[{'#' * int(width * update / updates)}{'.' * (width - int(width * update / updates))}]"
        if cloning:
            line = (f"{bar} epoch {update}/{updates} {row['wall_s']:7.1f}s  cross-entropy {row['cross_entropy']:.3f}  "
                    f"agrees with the teacher {row['accuracy']:.3f}")
        else:
            rate = (row["env_steps"] - self.last[0]) / max(row["wall_s"] - self.last[1], 1e-9)
            self.last = (row["env_steps"], row["wall_s"])
            line = (f"{bar} update {update}/{updates} {row['env_steps']:,} steps "
                    f"{row['wall_s']:7.1f}s {rate / 1e3:5.1f}k steps/s  score {row['mean_score']:.3f}")
        if self.tty:
            self._write(f"\r{line}" + ("\n" if update == updates else ""))
        else:
            self._write(line + "\n")


def cmd_train(args) -> int:
    """Train (:func:`_train`); a run stopped before its first update (Ctrl-C,
    an error) leaves no run folder it created."""
    created = not os.path.exists(args.out)
    try:
        return _train(args)
    except BaseException:
        if created and os.path.isdir(args.out):  # made by the run: JAX and the trainer are imported already
            from luca_gym.agents.ppo import remove_unfinished_run

            remove_unfinished_run(args.out)
        raise


def _train(args) -> int:
    if args.algo not in TRAIN_ALGOS:
        raise UsageError(f"algo: {args.algo!r} unknown; allowed {', '.join(TRAIN_ALGOS)}")
    world, hook = _world_of(args)
    settings = with_budget(args, world, _settings(args, world, hook, "train_settings", one=True))
    _check_codec_settings(world, settings)
    if "budget" in settings:  # the world's config checks it (and the settings beside it) before anything runs
        fields = world.config_fields()
        world.make_config(**{k: v for k, v in settings.items() if k in fields})
    defaults = TRAIN_DEFAULTS[args.algo]
    steps = defaults["steps"] if args.steps is None else args.steps
    num_envs = defaults["num_envs"] if args.num_envs is None else args.num_envs
    if args.network is not None and args.algo == "maskable-ppo":
        raise UsageError("network: applies to --algo ppo and bc (the JAX networks), not maskable-ppo")
    for option, algos in (("teacher", ("bc",)), ("epochs", ("bc",)), ("init", ("ppo",)), ("learning_rate", ("ppo",)),
                          ("ent_coef", ("ppo",)), ("devices", ("ppo",))):
        if getattr(args, option) is not None and args.algo not in algos:
            raise UsageError(f"{option}: applies to --algo {' and '.join(algos)} only, not {args.algo}")
    if args.algo == "bc" and args.network == "recurrent":
        raise UsageError("network: recurrent trains with --algo ppo only (behaviour cloning fits single steps, "
                         "without the memory a session builds)")
    if args.algo == "bc":
        return _train_by_cloning(args, world, settings, steps, num_envs)
    if args.algo == "maskable-ppo":
        try:
            from luca_gym.agents.sb3 import plan as sb3_plan, train_maskable_ppo
        except ImportError:
            raise UsageError('algo: maskable-ppo needs the rl extra (sb3-contrib); pip install -e ".[rl]"') from None
        pool = {"pool_size": args.pool_size} if args.pool_size is not None else {}
        plan = sb3_plan(steps, num_envs, **pool)
        _writable_dir(args.out)
        train = lambda progress: train_maskable_ppo(  # noqa: E731
            steps=steps, num_envs=num_envs, out=args.out, seed=args.seed, world=world.name, progress=progress, **pool,
            **settings)
        agent = f"sb3:{os.path.join(args.out, 'model.zip')}"
    else:
        from luca_gym.agents import ppo
        from luca_gym.functional import env_sharding

        hyper = _jax_hyper(args, ("pool_size", "network", "learning_rate", "ent_coef", "devices"))
        start = trained = None
        if args.init is not None:
            start, trained = _warm_start(args.init, world)
            if args.network is not None and args.network != trained.network:
                raise UsageError(f"network: {args.network} differs from --init's network ({trained.network}); "
                                 "leave --network out (a warm start keeps its run's network)")
            hyper |= {name: getattr(trained, name) for name in ARCHITECTURE}
        config = ppo.PPOConfig(world.name, settings, steps=steps, num_envs=num_envs, seed=args.seed, **hyper)
        env_sharding(config.devices)  # more devices than this process sees: refused before anything runs
        if start is not None:
            _check_warm_start(args.init, start, trained, config)
        plan = ppo.plan(config) + (f"; starting from {args.init}'s weights" if start is not None else "")
        _writable_dir(args.out)
        warm = {} if start is None else {"network": start, "started_from": args.init}
        train = lambda progress: ppo.train(config, args.out, progress=progress, **warm)  # noqa: E731
        agent = f"ppo:{args.out}"
    print(f"training {args.algo}: {plan}", flush=True)
    progress = TrainProgress(args.quiet, args.algo)
    try:
        summary = train(progress)
    finally:
        progress.close()
    steps_run = summary["env_steps"] if args.algo == "ppo" else summary["steps"]
    rate = f"{summary['steps_per_s']:.0f} steps/s after the first update" if summary["steps_per_s"] else "one update"
    print(f"trained {args.algo}: {steps_run} steps in {summary['wall_s']:.1f} s ({rate}), "
          f"last update's mean score {summary['final_score']:.3f}")
    where = "" if world.name == DEFAULT_WORLD else f" --world {world.name}"
    print(f"run folder: {args.out}  (evaluate: luca-gym eval{where} --agents {agent})")
    return 0


def _check_codec_settings(world, settings: dict) -> None:
    """UsageError naming each of ``settings`` that the world's flat codec
    (what ``train`` learns on) does not take, with those it takes; nothing
    is built (its values are the codec's to check)."""
    import inspect

    from luca_gym.protocol import load

    if world.flat is None:
        return
    parameters = inspect.signature(load(world.flat)).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return  # a codec that does not list its settings checks them itself
    taken = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(settings) - set(taken))
    if unknown:
        raise UsageError(f"settings: {', '.join(unknown)} unknown to the flat codec of world {world.name!r}; allowed "
                         f"{', '.join(taken) or 'none'}")


# The network's own hyperparameters: a warm start keeps its run's (the rest of the PPO's are this run's options).
ARCHITECTURE = ("network", "hidden", "token_width", "attention_layers", "attention_heads", "memory_width")


def _jax_hyper(args, names) -> dict:
    """The PPOConfig fields among ``names`` given as options (the rest keep their defaults)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _warm_start(path: str, world) -> tuple:
    """(network, its run's PPOConfig) of the run folder ``path`` for ``--init``."""
    from luca_gym.agents import ppo

    try:
        config, network = ppo.load_network(path)
    except ppo.CheckpointError as exc:  # it names the file and the problem
        raise UsageError(f"init: {exc}") from None
    if config.world != world.name:
        raise UsageError(f"init: {path} was trained on world {config.world!r}, not {world.name!r}")
    return network, config


def _check_warm_start(path: str, network, trained, config) -> None:
    """UsageError where ``network`` (from ``path``, trained under ``trained``) does not fit ``config``'s codec."""
    import jax

    from luca_gym.agents import ppo

    env = config.make_env()
    like = jax.eval_shape(lambda: ppo.make_network(jax.random.PRNGKey(0), config, env))
    if not ppo.network_fits(network, like):
        given = ", ".join(f"{k}={v}" for k, v in trained.settings)
        raise UsageError(f"init: {path}'s {trained.network} network does not fit {env.describe()} (observation size "
                         f"{env.observation_size}, {env.num_actions} actions); it was trained with {given}: give the "
                         "settings that change the observation or action layout as they were"
                         + (" (its per-gene network plays any n_genes)" if trained.network == "pergene" else ""))


def _train_by_cloning(args, world, settings: dict, steps: int, num_envs: int) -> int:
    """``luca-gym train --algo bc``: clone one of the world's flat baselines into a
    network (:func:`luca_gym.agents.bc.clone`) and write a PPO run folder
    (``ppo:OUT`` plays it; ``--algo ppo --init OUT`` fine-tunes it)."""
    import csv

    from luca_gym.agents import bc, ppo

    if world.flat is None:
        raise UsageError(f"algo: bc needs a world with a flat codec (World.flat); world {world.name!r} has none")
    teachers = world.flat_baseline_policies()
    if not teachers:
        raise UsageError(f"algo: bc needs a teacher, and world {world.name!r} ships no flat baseline "
                         "(World.flat_baselines)")
    teacher = args.teacher if args.teacher is not None else next(iter(teachers))
    if teacher not in teachers:
        raise UsageError(f"teacher: {teacher!r} unknown for world {world.name!r}; allowed {', '.join(teachers)}")
    epochs = BC_EPOCHS if args.epochs is None else args.epochs
    if isinstance(epochs, bool) or epochs < 1:
        raise UsageError(f"epochs: {epochs} not allowed; a positive integer")
    for name, value in (("num_envs", num_envs), ("steps", steps)):
        if value < 1:
            raise UsageError(f"{name}: {value} not allowed; a positive integer")
    length = steps // num_envs
    if length < 1:
        raise UsageError(f"steps: {steps} is less than one step per env ({num_envs} envs); allowed at least {num_envs}")
    hyper = _jax_hyper(args, ("pool_size", "network"))
    config = ppo.PPOConfig(world.name, settings, steps=num_envs * length, num_envs=num_envs, num_steps=length,
                           minibatches=1, seed=args.seed, **hyper)
    env = config.make_env()
    _writable_dir(args.out)
    print(f"training bc: {teacher}'s sessions on {env.describe()}, {num_envs} envs x {length} steps "
          f"({num_envs * length:,} steps; the steps after an env's last ended session are dropped), "
          f"fitted into the {config.network} network for {epochs} epochs", flush=True)
    progress = TrainProgress(args.quiet, "bc")
    rows = []

    def record(row):
        rows.append(row)
        progress(row)

    try:
        cloned = bc.clone(config, teachers[teacher](env), envs=num_envs, steps=length, epochs=epochs,
                          minibatch=BC_MINIBATCH, progress=record)
    except bc.TooFewSamples as exc:
        raise UsageError(f"steps: the teacher's {num_envs} envs x {length} steps kept {exc.samples} steps of ended "
                         f"sessions, fewer than one minibatch of {BC_MINIBATCH}; allowed more --steps (or fewer "
                         "--num-envs, for longer rollouts)") from None
    finally:
        progress.close()
    summary = {"algo": "bc", "teacher": teacher, "teacher_score": cloned["teacher_score"], "samples": cloned["samples"],
               "epochs": epochs, "cross_entropy": cloned["cross_entropy"], "accuracy": cloned["accuracy"],
               "wall_s": cloned["wall_s"], "out": args.out}
    ppo.save(args.out, config, cloned["network"], summary)
    with open(os.path.join(args.out, CLONING_CSV), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ("epoch", "cross_entropy", "accuracy", "wall_s"), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"trained bc: {cloned['samples']:,} of the teacher's steps in {cloned['wall_s']:.1f} s; the network takes the "
          f"teacher's action on {cloned['accuracy']:.3f} of them (last epoch); the teacher's mean {env.headline} on the "
          f"training pool {cloned['teacher_score']:.3f}")
    where = "" if world.name == DEFAULT_WORLD else f" --world {world.name}"
    print(f"run folder: {args.out}  (evaluate: luca-gym eval{where} --agents ppo:{args.out}; "
          f"fine-tune: luca-gym train{where} --algo ppo --init {args.out} ...)")
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
    """One block per registered world (built-in and entry points), from the
    registry's descriptions (:func:`luca_gym.worlds.describe`: no world's
    core is imported, nor JAX)."""
    from luca_gym import worlds

    for name in worlds.names():
        w = worlds.describe(name)
        print(f"{w['name']} (version {w['version']}): {w['summary']}")
        print(f"  headline score: {w['headline']};  settings: {', '.join(w['settings']) or 'none'}")
        print(f"  gymnasium: {', '.join(w['gym_ids']) or 'none'}")
        print(f"  baselines: {', '.join(w['baselines']) or 'none'}")
        if w["flat_baselines"] is not None:
            print(f"  flat baselines (teachers of train --algo bc): {', '.join(w['flat_baselines'])}")
        if w["reference"]:
            print(f"  reference: {w['reference']}")
    return 0


def cmd_report(args) -> int:
    """Write the report; each step it starts is said on stderr (``report: ...``)."""
    from luca_gym.results.report import log, results_folder, write_report

    if args.out:
        _writable_dir(args.out)
    with _results_notes(), say_steps(log, "report"):
        text = write_report(args.results, args.out)
    folder = args.out or results_folder(args.results)
    print(os.path.join(folder, "report.md"))
    print(os.path.join(folder, "report.html"))
    for figure in dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)):
        print(os.path.join(folder, figure))
    return 0


def _request_arguments(p, sweep: bool = True) -> None:
    """The model request settings of ``eval`` (and ``check-model``, ``sweep=False``)."""
    if sweep:
        p.add_argument("--max-turns", type=int, default=None, metavar="N",
                       help="agent turns a tool agent's session may take (default: the session's own limit, else 300)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="tokens a model turn may generate (default: the server's); too few cut tool calls short")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the server's)")
    p.add_argument("--model-seed", type=int, default=None, metavar="N",
                   help="the model's sampling seed, for OpenAI-compatible servers (not the instance --seeds)")
    p.add_argument("--tool-choice", default=None, metavar="CHOICE",
                   help="auto, required, none, or a tool's name (some servers parse tool calls only when one is named)")
    p.add_argument("--request-timeout", type=float, default=None, metavar="SECONDS",
                   help="how long one model call may take before it fails (and is retried)"
                        + (" (default: the SDK's, 600 s)" if sweep else " (default: 60)"))


def _request_settings(args, models: list[str]) -> dict:
    """The request settings given (``request`` of the sweep: ``max_turns`` and
    what model agents send), checked; UsageError for one given without a model
    agent that takes it, ValueError (one line, naming the option) for a bad value."""
    from luca_gym.llm.loop import check_max_turns
    from luca_gym.llm.providers import check_request

    sent = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.model_seed,
            "tool_choice": args.tool_choice, "timeout": args.request_timeout}
    given = {k: v for k, v in sent.items() if v is not None}
    if given and not models:
        flag = "--" + {"seed": "model-seed", "timeout": "request-timeout"}.get(next(iter(given)), next(iter(given))).replace("_", "-")
        raise UsageError(f"{flag}: no openai:MODEL, anthropic:MODEL or mock agent in --agents; request settings go to models")
    for model in models:
        try:
            check_request(given, model)
        except ValueError as exc:
            name, _, rest = str(exc).partition(":")
            raise UsageError("--" + {"seed": "model-seed", "timeout": "request-timeout"}.get(name, name).replace("_", "-")
                             + ":" + rest) from None
    if getattr(args, "max_turns", None) is not None:
        try:
            given["max_turns"] = check_max_turns(args.max_turns)
        except ValueError as exc:
            raise UsageError(f"--{exc}".replace("max_turns", "max-turns", 1)) from None
    return given


def cmd_check_model(args) -> int:
    """One call to ``--model`` at ``--base-url`` with one tool: say whether a
    server answered and whether it returned a tool call (exit 0 if so, 1 if not)."""
    import json

    from luca_gym.llm.providers import check_model

    request = _request_settings(args, [f"openai:{args.model}"])
    if args.base_url is None and not os.environ.get("OPENAI_API_KEY"):
        raise UsageError("--base-url: none given and $OPENAI_API_KEY is not set; name a local server, e.g. "
                         "--base-url http://127.0.0.1:8080/v1")
    out = check_model(args.model, args.base_url, **request)
    where = args.base_url or "OpenAI's API"
    if not out["server"]:
        print(f"no answer from {where}: {out['error']}")
        return 1
    print(f"server: answered at {where} in {out['latency_s']} s (finish_reason {out['finish_reason']!r})")
    if out["ok"]:
        call = out["tool_call"]
        print(f"tool call: {call['name']}({call['arguments'] if isinstance(call['arguments'], str) else json.dumps(call['arguments'])})"
              " -- this model and server can run eval")
        return 0
    print(f"tool call: none. {out['error']}" + (f"\ntext: {out['content'][:300]!r}" if out.get("content") else ""))
    return 1


def cmd_show(args) -> int:
    """Draw one recorded session with its world's viewer and print the path (one
    line); when several sessions match, a note on stderr names the one drawn."""
    from luca_gym import harness as ev
    from luca_gym import worlds
    from luca_gym.results import report

    with _results_notes():
        records = ev.load_sessions(args.results)
    filters = {}
    for name, hook in _hooks().items():
        if hasattr(hook, "show_filters"):
            filters.update({k: v for k, v in hook.show_filters(args).items() if v is not None})
    # A record is of any world: a key read as a bool where each world that has it types it bool.
    every = [worlds.get(name) for name in worlds.names()]
    bools = set().union(*map(_bool_fields, every)) - {f for w in every for f in set(w.config_fields()) - _bool_fields(w)}
    for text in args.set:
        key, values = _setting_values(text)
        values = [_bool_setting(v, key) for v in values] if key in bools else values
        filters[key] = values[0] if len(values) == 1 else values
    if args.transcript:
        from luca_gym.results.transcripts import transcript_text

        record, note = report.pick_session(records, args.seed, args.agent, **filters)
        if note:
            print(f"luca-gym show: note: {note}", file=sys.stderr)
        print(transcript_text(record), end="")
        return 0
    record, viewer, out, note = report.session_to_draw(records, args.results, args.seed, args.agent, args.out, **filters)
    _writable_dir(os.path.dirname(os.path.abspath(out)), "out")
    # The viewer may rebuild the instance and starts matplotlib: seconds (more while JAX compiles a first run).
    print(f"luca-gym show: drawing the session (agent {record.get('agent')}, seed {record.get('seed')}) into {out} ...",
          file=sys.stderr, flush=True)
    viewer.draw_session(record, out)
    if note:
        print(f"luca-gym show: note: {note}", file=sys.stderr)
    print(out)
    return 0


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

    world, hook = _world_of(args)
    if world.tools is None:
        raise UsageError(f"world: {world.name!r} has no tools to serve")
    if not args.agent.strip():
        raise UsageError("agent: an empty name; give the name the session is recorded under, e.g. mcp-client")
    seed = check_seed(args.seed)
    settings = _settings(args, world, hook, "session_settings", one=True)
    for option, flag in (("python", "--python"), ("analysis_tools", "--python-analysis-tools")):
        if option in settings:
            raise UsageError(f"set: {option} is not a setting of the world; give {flag}")
    check_setting_names(world, settings)  # an unknown one named at once, before a folder is made or a session opened
    if args.out:
        _writable_dir(args.out, "out")
    keys = [k for k in world.session_keys if k != "seed"]
    key_settings = ev.complete_settings(world, {k: v for k, v in settings.items() if k in keys})  # checked, defaults filled
    spec = SessionSpec(args.agent, seed, world.name, tuple(key_settings.items()))
    open_tools = load(world.tools)
    options = tool_options(open_tools, python=_python_option(args), sealed=args.sealed or args.secret_file or None,
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


def build_parser(world=None) -> argparse.ArgumentParser:
    """The command's parser, with ``eval``, ``train`` and ``mcp`` built for
    ``world`` (a World, a registered name, or None: the default, LUCA):
    their help shows that world's options only (its CLI hook's, or, for a
    world without one, each field of its config as an option, ``--n-nodes``).
    Another world's hook options are still parsed, hidden, so that one given
    is refused naming its world."""
    from luca_gym import __version__, worlds
    from luca_gym.llm.loop import BACKOFF_S, RETRIES

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
    world_help = "the world: a registered world's name (luca_gym worlds) or package.module:WORLD"
    set_help = "a setting of the world, one value or a comma-separated list, e.g. --set n_bits=6,8 (repeatable; " \
               "a setting left out takes its default)"

    def described(command: str, text: str) -> str:
        import textwrap

        default = " (the default world)" if world.name == DEFAULT_WORLD else ""
        line = (f"The options shown are {world.name}'s{default}; other worlds have their own: "
                f"luca-gym {command} --world NAME --help (luca-gym worlds lists them).")
        return f"{text[0].upper()}{text[1:]}.\n\n" + textwrap.fill(line, 79)

    text = "run a sweep of agents over a world's instances (resumable)"
    p = sub.add_parser("eval", help=text, description=described("eval", text))
    p.add_argument("--world", default=DEFAULT_WORLD, help=world_help)
    p.add_argument("--agents", default=None,
                   help="comma-separated: the world's baselines, openai:MODEL, anthropic:MODEL, mock (a scripted model "
                        "behind the same provider path: no key, no network), module:attribute (your agent factory, e.g. "
                        "my_agents:make_agent), ppo:RUN_DIR, sb3:FILE.zip (default: the world's baselines; LUCA's: the "
                        "paper's three)")
    p.add_argument("--base-url", default=None,
                   help="OpenAI-compatible server for openai:MODEL agents (local servers too; check one first with "
                        "luca-gym check-model), passed as base_url= to a module:attribute factory")
    responses = p.add_mutually_exclusive_group()
    responses.add_argument("--record-responses", default=None, metavar="FILE",
                           help="append every openai:/anthropic:/mock provider call to FILE (JSONL: the request, its key and "
                                "the response; no API key), to replay the run with --replay-responses")
    responses.add_argument("--replay-responses", default=None, metavar="FILE",
                           help="answer every openai:/anthropic: call from FILE (--record-responses): the same calls, "
                                "scores and tokens, with no network and no API key; a request not in FILE stops the run "
                                "naming its turn")
    p.add_argument("--concurrency", type=int, default=1, metavar="K",
                   help="sessions of openai:/anthropic: agents run at once (baselines and learned agents: one at a time)")
    p.add_argument("--retries", type=int, default=RETRIES, metavar="N",
                   help="times a failed provider call (rate limit, overload, timeout, connection, malformed answer) is "
                        "made again; a session still failing for the service (rate limit, overload, connection) is not "
                        "recorded and a rerun runs it, one failing for the model (an unreadable answer, a server 500 on "
                        "its output, a full context) ends as end_reason model_error, recorded and scored")
    p.add_argument("--backoff", type=float, default=BACKOFF_S, metavar="SECONDS",
                   help="wait before the first retry, doubled at each next one, with jitter")
    p.add_argument("--price", default=None, metavar="IN,OUT",
                   help="USD per million input and output tokens: each record gets its cost_usd (default: none)")
    p.add_argument("--seeds", default="0-19", help="instance seeds, e.g. 0-19, 0,3,7 or 0-4,10")
    p.add_argument("--budget", default=None, metavar="VALUE",
                   help=BUDGET_HELP + "; where it is not a key field (LUCA, equation) one value for the whole sweep, "
                                      "recorded in every line: a results folder holds one budget (a line of another is "
                                      "refused)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUES", help=set_help)
    p.add_argument("--ablation", default=None, metavar="NAMES",
                   help="comma-separated contrasts of the world (`luca-gym worlds`; LUCA: backwards, vocabulary, stance): "
                        "run both arms of each, paired by seed; `luca-gym report` adds the paired tests")
    _add_world_arguments(p, "add_eval_arguments", shown=world.name)
    if flag_world is not None:
        _config_flags(p, flag_world, many=True)
    p.add_argument("--out", default="results", help="results folder (sessions.jsonl is appended)")
    _sealed_arguments(p, eval_=True)
    p.add_argument("--python", action="store_true", help=PYTHON_HELP)
    p.add_argument("--python-analysis-tools", action="store_true", help=PYTHON_ANALYSIS_HELP)
    _sandbox_arguments(p)
    _request_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (a bar on a terminal, else a line every 5 s)")
    p.set_defaults(func=cmd_eval)

    text = "one call to an OpenAI-compatible model: is a server there, and does it return a tool call?"
    p = sub.add_parser("check-model", help=text, description=f"{text[0].upper()}{text[1:]} Exit 0 if it does, 1 if not.")
    p.add_argument("--model", required=True, help="the model's name, as the server knows it")
    p.add_argument("--base-url", default=None, help="the server, e.g. http://127.0.0.1:8080/v1 (default: OpenAI's API)")
    _request_arguments(p, sweep=False)
    p.set_defaults(func=cmd_check_model)

    text = "train a learned agent on a world's flat action space"
    p = sub.add_parser("train", help=text, description=described("train", text))
    p.add_argument("--world", default=DEFAULT_WORLD, help=world_help + " (one with a flat codec)")
    p.add_argument("--algo", default="ppo", metavar="{" + ",".join(TRAIN_ALGOS) + "}",
                   help="ppo (pure JAX, this package, any world with a flat codec), maskable-ppo (sb3-contrib, the rl "
                        "extra; LUCA) or bc (behaviour cloning of one of the world's flat baselines into a JAX network: "
                        "a PPO run folder, to evaluate as ppo:OUT or fine-tune with --algo ppo --init OUT)")
    p.add_argument("--teacher", default=None, metavar="NAME",
                   help="--algo bc: the flat baseline to clone (default: the world's first; LUCA: causal-sweep-flat)")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"--algo bc: passes over the teacher's steps (default {BC_EPOCHS})")
    p.add_argument("--learning-rate", type=float, default=None, metavar="LR",
                   help="--algo ppo: Adam's learning rate, annealed linearly to 0 over the run (default 0.001; lower "
                        "for a fine-tune from --init)")
    p.add_argument("--ent-coef", type=float, default=None, metavar="C",
                   help="--algo ppo: the entropy bonus (default 0.01)")
    p.add_argument("--init", default=None, metavar="RUN",
                   help="--algo ppo: start from this run folder's weights (e.g. a bc run's) and keep its network; the "
                        "codec settings must give the same observation and action layout (a per-gene network: any n_genes)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the world's flat codec (repeatable)")
    p.add_argument("--budget", default=None, metavar="VALUE", help=BUDGET_HELP + "; saved in the run folder's config.json")
    p.add_argument("--network", default=None, metavar="{mlp,pergene,recurrent}",
                   help="--algo ppo or bc: the policy network, mlp (default: one N only) or pergene (attention over genes, equinox: "
                        "one set of weights plays every N; a world whose flat codec has a token layout); --algo ppo: "
                        "recurrent (a GRU memory through each session, for an observation that leaves the history to the "
                        "learner: the graph worlds' --set observation=raw, best with --set raw_actions=commit)")
    p.add_argument("--devices", type=int, default=None, metavar="N",
                   help="--algo ppo: split the envs over N local devices, data-parallel (jax.sharding, one mesh axis "
                        "over the envs; N divides --num-envs; default 1)")
    _add_world_arguments(p, "add_train_arguments", shown=world.name)
    if flag_world is not None:
        _config_flags(p, flag_world, many=False)
    p.add_argument("--steps", type=int, default=None,
                   help=f"env steps (default: ppo {TRAIN_DEFAULTS['ppo']['steps']}, maskable-ppo "
                        f"{TRAIN_DEFAULTS['maskable-ppo']['steps']}; bc: the teacher's, {TRAIN_DEFAULTS['bc']['steps']})")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"envs side by side (default: ppo {TRAIN_DEFAULTS['ppo']['num_envs']}, "
                        f"maskable-ppo {TRAIN_DEFAULTS['maskable-ppo']['num_envs']}, bc {TRAIN_DEFAULTS['bc']['num_envs']})")
    p.add_argument("--pool-size", type=int, default=None,
                   help="training instances, seeds 10000 .. 10000+SIZE-1 (default 1024; never the evaluation seeds 0-19)")
    p.add_argument("--out", required=True, help="run folder (checkpoint, config, learning curve CSV and PNG)")
    p.add_argument("--seed", type=int, default=0, help="the run's random seed")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("worlds", help="the registered worlds: name, version, headline score, Gymnasium ids, baselines")
    p.set_defaults(func=cmd_worlds)

    p = sub.add_parser("report", help="markdown tables, PNG figures and report.html (with each transcript) from a results folder")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--out", default=None, help="where to write report.md, report.html and figures (default: the results folder)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="draw one recorded session with its world's viewer (LUCA's: a timeline PNG of calls, "
                                    "phenotypes, predictions, diagnosis, rescue)")
    p.add_argument("results", help="results folder or sessions.jsonl")
    p.add_argument("--seed", type=int, required=True, help="the session's instance seed")
    p.add_argument("--agent", required=True, help="the session's agent, as recorded (e.g. random, openai:MODEL)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="narrow to sessions with this key setting (repeatable; the first session matching is drawn)")
    for hook in _hooks().values():
        if hasattr(hook, "add_show_arguments"):
            hook.add_show_arguments(p)
    p.add_argument("--transcript", action="store_true",
                   help="print the session's whole transcript (any world: every message, tool call and result) "
                        "instead of drawing it")
    p.add_argument("--out", default=None,
                   help="PNG to write (default: RESULTS_FOLDER/ + the viewer's name for the session, LUCA's "
                        "session_<agent>_<tier>_<mode>_<seed>.png, with _N<n> for N other than 20 and _backwards)")
    p.set_defaults(func=cmd_show)

    text = "serve one session's tools over MCP (stdio)"
    p = sub.add_parser("mcp", help=text, description=described("mcp", text))
    p.add_argument("--world", default=DEFAULT_WORLD, help=world_help)
    p.add_argument("--seed", type=int, default=0, help="instance seed (a non-negative integer)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the world (repeatable)")
    _add_world_arguments(p, "add_session_arguments", shown=world.name)
    if flag_world is not None:
        _config_flags(p, flag_world, many=False)
    _sealed_arguments(p)
    p.add_argument("--python", action="store_true", help=PYTHON_HELP)
    p.add_argument("--python-analysis-tools", action="store_true", help=PYTHON_ANALYSIS_HELP)
    _sandbox_arguments(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="record the session, once it ends (end, the call limit or the client gone after a "
                        "tool call), in DIR/sessions.jsonl, the harness's format: luca-gym report reads it")
    p.add_argument("--agent", default="mcp-client", metavar="NAME",
                   help="the agent's name in the record (default %(default)s); one session per agent and instance")
    p.set_defaults(func=cmd_mcp)

    for hook in _hooks().values():  # each world's own commands
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
        world = _chosen_world(argv)
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

    command, _ = _world_named(argv)
    try:
        world = _chosen_world(argv)
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


if __name__ == "__main__":
    sys.exit(main())
