"""Every page of the built book read as a reader would, in headless Chromium: on a desktop (1400 px) and a phone
(390 px), in light and dark mode.

On every page: each static figure is an HTML ``<figure>`` with a ``<figcaption>`` and an alt text (``aria-label`` or
``alt``) that says something and is not a file path; the smallest rendered text, in figures and in the page, is at
least 11 px at both widths (a text run's size is its base size: a mathtext exponent or index is smaller, as it is
in the page's own math); no text runs past the page's right edge or is cut off (what is wider than the column
scrolls: a figure or an equation); text has a contrast of at least 4.5:1 against its background in both modes.
Search snippets show math as text, not TeX. Screenshots of three pages (desktop, phone, dark) go to
``$INFERLAB_SHOTS`` (default ``_build/screenshots/pages``).

The site is ``_build/html`` or ``$INFERLAB_SITE``, as for ``test_browser.py``.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

from _cdp import Tab
from test_browser import SITE, pages, tab  # noqa: F401 (tab: the fixture, one browser for the module)

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("INFERLAB_SHOTS", SITE.parent / "screenshots" / "pages"))
DESKTOP, PHONE = 1400, 390
MIN_TEXT_PX = 11.0
MIN_CONTRAST = 4.5
#: An alt text that is a file name or path, not a description.
PATH_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|svg|jpe?g|gif|webp)$|^(\.\./|_images/|data:)", re.I)
SHOT_PAGES = ("chapters/8-2-1", "chapters/8-3-1", "chapters/8-6-3")


PAGES = pages()


def _viewport(browser: Tab, width: int, height: int = 900) -> None:
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                 mobile=width < 700)


def _theme(browser: Tab, mode: str) -> None:
    """Light or dark as the theme's switch sets it (pydata-sphinx-theme: ``html[data-theme]``)."""
    browser.eval(f"document.documentElement.dataset.theme = '{mode}'; document.documentElement.dataset.mode = '{mode}';"
                 "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _open(browser: Tab, url: str, width: int) -> None:
    _viewport(browser, width)
    browser.goto(url)
    browser.eval(_SETTLE)


_SETTLE = """(async () => {
  if (!document.getElementById('inferlab-test-still')) {  // colours measured as they end, not mid-transition
    const still = document.createElement('style');
    still.id = 'inferlab-test-still';
    still.textContent = '*, *::before, *::after { transition: none !important; animation: none !important; }';
    document.head.appendChild(still);
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return true;
})()"""

#: Shared by the checks below: visible text nodes of the page, with their element.
_HELPERS = r"""
const visible = (el) => {
  for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (s.display === 'none' || s.visibility === 'hidden' || s.visibility === 'collapse' || Number(s.opacity) === 0) return false;
    if (e.hidden) return false;
  }
  return true;
};
const onPage = (r) => r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > -1e5;
const texts = (root) => {
  const out = [];
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (!el || el.closest('script, style, noscript, template, title, svg.inferlab-figure-svg, .visually-hidden, .sr-only, mjx-assistive-mml')) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(onPage);
    if (!rects.length || !visible(el)) continue;
    out.push({node: n, el: el, rects: rects});
  }
  return out;
};
const where = (el) => {
  const parts = [];
  for (let e = el; e && e !== document.body && parts.length < 3; e = e.parentElement) {
    parts.unshift(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].slice(0, 2).join('.') : ''));
  }
  return parts.join(' > ');
};
"""



def _js(body: str) -> str:
    """``body`` (a JavaScript expression) evaluated with ``_HELPERS`` in scope, in a scope of its own."""
    return "(() => {" + _HELPERS + "return " + body + ";})()"


_FIGURES = _js(r"""(() => {
  const out = [];
  const main = document.querySelector('main') || document.body;
  for (const fig of main.querySelectorAll('figure')) {
    const cap = fig.querySelector(':scope > figcaption');
    const media = [...fig.querySelectorAll('svg.inferlab-figure-svg, img')].filter(m => !m.closest('.inferlab-frame[hidden]'));
    const alts = media.map(m => m.tagName === 'IMG' ? m.getAttribute('alt') : m.getAttribute('aria-label'));
    out.push({cls: fig.className, id: fig.id, caption: cap ? cap.textContent.trim() : null,
              explorer: fig.matches('.inferlab-explorer, .inferlab-frames'), alts: alts});
  }
  const loose = [...main.querySelectorAll('.cell_output img, .cell_output svg.inferlab-figure-svg')]
      .filter(m => !m.closest('figure')).map(m => (m.getAttribute('alt') || m.getAttribute('aria-label') || m.src || '').slice(0, 80));
  return {figures: out, loose: loose};
})()""")

#: The smallest rendered text: in the page (computed font size of each visible text node's element) and in the
#: static figures (an SVG's text at the scale the SVG is drawn; a PNG's smallest text as written at build time,
#: scaled as the image is).
_FONTS = _js(r"""(() => {
  let page = {px: 1e9, where: null, text: null}, figure = {px: 1e9, where: null, text: null};
  const main = document.querySelector('main') || document.body;
  for (const t of texts(document.body)) {
    const px = parseFloat(getComputedStyle(t.el).fontSize);
    if (px < page.px) page = {px: px, where: where(t.el), text: t.node.textContent.trim().slice(0, 40)};
  }
  for (const svg of main.querySelectorAll('svg.inferlab-figure-svg')) {
    const box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
    if (!box.width || !vb || !vb.width) continue;
    const scale = box.width / vb.width;
    for (const text of svg.querySelectorAll('text')) {
      if (!text.textContent.trim() || getComputedStyle(text).display === 'none') continue;
      const runs = [text, ...text.querySelectorAll('tspan')].filter(e => e.textContent.trim());
      const px = Math.max(...runs.map(e => parseFloat(getComputedStyle(e).fontSize))) * scale;
      if (px < figure.px) figure = {px: px, where: where(svg.closest('figure')), text: text.textContent.trim().slice(0, 40)};
    }
  }
  for (const img of main.querySelectorAll('figure.inferlab-figure img')) {
    const fig = img.closest('figure'), natural = Number(img.getAttribute('width'));
    const px = Number(fig.dataset.minTextPx) * img.getBoundingClientRect().width / natural;
    if (px < figure.px) figure = {px: px, where: where(fig), text: '(PNG)'};
  }
  return {page: page, figure: figure};
})()""")

#: Text that runs past the page's right edge, or past the edge of a box that clips it without scrolling.
_OVERFLOW = _js(r"""(() => {
  const width = document.documentElement.clientWidth, bad = [];
  const clipper = (el) => {  // the nearest ancestor that clips sideways, and whether it scrolls
    for (let e = el; e && e !== document.documentElement; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o !== 'visible') return {el: e, scrolls: o === 'auto' || o === 'scroll'};
    }
    return null;
  };
  for (const t of texts(document.querySelector('main') || document.body)) {
    const right = Math.max(...t.rects.map(r => r.right));
    const c = clipper(t.el);
    if (c && c.scrolls) continue;  // it scrolls into view
    const edge = c ? Math.min(width, c.el.getBoundingClientRect().right) : width;
    if (right > edge + 1) bad.push({where: where(t.el), text: t.node.textContent.trim().slice(0, 40), over: Math.round(right - edge)});
  }
  return {page: document.documentElement.scrollWidth - width, text: bad.slice(0, 8), count: bad.length};
})()""")

#: WCAG contrast of each visible text node's colour against the background it sits on (backgrounds composed up
#: the tree, over the page's); the worst and every one below the floor.
_CONTRAST = _js(r"""((floor) => {
  const rgba = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, below) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a)).concat([1]); };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255, 1];
    for (const c of layers.reverse()) bg = over(c, bg);
    return bg;
  };
  let worst = {ratio: 99, where: null}, bad = [], n = 0;
  for (const t of texts(document.body)) {
    const s = getComputedStyle(t.el);
    const fg0 = rgba(s.color); if (!fg0) continue;
    const bg = background(t.el), fg = over(fg0, bg);
    const a = lum(fg), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    n++;
    const found = {ratio: Math.round(ratio * 100) / 100, where: where(t.el), text: t.node.textContent.trim().slice(0, 30),
                   color: s.color, background: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'};
    if (ratio < worst.ratio) worst = found;
    if (ratio < floor) bad.push(found);
  }
  return {worst: worst, bad: bad.slice(0, 8), count: bad.length, checked: n};
})(%s)""" % MIN_CONTRAST)


def _page_checks(browser: Tab, base: str, page: str) -> dict:
    """Open ``page`` at both widths and in both modes; what each check found."""
    found: dict = {}
    _open(browser, base + page, DESKTOP)
    _theme(browser, "light")
    found["figures"] = browser.eval(_FIGURES)
    found["fonts", DESKTOP] = browser.eval(_FONTS)
    found["overflow", DESKTOP] = browser.eval(_OVERFLOW)
    found["contrast", "light"] = browser.eval(_CONTRAST)
    _theme(browser, "dark")
    found["contrast", "dark"] = browser.eval(_CONTRAST)
    _theme(browser, "light")
    _viewport(browser, PHONE)
    browser.eval(_SETTLE)
    found["fonts", PHONE] = browser.eval(_FONTS)
    found["overflow", PHONE] = browser.eval(_OVERFLOW)
    _theme(browser, "dark")
    found["contrast", "dark", PHONE] = browser.eval(_CONTRAST)
    browser.send("Emulation.clearDeviceMetricsOverride")
    return found


#: What each page measured, for the summary at the end of the module.
MEASURED: dict[str, dict] = {}


@pytest.mark.parametrize("page", PAGES)
def test_page_reads_on_desktop_and_phone_in_both_modes(tab: tuple[Tab, str], page: str) -> None:
    browser, base = tab
    found = MEASURED[page] = _page_checks(browser, base, page)
    problems = []
    figures = found["figures"]
    for fig in figures["figures"]:
        if fig["caption"] is None:
            problems.append(f"figure without a caption: {fig['cls']} {fig['id']}")
        for alt in fig["alts"] if not fig["explorer"] else []:
            if not alt or not alt.strip() or PATH_LIKE.search(alt.strip()):
                problems.append(f"figure {fig['id'] or fig['caption'][:40]!r}: alt text {alt!r}")
        if fig["caption"] and re.match(r"Figures? 8-\d+", fig["caption"]) and not fig["id"].startswith("figure-8-"):
            problems.append(f"numbered figure without its id: {fig['caption'][:40]!r}")
    if figures["loose"]:
        problems.append(f"figures outside a <figure>: {figures['loose'][:3]}")
    ids = [f["id"] for f in figures["figures"] if f["id"]]
    if len(ids) != len(set(ids)):
        problems.append(f"figure ids repeat: {sorted(ids)}")
    for width in (DESKTOP, PHONE):
        fonts = found["fonts", width]
        for kind in ("page", "figure"):
            if fonts[kind]["px"] < MIN_TEXT_PX - 0.05:
                problems.append(f"{width} px: smallest {kind} text {fonts[kind]}")
        overflow = found["overflow", width]
        if overflow["page"] > 0 or overflow["count"]:
            problems.append(f"{width} px: text past the edge: page {overflow['page']} px wider, {overflow['text']}")
    for key in (("contrast", "light"), ("contrast", "dark"), ("contrast", "dark", PHONE)):
        if found[key]["count"]:
            problems.append(f"{'/'.join(map(str, key[1:]))}: {found[key]['count']} texts below {MIN_CONTRAST}:1, "
                            f"e.g. {found[key]['bad'][:4]}")
    assert not problems, f"{page}:\n" + "\n".join(problems)


def test_summary_of_the_measurements() -> None:
    """The numbers over every page measured above (printed with -s; fails only if nothing was measured)."""
    if not MEASURED:
        pytest.skip("no page measured in this run")
    lines = []
    for width in (DESKTOP, PHONE):
        for kind in ("page", "figure"):
            px = [(m["fonts", width][kind]["px"], p) for p, m in MEASURED.items() if m["fonts", width][kind]["where"]]
            if px:
                lines.append(f"smallest {kind} text at {width} px: {min(px)[0]:.2f} px ({min(px)[1]})")
    for key in (("contrast", "light"), ("contrast", "dark"), ("contrast", "dark", PHONE)):
        worst = min((m[key]["worst"]["ratio"], p) for p, m in MEASURED.items())
        lines.append(f"worst contrast {'/'.join(map(str, key[1:]))}: {worst[0]}:1 ({worst[1]})")
    print("\n" + "\n".join(lines))


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
    for name, width, mode in (("desktop", DESKTOP, "light"), ("phone", PHONE, "light"), ("dark", DESKTOP, "dark")):
        _open(browser, base + page, width)
        _theme(browser, mode)
        height = min(16000, int(browser.eval("document.documentElement.scrollHeight")))
        browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=width < 700)
        browser.eval(_SETTLE)
        data = browser.send("Page.captureScreenshot", format="png")["data"]
        shot = SHOTS / f"{stem}-{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        shot.write_bytes(base64.b64decode(data))
        assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000
    browser.send("Emulation.clearDeviceMetricsOverride")
