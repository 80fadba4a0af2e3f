"""The session's working folder as a filesystem of its own size
(:func:`_mount_workdir`: a sparse ext4 image on a loop device, else a
tmpfs), and its release (:func:`_unmount`: the mount, then any loop device
left on the image); :func:`_mounted` lists this process's mount points (the
stale sweep checks a recorded mount is still there before it unmounts).

A module of its own because it is the one part that runs ``mkfs``,
``mount``, ``umount`` and ``losetup`` on the host (root only); the session
asks only what was mounted (the filesystem's kind, or None: no quota holds).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from luca_gym.sandbox.isolation import UNPRIVILEGED

_MOUNT, _UMOUNT, _MKFS, _LOSETUP = (shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or f"/usr/sbin/{name}"
                                    for name in ("mount", "umount", "mkfs.ext4", "losetup"))


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


def _unmount(point: str, image: str | None) -> None:
    """Unmount ``point`` (lazily where something still holds it) and detach any loop device left on ``image``."""
    for lazy in ([], ["-l"]):
        if subprocess.run([_UMOUNT, *lazy, point], capture_output=True, timeout=60).returncode == 0:
            break
    if image is not None and os.access(_LOSETUP, os.X_OK):
        found = subprocess.run([_LOSETUP, "-j", image], capture_output=True, text=True, timeout=60)
        for line in found.stdout.splitlines():
            subprocess.run([_LOSETUP, "-d", line.split(":", 1)[0]], capture_output=True, timeout=60)


def _mounted() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return {line.split()[4] for line in f}
