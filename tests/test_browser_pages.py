"""Pages read in headless Chromium beyond the per-page checks of ``test_browser.py`` (figures, text sizes, overflow
and contrast on a desktop and a phone, in both modes: ``_page_checks``): search snippets show math as text, not TeX;
screenshots of the top of three pages (desktop, phone, dark) go to ``$INFERLAB_SHOTS`` (default ``_build/screenshots/pages``).

The site is ``_build/html`` or ``$INFERLAB_SITE``, as for ``test_browser.py``.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

from _cdp import Tab
from _page_checks import DESKTOP, PHONE, SETTLE, theme, viewport
from test_browser import PAGES, SITE, tab  # noqa: F401 (tab: the fixture, one browser for the module)

pytestmark = pytest.mark.book

SHOTS = Path(os.environ.get("INFERLAB_SHOTS", SITE.parent / "screenshots" / "pages"))
SHOT_PAGES = ("chapters/8-2-1", "chapters/8-3-1", "chapters/8-6-3")
#: Each screenshot shows the top of its page, at most this tall (whole pages, up to 16,000 px, took 2 s a shot).
SHOT_HEIGHT = 3000


def _open(browser: Tab, url: str, width: int) -> None:
    viewport(browser, width)
    browser.goto(url)
    browser.eval(SETTLE)


def test_search_snippets_show_math_as_text(tab: tuple[Tab, str]) -> None:
    """A search whose hits hold math: the snippets under the results show no TeX."""
    browser, base = tab
    _open(browser, base + "search.html?q=bandwidth+weights", DESKTOP)
    snippets = browser.eval("""(async () => {
      for (let i = 0; i < 100; i++) {
        const found = [...document.querySelectorAll('#search-results p.context')];
        if (found.length >= 5 || (found.length && i > 40)) return found.map(p => p.textContent);
        await new Promise(r => setTimeout(r, 100));
      }
      return [...document.querySelectorAll('#search-results p.context')].map(p => p.textContent);
    })()""")
    assert snippets, "the search found nothing"
    tex = [s for s in snippets if re.search(r"\\[()\[\]]|\\(frac|mathrm|text|times|cdot)\b", s)]
    assert not tex, f"raw TeX in search snippets: {tex[:3]}"
    assert browser.eval("window.inferlabPlainTex('\\\\frac{D_w}{b} + L\\\\times k')") == "(D_w)/(b) + L×k"


@pytest.mark.parametrize("prefix", SHOT_PAGES)
def test_screenshots_desktop_phone_dark(tab: tuple[Tab, str], prefix: str) -> None:
    browser, base = tab
    page = next((p for p in PAGES if p.startswith(prefix)), None)
    assert page is not None, prefix
    stem = Path(page).stem
    _open(browser, base + page, DESKTOP)  # once: the page is the same at every width and in either mode
    for name, width, mode in (("desktop", DESKTOP, "light"), ("dark", DESKTOP, "dark"), ("phone", PHONE, "light")):
        viewport(browser, width)
        theme(browser, mode)
        height = min(SHOT_HEIGHT, int(browser.eval("document.documentElement.scrollHeight")))
        browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=width < 700)
        browser.eval(SETTLE)
        data = browser.send("Page.captureScreenshot", format="png")["data"]
        shot = SHOTS / f"{stem}-{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        shot.write_bytes(base64.b64decode(data))
        assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000
    browser.send("Emulation.clearDeviceMetricsOverride")


def test_the_page_checks_find_what_falls_short(tab: tuple[Tab, str], tmp_path: Path) -> None:
    """A page built to fail each check: ``_page_checks`` names every shortfall, and nothing on a page built to pass."""
    from _cdp import serve
    from _page_checks import problems, read_page

    style = ("<style>html[data-theme=dark] body {background: #111; color: #eee}"
             " html[data-theme=dark] .pale {color: #333}</style>")
    bad = (f"<html><head>{style}</head><body><main><p style='font-size:8px'>tiny text</p>"
           "<p style='color:#bbb'>pale on white</p><p class='pale'>dark on dark</p>"
           "<p style='white-space:nowrap'>" + "words past the edge " * 40 + "</p>"
           "<figure><img alt='_images/fig.png' src='data:image/gif;base64,R0lGODlhAQABAAAAACw='></figure>"
           "</main></body></html>")
    good = (f"<html><head>{style}</head><body><main><p>plain text</p><figure>"
            "<img alt='a dot' src='data:image/gif;base64,R0lGODlhAQABAAAAACw='><figcaption>Figure: a dot</figcaption>"
            "</figure></main></body></html>")
    (tmp_path / "bad.html").write_text(bad, encoding="utf-8")
    (tmp_path / "good.html").write_text(good, encoding="utf-8")
    browser, _ = tab
    with serve(tmp_path) as base:
        viewport(browser, DESKTOP)
        browser.goto(base + "bad.html")
        found = " | ".join(problems(read_page(browser)))
        browser.goto(base + "good.html")
        assert problems(read_page(browser)) == []
    for shortfall in ("figure without a caption", "alt text '_images/fig.png'", "1400 px: smallest page text",
                      "390 px: smallest page text", "1400 px: text past the edge", "390 px: text past the edge",
                      "light: 1 texts below", "dark: 1 texts below"):
        assert shortfall in found, (shortfall, found)
