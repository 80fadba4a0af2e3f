"""Markdown tables and PNG figures from a results folder (``luca-gym report``),
and ``luca-gym show``'s pick of one recorded session.

It names no world: each world's lines get the world's own sections where it
has a report hook (``World.report``: LUCA's paper-format tables, figures and
ablations, :mod:`luca_gym.worlds.luca.report`), else a table of its headline
score by agent and settings; sessions that keep a transcript add the
process analyses (:mod:`luca_gym.results.process`); ``report.html`` is the same
report as one static page with the transcripts (:mod:`luca_gym.results.html`).
A session is drawn by its world's viewer (``World.viewer``: LUCA's,
:mod:`luca_gym.worlds.luca.viewer`).
"""

from __future__ import annotations

import logging
import os
import warnings

from luca_gym import harness as ev
from luca_gym.results import paired as ablation
from luca_gym.results import audit, process, html as report_html
from luca_gym import worlds
from luca_gym.protocol import load

# What the report is computing, step by step (``luca-gym report`` prints it on
# stderr; a world's report hook logs its own slow steps here, e.g. the floors).
log = logging.getLogger("luca_gym.results.report")


def results_folder(results: str) -> str:
    """The folder of a results folder or sessions.jsonl path."""
    return results if os.path.isdir(results) else os.path.dirname(results) or "."


def write_report(results: str, out_dir: str | None = None) -> str:
    """Write ``report.md`` and figures next to the results (or in
    ``out_dir``): for each world in the file, its report hook's sections
    (LUCA: composite, disease and scaling figures, the paper-format tables
    and, for records holding both arms of an ablation, the paired tests),
    else its headline score by agent and settings; then, for sessions that
    keep a transcript, the process analyses (:func:`luca_gym.results.process.sections`)
    and the evidence audit's section (:func:`luca_gym.results.audit.section`).
    Also writes ``report.html`` (:mod:`luca_gym.results.html`): the same
    report as one static page, figures embedded, with each transcript
    folded. Returns the markdown text. Each step is logged (``log``, before
    it starts), so a slow first run says what it is computing."""
    read = ev.read_results(results)
    if not read.records:
        raise ev.ResultsError(f"{results}: no sessions to report")
    for note in read.notes():  # e.g. duplicate lines dropped: said, and kept in the report
        warnings.warn(note, ev.ResultsWarning, stacklevel=2)
    out_dir = out_dir or results_folder(results)
    os.makedirs(out_dir, exist_ok=True)
    names = list(dict.fromkeys(r["world"] for r in read.records))
    hooked = [n for n in names if worlds.get(n).report is not None]
    # The world with a report of its own leads; the others follow as headline tables.
    names = hooked + [n for n in names if n not in hooked]
    parts = [] if hooked else ["# Results", f"{len(read.records)} session{'' if len(read.records) == 1 else 's'} from `{results}`; mean ± population std."]
    for name in names:
        world = worlds.get(name)
        mine = [r for r in read.records if r["world"] == name]
        log.info(f"{name}: {len(mine)} session{'' if len(mine) == 1 else 's'}: tables and figures")
        if world.report is not None:
            parts += load(world.report)(mine, out_dir, source=results, notes=read.notes())
        else:
            parts += [f"## {name}", ev.world_table(mine, name)]
            paired = ablation.section(mine, world)
            if paired:
                parts.append(paired)
    if any(r.get("messages") for r in read.records):
        log.info("the process analyses of the sessions that keep a transcript")
    parts += process.sections(read.records)  # language-model sessions only: scripted runs add nothing
    log.info("the evidence audit (each audited session's instance rebuilt once)")
    audited = _audit_section(read.records)
    if audited:
        parts.append(audited)
    text = "\n\n".join(parts) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    log.info("report.html")
    report_html.write_html(text, read.records, out_dir, source=results)
    return text


def _audit_section(records) -> str | None:
    """The evidence audit's section (:func:`luca_gym.results.audit.section`), or None where no session could be audited."""
    return audit.section(records)


# -- one recorded session (drawn by the world's viewer) ------------------------------------
def _ranges(values) -> str:
    """Sorted integers as '0-19, 25' (at most 12 pieces shown)."""
    values = sorted(values)
    pieces, start = [], None
    for i, v in enumerate(values):
        start = v if start is None else start
        if i + 1 == len(values) or values[i + 1] != v + 1:
            pieces.append(str(v) if v == start else f"{start}-{v}")
            start = None
    return ", ".join(pieces[:12]) + (f" and {len(pieces) - 12} more" if len(pieces) > 12 else "")


def pick_session(records, seed, agent, **filters) -> tuple[dict, str | None]:
    """The session of ``agent`` on instance ``seed``, narrowed by ``filters``
    (key fields, e.g. LUCA's ``tier``, ``mode``, ``n_genes``; None: any).
    Returns (record, note): the note is None when one session matches, else it
    names the session picked (the first on file) and the others. ValueError
    names what exists when none matches (the agents, the agent's seeds, or the
    sessions of that seed)."""
    agents = ev.agents_in(records)
    if agent not in agents:
        raise ValueError(f"agent: {agent!r} has no session in these results; agents there: {', '.join(map(str, agents)) or 'none'}")
    mine = [r for r in records if r["agent"] == agent]
    if seed not in {r["seed"] for r in mine}:
        raise ValueError(f"seed: {seed!r} has no session of agent {agent!r}; its seeds there: {_ranges({r['seed'] for r in mine})}")
    mine = [r for r in mine if r["seed"] == seed]
    wanted = {k: v for k, v in filters.items() if v is not None}
    matches = [r for r in mine if all(r.get(k) == v for k, v in wanted.items())]
    if not matches:
        given = ", ".join(f"{k}={v}" for k, v in wanted.items())
        raise ValueError(f"no session of agent {agent!r} seed {seed} with {given}; its sessions there: "
                         f"{'; '.join(_describe(r) for r in mine)}")
    if len(matches) == 1:
        return matches[0], None
    others = "; ".join(_describe(r) for r in matches[1:6]) + (f" and {len(matches) - 6} more" if len(matches) > 6 else "")
    keys = [k for k in worlds.get(matches[0]["world"]).session_keys if k != "seed"]
    return matches[0], (f"{len(matches)} sessions match; drew the first, {_describe(matches[0])}; the others: {others}. "
                        f"Choose one with {', '.join(keys[:-1]) + ' and ' + keys[-1] if len(keys) > 1 else ''.join(keys)}")


def viewer_of(record):
    """The viewer of ``record``'s world (``World.viewer``), or None."""
    world = worlds.get(record.get("world", ev.LEGACY_WORLD))
    return None if world.viewer is None else load(world.viewer)


def _describe(record) -> str:
    viewer = viewer_of(record)
    if viewer is not None:
        return viewer.describe_session(record)
    return ev.describe_key(ev.record_key(record))


def show_session(results: str, seed, agent, out_path: str | None = None, **filters) -> str:
    """Draw one recorded session of ``results`` (a folder or sessions.jsonl)
    with its world's viewer (LUCA's: a timeline figure,
    :func:`luca_gym.worlds.luca.viewer.draw_session`) to ``out_path``
    (default: ``<results folder>/`` + the viewer's file name). Returns a
    one-line message: the path written, followed by a note in brackets naming
    the session drawn when several matched (see :func:`pick_session`).
    ValueError for an unknown agent or seed, no session with the filters, or
    a world without a viewer."""
    record, viewer, out_path, note = session_to_draw(ev.load_sessions(results), results, seed, agent, out_path, **filters)
    viewer.draw_session(record, out_path)
    return out_path if note is None else f"{out_path} ({note})"


def session_to_draw(records, results: str, seed, agent, out_path: str | None = None, **filters):
    """What :func:`show_session` (and ``luca-gym show``) draws: (the record
    :func:`pick_session` picks, its world's viewer, the path, the note or
    None). ValueError where the world has no viewer."""
    record, note = pick_session(records, seed, agent, **filters)
    viewer = viewer_of(record)
    if viewer is None:
        raise ValueError(f"world {record['world']!r} has no viewer (World.viewer) to draw a session with; add "
                         "--transcript to print the session's transcript instead")
    return record, viewer, out_path or os.path.join(results_folder(results), viewer.session_file_name(record)), note
