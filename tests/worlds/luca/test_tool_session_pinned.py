"""LUCA's tool session pinned: its specs, prompts, answers and records.

The values in ``tests/data/luca_tool_session.json`` were recorded from the
hand-written session (tool schemas written as literals over the host
``Session``), before it became a tool table on the generic
:class:`~luca_gym.tools.table.TableToolSession`; the move had to leave every
byte an agent or a results file sees unchanged: the tool specs with their key
order (what a model reads; the recorded real-model cassettes replay requests
that include them), the MCP annotations and output schemas, the system
prompt, the organism facts, every call's answer and transcript entry, the
record and its fields. Each part is pinned by a SHA-256 of its JSON
(``json.dumps`` keeps key order), so a failure names the part that moved.

The quick tier checks a few settings; the slow tier the whole grid (mode x N
x vocabulary x budget x seal). ``python tests/worlds/luca/test_tool_session_pinned.py``
rewrites the file; only a deliberate change to what an agent sees may do so.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path

import pytest

from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.tools import ToolSession

PINNED = Path(__file__).resolve().parents[2] / "data" / "luca_tool_session.json"
TIERS = ("easy", "medium", "hard")
SECRET = "pinned-secret-for-tests"


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


# -- what an agent is shown before its first call ----------------------------------------------
def spec_case_name(mode, n_genes, vocabulary, budget, sealed, tier) -> str:
    return f"{tier}/{mode}/{n_genes}/{vocabulary}/budget={budget}/sealed={bool(sealed)}"


def _spec_cases() -> list[tuple]:
    # N=6 is the smallest size the generator meets its guarantees at, and in the easy tier only.
    grid = itertools.product(("healthy", "disease"), (6, 10, 20), ("invented", "real"), (None, 7), (None, SECRET))
    return [(*case, "easy" if case[1] == 6 else TIERS[i % 3]) for i, case in enumerate(grid)]


SPEC_CASES = _spec_cases()
# Two cases in the quick tier (the defaults; hard latent genes, real names, a budget, a seal), the grid in the slow one.
QUICK_SPECS = {"medium/disease/20/invented/budget=None/sealed=False", "hard/healthy/20/real/budget=7/sealed=True"}


def shown(session: ToolSession) -> dict:
    """Every part of a fresh session an agent, a client or a results file sees, as JSON data."""
    names = session.tool_names
    return {
        "specs": session.tool_specs(),
        "openai": session.tools_openai(),
        "anthropic": session.tools_anthropic(),
        "mcp": session.tools_mcp(),
        "annotations": {n: session.annotations(n) for n in names},
        "output_schemas": {n: session.output_schema(n) for n in names},
        "prompt": session.system_prompt(),
        "organism_info": session.organism_info(),
        "status": session.status(),
        "fields": {"record_fields": session.record_fields(), "key_settings": session.key_settings(),
                   "call_limit": session.call_limit, "instance_id": session.instance_id,
                   "organism_id": session.organism_id, "opening": session.opening, "title": session.title,
                   "status_keys": list(session.status_keys), "world": session.world, "end_tool": session.end_tool},
        "demo_calls": [list(c) for c in session.demo_calls()],
        "targetable_genes": list(session.targetable_genes),
    }


def spec_session(mode, n_genes, vocabulary, budget, sealed, tier) -> ToolSession:
    return ToolSession(3, tier=tier, mode=mode, n_genes=n_genes, vocabulary=vocabulary, budget=budget, sealed=sealed)


# -- whole sessions: scripted and random calls, refusals, endings ----------------------------
SESSION_CASES = {
    # name: (seed, settings, max_steps of a host Session passed as env (None: none), stance, calls)
    "easy-healthy-10": (0, {"tier": "easy", "mode": "healthy", "n_genes": 10}, None, "suppress", 70),
    "hard-disease-20-sealed": (5, {"tier": "hard", "mode": "disease", "n_genes": 20, "sealed": SECRET}, None, "permit", 90),
    "easy-disease-6-real-budget": (2, {"tier": "easy", "mode": "disease", "n_genes": 6, "vocabulary": "real",
                                       "budget": 3}, None, "suppress", 60),
    "easy-disease-20-call-limit": (1, {"tier": "easy", "mode": "disease", "n_genes": 20}, 9, "suppress", 60),
}
QUICK_SESSIONS = {"hard-disease-20-sealed", "easy-disease-20-call-limit"}


def _interventions(rnd: random.Random, session: ToolSession) -> dict:
    m = session.meta
    pool = [*m.gene_names, *m.signal_labels]
    chosen = rnd.sample(pool, rnd.choice((1, 1, 2, 3)))
    return {t: {"type": "ACTIVATE" if t in m.signal_labels else rnd.choice(("BLOCK", "BOOST", "DAMPEN"))} for t in chosen}


def random_call(rnd: random.Random, session: ToolSession):
    """One call, legal or not (latent genes, wrong phases, malformed arguments, unknown tools, JSON text)."""
    m = session.meta
    genes, phenotypes = list(m.gene_names), list(m.phenotype_names)
    kind = rnd.randrange(16)
    if kind <= 3:
        return "run_experiment", {"interventions": _interventions(rnd, session)}
    if kind == 4:
        return "get_next_prediction_task", {}
    if kind == 5:
        return "submit_prediction", {"predictions": {p: round(rnd.random(), 3) for p in phenotypes}}
    if kind == 6:
        return "submit_hypothesis", {"text": f"{rnd.choice(genes)} drives {rnd.choice(phenotypes)}"}
    if kind == 7:
        edges = [{"gene": rnd.choice(genes), "phenotype": rnd.choice(phenotypes), "direction": rnd.choice("+-")}
                 for _ in range(rnd.randrange(4))]
        return "submit_network", {"edges": edges}
    if kind == 8:
        target = rnd.choice([*genes, *m.signal_labels])
        return "submit_malfunction_hypothesis", {"target_name": target,
                                                 "malfunction_type": rnd.choice(("LOCK_HI", "LOCK_LO", "PERSIST"))}
    if kind == 9:
        return "test_rescue", {"interventions": _interventions(rnd, session)}
    if kind == 10:
        return "get_organism_info", {}
    if kind == 11:  # malformed
        return rnd.choice([
            ("run_experiment", {"interventions": {}}),
            ("run_experiment", {"interventions": {"NOPE": {"type": "BLOCK"}}}),
            ("submit_prediction", {"predictions": {phenotypes[0]: 2.0}}),
            ("submit_network", {"edges": [{"gene": genes[0], "phenotype": phenotypes[0], "direction": "up"}]}),
            ("submit_hypothesis", {"text": ""}),
            ("teleport", {}),
            ("end", {"now": True}),
            ("run_experiment", '{"interventions": {"' + genes[0] + '": {"type": "BOOST"}}}'),
            ("get_next_prediction_task", "not json"),
        ])
    if kind == 12:
        return "submit_prediction", json.dumps({"predictions": {p: 0.5 for p in phenotypes}})
    if kind == 13 and rnd.random() < 0.3:
        return "end", {}
    return "run_experiment", {"interventions": {rnd.choice(genes): {"type": "BLOCK"}}}


def play_session(name: str) -> dict:
    seed, settings, max_steps, stance, n_calls = SESSION_CASES[name]
    env = None
    if max_steps is not None:
        organism = {k: v for k, v in settings.items() if k != "sealed"}
        env = Session(**organism, max_steps=max_steps, sealed=settings.get("sealed"))
    session = ToolSession(seed, **settings, env=env, stance=stance)
    rnd = random.Random(name)
    for call in session.demo_calls()[:-1]:
        session.call(*call)
    for _ in range(n_calls):
        session.call(*random_call(rnd, session))
    session.call("end", {})
    after = [session.call("run_experiment", {"interventions": {session.targetable_genes[0]: {"type": "BLOCK"}}}),
             session.call("submit_hypothesis", {"text": "after the end"}), session.call("get_organism_info", {}),
             session.call("end", {})]
    return {
        "transcript": session.transcript,
        "record": session.record(),
        "ending": {"ended": session.ended, "truncated": session.truncated, "end_reason": session.end_reason,
                   "return": repr(session.total_reward), "scores": session.scores, "hypotheses": session.hypotheses},
        "after": after,
        "fields": {"record_fields": session.record_fields(), "key_settings": session.key_settings(),
                   "organism_info": session.organism_info()},
    }


# -- the checks ----------------------------------------------------------------------------------
def _pinned() -> dict:
    return json.loads(PINNED.read_text())


def _parts(value: dict) -> dict:
    return {part: _digest(v) for part, v in value.items()}


@pytest.mark.parametrize("case", [pytest.param(c, id=spec_case_name(*c), marks=() if spec_case_name(*c) in QUICK_SPECS
                                               else pytest.mark.slow) for c in SPEC_CASES])
def test_what_a_fresh_session_shows_is_byte_for_byte_the_pinned(case):
    assert _parts(shown(spec_session(*case))) == _pinned()["specs"][spec_case_name(*case)]


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in QUICK_SESSIONS else pytest.mark.slow)
                                  for n in SESSION_CASES])
def test_every_answer_transcript_and_record_is_byte_for_byte_the_pinned(name):
    assert _parts(play_session(name)) == _pinned()["sessions"][name]


def test_the_pinned_sessions_cover_refusals_both_endings_and_calls_after_the_end():
    """The pinned sessions are worth pinning: refused calls of every kind, an
    ending by ``end`` and one at the call limit, calls after the end."""
    played = {name: play_session(name) for name in QUICK_SESSIONS}
    reasons = {p["ending"]["end_reason"] for p in played.values()}
    assert reasons == {"end", "call_limit"}
    results = [e["result"] for p in played.values() for e in p["transcript"]]
    errors = [r["error"] for r in results if "error" in r]
    assert any(e.startswith("invalid arguments") for e in errors) and any(e.startswith("unknown tool") for e in errors)
    assert any("budget" in e or "latent" in e or "phase" in e or "task" in e for e in errors)  # the core's refusals
    assert sum("phenotypes" in r for r in results) >= 5 and any("note" in r for r in results)
    assert all("error" in r for p in played.values() for r in p["after"][:2])


if __name__ == "__main__":  # rewrite the pinned values (only for a deliberate change to what an agent sees)
    data = {"specs": {spec_case_name(*c): _parts(shown(spec_session(*c))) for c in SPEC_CASES},
            "sessions": {name: _parts(play_session(name)) for name in SESSION_CASES}}
    PINNED.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {PINNED}: {len(data['specs'])} spec cases, {len(data['sessions'])} sessions")
