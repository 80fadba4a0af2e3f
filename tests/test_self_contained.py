"""The repository points at nothing outside itself: the package, the docs,
the README, BENCHMARKS, the benchmarks, notebooks and tests cite papers by title, authors and link, never a path of the
project's working tree (``shared/reference/...``) nor an item of its
tracker (``issue 26``)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"shared/" r"reference|issue [0-9]|issue-[0-9]|stages? S[0-9]")  # split: this file must not match itself
TEXT = {".py", ".md", ".txt", ".toml", ".json", ".yml", ".yaml", ".cfg", ".ini", ".html", ".css", ".js", ".ipynb"}


def _files():
    for top in (ROOT / "luca_gym", ROOT / "docs", ROOT / "benchmarks", ROOT / "notebooks", ROOT / "tests"):
        for path in sorted(top.rglob("*")) if top.is_dir() else ():
            if path.is_file() and path.suffix in TEXT and "__pycache__" not in path.parts and path != pathlib.Path(__file__).resolve():
                yield path
    yield from (ROOT / name for name in ("README.md", "BENCHMARKS.md", "pyproject.toml", "Makefile"))


def test_no_pointer_outside_the_product():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in _files()
             for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert not found, "\n".join(found)


def test_the_worlds_cite_their_papers_by_title():
    from luca_gym import worlds

    references = {name: worlds.get(name).reference for name in worlds.BUILTIN}
    assert references["luca"].startswith("LUCA: A Synthetic World for Experimental Reasoning")
    assert "DrugTargetWorld" in references["biobank"] and "arXiv:" in references["biobank"]
    assert all(references[n].startswith("Auto-Discovery-Bench") for n in ("dag", "relational", "equation", "tracking"))
