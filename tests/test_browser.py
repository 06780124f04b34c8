"""The built book in headless Chromium, offline. Each page (enumerated) is opened once, and on it, in turn:

- it renders: its math typeset, its images and saved widgets shown, no console error;
- every knob of every explorer on it moves the picture and its readout, within 50 ms median (``_explorer_checks.sweep``);
- every "Try it" of the page can be done on it: its knobs set, its stated answer read on the picture;
- it reads on a desktop (1400 px) and a phone (390 px), in light and dark mode (``_page_checks``): figures with
  captions and alt texts, no text under 11 px, none past the page's edge, contrast of 4.5:1 or more.

One load serves the four: they used to load each page once per concern, 120 loads against 38. Also here: the
error log's own checks (links and images that resolve: ``test_links.py``; screenshots: ``test_browser_pages.py``).

Runs after the book build (``make test`` builds it first); the site is ``_build/html`` or ``$INFERLAB_SITE``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

import _page_checks as reads
from _cdp import Chromium, Tab, serve
from _explorer_checks import BUDGET_MS, EXPLORER, TRY_ITS, reset, sweep, try_it

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("INFERLAB_SITE", ROOT / "_build" / "html"))
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

#: The theme's icons drawn offline (Font Awesome turns each <i> into an <svg>).
_ICONS = """(() => ({left: document.querySelectorAll('i[class*="fa-"]').length,
                    drawn: document.querySelectorAll('svg.svg-inline--fa').length}))()"""

_IMAGES = """[...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 80))"""

PAGES = pages()  # enumerated once, at collection: the parametrized tests below run on this list


def test_every_notebook_and_markdown_page_was_built_before_the_pages_were_enumerated() -> None:
    """A site still being written (or half removed) would be tested on fewer pages and pass: fail instead."""
    not_pages = set(yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"])  # README.md, ...
    expected = {str(p.relative_to(ROOT).with_suffix(".html")) for pattern in ("chapters/*.ipynb", "exercises/*.ipynb", "*.md")
                for p in ROOT.glob(pattern) if p.name not in not_pages}
    assert expected - set(PAGES) == set(), "pages missing from the built site"


@pytest.fixture(scope="module", params=PAGES)
def opened(request: pytest.FixtureRequest, tab: tuple[Tab, str]) -> tuple[Tab, str]:
    """The page, opened once at 1400 px for every test below that takes it (pytest runs them page by page)."""
    browser, base = tab
    reads.viewport(browser, reads.DESKTOP)
    browser.goto(base + request.param)
    return browser, request.param


def test_page_renders_offline(opened: tuple[Tab, str]) -> None:
    browser, page = opened
    math = browser.eval(_MATH)
    assert math["typeset"] == math["math"], f"{page}: {math['math'] - math['typeset']} formulas not typeset"
    if math["math"]:
        assert math["mathjax"], f"{page}: MathJax did not load"
    raw = sorted({m.group(0) for m in RAW_TEX.finditer(browser.eval(_VISIBLE_TEXT))})
    assert not raw, f"{page}: raw TeX in the text: {raw[:5]}"
    assert browser.eval(_IMAGES) == [], f"{page}: images that did not load"
    icons = browser.eval(_ICONS)
    assert icons["drawn"] and not icons["left"], f"{page}: icons not drawn: {icons}"
    widgets = browser.eval(_WIDGETS)
    assert widgets["rendered"] >= widgets["views"], f"{page}: saved widgets not rendered: {widgets}"
    assert browser.errors() == [], f"{page}: console errors"


def test_every_knob_of_every_explorer_moves_its_picture_quickly(opened: tuple[Tab, str]) -> None:
    browser, page = opened
    rows = sweep(browser)
    named = EXPLORER.findall((SITE / page).read_text(encoding="utf-8"))
    assert sorted({r["explorer"] for r in rows}) == sorted(set(named)), f"{page}: explorers on the page"
    for row in rows:
        assert row["changed"] and row["relabelled"], f"{page}: moving a knob changed nothing: {row}"
        assert row["median_ms"] <= BUDGET_MS, f"{page}: too slow: {row}"
    assert browser.errors() == [], f"{page}: console errors"


def test_every_try_it_of_the_page_can_be_done_on_it(opened: tuple[Tab, str]) -> None:
    browser, page = opened
    failed = [problem for task in TRY_ITS if task.page == page if (problem := try_it(browser, task))]
    assert not failed, f"{page}:\n" + "\n".join(failed)


#: What each page measured, for the summary at the end of the module.
MEASURED: dict[str, dict] = {}


def test_page_reads_on_desktop_and_phone_in_both_modes(opened: tuple[Tab, str]) -> None:
    browser, page = opened
    reset(browser)  # the explorers as the page opened them
    found = MEASURED[page] = reads.read_page(browser)
    problems = reads.problems(found)
    assert not problems, f"{page}:\n" + "\n".join(problems)


def test_summary_of_the_measurements() -> None:
    """The numbers over every page measured above (printed with -s); fails if a page was not measured."""
    assert set(MEASURED) == set(PAGES), f"pages not measured: {sorted(set(PAGES) - set(MEASURED))[:5]}"
    lines = []
    for width in (reads.DESKTOP, reads.PHONE):
        for kind in ("page", "figure"):
            px = [(m["fonts", width][kind]["px"], p) for p, m in MEASURED.items() if m["fonts", width][kind]["where"]]
            if px:
                lines.append(f"smallest {kind} text at {width} px: {min(px)[0]:.2f} px ({min(px)[1]})")
    for key in (("contrast", "light"), ("contrast", "dark"), ("contrast", "dark", reads.PHONE)):
        worst = min((m[key]["worst"]["ratio"], p) for p, m in MEASURED.items())
        lines.append(f"worst contrast {'/'.join(map(str, key[1:]))}: {worst[0]}:1 ({worst[1]})")
    print("\n" + "\n".join(lines))


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
