"""MkDocs hooks: each notebook under ``notebooks/`` becomes a tutorial page,
and the API reference shows the docstrings' Sphinx roles as plain code.

The pages are rendered from the outputs stored in the notebooks (they are
never re-run here: ``tests/test_notebooks.py`` runs them), so the site builds
in seconds with nbformat alone, without nbconvert or a kernel. A notebook's
markdown cells are copied as they are, its code cells become code blocks
titled as notebook cells (``tests/test_docs.py`` does not run them; the
notebook test does), text outputs become text blocks, PNG outputs become
images beside the page and markdown outputs (tables) are shown as markdown.
A page of docs/ links a notebook by its path in the repository
(``../../notebooks/x.ipynb``, which works read on GitHub); on the site that
link goes to the notebook's page.
"""

from __future__ import annotations

import base64
import pathlib
import posixpath
import re

import nbformat
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
FOLDER = "tutorials"  # the pages' place in the site


def render(path: pathlib.Path) -> tuple[str, dict[str, bytes]]:
    """The notebook at ``path`` as one markdown page, and its images by file name."""
    notebook = nbformat.read(path, as_version=4)
    parts = [f"<small>Rendered from `notebooks/{path.name}` with its stored outputs; "
             f"rerun it with the `notebooks` extra.</small>"]
    images: dict[str, bytes] = {}
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            parts.append(cell.source)
            continue
        if cell.cell_type != "code":
            continue
        parts.append(f'```python title="notebook cell {i}"\n{cell.source}\n```')
        for j, output in enumerate(cell.get("outputs", [])):
            kind = output.output_type
            if kind == "stream":
                parts.append(f"```text\n{output.text.rstrip()}\n```")
            elif kind == "error":
                parts.append("```text\n" + f"{output.ename}: {output.evalue}" + "\n```")
            elif kind in ("execute_result", "display_data"):
                data = output.get("data", {})
                if "image/png" in data:
                    name = f"{path.stem}-{i}-{j}.png"
                    images[name] = base64.b64decode(data["image/png"])
                    parts.append(f"![the output of cell {i}]({name})")
                elif "text/markdown" in data:
                    parts.append(data["text/markdown"])
                elif "text/plain" in data:
                    parts.append(f"```text\n{data['text/plain'].rstrip()}\n```")
    return "\n\n".join(parts) + "\n", images


def on_files(files, config):
    """Add one generated page (and its images) per notebook to the site."""
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        page, images = render(path)
        files.append(File.generated(config, f"{FOLDER}/{path.stem}.md", content=page))
        for name, data in images.items():
            files.append(File.generated(config, f"{FOLDER}/{name}", content=data))
    return files


# A page links a notebook where the repository has it (``../../notebooks/x.ipynb``
# works read on GitHub or in an editor); on the site the link goes to the
# notebook's rendered page instead (``tutorials/x.md``, generated above).
NOTEBOOK_LINK = re.compile(r"(\]\()([^)\s#]+\.ipynb)((?:#[^)\s]*)?\))")


def on_page_markdown(markdown, page, config, files):
    """Point each link to a notebook of ``notebooks/`` at its tutorial page."""
    docs = pathlib.Path(config["docs_dir"]).resolve()
    here = (docs / page.file.src_uri).parent

    def to_page(match: re.Match) -> str:
        target = (here / match.group(2)).resolve()
        if target.parent != NOTEBOOKS.resolve() or not target.is_file():
            return match.group(0)
        rendered = posixpath.relpath(f"{FOLDER}/{target.stem}.md", posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{rendered}{match.group(3)}"

    return NOTEBOOK_LINK.sub(to_page, markdown)


# The docstrings cross-reference in Sphinx's roles (:class:`~a.b.C`), which
# mkdocstrings' Google-style rendering shows as ":class:" before the code.
ROLE = re.compile(r":(?:func|meth|class|mod|data|attr|exc|obj|const|py:\w+):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html, page, config, files):
    """Drop the Sphinx role before each cross-referenced name (``~`` keeps the last part, as Sphinx does)."""
    return ROLE.sub(_plain, html)
