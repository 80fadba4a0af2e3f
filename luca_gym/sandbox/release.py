"""What a sandbox holds on the host, and its release however the host goes:
:class:`_Held` (the processes left in its cgroups, the working folder's
mount and loop device, the cgroups, the session's folder; released once and
in order at close, collection, a normal exit, SIGTERM or SIGHUP), the record
it keeps in the session's folder, and :func:`sweep_stale`, which releases
what a host killed before it could (SIGKILL) left behind.

A module of its own because its job is the host's exit, not a block's run:
it owns this process's signal handlers for SIGTERM and SIGHUP
(:func:`_watch_signals`) and the one list of live sandboxes they release,
and :func:`_signals_to_the_main_thread` keeps a block served from another
thread from swallowing them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading

from luca_gym.sandbox.cgroups import _read, _remove_cgroup, _SessionCgroup
from luca_gym.sandbox.mounts import _mounted, _unmount

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
