"""A submitted formula is hostile text: :func:`parse` turns it into a
:class:`~luca_gym.worlds.equation.grammar.Program` (the opcodes the hidden
formula is written in) or refuses it with a :class:`FormulaError` naming
what is wrong and what is allowed. Nothing is ever run: no ``eval``, no
``sympy.sympify``; Python's :mod:`ast` only reads the text, and only these
nodes pass:

* numbers (finite, at most :data:`MAX_CONSTANT` in absolute value; not bool or complex);
* the session's variable names;
* ``+ - * /`` and unary ``- +``;
* ``**`` with an integer exponent written as a number, ``|p| <=`` :data:`~luca_gym.worlds.equation.grammar.MAX_POWER`;
* calls of ``sin cos exp log sqrt`` on one argument.

The text is ASCII of at most :data:`MAX_CHARS` characters, with at most
:data:`MAX_NODES` nodes and depth :data:`MAX_DEPTH` (checked iteratively,
before anything recursive runs).

A refusal names what the user typed: ``x^2`` is "'^' is not a power; write
x**2" (Python's ``^`` is a bitwise operator), and a character outside ASCII
is named with its code point, with the ASCII to write for the common ones
(``×`` and ``·``: ``*``; ``²``: ``**2``; ``−``: ``-``).
"""

from __future__ import annotations

import ast
import re
import string

import numpy as np

from luca_gym.validate import short_repr
from luca_gym.worlds.equation.grammar import ADD, CONST, DIV, FUNCTION_OPS, MAX_POWER, MUL, NEG, NOP, POW, SUB, VAR, Program

MAX_CHARS = 2000
MAX_NODES = 128  # program nodes (the submission's program length)
MAX_DEPTH = 64  # of the expression tree
MAX_CONSTANT = 1e6
_CHARACTERS = frozenset(string.printable)  # ASCII letters, digits, punctuation and whitespace
_BINARY = {ast.Add: ADD, ast.Sub: SUB, ast.Mult: MUL, ast.Div: DIV}
_FUNCTIONS = ", ".join(FUNCTION_OPS)
_SYMBOLS = {  # what the user typed, for the operators refused
    ast.BitXor: "^", ast.Mod: "%", ast.FloorDiv: "//", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
    ast.LShift: "<<", ast.RShift: ">>", ast.Invert: "~", ast.Not: "not",
}
_SUPERSCRIPTS = dict(zip("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
_ASCII_FOR = {  # the non-ASCII characters people paste into formulas, and what to write instead
    **dict.fromkeys("×·⋅∙∗✕", "write * for multiplication"), **dict.fromkeys("÷∕", "write / for division"),
    **dict.fromkeys("−–—", "write - for minus"), "√": "write sqrt(x) for a square root",
}
_SHOWN = 60  # characters of the user's formula quoted back in a hint
_WHAT = {  # clear words for the constructs people try
    ast.Attribute: "attribute access (a.b)", ast.Subscript: "indexing (a[i])", ast.Lambda: "lambda",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension", ast.Compare: "a comparison", ast.BoolOp: "and/or", ast.IfExp: "if/else",
    ast.NamedExpr: "assignment (:=)", ast.JoinedStr: "an f-string", ast.List: "a list", ast.Tuple: "a tuple",
    ast.Dict: "a dict", ast.Set: "a set", ast.Starred: "*unpacking", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield",
}


class FormulaError(ValueError):
    """A refused formula; the message says why and what is allowed."""


def parse(text, variables) -> Program:
    """``text`` over ``variables`` (their names, in input order) -> a numpy
    :class:`Program` of MAX_NODES nodes; FormulaError otherwise."""
    tree = _read(text, variables)
    nodes: list[tuple[int, float, int, int]] = []

    def emit(op, arg=0.0, left=0, right=0) -> int:
        nodes.append((op, float(arg), left, right))
        return len(nodes) - 1

    index = {name: i for i, name in enumerate(variables)}

    def build(node) -> int:  # depth was bounded by _read
        if isinstance(node, ast.Constant):
            return emit(CONST, node.value)
        if isinstance(node, ast.Name):
            return emit(VAR, index[node.id])
        if isinstance(node, ast.UnaryOp):
            operand = build(node.operand)
            return operand if isinstance(node.op, ast.UAdd) else emit(NEG, 0.0, operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return emit(POW, _exponent(node.right), build(node.left))
        if isinstance(node, ast.BinOp):
            left = build(node.left)
            return emit(_BINARY[type(node.op)], 0.0, left, build(node.right))
        return emit(FUNCTION_OPS[node.func.id], 0.0, build(node.args[0]))

    build(tree)
    if len(nodes) > MAX_NODES:
        raise FormulaError(f"formula: {len(nodes)} operations and operands; at most {MAX_NODES}")
    nodes += [(NOP, 0.0, 0, 0)] * (MAX_NODES - len(nodes))
    op, arg, left, right = (np.asarray(column) for column in zip(*nodes))
    return Program(op=op.astype(np.int32), arg=arg.astype(np.float64), left=left.astype(np.int32), right=right.astype(np.int32))


def _read(text, variables) -> ast.Expression:
    """The checked expression tree of ``text``: every node whitelisted, size and depth bounded."""
    if not isinstance(text, str):
        raise FormulaError(f"formula: expected text, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise FormulaError(f"formula: {len(text)} characters; at most {MAX_CHARS}")
    if not text.strip():
        raise FormulaError("formula: empty; write an expression such as 3*mass*velocity**2")
    if not set(text) <= _CHARACTERS:
        raise FormulaError(_not_ascii(text))
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula: not a single Python expression ({exc.msg}); write e.g. 2*mass*exp(time/length)") from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise FormulaError(f"formula: cannot be read ({type(exc).__name__}); keep it short and plain") from None
    allowed = set(variables)
    count = 0
    stack = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise FormulaError(f"formula: nested more than {MAX_DEPTH} levels deep")
        if count > 4 * MAX_NODES:
            raise FormulaError(f"formula: more than {MAX_NODES} operations and operands")
        _check_node(node, allowed, variables, source)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            children = [node.left]  # the exponent is read by _exponent
        elif isinstance(node, ast.Call):
            children = node.args
        else:
            children = [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
        stack += [(child, depth + 1) for child in children]
    return tree.body


def _not_ascii(text: str) -> str:
    """The refusal of ``text`` with a character outside printable ASCII: the
    first such character by name and code point, and what to write instead."""
    at, character = next((i, c) for i, c in enumerate(text) if c not in _CHARACTERS)
    message = f"formula: character {character!r} (U+{ord(character):04X}) is not allowed: only printable ASCII"
    if character in _SUPERSCRIPTS:  # x² or x⁻¹: the run of superscripts is the exponent
        power = re.match(f"[{''.join(_SUPERSCRIPTS)}]+", text[at:]).group()
        base = re.search(r"[A-Za-z_0-9.)]+$", text[:at])
        base = base.group() if base and len(base.group()) <= _SHOWN else ""
        return message + f"; write {base}**{''.join(map(_SUPERSCRIPTS.get, power))} for a power"
    if character in _ASCII_FOR:
        return message + "; " + _ASCII_FOR[character]
    return message + " characters and spaces are allowed"


def _write_as_power(node: ast.BinOp, source: str) -> str:
    """The user's ``a^b`` as ``a**b``: their text with each ``^`` a ``**``
    (what ``x^2 + 1`` means to them, though Python reads ``x ^ (2 + 1)``),
    or, where that is long, the operands around the first ``^``."""
    segment = " ".join((ast.get_source_segment(source, node) or "").split())
    written = segment.replace("^", "**")
    if written and len(written) <= _SHOWN:
        return written
    operands = re.search(r"([A-Za-z_0-9.]+)\s*\^\s*([-+]?[A-Za-z_0-9.]+)", segment)
    if operands and len(operands.group()) <= _SHOWN:
        return f"{operands.group(1)}**{operands.group(2)}"
    return "base**exponent"


def _check_node(node, allowed: set, variables, source: str) -> None:
    if isinstance(node, ast.Constant):
        _constant(node.value)
    elif isinstance(node, ast.Name):
        if node.id not in allowed:
            what = f"{node.id!r} is a function; call it on one argument, e.g. {node.id}(x)" if node.id in FUNCTION_OPS \
                else f"unknown name {short_repr(node.id)}"
            raise FormulaError(f"formula: {what}; allowed variables {', '.join(variables)}")
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise FormulaError(f"formula: operator {_operator(node.op)} not allowed; allowed + - * / ** and unary -")
    elif isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise FormulaError(f"formula: '^' is not a power; write {_write_as_power(node, source)}")
        if not isinstance(node.op, (ast.Pow, *_BINARY)):
            raise FormulaError(f"formula: operator {_operator(node.op)} not allowed; allowed + - * / **")
        if isinstance(node.op, ast.Pow):
            _exponent(node.right)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            what = _WHAT.get(type(node.func), "calling an expression")
            raise FormulaError(f"formula: {what} not allowed; allowed calls {_FUNCTIONS} by name")
        name = node.func.id
        if name not in FUNCTION_OPS:
            raise FormulaError(f"formula: {short_repr(name)} is not an allowed function; allowed {_FUNCTIONS}")
        if node.keywords or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
            raise FormulaError(f"formula: {name}() takes exactly one argument, no keywords")
    else:
        what = _WHAT.get(type(node), type(node).__name__)
        raise FormulaError(f"formula: {what} not allowed; allowed numbers, the variables, + - * / **, and {_FUNCTIONS}")


def _operator(op) -> str:
    """A refused operator as typed, with Python's name for it: ``'//' (FloorDiv)``."""
    name = type(op).__name__
    return f"{_SYMBOLS[type(op)]!r} ({name})" if type(op) in _SYMBOLS else name


def _constant(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormulaError(f"formula: constant {short_repr(value)} not allowed; allowed numbers only")
    try:
        number = float(value)
    except OverflowError:
        number = float("inf")
    if not np.isfinite(number) or abs(number) > MAX_CONSTANT:
        raise FormulaError(f"formula: constant {short_repr(value)} not allowed; "
                           f"a finite number of at most {MAX_CONSTANT:g} in absolute value")
    return number


def _exponent(node) -> int:
    """An exponent: an integer written as a number (maybe signed or parenthesised), |p| <= MAX_POWER."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    message = f"formula: an exponent must be an integer written as a number from {-MAX_POWER} to {MAX_POWER} (use sqrt for 1/2)"
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
        raise FormulaError(message)
    value = node.value
    if isinstance(value, float) and not value.is_integer():
        raise FormulaError(message)
    if abs(value) > MAX_POWER:
        raise FormulaError(message)
    return sign * int(value)
