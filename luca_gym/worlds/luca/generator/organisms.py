"""The organism generator (SPEC 1.3): one traced attempt, and the retries that
make the result a pure function of the triple.

An attempt draws and settles the network, in disease mode adds the
malfunction, and chooses the prediction tasks, all from keys derived from
``(seed, tier, n_genes, attempt)``. :func:`generate` runs an attempt for a whole
batch as one ``jit`` call on the device and retries only the organisms whose
attempt failed a guarantee; :func:`traced_generate` runs the same attempts in a
``lax.while_loop`` inside a caller's ``jit``; :func:`make_organism` is one
organism of :func:`generate`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from luca_gym import compile_cache
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca import vocabulary as vocabulary_mod
from luca_gym.worlds.luca.spec import (
    BLOCK,
    BOOST,
    HEALTHY_RANGE,
    N_PHENOTYPES,
    SEED_LIMIT,
    check_organism,
    check_positive_int,
    check_seed,
    check_vocabulary,
)
from luca_gym.worlds.luca.types import Organism, OrganismArrays, OrganismMeta
from luca_gym.worlds.luca.generator.malfunction import choose_malfunction
from luca_gym.worlds.luca.generator.network import (
    FAILED,
    OK,
    draw_network,
    only_if,
    settle,
    single_interventions,
    solve_rows,
)
from luca_gym.worlds.luca.generator.tasks import choose_tasks
from luca_gym.worlds.luca.generator.tiers import TIERS, Plan, TierParams, plan, sizes, tier_params

ROOT_KEY = 0x1ACA  # the root of every organism key
MAX_ATTEMPTS = 50


def organism_key(seed_hi, seed_lo, tier_index, n_genes) -> jax.Array:
    """The key of a triple (the seed split into two uint32 words); traceable."""
    key = jax.random.PRNGKey(ROOT_KEY)
    for part in (seed_hi, seed_lo, tier_index, n_genes):
        key = jax.random.fold_in(key, part)
    return key


def run_attempt(seed_hi, seed_lo, attempt, t: TierParams, p: Plan) -> tuple[OrganismArrays, jax.Array]:
    """One generation attempt for one triple: (arrays, ok). Traceable and pure.

    Each stage runs only if the stages before it succeeded (:func:`only_if`):
    most hard attempts fail in settling, and the searches after it cost more
    than the settling. A failed attempt's arrays are unspecified."""
    triple = organism_key(seed_hi, seed_lo, t.index, p.n)
    key = jax.random.fold_in(triple, attempt)
    net = draw_network(jax.random.fold_in(key, 0), p, t)
    status, arrays, singles, weights = settle(p, t, net, net["weights"], jax.random.fold_in(key, 3))
    if p.backwards:
        # The backwards organism inverts the settled forward one (paper
        # appendix E.1): weights, bias, signal effects and readout flip sign,
        # and the phenotypes are re-centred on the new baseline.
        # An attempt counts only if the forward organism of the same attempt is
        # valid too (its tasks included), so the two share their network.
        forward_ok = only_if(
            status == OK,
            lambda a, s: choose_tasks(p, t, a, s, jax.random.fold_in(triple, 20))[0] == OK,
            (arrays, singles),
            jnp.bool_(False),
        )
        net = dict(net, signal_effects=-net["signal_effects"], readout=-net["readout"])
        status, arrays, singles = only_if(
            forward_ok,
            lambda w: settle(p, t, net, -w, jax.random.fold_in(key, 4), backwards_of=w)[:3],
            (weights,),
            (jnp.int32(FAILED), arrays, singles),
        )
    return only_if(status == OK, lambda a, s: finish_attempt(triple, a, s, t, p), (arrays, singles), (arrays, jnp.bool_(False)))


def finish_attempt(triple, arrays: OrganismArrays, singles, t: TierParams, p: Plan) -> tuple[OrganismArrays, jax.Array]:
    """An attempt after its settling: in disease mode the malfunction, then the
    prediction tasks and the baseline phenotypes. Returns (arrays, ok)."""
    ok = jnp.bool_(True)
    if p.disease:
        m_status, arrays, n_alt = choose_malfunction(p, t, arrays, singles, jax.random.fold_in(triple, 10))
        ok &= m_status == OK
        # The tasks are chosen and scored on the diseased dynamics.
        codes, flags = single_interventions(p.n, p.n_signals, (BLOCK, BOOST))
        task_singles, task_conv = solve_rows(arrays, codes[: 2 * p.n], flags[: 2 * p.n])  # genes only
        pool = arrays.readout_mask & ~arrays.latent_mask
        ok &= (task_conv | ~jnp.concatenate([pool, pool])).all()
    else:
        n_alt, task_singles = jnp.int32(0), singles
    t_status, base, base_conv, tasks = choose_tasks(p, t, arrays, task_singles, jax.random.fold_in(triple, 20))
    ok &= (t_status == OK) & base_conv
    low, high = HEALTHY_RANGE
    arrays = dataclasses.replace(
        arrays, n_alt=n_alt, baseline_phenotypes=base, aberrant=(base < low) | (base > high), **tasks
    )
    return arrays, ok


@partial(jax.jit, static_argnames=("p", "map_batch"))
def attempt_batch(seed_hi, seed_lo, attempt, t: TierParams, p: Plan, map_batch: int):
    """One attempt for a batch (seed words uint32 (B,), attempt int32 (B,)):
    ``lax.map`` over groups of ``map_batch`` organisms, ``vmap`` within a
    group. Every group has the same shape, so an organism's result does not
    depend on the batch it was generated in. Returns (arrays stacked on a
    leading B axis, ok bool (B,))."""
    return jax.lax.map(lambda x: run_attempt(*x, t, p), (seed_hi, seed_lo, attempt), batch_size=map_batch)


# -- the attempt as a stored program --------------------------------------------
# JAX's persistent compilation cache skips XLA compilation but not tracing, and
# tracing the generator is most of a warm start (about 3 s of `luca-gym info`).
# So the traced attempt is also kept, serialized with jax.export, beside the
# compilation cache; a later process loads it instead of tracing. The key
# holds everything the program depends on: the package's source, JAX's
# version, the backend, the plan, the group and the batch size.
EXPORT_FORMAT = 1
_EXPORTS: dict = {}
_ARRAY_TREE = jax.tree_util.tree_structure(OrganismArrays(**{f.name: 0 for f in dataclasses.fields(OrganismArrays)}))


def _source_digest() -> str:
    if "source" not in _EXPORTS:
        h = hashlib.sha256()
        root = os.path.dirname(os.path.abspath(compile_cache.__file__))  # the whole package: what the program may depend on
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
        _EXPORTS["source"] = h.hexdigest()
    return _EXPORTS["source"]


def export_path(folder: str, size: int, p: Plan, group: int) -> str:
    """Where the attempt program of a batch of ``size`` is stored in ``folder``
    for this source, JAX version and backend: ``attempt-<program>-<source>``,
    the first part naming the program (backend, plan, group, size), the
    second the source and JAX version it was traced from."""
    program = hashlib.sha256(repr((EXPORT_FORMAT, jax.default_backend(), p, group, size)).encode()).hexdigest()[:16]
    source = hashlib.sha256(repr((jax.__version__, _source_digest())).encode()).hexdigest()[:24]
    return os.path.join(folder, f"attempt-{program}-{source}.jaxexport")


def remove_stale_exports(path: str) -> None:
    """Remove the stored programs (and their lock files) of the same program
    as ``path`` traced from another source or JAX version, which no process
    of this source loads, so that the store does not grow with every edit."""
    folder, name = os.path.split(path)
    program = name.rsplit("-", 1)[0] + "-"
    try:
        for entry in os.listdir(folder):
            if (entry.startswith(program) and entry.endswith((".jaxexport", ".jaxexport.lock"))
                    and entry not in (name, f"{name}.lock")):  # not a file another process is writing (.tmp)
                os.remove(os.path.join(folder, entry))
    except OSError:
        pass  # another process removed it first, or the folder is read-only


def _exported_attempt(size: int, t: TierParams, p: Plan, group: int):
    """The attempt of a batch of ``size`` as the jitted call of a
    ``jax.export.Exported`` (loaded from the store when there, else traced,
    exported and stored), or None when there is no cache folder.

    Jitted because an eager ``Exported.call`` re-checks and re-wraps its 19
    arguments in Python on every call: about 4 ms a call, measured, which was
    more than an attempt's own compute at N=20 and was paid again by every
    retried attempt (hard organisms take about four). Under ``jit`` it is
    one cached dispatch of the same program."""
    folder = compile_cache.export_dir()
    if folder is None:
        return None
    memo = (folder, jax.default_backend(), p, group, size)  # every call of a process after the first: a dict lookup
    if memo in _EXPORTS:
        return _EXPORTS[memo]
    path = export_path(folder, size, p, group)
    exported = None
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                exported = jax.export.deserialize(bytearray(f.read()))
        except Exception:  # noqa: BLE001 -- a damaged entry is rebuilt
            exported = None
    if exported is None:
        t_leaves, t_tree = jax.tree_util.tree_flatten(t)

        def flat(hi, lo, attempt, *leaves):
            arrays, ok = attempt_batch(hi, lo, attempt, jax.tree_util.tree_unflatten(t_tree, leaves), p, group)
            return (*jax.tree_util.tree_leaves(arrays), ok)

        specs = [jax.ShapeDtypeStruct((size,), np.uint32)] * 2 + [jax.ShapeDtypeStruct((size,), np.int32)]
        specs += [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in t_leaves]
        exported = jax.export.export(jax.jit(flat))(*specs)
        try:
            data = exported.serialize()  # needs flatbuffers (a dependency of this package)
            os.makedirs(folder, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            remove_stale_exports(path)
        except (OSError, ImportError):
            pass  # no store: this process still uses the program it traced
    _EXPORTS[memo] = jax.jit(exported.call)
    return _EXPORTS[memo]


def run_attempt_batch(seed_hi, seed_lo, attempt, t: TierParams, p: Plan, group: int):
    """:func:`attempt_batch` through the stored program when the compilation
    cache is on (the same computation, without tracing it again).

    A process's first call of a program (tracing or loading it, then
    compiling it: 15-25 s on a CPU) holds a lock beside the stored program,
    so that processes starting together compile it once: the others wait,
    then load the compiled program from the persistent cache in about a
    second (:func:`luca_gym.compile_cache.process_lock`)."""
    size = int(np.shape(seed_hi)[0])
    folder = compile_cache.export_dir()
    if folder is None:
        return attempt_batch(seed_hi, seed_lo, attempt, t, p, group)
    args = (seed_hi, seed_lo, attempt, *jax.tree_util.tree_leaves(t))
    memo = (folder, jax.default_backend(), p, group, size)
    if memo in _EXPORTS:
        out = _EXPORTS[memo](*args)
    else:
        with compile_cache.process_lock(export_path(folder, size, p, group) + ".lock"):
            out = _exported_attempt(size, t, p, group)(*args)  # compiled, or loaded from the cache, under the lock
    return jax.tree_util.tree_unflatten(_ARRAY_TREE, out[:-1]), out[-1]


def traced_generate(seed_hi, seed_lo, t: TierParams, p: Plan, max_attempts: int = MAX_ATTEMPTS):
    """Generation of one organism as a traceable JAX function: attempts run in
    a ``lax.while_loop`` until one meets every guarantee. Returns (arrays, ok);
    ``ok`` is False when ``max_attempts`` attempts all failed.

    Use it inside your own ``jit`` (``vmap`` it over seeds): the result equals
    :func:`generate`'s, which runs the same attempts with a host-side retry of
    the failed organisms only. ``seed_hi`` / ``seed_lo`` are the seed's uint32
    words; ``t`` and ``p`` come from :func:`tier_params` and :func:`plan`.
    """
    shapes = jax.eval_shape(lambda: run_attempt(seed_hi, seed_lo, jnp.int32(0), t, p))

    def body(carry):
        attempt, _, _ = carry
        arrays, ok = run_attempt(seed_hi, seed_lo, attempt, t, p)
        return attempt + 1, ok, arrays

    init = (jnp.int32(0), jnp.bool_(False), jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes[0]))
    _, ok, arrays = jax.lax.while_loop(lambda c: ~c[1] & (c[0] < max_attempts), body, init)
    return arrays, ok


def map_batch() -> int:
    """Organisms generated side by side (vmapped) in one group. Their loops
    (solver steps, repair rounds, candidate searches) run until the slowest
    member is done, so on a CPU one at a time is fastest (measured: 0.25 s vs
    1.1 s for 256 hard organisms' settling); an accelerator wants wide groups.
    Override with ``LUCA_GYM_GENERATION_GROUP``."""
    value = os.environ.get("LUCA_GYM_GENERATION_GROUP")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"LUCA_GYM_GENERATION_GROUP: {value!r} not allowed; a positive integer")
        return int(value)
    return 1 if jax.default_backend() == "cpu" else 256


def call_sizes(group: int) -> tuple[int, ...]:
    """Batch sizes one generation call is padded to (each is a compile, which
    takes 15-20 s on a CPU): with groups of one (a CPU) only 1, a batch being
    a series of 1-organism calls (measured: 256 hard/disease N=20 organisms in
    24.0 s as single calls vs 22.9 s as 16-organism calls, and one compile
    instead of two); with groups of g, g, 16 g, 256 g ... up to 4096 (an
    accelerator's default g = 256 gives 256 and 4096)."""
    if group == 1:
        return (1,)
    sizes_ = [group]
    while sizes_[-1] * 16 <= max(4096, group):
        sizes_.append(sizes_[-1] * 16)
    return tuple(sizes_)


def check_seeds(seeds) -> np.ndarray:
    """A batch of organism seeds: a non-empty 1-d sequence, each one a seed by
    :func:`luca_gym.worlds.luca.spec.check_seed`. Returns them as int64 (B,)."""
    values = np.asarray(seeds)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"seeds: shape {values.shape} not allowed; a non-empty 1-d sequence of seeds")
    if values.dtype.kind == "i":
        suspects = values[values < 0]
    elif values.dtype.kind == "u":
        suspects = values[values >= SEED_LIMIT]
    else:
        suspects = values  # floats, bools, strings, objects: each is checked
    for seed in suspects:
        check_seed(seed, "seeds")
    return values.astype(np.int64)


def generate(
    seeds,
    tier: str,
    n_genes: int = 20,
    mode: str = "healthy",
    backwards: bool = False,
    *,
    max_attempts: int = MAX_ATTEMPTS,
    sealed=None,
) -> OrganismArrays:
    """The organism arrays of many triples at once, stacked on a leading axis.

    Each attempt of SPEC 1.3 runs for the whole batch as jitted calls on the
    default device; only the organisms whose attempt failed are retried with
    the next attempt. Row ``i`` is bitwise the ``arrays`` of
    ``make_organism(seeds[i], ...)`` on the same backend, whatever the batch.

    Raises ValueError on a bad argument and RuntimeError when a triple meets no
    guarantee within ``max_attempts`` attempts (the attempts are one fixed
    sequence, so a smaller limit only gives up sooner).

    ``sealed`` (a :class:`luca_gym.seal.Seal`, a secret, or True for
    ``$LUCA_GYM_SECRET``; see :func:`luca_gym.seal.make_seal`) generates each
    organism from its sealed seed instead: the public seed no longer gives it.
    """
    seeds = seal_mod.resolve_seeds(check_seeds(seeds), seal_mod.make_seal(sealed))
    tier, n_genes, mode, backwards = check_organism(tier, n_genes, mode, backwards)
    max_attempts = check_positive_int(max_attempts, "max_attempts")
    p, t = plan(n_genes, mode, backwards), tier_params(tier, n_genes)
    hi = (seeds >> 32).astype(np.uint32)
    lo = (seeds & 0xFFFFFFFF).astype(np.uint32)
    group = map_batch()
    sizes_ = call_sizes(group)
    result = None
    pending = np.arange(seeds.size)
    for attempt in range(max_attempts):
        if pending.size == 0:
            break
        calls = []
        for start in range(0, pending.size, sizes_[-1]):  # dispatch every call, then collect
            rows = pending[start : start + sizes_[-1]]
            size = next(b for b in sizes_ if b >= rows.size)
            padded = np.concatenate([rows, np.full(size - rows.size, rows[0])])
            calls.append((rows, run_attempt_batch(hi[padded], lo[padded], np.full(size, attempt, np.int32), t, p, group)))
        done = []
        # Assembled on the host: no compile per batch size (the vector env asks
        # for any count), and on a GPU an N=20 batch of 4096 is 17 MB.
        for rows, (arrays, ok) in calls:
            ok = np.asarray(ok)[: rows.size]
            arrays = jax.tree_util.tree_map(np.asarray, arrays)
            if result is None:
                result = jax.tree_util.tree_map(lambda x: np.zeros((seeds.size,) + x.shape[1:], x.dtype), arrays)
            for dst, src in zip(jax.tree_util.tree_leaves(result), jax.tree_util.tree_leaves(arrays)):
                dst[rows[ok]] = src[: rows.size][ok]
            done.append(rows[ok])
        pending = np.setdiff1d(pending, np.concatenate(done))
    if pending.size:
        raise RuntimeError(
            f"no organism met the guarantees for seed={int(seeds[pending[0]])}, tier={tier!r}, "
            f"n_genes={n_genes} after {max_attempts} attempts"
        )
    return jax.tree_util.tree_map(jnp.asarray, result)


def make_organism(
    seed: int,
    tier: str,
    n_genes: int = 20,
    mode: str = "healthy",
    backwards: bool = False,
    *,
    max_attempts: int = MAX_ATTEMPTS,
    sealed=None,
    vocabulary: str = "invented",
) -> Organism:
    """Generate the organism of ``(seed, tier, n_genes)`` (SPEC 1.3).

    Args:
        seed: non-negative integer.
        tier: ``"easy"``, ``"medium"`` or ``"hard"``.
        n_genes: 4..4096.
        mode: ``"healthy"`` or ``"disease"`` (adds one malfunction, SPEC 1.6).
        backwards: invert every signed quantity (weights, biases, signal modes,
            readout weights; paper appendix E.1) and re-centre the phenotypes.
        max_attempts: give up (RuntimeError) after this many failed attempts;
            an organism found within it is the one the default finds.

    The healthy and disease organisms of one triple share their network; the
    disease one adds the malfunction, and its prediction tasks are chosen and
    scored on the diseased dynamics. :func:`generate` makes many at once.

    ``sealed``: see :func:`generate`. A sealed organism's names are drawn from
    its sealed seed too; ``meta.seed`` stays the public seed and
    ``meta.sealed`` is the seal's fingerprint.

    ``vocabulary``: ``"invented"`` (``G001``...) or ``"real"`` (real human
    gene symbols, at most 50 genes; paper appendix E.2): the same organism
    with its genes relabelled, nothing else changes.
    """
    seed = check_seed(seed)
    tier, n_genes, mode, backwards = check_organism(tier, n_genes, mode, backwards)
    vocabulary = check_vocabulary(vocabulary, n_genes)
    seal = seal_mod.make_seal(sealed)
    batch = generate([seed], tier, n_genes, mode, backwards, max_attempts=max_attempts, sealed=seal)
    arrays = jax.tree_util.tree_map(lambda x: x[0], batch)
    meta = organism_meta(seed, tier, n_genes, mode, backwards, arrays.signal_effects, sealed=seal, vocabulary=vocabulary)
    return Organism(arrays=arrays, meta=meta)


def organism_meta(seed: int, tier: str, n_genes: int, mode: str, backwards: bool, signal_effects, *, sealed=None,
                  vocabulary: str = "invented") -> OrganismMeta:
    """The names of an organism (host-side strings, a pure function of the
    triple, or of the sealed seed under ``sealed``); ``signal_effects`` float
    (S, N) gives each signal's mode. ``vocabulary="real"`` draws the gene
    names from real gene symbols (with a stream of their own: the other names,
    and the forward and backwards organisms' labels, stay the same)."""
    sz = sizes(n_genes)
    seal = seal_mod.make_seal(sealed)
    names_seed = int(seal_mod.resolve_seeds([seed], seal)[0])
    names_rng = np.random.default_rng(np.random.SeedSequence([names_seed, TIERS[tier].index, n_genes, 0, 30]))
    if check_vocabulary(vocabulary, n_genes) == "real":
        real_rng = np.random.default_rng(np.random.SeedSequence([names_seed, TIERS[tier].index, n_genes, 0, 31]))
        genes = vocabulary_mod.real_gene_names(real_rng, n_genes)
    else:
        genes = vocabulary_mod.gene_names(n_genes)
    effects = np.asarray(signal_effects)
    return OrganismMeta(
        seed=int(seed),
        sealed=None if seal is None else seal.fingerprint,
        tier=tier,
        n_genes=n_genes,
        mode=mode,
        backwards=bool(backwards),
        gene_names=genes,
        module_names=vocabulary_mod.module_names(names_rng, sz.n_modules),
        signal_labels=vocabulary_mod.signal_labels(names_rng, sz.n_signals),
        signal_modes=tuple("activates" if row.sum() > 0 else "inhibits" for row in effects),
        phenotype_names=vocabulary_mod.phenotype_names(names_rng, N_PHENOTYPES),
        vocabulary=vocabulary,
    )
