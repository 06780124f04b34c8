"""The JupyterLite site ("Try it live") and what it needs: our wheel, every notebook, data/, and a library
that imports with pure-Python dependencies plus what Pyodide provides.

The site checks need the built book (``make test`` builds it first; ``$INFERLAB_SITE`` or ``_build/html``);
the dependency checks need only this environment. MyST in the live notebooks: jupyterlab-myst, installed for
``make lab`` and shipped in the lite site, fits the JupyterLab of both, and a notebook opened in the lite app (in
headless Chromium, Pyodide's CDN blocked) shows its admonitions, dropdowns, terms, glued values and citations
rendered, no raw MyST. Where Pyodide cannot load (CDN blocked, or the site opened from file://), the lite app and
the book's "Try it live" banner say so in one sentence (``static/inferlab-lite-check.js``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
from packaging.requirements import Requirement

from inferlab.book import install_cell, sphinx_offline

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


# --- MyST in the live notebooks (jupyterlab-myst), and the message where Pyodide cannot load ---------------------

MYST = "jupyterlab-myst"
#: The package an extension's range must fit at least (the lite site reports its version in jupyter-lite.json).
APPLICATION = "@jupyterlab/application"
DIRECTIVE = re.compile(r"^\s*(?::{3,}|`{3,})\{([\w-]+)\}", re.M)
ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
               "seealso"}
TERM = re.compile(r"\{term\}`([^`<]+?)\s*(?:<[^`]*>)?`")
#: MyST left raw in rendered text: a role, a directive fence, or a glued value's key and format (``key_name:.2f``).
RAW_MYST = re.compile(r"\{[a-z][\w:-]*\}`|^\s*(?::{3,}|`{3,})\s*\{|\{(?:term|glue|cite|eq|ref|doc|numref)\b"
                      r"|\b[a-z][a-z0-9]*_[a-z0-9_]*:[,.]?\d*[a-z%](?![\w(])", re.M)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def satisfies(version: str, spec: str) -> bool:
    """Whether ``version`` meets an npm range of the kinds JupyterLab extensions use (``^4.0.0``, ``~4.6.4``,
    ``>=4.0.0 <5``, ``4.6.4``, alternatives joined by ``||``)."""
    v = _version_tuple(version)
    for alternative in spec.split("||"):
        ok = True
        for part in alternative.split():
            op, bound = re.match(r"(\^|~|>=|<=|>|<|=)?(.*)", part).groups()
            b = _version_tuple(bound)
            b += (0,) * (3 - len(b))
            if op == "^":
                ok &= v >= b and v[0] == b[0] if b[0] else v[:2] == b[:2] and v >= b
            elif op == "~":
                ok &= v >= b and v[:2] == b[:2]
            elif op in (">=", ">", "<=", "<"):
                ok &= {">=": v >= b, ">": v > b, "<=": v <= b, "<": v < b}[op]
            else:
                ok &= v == b
        if ok:
            return True
    return False


def test_the_range_check_reads_npm_ranges() -> None:
    assert satisfies("4.6.4", "^4.0.0") and satisfies("4.6.4", "~4.6.1") and satisfies("3.14.4", "^3.8.0")
    assert not satisfies("5.0.0", "^4.0.0") and not satisfies("4.5.9", "~4.6.0") and not satisfies("3.6.0", "^4.0.0")
    assert satisfies("4.6.4", ">=4.0.0 <5") and not satisfies("5.1.0", ">=4.0.0 <5") and satisfies("7.6.3", "^6 || ^7")


def _myst_package(folder: Path) -> dict:
    return json.loads((folder / MYST / "package.json").read_text())


def _lab_package_versions(app: dict) -> dict[str, str]:
    """What an app built on JupyterLab provides: {package: version} from its package.json's resolutions."""
    return {name: re.sub(r"^[\^~]", "", v) for name, v in app.get("resolutions", {}).items()}


def _assert_fits(extension: dict, provided: dict[str, str], where: str) -> None:
    wanted = {n: r for n, r in extension["dependencies"].items() if n.startswith("@jupyterlab/") and n in provided}
    assert APPLICATION in wanted, f"{MYST} declares no {APPLICATION} range"
    misfits = {n: (r, provided[n]) for n, r in wanted.items() if not satisfies(provided[n], r)}
    assert misfits == {}, f"{MYST} {extension['version']} does not fit the JupyterLab of {where}"


def test_jupyterlab_myst_is_pinned_and_fits_the_jupyterlab_of_make_lab_and_of_jupyterlite() -> None:
    pinned = dict(line.split("==", 1) for line in (ROOT / "requirements.txt").read_text().splitlines()
                  if "==" in line and not line.startswith("#"))
    assert pinned.get(MYST) == metadata.version(MYST), "requirements.txt pins jupyterlab-myst; run `make`"
    from jupyter_core.paths import jupyter_path

    folder = next(Path(p) for p in jupyter_path("labextensions") if (Path(p) / MYST / "package.json").is_file())
    extension = _myst_package(folder)
    assert extension["version"] == metadata.version(MYST)
    # `make lab`: the JupyterLab installed here (its staging package.json lists what the app provides)
    import jupyterlab

    lab = json.loads((Path(jupyterlab.__file__).parent / "staging" / "package.json").read_text())
    _assert_fits(extension, _lab_package_versions(lab), f"jupyterlab {jupyterlab.__version__}")
    # JupyterLite: the lab app inside jupyterlite-core's app archive
    import jupyterlite_core

    (archive,) = Path(jupyterlite_core.__file__).parent.glob("jupyterlite-app-*.tgz")
    with tarfile.open(archive) as tf:
        lite_lab = json.load(tf.extractfile("package/lab/package.json"))
    lite_version = metadata.version("jupyterlite-core")
    _assert_fits(extension, _lab_package_versions(lite_lab), f"jupyterlite-core {lite_version}")


def test_make_lab_loads_jupyterlab_myst() -> None:
    """The lab that `make lab` starts lists the extension in its page config, enabled, with its server part."""
    from jupyter_core.paths import jupyter_config_path, jupyter_path
    from jupyterlab_server.config import get_page_config

    settings = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
    page = get_page_config(jupyter_path("labextensions"), str(settings))
    assert MYST in [e["name"] for e in page["federated_extensions"]]
    disabled = page["disabledExtensions"]  # a list here, or {name: bool} where a settings file lists them
    disabled = [name for name in disabled if disabled[name] is True] if isinstance(disabled, dict) else disabled
    assert not any(name == MYST or name.startswith(f"{MYST}:") for name in disabled), disabled
    enabled = {}
    for folder in reversed(jupyter_config_path()):
        for conf in sorted((Path(folder) / "jupyter_server_config.d").glob("*.json")):
            enabled.update(json.loads(conf.read_text()).get("ServerApp", {}).get("jpserver_extensions", {}))
    assert enabled.get("jupyterlab_myst") is True


def test_the_banner_and_the_lite_config_name_the_pyodide_the_kernel_defaults_to() -> None:
    url = sphinx_offline.pyodide_url()
    assert url.startswith("https://") and url.endswith("/pyodide.mjs"), url
    banner = sphinx_offline.try_live_banner("chapters/8-1-1-request-lifecycle", "https://example.org/book")
    assert f'data-pyodide-url="{url}"' in banner and 'data-repository="https://example.org/book"' in banner
    assert banner.index("<a ") < banner.index("Try it live")  # the link stays the banner's first


def test_the_lite_pages_load_the_check_once(tmp_path: Path) -> None:
    page = '<html><head><script id="jupyter-config-data" type="application/json">{}</script></head></html>'
    for rel in ("index.html", "lab/index.html", "notebooks/index.html"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(page)
    (tmp_path / "lab" / "tree").mkdir()
    (tmp_path / "lab" / "tree" / "index.html").write_text("<html><head><script>location.href = '..'</script></head>")
    marked = sphinx_offline.mark_lite_pages(tmp_path, "https://example.org/book")
    assert [str(p.relative_to(tmp_path)) for p in marked] == ["index.html", "lab/index.html", "notebooks/index.html"]
    assert sphinx_offline.mark_lite_pages(tmp_path, "https://example.org/book") == []
    lab = (tmp_path / "lab" / "index.html").read_text()
    assert lab.count(sphinx_offline.LITE_CHECK) == 1 and f'src="../{sphinx_offline.LITE_CHECK}"' in lab
    assert f'src="./{sphinx_offline.LITE_CHECK}"' in (tmp_path / "index.html").read_text()
    assert (tmp_path / sphinx_offline.LITE_CHECK).is_file()


def test_the_lite_copies_get_the_glued_values_and_citations(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Gaps add up to {glue:text}`decode_s:.2f` s over {glue:text}`n:,d` tokens "
                                      "{cite:p}`little1961proof,kwon2023vllm`; {glue:text}`missing:.1f` stays."),
        nbformat.v4.new_code_cell("glue('decode_s', 6.7612, display=False)  # {glue:text}`decode_s` in code stays")])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    glue = {"decode_s": {"data": {"text/plain": "6.7612"}}, "n": {"data": {"text/plain": "12345"}}}
    labels = {"little1961proof": "Lit61", "kwon2023vllm": "KLZ+23"}
    assert sphinx_offline.fill_lite_notebook(path, glue, labels) == 3
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].source == ("Gaps add up to 6.76 s over 12,345 tokens [Lit61, KLZ+23]; "
                               "{glue:text}`missing:.1f` stays.")
    assert cells[1].source == nb.cells[1].source


def _markdown(path: Path) -> str:
    """All the Markdown cells of a notebook, joined."""
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _lite_notebooks() -> list[Path]:
    return sorted((LITE / "files").rglob("*.ipynb"))


@pytest.mark.book
def test_the_lite_site_ships_jupyterlab_myst() -> None:
    folder = LITE / "extensions"
    extension = _myst_package(folder)
    assert extension["version"] == metadata.version(MYST)
    assert (folder / MYST / extension["jupyterlab"]["_build"]["load"]).is_file()
    config = json.loads((LITE / "jupyter-lite.json").read_text())["jupyter-config-data"]
    assert MYST in [e["name"] for e in config["federated_extensions"]]
    assert satisfies(config["versionInfo"][APPLICATION]["version"], extension["dependencies"][APPLICATION])


@pytest.mark.book
def test_the_lite_app_pages_check_the_pyodide_the_kernel_loads() -> None:
    config = json.loads((LITE / "jupyter-lite.json").read_text())["jupyter-config-data"]
    url = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]["pyodideUrl"]
    assert url == sphinx_offline.pyodide_url()
    assert (LITE / sphinx_offline.LITE_CHECK).read_bytes() == (
        Path(sphinx_offline.__file__).parent / "static" / sphinx_offline.LITE_CHECK).read_bytes()
    for app in ["", "lab/", "notebooks/", "tree/", "edit/", "repl/", "consoles/"]:
        page = (LITE / app / "index.html").read_text()
        assert page.count(f'src="{"../" if app else "./"}{sphinx_offline.LITE_CHECK}"') == 1, app
        assert f'data-pyodide-url="{url}"' in page, app


@pytest.mark.book
def test_no_lite_notebook_holds_a_glued_value_or_citation_jupyterlab_myst_cannot_fill() -> None:
    notebooks = _lite_notebooks()
    assert notebooks
    left = {}
    for path in notebooks:
        text = _markdown(path)
        found = sphinx_offline.GLUE_ROLE.findall(text) + sphinx_offline.CITE_ROLE.findall(text)
        if found:
            left[path.name] = found[:3]
    assert left == {}, "roles left unfilled in the lite copies"


def _myst_notebook() -> Path:
    """The first chapter whose Markdown has every kind of MyST the lite app must render."""
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        text = _markdown(path)
        kinds = set(DIRECTIVE.findall(text))
        if ({"admonition", "dropdown"} <= kinds and TERM.search(text) and sphinx_offline.GLUE_ROLE.search(text)
                and sphinx_offline.CITE_ROLE.search(text)):
            return path
    raise AssertionError("no chapter with admonitions, dropdowns, terms, glued values and citations")


@pytest.fixture(scope="module")
def lite_tab() -> Iterator[tuple[object, str]]:
    """A headless Chromium tab with Pyodide's CDN blocked, and the built site served on loopback."""
    from _cdp import Chromium, serve

    if not (LITE / "lab" / "index.html").is_file():
        pytest.fail(f"no JupyterLite app in {LITE}: run `make book`")
    browser = Chromium()
    try:
        tab = browser.page()
        tab.send("Network.enable")  # for the block list alone
        tab.send("Network.setBlockedURLs", urls=[f"*{urlsplit(sphinx_offline.pyodide_url()).netloc}*"])
        with serve(SITE) as base:
            yield tab, base
    finally:
        browser.close()


def _wait(tab, expression: str, timeout_s: float = 90):
    deadline = time.monotonic() + timeout_s
    while True:
        value = tab.eval(expression)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


#: The Markdown cells of the notebook on show (the lite app reopens the notebooks of earlier visits, hidden).
CELLS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell"
_MYST_TEXT = f"""(() => [...document.querySelectorAll('{CELLS} .myst')].map(m => {{
  const c = m.cloneNode(true);
  c.querySelectorAll('.katex-mathml, annotation, code, pre, svg').forEach(e => e.remove());
  return c.textContent;
}}).join('\\n'))()"""


@pytest.mark.book
def test_a_notebook_in_the_lite_app_renders_its_myst_and_says_pyodide_cannot_load(lite_tab) -> None:
    tab, base = lite_tab
    source = _myst_notebook()
    cells = [c for c in json.loads(source.read_text())["cells"] if c["cell_type"] == "markdown"]
    markdown = "\n".join("".join(c["source"]) for c in cells)
    tab.goto(f"{base}lite/lab/index.html?path=chapters/{source.name}")
    rendered = _wait(tab, f"document.querySelectorAll('{CELLS} .myst').length >= {len(cells)}")
    assert rendered, f"{source.name}: the lite app did not render its {len(cells)} Markdown cells with jupyterlab-myst"
    text = tab.eval(_MYST_TEXT)
    raw = sorted({m.group(0) for m in RAW_MYST.finditer(text)})
    assert raw == [], f"{source.name}: raw MyST in the lite app"
    directives = DIRECTIVE.findall(markdown)
    counts = tab.eval(f"[document.querySelectorAll('{CELLS} aside.myst-admonition').length, "
                      f"document.querySelectorAll('{CELLS} details.myst-dropdown').length]")
    assert counts == [sum(d in ADMONITIONS for d in directives), directives.count("dropdown")], counts
    flat = " ".join(text.split())
    keys = {k.strip() for keys in sphinx_offline.CITE_ROLE.findall(markdown) for k in keys.split(",")}
    assert sorted(k for k in keys if k in flat) == [], f"{source.name}: citation keys instead of the book's labels"
    missing = sorted({t.strip() for t in TERM.findall(markdown) if " ".join(t.split()) not in flat})
    assert missing == [], f"{source.name}: terms that do not read as text"
    state = _wait(tab, "['ok', 'unreachable'].includes(document.documentElement.dataset.pyodide) "
                       "&& document.documentElement.dataset.pyodide", timeout_s=30)
    assert state == "unreachable"
    bar = tab.eval("document.getElementById('inferlab-lite-status').innerText")
    assert "Pyodide" in bar and "make lab" in bar and bar.count(". ") == 0, bar


@pytest.mark.book
def test_the_lite_app_from_file_says_it_cannot_start(lite_tab) -> None:
    tab, _ = lite_tab
    tab.goto((LITE / "lab" / "index.html").as_uri() + "?path=chapters/x.ipynb")
    assert _wait(tab, "document.getElementById('inferlab-lite-status') !== null", timeout_s=20)
    bar = tab.eval("document.getElementById('inferlab-lite-status').innerText")
    assert tab.eval("document.documentElement.dataset.pyodide") == "file"
    assert "file://" in bar and "online" in bar and "make lab" in bar, bar


@pytest.mark.book
def test_the_try_it_live_banner_says_when_pyodide_cannot_load(lite_tab) -> None:
    tab, base = lite_tab
    page = "chapters/8-1-1-request-lifecycle.html"
    tab.goto(base + page)
    assert tab.eval("document.querySelector('div.inferlab-try-live').dataset.pyodide") is None  # nothing fetched yet
    tab.eval("document.querySelector('div.inferlab-try-live a').dispatchEvent(new PointerEvent('pointerenter'))")
    state = _wait(tab, "['ok', 'unreachable'].includes(document.querySelector('div.inferlab-try-live').dataset.pyodide)"
                       " && document.querySelector('div.inferlab-try-live').dataset.pyodide", timeout_s=20)
    assert state == "unreachable"
    banner = tab.eval("document.querySelector('div.inferlab-try-live').innerText")
    assert banner.startswith("Try it live") and "Pyodide" in banner and "make lab" in banner, banner
    tab.eval("document.querySelector('div.inferlab-try-live a').click()")
    time.sleep(0.5)
    assert tab.eval("location.pathname").endswith(page), "the first click opened a lite page that cannot run"
    tab.goto((SITE / page).as_uri())
    assert tab.eval("document.querySelector('div.inferlab-try-live').dataset.pyodide") == "file"
    banner = tab.eval("document.querySelector('div.inferlab-try-live').innerText")
    assert "file://" in banner and "make lab" in banner, banner
