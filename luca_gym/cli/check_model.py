"""``luca-gym check-model``: one call to an OpenAI-compatible model with one
tool, to see before a sweep whether a server answers and returns a tool
call (exit 0 if it does, 1 if not)."""

from __future__ import annotations

import os

from luca_gym.cli.common import UsageError
from luca_gym.cli.models import request_arguments, request_settings


def add_parser(sub) -> None:
    """``check-model``'s parser."""
    text = "one call to an OpenAI-compatible model: is a server there, and does it return a tool call?"
    p = sub.add_parser("check-model", help=text, description=f"{text[0].upper()}{text[1:]} Exit 0 if it does, 1 if not.")
    p.add_argument("--model", required=True, help="the model's name, as the server knows it")
    p.add_argument("--base-url", default=None, help="the server, e.g. http://127.0.0.1:8080/v1 (default: OpenAI's API)")
    request_arguments(p, sweep=False)
    p.set_defaults(func=cmd_check_model)


def cmd_check_model(args) -> int:
    """One call to ``--model`` at ``--base-url`` with one tool: say whether a
    server answered and whether it returned a tool call (exit 0 if so, 1 if not)."""
    import json

    from luca_gym.llm.providers import check_model

    request = request_settings(args, [f"openai:{args.model}"])
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
