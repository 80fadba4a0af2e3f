"""``luca-gym play`` (:mod:`luca_gym.worlds.luca.play`): a REPL over the agents' dispatcher.

Every typed call reaches :meth:`ToolSession.call` and nothing else; replies
print as aligned lines with names (``--json``: one JSON object a reply); an
intervention needs its type written out; ``help CALL`` and Tab completion use
this organism's names; a line that makes no call (an unknown verb, an escape
sequence) gets one error line and costs nothing.

One organism (easy, disease, N=20, seed 0) serves the module: its env is built
once and each test opens a fresh session on it.
"""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luca_gym.worlds.luca import calls
from luca_gym.cli import build_parser, main
from luca_gym.worlds.luca.cli import cmd_play
from luca_gym.worlds.luca.play import VERBS, PlayShell, format_scores, parse_call
from luca_gym.worlds.luca.spec import GENE_TYPES, MALFUNCTION_TYPES
from luca_gym.worlds.luca.tools import ToolSession

SETTINGS = {"tier": "easy", "mode": "disease", "n_genes": 20}
OPTIONS = ["--seed", "0", "--tier", "easy", "--mode", "disease", "--n-genes", "20"]
BUDGET = 31  # the paper's N + S + 8 for N=20


@pytest.fixture(scope="module")
def env():
    return ToolSession(0, **SETTINGS).env


@pytest.fixture
def session(env):
    return ToolSession(0, **SETTINGS, env=env)


def play(session, script: str, json_output: bool = False) -> tuple[PlayShell, str]:
    stdout = io.StringIO()
    shell = PlayShell(session, stdin=io.StringIO(script), stdout=stdout, json_output=json_output)
    assert shell.run() == 0
    return shell, stdout.getvalue()


def replies(out: str) -> list[str]:
    """The lines printed after the banner, the prompts taken off."""
    return [line.replace("luca> ", "") for line in out.splitlines()[2:] if line.replace("luca> ", "").strip()]


def budget_left(session) -> int:
    return int(session.obs["budget_left"])


# -- calls and their replies ---------------------------------------------------------
def test_banner_names_the_organism_the_budget_and_help(session):
    _, out = play(session, "")
    banner = out.splitlines()[0] + out.splitlines()[1]
    for word in ("easy", "disease", "org_00000000", "20 genes", f"budget {BUDGET} of {BUDGET}", *session.meta.phenotype_names):
        assert word in banner, word
    assert "type help, or help call" in banner.lower()


def test_experiment_prints_phenotypes_and_spends_budget(session):
    _, out = play(session, "experiment G002=BLOCK\n")
    assert budget_left(session) == BUDGET - 1
    result = session.transcript[-1]["result"]
    for p in session.meta.phenotype_names:
        (line,) = [line for line in replies(out) if line.split()[0] == p]
        value = line.split()[1]
        assert re.fullmatch(r"\d\.\d{3}", value), line
        assert float(value) == pytest.approx(result["phenotypes"][p], abs=5e-4)
        assert line.split()[-1] == "range"  # disease mode: in range / out of range
    assert f"budget left {BUDGET - 1} of {BUDGET}" in out
    assert "{" not in out and "'phenotypes'" not in out  # no dict reprs, no JSON


def test_a_signal_by_its_label_and_types_in_any_case(session):
    signal = session.meta.signal_labels[0]
    _, out = play(session, f"experiment {signal}=ACTIVATE\nexperiment G002=boost\n")
    assert "error" not in out
    assert budget_left(session) == BUDGET - 2
    calls_made = [entry["arguments"]["interventions"] for entry in session.transcript]
    assert calls_made == [{signal: {"type": "ACTIVATE"}}, {"G002": {"type": "BOOST"}}]


@pytest.mark.parametrize("target", ["G002", "SIGNAL"])
def test_an_intervention_without_a_type_is_refused(session, target):
    target = session.meta.signal_labels[1] if target == "SIGNAL" else target
    _, out = play(session, f"experiment {target}\nexperiment G001=BLOCK {target}\n")
    errors = [line for line in replies(out) if line.startswith("error:")]
    assert len(errors) == 2 and len(replies(out)) == 2
    allowed = ["ACTIVATE"] if target in session.meta.signal_labels else list(GENE_TYPES)
    for error in errors:
        assert all(f"{target}={kind}" in error for kind in allowed), error
    assert budget_left(session) == BUDGET and session.transcript == []  # nothing reached the session


def test_the_task_reads_as_interventions_by_name(session):
    _, out = play(session, "task\n")
    task = session.transcript[-1]["result"]
    expected = " + ".join(f"{item['type']} {gene}" for gene, item in task["interventions"].items())
    assert f"task 1: {expected}" in out
    assert re.search(r"task 1: (BLOCK|BOOST|DAMPEN) G\d{3} \+ (BLOCK|BOOST|DAMPEN) G\d{3}", out)


def test_info_is_a_table_of_phenotypes(session):
    _, out = play(session, "info\n")
    info = session.organism_info()
    for p in session.meta.phenotype_names:
        (line,) = [line for line in replies(out) if line.split()[0] == p]
        assert line.split()[1] == f"{info['baseline_phenotypes'][p]:.3f}"
        assert ("aberrant" in line) == (p in info["aberrant_phenotypes"])
    assert "genes you can target: G001..G020" in out
    assert all(label in out for label in session.meta.signal_labels)


def test_end_prints_scores_with_names_rounded(session):
    _, out = play(session, "diagnose G003 LOCK_HI\nrescue G003=BLOCK\nend\ninfo\n")
    assert "diagnosis locked (one-way): G003 LOCK_HI" in out
    assert "restored fraction" in out
    assert session.ended and "session over" in out
    scores = session.scores
    target, kind = scores["malfunction_target"], scores["malfunction_type"]
    target = target if isinstance(target, str) else calls.target_name(session.meta, int(target))
    kind = kind if isinstance(kind, str) else MALFUNCTION_TYPES[int(kind)]
    assert target in (*session.meta.gene_names, *session.meta.signal_labels)
    assert re.search(rf"^\s+malfunction_target\s+{re.escape(target)}$", out, re.MULTILINE)
    assert re.search(rf"^\s+malfunction_type\s+{kind}$", out, re.MULTILINE)
    assert re.search(r"^\s+composite\s+\d\.\d{3}$", out, re.MULTILINE)
    assert "organism org_" not in out.split("session over")[1]  # the session over, info was never read


@pytest.mark.parametrize(
    "scores, target, kind",
    [
        ({"malfunction_target": 4, "malfunction_type": 2, "composite": 0.123456}, "G005", "LOCK_LO"),
        ({"malfunction_target": 21, "malfunction_type": 3, "composite": 0.123456}, "SIGNAL1", "PERSIST"),
        ({"malfunction_target": "G005", "malfunction_type": "LOCK_LO", "composite": 0.1235}, "G005", "LOCK_LO"),
        ({"malfunction_target": -1, "malfunction_type": 0, "composite": 0.123456}, "none", "NONE"),
        ({"malfunction_target": None, "malfunction_type": "NONE", "composite": 0.1235}, "none", "NONE"),
    ],
)
def test_scores_show_the_malfunction_by_name_from_indices_or_names(session, scores, target, kind):
    """ToolSession may give the malfunction as indices (genes, then signals) or as names."""
    target = session.meta.signal_labels[1] if target == "SIGNAL1" else target
    text = format_scores(session.meta, scores)
    assert re.search(rf"^\s+malfunction_target\s+{re.escape(target)}$", text, re.MULTILINE)
    assert re.search(rf"^\s+malfunction_type\s+{kind}$", text, re.MULTILINE)
    assert re.search(r"^\s+composite\s+0\.123$", text, re.MULTILINE)
    assert text.splitlines()[1].split()[0] == "composite"


# -- lines that make no call ------------------------------------------------------------
@pytest.mark.parametrize("line", ["\x1b[A", "\x1b[B", "\x1bOA", "bogus G001", "!ls", "experiment2 G001=BLOCK"])
def test_a_line_that_makes_no_call_gets_one_error_line(session, line):
    _, out = play(session, f"{line}\n")
    (reply,) = replies(out)
    assert reply.startswith("error: ") and "help" in reply
    assert "\x1b" not in out  # the escape shows as text, not sent back to the terminal
    assert session.transcript == []


def test_an_empty_line_does_not_repeat_the_last_call(session):
    play(session, "experiment G002=BLOCK\n\n   \n")
    assert budget_left(session) == BUDGET - 1 and len(session.transcript) == 1


def test_quit_and_end_of_input_leave_the_session_open(session):
    play(session, "quit\nexperiment G002=BLOCK\n")
    assert not session.ended and session.transcript == []
    play(session, "EXPERIMENT G002=BLOCK")  # no newline, then end of input; verbs in any case
    assert budget_left(session) == BUDGET - 1 and not session.ended


def test_hypothesis_text_is_kept_as_typed(session):
    play(session, "hypothesis it's G001's doing\nhypothesis 'quoted text'\n")
    assert session.hypotheses == ["it's G001's doing", "quoted text"]


# -- help ---------------------------------------------------------------------------------
def test_help_experiment_shows_this_organisms_names(session):
    _, out = play(session, "help experiment\n")
    gene, signal = session.targetable_genes[1], session.meta.signal_labels[0]
    assert "run_experiment" in out and "TARGET=TYPE" in out
    assert f"example: experiment {gene}=BLOCK" in out
    assert f"example: experiment {signal}=ACTIVATE" in out
    assert all(label in out for label in session.meta.signal_labels)
    assert session.transcript == []


@pytest.mark.parametrize("verb", list(VERBS))
def test_help_for_every_call_has_an_example_that_parses(session, verb):
    _, out = play(session, f"help {verb}\n")
    examples = [line.split("example: ", 1)[1] for line in out.splitlines() if "example: " in line]
    assert examples and VERBS[verb] in out
    for example in examples:
        typed_verb, _, arg = example.partition(" ")
        assert typed_verb == verb
        name, arguments = parse_call(session.meta, verb, arg)
        assert session.validate(name, arguments) is None, example


def test_help_lists_every_call_and_refuses_an_unknown_topic(session):
    _, out = play(session, "help\n?\nhelp bogus\n")
    overview = out.split("luca> ")[1]
    assert all(re.search(rf"^\s+{verb}\b", overview, re.MULTILINE) for verb in VERBS)
    assert out.count("calls (an agent's tools") == 2
    assert "error: help: no call 'bogus'" in out


# -- completion ------------------------------------------------------------------------------
def complete(shell: PlayShell, line: str, text: str | None = None) -> list[str]:
    """What readline would get: ``text`` is the end of ``line`` it replaces
    (by default the last word; readline also breaks words at - = and :)."""
    text = line.split(" ")[-1] if text is None else text
    verb = line.split()[0]
    return getattr(shell, f"complete_{verb}")(text, line, len(line) - len(text), len(line))


def test_completion_of_calls_genes_signals_and_types(session):
    shell = PlayShell(session, stdin=io.StringIO(), stdout=io.StringIO())
    signal = session.meta.signal_labels[0]
    assert shell.completenames("ex") == ["exit ", "experiment "]
    assert "EOF " not in shell.completenames("")
    assert complete(shell, "experiment G00") == [f"G00{i}" for i in range(1, 10)]
    assert complete(shell, "experiment G002") == [f"G002={kind} " for kind in GENE_TYPES]
    assert complete(shell, "experiment G002=B") == ["G002=BLOCK ", "G002=BOOST "]
    assert complete(shell, "experiment G002=B", "B") == ["BLOCK ", "BOOST "]  # readline's word starts after =
    assert complete(shell, f"experiment {signal[:3]}") == [f"{signal}=ACTIVATE "]  # one target: on to its type
    head, _, tail = signal.rpartition("-")
    if head:  # readline's word starts after the -
        assert complete(shell, f"experiment {head}-{tail[:1]}", tail[:1]) == [f"{tail}=ACTIVATE "]
    assert "G002" not in complete(shell, "experiment G002=BLOCK G00")  # each target once
    assert complete(shell, "rescue G01") == [f"G01{i}" for i in range(10)]
    assert complete(shell, "diagnose ") == [f"{t} " for t in (*session.targetable_genes, *session.meta.signal_labels)]
    assert complete(shell, "diagnose G003 LOCK") == ["LOCK_HI ", "LOCK_LO "]
    assert complete(shell, "diagnose G003 LOCK_HI ") == []
    p = session.meta.phenotype_names
    assert complete(shell, "network G001") == [f"G001:{x}" for x in p]
    assert complete(shell, f"network G001:{p[0]}") == [f"G001:{p[0]}:+ ", f"G001:{p[0]}:- "]
    names = [*session.targetable_genes, *session.meta.signal_labels, *p]
    assert complete(shell, f"hypothesis G001 raises {p[1][:2]}") == [f"{x} " for x in names if x.startswith(p[1][:2])]
    assert complete(shell, "help ta") == ["task "]


# -- --json and the CLI ----------------------------------------------------------------------
def test_json_output_is_one_object_a_reply(session):
    _, out = play(session, "info\nexperiment G002\nbogus\nhelp experiment\nexperiment G002=BLOCK\nend\n", json_output=True)
    objects = [json.loads(line) for line in out.splitlines()]
    info, refused, unknown, helped, experiment, end = objects
    assert info["budget_total"] == BUDGET
    assert "G002=BLOCK" in refused["error"] and refused["budget_remaining"] == BUDGET
    assert "unknown call" in unknown["error"] and unknown["budget_remaining"] == BUDGET
    assert "example: experiment" in helped["help"]
    assert experiment == session.transcript[1]["result"] and experiment["budget_remaining"] == BUDGET - 1
    assert end["ended"] is True and "scores" in end


def test_cli_play_reads_the_terminal(monkeypatch, capsys):
    """``luca-gym play`` with its defaults: the session of the options, stdin and stdout."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("experiment G002\nexperiment G002=DAMPEN\nend\n"))
    assert main(["play", *OPTIONS]) == 0
    out = capsys.readouterr().out
    assert "org_00000000" in out and f"budget {BUDGET} of {BUDGET}" in out
    assert "error: experiment: 'G002' has no intervention type" in out
    assert f"budget left {BUDGET - 1} of {BUDGET}" in out
    assert re.search(r"^\s+malfunction_target\s+\S+$", out, re.MULTILINE)

    monkeypatch.setattr(sys, "stdin", io.StringIO("info\nexperiment G002=DAMPEN\nend\n"))
    assert main(["play", "--json", *OPTIONS]) == 0
    info, experiment, end = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert info["organism_id"] == "org_00000000" and experiment["budget_remaining"] == BUDGET - 1 and end["ended"]


# -- from the first play: the dispatcher's results, refusals free --------------------------
def test_scripted_session(session):
    lines = ["help", "info", "bogus G001", "experiment G001=BLOCK", "predict 0.5 0.5", "task", "predict 0.5 0.5 0.5",
             "task", "predict 0.5 0.5 0.5", "end", "experiment G002=BLOCK"]
    script = "".join(line + "\n" for line in lines)
    _, out = play(session, script)
    assert "experiment TARGET=TYPE" in out  # help
    assert out.index("error: unknown call 'bogus'") < out.index("converged in"), "the unknown call must not end the session"
    assert f"budget left {BUDGET - 1} of {BUDGET}" in out  # the unknown call cost nothing, the experiment 1
    assert "error: predict: give 3 numbers" in out
    assert "task 1: " in out and "task 2: " in out and out.count("prediction stored") == 2
    assert out.count("session over") == 1 and re.search(r"^\s+prediction\s+\d\.\d{3}$", out, re.MULTILINE)
    # the session ended at 'end': the experiment typed after it was never read
    assert out.count("luca> ") == script.count("\n") - 1
    assert [e["call"] for e in session.transcript] == [
        "get_organism_info", "run_experiment", "get_next_prediction_task", "submit_prediction",
        "get_next_prediction_task", "submit_prediction", "end",
    ]


def test_play_results_are_the_tool_session_results(env):
    """play sends its typed calls through ToolSession.call: the same results,
    bit for bit, as an agent making the same named calls."""
    session = ToolSession(0, **SETTINGS, env=env)
    p = session.meta.phenotype_names
    signal = session.meta.signal_labels[0]
    typed_and_named = [
        ("info", "get_organism_info", {}),
        (f"experiment G001=BLOCK G002=DAMPEN {signal}=ACTIVATE", "run_experiment",
         {"interventions": {"G001": {"type": "BLOCK"}, "G002": {"type": "DAMPEN"}, signal: {"type": "ACTIVATE"}}}),
        ("task", "get_next_prediction_task", {}),
        ("predict 0.25 0.5 0.75", "submit_prediction", {"predictions": dict(zip(p, (0.25, 0.5, 0.75)))}),
        (f"network G001:{p[0]}:+ G003:{p[2]}:-", "submit_network",
         {"edges": [{"gene": "G001", "phenotype": p[0], "direction": "+"}, {"gene": "G003", "phenotype": p[2], "direction": "-"}]}),
        ("hypothesis 'G001 raises the first'", "submit_hypothesis", {"text": "G001 raises the first"}),
        ("diagnose G012 LOCK_HI", "submit_malfunction_hypothesis", {"target_name": "G012", "malfunction_type": "LOCK_HI"}),
        ("rescue G014=BOOST", "test_rescue", {"interventions": {"G014": {"type": "BOOST"}}}),
        ("end", "end", {}),
    ]
    _, out = play(session, "".join(typed + "\n" for typed, _, _ in typed_and_named), json_output=True)
    agent = ToolSession(0, **SETTINGS, env=env)
    expected = [agent.call(name, args) for _, name, args in typed_and_named]
    assert all("error" not in r for r in expected), expected
    assert [json.loads(line) for line in out.splitlines()] == json.loads(json.dumps(expected))
    assert [e["arguments"] for e in session.transcript] == [e["arguments"] for e in agent.transcript]


@pytest.mark.parametrize(
    "typed, words",
    [
        ("experiment G001=bogus", ["G001", "'BOGUS'", "allowed"]),
        ("experiment G001", ["G001=BLOCK", "G001=BOOST", "G001=DAMPEN"]),
        ("experiment G001=BLOCK G001=BOOST", ["G001", "twice"]),
        ("experiment G099=BLOCK", ["G099", "allowed"]),
        ("experiment", ["experiment", "TARGET=TYPE"]),
        ("rescue G001=BLOCK", ["test_rescue", "diagnosis"]),
        ("predict 0.5 0.5 nan", ["NaN"]),
        ("predict 0.5 0.5 1.5", ["maximum"]),
        ("predict 0.5 0.5 x", ["predict", "'x'", "number"]),
        ("predict 0.5 0.5", ["predict", "3 numbers"]),
        ("network G001:x", ["network", "'G001:x'", "GENE:PHENOTYPE:+"]),
        ("network G001:x:+", ["phenotype", "'x'", "allowed"]),
        ("diagnose G001", ["diagnose", "LOCK_HI, LOCK_LO, PERSIST"]),
        ("diagnose G001 lock_sideways", ["malfunction_type", "'LOCK_SIDEWAYS'", "'LOCK_HI'"]),
        ("hypothesis", ["text", "shorter than"]),
        ("task now", ["task", "no arguments"]),
        ("experiment 'G001=BLOCK", ["experiment", "quotation"]),
    ],
)
def test_malformed_calls_are_refused_free(session, typed, words):
    _, out = play(session, f"{typed}\ninfo\n")
    (error,) = [line for line in replies(out) if "error" in line]
    assert error.startswith("error: ")
    for w in words:
        assert w in error, (w, error)
    assert budget_left(session) == BUDGET and not session.ended
    assert "organism org_00000000" in out  # the session went on


def test_refused_call_keeps_the_session_open(session):
    _, out = play(session, "task\ntask\nend\n")
    assert "error: submit a prediction for the current task before revealing the next" in out
    assert out.count("session over") == 1


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(verb=st.sampled_from([*VERBS, "help", "bogus", ""]), rest=st.text(max_size=40))
def test_any_typed_line_gets_a_reply_and_never_raises(env, verb, rest):
    """Whatever is typed: a reply (or nothing for an empty line), never an exception."""
    session = ToolSession(0, **SETTINGS, env=env)
    line = f"{verb} {rest}".replace("\n", " ").replace("\r", " ")
    _, out = play(session, line + "\n")
    if not line.strip():
        assert replies(out) == []
    else:
        assert replies(out), line
    if out.count("error:") and not session.transcript:
        assert budget_left(session) == BUDGET


def test_cmd_play_takes_streams(env):
    """cli.cmd_play(args, stdin, stdout): the thin entry the REPL keeps."""
    stdout = io.StringIO()
    args = build_parser().parse_args(["play", *OPTIONS])
    assert args.json is False and build_parser().parse_args(["play", "--json"]).json is True
    assert cmd_play(args, stdin=io.StringIO("info\n"), stdout=stdout) == 0
    assert "luca> organism org_00000000" in stdout.getvalue()
