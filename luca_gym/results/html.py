"""``report.html``: the report of a results folder as one static page
(``luca-gym report`` writes it beside ``report.md``).

The page holds the report's markdown (its headings, paragraphs, tables and
figures: :func:`markdown_to_html`, a small converter for the markdown the
report itself writes; each PNG figure embedded as a base64 data URI, so the
page opens from disk alone) and, after it, the transcript of each session
that keeps one (:func:`transcript_html`): every message, folded in a
``<details>``, with its role, text, reasoning, tool calls and their
arguments, tool results (cut at :data:`MAX_RESULT` characters) and, beside
each call, the status the session reported after it (the budget left, where
the world's calls record one). At most :data:`MAX_SESSIONS` sessions per
world and agent are shown; the page says how many were left out.

All text is escaped; the page has no script and loads nothing from a network.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re

from luca_gym import worlds

FILE_NAME = "report.html"
MAX_SESSIONS = 5  # transcripts shown per world and agent
MAX_MESSAGES = 400  # messages shown per transcript
MAX_RESULT = 4000  # characters of a tool result (or of a call's arguments) shown
MAX_TEXT = 20000  # characters of an assistant's text or reasoning shown
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml"}
_CALL_FIELDS = ("call", "arguments", "result")  # a calls entry's fields; the others are the session's status after it

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       color: #1b1b1b; line-height: 1.45; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
img { max-width: 100%; }
code { background: #f4f4f4; padding: 0 0.2em; }
pre { white-space: pre-wrap; word-break: break-word; background: #f8f8f8; padding: 0.5em; margin: 0.3em 0; }
details { margin: 0.4em 0; }
summary { cursor: pointer; }
.session { border: 1px solid #ddd; border-radius: 4px; padding: 0.3em 0.8em; }
.message { border-left: 4px solid #bbb; padding: 0.2em 0.8em; margin: 0.6em 0; }
.message.system { border-color: #999; } .message.user { border-color: #3572b0; }
.message.assistant { border-color: #2e8b57; } .message.tool { border-color: #c77c02; }
.message.error { border-color: #c62828; }
.role { font-weight: bold; } .meta { color: #666; font-size: 0.85em; }
.reasoning pre { background: #f3f0fa; } .status { color: #7a4d00; font-size: 0.85em; }
.note { color: #666; font-style: italic; }
"""


# -- markdown -> html --------------------------------------------------------------------------
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ITEM = re.compile(r"^\s*[-*+]\s+(.*)$")
_IMAGE_LINE = re.compile(r"^\s*!\[([^\]]*)\]\(([^)\s]+)\)\s*$")


def _safe_url(url: str) -> str:
    """``url`` unless it has a scheme other than http(s) or data: then '#'."""
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", url)
    return url if scheme is None or scheme.group(1).lower() in ("http", "https", "data") else "#"


def image_src(src: str, folder: str | None) -> str:
    """The ``src`` of an image the markdown names: a file of ``folder``
    (relative path, an image type) as a base64 data URI, anything else as
    given (relative links still open from disk beside the page)."""
    kind = _IMAGE_TYPES.get(os.path.splitext(src)[1].lower())
    if folder is not None and kind and "://" not in src and not os.path.isabs(src):
        path = os.path.join(folder, src)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                return f"data:{kind};base64,{base64.b64encode(f.read()).decode('ascii')}"
    return _safe_url(src)


def inline_html(text: str, folder: str | None = None) -> str:
    """One line of markdown as escaped html: code spans, images, links, bold and italics."""
    out = []
    for part in _CODE_SPAN.split(text):
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        s = _IMAGE.sub(lambda m: f'<img alt="{html.escape(m.group(1))}" src="{html.escape(image_src(html.unescape(m.group(2)), folder))}">', s)
        s = _LINK.sub(lambda m: f'<a href="{html.escape(_safe_url(html.unescape(m.group(2))))}">{m.group(1)}</a>', s)
        s = _BOLD.sub(r"<strong>\1</strong>", s)
        s = _ITALIC.sub(r"<em>\1</em>", s)
        out.append(s)
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def slug(text: str) -> str:
    """An html id for a heading's text."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def markdown_to_html(text: str, folder: str | None = None) -> str:
    """The markdown the report writes as html: headings (with ids),
    paragraphs, pipe tables, bullet lists, fenced code blocks and images on
    a line of their own (a file of ``folder`` embedded, :func:`image_src`);
    inline code, links, bold and italics. Every piece of text is escaped."""
    lines = str(text).splitlines()
    out: list[str] = []
    paragraph: list[str] = []
    used: dict[str, int] = {}

    def flush():
        if paragraph:
            out.append("<p>" + "<br>\n".join(inline_html(p, folder) for p in paragraph) + "</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            flush()
            i += 1
        elif line.lstrip().startswith("```"):
            flush()
            body = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                body.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(body))}</code></pre>")
            i += 1
        elif _HEADING.match(line):
            flush()
            level, title = _HEADING.match(line).groups()
            anchor = slug(title)
            used[anchor] = used.get(anchor, 0) + 1
            if used[anchor] > 1:
                anchor = f"{anchor}-{used[anchor]}"
            out.append(f'<h{len(level)} id="{anchor}">{inline_html(title, folder)}</h{len(level)}>')
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1].strip()):
            flush()
            head = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            table = ["<table>", "<thead><tr>" + "".join(f"<th>{inline_html(c, folder)}</th>" for c in head) + "</tr></thead>",
                     "<tbody>"]
            table += ["<tr>" + "".join(f"<td>{inline_html(c, folder)}</td>" for c in row) + "</tr>" for row in rows]
            out.append("\n".join(table + ["</tbody>", "</table>"]))
        elif _IMAGE_LINE.match(line):
            flush()
            alt, src = _IMAGE_LINE.match(line).groups()
            out.append(f'<figure><img alt="{html.escape(alt)}" src="{html.escape(image_src(src, folder))}"></figure>')
            i += 1
        elif _ITEM.match(line):
            flush()
            items = []
            while i < len(lines) and _ITEM.match(lines[i]):
                items.append(f"<li>{inline_html(_ITEM.match(lines[i]).group(1), folder)}</li>")
                i += 1
            out.append("<ul>\n" + "\n".join(items) + "\n</ul>")
        else:
            paragraph.append(line.strip())
            i += 1
    flush()
    return "\n".join(out)


# -- transcripts -------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}\n... ({len(text) - limit:,} more characters left out)"


def _pre(text, limit: int) -> str:
    return f"<pre>{html.escape(_cut(text, limit))}</pre>"


def _arguments_text(arguments) -> str:
    if isinstance(arguments, str):  # a provider's JSON text: shown parsed where it parses
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


def call_status(record) -> list[dict | None]:
    """For each tool message of ``record``'s transcript, in order, the status
    the session reported after the matching recorded call (the fields of its
    ``calls`` entry beyond call, arguments and result: e.g. ``budget_remaining``),
    or None where the calls do not match the tool messages one for one."""
    tools = [m for m in record.get("messages") or () if isinstance(m, dict) and m.get("role") == "tool"]
    calls = [c for c in record.get("calls") or () if isinstance(c, dict)]
    if len(tools) != len(calls):
        return [None] * len(tools)
    out = []
    for m, c in zip(tools, calls):
        status = {k: v for k, v in c.items() if k not in _CALL_FIELDS}
        out.append(status if status and (m.get("name") is None or m.get("name") == c.get("call")) else None)
    return out


def _status_text(status: dict | None) -> str:
    if not status:
        return ""
    return '<span class="status">' + html.escape("; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in status.items())) + "</span>"


def _summary(record) -> str:
    world = record.get("world")
    try:
        keys = [k for k in worlds.get(world).session_keys if k != "seed"]
        headline = worlds.get(world).headline
    except Exception:  # noqa: BLE001 -- a line of a world not registered here is still shown
        keys, headline = [], None
    settings = ", ".join(f"{k}={record.get(k)}" for k in keys if k in record)
    score = (record.get("scores") or {}).get(headline) if headline else None
    bits = [f"{world} · {record.get('agent')} · seed {record.get('seed')}"]
    if settings:
        bits.append(settings)
    if score is not None:
        bits.append(f"{headline} {score:.3f}" if isinstance(score, float) else f"{headline} {score}")
    bits.append(f"{len(record.get('calls') or ())} calls, {len(record.get('messages') or ())} messages")
    if record.get("end_reason"):
        bits.append(f"ended: {record['end_reason']}")
    return " · ".join(bits)


def transcript_html(record) -> str:
    """One session's transcript (``record["messages"]``) as a folded
    ``<details>`` block: each message with its role; an assistant's tokens,
    latency, reasoning, text and tool calls (each with its arguments and the
    status after it: the budget left, where the record's calls hold one); each
    tool result (cut at :data:`MAX_RESULT` characters, errors marked). At most
    :data:`MAX_MESSAGES` messages; a note counts the rest."""
    messages = [m for m in record.get("messages") or () if isinstance(m, dict)]
    statuses = call_status(record)
    by_id = {}
    k = 0
    for m in messages:
        if m.get("role") == "tool":
            by_id[m.get("tool_call_id")] = statuses[k]
            k += 1
    parts = [f'<details class="session"><summary>{html.escape(_summary(record))}</summary>']
    k = 0
    for index, m in enumerate(messages[:MAX_MESSAGES]):
        role = str(m.get("role", "?"))
        css = "message " + re.sub(r"[^a-z]", "", role.lower()) + (" error" if m.get("is_error") else "")
        head = f'<span class="role">[{index}] {html.escape(role)}</span>'
        body = []
        if role == "assistant":
            meta = []
            usage = m.get("usage") or {}
            if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
                meta.append(f"tokens in {usage.get('input_tokens')} out {usage.get('output_tokens')}")
            if m.get("latency_s") is not None:
                meta.append(f"latency {m['latency_s']} s")
            if m.get("harness"):
                meta.append(f"the harness ended the session: {m['harness']}")
            if meta:
                head += f' <span class="meta">{html.escape("; ".join(meta))}</span>'
            if m.get("reasoning"):
                body.append(f'<details class="reasoning" open><summary>reasoning</summary>{_pre(m["reasoning"], MAX_TEXT)}</details>')
            if m.get("content") is not None and m.get("content") != "":
                body.append(_pre(m["content"], MAX_TEXT))
            for c in m.get("tool_calls") or ():
                if not isinstance(c, dict):
                    continue
                status = _status_text(by_id.get(c.get("id")))
                body.append(f'<div class="call">→ <code>{html.escape(str(c.get("name")))}</code> '
                            f'{("after it " + status) if status else ""}{_pre(_arguments_text(c.get("arguments")), MAX_RESULT)}</div>')
        elif role == "tool":
            status = statuses[k] if k < len(statuses) else None
            k += 1
            head += f' <code>{html.escape(str(m.get("name", "")))}</code>' + (" (error)" if m.get("is_error") else "")
            if status:
                head += " " + _status_text(status)
            body.append(_pre(m.get("content", ""), MAX_RESULT))
        elif role == "system":  # the world's rules: the same in every session, folded
            content = str(m.get("content", ""))
            body.append(f"<details><summary>the system prompt ({len(content):,} characters)</summary>{_pre(content, MAX_TEXT)}</details>")
        else:
            body.append(_pre(m.get("content", ""), MAX_TEXT))
        parts.append(f'<div class="{css}">{head}{"".join(body)}</div>')
    if len(messages) > MAX_MESSAGES:
        parts.append(f'<p class="note">{len(messages) - MAX_MESSAGES:,} more messages left out.</p>')
    parts.append("</details>")
    return "\n".join(parts)


def transcripts_html(records, max_sessions: int = MAX_SESSIONS) -> str:
    """The section of transcripts: for each world and agent with sessions
    that keep one, the first ``max_sessions`` (in file order), each folded
    (:func:`transcript_html`), and a note of how many were left out. Empty
    text when no record has a transcript."""
    kept = [r for r in records if isinstance(r.get("messages"), list) and r["messages"]]
    if not kept:
        return ""
    groups = list(dict.fromkeys((r.get("world"), r.get("agent")) for r in kept))
    parts = ['<h2 id="transcripts">Transcripts</h2>',
             f'<p>{len(kept)} sessions keep a transcript; at most {max_sessions} are shown per world and agent, '
             'each folded (click to open).</p>']
    for world, agent in groups:
        mine = [r for r in kept if (r.get("world"), r.get("agent")) == (world, agent)]
        parts.append(f"<h3>{html.escape(f'{world} · {agent}')}</h3>")
        parts += [transcript_html(r) for r in mine[:max_sessions]]
        if len(mine) > max_sessions:
            more = len(mine) - max_sessions
            parts.append(f'<p class="note">{more} more session{"" if more == 1 else "s"} of {html.escape(str(agent))} '
                         f'left out (luca-gym show RESULTS --agent AGENT --seed SEED --transcript prints any of them).</p>')
    return "\n".join(parts)


def page(markdown: str, records=(), *, folder: str | None = None, title: str = "luca-gym report",
         max_sessions: int = MAX_SESSIONS) -> str:
    """The whole page: the report's ``markdown`` (:func:`markdown_to_html`,
    figures of ``folder`` embedded) followed by the transcripts of
    ``records`` (:func:`transcripts_html`). No script, nothing fetched."""
    body = markdown_to_html(markdown, folder)
    transcripts = transcripts_html(list(records), max_sessions)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        body,
        transcripts,
        "</body>",
        "</html>",
        "",
    ])


def write_html(markdown: str, records, out_dir: str, *, source: str | None = None,
               max_sessions: int = MAX_SESSIONS) -> str:
    """Write ``out_dir/report.html`` (:func:`page`) for the report's
    ``markdown`` and the ``records`` it was made from; returns the path."""
    path = os.path.join(out_dir, FILE_NAME)
    title = f"luca-gym report: {source}" if source else "luca-gym report"
    with open(path, "w", encoding="utf-8") as f:
        f.write(page(markdown, records, folder=out_dir, title=title, max_sessions=max_sessions))
    return path
