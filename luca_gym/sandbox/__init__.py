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
  ``--new-session``), under the seccomp filter of
  :mod:`~luca_gym.sandbox.seccomp` (``--seccomp``: ``ptrace`` and the
  other calls of its policy get EPERM), with no nested user namespace
  (``--disable-userns``). Launched by root, bubblewrap itself runs as the host's
  uid 65534 (``setpriv``), so the per-user process limit binds where no
  pids cgroup holds (the kernel exempts uid 0 from it); the paths it binds are first bind-mounted, in a
  private mount namespace, under the session's folder, which uid 65534 may
  traverse (the interpreter may live under a private ``/root``).
* ``unshare`` (where bubblewrap is missing; root only): new mount, pid,
  network, IPC, UTS and cgroup namespaces, a tmpfs root holding the same binds,
  ``chroot`` and ``setpriv`` to uid/gid 65534 with no capabilities and no
  new privileges; the block's interpreter loads the same seccomp filter
  before the agent's first line.

Either way the code sees only ``/usr``, the interpreter's prefix, the
analyst's libraries (the host's site-packages, read-only), ``/proc`` of its
own pid namespace, a private ``/tmp`` and its working directory; no network,
no host environment variables and not the host package (:attr:`Sandbox.hidden`,
checked when the sandbox starts: the editable install's finder points into a
folder that is not there). A machine where neither isolation works gets
:class:`SandboxUnavailable` saying why, and no sandbox.

Limits (:class:`Limits`, one object; ``luca-gym eval/mcp --sandbox-memory 8G
--sandbox-time 60`` set its two most asked-for fields) hold per block and per
session, both isolations alike:

* per block: a wall-clock timeout after which the whole pid namespace is
  killed (2 x that in CPU seconds per process), a size-capped ``/tmp``
  (tmpfs, 256 MiB; ``/dev/shm`` too under bubblewrap), the largest file and
  the output shown;
* per session, all its blocks' processes together: memory (2 GiB, a memory
  cgroup: the processes and their ``/tmp`` files, an OOM kill past it; each
  process's address space is capped at the same size by RLIMIT_AS, so one
  larger allocation fails at once with MemoryError), processes and threads
  at once (128, a pids cgroup: one session's fork bomb leaves another's
  blocks running), and the working folder (1 GiB: an ext4 image of that
  size, sparse in the session's folder under :func:`tempfile.gettempdir`,
  loop-mounted for the session's life, or a tmpfs of that size, its files
  counted in the session's memory, where no loop device is free; a block
  that fills it gets ENOSPC, and the host's disk never fills).

Where a limit cannot hold it says so, and :attr:`Sandbox.enforced` (and the
tool's description, :meth:`Sandbox.describe`) names what holds instead. The
session cgroup is a cgroup v2 child where the unified hierarchy offers memory
and pids, else one cgroup v1 child a controller (this is what a host with
``/sys/fs/cgroup/{memory,pids}`` gets), made under the host process's own
cgroup so the host's own limits still bind; with neither (no root, a
read-only ``/sys/fs/cgroup``) memory falls back to the per-process RLIMIT_AS
(the processes together are not capped) and processes to RLIMIT_NPROC of uid
65534, which every session of the host shares. Without root the working
folder is a plain folder, without a quota.

What a block started ends with it: its process group is killed (with it the
pid namespace), then every process in the session's cgroup, whatever the
block did to its namespace, and only then is the rest of its output read;
the pipes are served from the calling thread without blocking, so no reader
is left stuck on a pipe a survivor holds. :meth:`Sandbox.close` (or
collection, a normal exit, SIGTERM or SIGHUP) kills what is left, removes
the cgroups, unmounts the working folder, detaches its loop device and
removes the session's folder; a host killed before it could is swept at the
next sandbox's start (:func:`sweep_stale`). :meth:`Sandbox.run_host_code`
runs the host's own code over what the agent wrote (a phenotype file), so
the host never decodes it itself. The docs' sandbox page lists the attacks
tried and held.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import math
import os
import selectors
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, replace

from luca_gym.sandbox import seccomp as sandbox_seccomp

UNPRIVILEGED = 65534  # nobody / nogroup
WORKDIR = "/analysis"  # the working directory, as the code sees it
RELEASE = "release"  # the read-only data folder inside it
PACKAGES = "/opt/python-packages"  # where the host's site-packages appear (numbered)
ISOLATIONS = ("auto", "bwrap", "unshare")
_BWRAP, _UNSHARE, _SETPRIV, _CHROOT = "/usr/bin/bwrap", "/usr/bin/unshare", "/usr/bin/setpriv", "/usr/sbin/chroot"
_PRLIMIT = "/usr/bin/prlimit"
_MOUNT, _UMOUNT, _MKFS, _LOSETUP = (shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or f"/usr/sbin/{name}"
                                    for name in ("mount", "umount", "mkfs.ext4", "losetup"))
_PROBED: dict = {}  # (isolation, interpreter, packages, hidden) -> (None (works) or why not, the packages that import)


class SandboxUnavailable(RuntimeError):
    """Neither isolation works on this machine; the message says why (the tool must not start)."""


MiB, GiB = 1 << 20, 1 << 30
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}
# (field, lowest, highest, unit) of every limit; those of _MAY_BE_NONE may also be None
_RANGES = (("timeout_s", 0.1, 86_400, "seconds"), ("cpu_s", 1, 172_800, "seconds"),
           ("memory_bytes", 64 * MiB, 1 << 40, "bytes"), ("session_memory_bytes", 64 * MiB, 1 << 40, "bytes"),
           ("session_processes", 8, 4096, "processes"), ("tmp_bytes", MiB, 1 << 40, "bytes"),
           ("workdir_bytes", 16 * MiB, 1 << 40, "bytes"), ("file_bytes", MiB, 1 << 40, "bytes"),
           ("output_chars", 100, 10_000_000, "characters"))
_MAY_BE_NONE = ("cpu_s", "memory_bytes")


def size_words(n: float) -> str:
    """A byte count in words: ``2 GiB``, ``256 MiB``, ``1.5 GiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def _check_range(name: str, value, given: str | None = None, shown=None) -> None:
    """ValueError unless field ``name`` may be ``value``: it names the field (or ``given``, the
    option it came from, showing ``shown``), the value and the range allowed."""
    low, high, unit = next(r[1:] for r in _RANGES if r[0] == name)
    whole = name != "timeout_s"
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not low <= value <= high:
        if unit == "bytes":
            allowed = f"{'a size' if given else 'an integer of bytes'} from {size_words(low)} to {size_words(high)}"
        else:
            allowed = f"{'an integer' if whole else 'a number'} from {low:,} to {high:,} {unit}"
        none = " (or None)" if name in _MAY_BE_NONE and not given else ""
        what = repr(value) if given is None else f"{shown!r}" + (f" ({size_words(value)})" if unit == "bytes" else "")
        raise ValueError(f"{given or name}: {what} not allowed; {allowed}{none}")


@dataclass(frozen=True)
class Limits:
    """What a session's code may use, per block and per session (what holds
    on a host: :attr:`Sandbox.enforced`).

    Per block (one call of the tool):
        timeout_s: wall-clock seconds, then the block's whole pid namespace is killed (60).
        cpu_s: CPU seconds of each process (RLIMIT_CPU); None: twice ``timeout_s``.
        tmp_bytes: the block's ``/tmp`` (a tmpfs of this size; 256 MiB).
        file_bytes: the largest file a block may write (RLIMIT_FSIZE; 256 MiB).
        output_chars: the output shown (stdout and stderr together); the rest is counted.

    Per session (every block's processes together):
        session_memory_bytes: memory of all the session's processes at once, their ``/tmp`` files
            included (a memory cgroup; 2 GiB). ``luca-gym --sandbox-memory`` sets it.
        memory_bytes: address space of each process (RLIMIT_AS); None: ``session_memory_bytes``
            (a larger allocation fails at once). Where no memory cgroup holds, the only memory limit.
        session_processes: processes and threads of the session at once (a pids cgroup; 128); where
            none holds, RLIMIT_NPROC of uid 65534, shared by every session of the host.
        workdir_bytes: the working folder, kept between blocks (a filesystem of this size; 1 GiB).

    ValueError names a field, its value and the range allowed."""

    timeout_s: float = 60.0
    cpu_s: int | None = None
    session_memory_bytes: int = 2 * GiB
    memory_bytes: int | None = None
    session_processes: int = 128
    tmp_bytes: int = 256 * MiB
    workdir_bytes: int = GiB
    file_bytes: int = 256 * MiB
    output_chars: int = 20_000

    def __post_init__(self):
        for name, *_ in _RANGES:
            if not (getattr(self, name) is None and name in _MAY_BE_NONE):
                _check_range(name, getattr(self, name))

    @property
    def process_cpu_s(self) -> int:
        """Each process's CPU seconds: ``cpu_s``, or twice ``timeout_s``."""
        return self.cpu_s if self.cpu_s is not None else max(1, math.ceil(2 * self.timeout_s))

    @property
    def process_memory_bytes(self) -> int:
        """Each process's address space: ``memory_bytes``, or ``session_memory_bytes``."""
        return self.memory_bytes if self.memory_bytes is not None else self.session_memory_bytes

    def memory_words(self, enforced: dict | None = None) -> str:
        """The memory limit that holds, in words (``enforced``: :attr:`Sandbox.enforced`; None: all hold)."""
        if enforced is None or enforced.get("session_memory"):
            return (f"{size_words(self.session_memory_bytes)} for all the session's processes together, their /tmp "
                    f"files included, and {size_words(self.process_memory_bytes)} for any one process")
        return (f"{size_words(self.process_memory_bytes)} per process; this host offers no memory cgroup, so the "
                f"session's processes together are not capped")

    def describe(self, enforced: dict | None = None) -> str:
        """The limits in words (a tool's description states them); ``enforced``:
        what holds on this host (:attr:`Sandbox.enforced`), None: every limit."""
        holds = (lambda key: True) if enforced is None else (lambda key: bool(enforced.get(key)))
        processes = (f"{self.session_processes} processes and threads at once" if holds("session_processes") else
                     f"{self.session_processes} processes of the sandbox's user, shared with every session on this "
                     f"host (no pids cgroup here)")
        workdir = (f"the working folder up to {size_words(self.workdir_bytes)}" if holds("workdir") else
                   "the working folder without a quota (none can be mounted here)")
        return (f"per block {self.timeout_s:g} s wall clock, {self.process_cpu_s} s CPU per process, /tmp up to "
                f"{size_words(self.tmp_bytes)}, files up to {size_words(self.file_bytes)}, output up to "
                f"{self.output_chars:,} characters; per session: memory {self.memory_words(enforced)}; {processes}; "
                f"{workdir}")


def parse_size(value, name: str = "size") -> int:
    """Bytes of ``value``: an integer, or text such as ``512M``, ``2G``,
    ``8G``, ``1.5GiB`` or ``1048576`` (K, M, G, T: powers of 1024; B, iB
    optional). ValueError names ``name``, the value and the forms allowed."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text:
        for suffix in ("ib", "b"):
            if text.endswith(suffix) and len(text) > len(suffix):
                text = text[:-len(suffix)]
                break
        unit = text[-1] if text[-1] in _SIZE_UNITS else ""
        try:
            number = float(text[:len(text) - len(unit)])
        except ValueError:
            number = float("nan")
        if math.isfinite(number) and number >= 0:
            return int(number * _SIZE_UNITS[unit])
    raise ValueError(f"{name}: {value!r} not allowed; a size such as 512M, 2G or 8G (K, M, G, T: powers of 1024), "
                     "or an integer of bytes")


def parse_seconds(value, name: str = "seconds") -> float:
    """Seconds of ``value``: a number, or text such as ``60`` or ``90s``.
    ValueError names ``name``, the value and what is allowed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("s")
        try:
            seconds = float(text)
        except ValueError:
            seconds = float("nan")
        if math.isfinite(seconds):
            return seconds
    raise ValueError(f"{name}: {value!r} not allowed; seconds, a number such as 60 or 90s")


def sandbox_limits(limits: Limits | None = None, *, sandbox_memory=None, sandbox_time=None) -> Limits | None:
    """``limits`` (default :class:`Limits`) with the session's memory
    (``sandbox_memory``: a size, :func:`parse_size`) and each block's wall
    clock (``sandbox_time``: seconds) set where given; None where nothing is.
    ValueError names ``limits``, ``sandbox_memory`` or ``sandbox_time``."""
    if limits is not None and not isinstance(limits, Limits):
        raise ValueError(f"limits: {type(limits).__name__} not allowed; a Limits or None")
    if sandbox_memory is None and sandbox_time is None:
        return limits
    changes = {}
    if sandbox_memory is not None:
        changes["session_memory_bytes"] = parse_size(sandbox_memory, "sandbox_memory")
        _check_range("session_memory_bytes", changes["session_memory_bytes"], "sandbox_memory", sandbox_memory)
    if sandbox_time is not None:
        changes["timeout_s"] = parse_seconds(sandbox_time, "sandbox_time")
        _check_range("timeout_s", changes["timeout_s"], "sandbox_time", sandbox_time)
    return replace(limits or Limits(), **changes)


# Runs inside: the working directory (a block of the agent's; not for the host's own code, :meth:`Sandbox.run_host_code`,
# which the agent's files must not shadow) and the host's site-packages on the path, the block from stdin.
_RUNNER = ("import sys; sys.path[:] = {first!r} + sys.path + {packages!r}; sys.argv = ['<block>']; "
           "exec(compile(sys.stdin.read(), '<block>', 'exec'), {{'__name__': '__main__'}})")
# What the python tool's description names when it imports in the sandbox (the analysis extra's, and the core's)
ANALYSIS_PACKAGES = ("numpy", "pandas", "pyarrow", "scipy", "statsmodels")
ANALYSIS_EXTRA = ("pandas", "scipy", "statsmodels")  # pyproject.toml's "analysis" extra (numpy and pyarrow: the core's)
INSTALL_ANALYSIS = 'pip install -e ".[analysis]"'


def check_analysis_packages() -> None:
    """ValueError (one line, with the install line) where a package of the
    ``analysis`` extra is missing: ``luca-gym eval|mcp --python`` checks it
    before anything runs, so that a model's turns are not spent on
    ModuleNotFoundError (the sandbox's code imports the host's packages)."""
    missing = [name for name in ANALYSIS_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"python: {_and(missing)} {'is' if len(missing) == 1 else 'are'} not installed, and the sandboxed "
                         f"code would have only {_and([p for p in ANALYSIS_PACKAGES if p not in missing])}; install the "
                         f"analysis packages: {INSTALL_ANALYSIS}")
# Checks a fresh sandbox: the interpreter starts, runs as 65534 under the seccomp filter, cannot import the
# hidden packages; then says which analysis packages import.
_PROBE = ("import importlib, os, sys\n"
          "assert os.getuid() == os.getgid() == {uid}, 'not uid 65534'\n"
          "status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines() if ':' in line)\n"
          "assert status['Seccomp'].strip() == '2' and status['NoNewPrivs'].strip() == '1', 'no seccomp filter'\n"
          "for name in {hidden!r}:\n"
          "    try:\n"
          "        importlib.import_module(name)\n"
          "    except ImportError:\n"
          "        continue\n"
          "    sys.exit('the host package ' + name + ' is importable')\n"
          "found = []\n"
          "for name in {packages!r}:\n"
          "    try:\n"
          "        importlib.import_module(name)\n"
          "    except Exception:\n"
          "        continue\n"
          "    found.append(name)\n"
          "print('importable', *found)\n"
          "print('sandbox ok')\n")
# The unshare fallback, run as root in the new namespaces: a tmpfs root, the binds, chroot, setpriv.
# Arguments: root, then (source, target, mode) triples, then "--", then the command. sh stays pid 1
# (the command is not its last), so killing it (our process group) ends the namespace.
_FALLBACK = r"""set -e
root=$1; shift
mount -t tmpfs -o mode=755,size=4m tmpfs "$root"
mkdir -p "$root/proc" "$root/dev" "$root/tmp"
chmod 1777 "$root/tmp"
mount -t tmpfs -o "mode=1777,nosuid,nodev,size=$TMP_BYTES" tmpfs "$root/tmp"
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


# The launcher joins the session's cgroups (each cgroup.procs file, then "--", then the command) before exec:
# every process of the block is then born in them. A join that fails runs nothing.
_JOIN = 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _cgroup_mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fs type, root of the hierarchy mounted, mount point, super options) of this process's cgroup mounts."""
    mounts = []
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((tail[0], fields[3], fields[4], set(tail[2].split(","))))
    return mounts


def _own_cgroups() -> dict[str, str]:
    """{controller ("" for v2): this process's cgroup} from /proc/self/cgroup."""
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _folder_of(mount: tuple, path: str) -> str:
    """The folder of cgroup ``path`` under ``mount`` (:func:`_cgroup_mounts`); the mount point where it is not there."""
    _, root, point, _ = mount
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    folder = os.path.normpath(os.path.join(point, path.lstrip("/")))
    return folder if folder.startswith(point) and os.path.isdir(folder) else point


class _SessionCgroup:
    """The session's cgroup: memory (``session_memory_bytes``, swap none) and
    pids (``session_processes``) capped, cgroup v2 where the unified hierarchy
    offers both, else cgroup v1 (a folder a controller, each on its own). It
    is made under this process's own cgroup, so the host's limits bind it too
    (v2: beside it, under its parent, where its own holds processes and so
    cannot enable controllers for children). :attr:`enforced` says which holds
    (None: neither; :attr:`why` says why)."""

    def __init__(self, name: str, limits: Limits):
        self.folders: list[str] = []  # made here; release() removes them
        self.procs: list[str] = []  # the cgroup.procs files a block's launcher joins
        self.events: str | None = None  # the file counting the memory cgroup's OOM kills
        self.counters: dict[str, str] = {}  # {"memory_peak_bytes" | "processes": the file that counts it}
        self.enforced = {"session_memory": None, "session_processes": None}
        self.why = None
        if os.geteuid() != 0:
            self.why = "cgroups need root"
            return
        try:
            mounts, own = _cgroup_mounts(), _own_cgroups()
        except (OSError, ValueError) as exc:
            self.why = f"cgroups unreadable ({exc})"
            return
        if not self._v2(name, limits, mounts, own):
            self._v1(name, limits, mounts, own)
        if not self.procs:
            self.why = "no writable cgroup (v2 with memory and pids, or v1 memory or pids) under this process's own"

    def _v2(self, name: str, limits: Limits, mounts: list, own: dict) -> bool:
        for mount in mounts:
            if mount[0] != "cgroup2" or "" not in own:
                continue
            start = _folder_of(mount, own[""])
            parents = [start] + ([os.path.dirname(start)] if start != mount[2] else [])
            for i, parent in enumerate(parents):
                folder = os.path.join(parent, name)
                try:
                    if not {"memory", "pids"} <= set(_read(f"{parent}/cgroup.controllers").split()):
                        continue
                    enabled = set(_read(f"{parent}/cgroup.subtree_control").split())
                    if i > 0 and not {"memory", "pids"} <= enabled:
                        continue  # another's cgroup: its configuration is not ours to change
                    if not {"memory", "pids"} <= enabled:  # fails (EBUSY) where it holds processes
                        missing = " ".join(f"+{c}" for c in ("memory", "pids") if c not in enabled)
                        _write(f"{parent}/cgroup.subtree_control", missing)
                    os.mkdir(folder)
                    self.folders.append(folder)
                    _write(f"{folder}/memory.max", str(limits.session_memory_bytes))
                    if os.path.exists(f"{folder}/memory.swap.max"):
                        _write(f"{folder}/memory.swap.max", "0")
                    _write(f"{folder}/pids.max", str(limits.session_processes))
                except OSError:
                    self.release()
                    continue
                self.procs, self.events = [f"{folder}/cgroup.procs"], f"{folder}/memory.events"
                self.counters = {"memory_peak_bytes": f"{folder}/memory.peak", "processes": f"{folder}/pids.current"}
                self.enforced = dict.fromkeys(self.enforced, "cgroup v2")
                return True
        return False

    def _v1(self, name: str, limits: Limits, mounts: list, own: dict) -> None:
        for controller, key in (("memory", "session_memory"), ("pids", "session_processes")):
            mount = next((m for m in mounts if m[0] == "cgroup" and controller in m[3]), None)
            if mount is None or controller not in own:
                continue
            folder = os.path.join(_folder_of(mount, own[controller]), name)
            try:
                os.mkdir(folder)
            except OSError:
                continue
            self.folders.append(folder)
            try:
                if controller == "memory":
                    _write(f"{folder}/memory.limit_in_bytes", str(limits.session_memory_bytes))
                    if os.path.exists(f"{folder}/memory.memsw.limit_in_bytes"):  # swap accounting: no swap either
                        _write(f"{folder}/memory.memsw.limit_in_bytes", str(limits.session_memory_bytes))
                    self.events = f"{folder}/memory.oom_control"
                    self.counters["memory_peak_bytes"] = f"{folder}/memory.max_usage_in_bytes"
                else:
                    _write(f"{folder}/pids.max", str(limits.session_processes))
                    self.counters["processes"] = f"{folder}/pids.current"
            except OSError:
                self.folders.remove(folder)
                _remove_cgroup(folder)
                continue
            self.procs.append(f"{folder}/cgroup.procs")
            self.enforced[key] = "cgroup v1"

    def oom_kills(self) -> int:
        """The OOM kills in the session's memory cgroup so far (0 without one)."""
        try:
            for line in _read(self.events).splitlines() if self.events else ():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def usage(self) -> dict:
        """{"memory_peak_bytes", "processes"}: the most memory the session's processes held at once and its
        processes now, as the cgroup counts them (None where it does not)."""
        usage = dict.fromkeys(("memory_peak_bytes", "processes"))
        for key, path in self.counters.items():
            try:
                usage[key] = int(_read(path))
            except (OSError, ValueError):
                pass
        return usage

    def kill(self, wait_s: float = 5.0) -> None:
        """Kill every process in the session's cgroups, and wait (up to ``wait_s``) until none is left."""
        deadline = time.monotonic() + wait_s
        for folder in self.folders:
            while _kill_cgroup(folder) and time.monotonic() < deadline:
                time.sleep(0.01)

    def release(self) -> None:
        """Kill what is left in the session's cgroups and remove them."""
        for folder in reversed(self.folders):
            _remove_cgroup(folder)
        self.folders, self.procs, self.events, self.counters = [], [], None, {}


def _kill_cgroup(folder: str) -> bool:
    """SIGKILL every process in cgroup ``folder``; whether any was there (a killed process leaves a moment later)."""
    try:
        pids = [int(p) for p in _read(f"{folder}/cgroup.procs").split()]
    except (OSError, ValueError):
        return False
    if pids and os.path.exists(f"{folder}/cgroup.kill"):  # v2, Linux 5.14+: the whole cgroup at once
        try:
            _write(f"{folder}/cgroup.kill", "1")
            return True
        except OSError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return bool(pids)


def _remove_cgroup(folder: str, wait_s: float = 5.0) -> None:
    """Kill what is left in ``folder`` and remove it (a killed process leaves it a moment later)."""
    deadline = time.monotonic() + wait_s
    while True:
        _kill_cgroup(folder)
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)


def _mount_workdir(folder: str, image: str, size: int) -> str | None:
    """Mount a filesystem of ``size`` bytes, owned by uid 65534, on ``folder``
    (root only): an ext4 image (``image``, sparse: the disk it takes grows
    with what is written, up to ``size``) on a loop device, else a tmpfs (its
    files in memory, charged to the session's memory cgroup as a block writes
    them). Returns what was mounted, or None where neither could be."""
    run = functools.partial(subprocess.run, check=True, capture_output=True, timeout=60,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    try:
        with open(image, "wb") as f:
            f.truncate(size)
        run([_MKFS, "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", f"root_owner={UNPRIVILEGED}:{UNPRIVILEGED}", image])
        run([_MOUNT, "-o", "loop,nosuid,nodev", image, folder])
    except (OSError, subprocess.SubprocessError):
        _remove_file(image)
    else:
        try:
            os.rmdir(os.path.join(folder, "lost+found"))  # mkfs's: not the agent's to see
        except OSError:
            pass
        return "ext4 image"
    try:
        run([_MOUNT, "-t", "tmpfs", "-o", f"size={size},mode=700,uid={UNPRIVILEGED},gid={UNPRIVILEGED},nosuid,nodev",
             "tmpfs", folder])
    except (OSError, subprocess.SubprocessError):
        return None
    return "tmpfs"


def _remove_file(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


FOLDER_PREFIX = "luca-sandbox-"  # a session's folder under tempfile.gettempdir(): the prefix and a random name
_RECORD = "host.json"  # in the session's folder: the host that owns it and what it made (sweep_stale reads it)
_LIVE: set = set()  # the _Held of every sandbox of this process not yet released (a signal releases them)


class _Held:
    """What a sandbox holds on the host, released once and in order by
    :meth:`release` (``weakref.finalize``: at close, collection or exit; a
    SIGTERM or SIGHUP too, :func:`_watch_signals`): the processes left in
    its cgroups, the working folder's mount and its loop device, the
    cgroups, the session's folder. :meth:`record` writes them down in the
    folder, with the host's pid, for :func:`sweep_stale` to find should the
    host die without releasing them (SIGKILL)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.cgroup: _SessionCgroup | None = None
        self.mount: str | None = None  # the working folder's mount point
        self.image: str | None = None  # the ext4 image behind it
        self.released = False
        _LIVE.add(self)

    def record(self) -> None:
        held = {"pid": os.getpid(), "start": _start_time(os.getpid()), "pid_namespace": _pid_namespace(),
                "cgroups": self.cgroup.folders if self.cgroup else [],
                "mount": os.path.join(self.folder, "work"), "image": self.image}  # the mount point, mounted or not yet
        path = os.path.join(self.folder, _RECORD)
        with open(path + ".new", "w", encoding="utf-8") as f:
            json.dump(held, f)
        os.replace(path + ".new", path)

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        _LIVE.discard(self)
        if self.cgroup is not None:
            self.cgroup.kill(wait_s=15.0)  # all gone before the unmount, which else is lazy and keeps the loop device a while
        if self.mount is not None:
            _unmount(self.mount, self.image)
        if self.cgroup is not None:
            self.cgroup.release()
        shutil.rmtree(self.folder, True)


def _unmount(point: str, image: str | None) -> None:
    """Unmount ``point`` (lazily where something still holds it) and detach any loop device left on ``image``."""
    for lazy in ([], ["-l"]):
        if subprocess.run([_UMOUNT, *lazy, point], capture_output=True, timeout=60).returncode == 0:
            break
    if image is not None and os.access(_LOSETUP, os.X_OK):
        found = subprocess.run([_LOSETUP, "-j", image], capture_output=True, text=True, timeout=60)
        for line in found.stdout.splitlines():
            subprocess.run([_LOSETUP, "-d", line.split(":", 1)[0]], capture_output=True, timeout=60)


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), or None where there is no such process: with the
    pid, a process no other can pass for."""
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _mounted() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return {line.split()[4] for line in f}


def sweep_stale(folder: str | None = None) -> list[str]:
    """Release what sandboxes of hosts that are gone (killed before they could
    clean up) left under ``folder`` (default :func:`tempfile.gettempdir`): in
    each session folder whose recorded host no longer runs, kill the
    processes left in its cgroups and remove them, unmount its working
    folder and detach its loop device, and remove the folder. A folder
    without a record, whose host runs, or whose host is of another pid
    namespace (its pid means nothing here), is left alone. Returns the folders
    removed. Every sandbox runs it as it starts."""
    folder = folder or tempfile.gettempdir()
    removed = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(FOLDER_PREFIX)]
    except OSError:
        return removed
    for name in names:
        home = os.path.join(folder, name)
        try:
            held = json.loads(_read(os.path.join(home, _RECORD)))
            pid, start = int(held["pid"]), held["start"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours, or being made
        if held.get("pid_namespace") != _pid_namespace():
            continue  # a host of another pid namespace (a container sharing the folder): its pid means nothing here
        if _start_time(pid) is not None and _start_time(pid) == start:
            continue  # its host runs
        for cgroup in held.get("cgroups") or []:
            if isinstance(cgroup, str) and cgroup.startswith("/sys/fs/cgroup/") and os.path.basename(cgroup) == name:
                _remove_cgroup(cgroup)
        mount, image = held.get("mount"), held.get("image")
        if isinstance(mount, str) and mount == os.path.join(home, "work") and mount in _mounted():
            _unmount(mount, image if isinstance(image, str) and image == os.path.join(home, "work.img") else None)
        shutil.rmtree(home, True)
        removed.append(home)
    return removed


def _release_all() -> None:
    for held in list(_LIVE):
        try:
            held.release()
        except Exception:  # one that fails leaves the others to release; the sweep finds it later
            pass


def _on_signal(signum, frame) -> None:
    """Release every sandbox of this process, then die of the signal as before."""
    _release_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def _signals_to_the_main_thread():
    """While a thread other than the main one serves a block, SIGTERM and SIGHUP are blocked in it, so that the
    kernel hands them to the main thread, where Python runs :func:`_on_signal`: one taken by this thread would
    wait, unhandled, until the main thread next ran Python (a host asleep in its main thread would not die).
    The block's processes are started before, so they do not inherit the mask."""
    if threading.current_thread() is threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _watch_signals() -> None:
    """SIGTERM and SIGHUP release this process's sandboxes before it dies (atexit does at a normal exit), where
    nothing else handles them and this is the main thread (only it may set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _on_signal)


def _and(names, word: str = "and") -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


@functools.cache
def _disable_userns() -> list[str]:
    """``["--disable-userns"]`` where this bubblewrap has it (0.8 and later); older ones run without it, the seccomp
    filter's refusal of the namespace flags holding alone."""
    try:
        shown = subprocess.run([_BWRAP, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--disable-userns"] if "--disable-userns" in shown.stdout + shown.stderr else []


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
    into the latter before the first block), the session's cgroup and the
    working folder's filesystem, and :meth:`run`.

    Arguments: ``limits`` (:class:`Limits`), ``isolation`` ("auto": bubblewrap,
    else unshare; or one of them), ``hidden`` (packages the code must not
    import; default the host package). Raises :class:`SandboxUnavailable`
    where the isolation does not work (the message says why), ValueError for
    a bad argument. :meth:`close` (or garbage collection) kills what is left,
    removes the cgroup, unmounts the working folder and removes the folders.

    :attr:`enforced` says how each session limit holds on this host:
    ``{"session_memory": "cgroup v2" | "cgroup v1" | None, "session_processes":
    the same, "tmp": "tmpfs", "workdir": "ext4 image" | "tmpfs" | None}``
    (None: it does not hold; :meth:`describe` says what holds instead, and
    :attr:`unenforced_why` why).
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
        try:
            sandbox_seccomp.architecture()
        except sandbox_seccomp.SeccompUnavailable as exc:  # before anything is made on the host
            raise SandboxUnavailable(f"python sandbox: {exc}; the tool cannot start without its seccomp filter") from None
        sweep_stale()  # what a host killed before it could clean up left behind
        _watch_signals()
        self._dir = tempfile.mkdtemp(prefix=FOLDER_PREFIX)  # a random name: nothing of the session's seed
        self._held = _Held(self._dir)
        self._finalizer = weakref.finalize(self, self._held.release)
        os.chmod(self._dir, 0o711)  # uid 65534 may pass through, not list
        self._held.record()  # before anything else is made: a host killed from here on is swept
        self.work_dir = os.path.join(self._dir, "work")
        self.release_dir = os.path.join(self._dir, RELEASE)
        os.makedirs(self.work_dir)
        workdir = None
        if self._root:
            self._held.image = os.path.join(self._dir, "work.img")
            self._held.record()
            workdir = _mount_workdir(self.work_dir, self._held.image, self.limits.workdir_bytes)
            if workdir is not None:
                self._held.mount = self.work_dir
            os.chown(self.work_dir, UNPRIVILEGED, UNPRIVILEGED)
            os.chmod(self.work_dir, 0o700)
        os.makedirs(os.path.join(self.work_dir, RELEASE))  # the release's mount point (root's: the code cannot remove it)
        os.makedirs(self.release_dir, mode=0o755)
        self._cgroup = self._held.cgroup = _SessionCgroup(os.path.basename(self._dir), self.limits)
        self._held.record()
        self._seccomp = os.path.join(self._dir, "seccomp.bpf")  # the filter bubblewrap loads (root's; passed as an fd)
        with open(self._seccomp, "wb") as f:
            f.write(sandbox_seccomp.program())
        self.enforced = {**self._cgroup.enforced, "tmp": "tmpfs", "workdir": workdir}
        why = {"session_memory": self._cgroup.why, "session_processes": self._cgroup.why,
               "workdir": "neither a loop device nor a tmpfs mount works" if self._root else "mounting a filesystem needs root"}
        self.unenforced_why = {k: why[k] for k, v in self.enforced.items() if v is None}
        self._lock = threading.Lock()
        key = (self.isolation, self.interpreter, tuple(self.packages), self.hidden)
        if key not in _PROBED:
            probe = self._run(_PROBE.format(uid=UNPRIVILEGED, hidden=list(self.hidden), packages=list(ANALYSIS_PACKAGES)),
                              Limits(timeout_s=60.0), agent=False)
            found = next((line.split()[1:] for line in probe["output"].splitlines() if line.startswith("importable")), [])
            _PROBED[key] = (None if probe["exit_status"] == 0 and "sandbox ok" in probe["output"] else
                            f"the {self.isolation} sandbox failed its check (exit status {probe['exit_status']}): "
                            f"{probe['output'][-400:].strip()}", tuple(found))
        why_not, self.importable = _PROBED[key]
        if why_not is not None:
            self.close()
            raise SandboxUnavailable(f"python sandbox: {why_not}; the tool cannot start")

    def packages_words(self) -> str:
        """Which of :data:`ANALYSIS_PACKAGES` the sandbox's interpreter imports, in words (the python tool's
        description says it): ``numpy, pandas, pyarrow, scipy and statsmodels are installed``, or those that
        are with the others named as missing."""
        missing = [p for p in ANALYSIS_PACKAGES if p not in self.importable]
        if not missing:
            return f"{_and(ANALYSIS_PACKAGES)} are installed"
        if not self.importable:
            return f"none of {_and(ANALYSIS_PACKAGES, 'or')} is installed (only the standard library)"
        are = "is" if len(self.importable) == 1 else "are"
        one = len(missing) == 1
        return (f"{_and(self.importable)} {are} installed ({_and(missing)} {'is' if one else 'are'} not: importing "
                f"{'it' if one else 'them'} fails)")

    def describe(self) -> str:
        """The limits in words as they hold on this host (:meth:`Limits.describe` of :attr:`enforced`)."""
        return self.limits.describe(self.enforced)

    def memory_words(self) -> str:
        """The memory limit that holds here, in words (:meth:`Limits.memory_words`)."""
        return self.limits.memory_words(self.enforced)

    def usage(self) -> dict:
        """``{"memory_peak_bytes", "processes"}``: the most memory the session's
        processes held at once so far and how many run now, as its cgroup counts
        them (None where no cgroup counts it)."""
        return self._cgroup.usage()

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
        """Kill what is left of the session, remove its cgroup, unmount the working folder and remove it and
        the release (the sandbox cannot run afterwards)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has released the session."""
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

    def _command(self, seccomp_fd: int | None = None, agent: bool = True) -> list[str]:
        """The command that runs a block: ``agent`` (the working folder first on the path) or the host's own
        code; ``seccomp_fd``: the open filter bubblewrap loads (the fallback's interpreter loads it itself)."""
        packages = [f"{PACKAGES}/{i}" for i in range(len(self.packages))]
        runner = _RUNNER.format(first=[WORKDIR] if agent else [], packages=packages)
        if self.isolation == "unshare":
            runner = sandbox_seccomp.INSTALL.format(program=sandbox_seccomp.program().hex()) + runner
        python = [self.interpreter, "-I", "-S", "-c", runner]
        binds = self._binds()
        env = self._environment()
        tmp = ["--size", str(self.limits.tmp_bytes), "--tmpfs"]  # each block's /tmp (and /dev/shm) a tmpfs of its size
        if self.isolation == "bwrap":
            # --disable-userns: a nested user namespace would hold every capability inside it
            staged, command = [], [_BWRAP, "--unshare-all", "--unshare-user", *_disable_userns(), "--die-with-parent",
                                   "--new-session", "--uid", str(UNPRIVILEGED), "--gid", str(UNPRIVILEGED), "--clearenv",
                                   "--seccomp", str(seccomp_fd), "--proc", "/proc", "--dev", "/dev",
                                   *tmp, "/tmp", *tmp, "/dev/shm", "--remount-ro", "/dev"]
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
        return [_UNSHARE, "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--fork", "--kill-child", "--propagation",
                "private", "--", "/usr/bin/env", f"CHROOT={_CHROOT}", f"TMP_BYTES={self.limits.tmp_bytes}", "/bin/sh", "-c",
                _FALLBACK, "sh", root, *[x for bind in binds for x in bind], "--", *inside]

    def _limited(self, command: list[str], limits: Limits) -> list[str]:
        """``command`` under the limits, by ``prlimit`` (soft = hard, so the code cannot raise them; no
        Python runs between fork and exec: the host may be multithreaded), in the session's cgroups. Where
        the pids cgroup holds, RLIMIT_NPROC is left as it is: it counts uid 65534's processes host-wide,
        every session's together."""
        nproc = [] if self.enforced["session_processes"] else [f"--nproc={limits.session_processes}"]
        limited = [_PRLIMIT, f"--as={limits.process_memory_bytes}", f"--cpu={limits.process_cpu_s}", *nproc,
                   f"--fsize={limits.file_bytes}", "--core=0", "--", *command]
        return ["/bin/sh", "-c", _JOIN, "sh", *self._cgroup.procs, "--", *limited] if self._cgroup.procs else limited

    # -- running ------------------------------------------------------------------------
    def run(self, code: str) -> dict:
        """Run one block. Returns ``{"output", "truncated", "exit_status",
        "timed_out", "limit"}``: ``limit`` names the limit that stopped the
        block ("time", "cpu", "memory": the session's cgroup killed a process,
        or one ran out of its address space) or is None. Whatever the block
        started is killed when it ends, the session's whole cgroup. ValueError:
        code not a string, or the sandbox closed."""
        if not isinstance(code, str):
            raise ValueError(f"code: expected a string, got {type(code).__name__}")
        if self.closed:
            raise ValueError("code: the sandbox is closed")
        with self._lock:
            return self._run(code, self.limits)

    def run_host_code(self, code: str, output_bytes: int) -> dict:
        """Run the host's own ``code`` as a block (:meth:`run`'s answer), under
        the session's limits but without the working folder on the import path
        (the agent's files cannot stand in for a module it imports), its output
        kept up to ``output_bytes`` bytes: how the host reads what the agent
        wrote (a phenotype file) without decoding it in its own memory."""
        if self.closed:
            raise ValueError("code: the sandbox is closed")
        with self._lock:
            return self._run(code, self.limits, agent=False, output_bytes=output_bytes)

    def _run(self, code: str, limits: Limits, agent: bool = True, output_bytes: int | None = None) -> dict:
        oom_kills = self._cgroup.oom_kills()
        cap = 4 * limits.output_chars + 4 if output_bytes is None else output_bytes  # bytes kept (UTF-8: 4 a character)
        program = os.open(self._seccomp, os.O_RDONLY | os.O_CLOEXEC) if self.isolation == "bwrap" else None
        try:
            process = subprocess.Popen(self._limited(self._command(program, agent), limits), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                       close_fds=True, pass_fds=() if program is None else (program,), cwd="/",
                                       env={"PATH": "/usr/bin:/bin"})  # its own process group: a timeout kills it whole
        finally:
            if program is not None:
                os.close(program)
        pipes = _Pipes(process, code.encode("utf-8", "surrogatepass"), cap)
        try:
            with _signals_to_the_main_thread():
                timed_out = not pipes.exchange(time.monotonic() + limits.timeout_s)
        finally:
            # Every process of the session dies before the pipes are touched again, whatever a block did to
            # its pid namespace; only then is the rest of the output read (to its end, or for a moment).
            _kill(process)
            self._cgroup.kill()
            _reap(process)
            pipes.drain(time.monotonic() + 2.0)
            pipes.close()
        text = pipes.kept.decode("utf-8", "replace")
        if output_bytes is not None:
            return {"output": text, "truncated": pipes.dropped > 0, "exit_status": None if timed_out else process.returncode,
                    "timed_out": timed_out, "limit": "time" if timed_out else None}
        truncated = pipes.dropped > 0 or len(text) > limits.output_chars
        if truncated:
            text = text[:limits.output_chars] + (f"\n[output truncated to {limits.output_chars:,} characters; "
                                                 f"{len(pipes.kept) + pipes.dropped:,} bytes in all]")
        status = process.returncode
        signalled = 0 if status is None else -status if status < 0 else status - 128 if status > 128 else 0
        limit = ("time" if timed_out else "memory" if self._cgroup.oom_kills() > oom_kills  # the cgroup killed one
                 else "cpu" if signalled in (signal.SIGXCPU, signal.SIGKILL)
                 else "memory" if "MemoryError" in text[-2000:] else None)
        return {"output": text, "truncated": truncated, "exit_status": None if timed_out else status, "timed_out": timed_out,
                "limit": limit}


class _Pipes:
    """A block's stdin (``data``, written as the block reads it) and its stdout
    (kept up to ``cap`` bytes, the rest counted in :attr:`dropped`), served
    from the calling thread with non-blocking reads: no reader thread can be
    left blocked in a read that a surviving process keeps open."""

    def __init__(self, process: subprocess.Popen, data: bytes, cap: int):
        self.process, self.cap = process, cap
        self.kept, self.dropped, self.eof = bytearray(), 0, False
        self._data = memoryview(data)
        self._out, self._in = process.stdout.fileno(), process.stdin.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)
        if self._data:
            self._selector.register(self._in, selectors.EVENT_WRITE)
        else:
            self._close_stdin()

    def exchange(self, deadline: float) -> bool:
        """Serve the pipes until the block has exited and its output ended (True), or ``deadline`` (False).
        A block whose first process exited while another still holds the output gets a second's grace."""
        exited = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                return False
            if self.process.poll() is not None:
                if self.eof:
                    return True
                exited = exited or now
                if now - exited > 1.0:
                    return True
            elif self.eof:
                try:
                    self.process.wait(timeout=deadline - now)
                except subprocess.TimeoutExpired:
                    return False
                return True
            self._serve(min(deadline - now, 0.1))

    def drain(self, deadline: float) -> None:
        """Read what is left of the output, to its end or ``deadline`` (the writers are dead by now)."""
        if self._in is not None:
            self._close_stdin()
        while not self.eof and time.monotonic() < deadline:
            self._serve(max(0.0, min(deadline - time.monotonic(), 0.1)))

    def _serve(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            if key.fd == self._out:
                try:
                    chunk = os.read(self._out, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.eof = True
                    self._selector.unregister(self._out)
                    continue
                room = max(self.cap - len(self.kept), 0)
                self.kept.extend(chunk[:room])
                self.dropped += max(len(chunk) - room, 0)
            else:
                try:
                    written = os.write(self._in, self._data[:65536])
                except BlockingIOError:
                    continue
                except OSError:  # the block stopped reading (exited, or closed its stdin)
                    written = len(self._data)
                self._data = self._data[written:]
                if not self._data:
                    self._close_stdin()

    def _close_stdin(self) -> None:
        if self._in in self._selector.get_map():
            self._selector.unregister(self._in)
        self.process.stdin.close()
        self._in = None

    def close(self) -> None:
        """Close both pipes (no other thread reads them)."""
        if self._in is not None:
            self._close_stdin()
        self._selector.close()
        self.process.stdout.close()


def _kill(process: subprocess.Popen) -> None:
    """Kill the block's process group (the launcher and the namespace's pid 1: with it the whole pid namespace;
    the group is still ours: its leader is not reaped yet)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap(process: subprocess.Popen) -> None:
    """Wait for the killed launcher (a process in the kernel's hands a moment longer is left to the next call)."""
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
