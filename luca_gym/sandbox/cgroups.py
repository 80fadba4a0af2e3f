"""The session's cgroup: memory and processes capped for all of a session's
blocks together (:class:`_SessionCgroup`, cgroup v2 where the unified
hierarchy offers memory and pids, else one cgroup v1 child a controller),
its counters (OOM kills, peak memory, processes now), and killing and
removing a cgroup (:func:`_kill_cgroup`, :func:`_remove_cgroup`), which the
end of every block, :meth:`~luca_gym.sandbox.Sandbox.close` and
:func:`~luca_gym.sandbox.sweep_stale` use.

A module of its own because it is the one part that reads and writes
``/sys/fs/cgroup`` and ``/proc/self/{mountinfo,cgroup}``: the kernel's two
cgroup interfaces, and a host offering neither, are handled here and nowhere
else (the session asks only :attr:`_SessionCgroup.enforced`).
"""

from __future__ import annotations

import os
import signal
import time

from luca_gym.sandbox.limits import Limits


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
