"""Sphinx extension: a book that works offline and can be played with (no CDN, no kernel).

- Serves MathJax, require.js and the Jupyter widget manager from the built site's ``_static``,
  copied from the pinned npm packages in ``web/`` (``make`` runs ``npm ci`` there).
- Serves the static explorers' script and style, and switches displayed explorers to their static form
  (``inferlab.book.widgets.OFFLINE_ENV``) in the kernels the build starts.
- Puts a "Try it live" banner on every notebook page, linking to the JupyterLite site that
  jupyterlite-sphinx builds into ``lite/``, with the ``inferlab`` wheel built here. The lite copies of the notebooks
  read as the book's pages (glued values and citations filled in; jupyterlab-myst renders the rest of MyST), and
  where Pyodide cannot load, the lite pages and the banner say so (``static/inferlab-lite-check.js``).
- Drops scripts that extensions add twice (sphinx-thebe's ``const THEBE_JS_URL``).
- Ships only what the built pages load: MathJax's page script with the files it loads itself (its fonts, the
  TeX extensions it autoloads, the accessibility tools of its menu with English speech), and the Jupyter widget
  manager (``embed-amd.js``, require.js, their fonts) only when a page shows a saved widget. One search field: the
  sidebar's (the theme's header repeated it).
- Ships a fallback webfont for the characters the built pages use beyond Latin: the glossary's Chinese terms
  (subset of Noto Sans CJK SC, Debian's fonts-noto-cjk) and symbols such as check marks (subset of DejaVu Sans),
  cut with fontTools at build time to exactly those characters (``FALLBACK_FONTS``, ``static/inferlab-frames.css``).
- Marks each explorer with its notebook (``data-notebook``), which print names ("Interactive in ... the notebook").
- Serves the page style and script of static figures, phones and dark mode (``static/inferlab-pages.css``,
  ``.js``: figures and equations wider than the column scroll with a cue; search snippets show math as text).
- Copies the book's PDF (``inferlab.book.pdf``, ``make pdf``) into the site when one was printed.
- Draws the explorers' states for the static book into ``_static/explorers`` (``inferlab.book.static_explorers``)
  and ships the figures' font, DejaVu Sans cut to the characters they use (``FIGURE_FONT``).

This file is long because it holds every step that turns Sphinx's output into a site that works offline; each
step is a short function called from the three Sphinx events at the bottom, and they share the page reader.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib as mpl

from .pdf import PDF_NAME
from .widgets import OFFLINE_ENV

#: Where the widget manager's bundles look for their fonts: next to the URL require.js gives each of its modules
#: (``@jupyter-widgets/base`` and ``.../html-manager/dist/libembed-amd``), mapped into ``_static``.
WIDGET_FONTS = ("@jupyter-widgets", "@jupyter-widgets/html-manager/dist")
_FONTS = "@jupyter-widgets/html-manager/dist/*."
#: Files and folders taken from web/node_modules into _static (source glob, parent folder under _static).
#: MathJax: the one script pages load (tex-mml-chtml.js, which already holds the TeX and MathML input, the CHTML
#: output with its font data, the menu and assistive MathML) and what that script loads itself: its woff fonts,
#: the TeX extensions ``autoload`` fetches on first use, and what its menu's accessibility options fetch (the
#: explorer and the speech-rule engine with its English and Nemeth rules; the book is in English). Left out:
#: the other combined components and inputs, ``ui/`` (in the script), ``adaptors/`` (Node only), all-packages.js
#: and ``mml3`` (loaded only when configured), and the speech rules of ten other languages (3.3 MB).
ASSETS: list[tuple[str, str]] = [
    ("mathjax/es5/tex-mml-chtml.js", "mathjax"),
    ("mathjax/es5/output/chtml/fonts/woff-v2", "mathjax/output/chtml/fonts"),
    ("mathjax/es5/input/tex/extensions/*.js", "mathjax/input/tex/extensions"),
    *[(f"mathjax/es5/a11y/{name}.js", "mathjax/a11y") for name in ("explorer", "semantic-enrich", "complexity", "sre")],
    *[(f"mathjax/es5/sre/mathmaps/{name}.json", "mathjax/sre/mathmaps") for name in ("base", "en", "nemeth")],
    ("requirejs/require.js", "."),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "."),
    *[(_FONTS + ext, folder) for ext in ("woff2", "woff", "ttf", "eot", "svg") for folder in WIDGET_FONTS],
]
#: Matched by a glob above, never loaded (all-packages.js: only when configured, and the autoloader loads single
#: extensions).
LEFT_OUT = ("all-packages.js",)
#: The widget manager's files under _static: removed from the site when no page loads ``embed-amd.js``.
WIDGET_MANAGER = ("embed-amd.js", "require.js", WIDGET_FONTS[0])
#: Fallback webfonts (file under _static, fontconfig pattern of the source font, Debian package, Unicode ranges):
#: each holds the characters of the built pages in its ranges that its source font has; the @font-face rules in
#: static/inferlab-frames.css name the same files and ranges.
FALLBACK_FONTS: tuple[tuple[str, str, str, tuple[tuple[int, int], ...]], ...] = (
    ("inferlab-cjk.woff2", "Noto Sans CJK SC:style=Regular", "fonts-noto-cjk",
     ((0x2E80, 0x9FFF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF))),
    ("inferlab-symbols.woff2", "DejaVu Sans:style=Book", "fonts-dejavu-core", ((0x2190, 0x2BFF),)),
)
HERE = Path(__file__).resolve().parent
#: Folders of the repository that the JupyterLite site carries (its notebooks open from there).
LITE_CONTENTS = ("chapters", "exercises", "data")
LITE_NOTE = ("it runs in your browser with every knob live; the book's files ship with it, "
             "Pyodide and its packages load from the Pyodide CDN on first use")
#: The script that says so where Pyodide cannot load (book pages and every app page of the lite site).
LITE_CHECK = "inferlab-lite-check.js"
#: MyST that jupyterlab-myst cannot resolve in a lone notebook, filled in the lite copies from the build:
#: myst-nb's glued text (``{glue:text}`key:format```, ``{glue}`key```) and citations (``{cite:p}`a,b```).
GLUE_ROLE = re.compile(r"\{glue(?::text)?\}`([^`]+)`")
CITE_ROLE = re.compile(r"\{cite:p\}`([^`]+)`")


@functools.cache
def pyodide_url() -> str:
    """The Pyodide the lite site's kernel loads: the default of the installed jupyterlite-pyodide-kernel (its CDN),
    written into the lite config so that the kernel, the lite pages' check and the banner name one URL."""
    from jupyter_core.paths import jupyter_path
    from jupyterlite_pyodide_kernel.constants import PYODIDE_KERNEL_NPM_NAME

    for folder in jupyter_path("labextensions"):
        schema = Path(folder) / PYODIDE_KERNEL_NPM_NAME / "static" / "schema" / "kernel.v0.schema.json"
        if schema.is_file():
            return json.loads(schema.read_text())["properties"]["pyodideUrl"]["default"]
    raise FileNotFoundError(f"{PYODIDE_KERNEL_NPM_NAME} is not installed: run `make`")


def stage_assets(node_modules: Path, dest: Path) -> Path:
    """Copy ``ASSETS`` from ``node_modules`` into ``dest`` (a static folder); ValueError names what is missing.

    MathJax's folder is staged anew, so that files an earlier build staged and ``ASSETS`` no longer lists go."""
    if not node_modules.is_dir():
        raise ValueError(f"node_modules ({node_modules}) is missing: run `make` (npm ci in web/)")
    shutil.rmtree(dest / "mathjax", ignore_errors=True)
    for pattern, target in ASSETS:
        matches = sorted(node_modules.glob(pattern))
        if not matches:
            raise ValueError(f"node_modules lacks {pattern}: run `npm ci` in web/")
        for src in matches:
            if src.name in LEFT_OUT:
                continue
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
    # one search field, the sidebar's: pydata-sphinx-theme puts another in the header unless told otherwise
    config.html_theme_options.setdefault("navbar_persistent", [])
    if not config.html_favicon:  # else the browser asks the site for /favicon.ico and logs a 404
        config.html_favicon = str(HERE / "static" / "favicon.png")
    if "jupyterlite_sphinx" in config.extensions:
        wheel = build_wheel(root, build / "lite_wheels")
        lite_dir = build / "lite_dir"
        lite_dir.mkdir(parents=True, exist_ok=True)
        (lite_dir / "jupyter_lite_config.json").write_text(json.dumps(
            {"PipliteAddon": {"piplite_urls": [str(wheel)]}}, indent=1))
        (lite_dir / "jupyter-lite.json").write_text(json.dumps({
            "jupyter-lite-schema-version": 0, "jupyter-config-data": {"litePluginSettings": {
                "@jupyterlite/pyodide-kernel-extension:kernel": {"pyodideUrl": pyodide_url()}}}}, indent=1))
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


def try_live_banner(pagename: str, repository: str = "") -> str:
    """The "Try it live" banner of a notebook page ``pagename`` (e.g. ``chapters/8-1-1-...``); its Pyodide URL and
    the book's ``repository`` are for the message where Pyodide cannot load (``LITE_CHECK``)."""
    up = "../" * pagename.count("/")
    href = f"{up}lite/lab/index.html?path={pagename}.ipynb"
    data = f'data-pyodide-url="{html.escape(pyodide_url())}" data-repository="{html.escape(repository)}"'
    return (f'<div class="inferlab-try-live" {data}><a class="reference external" href="{href}">Try it live</a>: '
            f"open this notebook in JupyterLite ({LITE_NOTE}). Run its first cell to install "
            "<code>inferlab</code>.</div>")


def _page_context(app: Any, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    _dedupe_scripts(context)
    # pydata-sphinx-theme logs an error for the empty mode it is given; "auto" follows the reader's system
    context["default_mode"] = context.get("default_mode") or "auto"
    _offline_assets(context, set(app.config.nb_ipywidgets_js), pagename)
    source = Path(app.srcdir) / f"{pagename}.ipynb"
    if doctree is not None and "body" in context and source.exists():
        # print says where an explorer is live (static/inferlab-frames.css)
        context["body"] = context["body"].replace(
            '<figure class="inferlab-explorer"',
            f'<figure class="inferlab-explorer" data-notebook="{html.escape(pagename)}.ipynb"')
        if "jupyterlite_sphinx" in app.config.extensions:
            repository = app.config.html_theme_options.get("repository_url", "")
            context["body"] = try_live_banner(pagename, repository) + context["body"]


class PageText(HTMLParser):
    """What a built page shows as text (scripts and styles left out) and the files it loads."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.loads: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("script", "style"):
            self._skip += 1
        if tag in ("script", "img") and a.get("src"):
            self.loads.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.loads.append(a["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def built_pages(outdir: Path) -> list[Path]:
    """The HTML pages of a built site (not JupyterLite's, not files under ``_static``)."""
    return sorted(p for p in outdir.rglob("*.html")
                  if not {"lite", "_static", "_sources", "_images"} & set(p.relative_to(outdir).parts[:-1]))


def _read_pages(outdir: Path) -> tuple[str, set[Path]]:
    """All the text the built pages show, and every file they load (resolved)."""
    text, loads = [], set()
    for page in built_pages(outdir):
        parser = PageText()
        parser.feed(page.read_text(encoding="utf-8"))
        text.append("".join(parser.text))
        for ref in parser.loads:
            path = ref.split("?", 1)[0].split("#", 1)[0]
            if path and "://" not in path and not path.startswith("data:"):
                loads.add((page.parent / path).resolve())
    return "\n".join(text), loads


def _drop_unused_widget_manager(static: Path, loads: set[Path]) -> list[str]:
    """Remove the widget manager from the site's ``static`` folder when no page loads it; what was removed."""
    if (static / "embed-amd.js").resolve() in loads:
        return []
    removed = []
    for name in WIDGET_MANAGER:
        path = static / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        removed.append(name)
    return removed


def _drop_stale(site_folder: Path, staged_folder: Path) -> list[str]:
    """Remove files of ``site_folder`` that ``staged_folder`` no longer holds (Sphinx copies static files over
    an earlier build's and removes none); what was removed, relative to ``site_folder``."""
    if not site_folder.is_dir():
        return []
    removed = []
    for path in sorted(site_folder.rglob("*"), reverse=True):  # files before the folders that hold them
        rel = path.relative_to(site_folder)
        if path.is_file() and not (staged_folder / rel).exists():
            path.unlink()
            removed.append(str(rel))
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return removed


def _font_source(pattern: str) -> tuple[Path, int] | None:
    """The file and face index fontconfig gives for ``pattern``, when it is that family (not a substitute)."""
    if shutil.which("fc-match") is None:
        return None
    out = subprocess.run(["fc-match", "-f", "%{file}\n%{index}\n%{family}", pattern], capture_output=True, text=True)
    lines = out.stdout.split("\n")
    if out.returncode != 0 or len(lines) < 3:
        return None
    family = pattern.split(":", 1)[0]
    if family not in [f.strip() for f in lines[2].split(",")]:
        return None
    return Path(lines[0]), int(lines[1] or 0)


def _font_chars(source: Path, index: int) -> set[int]:
    """The code points a font file maps (its face ``index``), read by fontTools in a child process."""
    code = ("import sys, json; from fontTools.ttLib import TTFont; "
            "print(json.dumps(sorted(TTFont(sys.argv[1], fontNumber=int(sys.argv[2]), lazy=True).getBestCmap())))")
    out = subprocess.run([sys.executable, "-c", code, str(source), str(index)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"reading {source} failed: {out.stderr[-2000:]}")
    return set(json.loads(out.stdout))


def subset_font(source: Path, index: int, chars: list[int], out: Path, cache: Path) -> Path:
    """``out``: a WOFF2 of face ``index`` of ``source`` holding exactly the code points ``chars`` (fontTools'
    pyftsubset, no hinting); kept in ``cache`` under a key of the source and the characters."""
    key = hashlib.sha256(json.dumps([str(source), source.stat().st_mtime, index, chars]).encode()).hexdigest()[:16]
    cached = cache / f"{out.stem}-{key}.woff2"
    if not cached.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        unicodes = ",".join(f"{c:04X}" for c in chars) or "0"  # none: the font's .notdef alone
        run = subprocess.run([sys.executable, "-m", "fontTools.subset", str(source), f"--font-number={index}",
                              f"--unicodes={unicodes}", "--flavor=woff2",
                              "--no-hinting", "--desubroutinize", "--name-IDs=1,2,3,4,6",
                              "--layout-features=kern,liga,ccmp,locl,mark,mkmk",
                              f"--output-file={tmp}"], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"subsetting {source} failed: {run.stderr[-2000:]}")
        tmp.replace(cached)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(cached, out)
    return out


def _ship_fallback_fonts(app: Any, text: str, static: Path) -> None:
    """Write ``FALLBACK_FONTS`` into the site, each cut to the characters of ``text`` in its ranges (a font whose
    ranges the pages use is always written, if need be with no character, so that no page asks for a missing
    file)."""
    logger = logging.getLogger(f"sphinx.{__name__}")  # Sphinx's handlers: -W turns its warnings into errors
    used = {ord(c) for c in text}
    cache = Path(app.outdir).parent / "fonts"
    missing: set[int] = set()
    for name, pattern, package, ranges in FALLBACK_FONTS:
        out = static / name
        wanted = sorted(c for c in used if any(lo <= c <= hi for lo, hi in ranges))
        if not wanted:
            out.unlink(missing_ok=True)
            continue
        found = _font_source(pattern)
        if found is None:
            logger.warning(f"no font {pattern!r} for the fallback webfont {name}: install Debian's {package} "
                           f"(make fonts); {len(wanted)} characters of the pages would show as boxes where "
                           "the reader's system lacks them")
            continue
        covered = _font_chars(*found)
        chars = [c for c in wanted if c in covered]
        missing |= set(wanted) - covered
        subset_font(found[0], found[1], chars, out, cache)
        logger.info(f"fallback webfont {name}: {len(chars)} characters, {out.stat().st_size:,} bytes")
    if missing:  # emoji, which no fallback font here draws: the reader's emoji font shows them, or a box
        logger.info("characters of the pages that no fallback font covers: "
                    + " ".join(f"{chr(c)} U+{c:04X}" for c in sorted(missing)))


#: The font Matplotlib draws the figures' text in, shipped for the explorers' SVG (their text is text): Matplotlib's
#: own copy of DejaVu Sans, cut to the characters the figures use.
FIGURE_FONT = "inferlab-figures.woff2"
_EXPLORER = re.compile(r'<figure class="inferlab-explorer"[^>]*\bdata-explorer="([^"]+)"')


def _write_explorers(app: Any, outdir: Path, static: Path) -> str:
    """Draw every explorer the pages show on its knobs' grid into ``_static/explorers`` (cached across builds,
    ``inferlab.book.static_explorers``); returns all the text of their pictures."""
    from .static_explorers import read_data_script, write_site_data

    keys = sorted({m.group(1) for page in built_pages(outdir)
                   for m in _EXPLORER.finditer(page.read_text(encoding="utf-8"))})
    folder = static / "explorers"
    shutil.rmtree(folder, ignore_errors=True)
    written = write_site_data(keys, folder, outdir.parent / "explorers", Path(app.srcdir), jobs=os.cpu_count() or 1)
    return "".join("".join(read_data_script(p.read_text(encoding="utf-8"))["lines"]) for p in written)


def _ship_figure_font(app: Any, text: str, static: Path) -> None:
    """Matplotlib's DejaVu Sans cut to the characters of ``text`` it has (``FIGURE_FONT``)."""
    source = Path(mpl.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    chars = sorted({ord(c) for c in text} & _font_chars(source, 0))
    subset_font(source, 0, chars, static / FIGURE_FONT, Path(app.outdir).parent / "fonts")


def _finish(app: Any, exception: Exception | None) -> None:
    """After the HTML is written: draw the explorers' states, drop the widget manager no page loads, cut the
    fallback fonts to the pages' characters and the figure font to the figures', and copy the book's PDF into the
    site when one has been printed."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    static = outdir / "_static"
    text, loads = _read_pages(outdir)
    _drop_stale(static / "mathjax", outdir.parent / "offline_static" / "mathjax")
    _drop_unused_widget_manager(static, loads)
    _ship_fallback_fonts(app, text, static)
    _ship_figure_font(app, text + _write_explorers(app, outdir, static), static)
    pdf = outdir.parent / "pdf" / PDF_NAME
    if pdf.is_file():
        shutil.copy2(pdf, outdir / PDF_NAME)


def fill_lite_notebook(path: Path, glue: dict[str, Any], labels: dict[str, str]) -> int:
    """Write the book's glued text (``glue``: myst-nb's glue data of the page, key -> output) and citation labels
    (``labels``: key -> label) into the Markdown cells of the lite copy ``path``; how many roles were filled (a role
    whose key is unknown stays)."""
    from myst_nb.core.variables import format_plain_text

    def paste(match: re.Match) -> str:
        key, _, spec = match.group(1).rpartition(":") if ":" in match.group(1) else (match.group(1), "", "")
        text = glue.get(key, {}).get("data", {}).get("text/plain")
        return match.group(0) if text is None else format_plain_text(text, spec)

    def cite(match: re.Match) -> str:
        keys = [k.strip() for k in match.group(1).split(",")]
        return match.group(0) if not all(k in labels for k in keys) else f"[{', '.join(labels[k] for k in keys)}]"

    nb = json.loads(path.read_text(encoding="utf-8"))
    filled = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        new, n = GLUE_ROLE.subn(paste, source)
        new, m = CITE_ROLE.subn(cite, new)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            filled += n + m - len(GLUE_ROLE.findall(new)) - len(CITE_ROLE.findall(new))  # those left unknown
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return filled


def _fill_lite_contents(app: Any, exception: Exception | None) -> None:
    """Before jupyterlite-sphinx builds the lite site: the glued values and citations of each page into its copy."""
    if exception is not None or app.builder.format != "html" or "jupyterlite_sphinx" not in app.config.extensions:
        return
    contents = Path(app.srcdir) / app.config.jupyterlite_content_dir
    executed = Path(app.outdir).parent / "jupyter_execute"
    cite = app.env.domains.get("cite")
    labels = {c.key: c.formatted_entry.label for c in getattr(cite, "citations", [])}
    for path in sorted(contents.rglob("*.ipynb")):
        docname = path.relative_to(contents).with_suffix("").as_posix()
        glue_file = executed / f"{docname}.glue.json"
        glue = json.loads(glue_file.read_text(encoding="utf-8")) if glue_file.is_file() else {}
        fill_lite_notebook(path, glue, labels)


def mark_lite_pages(lite: Path, repository: str) -> list[Path]:
    """Copy ``LITE_CHECK`` into the built lite site ``lite`` and load it in each of its app pages (those with a
    ``jupyter-config-data``), with the Pyodide URL its kernel loads; the pages marked."""
    shutil.copy2(HERE / "static" / LITE_CHECK, lite / LITE_CHECK)
    marked = []
    for page in sorted(lite.rglob("index.html")):
        text = page.read_text(encoding="utf-8")
        if 'id="jupyter-config-data"' not in text or LITE_CHECK in text or "</head>" not in text:
            continue
        up = "../" * (len(page.relative_to(lite).parts) - 1) or "./"
        tag = (f'<script defer src="{up}{LITE_CHECK}" data-inferlab-lite="" '
               f'data-pyodide-url="{html.escape(pyodide_url())}" data-repository="{html.escape(repository)}"></script>')
        page.write_text(text.replace("</head>", f"{tag}\n</head>", 1), encoding="utf-8")
        marked.append(page)
    return marked


def _mark_lite_site(app: Any, exception: Exception | None) -> None:
    """After jupyterlite-sphinx built the lite site: its pages say so where Pyodide cannot load."""
    lite = Path(app.outdir) / "lite"
    if exception is None and app.builder.format == "html" and (lite / "jupyter-lite.json").is_file():
        mark_lite_pages(lite, app.config.html_theme_options.get("repository_url", ""))


def setup(app: Any) -> dict[str, Any]:
    """Register the offline assets, the page banner and the offline frames of explorers."""
    os.environ[OFFLINE_ENV] = "1"  # kernels started by this build inherit it
    app.connect("config-inited", _configure, priority=400)  # before jupyterlite-sphinx reads its config
    app.connect("config-inited", _stage_lite_contents, priority=600)  # after it empties its contents folder
    app.connect("html-page-context", _page_context, priority=900)  # after the theme and myst-nb add theirs
    app.connect("build-finished", _finish)
    app.connect("build-finished", _fill_lite_contents, priority=450)  # before jupyterlite-sphinx builds lite/ (500)
    app.connect("build-finished", _mark_lite_site, priority=600)  # after
    app.add_js_file("inferlab-frames.js", defer="defer")
    app.add_js_file(LITE_CHECK, defer="defer")
    app.add_js_file("inferlab-pages.js", defer="defer")
    app.add_css_file("inferlab-frames.css")
    app.add_css_file("inferlab-pages.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
