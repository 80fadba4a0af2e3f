"""Shared fixtures for the world and simulator tests.

Generating an organism and compiling a solver are the expensive parts of these
tests, so organisms come from one cached factory per test process (pytest-xdist
workers each hold their own cache) and batched solves are padded to a few fixed
batch sizes, so each organism size compiles a handful of shapes only.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from luca_gym.worlds.luca import sim, spec, generator as world
from luca_gym.worlds.luca.types import Organism

# What `make test` leaves to `make test-all` (CI runs both, in that order):
# checks of scale, of whole programs in other processes, of training runs and
# of more cases of a check the quick tier already makes once. Each entry is
# a node-id prefix (a test, or some of its parameters) and why it is slow;
# tests can also carry ``@pytest.mark.slow`` themselves.
SLOW = {
    # larger organisms and shapes of their own (a generator program each)
    "tests/worlds/luca/test_generate.py::test_traced_generate_equals_generate_with_its_retries": "the traced generator at several plans",
    "tests/worlds/luca/test_ablation.py::test_real_names_relabel_the_same_organism[hard-30": "hard N=30 (medium N=20 stays quick)",
    "tests/worlds/luca/test_golden.py::test_organisms_are_bitwise_the_golden_ones[3/hard/40": "N=40 (the twelve N=20 golden organisms stay quick)",
    "tests/worlds/luca/test_world.py::test_fingerprint_sees_every_part_of_the_triple": "N=40 organisms",
    "tests/worlds/luca/test_sim.py::test_solves_at_n80": "N=80",
    "tests/worlds/luca/test_model_fit.py::test_local_family_plays_a_large_organism_through_the_harness": "N=40 through the harness",
    "tests/worlds/luca/test_model_fit.py::test_plays_whole_sessions_through_the_harness": "whole model-fit sessions",
    "tests/worlds/luca/test_model_fit.py::test_batched_form_runs_the_local_plan_and_answers_with_the_local_fit": "the batched model-fit",
    "tests/worlds/luca/test_model_fit.py::test_fit_recovers_a_known_network": "a model fit (its refusals stay quick)",
    "tests/worlds/luca/test_model_fit.py::test_local_fit_predicts_a_known_local_network": "a model fit",
    "tests/worlds/luca/test_sim.py::test_stack_refuses_mixed_sizes": "an N=80 organism",
    "tests/worlds/luca/test_world.py::test_generation_at_n80": "N=80 organisms",
    "tests/worlds/luca/test_ablation.py::test_eval_ablation_and_report": "backwards organisms through eval and report",
    "tests/worlds/luca/test_golden.py::test_organisms_are_bitwise_the_golden_ones[7/": "backwards organisms (a generator program each; the six forward N=20 ones stay quick)",
    "tests/worlds/luca/test_ablation.py::test_forward_and_backwards_share_their_real_labels": "backwards organisms",
    "tests/worlds/luca/test_generate.py::test_traced_generate_reports_exhausted_attempts": "the traced generator's own program (fresh_rollout's test keeps generation in the jit quick)",
    # other processes
    "tests/worlds/luca/test_world.py::test_fingerprint_is_the_same_in_another_process": "a fresh Python process",
    "tests/test_newcomer.py::test_the_stored_generator_program_gives_bitwise_the_same_organisms": "fresh Python processes",
    "tests/test_cli.py::test_info_play_and_mcp_open_the_same_organism[True]": "three CLI processes, sealed ([False] stays quick)",
    "tests/test_eval.py::test_resume_after_killed_sweep": "a killed eval process",
    "tests/test_concurrency.py::test_ctrl_c_stops_a_concurrent_sweep_at_once_and_a_rerun_completes_it": "a signalled eval process",
    "tests/test_sealed.py::test_two_eval_processes_at_once_never_double_a_session": "two eval processes",
    "tests/test_device_check.py::test_smoke_run_writes_every_section_and_cpu_parity_is_exact": "every device-check section",
    # training runs
    "tests/test_integration_gymnax.py": "gymnax and a purejaxrl-style PPO (an optional integration)",
    "tests/test_entity_attention.py": "the entity network: a PPO run and a second size",
    "tests/test_ppo.py::test_rescue_features_are_opt_in_and_read_the_measured_table": "a PPO run with the rescue features",
    "tests/test_ppo.py::test_the_checkpoint_refuses_another_size": "a PPO run and a second size",
    # more cases of a check the quick tier makes
    "tests/worlds/luca/test_core.py::test_dense_shaping_and_small_budget_keep_return_equal_to_composite": "40 more random sessions (return = composite is checked quick on 40 others)",
    "tests/worlds/luca/test_conformance.py::test_one_table_one_verdict_in_every_adapter[hard-disease]": "medium-healthy stays quick",
    "tests/test_llm_fuzz.py::test_ten_thousand_malformed_calls_are_refused_and_change_nothing": "10,000 calls (the other fuzz tests stay quick)",
    "tests/test_concurrency.py::test_200_concurrent_sessions_none_lost_none_doubled": "200 sessions (concurrency 1 and k stay quick)",
    "tests/worlds/equation/test_equation.py::test_generated_formulas_are_finite_and_depend_on_exactly_the_formula_variables[medium-1-1]": "an edge size",
    "tests/worlds/equation/test_equation.py::test_generated_formulas_are_finite_and_depend_on_exactly_the_formula_variables[complex-2-4]": "an edge size",
    **{f"tests/worlds/luca/test_vector.py::test_batched_baseline_matches_the_single_env_harness_score_for_score[{case}]":
       "a compiled rollout each (one case per policy and mode stays quick)"
       for case in ("heuristic-hard-healthy", "heuristic-hard-disease", "causal-sweep-hard-healthy", "causal-sweep-hard-disease",
                    "task-directed-medium-healthy")},
    "tests/test_curriculum.py::test_functional_env_gets_a_codec_per_level": "a codec per level (the Gymnasium wrapper's test stays quick)",
    "tests/worlds/graphs/test_graphs.py::test_check_world_passes_with_one_final_matrix_and_repeats":
        "proposals=final is played quick by test_graphs' tool sessions and flat codecs; redraw_may_repeat goes through check_world quick in test_graph_settings' dag case",
    "tests/worlds/graphs/test_graph_settings.py::test_check_world_passes_under_the_new_settings[relational-settings_1]":
        "relational shares dag's graph core (the dag case stays quick; test_graphs runs check_world on relational)",
    "tests/worlds/graphs/test_graph_settings.py::test_check_world_passes_under_the_new_settings[equation-settings_2]":
        "check_world on equation stays quick in test_equation; its noise and words grammar are checked quick in test_graph_settings",
    "tests/worlds/luca/test_generate.py::test_vector_autoreset_generates_only_the_ended_sub_envs": "fresh organisms at autoreset (test_vector checks it quick)",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the :data:`SLOW` tests (before ``-m`` deselects), then tag each
    test with its group for ``--dist loadgroup``.

    ``make test`` runs ``--dist loadgroup``: tests marked
    ``xdist_group(name)`` (sharing an expensive organism or program across
    modules) run on one worker, and so does each other module, as one unit
    (:func:`_group_names`). pytest-xdist tags a test's node id with ``@name``
    by writing ``Node._nodeid``, which pytest 9.2 no longer reads (node ids
    are ``Node._id`` now), so the tag is written here the way pytest keeps it.
    Where neither attribute exists the groups are ignored (plain ``load``:
    slower, still correct)."""
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SLOW):
            item.add_marker(pytest.mark.slow)
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:
        return
    for item in items:
        groups = _group_names(item)
        if "@" not in item.nodeid.rsplit("]", 1)[-1] and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def _group_names(item) -> list[str]:
    """The test's ``xdist_group`` names, else its module's (``tests.test_foo``).

    Without a group of its own, each test would be a unit of its own, and
    loadgroup hands units to whichever worker is free: a module's tests would
    alternate between the workers, and each worker would build the module's
    fixtures, organisms and compiled programs again (seen: a 26 s module
    fixture built twice). A module as one unit builds them once."""
    named = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return sorted(named) or [item.nodeid.split("::")[0].removesuffix(".py").replace("/", ".")]


TIERS = spec.TIER_NAMES
MODES = spec.MODES
GUARANTEE_SEEDS = range(20)


@functools.lru_cache(maxsize=None)
def make(
    seed: int, tier: str, n: int = 20, mode: str = "healthy", backwards: bool = False, max_attempts: int = world.MAX_ATTEMPTS
) -> Organism:
    """The organism of a triple, generated once per test process (a process-wide
    cache: session scope, shared by both test files on an xdist worker)."""
    return world.make_organism(seed, tier, n, mode, backwards, max_attempts=max_attempts)


# N=1280 generation takes ~15-20 s per attempt on this machine; a generator
# that cannot meet its guarantees would spend MAX_ATTEMPTS (50) attempts, about
# a quarter of an hour, before raising. The large-organism tests allow it the
# first LARGE_ATTEMPTS attempts only: the attempts are a deterministic sequence,
# so a success is the very organism ``make_organism`` returns.
LARGE_ATTEMPTS = 2
_large_failures: dict[tuple, str] = {}


def make_large(seed: int, tier: str, n: int) -> Organism:
    """``make(seed, tier, n)`` within the first LARGE_ATTEMPTS attempts; a failure
    is remembered so a second test in this process fails at once."""
    key = (seed, tier, n)
    if key in _large_failures:
        pytest.fail(_large_failures[key])
    try:
        return make(seed, tier, n, max_attempts=LARGE_ATTEMPTS)
    except RuntimeError as error:
        _large_failures[key] = f"make_organism{key} within its first {LARGE_ATTEMPTS} attempts: {error}"
        pytest.fail(_large_failures[key])


def _padded_size(b: int, n: int) -> int:
    """Batches are padded to 64 or a multiple of 1024 (a multiple of 8 for large
    N): few compiled shapes, and little wasted work on large organisms."""
    if n >= 320:
        return -(-b // 8) * 8
    if b <= 64:
        return 64
    return -(-b // 1024) * 1024


def solve_batch(arrays, codes: np.ndarray, flags: np.ndarray):
    """``sim.solve_interventions`` on a batch padded with no-op rows to a fixed
    size; returns numpy (states (B, N), phenotypes (B, P), converged (B,), steps (B,))."""
    codes = np.asarray(codes, np.int8)
    flags = np.asarray(flags, bool)
    b = codes.shape[0]
    size = _padded_size(b, codes.shape[1])
    codes = np.concatenate([codes, np.zeros((size - b, codes.shape[1]), np.int8)])
    flags = np.concatenate([flags, np.zeros((size - b, flags.shape[1]), bool)])
    r = sim.solve_interventions(arrays, codes, flags)
    return (
        np.asarray(r.states)[:b],
        np.asarray(r.phenotypes)[:b],
        np.asarray(r.converged)[:b],
        np.asarray(r.steps)[:b],
    )


def solve_one(arrays, codes=None, flags=None):
    """``sim.solve`` on one intervention (defaults: none); returns the SteadyState."""
    n, s = arrays.n_genes, arrays.n_signals
    codes = np.zeros(n, np.int8) if codes is None else np.asarray(codes, np.int8)
    flags = np.zeros(s, bool) if flags is None else np.asarray(flags, bool)
    return sim.solve(arrays, codes, flags)


def singles(n: int, n_signals: int, genes, codes) -> tuple[np.ndarray, np.ndarray]:
    """One row per (code, gene) for each code in ``codes`` and each gene in
    ``genes`` (code-major), then one row per signal activated alone."""
    genes = np.asarray(genes, int)
    rows = len(codes) * genes.size + n_signals
    c = np.zeros((rows, n), np.int8)
    f = np.zeros((rows, n_signals), bool)
    for k, code in enumerate(codes):
        c[k * genes.size + np.arange(genes.size), genes] = code
    f[len(codes) * genes.size + np.arange(n_signals), np.arange(n_signals)] = True
    return c, f


def random_interventions(rng: np.random.Generator, organism: Organism, count: int, sizes=(1, 2, 5), signal_p=0.25):
    """``count`` random interventions on targetable genes: the number of targets
    cycles through ``sizes``, codes BLOCK/BOOST/DAMPEN at random, and each signal
    is activated with probability ``signal_p``. Returns codes (B, N), flags (B, S)."""
    n, s = organism.n_genes, organism.n_signals
    targetable = np.flatnonzero(~np.asarray(organism.arrays.latent_mask))
    codes = np.zeros((count, n), np.int8)
    for b in range(count):
        k = sizes[b % len(sizes)]
        genes = rng.choice(targetable, size=k, replace=False)
        codes[b, genes] = rng.integers(1, 4, size=k)
    flags = rng.random((count, s)) < signal_p
    return codes, flags


def signal_after_lines(proc, path, lines: int, signum, timeout: float = 240.0) -> None:
    """Send ``signum`` to ``proc`` once ``path`` holds ``lines`` lines (a
    guard of ``timeout`` seconds against a hang, not a speed check); returns
    at once if the process ends first."""
    import time

    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            proc.send_signal(signum)
            return
        time.sleep(0.01)


# Each compiled program XLA loads on the CPU maps about three memory regions, and
# JAX keeps every program it compiled for the life of the process. A test worker
# compiles thousands: past the kernel's limit (vm.max_map_count, 65,530 by
# default) the next compile or cache write dies in native code (seen as a
# segfault in backend_compile_and_load and an abort in executable.serialize).
# After a module, a worker holding many maps drops JAX's in-process caches; the
# programs come back from the persistent compilation cache when needed again.
MAX_MAPS = int(os.environ.get("LUCA_GYM_TEST_MAX_MAPS", "30000"))


def _memory_maps() -> int:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux: no such limit to keep under
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    yield
    if _memory_maps() > MAX_MAPS:
        import gc

        import jax

        jax.clear_caches()
        gc.collect()


@pytest.fixture(scope="module")
def no_cache_writes():
    """A module that asks for it writes no compiled program to the persistent
    cache. Twice in full runs (session 2 in check_world on LUCA, session 3 in the
    toy PPO's update), a worker died with "Fatal Python error: Aborted" inside
    XLA's ``executable.serialize()``, called by JAX's persistent cache write
    (``compilation_cache.put_executable_and_time``); it did not reproduce in
    a process of its own. The programs compiled here are not written to the
    cache (they are read from it as before): the tests check the worlds, not
    the cache."""
    import jax

    previous = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
    yield
    jax.config.update("jax_persistent_cache_min_compile_time_secs", previous)
