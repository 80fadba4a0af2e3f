"""The equation world's baselines, as tool agents (``(messages, tools) -> AgentTurn``).
Under ``proposals="every"`` (the paper's loop, the default) each states its
current best formula with every query, as the paper's loop asks; under
``"final"`` only the submission carries one.

* ``random``: a random number of queries (1..budget) at random inputs, then a
  random formula drawn from the grammar (of the session's complexity, over
  randomly chosen variables); under the paper's loop, another random formula
  of the grammar with each query. Its whole session is :func:`random_plan`,
  fixed by the session's variable names, so ``luca-gym report`` computes the
  ``random`` floor from the core without running it.
* ``systematic``: a sequential design of queries and an exhaustive search of
  the grammar. The first query is at random inputs; the search lists every
  formula of the session's complexity whose output there is the measured one
  (relative 1e-10), by bottom-up enumeration with meet-in-the-middle at the
  top operator: tables of ``c * M`` (constant times monomial) values at the
  query, sorted, and every other part of the formula enumerated and its
  residual looked up (``y - L``, ``(y -/+ c2*M3) / f(M2)``, ``y / f(M2)``);
  the grammar's rule that each variable appears once, the number of formula
  variables and the sizes of the parts then filter the matches, and later
  queries prune them. Once every remaining formula agrees on
  PROBES random inputs it submits one; otherwise it queries the probe input
  where they disagree most, stating under the paper's loop the first
  remaining formula (before any answer: NO_HYPOTHESIS). It uses one query when
  the first measurement singles the formula out, more when coincidences
  remain.

  Exhaustive where its tables fit: the ``c * M`` table holds every monomial
  over the m visible variables (9 * 5**m values) while that is at most
  TABLE_CAP values (m <= 8), and the enumerated side of a sum holds every
  part with at most floor(n/2) (medium) or floor((n-1)/2) (complex) monomial
  variables while that is at most ENUM_CAP values; both cover the paper's
  settings (n <= 5 formula variables, m <= 7 visible) in full. Beyond, the
  supports are bounded (largest first cut) and formulas outside them are
  missed: the baseline then submits a fallback and fails.
* ``noisy-fit``: the grammar fitted to noisy answers (``measurement_noise``,
  where ``systematic``'s exact match finds nothing). It lists every
  structure of the session's complexity (:func:`fit_structures`: the
  variables' split among M1, f(M2) and M3, their exponents and f; the
  constants and sign left free) and, after each answer, fits each
  structure's integer constants to all the answers by weighted least
  squares in relative error (for each c1 in 1..9 the two integers next to
  the best continuous c2), keeps the FIT_KEEP best and ranks them by their
  log posterior: the Gaussian log likelihood of the answers (each the
  formula's value times 1 + sigma z, sigma as ``describe`` says) plus the
  log probability the world's generator gives the structure. With every
  query it states the most probable formula not yet found wrong (a query
  answered means the formula it stated was not right) and queries the random
  input where the likely alternatives stand furthest, in noise standard
  deviations, from that formula; once the budget is spent it submits it. It
  reads only the tools' answers and its own calls (a fresh agent given the
  same messages makes the same call). Exhaustive up to FIT_CAP structures
  (every paper setting: at most 4.7 million, complex with 5 variables among
  7, one to two minutes a session here); it works without noise too.
"""

from __future__ import annotations

import itertools
import json
import zlib
from dataclasses import dataclass
from math import comb

import numpy as np

from luca_gym.llm.loop import AgentTurn, ToolCall, tool_results, tool_results_with_ids
from luca_gym.worlds.equation import grammar
from luca_gym.worlds.equation.config import (
    CONSTANTS, EXPONENTS, FUNCTIONS, INNER_EXPONENTS, MAX_INNER, EquationConfig,
)

PROBES = 32  # random inputs on which the remaining formulas must agree
MATCH_RTOL = 1e-10  # a formula "gives the measured output" within this relative error
AGREE_RTOL = 1e-8  # two formulas agree on an input within this relative error (of their terms' size)
TABLE_CAP = 4_000_000  # values in the sorted c * M table
ENUM_CAP = 4_000_000  # values enumerated on one side of a meet-in-the-middle
NO_HYPOTHESIS = "1"  # stated before any answer, and submitted when the search found nothing: no formula of the grammar is constant
_NUMPY = {"sin": np.sin, "exp": np.exp, "log": np.log, "sqrt": np.sqrt}
_CONSTANTS = np.asarray(CONSTANTS, np.float64)


def _session_facts(results):
    """(describe's answer or None, [(inputs dict, output)], budget remaining)."""
    info = next((r for r in results if "variables" in r), None)
    queries = [(r["inputs"], r["output"]) for r in results if "output" in r]
    budget = results[-1]["budget_remaining"] if results else None
    return info, queries, budget


def _call(name, arguments=None) -> AgentTurn:
    return AgentTurn(tool_calls=[ToolCall(name, arguments or {})])


def _rng(info) -> np.random.Generator:
    """A generator fixed by the session's variable names (a baseline replays exactly)."""
    return np.random.default_rng(zlib.crc32(",".join(info["variables"]).encode()))


def _inputs(point, info) -> dict:
    return {v: float(x) for v, x in zip(info["variables"], point)}


def random_plan(info) -> tuple[np.ndarray, list[str], str]:
    """The ``random`` baseline's whole session, a pure function of what
    ``describe`` answers (``info``: variables, input_range, budget,
    complexity, n_distractors, proposals): (the inputs of its queries, float
    (Q, m); the formula it states with each query, Q texts under the paper's
    loop, else none; its final formula)."""
    rng = _rng(info)
    n_queries = int(rng.integers(1, info["budget"] + 1))
    points = rng.uniform(*info["input_range"], size=(info["budget"], len(info["variables"])))[:n_queries]
    m, d = len(info["variables"]), info["n_distractors"]
    config = EquationConfig(info["complexity"], m - d, d)

    def formula() -> str:
        return grammar.render(grammar.random_structure(int(rng.integers(0, 2**31)), config), info["variables"])

    final = formula()
    return points, [formula() for _ in range(n_queries)] if info.get("proposals") == "every" else [], final


class RandomBaseline:
    """Random queries (each with a random formula under the paper's loop), then a random formula of the grammar."""

    def __init__(self):
        self._plan = None  # (the variables it was drawn for, random_plan's answer)

    def __call__(self, messages, tools) -> AgentTurn:
        info, queries, budget = _session_facts(tool_results(messages))
        if info is None:
            return _call("describe")
        if self._plan is None or self._plan[0] != info["variables"]:
            self._plan = (info["variables"], random_plan(info))
        points, stated, final = self._plan[1]
        if len(queries) < len(points) and budget:
            k = len(queries)
            return _call("query", {"inputs": _inputs(points[k], info), **({"formula": stated[k]} if stated else {})})
        return _call("submit_formula", {"formula": final})


@dataclass
class Candidates:
    """Formulas ``c1*M1*f(M2) + sign*c2*M3`` as arrays (K formulas over m inputs);
    the fields of :class:`~luca_gym.worlds.equation.grammar.Structure`, K leading."""

    c1: np.ndarray
    e1: np.ndarray
    f: np.ndarray
    e2: np.ndarray
    sign: np.ndarray
    c2: np.ndarray
    e3: np.ndarray

    def __len__(self):
        return len(self.c1)

    def take(self, index) -> "Candidates":
        """The candidates at ``index`` (an integer array or mask)."""
        return Candidates(*(getattr(self, k)[index] for k in ("c1", "e1", "f", "e2", "sign", "c2", "e3")))

    @staticmethod
    def join(parts) -> "Candidates":
        """The candidates of ``parts``, concatenated in order."""
        return Candidates(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("c1", "e1", "f", "e2", "sign", "c2", "e3")))

    def values(self, x) -> tuple[np.ndarray, np.ndarray]:
        """(outputs (K, P), size of the terms (K, P)) at inputs x (P, m)."""
        logx = np.log(x).T
        inner = np.exp(self.e2 @ logx)
        with np.errstate(all="ignore"):
            f = np.ones_like(inner)
            for code, name in enumerate(FUNCTIONS, start=1):
                f = np.where((self.f == code)[:, None], _NUMPY[name](inner), f)
        first = self.c1[:, None] * np.exp(self.e1 @ logx) * f
        third = self.c2[:, None] * np.exp(self.e3 @ logx)
        return first + self.sign[:, None] * third, np.abs(first) + third

    def structure(self, k: int) -> grammar.Structure:
        """Candidate ``k`` as a grammar structure."""
        return grammar.Structure(*(getattr(self, f)[k] for f in ("c1", "e1", "f", "e2", "sign", "c2", "e3")))

    def key(self, k: int) -> bytes:
        """Candidate ``k``'s fields as bytes: equal keys, equal formulas."""
        return b"".join(np.asarray(getattr(self, f)[k], np.int64).tobytes() for f in ("c1", "e1", "f", "e2", "sign", "c2", "e3"))


def monomials(m: int, exponents, max_support: int, min_support: int = 0) -> np.ndarray:
    """Every exponent vector over m inputs with min_support..max_support
    non-zero entries from ``exponents``, by increasing support: int (K, m)."""
    rows = []
    for s in range(min_support, max_support + 1):
        powers = np.asarray(list(itertools.product(exponents, repeat=s)), np.int64).reshape(len(exponents) ** s, s)
        for combo in itertools.combinations(range(m), s):
            block = np.zeros((len(powers), m), np.int64)
            block[:, list(combo)] = powers
            rows.append(block)
    return np.concatenate(rows) if rows else np.zeros((0, m), np.int64)


def _support_cap(m: int, exponents, cap: int, per_row: int, limit: int) -> int:
    """The largest support s <= limit whose monomials (all supports up to s) times per_row stay within cap."""
    best, total = 0, 0
    for s in range(0, limit + 1):
        total += comb(m, s) * len(exponents) ** s
        if total * per_row > cap:
            break
        best = s
    return best


class _Table:
    """The values ``c * M`` at one input x (c in 1..9, M every monomial of
    support <= the cap), sorted, for lookups."""

    def __init__(self, x, max_support: int):
        m = len(x)
        self.exponents = monomials(m, EXPONENTS, max_support)
        self.monomial = np.exp(self.exponents @ np.log(x))
        values = (_CONSTANTS[:, None] * self.monomial[None, :]).ravel()
        self.order = np.argsort(values, kind="stable")
        self.sorted = values[self.order]

    def lookup(self, targets, halfwidth):
        """(target index, entry index) of every entry within ``halfwidth`` of a target."""
        lo = np.searchsorted(self.sorted, targets - halfwidth, "left")
        hi = np.searchsorted(self.sorted, targets + halfwidth, "right")
        counts = np.maximum(hi - lo, 0)
        which = np.repeat(np.arange(len(targets)), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return which, self.order[lo[which] + offsets]

    def entry(self, index):
        """(constant, exponents) of table entries."""
        k = len(self.monomial)
        return _CONSTANTS[index // k].astype(np.int64), self.exponents[index % k]


def _window(target, *sizes):
    """Half-width of a lookup: the relative tolerance, and rounding in the terms the target was computed from."""
    return MATCH_RTOL * np.abs(target) + 1e-13 * sum(np.abs(s) for s in sizes)


def _candidates(n_rows, **fields) -> Candidates:
    m = next(v.shape[1] for v in fields.values() if np.ndim(v) == 2)
    defaults = {"c1": np.ones(n_rows, np.int64), "e1": np.zeros((n_rows, m), np.int64), "f": np.zeros(n_rows, np.int64),
                "e2": np.zeros((n_rows, m), np.int64), "sign": np.ones(n_rows, np.int64), "c2": np.zeros(n_rows, np.int64),
                "e3": np.zeros((n_rows, m), np.int64)}
    defaults.update({k: np.broadcast_to(np.asarray(v, np.int64), defaults[k].shape).copy() for k, v in fields.items()})
    return Candidates(**defaults)


def _inner_parts(x):
    """Every f(M2): (f code (I,), M2 exponents (I, m), value at x (I,))."""
    e2 = monomials(len(x), INNER_EXPONENTS, min(MAX_INNER, len(x)), 1)
    inner = np.exp(e2 @ np.log(x))
    codes, exps, values = [], [], []
    with np.errstate(all="ignore"):
        for code, name in enumerate(FUNCTIONS, start=1):
            codes.append(np.full(len(e2), code))
            exps.append(e2)
            values.append(_NUMPY[name](inner))
    return np.concatenate(codes), np.concatenate(exps), np.concatenate(values)


def search(complexity: str, n: int, x, y) -> Candidates:
    """Every formula of the grammar (n formula variables among len(x)) whose
    output at x is y, within MATCH_RTOL (and the caps in the module's docstring)."""
    x = np.asarray(x, np.float64)
    m = len(x)
    support = _support_cap(m, EXPONENTS, TABLE_CAP, len(CONSTANTS), n)
    table = _Table(x, support)
    found = []
    if complexity == "simple":
        _, hit = table.lookup(np.array([y]), _window(np.array([y])))
        c, e = table.entry(hit)
        found.append(_candidates(len(hit), c1=c, e1=e))
    elif complexity == "medium":
        # c1*M1 +/- c2*M3: enumerate the term with fewer variables, look up the other
        few = min(support, _support_cap(m, EXPONENTS, ENUM_CAP, 2 * len(CONSTANTS), n // 2))
        count = len(monomials(m, EXPONENTS, few, 1))
        terms = np.concatenate([c * table.monomial[1:1 + count] for c in _CONSTANTS])
        t_c = np.repeat(_CONSTANTS.astype(np.int64), count)
        t_e = np.tile(table.exponents[1:1 + count], (len(CONSTANTS), 1))
        for s in (1, -1):
            residual = y - s * terms
            which, hit = table.lookup(np.abs(residual), _window(residual, y, terms))
            c, e = table.entry(hit)
            positive = residual[which] > 0  # y = hit + s*term; else (s = +1) y = term - hit
            keep = positive | (s == 1)
            which, c, e, positive = which[keep], c[keep], e[keep], positive[keep]
            found.append(_candidates(
                len(which), c1=np.where(positive, c, t_c[which]), e1=np.where(positive[:, None], e, t_e[which]),
                sign=np.where(positive, s, -1), c2=np.where(positive, t_c[which], c),
                e3=np.where(positive[:, None], t_e[which], e)))
        # c1*M1*f(M2)
        codes, e2, u = _inner_parts(x)
        with np.errstate(all="ignore"):
            quotient = y / u
        which, hit = table.lookup(quotient, _window(quotient))
        c, e = table.entry(hit)
        found.append(_candidates(len(which), c1=c, e1=e, f=codes[which], e2=e2[which]))
    else:
        codes, e2, u = _inner_parts(x)
        side = max(0, (n - 1) // 2)
        # pass A: enumerate c1*M1*f(M2) with |M1| <= side, look up |y - L| = c2*M3
        few = min(support, _support_cap(m, EXPONENTS, ENUM_CAP, len(CONSTANTS) * len(u), side))
        count = len(monomials(m, EXPONENTS, few))
        first = (_CONSTANTS[:, None] * table.monomial[None, :count]).reshape(-1)  # (9 * count,) c-major
        for chunk in np.array_split(np.arange(len(u)), max(1, len(first) * len(u) // 1_000_000)):
            left = first[:, None] * u[None, chunk]  # (9*count, chunk)
            residual = (y - left).ravel()
            which, hit = table.lookup(np.abs(residual), _window(residual, y, left.ravel()))
            c, e = table.entry(hit)
            row, col = np.divmod(which, len(chunk))
            found.append(_candidates(
                len(which), c1=_CONSTANTS[row // count].astype(np.int64), e1=table.exponents[row % count],
                f=codes[chunk][col], e2=e2[chunk][col], sign=np.sign(residual[which]), c2=c, e3=e))
        # pass B: enumerate sign*c2*M3 with 1 <= |M3| <= side, look up (y - sign*c2*M3) / f(M2) = c1*M1
        count = len(monomials(m, EXPONENTS, few, 1))
        third = (_CONSTANTS[:, None] * table.monomial[None, 1:1 + count]).reshape(-1)
        for s in (1, -1):
            for chunk in np.array_split(np.arange(len(u)), max(1, len(third) * len(u) // 1_000_000)):
                with np.errstate(all="ignore"):
                    quotient = ((y - s * third)[:, None] / u[None, chunk]).ravel()
                    rounding = ((np.abs(y) + third)[:, None] / np.abs(u[None, chunk])).ravel()
                which, hit = table.lookup(quotient, _window(quotient, rounding))
                c, e = table.entry(hit)
                row, col = np.divmod(which, len(chunk))
                found.append(_candidates(
                    len(which), c1=c, e1=e, f=codes[chunk][col], e2=e2[chunk][col], sign=s,
                    c2=_CONSTANTS[row // count].astype(np.int64), e3=table.exponents[1 + row % count]))
    return _in_grammar(Candidates.join(found), complexity, n)


def _in_grammar(c: Candidates, complexity: str, n: int) -> Candidates:
    """The candidates that obey the grammar's rules: disjoint parts, n variables in all, the parts' sizes."""
    s1, s2, s3 = (np.count_nonzero(e, axis=1) for e in (c.e1, c.e2, c.e3))
    used = (c.e1 != 0).astype(int) + (c.e2 != 0) + (c.e3 != 0)
    ok = (used.max(axis=1, initial=0) <= 1) & (s1 + s2 + s3 == n)
    if complexity == "medium":
        ok &= np.where(c.f > 0, (s2 >= 1) & (c.c2 == 0), (s1 >= 1) & (s3 >= 1) & (c.c2 > 0))
    elif complexity == "complex":
        ok &= (c.f > 0) & (s2 >= 1) & (s3 >= 1) & (c.c2 > 0)
    c = c.take(np.flatnonzero(ok))
    unique = {c.key(k): k for k in range(len(c) - 1, -1, -1)}
    return c.take(np.sort(np.fromiter(unique.values(), int, len(unique))))


def consistent(c: Candidates, x, y) -> Candidates:
    """The candidates whose outputs at inputs x (Q, m) are y (Q,)."""
    if not len(c):
        return c
    values, size = c.values(np.asarray(x, np.float64))
    with np.errstate(invalid="ignore"):
        ok = np.all(np.abs(values - np.asarray(y)[None]) <= AGREE_RTOL * size + 1e-300, axis=1)
    return c.take(np.flatnonzero(ok))


class Systematic:
    """Query where the remaining formulas of the grammar disagree; submit when one function is left."""

    def __init__(self):
        self._first = None  # (first query's inputs, its candidates)

    def __call__(self, messages, tools) -> AgentTurn:
        info, queries, budget = _session_facts(tool_results(messages))
        if info is None:
            return _call("describe")
        rng = _rng(info)
        low, high = info["input_range"]
        m = len(info["variables"])
        first_point = rng.uniform(low, high, m)
        probes = rng.uniform(low, high, (PROBES, m))
        every = info.get("proposals") == "every"
        if not queries:
            return _call("query", {"inputs": _inputs(first_point, info), **({"formula": NO_HYPOTHESIS} if every else {})})
        x = np.array([[q[0][v] for v in info["variables"]] for q in queries], np.float64)
        y = np.array([q[1] for q in queries], np.float64)
        if self._first is None or not np.array_equal(self._first[0], x[0]):
            self._first = (x[0], search(info["complexity"], m - info["n_distractors"], x[0], y[0]))
        left = consistent(self._first[1], x, y)
        if not len(left):
            return _call("submit_formula", {"formula": NO_HYPOTHESIS})  # outside what the search covers
        values, size = left.values(probes)
        disagree = np.abs(values - values[:1]) > AGREE_RTOL * (size + size[:1])
        best = grammar.render(left.structure(0), info["variables"])
        if not disagree.any() or not budget:
            return _call("submit_formula", {"formula": best})
        return _call("query", {"inputs": _inputs(probes[np.argmax(_distinct(values, size))], info),
                               **({"formula": best} if every else {})})


def _distinct(values, size) -> np.ndarray:
    """The number of distinct outputs among the candidates at each probe (P,)."""
    order = np.argsort(values, axis=0)
    v = np.take_along_axis(values, order, axis=0)
    s = np.take_along_axis(size, order, axis=0)
    gaps = np.abs(np.diff(v, axis=0)) > AGREE_RTOL * (s[1:] + s[:-1])
    return 1 + gaps.sum(axis=0)


# -- noisy-fit: the grammar fitted to noisy answers ------------------------------------------------
FIT_CHUNK = 200_000  # structures fitted at once
FIT_CAP = 6_000_000  # structures enumerated at most (complex, 5 variables among 7: about 4.7 million)
FIT_KEEP = 256  # best structures (by the weighted least squares) scored exactly
FIT_DESIGN = 32  # best distinct formulas whose disagreement chooses the next input
FIT_PROBES = 64  # random inputs the next query is chosen among
FIT_SIGMA_MIN = 1e-6  # the noise assumed without any (the fit still ranks by relative error)
FIT_SAME = 1e-9  # two formulas are one where they agree to this relative error on the reference inputs


def _roles(complexity: str, n: int):
    """The grammar's ways of splitting n formula variables among M1, M2 (in f) and
    M3: (|M1|, |M2|, |M3|, has f, log of the generator's probability of these sizes)."""
    if complexity == "simple":
        return [(n, 0, 0, False, 0.0)]
    out = []
    if complexity == "medium":
        p_f = 0.5 if n >= 2 else 1.0
        for inner in range(1, min(MAX_INNER, n) + 1):
            out.append((n - inner, inner, 0, True, np.log(p_f / min(MAX_INNER, n))))
        for first in range(1, n) if n >= 2 else ():
            out.append((first, 0, n - first, False, np.log(0.5 / (n - 1))))
        return out
    for inner in range(1, min(MAX_INNER, n - 1) + 1):
        for first in range(0, n - inner):
            out.append((first, inner, n - inner - first, True, np.log(1.0 / min(MAX_INNER, n - 1) / (n - inner))))
    return out


def fit_count(complexity: str, n: int, m: int) -> int:
    """How many structures (formulas less their constants and sign) :func:`fit_structures` lists."""
    total = 0
    for s1, s2, s3, has_f, _ in _roles(complexity, n):
        ways = comb(n, s1) * comb(n - s1, s2)
        total += ways * len(EXPONENTS) ** (s1 + s3) * len(INNER_EXPONENTS) ** s2 * (len(FUNCTIONS) if has_f else 1)
    return comb(m, n) * total


_STRUCTURES: dict = {}


def fit_structures(complexity: str, n: int, m: int) -> dict:
    """Every structure of the grammar with n formula variables among m inputs,
    less its constants and sign (``c1 * M1 * f(M2) + b * M3`` with b free, or
    ``c1 * M1 * f(M2)``): int8 exponents ``e1, e2, e3`` (K, m), ``f`` (K,)
    (0: none), ``two`` bool (K,) (a second term) and ``logprior`` (K,), the
    log of the generator's probability of the structure with one given set
    of constants and sign (:func:`~luca_gym.worlds.equation.grammar.draw_structure`
    draws each part evenly). Cached per (complexity, n, m); ValueError
    beyond FIT_CAP structures."""
    key = (complexity, n, m)
    if key in _STRUCTURES:
        return _STRUCTURES[key]
    if fit_count(complexity, n, m) > FIT_CAP:
        raise ValueError(f"noisy-fit: {fit_count(complexity, n, m)} structures at ({complexity}, {n} of {m}); at most {FIT_CAP}")
    blocks = {k: [] for k in ("e1", "e2", "e3", "f", "two", "logprior")}
    for s1, s2, s3, has_f, log_sizes in _roles(complexity, n):
        exps = np.asarray(list(itertools.product(*([EXPONENTS] * s1 + [INNER_EXPONENTS] * s2 + [EXPONENTS] * s3))),
                          np.int8).reshape(-1, n)
        codes = np.arange(1, len(FUNCTIONS) + 1) if has_f else np.zeros(1, np.int64)
        logprior = (log_sizes - np.log(comb(n, s1) * comb(n - s1, s2)) - np.log(len(exps))
                    - (np.log(len(FUNCTIONS)) if has_f else 0.0) - np.log(len(CONSTANTS)) * (1 + (s3 > 0))
                    - (np.log(2) if s3 else 0.0))
        for subset in itertools.combinations(range(m), n):
            for order in itertools.permutations(range(n)):
                part1, part2, part3 = order[:s1], order[s1:s1 + s2], order[s1 + s2:]
                if list(part1) != sorted(part1) or list(part2) != sorted(part2) or list(part3) != sorted(part3):
                    continue  # each split of the variables once
                rows = len(exps) * len(codes)
                for name, part, lo in (("e1", part1, 0), ("e2", part2, s1), ("e3", part3, s1 + s2)):
                    e = np.zeros((len(exps), m), np.int8)
                    for j, v in enumerate(part):
                        e[:, subset[v]] = exps[:, lo + j]
                    blocks[name].append(np.tile(e, (len(codes), 1)))
                blocks["f"].append(np.repeat(codes, len(exps)).astype(np.int8))
                blocks["two"].append(np.full(rows, s3 > 0))
                blocks["logprior"].append(np.full(rows, logprior))
    out = {k: np.concatenate(v) for k, v in blocks.items()}
    _STRUCTURES[key] = out
    return out


def _features(part: dict, logx) -> tuple[np.ndarray, np.ndarray]:
    """(c1's factor M1 * f(M2), the second term's monomial M3, 0 without one), each (K, Q), at log-inputs (Q, m)."""
    inner = np.exp(part["e2"].astype(np.float64) @ logx.T)
    f = np.ones_like(inner)
    with np.errstate(all="ignore"):
        for code, name in enumerate(FUNCTIONS, start=1):
            rows = part["f"] == code
            if rows.any():
                f[rows] = _NUMPY[name](inner[rows])
        g = np.exp(part["e1"].astype(np.float64) @ logx.T) * f
        h = np.where(part["two"][:, None], np.exp(part["e3"].astype(np.float64) @ logx.T), 0.0)
    return g, h


def _best_constants(g, h, two, y):
    """For each structure, the integer constants (c1 in 1..9; b = +/- c2, c2 in 1..9, where
    there is a second term) that fit the answers y best in relative error: (a (K,), b (K,),
    weighted squared error (K,)). The error is a quadratic in (a, b); for each a the best
    integer b is one of the two next to its continuous optimum."""
    w = 1.0 / np.maximum(y * y, 1e-300)
    with np.errstate(all="ignore"):
        sgg, sgh, shh = (g * g) @ w, (g * h) @ w, (h * h) @ w
        sgy, shy, syy = g @ (w * y), h @ (w * y), np.sum(w * y * y)
        a = _CONSTANTS[None, :]  # (1, 9)
        b_opt = (shy[:, None] - a * sgh[:, None]) / np.where(shh > 0, shh, 1.0)[:, None]
        b_opt = np.nan_to_num(b_opt, nan=1.0, posinf=9.0, neginf=-9.0)
        best = np.full(len(g), np.inf)
        best_a, best_b = np.ones(len(g)), np.zeros(len(g))
        for rounding, zero in ((np.floor, -1.0), (np.ceil, 1.0)):
            b = np.clip(rounding(b_opt), -9, 9)
            b = np.where(b == 0, zero, b)
            b = np.where(two[:, None], b, 0.0)
            err = (syy - 2 * a * sgy[:, None] - 2 * b * shy[:, None] + a * a * sgg[:, None] + 2 * a * b * sgh[:, None]
                   + b * b * shh[:, None])
            err = np.where(np.isfinite(err), err, np.inf)
            k = np.argmin(err, axis=1)
            e = err[np.arange(len(g)), k]
            better = e < best
            best = np.where(better, e, best)
            best_a = np.where(better, a[0, k], best_a)
            best_b = np.where(better, b[np.arange(len(g)), k], best_b)
    return best_a, best_b, best


def _as_candidates(part: dict, a, b) -> Candidates:
    return Candidates(c1=np.asarray(a, np.int64), e1=part["e1"].astype(np.int64), f=part["f"].astype(np.int64),
                      e2=part["e2"].astype(np.int64), sign=np.where(np.asarray(b) < 0, -1, 1).astype(np.int64),
                      c2=np.abs(np.asarray(b)).astype(np.int64), e3=part["e3"].astype(np.int64))


def fit(complexity: str, n: int, x, y, sigma: float) -> tuple[Candidates, np.ndarray]:
    """The formulas of the grammar (n formula variables among x's m columns)
    that best explain answers y (Q,) at inputs x (Q, m) measured with relative
    noise sigma, best first: each structure's integer constants by weighted
    least squares in relative error, the FIT_KEEP best structures (by that
    error over 2 sigma**2, less their log prior) then ranked by their log
    posterior, the Gaussian log likelihood of y (each answer the formula's
    value times 1 + sigma z) plus the generator's log prior. Returns
    (candidates, log posterior (K,)), at most FIT_KEEP of them."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    sigma = max(float(sigma), FIT_SIGMA_MIN)
    table = fit_structures(complexity, n, x.shape[1])
    logx = np.log(x)
    kept, kept_score, kept_prior = [], [], []
    for lo in range(0, len(table["f"]), FIT_CHUNK):
        part = {k: v[lo:lo + FIT_CHUNK] for k, v in table.items()}
        g, h = _features(part, logx)
        a, b, err = _best_constants(g, h, part["two"], y)
        score = err / (2 * sigma * sigma) - part["logprior"]
        top = np.argsort(score, kind="stable")[:FIT_KEEP]
        kept.append(_as_candidates({k: v[top] for k, v in part.items()}, a[top], b[top]))
        kept_score.append(score[top])
        kept_prior.append(part["logprior"][top])
    best = np.argsort(np.concatenate(kept_score), kind="stable")[:FIT_KEEP]
    c, prior = Candidates.join(kept).take(best), np.concatenate(kept_prior)[best]
    values, _ = c.values(x)
    with np.errstate(all="ignore"):
        r = (y[None] - values) / (sigma * np.abs(values))
        loglik = -np.sum(np.log(np.abs(values)) + 0.5 * r * r, axis=1)
    post = np.where(np.isfinite(loglik), loglik + prior, -np.inf)
    order = np.argsort(-post, kind="stable")
    return c.take(order), post[order]


def _stated(messages) -> list[str]:
    """The formulas this session's queries stated and were told were wrong (the query was
    answered, so the session did not end: the formula was not right)."""
    answered = {call_id for call_id, result in tool_results_with_ids(messages)
                if "output" in result and result.get("formula_correct") is False}
    out = []
    for m in messages:
        for call in (m.get("tool_calls") or []) if m.get("role") == "assistant" else []:
            arguments = call.get("arguments") or {}
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            if call.get("name") == "query" and call.get("id") in answered and isinstance(arguments, dict) and "formula" in arguments:
                out.append(arguments["formula"])
    return out


class NoisyFit:
    """Fit the grammar to noisy answers; state the most probable formula not yet
    found wrong with every query, and query where the likely formulas disagree most."""

    def __call__(self, messages, tools) -> AgentTurn:
        info, queries, budget = _session_facts(tool_results(messages))
        if info is None:
            return _call("describe")
        variables = info["variables"]
        m = len(variables)
        low, high = info["input_range"]
        every = info.get("proposals") == "every"
        sigma = float(info.get("measurement_noise", 0.0))
        rng = np.random.default_rng([zlib.crc32(",".join(variables).encode()), len(queries)])
        if not queries:
            return _call("query", {"inputs": _inputs(rng.uniform(low, high, m), info),
                                   **({"formula": NO_HYPOTHESIS} if every else {})})
        x = np.array([[q[0][v] for v in variables] for q in queries], np.float64)
        y = np.array([q[1] for q in queries], np.float64)
        c, post = fit(info["complexity"], m - info["n_distractors"], x, y, sigma)
        c, post = _distinct_formulas(c, post, variables, set(_stated(messages)),
                                     np.random.default_rng(zlib.crc32(",".join(variables).encode())).uniform(low, high, (8, m)))
        best = grammar.render(c.structure(0), variables) if len(c) else NO_HYPOTHESIS
        if not budget:
            return _call("submit_formula", {"formula": best})
        probes = rng.uniform(low, high, (FIT_PROBES, m))
        return _call("query", {"inputs": _inputs(probes[_most_telling(c, post, probes, sigma)], info),
                               **({"formula": best} if every else {})})


def _distinct_formulas(c: Candidates, post, variables, wrong: set, reference) -> tuple[Candidates, np.ndarray]:
    """The candidates less repeats of one function (equal on the reference inputs) and less
    every function already found wrong, best first."""
    if not len(c):
        return c, post
    values, _ = c.values(reference)

    def same(u, v) -> bool:
        return bool(np.all(np.abs(u - v) <= FIT_SAME * np.maximum(np.abs(u), np.abs(v)) + 1e-300))

    seen = [values[k] for k in range(len(c)) if grammar.render(c.structure(k), variables) in wrong]
    keep = []
    for k in range(len(c)):
        if np.isfinite(post[k]) and not any(same(u, values[k]) for u in seen):
            keep.append(k)
            seen.append(values[k])
    index = np.asarray(keep, int)
    return c.take(index), post[index]


def _most_telling(c: Candidates, post, probes, sigma: float) -> int:
    """The probe where the likely alternatives stand furthest, in noise, from the most probable formula:
    sum over the FIT_DESIGN best of posterior weight times the squared distance in noise standard deviations (capped)."""
    if len(c) < 2:
        return 0
    c, post = c.take(np.arange(min(len(c), FIT_DESIGN))), post[:FIT_DESIGN]
    weight = np.exp(post - post[0])
    values, _ = c.values(probes)
    with np.errstate(all="ignore"):
        d = (values[1:] - values[:1]) / (max(sigma, FIT_SIGMA_MIN) * np.abs(values[:1]))
    d = np.nan_to_num(np.minimum(d * d, 25.0), nan=0.0)
    return int(np.argmax(weight[1:] @ d))


BASELINES = {"random": RandomBaseline, "systematic": Systematic, "noisy-fit": NoisyFit}
