"""JAX's persistent compilation cache, on by default.

Every command and every program that imports ``luca_gym`` compiles the
simulator, the generator and the session core for its shapes: 15-50 s on a
laptop CPU. JAX can keep compiled programs on disk; this module turns that on
when the package is imported, so the second run of anything starts in
seconds. Where the cache lives:

* ``JAX_COMPILATION_CACHE_DIR`` (JAX's own variable) or a directory already
  set with ``jax.config.update("jax_compilation_cache_dir", ...)``: used as is;
* else ``LUCA_GYM_CACHE_DIR``: a folder, or ``off`` to disable the cache;
* else ``$XDG_CACHE_HOME/luca-gym/jax`` (``~/.cache/luca-gym/jax``).

A cache folder that cannot be created disables the cache; nothing fails.

Importing the package also asks XLA's CPU backend for its portable math
(:func:`portable_math`), so an instance is the same, bit for bit, on every
x86 CPU, whatever vector extensions it has.

The cache skips XLA compilation, not tracing; the organism generator's
traced program is therefore also stored (serialized with ``jax.export``) in
``<cache>/luca-gym-exports``, keyed by the package's source, JAX's version,
the backend and the shapes (:mod:`luca_gym.worlds.luca.generator.organisms`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

ENV = "LUCA_GYM_CACHE_DIR"
OFF = ("off", "0", "false", "no", "none")
# Programs that compile faster than this are not worth a disk entry (JAX's
# default is 1 s; many of ours take 0.2-1 s and add up on every start).
MIN_COMPILE_SECONDS = 0.1


# XLA's CPU backend computes exp, tanh and the like with code tuned to the host's
# vector extensions where this is on: AVX-512 machines then give other float32
# bits than AVX2 ones (seen here: every golden organism moved in its last bits,
# and batched solves drifted from lone ones). Off, the same program gives the
# same bits on both.
PORTABLE_MATH_FLAG = "--xla_cpu_enable_platform_dependent_math=false"


def portable_math() -> bool:
    """Add :data:`PORTABLE_MATH_FLAG` to ``XLA_FLAGS`` unless the user set the
    flag there already. JAX reads ``XLA_FLAGS`` when its backend starts, so
    this must run before the first computation; it warns (and returns False)
    where a backend already runs with other flags."""
    import warnings

    name = PORTABLE_MATH_FLAG.split("=")[0]
    flags = os.environ.get("XLA_FLAGS", "")
    if name in flags:
        return True
    os.environ["XLA_FLAGS"] = f"{flags} {PORTABLE_MATH_FLAG}".strip()
    if "jax" not in sys.modules:  # no backend can run yet: the flag is in time (and JAX stays unimported)
        return True
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        warnings.warn("luca_gym was imported after JAX started its backend, so XLA's portable CPU math is not on: "
                      "instances may differ in their last bits between CPUs (AVX-512 or not). Import luca_gym first, "
                      f"or set XLA_FLAGS={PORTABLE_MATH_FLAG}", stacklevel=3)
        return False
    return True


def default_dir() -> str:
    """The per-user cache folder: ``$XDG_CACHE_HOME/luca-gym/jax``, else ``~/.cache/luca-gym/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "luca-gym", "jax")


def configure() -> str | None:
    """Turn the persistent cache on (see the module docstring); returns its folder, or None when off."""
    import jax

    current = jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if current:
        return current
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    path = value or default_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    if not os.access(path, os.W_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return path


def export_dir() -> str | None:
    """Where traced programs are stored (``jax.export``, beside the compilation cache), or None when the cache is off."""
    where = cache_dir()
    return None if where is None else os.path.join(where, "luca-gym-exports")


@contextlib.contextmanager
def process_lock(path: str):
    """Hold an exclusive lock on the file ``path`` (created when missing)
    while the work inside runs, so that of several processes (test workers,
    parallel ``eval`` runs) needing one expensive program, one compiles it and
    the others wait, then take it from the persistent cache instead of
    compiling it too. Threads of one process exclude each other as well.
    Where no lock can be taken (no ``fcntl``, a read-only folder) the work runs
    unlocked: slower in parallel, never wrong."""
    try:
        import fcntl

        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115 -- closed below; closing releases the lock
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        handle.close()


def cache_dir() -> str | None:
    """The folder compiled programs are cached in (None: no persistent cache)."""
    import jax

    return jax.config.jax_compilation_cache_dir or os.environ.get("JAX_COMPILATION_CACHE_DIR") or None


@contextlib.contextmanager
def compile_notice(what: str, after_s: float = 2.0, stream=None):
    """Print one line to stderr if the work inside takes longer than
    ``after_s`` seconds (a first run compiling): what is happening, and where
    the result is cached so that the next run is fast."""
    stream = stream or sys.stderr
    where = cache_dir()
    tail = f"; cached in {where} for next time" if where else " (the compilation cache is off)"

    def say():
        try:
            stream.write(f"{what}: compiling for these shapes (first run only, up to a minute){tail}\n")
            stream.flush()
        except (OSError, ValueError):
            pass

    timer = threading.Timer(after_s, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
