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
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from math import comb

import numpy as np

from luca_gym.tools.loop import AgentTurn, ToolCall, tool_results
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


BASELINES = {"random": RandomBaseline, "systematic": Systematic}
