"""Sphinx extension: a book that works offline and can be played with (no CDN, no kernel).

- Serves MathJax, require.js and the Jupyter widget manager from the built site's ``_static``,
  copied from the pinned npm packages in ``web/`` (``make`` runs ``npm ci`` there).
- Serves the offline-slider script and style, and switches displayed explorers to offline
  frames (``inferlab.book.widgets.OFFLINE_ENV``) in the kernels the build starts.
- Puts a "Try it live" banner on every notebook page, linking to the JupyterLite site that
  jupyterlite-sphinx builds into ``lite/``, with the ``inferlab`` wheel built here.
- Drops scripts that extensions add twice (sphinx-thebe's ``const THEBE_JS_URL``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .widgets import OFFLINE_ENV

#: Where the widget manager's bundles look for their fonts: next to the URL require.js gives each of its modules
#: (``@jupyter-widgets/base`` and ``.../html-manager/dist/libembed-amd``), mapped into ``_static``.
WIDGET_FONTS = ("@jupyter-widgets", "@jupyter-widgets/html-manager/dist")
_FONTS = "@jupyter-widgets/html-manager/dist/*."
#: Files and folders taken from web/node_modules into _static (source glob, parent folder under _static).
ASSETS: list[tuple[str, str]] = [
    ("mathjax/es5/tex-mml-chtml.js", "mathjax"),
    ("mathjax/es5/input", "mathjax"),
    ("mathjax/es5/output/chtml", "mathjax/output"),
    ("mathjax/es5/ui", "mathjax"),
    ("mathjax/es5/a11y", "mathjax"),
    ("mathjax/es5/sre", "mathjax"),
    ("mathjax/es5/adaptors", "mathjax"),
    ("requirejs/require.js", "."),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "."),
    *[(_FONTS + ext, folder) for ext in ("woff2", "woff", "ttf", "eot", "svg") for folder in WIDGET_FONTS],
]
HERE = Path(__file__).resolve().parent
#: Folders of the repository that the JupyterLite site carries (its notebooks open from there).
LITE_CONTENTS = ("chapters", "exercises", "data")
LITE_NOTE = ("it runs in your browser with every knob live; the book's files ship with it, "
             "Pyodide and its packages load from the Pyodide CDN on first use")


def stage_assets(node_modules: Path, dest: Path) -> Path:
    """Copy ``ASSETS`` from ``node_modules`` into ``dest`` (a static folder); ValueError names what is missing."""
    if not node_modules.is_dir():
        raise ValueError(f"node_modules ({node_modules}) is missing: run `make` (npm ci in web/)")
    for pattern, target in ASSETS:
        matches = sorted(node_modules.glob(pattern))
        if not matches:
            raise ValueError(f"node_modules lacks {pattern}: run `npm ci` in web/")
        for src in matches:
            out = dest / target / src.name
            if src.is_dir():
                shutil.copytree(src, out, dirs_exist_ok=True)
            elif not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out)
    shutil.copytree(HERE / "static", dest, dirs_exist_ok=True)
    return dest


def build_wheel(project: Path, dest: Path) -> Path:
    """Build the ``inferlab`` wheel (no dependencies, no network) into ``dest``, from a copy of the project.

    The copy puts ``data/`` inside the package (``inferlab/data``, package data in pyproject.toml), so the
    wheel alone serves ``inferlab.datasets`` where there is no checkout (JupyterLite).
    """
    import tempfile

    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="inferlab-wheel-") as tmp:  # setuptools writes build/ where it builds
        shutil.copy2(project / "pyproject.toml", tmp)
        shutil.copytree(project / "lib", Path(tmp) / "lib",
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "static"))
        shutil.copytree(project / "data", Path(tmp) / "lib" / "inferlab" / "data")
        # setuptools' build backend called as pip calls it, without pip: the same wheel, and build_wheel takes
        # 2.9 s here instead of 4.4 s
        backend = "import sys; from setuptools import build_meta; build_meta.build_wheel(sys.argv[1])"
        run = subprocess.run([sys.executable, "-c", backend, str(dest)], cwd=tmp, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"building the inferlab wheel failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    (wheel,) = dest.glob("inferlab-*.whl")
    return wheel


def _configure(app: Any, config: Any) -> None:
    root = Path(app.srcdir)
    build = Path(app.outdir).parent
    static = stage_assets(root / "web" / "node_modules", build / "offline_static")
    config.html_static_path.append(str(static))
    if not config.html_favicon:  # else the browser asks the site for /favicon.ico and logs a 404
        config.html_favicon = str(HERE / "static" / "favicon.png")
    if "jupyterlite_sphinx" in config.extensions:
        wheel = build_wheel(root, build / "lite_wheels")
        lite_dir = build / "lite_dir"
        lite_dir.mkdir(parents=True, exist_ok=True)
        (lite_dir / "jupyter_lite_config.json").write_text(json.dumps(
            {"PipliteAddon": {"piplite_urls": [str(wheel)]}}, indent=1))
        config.jupyterlite_dir = str(lite_dir)


def _stage_lite_contents(app: Any, config: Any) -> None:
    """Copy the notebooks and data/ into the JupyterLite contents (after jupyterlite-sphinx empties it)."""
    if "jupyterlite_sphinx" not in config.extensions:
        return
    root = Path(app.srcdir)
    contents = root / config.jupyterlite_content_dir
    for name in LITE_CONTENTS:
        shutil.copytree(root / name, contents / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))


def _key(asset: Any) -> tuple:
    """Identity of a Sphinx script or stylesheet entry (a ``_JavaScript``/``_CascadingStyleSheet`` or a str)."""
    attributes = getattr(asset, "attributes", {}) or {}
    filename = getattr(asset, "filename", asset) or ""  # inline scripts come as None or ""
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def _dedupe_scripts(context: dict[str, Any]) -> None:
    """Keep each script once (sphinx-thebe's configuration is added twice and then throws in the browser)."""
    seen: set[tuple] = set()
    kept = []
    for script in context.get("script_files", []):
        if _key(script) not in seen:
            seen.add(_key(script))
            kept.append(script)
    context["script_files"] = kept


def _offline_assets(context: dict[str, Any], widget_files: set[str], pagename: str) -> None:
    """Drop stylesheets from other hosts; drop the widget manager where the page shows no widget, else point
    require.js at the manager's fonts in ``_static`` (relative to the page)."""
    context["css_files"] = [c for c in context.get("css_files", []) if "://" not in _key(c)[0]]
    names = {Path(f).name for f in widget_files}
    scripts = context.get("script_files", [])
    if "application/vnd.jupyter.widget-view+json" not in context.get("body", ""):
        context["script_files"] = [
            s for s in scripts
            if Path(_key(s)[0]).name not in names
            and dict(_key(s)[1]).get("type") != "application/vnd.jupyter.widget-state+json"]
        return
    # the manager finds its fonts next to the URL require.js gives its module: map that module into _static
    static = "../" * pagename.count("/") + "_static/"
    root = WIDGET_FONTS[0]
    config = type(scripts[0])(None, body=f'require.config({{paths: {{"{root}": "{static}{root}"}}}})')
    kept = []
    for script in scripts:
        kept.append(script)
        if Path(_key(script)[0]).name == "require.js":
            kept.append(config)
    context["script_files"] = kept


def try_live_banner(pagename: str) -> str:
    """The "Try it live" banner of a notebook page ``pagename`` (e.g. ``chapters/8-1-1-...``)."""
    up = "../" * pagename.count("/")
    href = f"{up}lite/lab/index.html?path={pagename}.ipynb"
    return (f'<div class="inferlab-try-live"><a class="reference external" href="{href}">Try it live</a>: '
            f"open this notebook in JupyterLite ({LITE_NOTE}). Run its first cell to install "
            "<code>inferlab</code>.</div>")


def _page_context(app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    _dedupe_scripts(context)
    # pydata-sphinx-theme logs an error for the empty mode it is given; "auto" follows the reader's system
    context["default_mode"] = context.get("default_mode") or "auto"
    _offline_assets(context, set(app.config.nb_ipywidgets_js), pagename)
    source = Path(app.srcdir) / f"{pagename}.ipynb"
    if doctree is not None and "body" in context and source.exists() \
            and "jupyterlite_sphinx" in app.config.extensions:
        context["body"] = try_live_banner(pagename) + context["body"]


def setup(app: Any) -> dict[str, Any]:
    """Register the offline assets, the page banner and the offline frames of explorers."""
    os.environ[OFFLINE_ENV] = "1"  # kernels started by this build inherit it
    app.connect("config-inited", _configure, priority=400)  # before jupyterlite-sphinx reads its config
    app.connect("config-inited", _stage_lite_contents, priority=600)  # after it empties its contents folder
    app.connect("html-page-context", _page_context, priority=900)  # after the theme and myst-nb add theirs
    app.add_js_file("inferlab-frames.js", defer="defer")
    app.add_css_file("inferlab-frames.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
