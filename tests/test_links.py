"""Every internal link, image, script and stylesheet of the built site resolves (anchors included), and every
chapter's "Try it live" link reaches its JupyterLite copy. Read from the HTML files, no browser: it runs beside the
PDF's checks, after the PDF is in the site (the landing page links to it).

The site is ``_build/html`` or ``$INFERLAB_SITE``, as for ``test_browser.py``.
"""

from __future__ import annotations

import functools
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from test_browser import PAGES, ROOT, SITE

pytestmark = pytest.mark.book


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
