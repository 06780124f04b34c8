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
