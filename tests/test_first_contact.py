"""A newcomer's first contact with the ``luca-gym`` command:
``--help``, ``--version`` and argument errors answer without importing JAX;
``show`` says what it is doing before its slow work; ``info`` keeps hundreds
of signals to one short line; a refused eval leaves no file behind; a resumed
eval says how many sessions it skipped; ``play --out`` records its session
for ``show`` and ``report``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import luca_gym
from luca_gym import harness as ev
from luca_gym.cli import build_parser, main
from luca_gym.llm import providers
from luca_gym.worlds.luca.cli import cmd_play, describe

EASY = ["--tiers", "easy", "--modes", "healthy", "--seeds", "0"]

# Each command line in a fresh interpreter: the exit code, and whether JAX got imported.
NO_JAX = """
import json, sys
from luca_gym.cli import main
argv = json.loads(sys.argv[1])
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "jax": "jax" in sys.modules}))
"""


@pytest.mark.parametrize("argv, code", [
    (["--help"], 0),
    (["--version"], 0),
    (["eval", "--seeds", "x"], 2),
    (["eval", "--price", "cheap"], 2),
    (["no-such-command"], 2),
    (["eval", "--no-such-option"], 2),
    (["show"], 2),  # its required arguments missing
])
def test_help_version_and_argument_errors_answer_without_importing_jax(argv, code):
    proc = subprocess.run([sys.executable, "-c", NO_JAX, json.dumps(argv)], capture_output=True, text=True, timeout=120)
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome == {"code": code, "jax": False}, (argv, proc.stderr)
    if argv == ["--help"]:
        assert all(name in proc.stdout for name in ("eval", "show", "fidelity", "info", "play"))


def test_the_package_still_exports_luca_names_imported_on_first_use():
    """The re-exports are lazy but complete: ``from luca_gym import X`` and
    ``dir()`` see every name of ``__all__``; a deferred command's options
    (fidelity's, whose defaults live beside JAX code) appear in its help."""
    from luca_gym import MODES, TIERS, Organism, make_organism, sizes  # noqa: F401

    assert set(luca_gym.__all__) <= set(dir(luca_gym))
    assert all(getattr(luca_gym, name) is not None for name in luca_gym.__all__)
    assert sizes(20).n_genes == 20
    with pytest.raises(AttributeError):
        luca_gym.no_such_name  # noqa: B018
    text = build_parser().parse_args(["fidelity"]).tables
    assert text.split(",")[0] == "3"


def test_info_abbreviates_hundreds_of_signals_with_their_count():
    n_signals = 183  # N=1280
    meta = SimpleNamespace(seed=0, tier="easy", n_genes=1280, mode="healthy", backwards=False, vocabulary="invented",
                           sealed=None, signal_labels=[f"sig-{i}" for i in range(n_signals)],
                           signal_modes=["activates"] * n_signals, phenotype_names=("a", "b", "c"))
    arrays = SimpleNamespace(weights=np.eye(4), readout_mask=np.ones(4), latent_mask=np.zeros(4))
    organism = SimpleNamespace(arrays=arrays, meta=meta, fingerprint=lambda: "f" * 64)
    line = next(line for line in describe(organism).splitlines() if line.strip().startswith("signals:"))
    assert len(line) < 300 and "sig-0 (activates)" in line and "sig-182 (activates)" in line
    assert "..." in line and f"({n_signals} signals)" in line and "sig-100" not in line
    meta.signal_labels, meta.signal_modes = ["s1", "s2", "s3"], ["activates", "inhibits", "activates"]
    assert "signals: s1 (activates), s2 (inhibits), s3 (activates)" in describe(organism)  # a few: all of them


def test_a_model_agent_without_its_key_is_refused_before_any_file(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "new" / "results"
    assert main(["eval", "--agents", "random,openai:some-model", *EASY, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "OPENAI_API_KEY" in err[0] and "--base-url" in err[0], err
    assert not (tmp_path / "new").exists()
    monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    assert main(["eval", "--agents", "openai:some-model", *EASY, "--out", str(out), "--quiet"]) == 2
    assert 'pip install "luca-gym[llm]"' in capsys.readouterr().err and not (tmp_path / "new").exists()


class AuthenticationError(Exception):
    """Shaped like the SDK's: the module decides that it is a provider error."""


AuthenticationError.__module__ = "openai"


def test_a_sweep_that_records_nothing_removes_the_folder_it_made(monkeypatch, tmp_path, capsys):
    """A key the provider refuses shows only once the first call is made: the
    sweep stops with nothing recorded, and the folder it made goes."""

    def refusing(messages, tools):
        with providers.provider_errors("openai:some-model"):
            raise AuthenticationError("Incorrect API key provided")

    monkeypatch.setattr(ev, "make_runner", lambda name, base_url=None, world="luca": refusing)
    out = tmp_path / "made"
    assert main(["eval", "--agents", "openai:some-model", *EASY, "--out", str(out), "--quiet", "--retries", "0"]) == 1
    assert "Incorrect API key" in capsys.readouterr().err and not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert main(["eval", "--agents", "openai:some-model", *EASY, "--out", str(kept), "--quiet", "--retries", "0"]) == 1
    assert kept.is_dir()  # a folder the user made stays


def test_a_resumed_eval_says_how_many_sessions_it_skipped(tmp_path, capsys):
    out = str(tmp_path / "r")
    argv = ["eval", "--agents", "random", "--tiers", "easy", "--modes", "healthy", "--out", out]
    assert main([*argv, "--seeds", "0", "--quiet"]) == 0
    assert "resumed" not in capsys.readouterr().err
    assert main([*argv, "--seeds", "0"]) == 0
    path = f"{out}/{ev.SESSIONS_FILE}"
    assert f"resumed: 1 session already in {path}, skipped" in capsys.readouterr().err.splitlines()
    assert main([*argv, "--seeds", "0", "--quiet"]) == 0
    assert "resumed" not in capsys.readouterr().err
    assert len(ev.load_sessions(out)) == 1


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """A session played at the terminal and recorded with ``play --out``."""
    out = tmp_path_factory.mktemp("played")
    args = build_parser().parse_args(["play", "--tier", "easy", "--json", "--out", str(out)])
    stdout, stderr = io.StringIO(), io.StringIO()
    saved, sys.stderr = sys.stderr, stderr
    try:
        rc = cmd_play(args, stdin=io.StringIO("info\nexperiment G001=BLOCK\nend\n"), stdout=stdout)
    finally:
        sys.stderr = saved
    return SimpleNamespace(out=out, rc=rc, stdout=stdout.getvalue(), stderr=stderr.getvalue())


def test_play_out_records_the_session_in_the_harness_format(played, capsys):
    assert played.rc == 0 and "recorded in" in played.stderr
    (record,) = ev.load_sessions(str(played.out))
    assert record["agent"] == "human" and record["world"] == "luca" and record["tier"] == "easy" and record["seed"] == 0
    assert [c["call"] for c in record["calls"]] == ["get_organism_info", "run_experiment", "end"]
    assert record["end_reason"] == "end" and "composite" in record["scores"]
    # The same session again under the same agent is refused before any call.
    args = build_parser().parse_args(["play", "--tier", "easy", "--json", "--out", str(played.out)])
    with pytest.raises(ev.ResultsError, match="already recorded"):
        cmd_play(args, stdin=io.StringIO("end\n"), stdout=io.StringIO())
    assert len(ev.load_sessions(str(played.out))) == 1


def test_play_out_leaves_a_session_not_ended_unrecorded(tmp_path, capsys):
    args = build_parser().parse_args(["play", "--tier", "easy", "--json", "--out", str(tmp_path), "--agent", "quitter"])
    assert cmd_play(args, stdin=io.StringIO("info\nquit\n"), stdout=io.StringIO()) == 0
    assert "not recorded" in capsys.readouterr().err
    assert not (tmp_path / ev.SESSIONS_FILE).exists() or not ev.load_sessions(str(tmp_path))


def test_show_and_report_read_a_played_session_and_show_says_what_it_does(played, capsys):
    assert main(["show", str(played.out), "--seed", "0", "--agent", "human"]) == 0
    captured = capsys.readouterr()
    png = captured.out.strip()
    assert png.endswith(".png") and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    (line,) = [x for x in captured.err.splitlines() if x.startswith("luca-gym show: drawing")]
    assert "agent human" in line and "seed 0" in line and png in line
    assert main(["report", str(played.out)]) == 0
    assert "human" in (played.out / "report.md").read_text()


def test_a_refused_fidelity_run_leaves_no_empty_folder(tmp_path, capsys):
    out = tmp_path / "fidelity"
    assert main(["fidelity", "--tables", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--tables" in err and "'5' unknown" in err  # the option, the value and what is allowed
    assert not out.exists()
