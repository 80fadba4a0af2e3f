"""benchmarks/device_check.py's smoke mode: every section runs small on this
CPU, writes its figures, and parity (CPU against CPU here) is exact."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.py"
SECTIONS = ("parity", "rollout", "generation", "ppo", "model-fit")


def test_smoke_run_writes_every_section_and_cpu_parity_is_exact(tmp_path):
    out = tmp_path / "check"
    # The environment is inherited: importing luca_gym in the child sets up the same compile cache.
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)], env=dict(os.environ),
                          capture_output=True, text=True, timeout=240, cwd=SCRIPT.parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = {}
    # One JSON per section and one tables.md: few files to hand back from the GPU machine.
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{name}.json" for name in SECTIONS] + ["tables.md"])
    tables = (out / "tables.md").read_text()
    assert tables.startswith("## Parity") and tables.count("\n## ") == len(SECTIONS) - 1
    for name in SECTIONS:
        figures[name] = json.loads((out / f"{name}.json").read_text())
        assert "error" not in figures[name], figures[name].get("traceback")
        assert figures[name]["peak_device_bytes"] == "n/a"  # a CPU has no memory statistics
    parity = figures["parity"]
    assert parity["total"] == 4 * 6 and parity["identical"] == parity["total"] and parity["all_identical"]
    # The one known seed the smoke diagnoses: CPU against CPU, one organism and equal margins on both sides.
    (diagnosis,) = parity["results"]["20 medium healthy"]["diagnoses"]
    assert diagnosis["seed"] == 36 and diagnosis["accepted_attempt_device"] == diagnosis["accepted_attempt_cpu"]
    assert diagnosis["finding"].startswith("the same organism on both backends; nearest: ")
    assert diagnosis["margins"] and all(v["device"] == v["cpu"] for v in diagnosis["margins"].values())
    assert "diagnosis N=20 medium healthy seed 36: " in tables
    for result in parity["results"].values():
        assert result["compared"] == 4 and not result["mismatches"] and result["max_phenotype_gap"] == 0.0
        assert not result["failed_device"] and not result["failed_cpu"]
    (row,) = figures["rollout"]["rows"]
    assert row["envs"] == 8 and row["solver_compiled"] and row["all_ended"] and row["steps_per_s"] > 0
    (row,) = figures["generation"]["rows"]
    assert row["organisms"] == 4 and row["organisms_per_s"] > 0
    assert figures["ppo"]["updates"] == 2 and figures["ppo"]["steps_per_s"] > 0
    (row,) = figures["model-fit"]["rows"]  # medium healthy N=20: the fitted predictions solve these 4 sessions
    assert row["sessions"] == 4 and row["all_ended"] and row["sessions_per_s"] > 0 and row["mean_composite"] > 0.9
    assert figures["model-fit"]["skipped"] == []


def test_an_unknown_section_is_refused(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path), "--sections", "parity,nope"],
                          env=dict(os.environ), capture_output=True, text=True, timeout=120, cwd=SCRIPT.parents[1])
    assert done.returncode != 0 and "sections: nope not allowed" in done.stderr
    assert not list(tmp_path.iterdir())  # refused before any section ran


def test_failing_seeds_are_found_by_halving(monkeypatch):
    """A batch that raises is split until each failing seed stands alone; the
    others keep their rows, in order."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    device_check = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec.loader.exec_module(device_check)
    calls = []

    def generate(seeds, tier, n, mode):
        calls.append(len(seeds))
        if {5, 11} & set(seeds.tolist()):
            raise RuntimeError("no organism met the guarantees")
        return {"x": seeds * 10}

    monkeypatch.setattr(device_check.world, "generate", generate)
    seeds, arrays, failed = device_check.generate_or_failures(np.arange(16), "easy", 20, "healthy")
    kept = [s for s in range(16) if s not in (5, 11)]
    np.testing.assert_array_equal(seeds, kept)
    np.testing.assert_array_equal(arrays["x"], np.asarray(kept) * 10)
    assert sorted(failed) == [5, 11] and len(calls) < 16


def test_gpu_sh_refuses_an_unknown_mode_before_it_runs_anything(tmp_path):
    """benchmarks/gpu.sh, the device call's wrapper: an unknown argument exits 2
    naming the modes it takes, and writes nothing under $OUT."""
    done = subprocess.run(["bash", str(SCRIPT.parent / "gpu.sh"), "--nope"],
                          env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)},
                          capture_output=True, text=True, timeout=120, cwd=SCRIPT.parents[1])
    assert done.returncode == 2 and "--nope not allowed; --all, --smoke or nothing" in done.stderr
    assert not list(tmp_path.iterdir())


def _margins_module(monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    return importlib.import_module("generation_margins")


def test_the_margins_agree_with_the_generator_and_can_fail(monkeypatch):
    """benchmarks/generation_margins.py re-evaluates the comparisons that
    accepted an organism: on the backend that made it, every guarantee holds
    (a positive margin) for each tier x mode; a network made unstable, or a
    task swapped for an additive one, shows a negative margin."""
    import dataclasses

    import jax

    from luca_gym.worlds.luca import generator as world

    gm = _margins_module(monkeypatch)
    informational = {"task residual vs the tier's floor", "n_alt"}  # a preference and a count, not guarantees
    for tier in ("easy", "medium", "hard"):
        for mode in ("healthy", "disease"):
            arrays = world.generate(np.arange(2), tier, 20, mode)
            for i in range(2):
                m = gm.margins(jax.tree_util.tree_map(lambda x: x[i], arrays), tier, 20, mode)
                assert ("rescue" in m) == (mode == "disease")
                failed = {k: v for k, v in m.items() if k not in informational and not v > 0}
                assert not failed, (tier, mode, i, failed)
    one = jax.tree_util.tree_map(lambda x: x[0], world.generate(np.arange(1), "medium", 20, "healthy"))
    assert gm.margins(dataclasses.replace(one, weights=one.weights * 8), "medium", 20, "healthy")["stability"] < 0
    # No readout: every phenotype stays 0.5, so no gene is visible and every task is additive.
    blind = gm.margins(dataclasses.replace(one, readout=one.readout * 0), "medium", 20, "healthy")
    assert blind["visibility"] == pytest.approx(-0.05) and blind["task residual vs accuracy threshold"] == pytest.approx(-0.1)


def test_a_finding_names_the_comparison_that_flips_else_the_nearest(monkeypatch):
    gm = _margins_module(monkeypatch)
    table = {"stability": {"device": -2e-6, "cpu": 3e-6}, "visibility": {"device": 0.2, "cpu": 0.2},
             "singles steps left": {"device": 400.0, "cpu": 400.0}}
    assert gm.finding(table) == "stability flips: -2e-06 on the device, +3e-06 on the CPU"
    table["stability"] = {"device": 4e-6, "cpu": 3e-6}
    assert gm.finding(table) == "nearest: stability, 3e-06 from its threshold (near enough for rounding to flip it)"
    table["stability"] = {"device": 0.3, "cpu": 0.3}
    table["singles steps left"] = {"device": 3.0, "cpu": 9.0}
    assert gm.finding(table).startswith("nearest: singles steps left, 3 updates from its threshold (near enough")
    table["singles steps left"] = {"device": 300.0, "cpu": 300.0}
    assert "no comparison near enough for rounding to flip it" in gm.finding(table)


def test_a_section_without_time_left_is_skipped_and_says_so(tmp_path):
    """Under --total-seconds a section with under 20 s left is not started:
    its JSON and table say it was skipped, and the run exits 1."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(tmp_path), "--sections", "ppo",
                           "--total-seconds", "5"], env=dict(os.environ), capture_output=True, text=True, timeout=120,
                          cwd=SCRIPT.parents[1])
    assert done.returncode == 1, done.stderr[-2000:]
    assert json.loads((tmp_path / "ppo.json").read_text())["error"].startswith("skipped: 5 s left of --total-seconds 5")
    assert (tmp_path / "tables.md").read_text().startswith("## ppo: skipped")
