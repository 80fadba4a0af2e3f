"""What the commands that call a language model share (``eval`` with
``openai:``/``anthropic:``/``mock`` agents, ``check-model``): the request
options (``--max-tokens``, ``--temperature``, ...) and their check, the
recorded responses (``--record-responses``/``--replay-responses``), the
server and API-key checks made before any file is created, and the usage
line printed after a sweep."""

from __future__ import annotations

import os

from luca_gym.cli.common import UsageError


def request_arguments(p, sweep: bool = True) -> None:
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


def request_settings(args, models: list[str]) -> dict:
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


def response_cassette(args, models: list[str]):
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


def check_server(args, agents: list[str], cassette) -> None:
    """UsageError, in seconds, where ``--base-url`` names no server that accepts
    a connection and an openai: agent would call it (not when replaying)."""
    if args.base_url is None or (cassette is not None and cassette.replaying) or not any(a.startswith("openai:") for a in agents):
        return
    from luca_gym.llm.providers import server_reachable

    why = server_reachable(args.base_url)
    if why is not None:
        raise UsageError(f"--base-url: {why}; start the server, or check the URL with luca-gym check-model")


def check_model_key(agent: str, runner, base_url: str | None) -> None:
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


def usage_line(usage: list, costs: list) -> str:
    """One line summing the ``usage`` of tool-calling sessions (and their ``cost_usd``, when priced)."""
    total = lambda key: sum(u.get(key) or 0 for u in usage)  # noqa: E731
    failed = sum(len(u.get("failed_calls") or []) for u in usage)
    cost = f", cost ${sum(costs):.4f}" if costs and all(c is not None for c in costs) else ""
    return (f"usage: {len(usage)} tool-calling session(s), {total('provider_calls')} provider calls ({failed} failed, "
            f"{total('retries')} retried), {total('input_tokens')} input and {total('output_tokens')} output tokens{cost}")
