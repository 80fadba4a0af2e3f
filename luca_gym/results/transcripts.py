"""A recorded session's transcript as text (``luca-gym show --transcript``):
the ``messages`` a results line keeps (:func:`luca_gym.llm.loop.run_agent`),
one block per message, for any world."""

from __future__ import annotations

import json
import textwrap

WIDTH = 100  # characters a line of prose is wrapped to
MAX_RESULT = 1200  # characters of a tool result shown (the rest is counted)


def _wrapped(text: str, indent: str) -> list[str]:
    out = []
    for paragraph in str(text).splitlines() or [""]:
        out += textwrap.wrap(paragraph, WIDTH, initial_indent=indent, subsequent_indent=indent) or [indent.rstrip()]
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_RESULT else f"{text[:MAX_RESULT]}... ({len(text) - MAX_RESULT:,} more characters)"


def arguments_text(arguments) -> str:
    """A tool call's arguments as the transcript shows them: JSON, also where
    the model sent them as JSON text (parsed first, so they read alike);
    text that is not JSON as it came."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


def transcript_text(record: dict) -> str:
    """The transcript of ``record`` (a results line) as plain text: each
    message with its role, an assistant's text, reasoning, tool calls and
    tokens, each tool result (cut at :data:`MAX_RESULT` characters). A record
    without a transcript (a scripted policy's, or one from before transcripts
    were kept) says so and lists its calls."""
    head = f"{record.get('world')} · {record.get('agent')} · seed {record.get('seed')}"
    messages = record.get("messages")
    if not messages:
        calls = [c.get("call") for c in record.get("calls") or ()]
        return f"{head}\n(no transcript in this record; its calls: {', '.join(map(str, calls)) or 'none'})\n"
    lines = [head, ""]
    for i, m in enumerate(messages):
        role = m.get("role", "?")
        if role == "assistant":
            extra = [f"{k} {m[k]}" for k in ("latency_s", "finish_reason") if m.get(k) is not None]
            usage = m.get("usage") or {}
            if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
                extra.append(f"tokens in {usage.get('input_tokens')} out {usage.get('output_tokens')}")
            if m.get("harness"):
                extra.append(f"the harness ended the session: {m['harness']}")
            lines.append(f"[{i}] assistant" + (f" ({'; '.join(extra)})" if extra else ""))
            if m.get("reasoning"):
                lines += _wrapped(f"reasoning: {m['reasoning']}", "    ")
            if m.get("content"):
                lines += _wrapped(m["content"], "    ")
            for c in m.get("tool_calls") or ():
                lines += _wrapped(f"-> {c.get('name')}({arguments_text(c.get('arguments'))})", "    ")
        elif role == "tool":
            lines.append(f"[{i}] tool {m.get('name', '')}" + (" (error)" if m.get("is_error") else ""))
            lines += _wrapped(_cut(str(m.get("content", ""))), "    ")
        else:
            lines.append(f"[{i}] {role}")
            lines += _wrapped(m.get("content", ""), "    ")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


VOLATILE = ("wall_s", "digest")  # a record's fields that differ between two runs of the same session
VOLATILE_IN_MESSAGES = ("latency_s",)


def comparable(record: dict) -> dict:
    """``record`` without what differs between two runs of the same session
    (:data:`VOLATILE`, and each message's :data:`VOLATILE_IN_MESSAGES`): two
    runs, or a run and its replay, compare equal through it."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    if isinstance(out.get("messages"), list):
        out["messages"] = [{k: v for k, v in m.items() if k not in VOLATILE_IN_MESSAGES} for m in out["messages"]]
    return out
