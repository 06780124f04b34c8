"""A built page read as a reader would, in headless Chromium: on a desktop (1400 px) and a phone (390 px), in light
and dark mode. Used by ``test_browser.py`` on each page it opens.

``read_page`` measures the open page: each static figure is an HTML ``<figure>`` with a ``<figcaption>`` and an alt
text (``aria-label`` or ``alt``); the smallest rendered text, in figures and in the page (a text run's size is its
base size: a mathtext exponent or index is smaller, as it is in the page's own math); text that runs past the
page's right edge or is cut off (what is wider than the column scrolls: a figure or an equation); the contrast of
text against its background. ``problems`` says what of that falls short:

- at 1400 px in light mode: figures, fonts, overflow and contrast; in dark mode: contrast;
- at 390 px in dark mode (where the figures sit on their light panels): fonts, overflow and contrast.

Each measurement walks the page's text once; computed styles, visibility and backgrounds are looked up once per
element and measurement (the walk per text node up its ancestors took 30 of the 74 s these checks took here).
"""

from __future__ import annotations

import re

from _cdp import Tab

DESKTOP, PHONE = 1400, 390
MIN_TEXT_PX = 11.0
MIN_CONTRAST = 4.5
#: An alt text that is a file name or path, not a description.
PATH_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|svg|jpe?g|gif|webp)$|^(\.\./|_images/|data:)", re.I)


def viewport(browser: Tab, width: int, height: int = 900) -> None:
    browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                 mobile=width < 700)


def theme(browser: Tab, mode: str) -> None:
    """Light or dark as the theme's switch sets it (pydata-sphinx-theme: ``html[data-theme]``)."""
    browser.eval(f"document.documentElement.dataset.theme = '{mode}'; document.documentElement.dataset.mode = '{mode}';"
                 "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


#: Colours measured as they end, not mid-transition; MathJax, fonts and two frames awaited.
SETTLE = """(async () => {
  if (!document.getElementById('inferlab-test-still')) {
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

FIGURES = r"""(() => {
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
})()"""

#: What ``read_page`` measures in one state of the page: the smallest text (in the page: each visible text node's
#: computed size; in the static figures: an SVG's text at the scale the SVG is drawn, a PNG's smallest text as
#: written at build time, scaled as the image is), text past the right edge, and WCAG contrast of each visible text
#: node's colour against the background it sits on (backgrounds composed up the tree, over white).
_MEASURE = r"""((want, floor) => {
  const styles = new Map(), shown = new Map(), clips = new Map(), backs = new Map();
  const style = (el) => { let s = styles.get(el); if (!s) { s = getComputedStyle(el); styles.set(el, s); } return s; };
  const visible = (el) => {
    if (!el || el.nodeType !== 1) return true;
    if (shown.has(el)) return shown.get(el);
    const s = style(el);
    const v = !(s.display === 'none' || s.visibility === 'hidden' || s.visibility === 'collapse'
                || Number(s.opacity) === 0 || el.hidden) && visible(el.parentElement);
    shown.set(el, v);
    return v;
  };
  const onPage = (r) => r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > -1e5;
  const where = (el) => {
    const parts = [];
    for (let e = el; e && e !== document.body && parts.length < 3; e = e.parentElement) {
      parts.unshift(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].slice(0, 2).join('.') : ''));
    }
    return parts.join(' > ');
  };
  const texts = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (!el || el.closest('script, style, noscript, template, title, svg.inferlab-figure-svg, .visually-hidden, .sr-only, mjx-assistive-mml')) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(onPage);
    if (!rects.length || !visible(el)) continue;
    texts.push({node: n, el: el, rects: rects});
  }
  const main = document.querySelector('main') || document.body;
  const out = {};

  if (want.includes('fonts')) {
    let page = {px: 1e9, where: null, text: null}, figure = {px: 1e9, where: null, text: null};
    for (const t of texts) {
      const px = parseFloat(style(t.el).fontSize);
      if (px < page.px) page = {px: px, where: where(t.el), text: t.node.textContent.trim().slice(0, 40)};
    }
    for (const svg of main.querySelectorAll('svg.inferlab-figure-svg')) {
      const box = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
      if (!box.width || !vb || !vb.width) continue;
      const scale = box.width / vb.width;
      for (const text of svg.querySelectorAll('text')) {
        if (!text.textContent.trim() || style(text).display === 'none') continue;
        const runs = [text, ...text.querySelectorAll('tspan')].filter(e => e.textContent.trim());
        const px = Math.max(...runs.map(e => parseFloat(style(e).fontSize))) * scale;
        if (px < figure.px) figure = {px: px, where: where(svg.closest('figure')), text: text.textContent.trim().slice(0, 40)};
      }
    }
    for (const img of main.querySelectorAll('figure.inferlab-figure img')) {
      const fig = img.closest('figure'), natural = Number(img.getAttribute('width'));
      const px = Number(fig.dataset.minTextPx) * img.getBoundingClientRect().width / natural;
      if (px < figure.px) figure = {px: px, where: where(fig), text: '(PNG)'};
    }
    out.fonts = {page: page, figure: figure};
  }

  if (want.includes('overflow')) {
    const width = document.documentElement.clientWidth, bad = [];
    const clipper = (el) => {  // the nearest ancestor that clips sideways, and whether it scrolls
      if (!el || el === document.documentElement) return null;
      if (clips.has(el)) return clips.get(el);
      const o = style(el).overflowX;
      const c = o !== 'visible' ? {el: el, scrolls: o === 'auto' || o === 'scroll'} : clipper(el.parentElement);
      clips.set(el, c);
      return c;
    };
    for (const t of texts) {
      if (!main.contains(t.node)) continue;
      const c = clipper(t.el);
      if (c && c.scrolls) continue;  // it scrolls into view
      const right = Math.max(...t.rects.map(r => r.right));
      const edge = c ? Math.min(width, c.el.getBoundingClientRect().right) : width;
      if (right > edge + 1) bad.push({where: where(t.el), text: t.node.textContent.trim().slice(0, 40), over: Math.round(right - edge)});
    }
    out.overflow = {page: document.documentElement.scrollWidth - width, text: bad.slice(0, 8), count: bad.length};
  }

  if (want.includes('contrast')) {
    const rgba = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null;
      const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
    const over = (top, below) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a)).concat([1]); };
    const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
      return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
    const background = (el) => {  // el's background composed over its ancestors', down from the nearest opaque one
      if (!el) return [255, 255, 255, 1];
      if (backs.has(el)) return backs.get(el);
      const c = rgba(style(el).backgroundColor);
      const bg = c && c[3] >= 1 ? c : c && c[3] > 0 ? over(c, background(el.parentElement)) : background(el.parentElement);
      backs.set(el, bg);
      return bg;
    };
    let worst = {ratio: 99, where: null}, bad = [], n = 0;
    for (const t of texts) {
      const s = style(t.el);
      const fg0 = rgba(s.color); if (!fg0) continue;
      const bg = background(t.el), fg = over(fg0, bg);
      const a = lum(fg), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      n++;
      if (ratio >= floor && ratio >= worst.ratio) continue;
      const found = {ratio: Math.round(ratio * 100) / 100, where: where(t.el), text: t.node.textContent.trim().slice(0, 30),
                     color: s.color, background: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'};
      if (ratio < worst.ratio) worst = found;
      if (ratio < floor) bad.push(found);
    }
    out.contrast = {worst: worst, bad: bad.slice(0, 8), count: bad.length, checked: n};
  }
  return out;
})"""


def measure(browser: Tab, *what: str) -> dict:
    """``what`` of ``fonts``, ``overflow``, ``contrast``, measured on the page as it is now."""
    return browser.eval(f"{_MEASURE}({list(what)!r}, {MIN_CONTRAST})")


def read_page(browser: Tab) -> dict:
    """Measure the open page (at 1400 px, light) in the three states; it is left at 1400 px in light mode."""
    browser.eval(SETTLE)
    found: dict = {"figures": browser.eval(FIGURES)}
    desktop = measure(browser, "fonts", "overflow", "contrast")
    found["fonts", DESKTOP], found["overflow", DESKTOP] = desktop["fonts"], desktop["overflow"]
    found["contrast", "light"] = desktop["contrast"]
    theme(browser, "dark")
    found["contrast", "dark"] = measure(browser, "contrast")["contrast"]
    viewport(browser, PHONE)
    browser.eval(SETTLE)
    phone = measure(browser, "fonts", "overflow", "contrast")
    found["fonts", PHONE], found["overflow", PHONE] = phone["fonts"], phone["overflow"]
    found["contrast", "dark", PHONE] = phone["contrast"]
    theme(browser, "light")
    viewport(browser, DESKTOP)
    return found


def problems(found: dict) -> list[str]:
    """What of ``read_page``'s measurements falls short of the floors above."""
    out = []
    figures = found["figures"]
    for fig in figures["figures"]:
        if fig["caption"] is None:
            out.append(f"figure without a caption: {fig['cls']} {fig['id']}")
        for alt in fig["alts"] if not fig["explorer"] else []:
            if not alt or not alt.strip() or PATH_LIKE.search(alt.strip()):
                out.append(f"figure {fig['id'] or (fig['caption'] or '')[:40]!r}: alt text {alt!r}")
        if fig["caption"] and re.match(r"Figures? 8-\d+", fig["caption"]) and not fig["id"].startswith("figure-8-"):
            out.append(f"numbered figure without its id: {fig['caption'][:40]!r}")
    if figures["loose"]:
        out.append(f"figures outside a <figure>: {figures['loose'][:3]}")
    ids = [f["id"] for f in figures["figures"] if f["id"]]
    if len(ids) != len(set(ids)):
        out.append(f"figure ids repeat: {sorted(ids)}")
    for width in (DESKTOP, PHONE):
        fonts = found["fonts", width]
        for kind in ("page", "figure"):
            if fonts[kind]["px"] < MIN_TEXT_PX - 0.05:
                out.append(f"{width} px: smallest {kind} text {fonts[kind]}")
        overflow = found["overflow", width]
        if overflow["page"] > 0 or overflow["count"]:
            out.append(f"{width} px: text past the edge: page {overflow['page']} px wider, {overflow['text']}")
    for key in (("contrast", "light"), ("contrast", "dark"), ("contrast", "dark", PHONE)):
        if found[key]["count"]:
            out.append(f"{'/'.join(map(str, key[1:]))}: {found[key]['count']} texts below {MIN_CONTRAST}:1, "
                       f"e.g. {found[key]['bad'][:4]}")
    return out
