"""The code sandbox (issue 28, stage S4): the generic ``python`` tool
(:mod:`luca_gym.tools.sandbox`) as the biobank world offers it. Agent code
that tries to read a file outside its directory, import ``luca_gym``, open a
socket to a local port, write outside its directory, fork without bound,
allocate 4 GB against a 1 GB limit or run for ever is stopped with a clear
tool error; the session goes on, the working directory's files are kept and
nothing is lost. Both isolations run every check (bubblewrap and the
``unshare`` + ``setpriv`` fallback); a machine with neither refuses to start.
The python option reaches the session through every path generically
(:func:`luca_gym.tools.session.tool_options`): the harness's sweep, the tools
Gymnasium env, ``luca-gym eval --python`` and ``luca-gym mcp --python``; a
world that does not offer it refuses by name, and the paper harness's limits
hold on each path (30 turns, output truncated). Every world is of the
``tiny`` profile."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gymnasium as gym

from luca_gym import harness
from luca_gym.cli import main
from luca_gym.envs.tools import ToolsEnv
from luca_gym.seal import SECRET_ENV, make_seal
from luca_gym.tools.loop import ScriptedAgent
from luca_gym.tools.session import PYTHON_TURNS, tool_options
from luca_gym.tools import sandbox as sandbox_mod
from luca_gym.tools.sandbox import Limits, Sandbox, SandboxUnavailable
from luca_gym.worlds.biobank.release import TRUTH_WORDS
from luca_gym.worlds.biobank.tools import BiobankToolSession

SEAL = make_seal("a secret of the sandbox tests")
LIMITS = Limits(timeout_s=4.0, cpu_s=4)
SEED = 3
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 and not os.access("/usr/bin/bwrap", os.X_OK), reason="needs root or bubblewrap"),
    # Every sandbox runs as uid 65534, and RLIMIT_NPROC counts that uid's
    # processes host-wide: the fork-bomb test on one xdist worker would starve
    # a sandbox starting on the other. One worker runs them all, one at a time.
    pytest.mark.xdist_group("sandbox"),
]


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def session(request):
    # turns=None: the checks below make many more calls than the paper harness's 30 turns
    s = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, isolation=request.param, turns=None, profile="tiny")
    assert s.sandbox.isolation == request.param
    first = s.call("python", {"code": "open('notes.txt', 'w').write('kept')\nprint('written')"})
    assert first == {"output": "written\n", "truncated": False, "exit_status": 0, **s.status()}
    yield s
    s.sandbox.close()


def _run(session, code):
    before = (len(session.transcript), session.budget_left, dict(session.defined))
    answer = session.call("python", {"code": code})
    assert len(session.transcript) == before[0] + 1 and session.budget_left == before[1] and session.defined == before[2]
    assert not session.ended
    return answer


def _still_fine(session):
    """The session goes on: the next block runs and sees the first block's file."""
    assert _run(session, "print(open('notes.txt').read())")["output"] == "kept\n"


def test_reading_outside_the_directory_is_refused(session, tmp_path):
    secret = tmp_path / "oracle.json"
    secret.write_text("the drivers are PROT_0001")
    for path in (str(secret), "/etc/shadow", "/work/main/README.md", os.path.abspath(__file__), f"/proc/{os.getpid()}/environ",
                 "/proc/1/root/etc/shadow", "/proc/1/root/work/main/README.md"):  # pid 1: the namespace's init
        answer = _run(session, f"print(open({path!r}).read())")
        assert "stopped with an error" in answer["error"] and "PROT_0001" not in answer["output"]
        assert "FileNotFoundError" in answer["output"] or "PermissionError" in answer["output"]
    _still_fine(session)


def test_luca_gym_cannot_be_imported(session):
    answer = _run(session, "import luca_gym")
    assert "ModuleNotFoundError: No module named 'luca_gym'" in answer["output"] and "error" in answer
    # nor through the editable install's finder, installed by hand: the folder it points to is not there
    finder = ("import glob, importlib, sys\n"
              "for path in glob.glob('/opt/python-packages/*/__editable___*finder.py'):\n"
              "    sys.path.append(path.rsplit('/', 1)[0]); importlib.import_module(path.rsplit('/', 1)[1][:-3]).install()\n"
              "import luca_gym")
    assert "No module named 'luca_gym'" in _run(session, finder)["output"]
    _still_fine(session)


def test_no_socket_reaches_a_local_port(session):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        answer = _run(session, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
        assert "error" in answer and ("ConnectionRefusedError" in answer["output"] or "OSError" in answer["output"])
        with pytest.raises(socket.timeout):
            listener.accept()
    _still_fine(session)


def test_writing_outside_the_directory_is_refused(session, tmp_path):
    for path in (str(tmp_path / "planted.txt"), "/usr/planted.txt", "/analysis/release/planted.txt", "/planted.txt"):
        answer = _run(session, f"open({path!r}, 'w').write('x')")
        assert "stopped with an error" in answer["error"]
        assert "Read-only file system" in answer["output"] or "Permission denied" in answer["output"] \
            or "No such file" in answer["output"]
    assert not (tmp_path / "planted.txt").exists() and not os.path.exists("/usr/planted.txt")
    assert not os.path.exists(os.path.join(session.sandbox.release_dir, "planted.txt"))
    _still_fine(session)


def test_a_fork_bomb_is_bounded(session):
    answer = _run(session, "import os\nwhile True:\n    os.fork()")
    assert "error" in answer and "Resource temporarily unavailable" in answer["output"]
    _still_fine(session)


def test_memory_over_the_limit_is_refused(session):
    answer = _run(session, "block = bytearray(4 << 30)")
    assert "ran out of memory (at most 1 GiB per process)" in answer["error"] and "MemoryError" in answer["output"]
    _still_fine(session)


_DAEMON = ("import os, subprocess, time\n"
           "subprocess.Popen(['/usr/bin/sleep', '{marker}1'])\n"
           "if os.fork() == 0:\n"  # a daemon: its own session, its parent gone
           "    os.setsid()\n"
           "    if os.fork() == 0:\n"
           "        os.execv('/usr/bin/sleep', ['sleep', '{marker}2'])\n"
           "    os._exit(0)\n"
           "time.sleep(0.2)\n"
           "print('started', flush=True)\n")


def test_a_block_that_never_ends_is_killed_with_everything_it_started(session):
    marker = f"86399.{os.getpid()}{1 + (session.sandbox.isolation == 'unshare')}"  # sleeps no other process runs
    answer = _run(session, _DAEMON.format(marker=marker) + "while True:\n    time.sleep(0.05)")
    assert "wall-clock limit" in answer["error"] and answer["output"] == "started\n" and answer["exit_status"] is None
    assert not _running(marker)
    answer = _run(session, "while True:\n    pass")
    assert "CPU time" in answer["error"] or "wall-clock limit" in answer["error"]
    _still_fine(session)


def test_what_a_block_leaves_running_ends_with_it(session):
    marker = f"86398.{os.getpid()}{1 + (session.sandbox.isolation == 'unshare')}"
    answer = _run(session, _DAEMON.format(marker=marker))
    assert answer["output"] == "started\n" and answer["exit_status"] == 0 and not _running(marker)


def _running(marker: str) -> list[str]:
    """The host's processes whose command line ends with a marker (any of its numbered sleeps)."""
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid).endswith((f" {marker}1", f" {marker}2"))]


def test_the_process_check_sees_a_running_sleep():
    marker = f"86397.{os.getpid()}"
    process = subprocess.Popen(["/usr/bin/sleep", f"{marker}2"])
    try:
        while process.poll() is None and not _running(marker):  # until it has exec'd
            time.sleep(0.01)
        assert _running(marker) == [str(process.pid)]
    finally:
        process.kill()
        process.wait()


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_huge_output_is_truncated(session):
    answer = _run(session, "print('x' * 10_000_000)")
    assert answer["truncated"] and len(answer["output"]) < LIMITS.output_chars + 200 and "error" not in answer
    _still_fine(session)


@pytest.mark.parametrize("arguments, message", [
    ({"code": 5}, "code"), ({"code": ""}, "code"), ({"code": "x" * 40_000}, "code"), ({}, "code"),
    ({"code": "print(1)", "shell": True}, "shell"), ("not json", "JSON")])
def test_hostile_arguments_are_refused_and_cost_nothing(session, arguments, message):
    files = sorted(os.listdir(session.sandbox.work_dir))
    answer = session.call("python", arguments)
    assert message in answer["error"] and "output" not in answer and not session.ended
    assert sorted(os.listdir(session.sandbox.work_dir)) == files


def test_the_release_is_there_and_the_seed_is_not(session):
    answer = _run(session, "import os, sys, pandas as pd\n"
                           "print(len(pd.read_parquet('release/participants.parquet')), sorted(os.listdir('release')))\n"
                           "print(os.getcwd(), os.getuid(), sorted(os.environ.items()), sys.argv, open('/proc/self/mountinfo').read())")
    rows, listing = answer["output"].split(" ", 1)
    assert int(rows) == session.config.sizes.participants and "data_dictionary.json" in listing
    # the folder holds the release and nothing else: no oracle, no truth
    assert sorted(os.listdir(session.sandbox.release_dir)) == sorted(
        [f"{t}.parquet" for t in session.release.tables] + ["data_dictionary.json", "data_dictionary.md"])
    assert not any(word in name for name in os.listdir(session.sandbox.release_dir) for word in TRUTH_WORDS)
    assert str(session._world_seed) not in answer["output"] and session.instance_id not in answer["output"]
    assert "/analysis 65534" in answer["output"]
    assert "python" in session.system_prompt()


def test_code_runs_only_in_sealed_sessions():
    with pytest.raises(ValueError, match="must be sealed"):
        BiobankToolSession(SEED, python=True, profile="tiny")
    assert "python" not in BiobankToolSession(SEED, sealed=SEAL, profile="tiny").tool_names


def test_the_session_ends_and_removes_its_folder():
    s = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, profile="tiny")
    folder = s.sandbox.work_dir
    assert os.path.isdir(folder)
    assert s.call("end", {})["ended"]
    assert not os.path.exists(folder) and "ended" in s.call("python", {"code": "print(1)"})["error"]


def test_without_isolation_the_tool_refuses_to_start(monkeypatch):
    monkeypatch.setattr(sandbox_mod, "_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setattr(sandbox_mod, "_UNSHARE", "/nonexistent/unshare")
    with pytest.raises(SandboxUnavailable, match="no isolation works here.*never run without one"):
        BiobankToolSession(SEED, sealed=SEAL, python=True, profile="tiny")
    with pytest.raises(SandboxUnavailable, match="bubblewrap needs /nonexistent/bwrap"):
        Sandbox(isolation="bwrap")


def test_a_sandbox_that_fails_its_check_refuses_to_start():
    with pytest.raises(SandboxUnavailable, match="the host package json is importable"):
        Sandbox(hidden=("json",))
    with pytest.raises(ValueError, match="isolation"):
        Sandbox(isolation="none")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.one_of(st.text(max_size=200), st.sampled_from(["raise SystemExit(3)", "import os; os._exit(7)", "1/0", "x = (",
                                                              "print('\\x00\\udcff', end='')", "import sys; sys.stdout.close()"])))
def test_any_block_is_answered_and_the_session_goes_on(session, code):
    answer = session.call("python", {"code": code})
    assert ("error" in answer) != (answer.get("exit_status") == 0) and not session.ended
    assert set(answer) >= {"submissions_left", "budget_left"} and answer["budget_left"] == session.budget_left


# -- the python option through the generic paths --------------------------------------------
def test_the_session_ends_at_its_turn_limit_and_refusals_cost_no_turn():
    s = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, turns=3, profile="tiny")
    assert s.turn_limit == 3 and "allows 3 turns" in s.system_prompt() and s.status()["turns_left"] == 3
    assert s.call("python", {"code": "print(1)"})["turns_left"] == 2
    assert "code" in s.call("python", {"nope": 1})["error"] and s.turns == 1  # a malformed call costs nothing
    assert s.call("describe_release", {"table": "imaging"})["turns_left"] == 1  # any tool's call is a turn
    last = s.call("python", {"code": "print(2)"})
    assert last["output"] == "2\n" and last["ended"] and last["end_reason"] == "turn_limit" and last["turns_left"] == 0
    assert last["scores"]["total"] == 0.0 and s.truncated and s.end_reason == "turn_limit" and s.sandbox.closed
    assert "ended" in s.call("python", {"code": "print(3)"})["error"]
    with pytest.raises(ValueError, match="turns"):
        BiobankToolSession(SEED, sealed=SEAL, python=True, turns=0, profile="tiny")


def test_the_option_is_refused_by_name_where_it_cannot_be():
    dag = harness.plan_world("dag", ["random"], [0])
    with pytest.raises(ValueError, match="world 'dag' does not offer the python tool"):
        ToolsEnv("dag", python=True, sealed=SEAL)
    with pytest.raises(ValueError, match="world 'dag' does not offer the python tool"):
        harness.check_python(dag, True, SEAL)
    with pytest.raises(ValueError, match="must be sealed"):
        ToolsEnv("biobank", python=True, profile="tiny")
    with pytest.raises(ValueError, match="python: 'yes' not allowed"):
        tool_options(BiobankToolSession, python="yes", sealed=SEAL)
    assert tool_options(BiobankToolSession, python=False) == {} and harness.check_python(dag, False, None) is None


def test_the_text_env_offers_python_with_the_papers_limits():
    env = gym.make("luca_gym/BiobankTools-v0", python=True, sealed=SEAL, profile="tiny", limits=LIMITS)
    try:
        _, info = env.reset(options={"seed": SEED})
        session = env.unwrapped.session
        assert session.turn_limit == PYTHON_TURNS == 30 and "python" in [t["function"]["name"] for t in info["tools"]]
        _, reward, terminated, truncated, info = env.step('{"name": "python", "arguments": {"code": "print(\'x\' * 10**6)"}}')
        result = info["result"]
        assert result["truncated"] and len(result["output"]) < LIMITS.output_chars + 200 and not (terminated or truncated)
        assert result["turns_left"] == PYTHON_TURNS - 1
        for _ in range(PYTHON_TURNS - 2):
            assert not env.step('{"name": "describe_release", "arguments": {"table": "imaging"}}')[3]
        _, reward, terminated, truncated, info = env.step('{"name": "describe_release", "arguments": {}}')
        assert truncated and not terminated and info["end_reason"] == "turn_limit" and reward == 0.0
        assert session.sandbox.closed
        env.reset(options={"seed": SEED})
        second = env.unwrapped.session
    finally:
        env.close()
    assert second is not session and second.sandbox.closed  # close() ends the session's sandbox


def test_the_harness_runs_python_sessions_within_the_turn_limit(tmp_path):
    spec = harness.plan_world("biobank", ["null"], [SEED], profile="tiny")[0]
    script = [("python", {"code": "print(open('release/data_dictionary.md').read()[:20])"})] + \
        [("describe_release", {"table": "imaging"})] * (PYTHON_TURNS + 5)
    record = harness.run_tool_session(ScriptedAgent(script), spec, sealed=SEAL, python=True)
    assert record["python"] is True and record["end_reason"] == "turn_limit" and record["truncated"]
    assert len(record["calls"]) == PYTHON_TURNS and record["calls"][0]["call"] == "python"
    assert record["calls"][0]["result"]["exit_status"] == 0
    with pytest.raises(ValueError, match="must be sealed"):
        harness.run_tool_session(ScriptedAgent(script), spec, python=True)
    # a sweep: its lines say python, and a folder holds sessions with it or without it
    out = str(tmp_path / "results")
    os.makedirs(out)
    harness.sweep([spec], out, lambda name: harness.make_runner(name, world="biobank"), sealed=SEAL, python=True)
    (line,) = harness.load_sessions(out)
    assert line["python"] is True and [c["call"] for c in line["calls"]] == ["submit"]
    other = harness.plan_world("biobank", ["null"], [SEED + 1], profile="tiny")
    with pytest.raises(harness.ResultsError, match="python"):
        harness.sweep(other, out, lambda name: harness.make_runner(name, world="biobank"), sealed=SEAL)


def test_the_command_line_passes_python_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SECRET_ENV, "a secret of the sandbox tests, from the environment")
    out = str(tmp_path / "eval")
    assert main(["eval", "--world", "biobank", "--agents", "null", "--seeds", str(SEED), "--set", "profile=tiny", "--python",
                 "--sealed", "--out", out, "--quiet"]) == 0
    (line,) = harness.load_sessions(out)
    assert line["python"] is True and line["agent"] == "null"
    capsys.readouterr()
    assert main(["eval", "--world", "biobank", "--agents", "null", "--seeds", str(SEED), "--set", "profile=tiny", "--python",
                 "--out", str(tmp_path / "unsealed")]) == 2
    assert "must be sealed" in capsys.readouterr().err and not os.path.exists(tmp_path / "unsealed")
    assert main(["eval", "--world", "dag", "--agents", "random", "--seeds", "0", "--python", "--sealed",
                 "--out", str(tmp_path / "dag")]) == 2
    assert "world 'dag' does not offer the python tool" in capsys.readouterr().err
    served = {}
    monkeypatch.setattr("luca_gym.tools.mcp_server.serve", lambda session, **kw: served.update(session=session, **kw))
    assert main(["mcp", "--world", "biobank", "--seed", str(SEED), "--set", "profile=tiny", "--python", "--sealed"]) == 0
    session = served["session"]
    try:
        assert session.python and session.turn_limit == PYTHON_TURNS and "python" in session.tool_names
    finally:
        session.close()
    assert main(["mcp", "--world", "luca", "--python", "--sealed"]) == 2
    assert "world 'luca' does not offer the python tool" in capsys.readouterr().err
    assert main(["mcp", "--world", "biobank", "--set", "profile=tiny", "--python"]) == 2
    assert "must be sealed" in capsys.readouterr().err


def test_the_mcp_server_serves_python_within_the_limits_and_records_it(tmp_path):
    import anyio
    from mcp import Client

    from luca_gym.tools import mcp_server

    session = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, turns=3, profile="tiny")
    recorder = mcp_server.SessionRecorder(session, str(tmp_path), agent="mcp:test")
    recorder.check()
    server = mcp_server.build_server(session, on_call=recorder)

    async def drive():
        with anyio.fail_after(240):
            async with Client(server, mode="legacy") as client:
                assert "python" in [t.name for t in (await client.list_tools()).tools]
                return [await client.call_tool("python", {"code": "print('x' * 10**6)"}),
                        await client.call_tool("describe_release", {"table": "imaging"}),
                        await client.call_tool("describe_release", {}),
                        await client.call_tool("python", {"code": "print(1)"})]

    big, _, last, refused = [r.structured_content for r in anyio.run(drive)]
    assert big["truncated"] and len(big["output"]) < LIMITS.output_chars + 200
    assert last["ended"] and last["end_reason"] == "turn_limit" and "ended" in refused["error"]
    (record,) = harness.load_sessions(str(tmp_path))
    assert record["python"] is True and record["end_reason"] == "turn_limit" and record["truncated"] is True
    assert [c["call"] for c in record["calls"]] == ["python", "describe_release", "describe_release"]  # recorded as it ended
