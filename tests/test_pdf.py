"""The book as one PDF (``make pdf``, ``inferlab.book.pdf``): every page of ``_toc.yml`` in order, an outline of
its parts, pages and exercises, captions and the glossary's Chinese terms as text, links that stay inside it.

The PDF checks (marked ``book``) read ``_build/pdf/inferlab-book.pdf``, which ``make pdf-check`` prints from the
site just built before it runs them (in ``make test``'s book chain, before the browser test); they open it with
pypdf and extract text from a few pages only (about 5 s). The table-of-contents reader is checked without a book.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from inferlab.book import pdf

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("INFERLAB_SITE", ROOT / "_build" / "html"))
PDF = SITE.parent / "pdf" / pdf.PDF_NAME
CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _toc_files() -> list[tuple[str | None, str]]:
    """(part caption or None for the root, docname) of every page of _toc.yml, in order, read with PyYAML."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out = [(None, toc["root"])]

    def walk(caption: str, items: list[dict]) -> None:
        for item in items:
            out.append((caption, str(item["file"]).removesuffix(".md").removesuffix(".ipynb")))
            walk(caption, item.get("sections", []))

    for part in toc.get("parts", []):
        walk(part["caption"], part.get("chapters", []))
    return out


class _Page(HTMLParser):
    """A built page's <title> (without the book's title), its text, and its explorers."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title, self.text, self.explorers = "", [], 0
        self._where: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._where.append(tag)
        if tag == "figure" and "inferlab-explorer" in (dict(attrs).get("class") or "").split():
            self.explorers += 1

    def handle_endtag(self, tag: str) -> None:
        while self._where and self._where.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._where[-1:] == ["title"]:
            self.title += data
        elif not {"script", "style"} & set(self._where):
            self.text.append(data)


def _page(docname: str) -> _Page:
    page = _Page()
    page.feed((SITE / f"{docname}.html").read_text(encoding="utf-8"))
    page.title = page.title.rsplit(" \u2014 ", 1)[0].strip()
    return page


def _text(reader, first: int, last: int) -> str:
    """The text of pages ``first``..``last - 1``: ligatures unfolded (NFKC), lines joined."""
    raw = "\n".join(reader.pages[i].extract_text() for i in range(first, last))
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", raw).replace("-\n", "-"))


@pytest.fixture(scope="module")
def book():
    """The PDF's reader, its outline as [(depth, title, first page)], and where each page of the book starts."""
    from pypdf import PdfReader

    if not PDF.is_file():
        pytest.fail(f"no PDF at {PDF}: run `make pdf` (or `make pdf-check`)")
    reader = PdfReader(PDF)
    outline: list[tuple[int, str, int]] = []

    def walk(items, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                outline.append((depth, item.title, reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return reader, outline


def _starts(book) -> list[int]:
    """The first PDF page of each page of the book (from the outline), and the PDF's length."""
    reader, outline = book
    titles = {_page(d).title for _, d in _toc_files()}
    return sorted({page for depth, title, page in outline if depth <= 1 and title in titles} | {len(reader.pages)})


def _page_range(book, docname: str) -> tuple[int, int]:
    """The PDF pages [first, last) of a page of the book."""
    _, outline = book
    title = _page(docname).title
    first = next(page for depth, t, page in outline if depth <= 1 and t == title)
    return first, next(s for s in _starts(book) if s > first)


@pytest.mark.book
def test_the_page_count_is_sane(book) -> None:
    reader, _ = book
    pages = len(_toc_files())
    assert pages <= len(reader.pages) <= 25 * pages and 100 <= len(reader.pages) <= 1500, len(reader.pages)


@pytest.mark.book
def test_the_outline_holds_every_part_and_page_of_the_toc_in_order(book) -> None:
    _, outline = book
    top = [(title, page) for depth, title, page in outline if depth == 0]
    second = [(title, page) for depth, title, page in outline if depth == 1]
    files = _toc_files()
    assert top[0] == (_page(files[0][1]).title, 0), "the landing page opens the book"
    captions = list(dict.fromkeys(c for c, _ in files if c))
    assert [t for t, _ in top[1:]] == captions, "one top-level entry per part of _toc.yml"
    titles = [_page(d).title for c, d in files if c]
    assert [t for t, _ in second if t in titles] == titles, "every section page and exercise, in order"
    starts = [page for title, page in second if title in titles]
    assert starts == sorted(starts) and len(set(starts)) == len(starts), "pages in the order of _toc.yml"
    assert any(t.startswith("Exercise 8-") for t in titles) and "Glossary" in titles


@pytest.mark.book
def test_figure_captions_and_explorer_lines_are_text(book) -> None:
    reader, _ = book
    chosen = next((d for _, d in _toc_files()[1:] if _page(d).explorers
                   and "Figure 8-" in "".join(_page(d).text)), None)
    assert chosen is not None, "no page with an explorer and a numbered figure"
    text = _text(reader, *_page_range(book, chosen))
    assert re.search(r"Figure 8-\d+", text), "a numbered figure's caption or reference as text"
    assert "Every knob moves over values drawn by the book's library" in text, "the explorer's caption as text"
    line = f"Interactive in the HTML book and in the notebook {chosen}.ipynb"
    assert text.count(line) == _page(chosen).explorers, "one print line per explorer, naming its notebook"


@pytest.mark.book
def test_a_check_cell_prints_as_one_line_that_says_how_long_it_is(book) -> None:
    import nbformat

    docname = "chapters/8-2-1-weight-reuse"
    cells = [c for c in nbformat.read(ROOT / f"{docname}.ipynb", as_version=4).cells
             if "hide-input" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "8.2.1 has one check cell"
    code = cells[0].source.rstrip().splitlines()
    reader, _ = book
    text = _text(reader, *_page_range(book, docname))
    note = pdf.CHECK_CELL_NOTE.replace("{lines}", str(len(code)))
    assert text.count(note) == 1, "the check cell's line, with its length"
    assert code[0].lstrip("# ")[:40] not in text, "the check cell's code is left out"


@pytest.mark.book
def test_the_glossarys_chinese_terms_are_text(book) -> None:
    reader, _ = book
    wanted = set(CJK.findall(unicodedata.normalize("NFKC", "".join(_page("glossary").text))))
    assert wanted, "the glossary shows no Chinese term"
    found = set(CJK.findall(_text(reader, *_page_range(book, "glossary"))))
    assert wanted <= found, f"Chinese characters not extractable: {''.join(sorted(wanted - found))}"


@pytest.mark.book
def test_links_between_pages_stay_inside_the_pdf(book) -> None:
    reader, _ = book
    names = reader.named_destinations
    starts = _starts(book)
    local, broken = [], []
    for number, page in enumerate(reader.pages):
        for annot in page.get("/Annots") or []:
            annot = annot.get_object()
            action = annot.get("/A")
            uri = str(action.get_object().get("/URI", "")) if action is not None else ""
            if re.match(r"https?://(127\.0\.0\.1|localhost)[:/]", uri):
                local.append(uri)
            if "/Dest" in annot and not isinstance(annot["/Dest"], list):  # a named destination: same page
                name = str(annot["/Dest"])
                end = next(s for s in starts if s > number)
                start = max(s for s in starts if s <= number)
                if name not in names or not start <= reader.get_destination_page_number(names[name]) < end:
                    broken.append((number, name))
    assert local == [], "links to the server the pages were printed from"
    assert broken == [], "in-page links that land outside their page"


@pytest.mark.book
def test_the_site_carries_the_pdf_for_the_landing_pages_link() -> None:
    copy = SITE / pdf.PDF_NAME
    assert copy.is_file(), f"{copy} missing: make pdf copies it"
    assert hashlib.sha256(copy.read_bytes()).digest() == hashlib.sha256(PDF.read_bytes()).digest()


def test_the_toc_reader_follows_the_books_toc_in_order() -> None:
    entries = pdf.read_toc(ROOT / "_toc.yml")
    read = [(None, entries[0].docname)] + [(part.title, page.docname) for part in entries[1:]
                                           for page in part.pages()]
    assert read == _toc_files()


def test_the_toc_reader_nests_sections_and_refuses_what_it_cannot_print(tmp_path: Path) -> None:
    toc = tmp_path / "_toc.yml"
    toc.write_text('format: jb-book\nroot: index  # the landing page\nparts:\n  - caption: "A: first # part"\n'
                   "    chapters:\n      - file: a.md\n        sections:\n          - file: a/b\n"
                   "      - file: 'c'\n  - caption: Second\n    chapters:\n      - file: d.ipynb\n")
    root, first, second = pdf.read_toc(toc)
    assert root.docname == "index" and first.title == "A: first # part" and second.title == "Second"
    assert [(e.docname, [c.docname for c in e.children]) for e in first.children] == [("a", ["a/b"]), ("c", [])]
    assert [p.docname for p in second.pages()] == ["d"]
    toc.write_text("format: jb-book\nroot: index\nparts:\n  - caption: X\n    chapters:\n      - glob: ch/*\n")
    with pytest.raises(ValueError, match="glob"):
        pdf.read_toc(toc)
    toc.write_text("format: jb-article\nroot: index\n")
    with pytest.raises(ValueError, match="jb-book"):
        pdf.read_toc(toc)
