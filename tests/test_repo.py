"""Repository hygiene: notebooks are committed without outputs, and the TOC and the files agree."""

from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for d in ("chapters", "exercises") for p in (ROOT / d).glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run `make strip`"


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_toc_lists_every_chapter_and_nothing_missing() -> None:
    listed = set(_toc_files())
    on_disk = {f"chapters/{p.stem}" for p in (ROOT / "chapters").glob("*.ipynb")}
    assert on_disk <= listed, f"not in _toc.yml: {sorted(on_disk - listed)}"
    missing = [f for f in listed if not any((ROOT / f).with_suffix(s).exists() for s in (".ipynb", ".md"))]
    assert not missing, f"_toc.yml lists missing files: {missing}"


def test_section_notebooks_start_with_their_number() -> None:
    for path in (ROOT / "chapters").glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        number = ".".join(path.stem.split("-")[:3])
        first = nb.cells[0].source.lstrip("# ").split()[0]
        assert first == number, f"{path.name} starts with {first!r}, not the section number {number}"


CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_pages_follow_the_anatomy(path: Path) -> None:
    """WRITING.md: a prediction with an answer, prose not assembled in code, a check cell at the end."""
    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "{admonition} Predict" in markdown and "{dropdown}" in markdown, "no prediction with a collapsible answer"
    assert not [s for s in code if "Markdown(f" in s], "a code cell builds prose in an f-string: use book.glue"
    last_code = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert "hide-input" in last_code.metadata.get("tags", []) and "assert" in last_code.source, "no check cell last"
    if "_explorer()" in "\n".join(code):
        assert "{admonition} Try it" in markdown, "an explorer without a task for the reader"


@pytest.mark.parametrize("path", sorted((ROOT / "exercises").glob("*.ipynb")), ids=lambda p: p.name)
def test_exercise_notebooks_name_their_exercise(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert path.name.startswith(nb.metadata["inferlab"]["exercise"] + "-")
