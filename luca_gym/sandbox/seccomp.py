"""The sandbox's seccomp policy: which system calls agent code may not make,
and why, compiled to the classic-BPF program the kernel takes
(:func:`program`), with no dependency beyond :mod:`struct`.

A module of its own because the policy is a table one reads and reviews on
its own (the docs' sandbox page prints it), apart from the launcher in
:mod:`luca_gym.sandbox.isolation`, which hands the program to bubblewrap
(``bwrap --seccomp FD``) or, in the ``unshare`` fallback, has the block's
interpreter load it (:data:`INSTALL`) before the agent's first line runs.
Either way every process of the block inherits it and none can drop it.

What it refuses, each with ``EPERM`` (the call fails; the process goes on):
:data:`DENIED` (name, reason) -- the calls that reach into another process
(``ptrace``: an attacker attached to bubblewrap's own process inside the
sandbox and cleared its parent-death signal, so processes outlived their
block), load code into the kernel, or change what the namespaces hold --
and, by their flags, ``clone``/``unshare`` asking for a new namespace and
``personality`` changing anything. ``clone3`` gets ``ENOSYS`` (its flags
sit in memory a filter cannot read; the C library then falls back to
``clone``, whose flags it can), and so does any call of another
architecture's table (x32 on x86-64, a 32-bit ``int 0x80``), whose numbers
would slip past the ones below. Everything else is allowed.
"""

from __future__ import annotations

import errno
import platform
import struct

# (name, why it is refused); numbers below, per architecture
DENIED = (
    ("ptrace", "reads and steers another process: it let a block free bubblewrap's own process from its parent-death "
               "signal, so the block outlived its time limit"),
    ("process_vm_readv", "reads another process's memory"),
    ("process_vm_writev", "writes another process's memory"),
    ("kcmp", "compares kernel objects of other processes (an information leak)"),
    ("pidfd_getfd", "takes a file descriptor out of another process"),
    ("process_madvise", "acts on another process's memory"),
    ("kexec_load", "loads a new kernel"),
    ("kexec_file_load", "loads a new kernel"),
    ("init_module", "loads a kernel module"),
    ("finit_module", "loads a kernel module"),
    ("delete_module", "removes a kernel module"),
    ("bpf", "loads programs into the kernel (a frequent source of kernel exploits)"),
    ("perf_event_open", "profiles the kernel and other processes (side channels, kernel bugs)"),
    ("userfaultfd", "stalls the kernel at a chosen moment (a staple of kernel exploits)"),
    ("io_uring_setup", "a second system-call interface, outside this filter's view, and a frequent source of kernel bugs"),
    ("io_uring_enter", "a second system-call interface (see io_uring_setup)"),
    ("io_uring_register", "a second system-call interface (see io_uring_setup)"),
    ("keyctl", "the kernel keyring is not namespaced: keys could pass between sessions"),
    ("add_key", "the kernel keyring is not namespaced"),
    ("request_key", "the kernel keyring is not namespaced"),
    ("mount", "changes what the sandbox's filesystem holds"),
    ("umount2", "uncovers what the sandbox's mounts hide"),
    ("pivot_root", "changes the sandbox's root"),
    ("chroot", "changes the root (with a file descriptor kept outside, a classic escape)"),
    ("open_tree", "the new mount interface (see mount)"),
    ("move_mount", "the new mount interface (see mount)"),
    ("fsopen", "the new mount interface (see mount)"),
    ("fsconfig", "the new mount interface (see mount)"),
    ("fsmount", "the new mount interface (see mount)"),
    ("fspick", "the new mount interface (see mount)"),
    ("mount_setattr", "the new mount interface (see mount)"),
    ("setns", "enters another namespace"),
    ("open_by_handle_at", "opens a file by its handle, past the mounts that hide it"),
    ("name_to_handle_at", "the handles open_by_handle_at takes"),
    ("reboot", "restarts the machine"),
    ("swapon", "changes the machine's swap"),
    ("swapoff", "changes the machine's swap"),
    ("acct", "switches the host's process accounting"),
    ("syslog", "reads the kernel's log (addresses that help an exploit)"),
    ("quotactl", "changes disk quotas"),
    ("lookup_dcookie", "a profiling interface that leaks kernel paths"),
)
# clone and unshare: refused when they ask for a namespace (a nested user namespace would hold every capability
# inside it); personality: refused unless it only asks (0xffffffff) or sets the default (0): ADDR_NO_RANDOMIZE
# would turn address randomisation off for an exploit
ARGUMENT_CHECKED = (
    ("clone", "refused with a namespace flag (CLONE_NEWUSER, NEWNS, NEWPID, NEWNET, NEWIPC, NEWUTS, NEWCGROUP)"),
    ("unshare", "refused with a namespace flag (those of clone, and CLONE_NEWTIME)"),
    ("personality", "refused unless it asks (0xffffffff) or sets the default (0): ADDR_NO_RANDOMIZE turns address "
                    "randomisation off"),
    ("clone3", "ENOSYS: its flags are in memory a filter cannot read; the C library falls back to clone"),
)

# system call numbers (x86-64: asm/unistd_64.h; aarch64: asm-generic/unistd.h)
_NUMBERS = {
    "x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
               "process_madvise": 440, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
               "delete_module": 176, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
               "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249,
               "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
               "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 308,
               "open_by_handle_at": 304, "name_to_handle_at": 303, "reboot": 169, "swapon": 167, "swapoff": 168,
               "acct": 163, "syslog": 103, "quotactl": 179, "lookup_dcookie": 212,
               "clone": 56, "unshare": 272, "personality": 135, "clone3": 435},
    "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
                "process_madvise": 440, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
                "delete_module": 106, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
                "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
                "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
                "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 268,
                "open_by_handle_at": 265, "name_to_handle_at": 264, "reboot": 142, "swapon": 224, "swapoff": 225,
                "acct": 89, "syslog": 116, "quotactl": 60, "lookup_dcookie": 18,
                "clone": 220, "unshare": 97, "personality": 92, "clone3": 435},
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_X32_BIT = 0x40000000  # x86-64's x32 table: the same calls under other numbers

CLONE_NEWTIME = 0x00000080
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
PERSONALITY_QUERY = 0xFFFFFFFF

# classic BPF (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low half of args[0]: little-endian)


class SeccompUnavailable(RuntimeError):
    """No policy for this machine's architecture (the sandbox then cannot start)."""


def architecture(machine: str | None = None) -> str:
    """``x86_64`` or ``aarch64`` for ``machine`` (default :func:`platform.machine`); SeccompUnavailable otherwise."""
    machine = platform.machine() if machine is None else machine
    if machine.lower() not in _MACHINES:
        raise SeccompUnavailable(f"no seccomp policy for the architecture {machine!r} (only x86_64 and aarch64)")
    return _MACHINES[machine.lower()]


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The policy as a classic-BPF program (``struct sock_filter`` entries,
    8 bytes each, native byte order), for ``machine`` (default this one)."""
    arch = architecture(machine)
    numbers = _NUMBERS[arch]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    # The tail every check jumps to: [allow, EPERM, ENOSYS]. Checks are built back to front, so each jump's
    # distance to the tail is known when it is written.
    body: list[tuple] = []  # ("op", code, k, target_true, target_false): targets "next", "allow", "eperm", "enosys"
    body.append(("ld", _ARCH))
    body.append(("jeq", _AUDIT_ARCH[arch], "next", "enosys"))
    body.append(("ld", _NR))
    if arch == "x86_64":
        body.append(("jge", _X32_BIT, "enosys", "next"))
    for name, _ in DENIED:
        body.append(("jeq", numbers[name], "eperm", "next"))
    body.append(("jeq", numbers["clone3"], "enosys", "next"))
    for name, flags in (("clone", CLONE_NAMESPACES), ("unshare", CLONE_NAMESPACES | CLONE_NEWTIME)):
        body.append(("jeq", numbers[name], "next", +3))  # not it: past the next two
        body.append(("ld", _ARG0))
        body.append(("jset", flags, "eperm", "allow"))
    body.append(("jeq", numbers["personality"], "next", "allow"))
    body.append(("ld", _ARG0))
    body.append(("jeq", PERSONALITY_QUERY, "allow", "next"))
    body.append(("jeq", 0, "allow", "eperm"))
    tail = {"allow": len(body), "eperm": len(body) + 1, "enosys": len(body) + 2}
    out = []
    for i, entry in enumerate(body):
        if entry[0] == "ld":
            out.append(_op(_LD_W_ABS, 0, 0, entry[1]))
            continue
        kind, k, true, false = entry

        def offset(target, i=i):
            if target == "next":
                return 0
            if isinstance(target, int):
                return target - 1
            return tail[target] - i - 1

        code = {"jeq": _JEQ, "jge": _JGE, "jset": _JSET}[kind]
        out.append(_op(code, offset(true), offset(false), k))
    out += [_op(_RET, 0, 0, _ALLOW), _op(_RET, 0, 0, eperm), _op(_RET, 0, 0, enosys)]
    return b"".join(out)


# Loads a program (hex, the {program!r} placeholder) into the calling process with no new privileges, before
# anything of the agent's runs: the unshare fallback's interpreter runs it first (bubblewrap loads its own).
INSTALL = ("import ctypes\n"
           "_f = bytes.fromhex({program!r})\n"
           "_b = ctypes.create_string_buffer(_f, len(_f))\n"
           "class _P(ctypes.Structure):\n"
           "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]\n"
           "_c = ctypes.CDLL(None, use_errno=True)\n"
           "if _c.prctl(38, 1, 0, 0, 0) or _c.prctl(22, 2, ctypes.byref(_P(len(_f) // 8, ctypes.addressof(_b))), 0, 0):\n"
           "    raise SystemExit('the seccomp filter could not be loaded: ' + __import__('os').strerror(ctypes.get_errno()))\n"
           "del _f, _b, _P, _c, ctypes\n")


def policy_table() -> str:
    """The policy as a markdown table (the docs' sandbox page holds it)."""
    rows = ["| system call | refused because |", "|---|---|"]
    rows += [f"| `{name}` | {why} |" for name, why in DENIED + ARGUMENT_CHECKED]
    return "\n".join(rows)
