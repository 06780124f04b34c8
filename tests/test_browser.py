"""The built book in headless Chromium, offline: every page (enumerated) renders its math and figures, with no
console errors and no broken internal links or images (its explorers: ``test_browser_explorers.py``).

Runs after the book build (``make test`` builds it first); the site is ``_build/html`` or ``$INFERLAB_SITE``.
Screenshots of three pages go to ``_build/screenshots/`` for review.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import pytest
import yaml

from _cdp import Chromium, Tab, serve

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("INFERLAB_SITE", ROOT / "_build" / "html"))
SHOTS = SITE.parent / "screenshots"
SKIP_DIRS = {"lite", "_static", "_sources", "_images", "_sphinx_design_static"}
#: TeX that MathJax should have typeset: display/inline delimiters or a TeX command left in the text.
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\(frac|times|cdot|le|ge|sum|text|mathrm|approx|left|right)\b"
                     r"|\$[^$\n]{0,80}[\\^_{][^$\n]{0,80}\$")


def pages() -> list[str]:
    """Every HTML page of the built site, relative to it (the lite app and static files excluded)."""
    if not SITE.is_dir():
        return ["<no site>"]
    return sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
                  if not SKIP_DIRS & set(p.relative_to(SITE).parts[:-1]))


@pytest.fixture(scope="module")
def tab() -> Iterator[tuple[Tab, str]]:
    if not SITE.is_dir():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    browser = Chromium()
    try:
        with serve(SITE) as base:
            yield browser.page(), base
    finally:
        browser.close()


_VISIBLE_TEXT = """(() => {
  const root = (document.querySelector('article') || document.body).cloneNode(true);
  root.querySelectorAll('pre, code, script, style, mjx-container, .highlight, textarea, .MathJax')
      .forEach(e => e.remove());
  return root.textContent;
})()"""

_MATH = """(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const math = [...document.querySelectorAll('.math')];
  return {math: math.length, typeset: math.filter(e => e.querySelector('mjx-container')).length,
          mathjax: !!(window.MathJax && MathJax.version)};
})()"""

_WIDGETS = """(async () => {
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  const rendered = () => document.querySelectorAll('.jupyter-widgets.widget-inline-hbox, .jupyter-widgets.widget-box').length;
  for (let i = 0; i < 50 && rendered() < views; i++) { await new Promise(r => setTimeout(r, 100)); }
  return {views: views, rendered: rendered()};
})()"""

_IMAGES = """[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 80))"""

PAGES = pages()  # enumerated once, at collection: the parametrized tests below run on this list


def test_every_notebook_and_markdown_page_was_built_before_the_pages_were_enumerated() -> None:
    """A site still being written (or half removed) would be tested on fewer pages and pass: fail instead."""
    not_pages = set(yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"])  # README.md, ...
    expected = {str(p.relative_to(ROOT).with_suffix(".html")) for pattern in ("chapters/*.ipynb", "exercises/*.ipynb", "*.md")
                for p in ROOT.glob(pattern) if p.name not in not_pages}
    assert expected - set(PAGES) == set(), "pages missing from the built site"


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline(tab: tuple[Tab, str], page: str) -> None:
    browser, base = tab
    browser.goto(base + page)
    math = browser.eval(_MATH)
    assert math["typeset"] == math["math"], f"{page}: {math['math'] - math['typeset']} formulas not typeset"
    if math["math"]:
        assert math["mathjax"], f"{page}: MathJax did not load"
    raw = sorted({m.group(0) for m in RAW_TEX.finditer(browser.eval(_VISIBLE_TEXT))})
    assert not raw, f"{page}: raw TeX in the text: {raw[:5]}"
    assert browser.eval(_IMAGES) == [], f"{page}: images that did not load"
    widgets = browser.eval(_WIDGETS)
    assert widgets["rendered"] >= widgets["views"], f"{page}: saved widgets not rendered: {widgets}"
    assert browser.errors() == [], f"{page}: console errors"


def test_the_error_log_catches_errors_logged_during_and_just_after_load(tab: tuple[Tab, str]) -> None:
    browser, _ = tab
    page = ("<script>console.error('during load');"
            "addEventListener('load', () => setTimeout(() => { throw new Error('just after load'); }, 10));</script>")
    browser.goto("data:text/html," + quote(page))
    found = " ".join(browser.errors())
    assert "during load" in found and "just after load" in found, found


def test_the_error_log_catches_every_failed_load(tab: tuple[Tab, str], tmp_path: Path) -> None:
    browser, _ = tab
    missing = ["missing.css", "missing.woff2", "missing.png", "missing.js", "missing.json"]
    (tmp_path / "p.html").write_text(
        '<link rel="stylesheet" href="missing.css"><style>@font-face {font-family: X; src: url(missing.woff2)}'
        ' body {font-family: X}</style>text<img src="missing.png"><script src="missing.js"></script>'
        '<script>fetch("missing.json")</script><script src="https://cdn.invalid/lib.js"></script>'
        '<iframe src="http://127.0.0.1:1/frame.html"></iframe>', encoding="utf-8")
    with serve(tmp_path) as base:
        browser.goto(base + "p.html")
        found = " ".join(browser.errors())
    for name in [*missing, "cdn.invalid/lib.js", "frame failed to load: http://127.0.0.1:1/frame.html"]:
        assert name in found, (name, found)


class _Refs(HTMLParser):
    """What one page points at: link targets, image, script and stylesheet sources, its element ids and
    its "Try it live" link. The standard library's tokenizer alone, no tree: the link tests took 8.9 s with a
    BeautifulSoup tree per page, 1.5 s with this."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.sources: list[str] = []
        self.ids: set[str] = set()
        self.try_live: str | None = None
        self._in_try_live = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
            if self._in_try_live and self.try_live is None:
                self.try_live = a["href"]
        elif tag in ("img", "script") and a.get("src") and not (tag == "img" and a["src"].startswith("data:")):
            self.sources.append(a["src"])
        elif tag == "link" and a.get("href") and "stylesheet" in (a.get("rel") or "").split():
            self.sources.append(a["href"])
        elif tag == "div" and "inferlab-try-live" in (a.get("class") or "").split():
            self._in_try_live = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self._in_try_live = False


@functools.cache
def _refs(path: Path) -> _Refs:
    """The references of the page at ``path`` (resolved), parsed once per test session."""
    refs = _Refs()
    refs.feed(path.read_text(encoding="utf-8"))
    refs.close()
    return refs


def _target(page: str, href: str) -> tuple[Path, str] | None:
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
        return None
    path = (SITE / page).parent / unquote(parts.path) if parts.path else SITE / page
    if path.is_dir():
        path = path / "index.html"
    return path.resolve(), parts.fragment


@pytest.mark.parametrize("page", PAGES)
def test_internal_links_and_images_resolve(page: str) -> None:
    if not SITE.is_dir():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    refs = _refs((SITE / page).resolve())
    broken = []
    for href, is_link in [(h, True) for h in refs.links] + [(s, False) for s in refs.sources]:
        target = _target(page, href)
        if target is None:
            continue
        path, fragment = target
        if not path.exists():
            broken.append(href)
        elif is_link and fragment and path.suffix == ".html" and fragment not in _refs(path).ids:
            broken.append(href)
    assert broken == [], f"{page}: broken internal references"


def test_the_link_check_finds_what_a_page_points_at(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text('<a href="q.html#s">x</a><img src="i.png"><img src="data:image/png;base64,AA">'
                    '<script src="s.js"></script><link rel="preload stylesheet" href="c.css"><link rel="icon" href="f.ico">'
                    '<div class="x inferlab-try-live"><a href="lite/?path=p.ipynb">Try it live</a></div><a href="z">z</a>'
                    '<section id="s"></section>', encoding="utf-8")
    refs = _refs(page)
    assert refs.links == ["q.html#s", "lite/?path=p.ipynb", "z"] and refs.try_live == "lite/?path=p.ipynb"
    assert refs.sources == ["i.png", "s.js", "c.css"] and refs.ids == {"s"}


def test_the_try_it_live_links_reach_the_lite_copy() -> None:
    chapter = SITE / "chapters"
    if not chapter.is_dir():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    for page in sorted(chapter.glob("*.html")):
        link = _refs(page.resolve()).try_live
        assert link is not None, page.name
        path, _ = _target(str(page.relative_to(SITE)), link)
        assert path.exists(), link
        notebook = urlsplit(link).query.removeprefix("path=")
        assert (ROOT / notebook).exists() and notebook == f"chapters/{page.stem}.ipynb"


def test_screenshots_of_three_pages(tab: tuple[Tab, str]) -> None:
    browser, base = tab
    chosen = [p for p in pages() if p == "index.html"]
    chosen += [p for p in pages() if p.startswith("chapters/8-2-1")][:1]
    chosen += [p for p in pages() if p.startswith("chapters/8-5-2")][:1]
    assert len(chosen) == 3, chosen
    for page in chosen:
        browser.goto(base + page)
        browser.eval(_MATH)
        shot = browser.screenshot(SHOTS / (Path(page).stem + ".png"))
        assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000
