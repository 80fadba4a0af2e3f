"""Every matrix product of the generator, the solver and the differentiable
steady state asks for full float32 precision in the program itself (
on NVIDIA GPUs JAX's default float32 product is TF32). The check reads the
jaxprs (every nested jaxpr: scans, loops, conds, the vmapped and map bodies,
gradients) and the generator's stored ``jax.export`` programs, and fails on a
``dot_general`` without ``Precision.HIGHEST``; the first test shows it does
fail on a plain ``@``. Organisms stay bitwise the same on the CPU: the golden
fingerprints (tests/worlds/luca/test_golden.py) are unchanged."""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jcore

from luca_gym import compile_cache
from luca_gym.worlds.luca import diffsim, sim
from luca_gym.worlds.luca import generator as world
from luca_gym.worlds.luca.generator import organisms as organisms_mod
from luca_gym.worlds.luca.generator.tiers import plan, tier_params
from luca_gym.worlds.luca.precision import HIGHEST, matmul

FULL = (HIGHEST, HIGHEST)


def products(jaxpr, found=None) -> list:
    """The precision of every ``dot_general`` in ``jaxpr`` and the jaxprs inside it."""
    found = [] if found is None else found
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params.get("precision"))
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(sub, jcore.ClosedJaxpr):
                    products(sub.jaxpr, found)
                elif isinstance(sub, jcore.Jaxpr):
                    products(sub, found)
    return found


def check(fn, *args) -> int:
    found = products(jax.make_jaxpr(fn)(*args).jaxpr)
    lacking = [p for p in found if p != FULL]
    assert found and not lacking, f"{len(lacking)} of {len(found)} matrix products without full precision: {lacking}"
    return len(found)


def test_the_check_fails_on_a_product_without_its_precision():
    a = jnp.ones((3, 3), jnp.float32)
    assert check(lambda x: matmul(x, x), a) == 1
    with pytest.raises(AssertionError, match="1 of 2 matrix products without full precision"):
        check(lambda x: matmul(x, x) + x @ x, a)
    with pytest.raises(AssertionError):  # inside a loop body too
        check(lambda x: jax.lax.fori_loop(0, 2, lambda i, y: y @ y, x), a)


@pytest.mark.parametrize("tier, mode, backwards", [("hard", "disease", False), ("medium", "healthy", True)])
def test_the_generator_asks_for_full_precision(tier, mode, backwards):
    p, t = plan(20, mode, backwards), tier_params(tier, 20)
    hi, lo, attempt = np.zeros(2, np.uint32), np.arange(2, dtype=np.uint32), np.zeros(2, np.int32)
    assert check(lambda a, b, c: organisms_mod.attempt_batch(a, b, c, t, p, 2), hi, lo, attempt) > 10
    assert check(lambda a, b: organisms_mod.traced_generate(a, b, t, p, 2), jnp.uint32(0), jnp.uint32(1)) > 10


def test_the_solvers_and_the_differentiable_steady_state_ask_for_full_precision():
    o = world.make_organism(0, "easy", 20, "disease").arrays  # an organism other tests generate too
    codes = jnp.zeros((3, 20), jnp.int8)
    flags = jnp.zeros((3, o.signal_effects.shape[0]), bool)
    check(lambda c, f: sim.solve_interventions(o, c, f), codes, flags)
    check(lambda c, f: sim.solve_organisms(sim.stack([o, o, o]), c, f), codes, flags)
    check(lambda c, f: diffsim.coded_phenotypes(o, c, f), codes[0], flags[0])
    grad = jax.grad(lambda w: diffsim.coded_phenotypes(o.__class__(**{**vars(o), "weights": w}), codes[0], flags[0]).sum())
    check(grad, o.weights)


def test_the_stored_generator_programs_ask_for_full_precision():
    """The ``jax.export`` programs the generator stores beside the compile
    cache (and loads instead of tracing) carry the precision in their text."""
    folder = compile_cache.export_dir()
    if folder is None:
        pytest.skip("no compilation cache folder (LUCA_GYM_CACHE_DIR=off): nothing is stored")
    world.generate(np.arange(2), "easy", 20, "healthy")  # stores its attempt programs if they are not there
    group = organisms_mod.map_batch()
    # this source's programs (entries of older sources may lie beside them, never loaded)
    paths = [organisms_mod.export_path(folder, size, plan(20, "healthy"), group) for size in organisms_mod.call_sizes(group)]
    paths = [path for path in paths if os.path.exists(path)]
    assert paths, "generate stored no program"
    for path in paths:
        with open(path, "rb") as f:
            exported = jax.export.deserialize(bytearray(f.read()))
        lines = [line for line in exported.mlir_module().splitlines() if re.search(r"= stablehlo\.dot_general", line)]
        lacking = [line.strip()[:160] for line in lines if "precision = [HIGHEST, HIGHEST]" not in line]
        assert lines and not lacking, f"{os.path.basename(path)}: {len(lacking)} products without full precision: {lacking[:3]}"
