"""The JupyterLite site ("Try it live") and what it needs: our wheel, every notebook, data/, and a library
that imports with pure-Python dependencies plus what Pyodide provides.

The site checks need the built book (``make test`` builds it first; ``$INFERLAB_SITE`` or ``_build/html``);
the dependency checks need only this environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

from inferlab.book import install_cell

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("INFERLAB_SITE", ROOT / "_build" / "html"))
LITE = SITE / "lite"

#: Packages with compiled code that Pyodide (0.27 and later) ships built for WebAssembly.
PYODIDE_COMPILED = {"numpy", "pandas", "matplotlib", "kiwisolver", "contourpy", "PIL", "fontTools",
                    "markupsafe", "yaml", "_cffi_backend", "pyodide", "ml_dtypes"}
#: Distributions Pyodide ships (pure or not); the rest must be pure-Python wheels piplite can install.
PYODIDE_DISTS = {"numpy", "pandas", "matplotlib", "sympy", "mpmath", "kiwisolver", "contourpy", "pillow",
                 "fonttools", "cycler", "pyparsing", "packaging", "python-dateutil", "six", "pytz", "tzdata",
                 "ipython", "traitlets", "comm", "markupsafe", "pyyaml", "ml-dtypes"}

#: Modules that run the book's tooling (builds, grading, GPU), never a notebook in the browser.
TOOLS = ("inferlab.gpu", "inferlab.headless", "inferlab.book.sphinx_offline", "inferlab.exercises.grader",
         "inferlab.grade", "inferlab.book.install_cell", "inferlab.kernels.triton_paged")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _is_pure(dist: metadata.Distribution) -> bool:
    wheel = dist.read_text("WHEEL") or ""
    return "Root-Is-Purelib: true" in wheel and all(
        line.split(":", 1)[1].strip().endswith("-none-any") for line in wheel.splitlines() if line.startswith("Tag:"))


def _runtime_requirements(name: str) -> list[Requirement]:
    reqs = [Requirement(r) for r in metadata.requires(name) or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def test_inferlab_needs_only_pyodide_packages_and_pure_python_wheels() -> None:
    seen, todo, impure = set(), [r.name for r in _runtime_requirements("inferlab")], []
    assert "torch" not in {_norm(n) for n in todo}, "torch belongs in the gpu extra only"
    while todo:
        name = _norm(todo.pop())
        if name in seen or name in PYODIDE_DISTS:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        if not _is_pure(dist):
            impure.append(name)
        todo += [r.name for r in _runtime_requirements(name)]
    assert impure == [], "compiled dependencies Pyodide does not provide"
    assert "ipywidgets" in seen


def test_importing_inferlab_loads_no_compiled_module_pyodide_lacks() -> None:
    code = """
import importlib, pkgutil, sys
import inferlab
for info in pkgutil.walk_packages(inferlab.__path__, "inferlab."):
    if not info.name.startswith(TOOLS):
        importlib.import_module(info.name)
stdlib = sys.base_prefix  # the interpreter's own extension modules: Pyodide's CPython has its own
compiled = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None) or ""
    if f.endswith((".so", ".pyd")) and not f.startswith(stdlib) and "site-packages/" in f:
        compiled.add(f.split("site-packages/", 1)[1].split("/")[0].split(".")[0])
print(" ".join(sorted(compiled)))
"""
    code = f"TOOLS = {TOOLS!r}\n" + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "torch" not in out
    assert set(out) <= PYODIDE_COMPILED, f"compiled modules outside Pyodide: {set(out) - PYODIDE_COMPILED}"


@pytest.mark.book
def test_the_lite_site_is_built_with_the_app_and_the_wheel() -> None:
    assert (LITE / "lab" / "index.html").exists(), f"no JupyterLite app in {LITE}: run `make book`"
    config = json.loads((LITE / "jupyter-lite.json").read_text())
    assert config["jupyter-config-data"]["appName"]
    (wheel,) = (LITE / "pypi").glob("inferlab-*-py3-none-any.whl")
    index = json.loads((LITE / "pypi" / "all.json").read_text())
    assert "inferlab" in index
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    ours = {f"inferlab/{p.relative_to(ROOT / 'lib' / 'inferlab')}" for p in (ROOT / "lib" / "inferlab").rglob("*.py")}
    assert ours <= names, f"modules missing from the wheel: {sorted(ours - names)[:5]}"
    data = {f"inferlab/data/{p.relative_to(ROOT / 'data')}" for p in (ROOT / "data").rglob("*") if p.is_file()}
    assert data and data <= names, f"data files missing from the wheel: {sorted(data - names)[:5]}"
    assert (LITE / "extensions" / "@jupyterlite" / "pyodide-kernel-extension").is_dir()


@pytest.mark.book
def test_the_wheel_alone_serves_the_data(tmp_path: Path) -> None:
    """Installed from the wheel, with no checkout around it (as in JupyterLite), inferlab reads its data."""
    (wheel,) = (LITE / "pypi").glob("inferlab-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp_path / "site")
    code = ("import sys; from pathlib import Path; import inferlab.datasets as d; "
            "assert Path(d.__file__).is_relative_to(Path(sys.argv[1])), d.__file__; "
            "assert d.DATA_DIR == Path(sys.argv[1]) / 'inferlab' / 'data', d.DATA_DIR; "
            "print(len(d.published('batch_sweep_8_1')))")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "site")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) > 0


@pytest.mark.book
def test_every_notebook_and_data_file_is_in_the_lite_contents() -> None:
    files = LITE / "files"
    listing = json.loads((LITE / "api" / "contents" / "all.json").read_text())
    assert {"chapters", "exercises", "data"} <= {c["name"] for c in listing["content"]}
    wanted = [p.relative_to(ROOT) for folder in ("chapters", "exercises", "data")
              for p in (ROOT / folder).rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts]
    missing = [str(p) for p in wanted if not (files / p).is_file()]
    assert missing == [], "files the lite site lacks"
    for nb in (ROOT / "chapters").glob("*.ipynb"):
        assert json.loads((files / "chapters" / nb.name).read_text())["cells"], nb.name


def test_the_install_cell_takes_the_repository_url_from_the_config(tmp_path: Path) -> None:
    url = install_cell.repository_url()
    assert url.startswith("https://") and url in (ROOT / "_config.yml").read_text()
    source = install_cell.cell_source(url)
    assert f"git clone --quiet --depth 1 {url} " in source and 'piplite.install("inferlab")' in source
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 8.1")])  # no code cell yet
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    assert install_cell.ensure_install_cell(path, url) is True
    assert install_cell.ensure_install_cell(path, url) is False
    cells = nbformat.read(path, as_version=4).cells
    assert len(cells) == 2 and cells[0].source == "# 8.1" and cells[1].source == source
    assert "remove-cell" in cells[1].metadata.tags and install_cell.has_install_cell(path, url)
    assert install_cell.ensure_install_cell(path, "https://example.org/fork") is True
    assert len(nbformat.read(path, as_version=4).cells) == 2 and not install_cell.has_install_cell(path, url)
    with pytest.raises(ValueError, match="url"):
        install_cell.cell_source("git@host:x")


@pytest.mark.parametrize("path", install_cell.notebooks(), ids=lambda p: p.name)
def test_every_notebook_installs_inferlab_where_it_is_missing(path: Path) -> None:
    assert install_cell.has_install_cell(path, install_cell.repository_url()), "run python -m inferlab.book.install_cell"
