"""The light front of ``luca-gym``: ``worlds`` and ``--help`` answer without
importing JAX (the registry describes a world without importing its core),
and ``eval``, ``train`` and ``mcp`` show the options of the world ``--world``
names, and only those."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from luca_gym import worlds
from luca_gym.cli import main

# A command line in a fresh interpreter: its exit code, its output, and whether JAX got imported.
RUN = """
import contextlib, io, json, sys
from luca_gym.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "jax": "jax" in sys.modules, "out": out.getvalue()}))
"""


def _fresh(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(argv)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["worlds"], ["--help"], ["eval", "--world", "biobank", "--help"]])
def test_worlds_and_help_answer_without_importing_jax(argv):
    outcome = _fresh(argv)
    assert outcome["code"] == 0 and outcome["jax"] is False, outcome
    if argv == ["worlds"]:
        for name in worlds.BUILTIN:
            assert f"{name} (version" in outcome["out"]
        assert "baselines: random, heuristic, causal-sweep" in outcome["out"]


def test_the_registry_lists_the_builtin_baselines_as_the_worlds_have_them():
    """The names ``worlds`` lists without importing a world's core are the
    names its baselines' dicts have (imported here)."""
    for name in worlds.BUILTIN:
        world = worlds.get(name)
        assert worlds.baseline_names(world) == tuple(world.baseline_policies()), name
        assert worlds.flat_baseline_names(world) == tuple(world.flat_baseline_policies()), name
        described = worlds.describe(name)
        assert described["baselines"] == tuple(world.baseline_policies())
        assert described["gym_ids"] == tuple(world.gym_ids())
    used = {e for w in map(worlds.get, worlds.BUILTIN) for e in (w.baselines, w.flat_baselines) if e}
    assert used == set(worlds.BUILTIN_BASELINE_NAMES)


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


LUCA_EVAL = ("--n-genes", "--tiers", "--modes")


@pytest.mark.parametrize("command", ["eval", "train", "mcp"])
def test_help_shows_the_chosen_worlds_options_only(capsys, command):
    text = _help(capsys, [command, "--world", "biobank", "--help"])
    assert "--profile" in text and "biobank" in text
    assert not any(option in text for option in (*LUCA_EVAL, "--vocabulary", "--stance", "--backwards"))
    text = _help(capsys, [command, "--world=dag", "--help"])
    assert "--n-nodes" in text and "--n-genes" not in text and "--profile" not in text


@pytest.mark.parametrize("command", ["eval", "train", "mcp"])
def test_help_without_a_world_shows_the_default_worlds_and_says_others_have_their_own(capsys, command):
    text = _help(capsys, [command, "--help"])
    assert "--n-genes" in text and "--profile" not in text and "--n-nodes" not in text
    assert f"luca-gym {command} --world NAME --help" in " ".join(text.split())


def test_another_worlds_option_is_still_refused_by_name(capsys):
    assert main(["eval", "--world", "dag", "--tiers", "easy"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tiers: an option of world 'luca', not of 'dag'" in err


def test_the_help_of_a_world_that_is_not_one_is_a_one_line_error(capsys):
    assert main(["eval", "--world", "no_such_world", "--help"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'no_such_world' unknown" in err and "allowed" in err
