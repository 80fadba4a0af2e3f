"""Rough edges a user meets first, each pinned by a test: the equation
world's refusals name what was typed (``^``, non-ASCII characters); bool
settings on the command line take ``True``/``False`` as the config does; the
text env pins an instance with ``instance_seed`` as the Gymnasium env does;
the tracking world's CoT instruction and ``reason`` come before the
prediction; and the tracking report quotes the paper's prose figures, labelled,
beside runs of the same protocol only."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

from luca_gym import cli
from luca_gym.cli.common import UsageError, bool_setting
from luca_gym.cli.world_options import world_of, world_settings
from luca_gym.worlds.equation.formula import FormulaError, parse
from luca_gym.worlds.tracking import report
from luca_gym.worlds.tracking.tools import COT_INSTRUCTION, TrackingToolSession

VARIABLES = ["mass", "velocity", "time", "x", "a"]


# -- 1. the equation world: '^' is not a power ---------------------------------------------------
@pytest.mark.parametrize("text, write", [
    ("x^2", "x**2"),
    ("a^3", "a**3"),
    ("mass ^ -2", "mass ** -2"),
    ("3*mass*velocity^2*exp(time)", "3*mass*velocity**2*exp(time)"),  # Python reads (3*mass*velocity) ^ (2*exp(time))
    ("x^2 + 1", "x**2 + 1"),  # what the user meant, though Python reads x ^ (2 + 1)
    ("sin(x^2)", "x**2"),
    ("+".join(["mass*velocity^2"] * 10), "velocity**2"),  # long: the operands around the first '^'
])
def test_a_caret_is_refused_as_not_a_power_with_the_users_operands(text, write):
    with pytest.raises(FormulaError) as refused:
        parse(text, VARIABLES)
    assert str(refused.value) == f"formula: '^' is not a power; write {write}"
    parse(write, VARIABLES)  # what it says to write parses


def test_another_refused_operator_is_named_as_typed():
    with pytest.raises(FormulaError, match=re.escape("operator '%' (Mod) not allowed; allowed + - * / **")):
        parse("mass % 2", VARIABLES)


# -- 2. the equation world: a non-ASCII character is named, with what to write ---------------------
@pytest.mark.parametrize("text, message", [
    ("mass × velocity", "character '×' (U+00D7) is not allowed: only printable ASCII; write * for multiplication"),
    ("mass·velocity", "character '·' (U+00B7) is not allowed: only printable ASCII; write * for multiplication"),
    ("mass*velocity²", "character '²' (U+00B2) is not allowed: only printable ASCII; write velocity**2 for a power"),
    ("mass⁻¹", "character '⁻' (U+207B) is not allowed: only printable ASCII; write mass**-1 for a power"),
    ("mass − time", "character '−' (U+2212) is not allowed: only printable ASCII; write - for minus"),
    ("ｍass", "character 'ｍ' (U+FF4D) is not allowed: only printable ASCII characters and spaces are allowed"),
    ("mass\x00", "character '\\x00' (U+0000) is not allowed: only printable ASCII characters and spaces are allowed"),
])
def test_a_non_ascii_character_is_named_with_its_code_point_and_a_hint(text, message):
    with pytest.raises(FormulaError) as refused:
        parse(text, VARIABLES)
    assert str(refused.value) == f"formula: {message}"


# -- 3. bool settings on the command line ----------------------------------------------------------
@pytest.mark.parametrize("value, expected", [(True, True), (False, False), ("True", True), ("False", False),
                                             ("TRUE", True), (1, True), (0, False)])
def test_a_bool_setting_takes_true_and_false_as_the_config_does(value, expected):
    assert bool_setting(value, "cot") is expected


@pytest.mark.parametrize("value", ["yes", 2, 1.0, None, "", "x" * 100])
def test_a_bool_setting_refuses_anything_else_in_one_line(value):
    with pytest.raises(UsageError) as refused:
        bool_setting(value, "cot")
    assert str(refused.value).startswith("cot: ") and "is not a bool; allowed True or False" in str(refused.value)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 120


def _settings_of(argv) -> dict:
    args = cli.parser_for(argv).parse_args(argv)
    world, hook = world_of(args)
    return world_settings(args, world, hook, "eval_settings")


def test_the_redraw_may_repeat_flag_and_set_take_capitalised_bools():
    base = ["eval", "--world", "dag", "--seeds", "0"]
    assert _settings_of([*base, "--redraw-may-repeat", "True"])["redraw_may_repeat"] == [True]
    assert _settings_of([*base, "--redraw-may-repeat", "False,true"])["redraw_may_repeat"] == [False, True]
    assert _settings_of([*base, "--set", "redraw_may_repeat=1,0"])["redraw_may_repeat"] == [True, False]
    assert _settings_of([*base, "--set", "n_nodes=1"])["n_nodes"] == [1]  # an integer setting stays an integer


def test_eval_runs_cot_true_and_refuses_garbage_in_one_line(tmp_path, capsys):
    out = tmp_path / "tracking"
    argv = ["eval", "--world", "tracking", "--agents", "systematic", "--seeds", "0", "--set", "length=3", "--quiet"]
    assert cli.main([*argv, "--cot", "True", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert [r["cot"] for r in lines] == [True] and lines[0]["calls"][-1]["arguments"]["reason"]
    capsys.readouterr()
    assert cli.main([*argv, "--cot", "yes", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["luca-gym eval: error: --cot: 'yes' is not a bool; allowed True or False (also true/false, 1/0)"]
    assert not (tmp_path / "bad" / "sessions.jsonl").exists()


# -- 4. the text env pins an instance with instance_seed, as the Gymnasium env does ------------------
def test_the_text_env_takes_instance_seed_and_seed_as_its_alias():
    settings = {"length": 4, "n_nodes": 3}
    gym_env = gym.make("luca_gym/StateTracking-v0", **settings)
    x, info = gym_env.reset(options={"instance_seed": 7})
    assert info["instance_seed"] == 7
    env = gym.make("luca_gym/StateTrackingTools-v0", **settings)
    _, info = env.reset(options={"instance_seed": 7})
    assert info["instance_seed"] == 7 and env.unwrapped.session.observations() == x.tolist()
    _, alias = env.reset(options={"seed": 7})
    assert alias["instance_seed"] == 7 and alias["instance_id"] == info["instance_id"]
    assert env.reset(options={"seed": 7, "instance_seed": 7})[1]["instance_id"] == info["instance_id"]
    with pytest.raises(ValueError, match=r"options: 'instance_seed' \(7\) and 'seed' \(8\) name different instances; "
                                         r"give 'instance_seed' only"):
        env.reset(options={"instance_seed": 7, "seed": 8})
    with pytest.raises(ValueError, match="options\\['instance_seed'\\]"):
        env.reset(options={"instance_seed": -1})
    with pytest.raises(ValueError, match="unknown key 'instance'"):
        env.reset(options={"instance": 7})


# -- 5. the tracking world: the CoT instruction and the reason before the prediction -------------------
def test_the_cot_instruction_comes_before_the_trajectory_and_the_reason_before_the_changes():
    settings = {"length": 4, "n_nodes": 3}
    cot, plain = TrackingToolSession(2, **settings, cot=True), TrackingToolSession(2, **settings)
    prompt = cot.system_prompt()
    assert prompt.index(COT_INSTRUCTION) < prompt.index("X =\n") < prompt.index("Your goal is the change-indicator matrix")
    assert prompt.replace(prompt[prompt.index(COT_INSTRUCTION):prompt.index("X =\n")], "") == plain.system_prompt()

    def properties(session):
        return list(next(t for t in session.tool_specs() if t["name"] == "submit_changes")["input_schema"]["properties"])

    assert properties(cot) == ["reason", "changes"] and properties(plain) == ["changes"]
    openai = next(t for t in cot.tools_openai() if t["function"]["name"] == "submit_changes")
    assert list(openai["function"]["parameters"]["properties"]) == ["reason", "changes"]
    assert list(dict(cot.demo_calls())["submit_changes"]) == ["reason", "changes"]


# -- 6. the tracking report: the paper's prose figures, beside runs of the same protocol only -----------
def _records(lengths, cots, agent="systematic"):
    return [{"world": "tracking", "agent": agent, "cot": cot, "length": m, "n_nodes": 5, "n_colors": 3,
             "change_prob": 0.3, "seed": 0,
             "scores": {"exact": 1.0, "trajectory_accuracy": 1.0, "cell_accuracy": 1.0, "position_correct": [1.0] * (m - 1)}}
            for m in lengths for cot in cots]


def test_the_report_quotes_the_papers_prose_figures_labelled_beside_the_same_protocol(tmp_path):
    text = "\n\n".join(report.sections(_records((3, 5, 10), (False, True)), str(tmp_path), source="s.jsonl"))
    table = text[text.index("Prose figures"):text.index("## Figure 5")]
    assert "prose figure" in table and "the paper's protocol" in table and "R=100 rounds" in table
    assert "| Claude | no | M=3 | 69% |" in table and "| Claude | no | M=10 | near 0 |" in table
    assert "| GPT-4o | no | M=5 | 13% |" in table and "| GPT-4o | yes | M=5 | 100% |" in table
    assert "Claude falls from 69% at length 3 to near-zero accuracy by length 10" in table
    # Only beside runs of the same M and CoT condition.
    no_cot = report.prose_table2(_records((3, 5, 10), (False,)))
    assert "| GPT-4o | no | M=5 | 13% |" in no_cot and "| yes |" not in no_cot
    assert report.prose_table2(_records((12, 20), (False, True))) is None
    assert "Prose figure" not in "\n".join(report.sections(_records((4, 12), (False, True)), str(tmp_path), source="s"))
    # Figure 5's: Qwen2.5 with CoT at position 19 of M=20, where the figure is drawn at M=20 with CoT runs.
    figure5 = "\n".join(report.sections(_records((5, 20), (True,)), str(tmp_path), source="s"))
    assert "Prose figure" in figure5 and "Qwen2.5 + CoT at position 19 of M=20: accuracy below 70%" in figure5
    assert report.prose_figure5(_records((20,), (False,)), 20) is None
