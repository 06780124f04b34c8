"""make test executes each notebook once: nbmake's run is stored where the book build's cache finds it."""

import os
import subprocess
import time
from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from inferlab.headless import store_in_book_cache


def test_an_nbmake_run_is_a_cache_hit_for_the_book(tmp_path: Path) -> None:
    nb = new_notebook(cells=[new_markdown_cell("# t"), new_code_cell("print(6 * 7)", metadata={"tags": ["x"]})])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    ran = NotebookClient(nbformat.read(path, as_version=4), record_timing=True).execute()
    assert "execution" in ran.cells[1].metadata  # what used to make the book miss the cache
    store_in_book_cache(ran, path, tmp_path / "cache", 0.5)
    record = get_cache(str(tmp_path / "cache")).match_cache_notebook(nbformat.read(path, as_version=4))
    cached = get_cache(str(tmp_path / "cache")).get_cache_bundle(record.pk).nb
    assert [c.outputs[0]["text"] for c in cached.cells] == ["42\n"]  # the cache keeps code cells only


def test_the_cache_survives_bytecode_and_egg_info_but_not_a_changed_source(tmp_path: Path) -> None:
    """make's drop-stale-cache rule: the unit tests write bytecode into lib/ while nbmake fills the cache."""
    root = Path(__file__).resolve().parents[1]
    cache, lib, data = tmp_path / "cache", tmp_path / "lib", tmp_path / "data"
    stored = cache / "executed" / "page.ipynb"
    for f in (stored, lib / "pkg" / "mod.py", data / "table.csv"):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    os.utime(lib / "pkg" / "mod.py", (time.time() - 20,) * 2)
    os.utime(data / "table.csv", (time.time() - 20,) * 2)
    os.utime(stored, (time.time() - 10,) * 2)
    for written in (lib / "pkg" / "__pycache__" / "mod.cpython-311.pyc", lib / "pkg.egg-info" / "PKG-INFO"):
        written.parent.mkdir(parents=True)
        written.write_text("y")

    def drop() -> None:
        subprocess.run(["make", "-s", "-C", str(root), "drop-stale-cache", f"CACHE={cache}",
                        f"SOURCES={lib} {data}"], check=True)

    drop()
    assert stored.exists()
    (data / "table.csv").write_text("changed")
    drop()
    assert not cache.exists()
