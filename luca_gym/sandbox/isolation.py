"""How a block is launched in isolation: which isolation this host offers
(:func:`_choose`: bubblewrap, else the ``unshare`` fallback as root, else
:class:`SandboxUnavailable`), what the code sees and as whom (the paths
inside, :data:`UNPRIVILEGED`, :func:`_binds`, :func:`_environment`), the
command line that runs one block (:func:`_command`) and that command under
the per-process limits and in the session's cgroups (:func:`_limited`).

A module of its own because it is the whole of the isolation's design, the
part a review of the sandbox reads first: every namespace, bind, capability
and rlimit of a block is named here, and nothing else builds a command line.
It only builds them; :mod:`luca_gym.sandbox.processes` runs them.
"""

from __future__ import annotations

import functools
import os
import subprocess
from typing import TYPE_CHECKING

from luca_gym.sandbox import seccomp as sandbox_seccomp
from luca_gym.sandbox.limits import Limits

if TYPE_CHECKING:
    from luca_gym.sandbox.session import Sandbox

UNPRIVILEGED = 65534  # nobody / nogroup
WORKDIR = "/analysis"  # the working directory, as the code sees it
RELEASE = "release"  # the read-only data folder inside it
PACKAGES = "/opt/python-packages"  # where the host's site-packages appear (numbered)
ISOLATIONS = ("auto", "bwrap", "unshare")
_BWRAP, _UNSHARE, _SETPRIV, _CHROOT = "/usr/bin/bwrap", "/usr/bin/unshare", "/usr/bin/setpriv", "/usr/sbin/chroot"
_PRLIMIT = "/usr/bin/prlimit"


class SandboxUnavailable(RuntimeError):
    """Neither isolation works on this machine; the message says why (the tool must not start)."""


# Runs inside: the working directory (a block of the agent's; not for the host's own code, :meth:`Sandbox.run_host_code`,
# which the agent's files must not shadow) and the host's site-packages on the path, the block from stdin.
_RUNNER = ("import sys; sys.path[:] = {first!r} + sys.path + {packages!r}; sys.argv = ['<block>']; "
           "exec(compile(sys.stdin.read(), '<block>', 'exec'), {{'__name__': '__main__'}})")
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


def _choose(isolation: str, root: bool) -> str:
    """The isolation to use (``isolation``: one of :data:`ISOLATIONS`; ``root``: whether the host runs as root), or
    SandboxUnavailable saying why none works."""
    reasons = []
    if isolation in ("auto", "bwrap"):
        missing = [p for p in (_BWRAP, _PRLIMIT) + ((_UNSHARE, _SETPRIV) if root else ()) if not os.access(p, os.X_OK)]
        if not missing:
            return "bwrap"
        reasons.append(f"bubblewrap needs {', '.join(missing)}")
    if isolation in ("auto", "unshare"):
        missing = [p for p in (_UNSHARE, _SETPRIV, _CHROOT, _PRLIMIT) if not os.access(p, os.X_OK)]
        if not root:
            reasons.append("the unshare fallback needs root (to build the namespaces before dropping to uid 65534)")
        elif missing:
            reasons.append(f"the unshare fallback needs {', '.join(missing)}")
        else:
            return "unshare"
    raise SandboxUnavailable(f"python sandbox: no isolation works here ({'; '.join(reasons)}); the tool cannot start, "
                             "and agent code is never run without one")


def _binds(sandbox: Sandbox) -> list[tuple[str, str, str]]:
    """(host source, path inside, "ro" or "rw") of everything the code sees but /proc, /dev and /tmp."""
    binds = [("/usr", "/usr", "ro")] + [(path, path, "ro") for path, kind in _system_links() if kind == "dir"]
    if not sandbox.prefix.startswith("/usr/"):
        binds.append((sandbox.prefix, sandbox.prefix, "ro"))
    binds += [(p, f"{PACKAGES}/{i}", "ro") for i, p in enumerate(sandbox.packages)]
    binds += [(sandbox.work_dir, WORKDIR, "rw"), (sandbox.release_dir, f"{WORKDIR}/{RELEASE}", "ro")]
    return binds


def _environment() -> dict:
    threads = "1"  # one BLAS thread: threads count against the process limit
    return {"HOME": WORKDIR, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
            "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads, "NUMEXPR_NUM_THREADS": threads, "TMPDIR": "/tmp"}


def _command(sandbox: Sandbox, seccomp_fd: int | None = None, agent: bool = True) -> list[str]:
    """The command that runs a block: ``agent`` (the working folder first on the path) or the host's own
    code; ``seccomp_fd``: the open filter bubblewrap loads (the fallback's interpreter loads it itself)."""
    packages = [f"{PACKAGES}/{i}" for i in range(len(sandbox.packages))]
    runner = _RUNNER.format(first=[WORKDIR] if agent else [], packages=packages)
    if sandbox.isolation == "unshare":
        runner = sandbox_seccomp.INSTALL.format(program=sandbox_seccomp.program().hex()) + runner
    python = [sandbox.interpreter, "-I", "-S", "-c", runner]
    binds = _binds(sandbox)
    env = _environment()
    tmp = ["--size", str(sandbox.limits.tmp_bytes), "--tmpfs"]  # each block's /tmp (and /dev/shm) a tmpfs of its size
    if sandbox.isolation == "bwrap":
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
            if sandbox._root and source not in (sandbox.work_dir, sandbox.release_dir):  # stage it where uid 65534 may reach
                stage = os.path.join(sandbox._dir, f"stage{i}")
                os.makedirs(stage, exist_ok=True)
                staged.append((source, stage))
                source = stage
            command += ["--ro-bind" if mode == "ro" else "--bind", source, target]
        command += ["--remount-ro", "/", "--chdir", WORKDIR, "--", *python]
        if not sandbox._root:
            return command
        script = 'set -e; while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"'
        return [_UNSHARE, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
                *[p for pair in staged for p in pair], "--",
                _SETPRIV, f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups", "--", *command]
    root = os.path.join(sandbox._dir, "root")
    os.makedirs(root, exist_ok=True)
    inside = [_SETPRIV, f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups", "--no-new-privs",
              "--inh-caps=-all", "--bounding-set=-all", "--", "/usr/bin/env", "-i", f"--chdir={WORKDIR}",
              *[f"{k}={v}" for k, v in env.items()], *python]
    return [_UNSHARE, "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--fork", "--kill-child", "--propagation",
            "private", "--", "/usr/bin/env", f"CHROOT={_CHROOT}", f"TMP_BYTES={sandbox.limits.tmp_bytes}", "/bin/sh", "-c",
            _FALLBACK, "sh", root, *[x for bind in binds for x in bind], "--", *inside]


def _limited(sandbox: Sandbox, command: list[str], limits: Limits) -> list[str]:
    """``command`` under the limits, by ``prlimit`` (soft = hard, so the code cannot raise them; no
    Python runs between fork and exec: the host may be multithreaded), in the session's cgroups. Where
    the pids cgroup holds, RLIMIT_NPROC is left as it is: it counts uid 65534's processes host-wide,
    every session's together."""
    nproc = [] if sandbox.enforced["session_processes"] else [f"--nproc={limits.session_processes}"]
    limited = [_PRLIMIT, f"--as={limits.process_memory_bytes}", f"--cpu={limits.process_cpu_s}", *nproc,
               f"--fsize={limits.file_bytes}", "--core=0", "--", *command]
    return ["/bin/sh", "-c", _JOIN, "sh", *sandbox._cgroup.procs, "--", *limited] if sandbox._cgroup.procs else limited
