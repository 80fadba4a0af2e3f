"""The code sandbox against the attacks that once broke it
(:mod:`luca_gym.sandbox`, :mod:`luca_gym.sandbox.seccomp`).

A block that tried ``PTRACE_ATTACH`` on bubblewrap's own process inside
the sandbox could clear its parent-death signal and outlive its time limit;
the call then hung closing a pipe a reader thread still read, and a host
killed meanwhile left its mount, loop device, cgroups and folder behind.
Now: the seccomp filter refuses ``ptrace`` and the other calls of its policy
(EPERM; checked on the compiled program itself, in a plain process, and in
both isolations), a block's daemons that ignore every catchable signal and
hold the output are killed with the session's whole cgroup when the block
ends (nothing of the session's survives; the call returns within its limit
plus a few seconds; the next block runs), the pipes are served without a
reader thread, SIGTERM releases a host's sandboxes, and the next start
sweeps what a host killed with SIGKILL left behind."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from luca_gym import sandbox as sandbox_mod
from luca_gym.sandbox import isolation as sandbox_isolation
from luca_gym.sandbox import mounts as sandbox_mounts
from luca_gym.sandbox import processes as sandbox_processes
from luca_gym.sandbox import release as sandbox_release
from luca_gym.sandbox import seccomp as sandbox_seccomp
from luca_gym.sandbox import Limits, Sandbox, SandboxUnavailable

LIMITS = Limits(timeout_s=4.0, cpu_s=4)
REQUIRE_BWRAP = os.environ.get("LUCA_GYM_REQUIRE_BWRAP") == "1"
pytestmark = pytest.mark.xdist_group("sandbox")  # as tests/test_sandbox.py: sandboxes share uid 65534's processes

# Each refused call through ctypes: "name errno-name" lines
CALLS = r"""import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    result = libc.syscall(*args) if name.startswith('nr') else getattr(libc, name)(*args)
    print(name, errno.errorcode.get(ctypes.get_errno(), 'ok') if result == -1 else 'ok', flush=True)
call('ptrace', 16, 1, 0, 0)                 # PTRACE_ATTACH to pid 1 (bubblewrap's own process inside)
call('ptrace', 0x4206, os.getppid(), 0, 0)  # PTRACE_SEIZE the parent
call('unshare', 0x10000000)                 # CLONE_NEWUSER
call('unshare', 0x00020000)                 # CLONE_NEWNS
call('personality', 0x0040000)              # ADDR_NO_RANDOMIZE
call('nr_clone3', {clone3}, 0, 0)
call('nr_bpf', {bpf}, 0, 0, 0)
call('nr_userfaultfd', {userfaultfd}, 0)
call('nr_perf_event_open', {perf}, 0, 0, -1, -1, 0)
call('nr_keyctl', {keyctl}, 0, 0)
call('nr_io_uring_setup', {io_uring}, 1, 0)
call('personality', 0xffffffff)             # asking is allowed
pid = os.fork()
if pid == 0:
    os._exit(0)
print('fork', os.waitpid(pid, 0)[1], flush=True)
import threading
threading.Thread(target=lambda: print('thread ok', flush=True)).start()
"""
EXPECTED = ["ptrace EPERM", "ptrace EPERM", "unshare EPERM", "unshare EPERM", "personality EPERM", "nr_clone3 ENOSYS",
            "nr_bpf EPERM", "nr_userfaultfd EPERM", "nr_perf_event_open EPERM", "nr_keyctl EPERM", "nr_io_uring_setup EPERM",
            "personality ok", "fork 0", "thread ok"]


def _calls(machine=None) -> str:
    numbers = sandbox_seccomp._NUMBERS[sandbox_seccomp.architecture(machine)]
    return CALLS.format(clone3=numbers["clone3"], bpf=numbers["bpf"], userfaultfd=numbers["userfaultfd"],
                        perf=numbers["perf_event_open"], keyctl=numbers["keyctl"], io_uring=numbers["io_uring_setup"])


def test_the_policy_is_well_formed_for_each_architecture():
    for machine in ("x86_64", "aarch64", "arm64", "amd64"):
        program = sandbox_seccomp.program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 256
        entries = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
        for i, (code, jt, jf, _) in enumerate(entries):
            if code & 0x07 == 0x05:  # a jump: both targets inside the program
                assert i + 1 + max(jt, jf) < len(entries)
        assert entries[-3:] == [(0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x50001), (0x06, 0, 0, 0x50026)]  # allow, EPERM, ENOSYS
        numbers = sandbox_seccomp._NUMBERS[sandbox_seccomp.architecture(machine)]
        assert set(numbers) == {n for n, _ in sandbox_seccomp.DENIED + sandbox_seccomp.ARGUMENT_CHECKED}
        assert len(set(numbers.values())) == len(numbers)  # no call given another's number
    with pytest.raises(sandbox_seccomp.SeccompUnavailable, match="no seccomp policy for the architecture 'riscv64'"):
        sandbox_seccomp.program("riscv64")
    table = sandbox_seccomp.policy_table()
    assert "| `ptrace` |" in table and "| `clone` |" in table and len(table.splitlines()) == 2 + len(numbers)


def test_the_program_refuses_its_calls_in_a_plain_process():
    try:
        sandbox_seccomp.architecture()
    except sandbox_seccomp.SeccompUnavailable as exc:
        pytest.skip(str(exc))
    code = sandbox_seccomp.INSTALL.format(program=sandbox_seccomp.program().hex()) + _calls()
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED


def _sandbox(isolation: str, limits: Limits = LIMITS) -> Sandbox:
    if isolation == "bwrap" and not os.access(sandbox_isolation._BWRAP, os.X_OK):
        if REQUIRE_BWRAP:
            pytest.fail(f"LUCA_GYM_REQUIRE_BWRAP=1 and no bubblewrap at {sandbox_isolation._BWRAP}")
        pytest.skip(f"bubblewrap is not installed ({sandbox_isolation._BWRAP}); `apt-get install bubblewrap` to test it")
    if isolation == "unshare" and os.geteuid() != 0:
        pytest.skip("the unshare fallback needs root")
    try:
        return Sandbox(limits, isolation)
    except SandboxUnavailable as exc:
        pytest.skip(f"no {isolation} sandbox here: {exc}")


# the fallback's cases run in the slow tier (`make test-slow`, CI): bubblewrap's, the isolation chosen first, stay quick
ISOLATIONS = ["bwrap", pytest.param("unshare", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=ISOLATIONS)
def sandbox(request):
    s = _sandbox(request.param)
    yield s
    s.close()


def test_each_call_of_the_policy_is_refused_in_the_sandbox(sandbox):
    answer = sandbox.run(_calls() + "import time; time.sleep(0.2)\n"
                         "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])\n")
    assert answer["exit_status"] == 0 and answer["output"].splitlines() == EXPECTED + ["2"]


# The attack: a daemon that leaves the block's session, ignores every signal it can, tries to free bubblewrap's
# process from its parent-death signal (PTRACE_ATTACH to pid 1), holds the block's output and keeps writing a
# file in the working folder; the block itself then waits for ever.
ATTACK = r"""import ctypes, os, signal, sys, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGXCPU):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        print('attach', libc.ptrace(16, 1, 0, 0), ctypes.get_errno(), flush=True)
        os.execv('/usr/bin/sh', ['sh', '-c', 'while true; do echo x >> alive; sleep 0.05; done; : {marker}'])
    os._exit(0)
while True:
    time.sleep(0.1)
"""


def _session_processes(sandbox: Sandbox) -> list[str]:
    """Host processes in the session's cgroups (by their cgroup path: a process reparented out of the sandbox's
    pid namespace keeps its cgroup)."""
    name = os.path.basename(os.path.dirname(sandbox.work_dir))
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if name in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def _running(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_the_ptrace_attack_ends_with_its_block_and_the_session_goes_on(sandbox):
    marker = f"attack-{os.getpid()}-{sandbox.isolation}"
    start = time.monotonic()
    answer = sandbox.run(ATTACK.format(marker=marker))
    took = time.monotonic() - start
    assert answer["timed_out"] and answer["limit"] == "time" and answer["exit_status"] is None
    assert answer["output"].startswith("attach -1 1\n")  # EPERM
    assert took < LIMITS.timeout_s + 15  # the limit and a few seconds: it once hung until a watchdog closed the sandbox
    assert _running(marker) == []
    if sandbox.enforced["session_processes"] or sandbox.enforced["session_memory"]:
        assert _session_processes(sandbox) == []
    size = os.path.getsize(os.path.join(sandbox.work_dir, "alive"))
    time.sleep(0.3)
    assert os.path.getsize(os.path.join(sandbox.work_dir, "alive")) == size  # nobody writes it any more
    assert sandbox.run("import os; print(os.path.exists('alive'))")["output"] == "True\n"


def test_the_sessions_cgroup_alone_ends_a_block_whose_namespace_outlives_it(sandbox, monkeypatch):
    # as if a block had freed itself from its pid namespace's end (the ptrace attack, were ptrace allowed): its
    # process group is not killed; the session's cgroup is, and with it everything (the block sleeps: no CPU
    # limit ends it)
    if not (sandbox.enforced["session_processes"] or sandbox.enforced["session_memory"]):
        pytest.skip("no session cgroup here: the pid namespace's end is all that holds")
    monkeypatch.setattr(sandbox_processes, "_kill", lambda process: None)
    marker = f"cgroup-{os.getpid()}-{sandbox.isolation}"
    start = time.monotonic()
    answer = sandbox.run(ATTACK.format(marker=marker))
    assert answer["timed_out"] and time.monotonic() - start < LIMITS.timeout_s + 15
    assert _running(marker) == [] and _session_processes(sandbox) == []
    assert sandbox.run("print('next')")["output"] == "next\n"


def test_a_process_holding_the_output_after_its_block_exits_does_not_hang_the_call():
    # the pipes alone, outside any sandbox: the block's first process exits while a child keeps the output open
    process = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    pipes = sandbox_processes._Pipes(process, b"", 1000)
    try:
        assert pipes.exchange(time.monotonic() + 30)  # the first process exited: a second's grace, then done
        pipes.drain(time.monotonic() + 0.2)  # the sleep still holds it: returns at the deadline
        assert not pipes.eof
    finally:
        pipes.close()  # no reader thread is blocked on it: closing returns at once
        os.kill(int(pipes.kept.split()[0]), signal.SIGKILL)


# A host that opens a sandbox, starts a block that runs for ever and says where its things are.
HOST = """import faulthandler, json, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1)  # where it is stuck, should it not die
from luca_gym.sandbox import Limits, Sandbox
s = Sandbox(Limits(timeout_s=600.0), sys.argv[1])
threading.Thread(target=s.run, args=("import os\\nos.execv('/usr/bin/sleep', ['sleep', '{marker}'])",), daemon=True).start()
print(json.dumps({{"home": s._dir, "cgroups": s._cgroup.folders, "mount": s._held.mount, "image": s._held.image}}), flush=True)
for _ in range(12000):  # a host whose main thread runs Python (its handler runs there), not one 600 s call
    time.sleep(0.05)
"""
# A signal the kernel hands to a thread other than the main one has its
# Python handler run when the main thread next runs Python: a host blocked in
# one long C call in its main thread (a single time.sleep(600)) died of
# SIGTERM only when the signal happened to reach the main thread (about 3 in
# 4 tries under bwrap; a thread with SIGTERM unblocked was seen beside the
# block's, whose mask blocks it). That gap is the host's main thread, not the
# release this test checks, so the host here sleeps in short steps.


def _loops(image: str) -> str:
    return subprocess.run(["losetup", "-j", image], capture_output=True, text=True).stdout


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_host_that_dies_leaves_nothing_after_the_next_start(isolation, how):
    _sandbox(isolation).close()  # skips where this isolation cannot run
    marker = f"86396.{os.getpid()}{int(how)}{len(isolation)}"
    host = subprocess.Popen([sys.executable, "-c", HOST.format(marker=marker), isolation], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        held = json.loads(host.stdout.readline())
        deadline = time.monotonic() + 60
        while not _running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(marker)
    finally:
        host.send_signal(how)
        try:
            host.wait(60)
        except subprocess.TimeoutExpired:
            host.send_signal(signal.SIGUSR1)
            time.sleep(1)
            host.kill()
            pytest.fail(f"the host did not die of {how!r}: {host.communicate()[1][-4000:]}")
        host.stdout.close()
        host.stderr.close()
    if how == signal.SIGTERM:  # it released its sandbox as it died
        assert not os.path.exists(held["home"])
    else:  # killed: its things are left until the next start
        assert os.path.exists(held["home"])
        assert sandbox_mod.sweep_stale() and not os.path.exists(held["home"])
    mounts = sandbox_mounts._mounted()
    assert not any(m.startswith(held["home"]) for m in mounts)
    assert not any(os.path.exists(c) for c in held["cgroups"])
    deadline = time.monotonic() + 10  # a loop device detaches once the last process using it has gone (under load: later)
    while (_running(marker) or held["image"] and _loops(held["image"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(marker) == [] and (held["image"] is None or _loops(held["image"]) == "")


def test_the_sweep_leaves_a_running_hosts_sandbox_alone(sandbox):
    assert os.path.basename(os.path.dirname(sandbox.work_dir)) not in map(os.path.basename, sandbox_mod.sweep_stale())
    assert sandbox.run("print(1)")["output"] == "1\n"


def test_the_filter_is_loaded_before_the_agents_first_line():
    # the fallback's interpreter loads it itself: a filter that fails to load stops the block, nothing of the agent's runs
    failing = sandbox_seccomp.INSTALL.format(program=b"\x00".hex())  # one byte: not a program
    done = subprocess.run([sys.executable, "-I", "-S", "-c", failing + "print('ran')"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "the seccomp filter could not be loaded" in done.stderr and "ran" not in done.stdout


def test_the_sandbox_page_prints_the_policy_as_it_is():
    page = os.path.join(os.path.dirname(__file__), "..", "docs", "guides", "sandbox.md")
    with open(page, encoding="utf-8") as f:
        assert sandbox_seccomp.policy_table() in f.read()


def test_the_sweep_removes_only_the_folders_of_hosts_that_are_gone(tmp_path):
    own = {"pid": os.getpid(), "start": sandbox_release._start_time(os.getpid()), "pid_namespace": sandbox_release._pid_namespace(),
           "cgroups": [], "image": None}
    records = {"gone": {**own, "start": -1},  # this pid, another process's start: its host is gone
               "running": own,
               "elsewhere": {**own, "start": -1, "pid_namespace": "pid:[1]"},  # another namespace's pid means nothing
               "unrecorded": None,
               "garbled": "{not json"}
    for name, record in records.items():
        home = tmp_path / f"{sandbox_mod.FOLDER_PREFIX}{name}"
        (home / "work").mkdir(parents=True)
        if record is not None:
            text = record if isinstance(record, str) else json.dumps({**record, "mount": str(home / "work")})
            (home / sandbox_release._RECORD).write_text(text)
    (tmp_path / "not-a-sandbox").mkdir()
    assert sandbox_mod.sweep_stale(str(tmp_path)) == [str(tmp_path / f"{sandbox_mod.FOLDER_PREFIX}gone")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{sandbox_mod.FOLDER_PREFIX}{n}" for n in ("running", "elsewhere", "unrecorded", "garbled")] + ["not-a-sandbox"])
