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

The package, a module a job (each says at its top why it is one):

* :mod:`~luca_gym.sandbox.session` -- :class:`Sandbox`, the session's one
  object, and the python tool's front (:func:`check_analysis_packages`);
* :mod:`~luca_gym.sandbox.limits` -- :class:`Limits`, :func:`sandbox_limits`,
  :func:`parse_size`, :func:`parse_seconds`, :func:`size_words`;
* :mod:`~luca_gym.sandbox.isolation` -- bubblewrap or the unshare fallback,
  what the code sees and as whom, the command line of a block
  (:class:`SandboxUnavailable`, :data:`WORKDIR`, :data:`RELEASE`);
* :mod:`~luca_gym.sandbox.seccomp` -- the system calls refused, as a BPF program;
* :mod:`~luca_gym.sandbox.processes` -- one block run: launch, serve its
  pipes, kill, reap, the limit that stopped it;
* :mod:`~luca_gym.sandbox.cgroups` -- the session's cgroup (v2, or v1's
  memory and pids), its counters, killing and removing it;
* :mod:`~luca_gym.sandbox.mounts` -- the working folder's own filesystem
  (an ext4 image on a loop device, or a tmpfs) and its unmount;
* :mod:`~luca_gym.sandbox.release` -- what a sandbox holds on the host, its
  release at close, exit, SIGTERM or SIGHUP, and :func:`sweep_stale`.
"""
from luca_gym.sandbox.isolation import (  # noqa: F401
    ISOLATIONS,
    PACKAGES,
    RELEASE,
    UNPRIVILEGED,
    WORKDIR,
    SandboxUnavailable,
)
from luca_gym.sandbox.limits import (  # noqa: F401
    GiB,
    Limits,
    MiB,
    parse_seconds,
    parse_size,
    sandbox_limits,
    size_words,
)
from luca_gym.sandbox.release import FOLDER_PREFIX, sweep_stale  # noqa: F401
from luca_gym.sandbox.session import (  # noqa: F401
    ANALYSIS_EXTRA,
    ANALYSIS_PACKAGES,
    INSTALL_ANALYSIS,
    Sandbox,
    check_analysis_packages,
)
