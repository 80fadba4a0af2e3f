"""The evidence audit: because each world's truth is known, every experiment
an agent ran can be weighed after the session, and its final claims held
against its own evidence (``docs/guides/evidence-audit.md``).

:func:`audit_record` dispatches a results line to its world's audit, the
function ``audit(record) -> dict | None`` of the module the world declares as
its ``World.audit`` (``luca_gym/worlds/<name>/audit.py``; a plug-in world may
declare one the same way); a world without one has no audit (None). Each world's
audit uses the world's own core and scorer (it regenerates the instance from
the line's seed and settings, as the scorer does, never shown to the agent)
and returns at least:

* ``hypotheses``: what the hypotheses are (``"edges"``, ``"malfunctions"``,
  ``"drivers"``), ``n_hypotheses``: how many there are;
* ``experiments``: the experiments audited, ``ruled_out``: the live
  hypotheses each ruled out, ``ruled_out_per_experiment``: their mean (None
  without experiments);
* ``claimed``: whether the agent made a final claim, ``consistent``: whether
  that claim agrees with the agent's own evidence (None without a claim),
  ``evidence_ignored``: how many hypotheses its evidence had decided that
  the claim contradicts (None without a claim).

:func:`section` is the report's "Evidence audit" section: per world and
agent, the means of these over the sessions audited, and under the table a
world's note on an agent whose row needs reading (its audit module's
``NOTES``, :func:`audit_notes`).
"""

from __future__ import annotations

import numpy as np

from luca_gym import worlds
from luca_gym.protocol import LEGACY_WORLD, load


def audit_function(world_name: str):
    """The ``audit`` function of world ``world_name`` (its ``World.audit``
    module), or None where the world has none or is not registered."""
    module = _audit_module(world_name)
    return None if module is None else getattr(module, "audit", None)


def audit_notes(world_name: str) -> dict:
    """``{agent: note}``: what the report says under the audit's table of an
    agent whose row needs reading (the world's audit module's ``NOTES``; {} where none)."""
    module = _audit_module(world_name)
    return dict(getattr(module, "NOTES", {}) or {}) if module is not None else {}


def _audit_module(world_name: str):
    """World ``world_name``'s audit module (its ``World.audit``), or None."""
    if not isinstance(world_name, str) or world_name not in worlds.names():
        return None
    audit = worlds.get(world_name).audit
    return None if audit is None else load(audit)


def audit_record(record: dict) -> dict | None:
    """The evidence audit of one results line, dispatched by
    ``record["world"]`` (LUCA's for a line without one); None where the
    world has no audit or the line cannot be audited (sealed: its instance
    needs the secret; a LUCA healthy session: no malfunction hypotheses)."""
    if not isinstance(record, dict):
        return None
    audit = audit_function(record.get("world", LEGACY_WORLD))
    if audit is None:
        return None
    out = audit(record)
    if out is None:
        return None
    return {"world": record.get("world", LEGACY_WORLD), "agent": record.get("agent"), "seed": record.get("seed"), **out}


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summary(audits) -> dict:
    """Per (world, agent): ``sessions`` audited, and the means over them of
    ``experiments``, ``ruled_out_per_experiment`` (over sessions with an
    experiment), ``consistent`` (the share of sessions with a claim whose
    claim is consistent), ``evidence_ignored`` (over sessions with a claim),
    and ``claimed`` (the share of sessions with a claim)."""
    groups: dict = {}
    for a in audits:
        if a is not None:
            groups.setdefault((a["world"], a["agent"]), []).append(a)
    return {
        key: {
            "sessions": len(rows),
            "hypotheses": rows[0]["hypotheses"],
            "experiments": _mean(r["experiments"] for r in rows),
            "ruled_out_per_experiment": _mean(r["ruled_out_per_experiment"] for r in rows),
            "claimed": _mean(r["claimed"] for r in rows),
            "consistent": _mean(r["consistent"] for r in rows),
            "evidence_ignored": _mean(r["evidence_ignored"] for r in rows),
        }
        for key, rows in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))
    }


def _cell(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _instance(record) -> tuple:
    """A line's instance: its world, seed and key settings (the agent aside), so that the sessions of one
    instance are audited one after another and a world's audit may keep the instance it regenerated."""
    world = record.get("world", LEGACY_WORLD)
    keys = worlds.get(world).session_keys if isinstance(world, str) and world in worlds.names() else ()
    return (str(world), str(record.get("seed")), tuple(str(record.get(k)) for k in keys))


def section(records) -> str | None:
    """The report's "Evidence audit" section (markdown) for results lines
    ``records``: per world and agent the sessions audited and the means of
    experiments, hypotheses ruled out per experiment, the share of sessions
    whose final claim is consistent with the agent's own evidence and the
    evidence ignored. None where no line could be audited."""
    table = summary(audit_record(r) for r in sorted(records, key=_instance))
    if not table:
        return None
    lines = [
        "## Evidence audit",
        "",
        "Each experiment weighed against the hidden truth: the live hypotheses it ruled out, and the final claim held "
        "against the agent's own evidence (means per session; definitions in docs/guides/evidence-audit.md). "
        "Consistent: share of sessions with a claim; evidence ignored: hypotheses the agent's evidence had decided that "
        "its claim contradicts.",
        "",
        "| world | agent | hypotheses | sessions | experiments | ruled out / experiment | claimed | consistent | evidence ignored |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (world, agent), s in table.items():
        lines.append(f"| {world} | {agent} | {s['hypotheses']} | {s['sessions']} | {_cell(s['experiments'], 1)} | "
                     f"{_cell(s['ruled_out_per_experiment'])} | {_cell(s['claimed'])} | {_cell(s['consistent'])} | "
                     f"{_cell(s['evidence_ignored'])} |")
    for world, agent in table:
        note = audit_notes(world).get(agent)
        if note:
            lines += ["", f"*{agent}* ({world}): {note}"]
    return "\n".join(lines)


__all__ = ["audit_function", "audit_record", "section", "summary"]
