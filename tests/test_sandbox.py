"""The code sandbox: the generic ``python`` tool
(:mod:`luca_gym.sandbox`) as the biobank world offers it. Agent code
that tries to read a file outside its directory, import ``luca_gym``, open a
socket to a local port, write outside its directory, fork without bound,
allocate 4 GB against the session's 2 GB or run for ever is stopped with a
clear tool error; the session goes on, the working directory's files are kept
and nothing is lost. Both isolations run every check (bubblewrap and the
``unshare`` + ``setpriv`` fallback); a machine with neither refuses to start.
The session's own limits (its cgroup's memory and processes, a size-capped
``/tmp`` and working folder) hold under bounded attacks with the default
limits, and leave a concurrent session running; where the host has no
cgroup, the fallback says so. ``--sandbox-memory`` and ``--sandbox-time``
reach the sandbox from the command line and the Gymnasium env.
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
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gymnasium as gym

from luca_gym import harness
from luca_gym.cli import main
from luca_gym.envs.tools import ToolsEnv
from luca_gym.seal import SECRET_ENV, make_seal
from luca_gym.llm.loop import ScriptedAgent
from luca_gym.tools.session import PYTHON_TURNS, tool_options
from luca_gym import sandbox as sandbox_mod
from luca_gym.sandbox import cgroups as sandbox_cgroups
from luca_gym.sandbox import isolation as sandbox_isolation
from luca_gym.sandbox import mounts as sandbox_mounts
from luca_gym.sandbox import session as sandbox_session
from luca_gym.sandbox import Limits, Sandbox, SandboxUnavailable
from luca_gym.worlds.biobank.release import TRUTH_WORDS
from luca_gym.worlds.biobank.tools import BiobankToolSession

SEAL = make_seal("a secret of the sandbox tests")
LIMITS = Limits(timeout_s=4.0, cpu_s=4)
SEED = 3
# a call every python session has that changes nothing (the budget is $0, so it is refused) but is a turn
EXPERIMENT = '{"name": "experiment", "arguments": {"protein": "PROT_0001", "kind": "knockdown"}}'
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 and not os.access("/usr/bin/bwrap", os.X_OK), reason="needs root or bubblewrap"),
    # Every sandbox runs as uid 65534; where no pids cgroup holds, RLIMIT_NPROC
    # counts that uid's processes host-wide, and the fork-bomb test on one
    # xdist worker would starve a sandbox starting on the other; the attacks
    # also take memory and disk. One worker runs them all, one at a time.
    pytest.mark.xdist_group("sandbox"),
]


REQUIRE_BWRAP = os.environ.get("LUCA_GYM_REQUIRE_BWRAP") == "1"  # CI sets it: there a missing bubblewrap is a failure


def needs_isolation(isolation: str) -> None:
    """Skip a bwrap case where bubblewrap is not installed, with the reason in the summary (fail instead under
    LUCA_GYM_REQUIRE_BWRAP=1, so CI keeps testing the real path)."""
    if isolation == "bwrap" and not os.access(sandbox_isolation._BWRAP, os.X_OK):
        if REQUIRE_BWRAP:
            pytest.fail(f"LUCA_GYM_REQUIRE_BWRAP=1 and no bubblewrap at {sandbox_isolation._BWRAP}")
        pytest.skip(f"bubblewrap is not installed ({sandbox_isolation._BWRAP}); `apt-get install bubblewrap` to test the bwrap sandbox")


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def session(request):
    needs_isolation(request.param)
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
    assert f"ran out of memory (at most {session.sandbox.memory_words()})" in answer["error"]
    assert "MemoryError" in answer["output"] and "2 GiB" in answer["error"]
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
    monkeypatch.setattr(sandbox_isolation, "_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setattr(sandbox_isolation, "_UNSHARE", "/nonexistent/unshare")
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
    assert s.call("experiment", {"protein": "PROT_0001", "kind": "knockdown"})["turns_left"] == 1  # any call, refused too
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
            assert not env.step(EXPERIMENT)[3]
        _, reward, terminated, truncated, info = env.step(EXPERIMENT)
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
        [("experiment", {"protein": "PROT_0001", "kind": "knockdown"})] * (PYTHON_TURNS + 5)
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
    monkeypatch.setattr("luca_gym.mcp.server.serve", lambda session, **kw: served.update(session=session, **kw))
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

    from luca_gym.mcp import server as mcp_server

    session = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, turns=3, profile="tiny")
    recorder = mcp_server.SessionRecorder(session, str(tmp_path), agent="mcp:test")
    recorder.check()
    server = mcp_server.build_server(session, on_call=recorder)

    async def drive():
        with anyio.fail_after(240):
            async with Client(server, mode="legacy") as client:
                assert "python" in [t.name for t in (await client.list_tools()).tools]
                return [await client.call_tool("python", {"code": "print('x' * 10**6)"}),
                        await client.call_tool("experiment", {"protein": "PROT_0001", "kind": "knockdown"}),
                        await client.call_tool("experiment", {"protein": "PROT_0002", "kind": "knockdown"}),
                        await client.call_tool("python", {"code": "print(1)"})]

    big, _, last, refused = [r.structured_content for r in anyio.run(drive)]
    assert big["truncated"] and len(big["output"]) < LIMITS.output_chars + 200
    assert last["ended"] and last["end_reason"] == "turn_limit" and "ended" in refused["error"]
    (record,) = harness.load_sessions(str(tmp_path))
    assert record["python"] is True and record["end_reason"] == "turn_limit" and record["truncated"] is True
    assert [c["call"] for c in record["calls"]] == ["python", "experiment", "experiment"]  # recorded as it ended


# -- the session's limits: bounded attacks under the default limits ---------------------------
ATTACK_LIMITS = Limits(timeout_s=60.0)  # the defaults (2 GiB, 128 processes, /tmp 256 MiB, folder 1 GiB), time to fail


def _sandbox(isolation, limits=ATTACK_LIMITS) -> Sandbox:
    needs_isolation(isolation)
    try:
        return Sandbox(limits, isolation)
    except SandboxUnavailable as exc:
        pytest.skip(f"no {isolation} sandbox here: {exc}")


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def attacked(request):
    """A sandbox under the default limits, and a neighbour: another session's, open at the same time."""
    if request.param == "unshare" and os.geteuid() != 0:
        pytest.skip("the unshare fallback needs root")
    needs_isolation(request.param)
    s, neighbour = _sandbox(request.param), _sandbox(request.param)
    yield s, neighbour
    s.close()
    neighbour.close()


def _needs(sandbox, limit):
    if not sandbox.enforced[limit]:
        pytest.skip(f"{limit} does not hold on this host ({sandbox.unenforced_why[limit]}); the fallback is tested below")


def _neighbour_fine(neighbour):
    assert neighbour.run("print(sum(range(10)))") == {"output": "45\n", "truncated": False, "exit_status": 0,
                                                       "timed_out": False, "limit": None}


_SIX = ("import subprocess, sys\n"
        "code = \"import time; block = bytearray(1000 << 20); print('held', flush=True); time.sleep(2)\"\n"
        "children = [subprocess.Popen([sys.executable, '-I', '-S', '-c', code]) for _ in range(6)]\n"
        "print('exits', sorted(c.wait() for c in children))\n")


@pytest.mark.slow
def test_six_processes_of_a_gigabyte_share_the_sessions_memory(attacked):
    s, neighbour = attacked
    _needs(s, "session_memory")
    answer = s.run(_SIX)
    # three of them would hold 3 GB: the session's 2 GiB lets two at most hold theirs, the cgroup kills the rest
    assert answer["limit"] == "memory" and not answer["timed_out"] and answer["output"].count("held") <= 2
    assert "-9" in answer["output"].split("exits", 1)[1]
    peak = s.usage()["memory_peak_bytes"]  # None where the cgroup does not count it (cgroup v2 before Linux 5.19)
    assert peak is None or peak <= ATTACK_LIMITS.session_memory_bytes
    _neighbour_fine(neighbour)
    assert s.run("print('after')")["output"] == "after\n"


_FLOOD = ("import errno, os\n"
          "written, chunk = 0, b'x' * (1 << 20)\n"
          "try:\n"
          "    for i in range({files}):\n"  # files of 64 MiB: under the largest file a block may write
          "        with open(f'{folder}/flood{{i}}', 'wb') as f:\n"
          "            for _ in range(64):\n"
          "                f.write(chunk)\n"
          "                written += 1\n"
          "except OSError as exc:\n"
          "    print('stopped', errno.errorcode[exc.errno], written)\n")


def _stopped(answer) -> tuple[str, int]:
    assert answer["exit_status"] == 0 and answer["output"].startswith("stopped"), answer
    _, code, mib = answer["output"].split()
    return code, int(mib)


def test_a_tmp_flood_is_capped(attacked):
    s, neighbour = attacked
    code, mib = _stopped(s.run(_FLOOD.format(files=16, folder="/tmp")))  # up to 1 GiB asked
    assert code == "ENOSPC" and mib <= ATTACK_LIMITS.tmp_bytes >> 20
    assert s.run("import os; print(os.listdir('/tmp'))")["output"] == "[]\n"  # each block has its own /tmp
    if s.isolation == "bwrap":  # and its own /dev/shm, capped alike
        code, mib = _stopped(s.run(_FLOOD.format(files=16, folder="/dev/shm")))
        assert code == "ENOSPC" and mib <= ATTACK_LIMITS.tmp_bytes >> 20
    _neighbour_fine(neighbour)


@pytest.mark.slow
def test_a_disk_flood_in_the_working_folder_is_capped_and_kept(attacked):
    s, neighbour = attacked
    _needs(s, "workdir")
    code, mib = _stopped(s.run(_FLOOD.format(files=32, folder="/analysis")))  # up to 2 GiB asked
    assert code == "ENOSPC" and ATTACK_LIMITS.workdir_bytes >> 21 < mib <= ATTACK_LIMITS.workdir_bytes >> 20
    image = os.path.join(os.path.dirname(s.work_dir), "work.img")
    if s.enforced["workdir"] == "ext4 image":  # the host's disk holds at most the image's size
        assert os.stat(image).st_blocks * 512 <= ATTACK_LIMITS.workdir_bytes
    # the files are the session's: kept between blocks, and removing them makes room again
    kept = s.run("import glob, os\nfiles = glob.glob('flood*')\nprint(len(files))\nfor f in files: os.remove(f)\n"
                 "open('after', 'wb').write(b'x' * (1 << 20)); print(os.path.getsize('after'))")
    assert kept["output"].split() == [str(-(-mib // 64)), str(1 << 20)]
    _neighbour_fine(neighbour)


_FORKS = ("import os, time\n"
          "children, refused = [], 0\n"
          "for _ in range(200):\n"
          "    try:\n"
          "        pid = os.fork()\n"
          "    except OSError:\n"
          "        refused += 1\n"
          "        continue\n"
          "    if pid == 0:\n"
          "        time.sleep(4)\n"
          "        os._exit(0)\n"
          "    children.append(pid)\n"
          "print('forked', len(children), 'refused', refused, flush=True)\n"
          "for pid in children:\n"
          "    os.waitpid(pid, 0)\n")


def test_two_hundred_forks_are_capped_per_session_and_a_neighbour_still_runs(attacked):
    s, neighbour = attacked
    _needs(s, "session_processes")
    answers = []
    attack = threading.Thread(target=lambda: answers.append(s.run(_FORKS)))
    attack.start()
    try:
        deadline = time.monotonic() + 30
        while (s.usage()["processes"] or 0) < ATTACK_LIMITS.session_processes - 8 and time.monotonic() < deadline:
            time.sleep(0.05)  # until the attack holds (nearly) all of its session's processes
        assert ATTACK_LIMITS.session_processes - 8 <= s.usage()["processes"] <= ATTACK_LIMITS.session_processes
        _neighbour_fine(neighbour)  # while the attack holds them: another session's block runs
    finally:
        attack.join(60)
    (answer,) = answers
    _, forked, _, refused = answer["output"].split()
    assert answer["exit_status"] == 0 and 0 < int(forked) < ATTACK_LIMITS.session_processes and int(refused) > 0
    assert int(forked) + int(refused) == 200


def test_one_allocation_of_4_gb_is_refused(attacked):
    s, neighbour = attacked
    answer = s.run("block = bytearray(4 << 30)")
    assert answer["limit"] == "memory" and "MemoryError" in answer["output"]
    _neighbour_fine(neighbour)


def test_the_limits_are_described_as_they_hold(attacked):
    s, _ = attacked
    text = s.describe()
    for words in ("60 s wall clock", "120 s CPU per process", "/tmp up to 256 MiB"):
        assert words in text
    if s.enforced["session_memory"]:
        assert "2 GiB for all the session's processes together" in text and s.enforced["session_memory"].startswith("cgroup v")
    if s.enforced["session_processes"]:
        assert "128 processes and threads at once" in text
    if s.enforced["workdir"]:
        assert "the working folder up to 1 GiB" in text
    listing = s.run("import os; print(sorted(os.listdir('.')), os.statvfs('.').f_blocks * os.statvfs('.').f_frsize)")
    names, size = listing["output"].rsplit(" ", 1)
    assert "lost+found" not in names and (not s.enforced["workdir"] or int(size) <= ATTACK_LIMITS.workdir_bytes)


@pytest.mark.parametrize("isolation", ["bwrap", "unshare"])
def test_closing_removes_the_cgroup_the_mount_and_the_folder(isolation):
    if isolation == "unshare" and os.geteuid() != 0:
        pytest.skip("the unshare fallback needs root")
    s = _sandbox(isolation, LIMITS)
    folders, mount, home = list(s._cgroup.folders), s.work_dir, os.path.dirname(s.work_dir)
    assert all(os.path.isdir(f) for f in folders) and (mount in _mounts()) == bool(s.enforced["workdir"])
    s.close()
    assert s.closed and not any(os.path.exists(f) for f in folders) and mount not in _mounts() and not os.path.exists(home)


def _mounts() -> set[str]:
    with open("/proc/self/mountinfo") as f:
        return {line.split()[4] for line in f}


def test_without_cgroups_or_a_loop_device_the_fallback_holds_and_says_so(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("the fallback's tmpfs working folder needs root")
    monkeypatch.setattr(sandbox_cgroups, "_cgroup_mounts", lambda: [])  # a host without cgroups
    monkeypatch.setattr(sandbox_mounts, "_MKFS", "/nonexistent/mkfs.ext4")  # and without mkfs
    s = _sandbox("unshare", LIMITS)
    try:
        assert s.enforced == {"session_memory": None, "session_processes": None, "tmp": "tmpfs", "workdir": "tmpfs"}
        assert s.usage() == {"memory_peak_bytes": None, "processes": None}
        assert "no writable cgroup" in s.unenforced_why["session_memory"]
        text = s.describe()
        assert "2 GiB per process; this host offers no memory cgroup, so the session's processes together are not capped" in text
        assert "128 processes of the sandbox's user, shared with every session on this host (no pids cgroup here)" in text
        limits = s.run("import os; print(open('/proc/self/limits').read())\n"
                       "print(os.statvfs('.').f_blocks * os.statvfs('.').f_frsize)")
        assert f"Max processes             {LIMITS.session_processes}" in limits["output"]
        assert f"Max address space         {LIMITS.session_memory_bytes}" in limits["output"]
        assert int(limits["output"].split()[-1]) == LIMITS.workdir_bytes  # a tmpfs of the folder's size
        answer = s.run("block = bytearray(4 << 30)")
        assert answer["limit"] == "memory" and "MemoryError" in answer["output"]
    finally:
        s.close()
    assert s.work_dir not in _mounts()


def test_the_limits_name_a_bad_value_and_the_range():
    for field, value, words in (("session_memory_bytes", 1 << 20, "an integer of bytes from 64 MiB to 1 TiB"),
                                ("session_processes", 5000, "an integer from 8 to 4,096 processes"),
                                ("tmp_bytes", 0, "from 1 MiB"), ("workdir_bytes", 2.5, "16 MiB"),
                                ("timeout_s", True, "a number from 0.1 to 86,400 seconds"), ("cpu_s", 0, "(or None)")):
        with pytest.raises(ValueError, match=f"^{field}: {value!r} not allowed; .*{words.replace('(', '.').replace(')', '.')}"):
            Limits(**{field: value})
    assert Limits().process_memory_bytes == Limits().session_memory_bytes == 2 << 30
    assert Limits(timeout_s=90).process_cpu_s == 180 and Limits(cpu_s=7).process_cpu_s == 7
    assert [sandbox_mod.parse_size(v) for v in ("512M", "2G", "8G", "1.5GiB", "64mb", "1048576", 4096)] == [
        512 << 20, 2 << 30, 8 << 30, 3 << 29, 64 << 20, 1 << 20, 4096]
    for bad in ("8X", "", "G", "-1G", "nan", None, True):
        with pytest.raises(ValueError, match="sandbox_memory: .* not allowed; a size such as 512M, 2G or 8G"):
            sandbox_mod.parse_size(bad, "sandbox_memory")
    limits = sandbox_mod.sandbox_limits(LIMITS, sandbox_memory="8G", sandbox_time="90s")
    assert (limits.session_memory_bytes, limits.timeout_s, limits.cpu_s) == (8 << 30, 90.0, LIMITS.cpu_s)
    assert sandbox_mod.sandbox_limits(None) is None and sandbox_mod.sandbox_limits(LIMITS) is LIMITS
    with pytest.raises(ValueError, match=r"^sandbox_memory: '1M' \(1 MiB\) not allowed; a size from 64 MiB to 1 TiB$"):
        sandbox_mod.sandbox_limits(sandbox_memory="1M")
    with pytest.raises(ValueError, match="^sandbox_time: 'soon' not allowed; seconds"):
        sandbox_mod.sandbox_limits(sandbox_time="soon")


# -- --sandbox-memory and --sandbox-time ------------------------------------------------------
def _one_error_line(capsys, flag: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("luca-gym ") and f"error: {flag}: " in err, err
    return err


@pytest.mark.parametrize("argv, flag, words", [
    (["--python", "--sealed", "--sandbox-memory", "8X"], "--sandbox-memory", "a size such as 512M, 2G or 8G"),
    (["--python", "--sealed", "--sandbox-memory", "32M"], "--sandbox-memory", "a size from 64 MiB to 1 TiB"),
    (["--python", "--sealed", "--sandbox-time", "soon"], "--sandbox-time", "seconds, a number such as 60"),
    (["--python", "--sealed", "--sandbox-time", "0"], "--sandbox-time", "a number from 0.1 to 86,400 seconds"),
    (["--sandbox-memory", "8G"], "--sandbox-memory", "given without the python tool"),
    (["--sandbox-time", "60"], "--sandbox-time", "given without the python tool"),
])
def test_bad_sandbox_flags_get_one_line_naming_the_flag(argv, flag, words, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SECRET_ENV, "a secret of the sandbox tests, from the environment")
    out = tmp_path / "eval"
    assert main(["eval", "--world", "biobank", "--agents", "null", "--seeds", "0", "--out", str(out), *argv]) == 2
    assert words in _one_error_line(capsys, flag) and not out.exists()
    assert main(["mcp", "--world", "biobank", "--set", "profile=tiny", *argv]) == 2
    assert words in _one_error_line(capsys, flag)


def test_the_sandbox_flags_reach_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "a secret of the sandbox tests, from the environment")
    served = {}
    monkeypatch.setattr("luca_gym.mcp.server.serve", lambda session, **kw: served.update(session=session, **kw))
    assert main(["mcp", "--world", "biobank", "--seed", str(SEED), "--set", "profile=tiny", "--python", "--sealed",
                 "--sandbox-memory", "3G", "--sandbox-time", "45"]) == 0
    session = served["session"]
    try:
        limits = session.sandbox.limits
        assert (limits.session_memory_bytes, limits.timeout_s, limits.process_cpu_s) == (3 << 30, 45.0, 90)
        (spec,) = [t for t in session.tool_specs() if t["name"] == "python"]
        assert "45 s wall clock" in spec["description"] and "memory 3 GiB" in spec["description"]
    finally:
        session.close()

    class Swept(Exception):
        pass

    def sweep(specs, out, **kw):
        raise Swept(kw["python"])

    monkeypatch.setattr("luca_gym.harness.sweep", sweep)
    with pytest.raises(Swept) as swept:
        main(["eval", "--world", "biobank", "--agents", "null", "--seeds", str(SEED), "--set", "profile=tiny", "--python",
              "--sealed", "--sandbox-memory", "512M", "--sandbox-time", "90", "--out", str(tmp_path / "eval"), "--quiet"])
    (python,) = swept.value.args
    assert python == Limits(session_memory_bytes=512 << 20, timeout_s=90.0)
    assert tool_options(BiobankToolSession, python=python, sealed=SEAL)["limits"] is python
    with pytest.raises(ValueError, match="python: 'yes' not allowed"):
        tool_options(BiobankToolSession, python="yes", sealed=SEAL)


def test_the_gymnasium_env_takes_the_sandbox_limits():
    env = gym.make("luca_gym/BiobankTools-v0", python=True, sealed=SEAL, profile="tiny", sandbox_memory="1G", sandbox_time=5)
    try:
        assert env.unwrapped._tool_options["limits"] == Limits(session_memory_bytes=1 << 30, timeout_s=5.0)
    finally:
        env.close()
    env = ToolsEnv("biobank", python=True, sealed=SEAL, profile="tiny", limits=LIMITS, sandbox_time=7)
    assert env._tool_options["limits"] == Limits(timeout_s=7.0, cpu_s=LIMITS.cpu_s)
    with pytest.raises(ValueError, match="sandbox_memory: '1G' given without the python tool"):
        ToolsEnv("biobank", sealed=SEAL, profile="tiny", sandbox_memory="1G")
    with pytest.raises(ValueError, match="sandbox_memory: '1Q' not allowed"):
        ToolsEnv("biobank", python=True, sealed=SEAL, profile="tiny", sandbox_memory="1Q")


def test_a_cgroup_v2_host_gets_one_folder_with_both_limits(tmp_path, monkeypatch):
    # a unified hierarchy, faked in files: the folder is made under this process's own cgroup where it may
    # enable memory and pids for children, else beside it, under a parent that has them enabled already
    root = tmp_path / "cgroup"
    own = root / "system.slice" / "host.service"
    own.mkdir(parents=True)
    for folder, controllers, enabled in ((root, "memory pids cpu", "memory pids"),
                                         (root / "system.slice", "memory pids", "memory pids"), (own, "memory pids", "")):
        (folder / "cgroup.controllers").write_text(controllers)
        (folder / "cgroup.subtree_control").write_text(enabled)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox_cgroups, "_cgroup_mounts", lambda: [("cgroup2", "/", str(root), {"rw"})])
    monkeypatch.setattr(sandbox_cgroups, "_own_cgroups", lambda: {"": "/system.slice/host.service"})
    limits = Limits(session_memory_bytes=3 << 30, session_processes=99)
    made = sandbox_cgroups._SessionCgroup("luca-sandbox-test", limits)
    assert made.enforced == {"session_memory": "cgroup v2", "session_processes": "cgroup v2"}
    assert made.folders == [str(own / "luca-sandbox-test")] and (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (own / "luca-sandbox-test" / "memory.max").read_text() == str(3 << 30)
    assert (own / "luca-sandbox-test" / "pids.max").read_text() == "99"
    (own / "cgroup.controllers").write_text("pids")  # its own offers no memory: beside it
    made = sandbox_cgroups._SessionCgroup("luca-sandbox-other", limits)
    assert made.folders == [str(root / "system.slice" / "luca-sandbox-other")] and made.procs[0].endswith("other/cgroup.procs")
    (root / "system.slice" / "cgroup.subtree_control").write_text("pids")  # nor its parent's children: no cgroup v2
    made = sandbox_cgroups._SessionCgroup("luca-sandbox-none", limits)
    assert made.folders == [] and "no writable" in made.why
    assert made.enforced == {"session_memory": None, "session_processes": None}


# -- what the python tool says is installed, and --python without the analysis packages ---------
def test_the_python_tool_names_the_packages_that_import_in_the_sandbox(monkeypatch):
    monkeypatch.setattr(sandbox_session, "ANALYSIS_PACKAGES", ("numpy", "pyarrow", "no_such_package"))
    monkeypatch.setattr(sandbox_session, "_PROBED", {})  # checked again, in the sandbox
    s = BiobankToolSession(SEED, sealed=SEAL, python=True, limits=LIMITS, profile="tiny")
    try:
        (spec,) = [t for t in s.tool_specs() if t["name"] == "python"]
        assert s.sandbox.importable == ("numpy", "pyarrow")
        assert "numpy and pyarrow are installed (no_such_package is not: importing it fails); no network" in spec["description"]
    finally:
        s.close()
    monkeypatch.setattr(sandbox_session, "ANALYSIS_PACKAGES", ("no_such_package", "nor_this_one"))
    monkeypatch.setattr(sandbox_session, "_PROBED", {})
    bare = Sandbox(LIMITS)
    try:
        assert bare.packages_words() == "none of no_such_package or nor_this_one is installed (only the standard library)"
    finally:
        bare.close()


def test_the_analysis_extra_is_the_one_the_project_declares():
    import re
    import tomllib

    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["analysis"]
    assert {re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in extra} == set(sandbox_mod.ANALYSIS_EXTRA)
    assert set(sandbox_mod.ANALYSIS_EXTRA) <= set(sandbox_mod.ANALYSIS_PACKAGES)
    assert sandbox_mod.INSTALL_ANALYSIS == 'pip install -e ".[analysis]"'


def test_python_without_the_analysis_packages_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SECRET_ENV, "a secret of the sandbox tests, from the environment")
    monkeypatch.setattr(sandbox_session, "ANALYSIS_EXTRA", ("pandas", "no_such_package"))
    out = tmp_path / "eval"
    assert main(["eval", "--world", "biobank", "--agents", "null", "--seeds", "0", "--set", "profile=tiny", "--python",
                 "--sealed", "--out", str(out)]) == 2
    for command in ("eval", "mcp"):
        if command == "mcp":
            assert main(["mcp", "--world", "biobank", "--set", "profile=tiny", "--python", "--sealed"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith(f"luca-gym {command}: error: --python: "), err
        assert "no_such_package is not installed" in err and err.endswith('install the analysis packages: pip install -e ".[analysis]"')
    assert not out.exists()
