"""How LUCA's disease sessions went about the diagnosis, from their results
lines: the paper's disambiguation table and the rescue-versus-diagnosis
dissociation (the paper's Sec. 5: agents "performed this disambiguating
experiment [activating the suspected persistent signal] before committing to a
diagnosis in 36 [of 56] cases. Yet only one session received any diagnosis
credit").

The malfunction's type and target are what the scorer revealed in the line's
scores (``malfunction_type``, a code of :data:`~luca_gym.worlds.luca.spec.MALFUNCTION_TYPES`,
and ``malfunction_target``, a unified index: signals after the N genes); the
signal's label is the regenerated organism's (from the line's seed and
settings, as the scorer's session opens it; computed after the session,
never shown to the agent). Definitions:

* *signal test*: an accepted ``run_experiment`` (no error in its result)
  whose interventions ACTIVATE the malfunctioning signal, alone or with other
  targets; *alone*: that signal and nothing else;
* *before the commit*: before the first accepted
  ``submit_malfunction_hypothesis`` (a session that never committed: any
  time in the session);
* *diagnosis credit*: a diagnosis score above 0 (the target right; 1: target
  and type); *rescue success*: a rescue score above 0 (a rescue test brought
  at least one aberrant phenotype back into range).
"""

from __future__ import annotations

from luca_gym.worlds.luca.spec import PERSIST, SIGNAL_TYPE


def _accepted(call: dict) -> bool:
    return isinstance(call.get("result"), dict) and "error" not in call["result"]


def signal_label(record: dict) -> str | None:
    """The label of the persistently active signal of a disease line whose
    malfunction is PERSIST (the organism regenerated from the seed and
    settings); None otherwise, and for a sealed line."""
    scores = record.get("scores") or {}
    if record.get("mode") != "disease" or scores.get("malfunction_type") != PERSIST or record.get("sealed"):
        return None
    from luca_gym.worlds.luca.config import LucaConfig
    from luca_gym.worlds.luca.session import config_organism

    organism = config_organism(record["seed"], LucaConfig.organism_settings_of(record))
    return organism.meta.signal_labels[int(scores["malfunction_target"]) - organism.n_genes]


def disambiguation(record: dict) -> dict | None:
    """The disambiguation facts of one LUCA line whose malfunction is a
    persistent signal (None for any other line): ``signal``, ``tested``
    (a signal test before the commit), ``tested_alone``, ``tests`` (how many),
    ``committed``, ``diagnosis`` (what was committed, ``"TYPE target"``),
    ``credit`` (diagnosis > 0), ``full_credit`` (diagnosis = 1),
    ``rescued`` (rescue > 0)."""
    signal = signal_label(record)
    if signal is None:
        return None
    tests = alone = 0
    committed = None
    for call in record.get("calls") or []:
        if not _accepted(call):
            continue
        name, arguments = call.get("call"), call.get("arguments") or {}
        if name == "submit_malfunction_hypothesis":
            committed = f"{arguments.get('malfunction_type')} {arguments.get('target_name')}"
            break
        if name == "run_experiment":
            interventions = arguments.get("interventions") or {}
            if (interventions.get(signal) or {}).get("type") == SIGNAL_TYPE:
                tests += 1
                alone += len(interventions) == 1
    scores = record["scores"]
    return {
        "signal": signal,
        "tested": tests > 0,
        "tested_alone": alone > 0,
        "tests": tests,
        "committed": committed is not None,
        "diagnosis": committed,
        "credit": float(scores["diagnosis"]) > 0,
        "full_credit": float(scores["diagnosis"]) >= 1,
        "rescued": float(scores["rescue"]) > 0,
    }


def disambiguation_table(records) -> dict:
    """Per agent, over its persistent-signal disease sessions: ``sessions``,
    ``tested`` (a signal test before the commit), ``tested_alone``,
    ``committed``, ``credit``, ``full_credit``, ``tested_no_credit`` (tested,
    yet no diagnosis credit) and ``tested_credit``: counts."""
    table: dict = {}
    for record in records:
        facts = disambiguation(record)
        if facts is None:
            continue
        row = table.setdefault(record["agent"], dict.fromkeys(
            ("sessions", "tested", "tested_alone", "committed", "credit", "full_credit", "tested_no_credit", "tested_credit"), 0))
        row["sessions"] += 1
        for key in ("tested", "tested_alone", "committed", "credit", "full_credit"):
            row[key] += bool(facts[key])
        row["tested_no_credit"] += facts["tested"] and not facts["credit"]
        row["tested_credit"] += facts["tested"] and facts["credit"]
    return dict(sorted(table.items()))


def dissociation_table(records) -> dict:
    """Per agent, over its disease sessions (every malfunction): ``sessions``,
    ``both`` (rescue success and diagnosis credit), ``rescue_only`` (rescue
    success, no diagnosis credit), ``diagnosis_only`` (diagnosis credit, no
    rescue success), ``neither``: counts."""
    table: dict = {}
    for record in records:
        if record.get("mode") != "disease":
            continue
        scores = record["scores"]
        rescued, credited = float(scores["rescue"]) > 0, float(scores["diagnosis"]) > 0
        row = table.setdefault(record["agent"], dict.fromkeys(("sessions", "both", "rescue_only", "diagnosis_only", "neither"), 0))
        row["sessions"] += 1
        row["both" if rescued and credited else "rescue_only" if rescued else "diagnosis_only" if credited else "neither"] += 1
    return dict(sorted(table.items()))


def section(records) -> str | None:
    """The report's "Diagnosis process" section (markdown): the
    disambiguation table of the persistent-signal sessions and the
    rescue-versus-diagnosis dissociation, per agent; None without disease
    sessions."""
    dissociation = dissociation_table(records)
    if not dissociation:
        return None
    lines = ["## Diagnosis process", ""]
    table = disambiguation_table(records)
    if table:
        lines += [
            "Sessions whose malfunction is a persistent signal: whether the agent activated that signal (the "
            "disambiguating experiment) before committing its diagnosis, and whether the diagnosis earned credit "
            "(paper: tested in 36 of 56, credit in 1).",
            "",
            "| agent | sessions | signal tested before commit | tested alone | committed | diagnosis credit | full credit | tested, no credit |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *(f"| {agent} | {r['sessions']} | {r['tested']} | {r['tested_alone']} | {r['committed']} | {r['credit']} | "
              f"{r['full_credit']} | {r['tested_no_credit']} |" for agent, r in table.items()),
            "",
        ]
    else:
        lines += ["No session's malfunction is a persistent signal (or every such line is sealed): no disambiguation table.", ""]
    lines += [
        "Rescue versus diagnosis, every disease session: rescue success is a rescue score above 0, diagnosis credit a "
        "diagnosis score above 0.",
        "",
        "| agent | sessions | rescue and diagnosis | rescue, no diagnosis | diagnosis, no rescue | neither |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {agent} | {r['sessions']} | {r['both']} | {r['rescue_only']} | {r['diagnosis_only']} | {r['neither']} |"
          for agent, r in dissociation.items()),
    ]
    return "\n".join(lines)


__all__ = ["disambiguation", "disambiguation_table", "dissociation_table", "section", "signal_label"]
