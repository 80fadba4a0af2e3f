"""Biobank world generation: time and size on disk of one world per profile,
printed as a markdown table with the machine's load.

    .venv/bin/python benchmarks/biobank_generation.py [--profiles small,paper] [--seed 0] [--out DIR]

For each profile (in the order given), one world of panel seed ``--seed``:
the generator's two programs compiled ahead of time (the draw and the cine
images, into a fresh compilation cache: a cold start), its cohort drawn
(:func:`~luca_gym.worlds.biobank.generator.cohort`: draw and images, the
programs loaded from that cache), its release built (host-side tables) and
written as Parquet, each timed; then the cine images alone again, warm, for
their share, and a second world (seed + 1) of the small profiles, warm.
Size on disk: every file of the written release, the largest three named.
Peak resident memory of the process (cumulative: run the small profile
first). No timed assertion anywhere: this is a measurement, to be read
with the load average it prints.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import tempfile
import time

os.environ["LUCA_GYM_CACHE_DIR"] = tempfile.mkdtemp(prefix="biobank-bench-cache-")  # cold: compile times measured, not loaded

import jax  # noqa: E402  (after the cache folder is chosen)
import numpy as np

from luca_gym.worlds.biobank import imaging  # noqa: E402
from luca_gym.worlds.biobank.config import PROFILES  # noqa: E402
from luca_gym.worlds.biobank.design import design_of  # noqa: E402
from luca_gym.worlds.biobank.generator import N_BIASES, T5, cohort, draw, world_key  # noqa: E402
from luca_gym.worlds.biobank.release import build_release  # noqa: E402

WARM_AGAIN = ("tiny", "small")  # profiles cheap enough to draw a second world, warm


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def _compile(sizes) -> float:
    """Seconds to compile the draw and the images of profile ``sizes`` (into the cache the next calls load from)."""
    spec = jax.ShapeDtypeStruct
    t0 = time.perf_counter()
    draw.lower(spec((2,), np.uint32), spec((), np.int32), spec((), np.int32), spec((), np.bool_), spec((N_BIASES,), np.bool_), spec((), np.int32),
               sizes=sizes).compile()
    n = sizes.imaged
    imaging._cine.lower(spec((2,), np.uint32), spec((n, 6), np.float32), spec((n,), np.int32), spec((n,), np.int32),
                        spec((n,), np.bool_)).compile()
    return time.perf_counter() - t0


def one_world(profile: str, seed: int, out: str) -> dict:
    sizes = PROFILES[profile]
    design = design_of(seed, seed)
    load = _load()
    compile_s = _compile(sizes)
    t0 = time.perf_counter()
    c = cohort(seed, design, sizes)
    t1 = time.perf_counter()
    release = build_release(c, design, seed, sizes)
    t2 = time.perf_counter()
    folder = os.path.join(out, profile)
    paths = release.write(folder)
    t3 = time.perf_counter()
    files = {os.path.basename(p): os.path.getsize(p) for p in paths}
    words = np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)
    site = c["site"][c["imaged"]]
    t4 = time.perf_counter()
    imaging.cine(world_key(words), c["heart"], site, c["imaged"], c["carried"][T5] & (site == c["batch_site"]))
    images = time.perf_counter() - t4
    again = None
    if profile in WARM_AGAIN:
        t5 = time.perf_counter()
        build_release(cohort(seed + 1, design_of(seed + 1, seed + 1), sizes), design_of(seed + 1, seed + 1), seed + 1, sizes)
        again = time.perf_counter() - t5
    shutil.rmtree(folder)
    return {"profile": profile, "sizes": sizes, "compile": compile_s, "cohort": t1 - t0, "release": t2 - t1, "write": t3 - t2, "images": images,
            "again": again, "bytes": sum(files.values()), "files": files, "peak": _peak_gib(), "load": load + " -> " + _load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="small,paper", help="comma-separated profiles, in order (default small,paper)")
    parser.add_argument("--seed", type=int, default=0, help="the panel seed of each profile's world (default 0)")
    parser.add_argument("--out", default=None, help="where releases are written and removed (default: a temporary folder)")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
    for profile in profiles:
        if profile not in PROFILES:
            parser.error(f"--profiles: {profile!r} not allowed; allowed {', '.join(PROFILES)}")
    out = args.out or tempfile.mkdtemp(prefix="biobank-bench-")
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = cpu
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"# Biobank generation, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"machine: {os.cpu_count()} cores ({model}), {memory:.0f} GiB; jax {jax.__version__} on {jax.default_backend()}; "
          f"git {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip() or '?'}")
    rows = [one_world(profile, args.seed, out) for profile in profiles]
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    print()
    print("| profile | participants / imaged / proteins / variants | compile, cold s | cohort (draw + images) s "
          "| images alone, warm s | release s | write s | second world, warm s | on disk MB | largest files MB | peak RSS GiB "
          "| load (1/5/15 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["sizes"]
        largest = ", ".join(f"{name.split('.')[0]} {size / 1e6:.1f}" for name, size in sorted(r["files"].items(), key=lambda f: -f[1])[:3])
        again = "-" if r["again"] is None else f"{r['again']:.1f}"
        print(f"| {r['profile']} | {s.participants:,} / {s.imaged:,} / {s.proteins:,} / {s.variants:,} | {r['compile']:.1f} | {r['cohort']:.1f} "
              f"| {r['images']:.2f} | {r['release']:.1f} | {r['write']:.1f} | {again} | {r['bytes'] / 1e6:.1f} | {largest} "
              f"| {r['peak']:.1f} | {r['load']} |")


if __name__ == "__main__":
    main()
