"""A code sandbox any world's tool session may offer as its ``python`` tool:
:class:`Sandbox`.

An agent that writes code runs it here, one block per call, as the
DrugTargetWorld harness does: each block is a fresh Python process whose
working directory (``/analysis``, one per session) keeps its files between
blocks, beside a folder of data the world puts there (``/analysis/release``,
read-only). The output (stdout and stderr together) comes back truncated to
:attr:`Limits.output_chars`.

Isolation (never agent code as root in a plain subprocess: root ignores the
process limit and file modes, and could read the host's memory):

* ``bwrap`` (bubblewrap): the code runs as uid/gid 65534 in new user, mount,
  pid, network, IPC and UTS namespaces (``--unshare-all``, ``--die-with-parent``,
  ``--new-session``). Launched by root, bubblewrap itself runs as the host's
  uid 65534 (``setpriv``), so the process-count limit binds (the kernel
  exempts uid 0 from it); the paths it binds are first bind-mounted, in a
  private mount namespace, under the session's folder, which uid 65534 may
  traverse (the interpreter may live under a private ``/root``).
* ``unshare`` (where bubblewrap is missing; root only): new mount, pid,
  network, IPC and UTS namespaces, a tmpfs root holding the same binds,
  ``chroot`` and ``setpriv`` to uid/gid 65534 with no capabilities and no
  new privileges.

Either way the code sees only ``/usr``, the interpreter's prefix, the
analyst's libraries (the host's site-packages, read-only), ``/proc`` of its
own pid namespace, a private ``/tmp`` and its working directory; no network,
no host environment variables and not the host package (:attr:`Sandbox.hidden`,
checked when the sandbox starts: the editable install's finder points into a
folder that is not there). Limits (:class:`Limits`): address space, CPU time,
processes (of uid 65534, host-wide), file size, and a wall-clock timeout after
which the whole pid namespace is killed. A machine where neither isolation
works gets :class:`SandboxUnavailable` saying why, and no sandbox.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass

UNPRIVILEGED = 65534  # nobody / nogroup
WORKDIR = "/analysis"  # the working directory, as the code sees it
RELEASE = "release"  # the read-only data folder inside it
PACKAGES = "/opt/python-packages"  # where the host's site-packages appear (numbered)
ISOLATIONS = ("auto", "bwrap", "unshare")
_BWRAP, _UNSHARE, _SETPRIV, _CHROOT = "/usr/bin/bwrap", "/usr/bin/unshare", "/usr/bin/setpriv", "/usr/sbin/chroot"
_PRLIMIT = "/usr/bin/prlimit"
_PROBED: dict = {}  # (isolation, interpreter, packages, hidden) -> None (works) or why not


class SandboxUnavailable(RuntimeError):
    """Neither isolation works on this machine; the message says why (the tool must not start)."""


@dataclass(frozen=True)
class Limits:
    """What one code block may use.

    Attributes:
        timeout_s: wall-clock seconds, then the block's whole pid namespace is killed.
        cpu_s: CPU seconds (RLIMIT_CPU).
        memory_bytes: address space of each process (RLIMIT_AS).
        processes: processes and threads of uid 65534, host-wide (RLIMIT_NPROC).
        file_bytes: the largest file a block may write (RLIMIT_FSIZE).
        output_chars: the output shown (stdout and stderr together); the rest is counted.
    """

    timeout_s: float = 60.0
    cpu_s: int = 120
    memory_bytes: int = 1 << 30
    processes: int = 64
    file_bytes: int = 256 << 20
    output_chars: int = 20_000

    def __post_init__(self):
        for name, low in (("timeout_s", 0.1), ("cpu_s", 1), ("memory_bytes", 64 << 20), ("processes", 8), ("file_bytes", 1 << 20),
                          ("output_chars", 100)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
                raise ValueError(f"{name}: {value!r} not allowed; a number of at least {low}")

    def describe(self) -> str:
        """The limits in words (a tool's description states them)."""
        return (f"{self.timeout_s:g} s wall clock, {self.cpu_s} s CPU, {self.memory_bytes / (1 << 30):g} GiB of memory, "
                f"{self.processes} processes, files up to {self.file_bytes >> 20} MiB, output up to {self.output_chars:,} characters")


# Runs inside: the working directory and the host's site-packages on the path, the block from stdin.
_RUNNER = ("import sys; sys.path[:] = [{workdir!r}] + sys.path + {packages!r}; sys.argv = ['<block>']; "
           "exec(compile(sys.stdin.read(), '<block>', 'exec'), {{'__name__': '__main__'}})")
# Checks a fresh sandbox: the interpreter starts, runs as 65534 and cannot import the hidden packages.
_PROBE = ("import importlib, os, sys\n"
          "assert os.getuid() == os.getgid() == {uid}, 'not uid 65534'\n"
          "for name in {hidden!r}:\n"
          "    try:\n"
          "        importlib.import_module(name)\n"
          "    except ImportError:\n"
          "        continue\n"
          "    sys.exit('the host package ' + name + ' is importable')\n"
          "print('sandbox ok')\n")
# The unshare fallback, run as root in the new namespaces: a tmpfs root, the binds, chroot, setpriv.
# Arguments: root, then (source, target, mode) triples, then "--", then the command. sh stays pid 1
# (the command is not its last), so killing it (our process group) ends the namespace.
_FALLBACK = r"""set -e
root=$1; shift
mount -t tmpfs -o mode=755 tmpfs "$root"
mkdir -p "$root/proc" "$root/dev" "$root/tmp"
chmod 1777 "$root/tmp"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
for node in null zero urandom random; do touch "$root/dev/$node"; mount --bind "/dev/$node" "$root/dev/$node"; done
while [ "$1" != "--" ]; do
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  if [ "$3" = ro ]; then mount -o remount,bind,ro "$root$2"; fi
  shift 3
done
shift
for link in /bin /lib /lib64 /sbin; do if [ -L "$link" ]; then ln -s "$(readlink "$link")" "$root$link"; fi; done
mount -t proc proc "$root/proc"
cd /
"$CHROOT" "$root" "$@"
status=$?
exit $status
"""


def _system_links() -> list[tuple[str, str]]:
    """(path, what it is) of /bin, /lib, /lib64, /sbin: a symlink's target (merged /usr), or "dir"."""
    out = []
    for path in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(path):
            out.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            out.append((path, "dir"))
    return out


class Sandbox:
    """One session's sandbox: a working directory and a release folder on the
    host (:attr:`work_dir`, :attr:`release_dir`; the world writes its data
    into the latter before the first block), and :meth:`run`.

    Arguments: ``limits`` (:class:`Limits`), ``isolation`` ("auto": bubblewrap,
    else unshare; or one of them), ``hidden`` (packages the code must not
    import; default the host package). Raises :class:`SandboxUnavailable`
    where the isolation does not work (the message says why), ValueError for
    a bad argument. :meth:`close` (or garbage collection) removes the folders.
    """

    def __init__(self, limits: Limits | None = None, isolation: str = "auto", hidden: tuple[str, ...] | None = None):
        if limits is not None and not isinstance(limits, Limits):
            raise ValueError(f"limits: {type(limits).__name__} not allowed; a Limits or None")
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation: {isolation!r} not allowed; allowed {', '.join(ISOLATIONS)}")
        self.limits = limits or Limits()
        self.hidden = tuple(hidden) if hidden is not None else (__name__.split(".")[0],)
        self.interpreter = os.path.realpath(sys.executable)
        self.prefix = os.path.realpath(sys.base_prefix)
        self.packages = [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]
        self._root = os.geteuid() == 0
        self.isolation = self._choose(isolation)
        self._dir = tempfile.mkdtemp(prefix="luca-sandbox-")  # a random name: nothing of the session's seed
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._dir, True)
        os.chmod(self._dir, 0o711)  # uid 65534 may pass through, not list
        self.work_dir = os.path.join(self._dir, "work")
        self.release_dir = os.path.join(self._dir, RELEASE)
        os.makedirs(os.path.join(self.work_dir, RELEASE))  # the release's mount point
        os.makedirs(self.release_dir, mode=0o755)
        if self._root:
            os.chown(self.work_dir, UNPRIVILEGED, UNPRIVILEGED)
            os.chmod(self.work_dir, 0o700)
        self._lock = threading.Lock()
        key = (self.isolation, self.interpreter, tuple(self.packages), self.hidden)
        if key not in _PROBED:
            probe = self._run(_PROBE.format(uid=UNPRIVILEGED, hidden=list(self.hidden)), Limits(timeout_s=60.0))
            _PROBED[key] = None if probe["exit_status"] == 0 and "sandbox ok" in probe["output"] else (
                f"the {self.isolation} sandbox failed its check (exit status {probe['exit_status']}): {probe['output'][-400:].strip()}")
        if _PROBED[key] is not None:
            self.close()
            raise SandboxUnavailable(f"python sandbox: {_PROBED[key]}; the tool cannot start")

    def _choose(self, isolation: str) -> str:
        """The isolation to use, or SandboxUnavailable saying why none works."""
        reasons = []
        if isolation in ("auto", "bwrap"):
            missing = [p for p in (_BWRAP, _PRLIMIT) + ((_UNSHARE, _SETPRIV) if self._root else ()) if not os.access(p, os.X_OK)]
            if not missing:
                return "bwrap"
            reasons.append(f"bubblewrap needs {', '.join(missing)}")
        if isolation in ("auto", "unshare"):
            missing = [p for p in (_UNSHARE, _SETPRIV, _CHROOT, _PRLIMIT) if not os.access(p, os.X_OK)]
            if not self._root:
                reasons.append("the unshare fallback needs root (to build the namespaces before dropping to uid 65534)")
            elif missing:
                reasons.append(f"the unshare fallback needs {', '.join(missing)}")
            else:
                return "unshare"
        raise SandboxUnavailable(f"python sandbox: no isolation works here ({'; '.join(reasons)}); the tool cannot start, "
                                 "and agent code is never run without one")

    def close(self) -> None:
        """Remove the working directory and the release (the sandbox cannot run afterwards)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has removed the folders."""
        return not self._finalizer.alive

    # -- the command --------------------------------------------------------------------
    def _binds(self) -> list[tuple[str, str, str]]:
        """(host source, path inside, "ro" or "rw") of everything the code sees but /proc, /dev and /tmp."""
        binds = [("/usr", "/usr", "ro")] + [(path, path, "ro") for path, kind in _system_links() if kind == "dir"]
        if not self.prefix.startswith("/usr/"):
            binds.append((self.prefix, self.prefix, "ro"))
        binds += [(p, f"{PACKAGES}/{i}", "ro") for i, p in enumerate(self.packages)]
        binds += [(self.work_dir, WORKDIR, "rw"), (self.release_dir, f"{WORKDIR}/{RELEASE}", "ro")]
        return binds

    def _environment(self) -> dict:
        threads = "1"  # one BLAS thread: threads count against the process limit
        return {"HOME": WORKDIR, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
                "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads, "NUMEXPR_NUM_THREADS": threads, "TMPDIR": "/tmp"}

    def _command(self) -> list[str]:
        packages = [f"{PACKAGES}/{i}" for i in range(len(self.packages))]
        python = [self.interpreter, "-I", "-S", "-c", _RUNNER.format(workdir=WORKDIR, packages=packages)]
        binds = self._binds()
        env = self._environment()
        if self.isolation == "bwrap":
            staged, command = [], [_BWRAP, "--unshare-all", "--die-with-parent", "--new-session", "--uid", str(UNPRIVILEGED),
                                   "--gid", str(UNPRIVILEGED), "--clearenv", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
            for key, value in env.items():
                command += ["--setenv", key, value]
            for path, kind in _system_links():
                if kind != "dir":  # a directory is bound (_binds)
                    command += ["--symlink", kind, path]
            for i, (source, target, mode) in enumerate(binds):
                if self._root and source not in (self.work_dir, self.release_dir):  # stage it where uid 65534 may reach
                    stage = os.path.join(self._dir, f"stage{i}")
                    os.makedirs(stage, exist_ok=True)
                    staged.append((source, stage))
                    source = stage
                command += ["--ro-bind" if mode == "ro" else "--bind", source, target]
            command += ["--remount-ro", "/", "--chdir", WORKDIR, "--", *python]
            if not self._root:
                return command
            script = 'set -e; while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"'
            return [_UNSHARE, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
                    *[p for pair in staged for p in pair], "--",
                    _SETPRIV, f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups", "--", *command]
        root = os.path.join(self._dir, "root")
        os.makedirs(root, exist_ok=True)
        inside = [_SETPRIV, f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups", "--no-new-privs",
                  "--inh-caps=-all", "--bounding-set=-all", "--", "/usr/bin/env", "-i", f"--chdir={WORKDIR}",
                  *[f"{k}={v}" for k, v in env.items()], *python]
        return [_UNSHARE, "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child", "--propagation", "private",
                "--", "/usr/bin/env", f"CHROOT={_CHROOT}", "/bin/sh", "-c", _FALLBACK, "sh", root,
                *[x for bind in binds for x in bind], "--", *inside]

    @staticmethod
    def _limited(command: list[str], limits: Limits) -> list[str]:
        """``command`` under the limits (soft = hard, so the code cannot raise them), by ``prlimit``
        (no Python runs between fork and exec: the host may be multithreaded)."""
        return [_PRLIMIT, f"--as={int(limits.memory_bytes)}", f"--cpu={int(limits.cpu_s)}", f"--nproc={int(limits.processes)}",
                f"--fsize={int(limits.file_bytes)}", "--core=0", "--", *command]

    # -- running ------------------------------------------------------------------------
    def run(self, code: str) -> dict:
        """Run one block. Returns ``{"output", "truncated", "exit_status",
        "timed_out", "limit"}``: ``limit`` names the limit that stopped the
        block ("time", "cpu", "memory") or is None. ValueError: code not a
        string, or the sandbox closed."""
        if not isinstance(code, str):
            raise ValueError(f"code: expected a string, got {type(code).__name__}")
        if self.closed:
            raise ValueError("code: the sandbox is closed")
        with self._lock:
            return self._run(code, self.limits)

    def _run(self, code: str, limits: Limits) -> dict:
        process = subprocess.Popen(self._limited(self._command(), limits), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, cwd="/",
                                   env={"PATH": "/usr/bin:/bin"})  # its own process group: a timeout kills it whole
        kept, dropped = bytearray(), [0]
        cap = 4 * limits.output_chars + 4  # bytes kept (UTF-8: at most 4 per character)

        def read():
            while chunk := process.stdout.read1(65536):
                room = cap - len(kept)
                kept.extend(chunk[:max(room, 0)])
                dropped[0] += max(len(chunk) - max(room, 0), 0)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            process.stdin.write(code.encode("utf-8", "surrogatepass"))
            process.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        timed_out = False
        try:
            process.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(process)
        reader.join(timeout=10)
        process.stdout.close()
        text = kept.decode("utf-8", "replace")
        truncated = dropped[0] > 0 or len(text) > limits.output_chars
        if truncated:
            text = text[:limits.output_chars] + (f"\n[output truncated to {limits.output_chars:,} characters; "
                                                 f"{len(kept) + dropped[0]:,} bytes in all]")
        status = process.returncode
        signalled = -status if status < 0 else status - 128 if status > 128 else 0
        limit = ("time" if timed_out else "cpu" if signalled in (signal.SIGXCPU, signal.SIGKILL) and not timed_out
                 else "memory" if "MemoryError" in text[-2000:] else None)
        return {"output": text, "truncated": truncated, "exit_status": None if timed_out else status, "timed_out": timed_out,
                "limit": limit}


def _kill(process: subprocess.Popen) -> None:
    """Kill the block's process group (the launcher and the namespace's pid 1: with it the whole pid namespace)
    and reap it (the group is still ours: its leader is not reaped yet)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
