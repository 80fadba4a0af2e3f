"""One import path for each thing: no module under ``luca_gym/`` only
re-exports another (a deprecation alias, a shim kept "for one release").

The check is a heuristic over each module's syntax tree: a module whose body,
its docstring aside, is only imports, ``__all__``, a module ``__getattr__`` /
``__dir__`` (forwarding names elsewhere), bare calls (``alias(__name__)``,
``warnings.warn(...)``) and ``if TYPE_CHECKING:`` imports is an alias. A
package's facade, which gathers its own submodules' names under the
package's documented name, is listed in :data:`FACADES` with the reason; a
world package's own ``__init__.py`` (``luca_gym/worlds/<name>/__init__.py``,
the world's entry and names) is a facade too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "luca_gym"

# module path (relative to the repository root) -> why it may only import
FACADES = {
    "luca_gym/__init__.py": "the root package: its documented names (LUCA's most used, register_world, worlds) "
                            "and the JAX set-up",
    "luca_gym/harness/__init__.py": "the harness's facade over its own submodules (spec, agents, runner, results, "
                                    "sweep, tables)",
    "luca_gym/agents/__init__.py": "the learned agents' facade over its own submodules (base, ppo)",
    "luca_gym/envs/__init__.py": "the generic envs' package: ToolsEnv from its own submodule",
    "luca_gym/sandbox/__init__.py": "the code sandbox's facade over its own submodules (session, limits, isolation, "
                                    "release): Sandbox, Limits and the names the tool sessions and worlds import",
    "luca_gym/worlds/luca/envs/__init__.py": "LUCA's envs package: its envs from its own submodules",
    "luca_gym/worlds/luca/core/__init__.py": "LUCA's core package: the pure functions from its own submodules",
    "luca_gym/worlds/luca/generator/__init__.py": "LUCA's generator package: its functions from its own submodules",
}


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _re_exports_only(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is one an alias module is made of."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    if isinstance(stmt, ast.FunctionDef):
        return stmt.name in ("__getattr__", "__dir__")
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call)  # alias(__name__), warnings.warn(...)
    if isinstance(stmt, ast.If) and _is_type_checking(stmt):
        return all(_re_exports_only(s) for s in stmt.body + stmt.orelse)
    return False


def is_alias(source: str) -> bool:
    """Whether a module's source only re-exports: it imports something and,
    docstring aside, does nothing else an alias does not."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))
               and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]
    forwards = [s for s in body if isinstance(s, ast.FunctionDef) and s.name == "__getattr__"]
    return bool(imports or forwards) and all(_re_exports_only(s) for s in body)


def _modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _is_world_package(module: str) -> bool:
    parts = module.split("/")
    return len(parts) == 4 and parts[:2] == ["luca_gym", "worlds"] and parts[3] == "__init__.py"


@pytest.mark.parametrize("source, alias", [
    ('"""Deprecated."""\nfrom luca_gym._deprecated import alias\n\nalias(__name__)\n', True),
    ('"""Moved."""\nfrom luca_gym.worlds.luca.sim import *  # noqa\n__all__ = ["run"]\n', True),
    ('from luca_gym.envs.tools import ToolsEnv\n\n\ndef __getattr__(name):\n    return moved(name)\n', True),
    ('import warnings\nfrom a import b  # noqa\nwarnings.warn("deprecated", DeprecationWarning)\n', True),
    ('"""A package marker."""\n', False),
    ('"""Real code."""\nimport numpy as np\n\n\ndef f(x):\n    return np.asarray(x)\n', False),
    ('from a import b\nX = b(3)\n', False),
])
def test_the_heuristic_tells_an_alias(source, alias):
    assert is_alias(source) is alias


def test_no_module_only_re_exports_another():
    aliases = [m for m in _modules()
               if m not in FACADES and not _is_world_package(m) and is_alias((ROOT / m).read_text())]
    assert not aliases, (f"{aliases} only re-export other modules: import the real home instead (one import path "
                         "for each thing), or list a package facade in FACADES with the reason")


def test_every_facade_is_a_package_init_that_only_re_exports():
    """The list only shrinks: a facade that is gone, or does more than gather
    names, leaves it (the root package aside: it sets JAX up)."""
    for module in FACADES:
        assert module.endswith("__init__.py") and (ROOT / module).exists(), module
        if module != "luca_gym/__init__.py":
            assert is_alias((ROOT / module).read_text()), f"{module} is no facade now: remove it from FACADES"
