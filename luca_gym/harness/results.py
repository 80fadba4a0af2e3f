"""The results file: one JSON line per session in ``<out>/sessions.jsonl``,
each with the configuration it ran under and a digest of its content (a
signature too when sealed), appended under a folder lock; :func:`read_results`
refuses a line from another build, seal or model server, or one edited by
hand, by name, instead of mixing it into the tables."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import time
import warnings
from dataclasses import dataclass

from luca_gym import __version__
from luca_gym import worlds
from luca_gym.harness.agents import is_llm_agent
from luca_gym.harness.spec import LEGACY_WORLD, ResultsError, record_key


SESSIONS_FILE = "sessions.jsonl"


# -- the results file --------------------------------------------------------------
# Every line carries the configuration it was run under (CONFIG_FIELDS) and a
# digest of its content (a signature too when sealed), so a line from another
# build, model server or seal, or a line edited by hand, is refused by name
# instead of being mixed into the tables.
CONFIG_FIELDS = ("version", "sealed", "base_url", "budget", "call_limit")


def run_config(agent: str, seal=None, base_url: str | None = None) -> dict:
    """The configuration a session line records beside its key: the package
    version, the seal's fingerprint (None unsealed) and, for ``openai:``
    agents, the model server's base URL. (The agent spec names the model.)"""
    return {
        "version": __version__,
        "sealed": None if seal is None else seal.fingerprint,
        "base_url": base_url if str(agent).startswith("openai:") else None,
    }


def _canonical(record: dict) -> bytes:
    body = {k: v for k, v in record.items() if k not in ("digest", "signature")}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def append_record(f, record: dict, seal=None) -> None:
    """Write ``record`` as one line with its digest (and signature under a seal), then sync."""
    record = dict(record)
    data = _canonical(record)
    record["digest"] = hashlib.sha256(data).hexdigest()
    if seal is not None:
        record["signature"] = seal.sign(data)
    f.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
    f.flush()
    os.fsync(f.fileno())


def describe_key(key) -> str:
    """``agent=..., tier=..., ...`` for a :func:`record_key` (the world named when not LUCA)."""
    world = worlds.get(key[0])
    fields = zip(world.key_fields(), key)
    return ", ".join(f"{k}={v}" for k, v in fields if k != "world" or v != LEGACY_WORLD)


def _line_world(record):
    """The world a parsed line names (LUCA's for a line written before worlds
    existed), or None when it names none that is registered."""
    name = record.get("world", LEGACY_WORLD) if isinstance(record, dict) else None
    return worlds.get(name) if isinstance(name, str) and name in worlds.names() else None


def _required(world) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(top-level fields, score fields) every line of ``world`` holds."""
    defaults = dict(world.key_defaults)
    keys = tuple(k for k in world.key_fields()[1:] if k not in defaults)
    return (*keys, "scores"), (world.required_scores or (world.headline,))


def _parse_line(path: str, lineno: int, raw: bytes, seal=None) -> dict:
    where = f"{path}:{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); fix or remove that line") from None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{where}: corrupt line ({exc.msg}); fix or remove that line") from None
    except RecursionError:
        raise ResultsError(f"{where}: corrupt line (nested too deeply); fix or remove that line") from None
    world = _line_world(record)
    if isinstance(record, dict) and world is None:
        raise ResultsError(f"{where}: the line names world {str(record.get('world'))[:40]!r}, which is not registered "
                           f"(registered: {', '.join(worlds.names())}); register it (luca-gym report and show: "
                           "--world package.module:WORLD), or remove that line")
    top, score_fields = _required(world) if world is not None else (("scores",), ())
    missing = [k for k in top if not isinstance(record, dict) or k not in record]
    if not missing:
        scores = record["scores"]
        missing = [f"scores.{k}" for k in score_fields if not isinstance(scores, dict) or k not in scores]
    if missing:
        raise ResultsError(f"{where}: corrupt line (missing {', '.join(missing)}); fix or remove that line")
    if "digest" in record:
        data = _canonical(record)
        if record["digest"] != hashlib.sha256(data).hexdigest():
            raise ResultsError(f"{where}: the line was changed after it was written (its digest does not match); "
                               f"remove it to run that session again")
        if seal is not None and record.get("sealed") == seal.fingerprint:
            if not hmac.compare_digest(str(record.get("signature", "")), seal.sign(data)):
                raise ResultsError(f"{where}: the line's signature does not match this seal; it was not written by a "
                                   f"sealed sweep with this secret, or was changed since; remove it")
    # After the digest check: a line written before a field existed reads as its default.
    record.setdefault("world", world.name)
    record.setdefault("world_version", "1")
    for field, default in world.key_defaults:
        record.setdefault(field, default)
    return record


def _complete(text: str) -> bool:
    """Whether a last line without its newline is nonetheless a whole record."""
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    world = _line_world(record)
    return world is not None and all(k in record for k in _required(world)[0])


@dataclass
class Results:
    """A results file as read: the records (duplicates dropped), the line
    each came from, and the duplicate lines dropped (line, line kept)."""

    path: str
    records: list
    lines: list
    duplicates: list

    def keys(self) -> dict:
        """{session key: line number}."""
        return {record_key(r): n for r, n in zip(self.records, self.lines)}

    def notes(self) -> list[str]:
        """What reading did beyond parsing (one line each), e.g. duplicates dropped."""
        if not self.duplicates:
            return []
        shown = ", ".join(f"line {d} (same session as line {k})" for d, k in self.duplicates[:5])
        more = f" and {len(self.duplicates) - 5} more" if len(self.duplicates) > 5 else ""
        return [f"{self.path}: {len(self.duplicates)} duplicate session line(s) ignored: {shown}{more}"]

    def check_config(self, config: dict, expected: dict | None = None, agents=None) -> None:
        """Refuse (ResultsError naming file and line) a line whose configuration
        differs from ``config`` or from ``expected`` ({key: {field: value}})
        for its session. The base URL is compared on ``openai:`` lines only
        (of ``agents``, when given: the agents this run uses), the request
        settings on model agents' lines."""
        for record, lineno in zip(self.records, self.lines):
            for field, ours in config.items():
                agent = str(record["agent"])
                if field == "base_url" and not (agent.startswith("openai:") and (agents is None or agent in agents)):
                    continue
                if field == "request" and not (is_llm_agent(agent) and (agents is None or agent in agents)):
                    continue
                theirs = record.get(field)
                if theirs != ours:
                    raise ResultsError(
                        f"{self.path}:{lineno}: written with {field}={theirs!r}; this run has {field}={ours!r}. "
                        f"Results of different configurations are never mixed: use another --out folder, or remove that line"
                    )
            want = (expected or {}).get(record_key(record), {})
            for field, ours in want.items():
                if record.get(field) != ours:
                    raise ResultsError(
                        f"{self.path}:{lineno}: written with {field}={record.get(field)!r}; this run has {field}={ours!r} "
                        f"for that session. Use another --out folder, or remove that line"
                    )


def read_results(path: str, seal=None) -> Results:
    """A results file or folder, checked line by line (ResultsError names the
    file and line of the first problem): every line whole JSON in UTF-8 with
    the key and score fields, its digest intact (and its signature, for lines
    sealed with ``seal``), and the whole file from one build and one seal.
    A line cut short by an interrupted write (the last line, without its
    newline) is ignored; a repeated session keeps its first line."""
    if os.path.isdir(path):
        path = os.path.join(path, SESSIONS_FILE)
    if not os.path.exists(path):
        raise ResultsError(f"{path}: no such results file")
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = lines[-1].decode("utf-8", errors="replace")
    complete = lines if _complete(last) else lines[:-1]
    records, linenos, duplicates, seen = [], [], [], {}
    first_config = None
    for lineno, raw in enumerate(complete, 1):
        if not raw.strip():
            continue
        record = _parse_line(path, lineno, raw, seal)
        config = {k: record.get(k) for k in ("version", "sealed")}
        if first_config is None:
            first_config = (config, lineno)
        elif config != first_config[0]:
            field = next(k for k in config if config[k] != first_config[0][k])
            raise ResultsError(
                f"{path}:{lineno}: written with {field}={config[field]!r}, but line {first_config[1]} with "
                f"{field}={first_config[0][field]!r}; a results file holds one build and one seal. Move those lines to another folder"
            )
        key = record_key(record)
        if key in seen:
            duplicates.append((lineno, seen[key]))
            continue
        seen[key] = lineno
        records.append(record)
        linenos.append(lineno)
    return Results(path, records, linenos, duplicates)


def load_sessions(path: str) -> list[dict]:
    """Every session record of a results file or folder (see :func:`read_results`);
    duplicate lines are dropped with a :class:`ResultsWarning` saying which."""
    results = read_results(path)
    for note in results.notes():
        warnings.warn(note, ResultsWarning, stacklevel=2)
    return results.records


class ResultsWarning(UserWarning):
    """Something a reader of a results file should know (e.g. duplicate lines dropped)."""


@contextlib.contextmanager
def folder_lock(out_dir: str, wait_s: float = 0.0):
    """Hold ``out_dir``'s lock (an advisory ``flock`` on its sessions file,
    created empty if absent) while writing: two sweeps, or a sweep and an MCP
    recording, never write one folder at once. Waits up to ``wait_s``
    seconds, then raises ResultsError naming the folder."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, SESSIONS_FILE)
    f = open(path, "ab")
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ResultsError(
                        f"{out_dir}: another luca-gym run is writing this folder (it holds the lock on {path}); "
                        f"wait for it to finish or use another --out folder"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        f.close()  # closing releases the lock


def trim_unfinished(path: str) -> None:
    """Cut an unfinished last line (a write killed half-way) so appends start
    clean; a whole record that only lacks its newline gets the newline."""
    with open(path, "rb+") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end == len(data):
            return
        if _complete(data[end:].decode("utf-8", errors="replace")):
            f.write(b"\n")
        else:
            f.truncate(end)
