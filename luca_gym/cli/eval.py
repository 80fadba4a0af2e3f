"""``luca-gym eval``: a resumable sweep of agents (the world's baselines,
language models, learned agents, your own) over a world's instances, into a
results folder, then the world's tables. Every argument and agent (a model's
SDK and key, a learned agent's checkpoint) is checked before a file is made;
``--ablation`` runs both arms of a world's contrasts."""

from __future__ import annotations

import contextlib
import os
import sys

from luca_gym.cli.common import (
    UsageError,
    names,
    parse_seeds,
    price,
    python_option,
    sandbox_arguments,
    seal_of,
    sealed_arguments,
    setting_values,
    writable_dir,
)
from luca_gym.cli.models import (
    check_model_key,
    check_server,
    request_arguments,
    request_settings,
    response_cassette,
    usage_line,
)
from luca_gym.cli.progress import Progress, spec_label
from luca_gym.cli.world_options import (
    BUDGET_HELP,
    DEFAULT_WORLD,
    PYTHON_ANALYSIS_HELP,
    PYTHON_HELP,
    SET_HELP,
    WORLD_HELP,
    add_world_arguments,
    config_flags,
    described,
    hooks,
    with_budget,
    world_of,
    world_settings,
)


def add_parser(sub, world, flag_world) -> None:
    """``eval``'s parser, its options ``world``'s (a world without a CLI hook, ``flag_world``: its key
    settings as options, a comma list each)."""
    from luca_gym.llm.loop import BACKOFF_S, RETRIES

    text = "run a sweep of agents over a world's instances (resumable)"
    p = sub.add_parser("eval", help=text, description=described("eval", text, world))
    p.add_argument("--world", default=DEFAULT_WORLD, help=WORLD_HELP)
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
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUES", help=SET_HELP)
    p.add_argument("--ablation", default=None, metavar="NAMES",
                   help="comma-separated contrasts of the world (`luca-gym worlds`; LUCA: backwards, vocabulary, stance): "
                        "run both arms of each, paired by seed; `luca-gym report` adds the paired tests")
    add_world_arguments(p, "add_eval_arguments", shown=world.name)
    if flag_world is not None:
        config_flags(p, flag_world, many=True)
    p.add_argument("--out", default="results", help="results folder (sessions.jsonl is appended)")
    sealed_arguments(p, eval_=True)
    p.add_argument("--python", action="store_true", help=PYTHON_HELP)
    p.add_argument("--python-analysis-tools", action="store_true", help=PYTHON_ANALYSIS_HELP)
    sandbox_arguments(p)
    request_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (a bar on a terminal, else a line every 5 s)")
    p.set_defaults(func=cmd_eval)


def ablation_arms(args, world, hook, settings: dict) -> dict:
    """``settings`` with both arms of each contrast ``--ablation`` names
    (``World.contrasts``); a setting the user fixed (a world option the hook's
    ``given_settings(args)`` reports, or ``--set``) is refused."""
    if args.ablation is None:
        return settings
    allowed = ", ".join(c.name for c in world.contrasts) or f"none (world {world.name!r} declares no contrasts)"
    by_option = set(hook.given_settings(args)) if hook is not None and hasattr(hook, "given_settings") else set()
    by_set = {setting_values(text)[0] for text in args.set}
    for name in names(args.ablation, "ablation", allowed):
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
    """The sweep's progress on stderr (:class:`~luca_gym.cli.progress.Progress`:
    a bar on a terminal, a line every few seconds elsewhere), a session named
    by its world's ``progress_label`` where the world's CLI hook has one."""

    def label(spec) -> str:
        hook = hooks().get(spec.world)
        return hook.progress_label(spec) if hook is not None and hasattr(hook, "progress_label") else spec_label(spec)

    return Progress(quiet, label=label)


def cmd_eval(args) -> int:
    """Plan the sweep and check every argument and agent (a model agent's SDK
    and key, a learned agent's checkpoint) before creating any file; then run
    it, resuming what ``--out`` holds, and print the world's tables."""
    from luca_gym import harness as ev
    from luca_gym.llm.loop import check_retry

    world, hook = world_of(args)
    seeds = parse_seeds(args.seeds)  # the command's own options first: they need no world module
    prices, concurrency = price(args.price), ev.check_concurrency(args.concurrency)
    check_retry(args.retries, args.backoff)
    python = python_option(args)  # --python, under --sandbox-memory / --sandbox-time where given
    if args.agents is None:
        agents = list(getattr(hook, "default_agents", None) or world.baseline_policies())
        if not agents:
            raise UsageError(f"agents: world {world.name!r} has no baselines; give --agents openai:MODEL or anthropic:MODEL")
    else:
        agents = names(args.agents, "agent", ev.agents_allowed(world))
    settings = with_budget(args, world, world_settings(args, world, hook, "eval_settings"))
    specs = ev.plan_world(world, agents, seeds, **ablation_arms(args, world, hook, settings))
    cassette = response_cassette(args, [a for a in agents if ev.is_llm_agent(a)])
    request = request_settings(args, [a for a in agents if ev.is_llm_agent(a)])
    sent = {k: v for k, v in request.items() if k != "max_turns"}
    check_server(args, agents, cassette)

    def runner(name: str):
        if cassette is not None and ev.is_llm_agent(name):
            from luca_gym.llm.providers import make_agent

            return make_agent(name, args.base_url, cassette=cassette, request=sent)
        return ev.make_runner(name, args.base_url, world=world.name, **({"request": sent} if sent else {}))

    for agent in agents:
        if ev.is_llm_agent(agent):  # its SDK and key, before a file is made (a runner is made again for each session)
            check_model_key(agent, runner(agent), args.base_url)
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
    writable_dir(args.out)
    progress = sweep_progress(args.quiet)
    try:
        seal = seal_of(args, out=args.out)
        path = ev.sweep(specs, args.out, policy_factory=factory, progress=progress, sealed=seal,
                        base_url=args.base_url, concurrency=concurrency, retries=args.retries,
                        backoff=0 if cassette is not None and cassette.replaying else args.backoff,  # replay: no waits
                        price=prices, log=None if args.quiet else _say, python=python,
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
