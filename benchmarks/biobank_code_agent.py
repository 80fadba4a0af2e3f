"""The biobank world's code-agent setting end to end: one sealed session with
the ``python`` tool, driven as a scripted code agent would drive it, each
phase timed, with its peak memory.

    .venv/bin/python benchmarks/biobank_code_agent.py [--profile small|paper] [--sandbox-memory 8G]
        [--sandbox-time 600] [--seed 0] [--top 5] [--out FILE.json]

Phases:

1. ``generate``: the sealed world (:func:`~luca_gym.worlds.biobank.world.make_world`:
   draw, images, release tables; the compiled generator loaded from the cache
   when it is warm);
2. ``open``: the session (:class:`~luca_gym.worlds.biobank.tools.BiobankToolSession`,
   ``python=True``): the sandbox started and the release written into it as
   Parquet (the world itself comes from ``make_world``'s cache);
3. ``phenotype`` (python block 1): the imaging and NT-proBNP columns read with
   pandas; the six MRI measures standardised and weighted by their correlation
   with log NT-proBNP (so that each points the way NT-proBNP does), the sum
   standardised, plus standardised log NT-proBNP, over the imaged
   participants; written to ``/analysis/phenotype.parquet``;
4. ``cis_mr`` (python block 2): each protein's lead cis variant (the variant
   within 250 kb of its gene's start most associated with it) and the Wald
   ratio of the phenotype (adjusted for age, sex, BMI and site) on it, with
   numpy, chunked over proteins: only a chunk's protein columns and the
   genotype columns of its cis windows are read (pyarrow column selection),
   never the whole genotype table;
5. ``submit``: ``phenotype_file="phenotype.parquet"`` and the top hits
   (Bonferroni p < 0.05, first-stage F > 10, at most ``--top``) as
   nominations, direction from the ratio's sign (a protein that raises the
   phenotype: down), confidence 0.8.

Memory: the host process's peak resident set (``getrusage``, cumulative:
the largest so far after each phase); inside the sandbox, each block's own
peak resident set (its ``getrusage``, printed by the block) and the
session's peak as its memory cgroup counts it (:meth:`Sandbox.usage`:
cumulative over the session's blocks, page cache of the files they wrote
included; None where no cgroup counts it). Prints a markdown table and
writes everything as JSON (``--out``). No timed assertion: a measurement,
to be read with the load average it prints.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import time

from luca_gym.seal import make_seal
from luca_gym.sandbox import sandbox_limits, size_words
from luca_gym.worlds.biobank.config import PROFILES, BiobankConfig
from luca_gym.worlds.biobank.release import WINDOW_KB
from luca_gym.worlds.biobank.tools import BiobankToolSession
from luca_gym.worlds.biobank.world import make_world

SECRET = "the biobank code-agent benchmark's secret"
CONFIDENCE = 0.8
PROTEIN_CHUNK = 256  # proteins per chunk of block 2
PAIR_CHUNK = 256  # (protein, variant) pairs per first-stage batch: 5 float64 arrays of participants x this
STATS = "BLOCK_STATS "  # the line a block ends with: its figures as JSON

# Block 1: the phenotype over the imaged participants, as the file submit reads.
PHENOTYPE_BLOCK = f"""import json, resource, time
import numpy as np
import pandas as pd
t0 = time.perf_counter()
imaging = pd.read_parquet('release/imaging.parquet')
bnp = pd.read_parquet('release/physiology.parquet', columns=['participant_id', 'ntprobnp_pg_ml'])
df = imaging.merge(bnp, on='participant_id', how='left')
raw = df['ntprobnp_pg_ml'].astype('float64')
log_bnp = np.log(raw.where(raw != -999.0).where(raw != -1.0, 15.0 / 2))  # -999 not recorded; -1 below the LOD of 15
measures = [c for c in imaging.columns if c != 'participant_id']
z = (df[measures] - df[measures].mean()) / df[measures].std()
weights = z.corrwith(log_bnp)
composite = (z.fillna(0.0) * weights).sum(axis=1).where(z.notna().any(axis=1))
standard = lambda s: (s - s.mean()) / s.std()
value = standard(composite) + standard(log_bnp).fillna(0.0)
df['value'] = value.astype('float64')
df[['participant_id', 'value']].to_parquet('phenotype.parquet', index=False)
print('weights (correlation with log NT-proBNP):', weights.round(3).to_dict())
print(f"imaged {{len(df)}}, phenotype present {{int(df['value'].notna().sum())}}, "
      f"r(phenotype, log NT-proBNP) {{df['value'].corr(log_bnp):.3f}}")
print({STATS!r} + json.dumps({{"seconds": time.perf_counter() - t0,
                              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                              "participants": len(df), "present": int(df['value'].notna().sum())}}))
"""

# Block 2: cis-MR with numpy, chunked over proteins; the top hits as JSON.
MR_BLOCK = """import json, math, resource, time
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
WINDOW_BP, PROTEIN_CHUNK, PAIR_CHUNK, TOP = {window_bp}, {protein_chunk}, {pair_chunk}, {top}
t0 = time.perf_counter()
seconds = dict(read=0.0, first_stage=0.0, second_stage=0.0)
annotation = pd.read_parquet('release/protein_annotation.parquet')
variants = pd.read_parquet('release/variants.parquet', columns=['variant_id', 'chromosome', 'position'])
proteins_file, genotypes_file = pq.ParquetFile('release/proteins.parquet'), pq.ParquetFile('release/genotypes.parquet')
ids = proteins_file.read(columns=['participant_id']).column(0).to_numpy(zero_copy_only=False)
assert (genotypes_file.read(columns=['participant_id']).column(0).to_numpy(zero_copy_only=False) == ids).all()

# the phenotype and the covariates over every participant; the second stage's rows: those with the phenotype
phenotype = pd.read_parquet('phenotype.parquet').set_index('participant_id')['value']
y_all = phenotype.reindex(ids).to_numpy(np.float64)
cov = pd.read_parquet('release/participants.parquet', columns=['participant_id', 'age_years', 'sex', 'bmi_kg_m2', 'site'])
cov = cov.set_index('participant_id').reindex(ids)
Z_all = np.column_stack([np.ones(len(ids)), cov[['age_years', 'sex', 'bmi_kg_m2']].to_numpy(np.float64),
                         *[(cov['site'] == s).to_numpy(np.float64) for s in (2, 3, 4)]])
rows = np.flatnonzero(np.isfinite(y_all) & np.isfinite(Z_all).all(1))
Z = Z_all[rows]
Zpinv = np.linalg.pinv(Z)
y = y_all[rows] - Z @ (Zpinv @ y_all[rows])  # the phenotype adjusted for the covariates (Frisch-Waugh-Lovell)
dof_y = len(rows) - Z.shape[1] - 1

# cis windows: variants sorted by (chromosome, position); a protein's window is a contiguous range
variants = variants.sort_values(['chromosome', 'position'], kind='stable').reset_index(drop=True)
chrom, pos = variants['chromosome'].to_numpy(), variants['position'].to_numpy(np.int64)
key = chrom.astype(np.int64) * 10**10 + pos
tss = annotation['chromosome'].to_numpy().astype(np.int64) * 10**10 + annotation['tss_position'].to_numpy(np.int64)
lo, hi = np.searchsorted(key, tss - WINDOW_BP, 'left'), np.searchsorted(key, tss + WINDOW_BP, 'right')
names, variant_ids = annotation['protein'].tolist(), variants['variant_id'].tolist()
P = len(names)
print(f'{{P}} proteins, {{len(variant_ids)}} variants, {{int((hi - lo).sum())}} cis pairs, '
      f'{{int((hi > lo).sum())}} proteins with a cis variant; second stage over {{len(rows)}} participants')

out = {{k: np.full(P, np.nan) for k in ('beta_x', 'se_x', 'f', 'beta_y', 'se_y')}}
lead = np.full(P, -1)
for start in range(0, P, PROTEIN_CHUNK):
    chunk = np.arange(start, min(start + PROTEIN_CHUNK, P))
    chunk = chunk[hi[chunk] > lo[chunk]]
    if not len(chunk):
        continue
    pair_p = np.concatenate([np.full(hi[i] - lo[i], i) for i in chunk])
    pair_v = np.concatenate([np.arange(lo[i], hi[i]) for i in chunk])
    t = time.perf_counter()
    X = proteins_file.read(columns=[names[i] for i in chunk]).to_pandas().to_numpy(np.float64)  # participants x chunk
    used = np.unique(pair_v)
    G8 = genotypes_file.read(columns=[variant_ids[v] for v in used]).to_pandas().to_numpy(np.int8)
    seconds['read'] += time.perf_counter() - t
    t = time.perf_counter()
    col_p, col_v = np.searchsorted(chunk, pair_p), np.searchsorted(used, pair_v)
    beta, se = np.full(len(pair_p), np.nan), np.full(len(pair_p), np.nan)
    for s in range(0, len(pair_p), PAIR_CHUNK):  # the first stage: protein ~ 1 + variant, where the protein is measured
        Y, G = X[:, col_p[s:s + PAIR_CHUNK]], G8[:, col_v[s:s + PAIR_CHUNK]].astype(np.float64)
        m = np.isfinite(Y)
        Y, G = np.where(m, Y, 0.0), G * m
        n = m.sum(0)
        sx, sy = G.sum(0), Y.sum(0)
        sxx = (G * G).sum(0) - sx * sx / n
        sxy = (G * Y).sum(0) - sx * sy / n
        syy = (Y * Y).sum(0) - sy * sy / n
        with np.errstate(divide='ignore', invalid='ignore'):
            b = sxy / sxx
            beta[s:s + PAIR_CHUNK] = b
            se[s:s + PAIR_CHUNK] = np.sqrt((syy - b * sxy) / (n - 2) / sxx)
    t2 = np.where(np.isfinite(beta) & (se > 0), (beta / se) ** 2, -1.0)
    for i in chunk:  # the lead: the largest t^2 in the window (first in position order on ties)
        j = np.flatnonzero(pair_p == i)
        k = j[np.argmax(t2[j])]
        if t2[k] >= 0:
            lead[i], out['beta_x'][i], out['se_x'][i], out['f'][i] = pair_v[k], beta[k], se[k], t2[k]
    seconds['first_stage'] += time.perf_counter() - t
    t = time.perf_counter()
    led = chunk[lead[chunk] >= 0]  # the second stage: adjusted phenotype ~ adjusted lead variant
    G = G8[rows][:, np.searchsorted(used, lead[led])].astype(np.float64)
    G -= Z @ (Zpinv @ G)
    gg = (G * G).sum(0)
    with np.errstate(divide='ignore', invalid='ignore'):
        b = (G.T @ y) / gg
        resid = ((y[:, None] - G * b) ** 2).sum(0)
        out['beta_y'][led], out['se_y'][led] = b, np.sqrt(resid / dof_y / gg)
    seconds['second_stage'] += time.perf_counter() - t
    del X, G8, G

with np.errstate(divide='ignore', invalid='ignore'):
    ratio = out['beta_y'] / out['beta_x']
    se_ratio = out['se_y'] / np.abs(out['beta_x'])
p = np.array([math.erfc(abs(r / s) / math.sqrt(2)) if np.isfinite(r / s) else np.nan for r, s in zip(ratio, se_ratio)])
results = pd.DataFrame({{'protein': names, 'lead_variant': [variant_ids[v] if v >= 0 else None for v in lead],
                         'f': out['f'], 'beta_exposure': out['beta_x'], 'beta_outcome': out['beta_y'],
                         'ratio': ratio, 'se': se_ratio, 'p': p}})
results.to_parquet('cis_mr.parquet', index=False)
tested = int(np.isfinite(p).sum())
ranked = results[np.isfinite(results['p'])].sort_values('p', kind='stable')
print(ranked.head(15).to_string(index=False, float_format=lambda v: f'{{v:.3g}}'))
hits = ranked[(ranked['p'] < 0.05 / max(tested, 1)) & (ranked['f'] > 10)].head(TOP)
nominations = [{{'protein': r.protein, 'direction': 'down' if r.ratio > 0 else 'up', 'ratio': float(r.ratio),
                 'p': float(r.p)}} for r in hits.itertuples()]
print({stats!r} + json.dumps({{'seconds': time.perf_counter() - t0, 'phases': seconds, 'tested': tested,
                              'peak_rss_bytes': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                              'nominations': nominations}}))
"""


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _stats(output: str) -> dict | None:
    """The figures a block printed last (:data:`STATS`), or None where it stopped before them."""
    lines = [line for line in output.splitlines() if line.startswith(STATS)]
    return json.loads(lines[-1][len(STATS):]) if lines else None


def _gib(n) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def run(profile: str, seed: int, sandbox_memory: str, sandbox_time: float, top: int) -> dict:
    """One session end to end; every phase's seconds and memory, the blocks' outputs and the submission's answer."""
    seal = make_seal(SECRET)
    config = BiobankConfig(profile=profile)
    limits = sandbox_limits(sandbox_memory=sandbox_memory, sandbox_time=sandbox_time)
    phases, report = [], {"profile": profile, "sizes": PROFILES[profile]._asdict(), "seed": seed, "load_start": _load()}

    def phase(name: str, started: float, **extra) -> None:
        phases.append({"phase": name, "seconds": time.perf_counter() - started, "host_peak_rss_bytes": _peak_rss(), **extra})
        print(f"[{name}] {phases[-1]['seconds']:.1f} s, host peak RSS {_gib(phases[-1]['host_peak_rss_bytes'])}", flush=True)

    t = time.perf_counter()
    world = make_world(seed, config, seal)
    phase("generate", t, design={"archetype": world.design.archetype, "drivers": world.design.n_drivers,
                                 "biases": list(world.design.biases), "tier": world.design.tier})
    t = time.perf_counter()
    session = BiobankToolSession(seed, sealed=seal, python=True, profile=profile, limits=limits)
    try:
        release_bytes = sum(e.stat().st_size for e in os.scandir(session.sandbox.release_dir) if e.is_file())
        phase("open", t, release_bytes=release_bytes)
        report["sandbox"] = {"isolation": session.sandbox.isolation, "enforced": session.sandbox.enforced,
                             "limits": session.sandbox.describe()}
        blocks = {}
        mr_block = MR_BLOCK.format(window_bp=WINDOW_KB * 1000, protein_chunk=PROTEIN_CHUNK, pair_chunk=PAIR_CHUNK, top=top,
                                   stats=STATS)
        for name, code in (("phenotype", PHENOTYPE_BLOCK), ("cis_mr", mr_block)):
            t = time.perf_counter()
            answer = session.call("python", {"code": code})
            usage = session.sandbox.usage()
            stats = _stats(answer.get("output", ""))
            blocks[name] = {"answer": answer, "stats": stats}
            phase(name, t, block_peak_rss_bytes=None if stats is None else stats["peak_rss_bytes"],
                  session_peak_bytes=usage["memory_peak_bytes"], error=answer.get("error"))
            print(answer.get("output", ""), flush=True)
            if "error" in answer:
                print(f"[{name}] {answer['error']}", flush=True)
        mr = blocks["cis_mr"]["stats"]
        nominations = [{"protein": n["protein"], "direction": n["direction"], "confidence": CONFIDENCE}
                       for n in (mr["nominations"] if mr else [])]
        t = time.perf_counter()
        answer = session.call("submit", {"nominations": nominations, "phenotype_file": "phenotype.parquet"})
        phase("submit", t, error=answer.get("error"))
    finally:
        session.close()
    report.update(phases=phases, blocks=blocks, nominations=nominations, mr_hits=mr["nominations"] if mr else None,
                  submit=answer, accepted="error" not in answer and bool(answer.get("ended")), scores=answer.get("scores"),
                  design=phases[0]["design"], load_end=_load())
    return report


def table(report: dict) -> str:
    lines = ["| phase | wall time | block's peak RSS (sandbox) | session peak, cgroup (cumulative) | host peak RSS (cumulative) |",
             "|---|---|---|---|---|"]
    for p in report["phases"]:
        lines.append(f"| {p['phase']} | {p['seconds']:.1f} s | {_gib(p.get('block_peak_rss_bytes'))} "
                     f"| {_gib(p.get('session_peak_bytes'))} | {_gib(p['host_peak_rss_bytes'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="paper", choices=("small", "paper"), help="the world's profile (default paper)")
    parser.add_argument("--sandbox-memory", default="8G", help="the session's memory in the sandbox (default 8G)")
    parser.add_argument("--sandbox-time", type=float, default=600.0, help="each block's wall-clock seconds (default 600)")
    parser.add_argument("--seed", type=int, default=0, help="the session's seed (sealed; default 0)")
    parser.add_argument("--top", type=int, default=5, help="at most this many nominations (default 5)")
    parser.add_argument("--out", default=None, help="write the report as JSON to this file")
    args = parser.parse_args()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
    started = datetime.datetime.now(datetime.timezone.utc)
    print(f"# Biobank code agent, profile {args.profile}, {started:%Y-%m-%d %H:%M UTC}")
    print(f"machine: {os.cpu_count()} cores, {memory / 2**30:.0f} GiB; sandbox memory {args.sandbox_memory}, "
          f"{args.sandbox_time:g} s a block; git {git}; load {_load()}", flush=True)
    report = run(args.profile, args.seed, args.sandbox_memory, args.sandbox_time, args.top)
    report.update(date=f"{started:%Y-%m-%d}", machine={"cores": os.cpu_count(), "memory_bytes": memory,
                                                       "memory": size_words(memory)},
                  git=git, sandbox_memory=args.sandbox_memory, sandbox_time_s=args.sandbox_time)
    print()
    print(table(report))
    total = sum(p["seconds"] for p in report["phases"])
    print(f"\ntotal {total:.1f} s; load {report['load_start']} -> {report['load_end']}")
    print(f"nominated: {report['nominations']}")
    print(f"accepted: {report['accepted']}; scores: {report['scores']}")
    if not report["accepted"]:
        print(f"refused: {report['submit'].get('error')}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
