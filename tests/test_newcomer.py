"""A newcomer's first hour: the compilation cache, the compile notice, the
CLI's help, version and one-line errors (provider and missing-extra errors
included), and the sweep's progress: a bar on a terminal, lines elsewhere,
moving within a session."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from luca_gym.worlds.luca.baselines import make_policy
from luca_gym import compile_cache
from luca_gym import harness as ev
from luca_gym.cli import build_parser, main
from luca_gym.cli.eval import sweep_progress
from luca_gym.cli.progress import Progress
from luca_gym.llm import providers
from luca_gym.worlds.luca.evaluation import luca_spec


def run_python(code: str, env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", compile_cache.ENV, "XDG_CACHE_HOME")}
    env.update(extra, JAX_PLATFORMS="cpu")
    return env


SHOW_CACHE = "import luca_gym, jax; print(jax.config.jax_compilation_cache_dir)"


def test_importing_the_package_turns_the_cache_on_in_a_per_user_folder(tmp_path):
    out = run_python(SHOW_CACHE, clean_env(XDG_CACHE_HOME=str(tmp_path)))
    assert out == str(tmp_path / "luca-gym" / "jax") and (tmp_path / "luca-gym" / "jax").is_dir()


def test_a_library_asking_whether_jax_is_there_leaves_the_cache_on(tmp_path):
    """Probing for JAX (``importlib.util.find_spec``, as libraries do to see
    what is installed) before importing it must not lose the set-up."""
    probe = "import importlib.util, luca_gym; importlib.util.find_spec('jax'); " + SHOW_CACHE
    assert run_python(probe, clean_env(XDG_CACHE_HOME=str(tmp_path))) == str(tmp_path / "luca-gym" / "jax")


def test_the_cache_can_be_moved_or_turned_off_and_jax_own_setting_wins(tmp_path):
    assert run_python(SHOW_CACHE, clean_env(LUCA_GYM_CACHE_DIR=str(tmp_path / "c"))) == str(tmp_path / "c")
    assert run_python(SHOW_CACHE, clean_env(LUCA_GYM_CACHE_DIR="off", XDG_CACHE_HOME=str(tmp_path))) == "None"
    assert not (tmp_path / "luca-gym").exists()
    # JAX reads its own variable; the package leaves it alone.
    out = run_python("import luca_gym; from luca_gym import compile_cache; print(compile_cache.cache_dir())",
                     clean_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "j"), LUCA_GYM_CACHE_DIR=str(tmp_path / "c")))
    assert out == str(tmp_path / "j")


def test_the_compile_notice_speaks_only_when_the_work_is_slow():
    quick, slow = io.StringIO(), io.StringIO()
    with compile_cache.compile_notice("luca-gym info", after_s=0.2, stream=quick):
        pass
    with compile_cache.compile_notice("luca-gym info", after_s=0.05, stream=slow):
        time.sleep(0.3)
    assert quick.getvalue() == ""
    line = slow.getvalue()
    assert line.count("\n") == 1 and line.startswith("luca-gym info: compiling") and "first run only" in line


def test_the_process_lock_makes_a_second_process_wait(tmp_path):
    """Of two processes needing one program, the second waits while the first
    holds the program's lock (so it can load the compiled program from the
    cache instead of compiling it too)."""
    import threading

    lock, release = tmp_path / "program.lock", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "from luca_gym.compile_cache import process_lock\n"
        f"with process_lock({str(lock)!r}):\n"
        "    print('held', flush=True)\n"
        f"    while not os.path.exists({str(release)!r}): time.sleep(0.02)\n")],
        stdout=subprocess.PIPE, text=True, env=clean_env(LUCA_GYM_CACHE_DIR="off"))
    try:
        assert holder.stdout.readline().strip() == "held"
        entered = threading.Event()

        def second():
            with compile_cache.process_lock(str(lock)):
                entered.set()

        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        assert not entered.wait(0.5), "the lock let a second holder in"
        release.touch()
        assert entered.wait(30), "the lock was not handed on"
        assert holder.wait(30) == 0
    finally:
        release.touch()
        holder.kill()


def test_version_and_help_show_choices_and_defaults(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip().startswith("luca-gym 0.")
    for command in ("info", "play", "mcp", "train", "eval"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        if command != "eval":
            assert "{easy,medium,hard}" in text and "{healthy,disease}" in text
        assert "(default:" in text, command
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in ("eval", "train", "report", "show", "fidelity", "info", "play", "mcp"))


@pytest.mark.parametrize("argv,flag", [(["info", "--n-genes", "3"], "--n-genes"), (["info", "--tier", "extreme"], "--tier"),
                                       (["play", "--mode", "sick"], "--mode"), (["info", "--seed", "-1"], "--seed")])
def test_errors_name_the_flag_the_user_typed_in_one_line(argv, flag, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"luca-gym {argv[0]}: error: {flag}:"), err


def test_a_missing_llm_extra_is_one_line_with_the_install_hint(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    argv = ["eval", "--agents", "openai:some-model", "--tiers", "easy", "--modes", "healthy", "--seeds", "0",
            "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "luca-gym[llm]"' in err[0] and "openai" in err[0]


class APIConnectionError(Exception):
    """Shaped like the SDK's: the module decides that it is a provider error."""


APIConnectionError.__module__ = "openai"


def test_an_unreachable_provider_is_one_line_and_completed_sessions_are_kept(monkeypatch, tmp_path, capsys):
    class Unreachable:
        def __call__(self, messages, tools):
            with providers.provider_errors("openai:some-model at http://127.0.0.1:9/v1"):
                raise APIConnectionError("Connection error.\nsecond line of a long traceback text")

    monkeypatch.setattr(ev, "make_runner", lambda name, base_url=None, world="luca", **_: Unreachable() if name.startswith("openai:") else make_policy(name))
    argv = ["eval", "--agents", "random,openai:some-model", "--tiers", "easy", "--modes", "healthy", "--seeds", "0",
            "--out", str(tmp_path), "--quiet", "--retries", "2", "--backoff", "0"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "openai:some-model at http://127.0.0.1:9/v1: APIConnectionError: Connection error." in err[0]
    assert "(gave up after 3 attempts)" in err[0]  # a lost connection is retried
    assert "rerun resumes" in err[0] and "second line" not in err[0]
    assert [r["agent"] for r in ev.load_sessions(str(tmp_path))] == ["random"]  # what finished is kept


def test_other_exceptions_are_not_disguised_as_provider_errors():
    with pytest.raises(KeyError):
        with providers.provider_errors("openai:m"):
            raise KeyError("a bug of ours")


def test_the_progress_bar_counts_and_estimates(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(stream, "isatty", lambda: True, raising=False)
    progress = sweep_progress(False)
    spec = luca_spec("random", "easy", "healthy", 20, 0)
    for i in range(3):
        progress(i, 3, spec)
        progress.step(spec, 1)
        time.sleep(0.25)  # the bar redraws a move at most five times a second
        progress.step(spec, 5)
    progress(3, 3, None)
    text = stream.getvalue()
    assert "3/3" in text and "session" in text and "random easy healthy N=20 seed 0" in text and "done" in text
    assert "seed 0, call 5" in text  # the bar moves within a session


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_off_a_terminal_progress_is_lines_at_least_every_few_seconds():
    stream, clock = io.StringIO(), Clock()
    progress = Progress(stream=stream, every=5.0, clock=clock, heartbeat=False)
    spec = luca_spec("random", "easy", "healthy", 20, 0)
    progress(0, 540, spec)
    assert stream.getvalue().startswith("eval: 0/540 sessions; 0 s; running: random luca")
    for i in range(1, 12):  # twelve quick sessions in 3.3 s: no line between the first and the timer's
        clock.now += 0.3
        progress(i, 540, spec)
    assert stream.getvalue().count("\n") == 1
    clock.now += 2.0
    progress.tick()  # the timer, 5 s after the first line
    assert stream.getvalue().splitlines()[-1].startswith("eval: 11/540 sessions; 5 s; running:")
    progress(12, 540, spec)
    for count in range(1, 40):  # one long session: its calls show it moving
        clock.now += 0.5
        progress.step(spec, count)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5 and lines[-1].startswith("eval: 12/540 sessions; 20 s; running:")  # one line each 5 s
    assert lines[-1].endswith(", call 30 (15 s)")
    progress(540, 540, None)
    assert stream.getvalue().splitlines()[-1] == "eval: 540/540 sessions, done in 24 s"
    progress.step(spec, 41)
    progress.tick()  # after the end: nothing more
    assert len(stream.getvalue().splitlines()) == 6


def test_the_first_sessions_line_says_it_compiles():
    stream, clock = io.StringIO(), Clock()
    progress = Progress(stream=stream, every=5.0, clock=clock, heartbeat=False)
    progress(0, 3, luca_spec("random", "easy", "healthy", 20, 0))
    clock.now += 5.0
    progress.tick()
    assert "(5 s; compiling: first run only" in stream.getvalue().splitlines()[-1]


def test_the_timer_beats_without_any_session_ending():
    stream = io.StringIO()
    progress = Progress(stream=stream, every=0.05)
    progress(0, 2, luca_spec("random", "easy", "healthy", 20, 0))
    deadline = time.monotonic() + 30
    while stream.getvalue().count("\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    progress.close()
    assert stream.getvalue().count("eval: 0/2 sessions") >= 3


def test_quiet_prints_nothing():
    stream = io.StringIO()
    progress = Progress(True, stream=stream)
    progress(0, 2, luca_spec("random", "easy", "healthy", 20, 0))
    progress.step(None, 1)
    progress(2, 2, None)
    assert stream.getvalue() == ""


def test_the_sweep_reports_each_call_of_a_session(tmp_path):
    counts = []

    class Recorder:
        def __call__(self, i, total, spec):
            pass

        def step(self, spec, count, unit):
            counts.append((spec.seed, count, unit))

    spec = luca_spec("causal-sweep", "easy", "healthy", 20, 0)
    ev.sweep([spec], str(tmp_path), progress=Recorder())
    calls = len(ev.load_sessions(str(tmp_path))[0]["calls"])
    assert counts == [(0, k, "call") for k in range(1, calls + 1)] and calls > 5


def test_the_sweep_reports_each_turn_of_a_tool_agent(tmp_path):
    from luca_gym import worlds

    turns = []

    class Recorder:
        def __call__(self, i, total, spec):
            pass

        def step(self, spec, count, unit):
            turns.append((count, unit))

    specs = ev.plan_world(worlds.get("equation"), ["systematic"], [0])
    ev.sweep(specs, str(tmp_path), policy_factory=lambda name: ev.make_runner(name, world="equation"), progress=Recorder())
    record = ev.load_sessions(str(tmp_path))[0]
    assistant = [m for m in record["messages"] if m["role"] == "assistant"]
    assert turns == [(k, "turn") for k in range(1, len(assistant) + 1)] and len(turns) > 1


@pytest.mark.slow  # another process: a fresh interpreter imports JAX and compiles dag's session (10-30 s)
def test_eval_through_a_pipe_prints_progress_lines(tmp_path):
    """`luca-gym eval` with stderr a pipe (as under `| tee` or in CI): the
    first line and the last say the count of sessions done out of the total."""
    out = tmp_path / "dag"
    done = subprocess.run([sys.executable, "-m", "luca_gym.cli", "eval", "--world", "dag", "--agents", "systematic",
                           "--seeds", "0-1", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("eval: ")]
    assert lines[0].startswith("eval: 0/2 sessions; ") and "running: systematic dag" in lines[0]
    assert lines[-1].startswith("eval: 2/2 sessions, done in ")


def test_a_missing_required_option_is_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["train"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "luca-gym train: error: the following arguments are required: --out (see luca-gym train --help)"]


def test_a_graph_world_run_reads_plainly(tmp_path, capsys):
    """One seed is "1 seed"; the table says the settings every row shares
    once, above it; `show` on a world without a viewer points to
    --transcript, which prints the session ending in a newline; `report`
    says what it computes and reuses random's own sessions as its floor."""
    out = str(tmp_path / "dag")
    assert main(["eval", "--world", "dag", "--agents", "systematic,random", "--n-nodes", "3", "--seeds", "0", "--out", out,
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "(1 seed; mean" in printed
    table = printed.split("(1 seed; mean ± population std)\n", 1)[1]
    assert table.startswith("every row: n_nodes=3, n_states=5, edge_density=0.3,")
    assert "\n| agent | success |\n| --- | --- |\n| systematic | 1.000 ± 0.000 |" in table
    assert main(["show", out, "--seed", "0", "--agent", "random"]) == 2
    err = capsys.readouterr().err
    assert "has no viewer" in err and "--transcript" in err and len(err.splitlines()) == 1
    assert main(["show", out, "--seed", "0", "--agent", "random", "--transcript"]) == 0
    assert capsys.readouterr().out.endswith("\n")
    assert main(["report", out]) == 0
    said = capsys.readouterr().err
    assert "report: dag: 2 sessions: tables and figures" in said
    assert ("report: dag (3 nodes, 5 states): computing the floors on 1 seed "
            "(the empty matrix; random: its sessions here)") in said
    # what the report reused is what it would compute: the floor plays random as the harness does
    from luca_gym.worlds.graphs.config import DagConfig
    from luca_gym.worlds.graphs.report import floor_scores

    computed = floor_scores(DagConfig(n_nodes=3), [0])["random"]
    played = next(r for r in ev.load_sessions(out) if r["agent"] == "random")["scores"]
    shared = set(computed) & set(played)
    assert {"success", "iterations", "edge_f1"} <= shared
    assert {k: float(computed[k][0]) for k in shared} == pytest.approx({k: played[k] for k in shared})


def test_the_equation_report_reuses_random_and_it_is_what_the_floor_computes(tmp_path, capsys):
    from luca_gym.worlds.equation.report import _config_of, floor_scores

    out = str(tmp_path / "equation")
    assert main(["eval", "--world", "equation", "--agents", "random", "--seeds", "0", "--out", out, "--quiet"]) == 0
    assert main(["report", out]) == 0
    assert "its sessions here" in capsys.readouterr().err
    played = ev.load_sessions(out)[0]
    computed = floor_scores(_config_of(played), [0])["random"]
    assert set(computed) == {"success", "iterations"}
    assert {k: float(v[0]) for k, v in computed.items()} == pytest.approx({k: played["scores"][k] for k in computed})


def test_the_audit_says_why_the_papers_rules_ignore_their_evidence(monkeypatch):
    from luca_gym.results import audit

    def audited(record):
        return {"world": "luca", "agent": record["agent"], "seed": 0, "hypotheses": "malfunctions", "experiments": 3,
                "ruled_out_per_experiment": 0.1, "claimed": True, "consistent": False, "evidence_ignored": 1}

    monkeypatch.setattr(audit, "audit_record", audited)
    text = audit.section([{"world": "luca", "agent": agent, "seed": 0} for agent in ("causal-sweep", "random")])
    assert "\n\n*causal-sweep* (luca): its diagnosis is the paper's rule, not a reading of the evidence" in text
    assert "*random*" not in text
    assert set(audit.audit_notes("luca")) == {"causal-sweep", "heuristic"} and audit.audit_notes("dag") == {}


def test_report_and_show_are_in_the_parser():
    args = build_parser().parse_args(["show", "results", "--seed", "0", "--agent", "random"])
    assert args.command == "show" and args.seed == 0


def test_the_stored_generator_program_gives_bitwise_the_same_organisms(tmp_path, monkeypatch):
    """The generator's traced attempt is stored with jax.export so a warm start
    skips tracing; stored, reloaded and traced afresh must agree bit for bit."""
    import numpy as np

    from luca_gym.worlds.luca import generator as world
    from luca_gym.worlds.luca.generator import organisms as generator

    def digest(arrays) -> str:
        import hashlib

        h = hashlib.sha256()
        for leaf in __import__("jax").tree_util.tree_leaves(arrays):
            h.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
        return h.hexdigest()

    seeds = np.arange(3)
    monkeypatch.setattr(compile_cache, "export_dir", lambda: None)
    plain = digest(world.generate(seeds, "medium", 20, "disease"))
    monkeypatch.setattr(compile_cache, "export_dir", lambda: str(tmp_path))
    monkeypatch.setattr(generator, "_EXPORTS", {})
    stored = digest(world.generate(seeds, "medium", 20, "disease"))
    files = list(tmp_path.glob("attempt-*.jaxexport"))
    assert len(files) == 1 and files[0].stat().st_size > 1000
    assert (tmp_path / f"{files[0].name}.lock").exists()  # the first compile ran under the program's process lock
    monkeypatch.setattr(generator, "_EXPORTS", {})  # a new process: load what was stored
    loaded = digest(world.generate(seeds, "medium", 20, "disease"))
    assert plain == stored == loaded
    files[0].write_bytes(b"damaged")  # a damaged entry is rebuilt, not trusted
    # The same program stored by another source (an older checkout): removed, with its lock, when this one is stored.
    stale = tmp_path / f"{files[0].name.rsplit('-', 1)[0]}-{'0' * 24}.jaxexport"
    stale.write_bytes(b"an older program")
    (tmp_path / f"{stale.name}.lock").write_bytes(b"")
    monkeypatch.setattr(generator, "_EXPORTS", {})
    assert digest(world.generate(seeds, "medium", 20, "disease")) == plain
    assert sorted(p.name for p in tmp_path.iterdir()) == [files[0].name, f"{files[0].name}.lock"]
