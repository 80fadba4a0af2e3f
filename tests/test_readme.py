"""Every code block of README.md runs as written (tests/test_docs.py does the
same for the documentation site, with the machinery defined here).

* Each ```python block is executed on its own, in a fresh namespace (nothing
  from another block or from this file is visible to it), from a scratch
  folder. A traceback points at the file's own line numbers.
* Sizes: a block may hold a size constant on a line of its own; ``SMALL``
  below maps that exact line to the line the test runs instead (the page
  keeps the size a reader would use). Every line in ``SMALL`` must occur in
  exactly one block, so a renamed or edited constant fails here instead of
  silently running the big size.
* A block whose fence reads ```python title="sketch ..." is a fragment shown
  for its shape (``...`` for the parts left out) and is not run; the site
  shows the title, so a reader sees it too. Keep them few.
* Command lines in the other fenced blocks are checked without running them:
  ``luca-gym ...`` parses with the real argument parser (every subcommand and
  flag exists), ``make X`` names a Makefile target, ``pip install -e ".[x]"``
  names extras that pyproject.toml defines; every extra is listed in the
  README's Install.
* Every relative link of the README names a file of the repository (the
  links into docs/ work on GitHub and on the site).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import shlex
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# The size lines a README block holds for the reader -> what the test runs instead.
SMALL = {
    "N_ORGANISMS = 4096": "N_ORGANISMS = 6",  # the batch of test_vector's causal-sweep check: one compile
}

# A fence: ``` then the language, then the rest of the info string (a title).
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SKETCH = 'title="sketch'


def blocks(path: pathlib.Path) -> list[tuple[str, str, int, str]]:
    """(language, rest of the info string, first line number of the body, body)
    for each fenced block of the markdown file at ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2).strip(), text.count("\n", 0, m.start(3)) + 1, m.group(3)) for m in FENCE.finditer(text)]


def python_blocks(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, body) of each python block that is meant to run (not a sketch)."""
    return [(line, body) for lang, info, line, body in blocks(path) if lang == "python" and not info.startswith(SKETCH)]


def command_lines(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line number, text) of every command of the non-python blocks: a line
    ending in a backslash is continued by the next, as in a shell."""
    commands = []
    for lang, _, line, body in blocks(path):
        if lang == "python":
            continue
        start, parts = None, []
        for k, text in enumerate(body.splitlines()):
            start = line + k if start is None else start
            if text.rstrip().endswith("\\"):
                parts.append(text.rstrip()[:-1].strip())
                continue
            commands.append((start, " ".join([*parts, text.strip()]).strip()))
            start, parts = None, []
        if parts:
            commands.append((start, " ".join(parts)))
    return commands


def shrunk(body: str, small: dict[str, str]) -> str:
    """``body`` with each line that is a key of ``small`` replaced by its value."""
    return "\n".join(small.get(line.rstrip(), line) for line in body.split("\n"))


def run_block(path: pathlib.Path, line: int, body: str, small: dict[str, str]) -> str:
    """Execute one block (sizes shrunk) in a fresh namespace; its stdout."""
    code = compile("\n" * (line - 1) + shrunk(body, small), str(path), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__docs__"})
    return out.getvalue()


def size_lines_used_once(small: dict[str, str], python: list[tuple[int, str]], where: str):
    """Every key of ``small`` is a line of exactly one of the ``python`` blocks."""
    for big in small:
        hits = [line for line, body in python if big in [l.rstrip() for l in body.split("\n")]]
        assert len(hits) == 1, f"SMALL line {big!r} occurs in {len(hits)} python blocks of {where}; update the test's SMALL"


def check_luca_gym_commands(commands: list[tuple[str, int, str]]):
    """Each ``luca-gym ...`` line of (file, line, text) parses with the real parser."""
    from luca_gym.cli import parser_for

    for where, n, command in commands:
        if not command.startswith("luca-gym "):
            continue
        argv = shlex.split(command, comments=True)[1:]
        try:
            parser_for(argv).parse_args(argv)
        except SystemExit as error:
            pytest.fail(f"{where}:{n}: `{command}` does not parse (exit {error.code})")


def check_make_and_pip(commands: list[tuple[str, int, str]]) -> set[str]:
    """``make X`` names a target, ``pip install -e ".[x]"`` a defined extra;
    returns the extras named."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
    named = set()
    for where, n, command in commands:
        if command.startswith("make "):
            target = shlex.split(command, comments=True)[1]
            assert target in targets, f"{where}:{n}: make {target}: no such Makefile target"
        if command.startswith("pip install"):
            for group in re.findall(r"\.\[([\w,-]+)\]", command):
                for extra in group.split(","):
                    assert extra in extras, f"{where}:{n}: extra [{extra}] is not in pyproject.toml"
                    named.add(extra)
    return named


PYTHON = python_blocks(README)
COMMANDS = [("README.md", n, text) for n, text in command_lines(README)]


def test_readme_is_short_and_every_size_line_is_used():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250, "README.md is over 250 lines: move the detail to docs/"
    assert len(PYTHON) >= 3, "README.md lost its python blocks"
    size_lines_used_once(SMALL, PYTHON, "README.md")


@pytest.mark.parametrize("line,body", PYTHON, ids=[f"line{line}" for line, _ in PYTHON])
def test_python_block_runs(line, body, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):  # a block must never reach a provider
        monkeypatch.delenv(key, raising=False)
    run_block(README, line, body, SMALL)


def test_luca_gym_commands_parse():
    assert any(c.startswith("luca-gym ") for _, _, c in COMMANDS), "README.md shows no luca-gym command"
    check_luca_gym_commands(COMMANDS)


def test_make_targets_and_extras_exist():
    named = check_make_and_pip(COMMANDS)
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
    assert named == extras, f"extras not shown in README's Install: {sorted(extras - named)}"


def test_relative_links_name_files():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (ROOT / target).is_file(), f"README.md links to {target}, which is not a file of the repository"
