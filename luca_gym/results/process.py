"""Process analyses of language-model sessions, computed from their
transcripts (the ``messages`` a results line keeps,
:func:`luca_gym.llm.loop.run_agent`) and their ``calls``, after the
Auto-Discovery-Bench paper's: how often an agent's words speak of
relationships, uncertainty and evidence (:func:`keyword_rates`), the tokens
it spends per round (:func:`token_rounds`); a world adds analyses of its
own through ``World.process`` (the graph worlds: how right each cycle's
proposed matrix is, :mod:`luca_gym.worlds.graphs.process`).

Pure functions over records (lines of ``sessions.jsonl``): each returns rows
(dicts) and has a ``*_table`` twin that writes them as a markdown table;
:func:`sections` gathers the report's sections (``luca-gym report``). A
record without a transcript (a scripted policy's) is left out of every
analysis, so a results folder of scripted runs gets no section.
"""

from __future__ import annotations

import re

from luca_gym import worlds
from luca_gym.protocol import LEGACY_WORLD, load
from luca_gym.results.summaries import markdown_table

# The three families of reasoning terms. A word counts for a term when it
# begins with it (case-insensitive): "cause" counts causes and caused,
# "depend" depends and dependency, "observe" observed and observes.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "relationship": ("cause", "causal", "affect", "parent", "child", "edge", "depend", "influence", "regulate", "link"),
    "uncertainty": ("maybe", "perhaps", "might", "uncertain", "likely", "possible", "possibly", "probably", "unclear", "unsure"),
    "evidence": ("observe", "observation", "result", "data", "evidence", "experiment", "measure", "test"),
}
FAMILIES = tuple(KEYWORDS)
PER_WORDS = 1000  # keyword rates are per this many words

_WORD = re.compile(r"[a-z0-9']+")


# -- which records ----------------------------------------------------------------------------
def with_transcripts(records) -> list[dict]:
    """The records of a model's sessions: a transcript (a non-empty
    ``messages`` list) in which some assistant turn holds words (text or
    reasoning) or the provider's token counts. A scripted agent driven
    through the tool loop keeps a transcript of bare tool calls: not one."""
    return [r for r in records if isinstance(r.get("messages"), list) and r["messages"] and _spoke(r)]


def _spoke(record) -> bool:
    # The tokens are where run_agent keeps them, under the turn's ``usage``: a
    # model that only calls tools says no words but reports its tokens.
    for m in _assistant(record):
        usage = m.get("usage") if isinstance(m.get("usage"), dict) else {}
        if m.get("content") or m.get("reasoning") or _count(usage.get("input_tokens")) or _count(usage.get("output_tokens")):
            return True
    return False


def _world(record) -> str:
    return record.get("world", LEGACY_WORLD)  # a line written before worlds existed is LUCA's


def groups(records) -> list[tuple]:
    """(world, agent, its records) in order of first appearance."""
    keys = list(dict.fromkeys((r.get("world"), r.get("agent")) for r in records))
    return [(w, a, [r for r in records if (r.get("world"), r.get("agent")) == (w, a)]) for w, a in keys]


def _assistant(record) -> list[dict]:
    return [m for m in record.get("messages") or () if isinstance(m, dict) and m.get("role") == "assistant"]


# -- reasoning keywords ------------------------------------------------------------------------
def words(text) -> list[str]:
    """The words of ``text`` (lower case; letters, digits and apostrophes)."""
    return _WORD.findall(str(text or "").lower())


def keyword_counts(text) -> dict:
    """``{"words": n, family: count, ...}`` for ``text``: its words and, per
    family of :data:`KEYWORDS`, how many of them begin with one of its terms
    (a word counts once per family)."""
    ws = words(text)
    out = {"words": len(ws)}
    for family, terms in KEYWORDS.items():
        out[family] = sum(1 for w in ws if w.startswith(terms))
    return out


def assistant_text(record) -> str:
    """Everything the agent wrote in ``record``'s transcript: each assistant
    turn's text and reasoning, one per line (tool calls' arguments left out)."""
    parts = []
    for m in _assistant(record):
        for key in ("reasoning", "content"):
            if isinstance(m.get(key), str) and m[key]:
                parts.append(m[key])
    return "\n".join(parts)


def keyword_rates(records) -> list[dict]:
    """Per world and agent (in order of first appearance), over the sessions
    with a transcript: ``world``, ``agent``, ``sessions``, ``words`` (of assistant text and
    reasoning), the count of each family's words (``<family>_count``) and its
    rate per :data:`PER_WORDS` words (``<family>``; None without words)."""
    rows = []
    for world, agent, sessions in groups(with_transcripts(records)):
        totals = {"words": 0, **{f: 0 for f in FAMILIES}}
        for r in sessions:
            for k, v in keyword_counts(assistant_text(r)).items():
                totals[k] += v
        row = {"world": world, "agent": agent, "sessions": len(sessions), "words": totals["words"]}
        for f in FAMILIES:
            row[f + "_count"] = totals[f]
            row[f] = PER_WORDS * totals[f] / totals["words"] if totals["words"] else None
        rows.append(row)
    return rows


def keyword_table(records) -> str:
    """:func:`keyword_rates` as a markdown table (rates with one decimal, the counts in brackets)."""
    rows = keyword_rates(records)
    head = ["world", "agent", "sessions", "words", *(f"{f} (per {PER_WORDS:,} words)" for f in FAMILIES)]
    body = [[r["world"], r["agent"], r["sessions"], f"{r['words']:,}",
             *(("—" if r[f] is None else f"{r[f]:.1f} ({r[f + '_count']})") for f in FAMILIES)] for r in rows]
    return markdown_table(head, body)


# -- tokens per round --------------------------------------------------------------------------
def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def token_rounds(records) -> list[dict]:
    """Per world and agent, over the sessions with a transcript: ``world``,
    ``agent``, ``sessions``,
    ``rounds`` (assistant turns the model answered: the harness's closing
    turn is not one), ``rounds_per_session``, and the mean
    ``input_tokens``/``output_tokens`` per round over the rounds whose usage
    reported them (None where none did)."""
    rows = []
    for world, agent, sessions in groups(with_transcripts(records)):
        rounds = [m for r in sessions for m in _assistant(r) if not m.get("harness")]
        row = {"world": world, "agent": agent, "sessions": len(sessions), "rounds": len(rounds),
               "rounds_per_session": len(rounds) / len(sessions) if sessions else None}
        for key in ("input_tokens", "output_tokens"):
            values = [(m.get("usage") or {}).get(key) for m in rounds]
            values = [v for v in values if _count(v)]
            row[key] = sum(values) / len(values) if values else None
            row[key + "_rounds"] = len(values)
        rows.append(row)
    return rows


def token_table(records) -> str:
    """:func:`token_rounds` as a markdown table."""
    def num(v, fmt="{:,.1f}"):
        return "—" if v is None else fmt.format(v)

    body = [[r["world"], r["agent"], r["sessions"], r["rounds"], num(r["rounds_per_session"], "{:.2f}"), num(r["input_tokens"]),
             num(r["output_tokens"])] for r in token_rounds(records)]
    return markdown_table(["world", "agent", "sessions", "rounds", "rounds per session", "input tokens per round",
                           "output tokens per round"], body)


# -- the report's sections ---------------------------------------------------------------------
def sections(records) -> list[str]:
    """The report's process sections (markdown blocks) for ``records``' sessions
    with a transcript: reasoning keywords, tokens per round, then each world's
    own (``World.process``, called once with the sessions of every world that
    names the same entry: the graph worlds' proposal accuracy by cycle).
    Empty when no record has a transcript (scripted runs get no section)."""
    mine = with_transcripts(records)
    if not mine:
        return []
    terms = "; ".join(f"{f}: {', '.join(KEYWORDS[f])}" for f in FAMILIES)
    parts = [
        "## Process (language-model sessions)",
        f"{len(mine)} session{'' if len(mine) == 1 else 's'} with a transcript. Measures after the Auto-Discovery-Bench paper's process analyses, "
        "computed from each session's transcript and calls.",
        "### Reasoning keywords",
        f"Words of each family per {PER_WORDS:,} words the agent wrote (assistant text and reasoning; counts in brackets). "
        f"A word counts when it begins with a term ({terms}).",
        keyword_table(mine),
        "### Tokens per round",
        "A round is one assistant turn the model answered; the means are over the rounds whose provider reported the tokens.",
        token_table(mine),
    ]
    by_entry: dict[str, list] = {}
    for name in dict.fromkeys(map(_world, mine)):
        entry = worlds.get(name).process
        if entry is not None:
            by_entry.setdefault(entry, []).extend(r for r in mine if _world(r) == name)
    for entry, records_of in by_entry.items():
        parts += load(entry)(records_of)
    return parts
