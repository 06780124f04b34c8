"""What the built site ships: no large file that nothing loads, one search field, no format field left unfilled in
its text, and fallback webfonts that hold exactly the characters the pages use beyond Latin
(``inferlab.book.sphinx_offline``).

Needs the built book (``make pdf-check`` runs it after the build, in ``make test``'s book chain); the site is
``_build/html`` or ``$INFERLAB_SITE``. The font check in Chromium takes about 3 s, the rest under 2 s.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from inferlab.book import sphinx_offline

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("INFERLAB_SITE", ROOT / "_build" / "html"))
LARGE = 100_000  # bytes
TEXT_SUFFIXES = (".css", ".js", ".json", ".html", ".txt", ".svg")


class _Page(sphinx_offline.PageText):
    """What a page loads and shows (the extension's own reading), and how many search fields it has."""

    def __init__(self) -> None:
        super().__init__()
        self.search_fields = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        if "search-button-field" in (dict(attrs).get("class") or "").split():
            self.search_fields += 1


def _pages(site: Path) -> dict[Path, _Page]:
    out = {}
    for path in sphinx_offline.built_pages(site):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        out[path] = page
    return out


def unreferenced(site: Path, large: int = LARGE) -> list[str]:
    """Files over ``large`` bytes under ``site/_static`` that no page loads and no other shipped text file names:
    by file name (a stylesheet's fonts, a script's source map), by path without suffix (a MathJax component such
    as ``a11y/sre``, which MathJax's loader fetches by that name), or by quoted stem in a file that also names the
    folder (MathJax's speech rules, ``"en"`` from ``mathmaps``)."""
    static = site / "_static"
    loads = set()
    for path, page in _pages(site).items():
        for ref in page.loads:
            ref = ref.split("?", 1)[0].split("#", 1)[0]
            if ref and "://" not in ref and not ref.startswith("data:"):
                loads.add((path.parent / ref).resolve())
    texts = {p: p.read_text(encoding="utf-8", errors="ignore") for p in site.rglob("*")
             if p.is_file() and p.suffix in TEXT_SUFFIXES and "lite" not in p.relative_to(site).parts[:1]}
    found = []
    for big in sorted(p for p in static.rglob("*") if p.is_file() and p.stat().st_size > large):
        if big.resolve() in loads:
            continue
        rel = big.relative_to(static)
        names = {big.name, rel.as_posix(), rel.with_suffix("").as_posix()}
        if rel.parts[0] == "mathjax":
            names.add(rel.relative_to("mathjax").with_suffix("").as_posix())
        if any(other != big and (any(n in text for n in names)
                                 or (f'"{big.stem}"' in text and big.parent.name in text))
               for other, text in texts.items()):
            continue
        found.append(f"{rel} ({big.stat().st_size:,} bytes)")
    return found


def _need_site() -> None:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site at {SITE}: run `make book` first")


def test_every_large_static_file_is_loaded_by_a_page_or_a_shipped_file() -> None:
    _need_site()
    assert unreferenced(SITE) == [], "large files in _static that nothing loads: stop shipping them"


def test_the_check_finds_an_unused_large_file(tmp_path: Path) -> None:
    (tmp_path / "_static" / "fonts").mkdir(parents=True)
    (tmp_path / "index.html").write_text('<link rel="stylesheet" href="_static/a.css"><script src="_static/b.js">'
                                         "</script>", encoding="utf-8")
    (tmp_path / "_static" / "a.css").write_text("@font-face {src: url(fonts/used.woff2)}", encoding="utf-8")
    (tmp_path / "_static" / "b.js").write_text("x" * 200, encoding="utf-8")
    for name in ("fonts/used.woff2", "fonts/unused.woff2", "embed-amd.js"):
        (tmp_path / "_static" / name).write_bytes(b"\0" * 150)
    assert unreferenced(tmp_path, large=100) == ["embed-amd.js (150 bytes)", "fonts/unused.woff2 (150 bytes)"]


def test_the_widget_manager_ships_only_with_a_page_that_shows_a_widget() -> None:
    _need_site()
    widgets = any("application/vnd.jupyter.widget-view+json" in p.read_text(encoding="utf-8")
                  for p in sphinx_offline.built_pages(SITE))
    shipped = [name for name in sphinx_offline.WIDGET_MANAGER if (SITE / "_static" / name).exists()]
    assert shipped == (list(sphinx_offline.WIDGET_MANAGER) if widgets else []), shipped


def test_each_page_has_one_search_field() -> None:
    _need_site()
    counts = {str(p.relative_to(SITE)): page.search_fields for p, page in _pages(SITE).items()}
    assert {page: n for page, n in counts.items() if n != 1} == {}


def _wanted(ranges) -> set[int]:
    text = "".join("".join(page.text) for page in _pages(SITE).values())
    return {ord(c) for c in text if any(lo <= ord(c) <= hi for lo, hi in ranges)}


@pytest.mark.parametrize("name, pattern, package, ranges", sphinx_offline.FALLBACK_FONTS,
                         ids=[f[0] for f in sphinx_offline.FALLBACK_FONTS])
def test_each_fallback_font_holds_exactly_the_pages_characters_in_its_ranges(name, pattern, package, ranges) -> None:
    from fontTools.ttLib import TTFont

    _need_site()
    wanted, path = _wanted(ranges), SITE / "_static" / name
    if not wanted:
        assert not path.exists(), f"{name} ships though no page uses its ranges"
        return
    assert path.is_file(), f"{name} missing: the pages use {len(wanted)} characters of its ranges"
    held = set(TTFont(path).getBestCmap() or {})
    assert held <= wanted, f"{name} holds characters no page uses: {sorted(held - wanted)[:10]}"
    source = sphinx_offline._font_source(pattern)
    if source is not None:  # where the source font is installed: every character it has is in the subset
        assert held == wanted & sphinx_offline._font_chars(*source)
    assert path.stat().st_size < 150_000, f"{name}: {path.stat().st_size:,} bytes"


def test_the_glossarys_chinese_terms_are_in_the_cjk_font() -> None:
    from fontTools.ttLib import TTFont

    _need_site()
    glossary = _Page()
    glossary.feed((SITE / "glossary.html").read_text(encoding="utf-8"))
    chinese = {ord(c) for c in re.findall(r"[\u4e00-\u9fff]", "".join(glossary.text))}
    assert chinese and chinese <= set(TTFont(SITE / "_static" / "inferlab-cjk.woff2").getBestCmap())


def test_the_stylesheet_declares_the_fallback_fonts_with_their_ranges() -> None:
    css = (sphinx_offline.HERE / "static" / "inferlab-frames.css").read_text(encoding="utf-8")
    faces = {m["file"]: m["ranges"] for m in re.finditer(
        r'@font-face\s*{[^}]*url\("(?P<file>[^"]+)"\)[^}]*unicode-range:\s*(?P<ranges>[^;]+);', css)}
    for name, _, _, ranges in sphinx_offline.FALLBACK_FONTS:
        declared = [tuple(int(x, 16) for x in r.strip().removeprefix("U+").split("-")) for r in faces[name].split(",")]
        assert declared == list(ranges), name
    assert re.search(r'--pst-font-family-base:[^;]*"Inferlab Fallback"', css)


def test_the_glossary_draws_its_chinese_terms_with_the_shipped_font() -> None:
    from _cdp import Chromium, serve

    _need_site()
    browser = Chromium()
    try:
        with serve(SITE) as base:
            tab = browser.page()
            tab.goto(base + "glossary.html")
            faces = tab.eval("""(async () => {
              await document.fonts.ready;
              return [...document.fonts].filter(f => f.family.includes('Inferlab'))
                  .map(f => [f.unicodeRange.toUpperCase().includes('2E80') ? 'cjk' : 'other',
                             f.status]);
            })()""")
            assert ["cjk", "loaded"] in faces, faces
            assert tab.errors() == []
    finally:
        browser.close()


class _Prose(sphinx_offline.PageText):
    """A page's prose and figure captions, alt and aria texts: code, math and drawings left out."""

    SKIP = ("pre", "code", "svg", "math", "mjx-container")

    def __init__(self) -> None:
        super().__init__()
        self._skipped: str | None = None  # the tag whose content is left out, while inside it
        self._nested = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        a = dict(attrs)
        if self._skipped is None and (tag in self.SKIP or "math" in (a.get("class") or "").split()):
            self._skipped, self._nested = tag, 1
        elif tag == self._skipped:
            self._nested += 1
        elif self._skipped is None:
            self.text += [a[k] or "" for k in ("alt", "aria-label", "title") if k in a]

    def handle_endtag(self, tag: str) -> None:
        super().handle_endtag(tag)
        if tag == self._skipped:
            self._nested -= 1
            if not self._nested:
                self._skipped = None

    def handle_data(self, data: str) -> None:
        if self._skipped is None:
            super().handle_data(data)


#: A Python format field left in text: ``{name}``, ``{obj.attr[0]}``, ``{x:.1f}`` (an f-string that lost its ``f``).
FORMAT_FIELD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_]\w*|\[[^\]{}]*\])*(?:![rsa])?(?::[^{}\s]*)?\}")


def test_no_page_shows_an_unfilled_format_field() -> None:
    """Captions, prose, alt and aria texts are filled in: a caption once showed ``Besides {turns.index[0]}``."""
    found = {}
    for path in sphinx_offline.built_pages(SITE):
        page = _Prose()
        page.feed(path.read_text(encoding="utf-8"))
        text = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$", " ", " ".join(page.text), flags=re.S)
        hits = FORMAT_FIELD.findall(text)
        if hits:
            found[str(path.relative_to(SITE))] = hits[:5]
    assert not found, f"format fields left in the pages' text: {found}"
