"""The book's explorers beyond what ``test_browser.py`` does on each page (every knob moved, every "Try it" carried
out): they work from file:// too, the "Try it" table names explorers and knobs that exist, and no page outweighs
1 MB (an explorer's states are separate files under _static/explorers).

Runs after the book build (``make test`` builds it first); the site is ``_build/html`` or ``$INFERLAB_SITE``.
``benchmarks/explorers_bench.py`` reports the knobs' latencies per explorer (``make bench``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _cdp import Chromium
from _explorer_checks import EXPLORER, TRY_ITS, sweep
from test_browser import SITE, pages

pytestmark = pytest.mark.book

#: The most HTML one page may weigh (its explorers' data are separate files under _static/explorers).
MAX_PAGE_BYTES = 1_000_000


def explorer_pages() -> list[str]:
    """The built pages that show at least one explorer, relative to the site."""
    if not SITE.is_dir():
        return ["<no site>"]
    return sorted(str(p.relative_to(SITE)) for p in (SITE / "chapters").glob("*.html")
                  if EXPLORER.search(p.read_text(encoding="utf-8")))


PAGES = explorer_pages()


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    if not SITE.is_dir():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    chromium = Chromium()
    try:
        yield chromium
    finally:
        chromium.close()


def test_explorers_work_from_file_urls(browser: Chromium) -> None:
    """Opened from the disk (file://), the data files load by <script src> as they do when served."""
    page = next(p for p in PAGES if "8-2-1" in p)
    tab = browser.page()
    tab.goto((SITE / page).resolve().as_uri())
    rows = sweep(tab)
    assert rows and all(r["changed"] for r in rows), rows
    assert tab.errors() == []


@pytest.mark.parametrize("page", PAGES)
def test_pages_weigh_at_most_a_megabyte(page: str) -> None:
    size = (SITE / page).stat().st_size
    assert size <= MAX_PAGE_BYTES, f"{page}: {size:,} bytes of HTML"


def test_the_try_it_table_names_explorers_that_exist() -> None:
    import inferlab.book.plot

    factories = inferlab.book.plot.explorer_factories()
    built = set(pages())
    for task in TRY_ITS:
        assert task.key in factories, task
        assert task.page in built, task
        knob_names = set(factories[task.key]().controls)
        assert set(task.settings) <= knob_names, task
