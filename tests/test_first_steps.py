"""What a newcomer meets after the first command: `make demo` ends with the
line to run next and that line, then the README's first Python block, work
in that order; the docs read in the repository (every relative link names a
file of the repository, and an API page says what its ``:::`` lines are)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from test_readme import README, ROOT, python_blocks

DOCS = ROOT / "docs"


# -- after `make demo` ---------------------------------------------------------------------------


def demo_next_line() -> str:
    """The command `make demo` prints last, as make itself expands it (a dry run: nothing is run)."""
    done = subprocess.run(["make", "--no-print-directory", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    echoed = [line for line in done.stdout.splitlines() if line.startswith("echo ")]
    assert echoed, "make demo prints nothing after its report"
    last = echoed[-1].removeprefix("echo ").strip().strip('"').strip()
    return last


def test_make_demo_ends_with_the_line_to_run_next():
    assert demo_next_line() == "source .venv/bin/activate"


def test_the_readme_and_getting_started_say_it_before_they_need_it():
    text = README.read_text(encoding="utf-8")
    first_python = text.index("```python")
    assert "source .venv/bin/activate" in text[:first_python]
    assert text.index("source .venv/bin/activate") < text.index("\nluca-gym ")
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in page[:page.index("```python")]


@pytest.mark.slow  # a shell and a fresh interpreter that generates an organism: 10-30 s
def test_the_printed_line_then_the_readmes_first_block_run_in_a_plain_shell(tmp_path):
    """In a shell that has not activated anything (no .venv on PATH), the line
    `make demo` prints, then `luca-gym --version` and the README's first
    Python block run as written, with plain ``python``."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "activate").is_file():
        pytest.skip("no .venv here (make demo or make test builds it)")
    _, body = python_blocks(README)[0]
    (tmp_path / "first.py").write_text(body, encoding="utf-8")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not pathlib.Path(p).resolve().is_relative_to(venv.resolve()))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = path
    script = f"cd {ROOT} && {demo_next_line()} && cd {tmp_path} && luca-gym --version && python first.py"
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "legal actions now" in done.stdout


# -- the docs read in the repository -------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: pathlib.Path) -> list[str]:
    """The relative link targets of a markdown page (anchors dropped; code blocks skipped)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    targets = [m.group(1).split("#", 1)[0] for m in LINK.finditer(text)]
    return [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]


PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_names_a_file_of_the_repository(page):
    """A link works where the page is read in the repository (GitHub's view,
    an editor) as well as on the site: it names a file that is there before
    `make docs` (the notebooks' pages exist only on the site; link to the
    notebook and the docs hook points the site's link at its page)."""
    broken = [t for t in relative_links(page) if not (page.parent / t).resolve().is_file()]
    assert not broken, f"{page.relative_to(ROOT)} links to what is not a file of the repository: {broken}"


def test_the_link_check_sees_links():
    assert len(relative_links(DOCS / "index.md")) >= 10


@pytest.mark.parametrize("page", sorted((DOCS / "api").glob("*.md")), ids=lambda p: p.name)
def test_an_api_page_says_what_its_directives_are(page):
    """Read in the repository, an API page's ``::: module`` lines are all it
    has of the reference: a sentence before the first one says the site
    renders them (and how to read the same docstrings without the site)."""
    text = page.read_text(encoding="utf-8")
    if "\n::: " not in text:
        return
    before = text.split("\n::: ", 1)[0]
    assert "documentation site" in before and "renders" in before and "help(" in before, page.name


def test_the_luca_pages_picture_is_the_notebooks(tmp_path):
    """docs/worlds/pictures/luca.png is the quick-start notebook's stored
    network drawing (to 128 colours): rerun the notebook, rerun
    ``python docs/hooks/world_pictures.py luca``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("world_pictures", DOCS / "hooks" / "world_pictures.py")
    pictures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pictures)
    pictures.luca(tmp_path / "luca.png")
    assert (tmp_path / "luca.png").read_bytes() == (DOCS / "worlds" / "pictures" / "luca.png").read_bytes()
