"""The session's sandbox, as a world's tool session offers it: :class:`Sandbox`
(one per session: its folders, its cgroup, its working folder's filesystem,
the self-check at its start, :meth:`~Sandbox.run` and
:meth:`~Sandbox.run_host_code`, :meth:`~Sandbox.close`), and the python
tool's front: which analysis packages the sandboxed code imports
(:meth:`~Sandbox.packages_words`) and the one-line refusal where they are
missing (:func:`check_analysis_packages`).

A module of its own because it is the one public object the rest of the
package serves: it puts together the limits (:mod:`~luca_gym.sandbox.limits`),
the cgroup (:mod:`~luca_gym.sandbox.cgroups`), the working folder
(:mod:`~luca_gym.sandbox.mounts`), what it holds and its release
(:mod:`~luca_gym.sandbox.release`), the command
(:mod:`~luca_gym.sandbox.isolation`) and a block's run
(:mod:`~luca_gym.sandbox.processes`), in the order a session needs them.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import tempfile
import threading
import weakref

from luca_gym.sandbox import seccomp as sandbox_seccomp
from luca_gym.sandbox.cgroups import _SessionCgroup
from luca_gym.sandbox.isolation import ISOLATIONS, RELEASE, UNPRIVILEGED, SandboxUnavailable, _choose
from luca_gym.sandbox.limits import Limits
from luca_gym.sandbox.mounts import _mount_workdir
from luca_gym.sandbox.processes import _run_block
from luca_gym.sandbox.release import FOLDER_PREFIX, _Held, _watch_signals, sweep_stale

_PROBED: dict = {}  # (isolation, interpreter, packages, hidden) -> (None (works) or why not, the packages that import)
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


def _and(names, word: str = "and") -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


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
        self.isolation = _choose(isolation, self._root)
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
            probe = _run_block(self, _PROBE.format(uid=UNPRIVILEGED, hidden=list(self.hidden),
                                                   packages=list(ANALYSIS_PACKAGES)), Limits(timeout_s=60.0), agent=False)
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

    def close(self) -> None:
        """Kill what is left of the session, remove its cgroup, unmount the working folder and remove it and
        the release (the sandbox cannot run afterwards)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has released the session."""
        return not self._finalizer.alive

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
            return _run_block(self, code, self.limits)

    def run_host_code(self, code: str, output_bytes: int) -> dict:
        """Run the host's own ``code`` as a block (:meth:`run`'s answer), under
        the session's limits but without the working folder on the import path
        (the agent's files cannot stand in for a module it imports), its output
        kept up to ``output_bytes`` bytes: how the host reads what the agent
        wrote (a phenotype file) without decoding it in its own memory."""
        if self.closed:
            raise ValueError("code: the sandbox is closed")
        with self._lock:
            return _run_block(self, code, self.limits, agent=False, output_bytes=output_bytes)

