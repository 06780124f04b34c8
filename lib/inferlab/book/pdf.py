"""The whole book as one PDF: every built page printed by headless Chromium, in the order of ``_toc.yml``.

``python -m inferlab.book.pdf`` (``make pdf``) serves ``_build/html`` on 127.0.0.1, opens each page of the table
of contents in the Debian ``chromium`` (driven over the DevTools protocol on a pipe, standard library only),
waits for MathJax, fonts and images, opens folded answers and toggles (the book's toggles open for print), and
prints it with ``Page.printToPDF``. pypdf merges the pages into ``_build/pdf/inferlab-book.pdf`` with

- an outline (bookmarks): the landing page, every part of ``_toc.yml`` with its pages, and each page's headings;
- links between pages turned into jumps inside the PDF (links into the site's files, which a PDF cannot reach,
  are dropped; links to the web stay);
- page numbers, stamped once the pages are merged (Chromium numbers each printed page from 1).

The explorers print as their default picture with the line the print CSS adds (``static/inferlab-frames.css``), and
each page's check cell as one line that says how long it is and where it runs (``CHECK_CELL_NOTE``); the text
(captions, the glossary's Chinese terms in the book's fallback font) stays text. A copy goes into the site
(``_build/html/inferlab-book.pdf``), so the landing page's link works offline.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import io
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["PDF_NAME", "Entry", "build_pdf", "read_toc", "serve_folder"]

PDF_NAME = "inferlab-book.pdf"
#: A4, margins in inches; the bottom one leaves room for the page number stamped after merging.
PAPER = {"paperWidth": 8.27, "paperHeight": 11.69, "marginTop": 0.55, "marginBottom": 0.7,
         "marginLeft": 0.6, "marginRight": 0.6}
#: Headless Chromium with nothing of its own on the network (the browser tests start it with these too).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,900"]
#: Only in the book's PDF, not when a reader prints one page: the list of a page's sections that the theme prints
#: under its title (the PDF's outline holds them) and the "Try it live" banner (the explorers' print line says
#: where they are live).
PDF_ONLY_CSS = ("#jb-print-toc, div.inferlab-try-live { display: none !important; } "
                "p.inferlab-pdf-note { font-style: italic; }")
#: What the PDF prints in place of a check cell's code (``hide-input``: pages of assertions a reader of paper cannot
#: run; they were a sixth of the PDF's pages and a third of its printing time), with its number of lines.
CHECK_CELL_NOTE = ("Check cell, {lines} lines of code (left out of the PDF): it asserts this page's numbers and runs in "
                   "the notebook and in the book's tests.")
#: Run in the page before printing: the page as print shows it (check cells as ``CHECK_CELL_NOTE``), then its title.
_READY = """(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const style = document.createElement('style');
  style.textContent = %s;
  document.head.appendChild(style);
  document.querySelectorAll('div.cell.tag_hide-input details').forEach(d => {
    const pre = d.querySelector('div.cell_input pre');
    const note = document.createElement('p');
    note.className = 'inferlab-pdf-note';
    note.textContent = %s.replace('{lines}', pre ? pre.textContent.trimEnd().split('\\n').length : 0);
    d.replaceWith(note);
  });
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  window.dispatchEvent(new Event('beforeprint'));  // sphinx-togglebutton opens its toggles for print
  await document.fonts.ready;
  await Promise.all([...document.images].map(i => i.complete ? null :
      new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  const h1 = (document.querySelector('article h1') || document.querySelector('h1'));
  if (!h1) { return document.title; }
  const copy = h1.cloneNode(true);
  copy.querySelectorAll('.headerlink').forEach(e => e.remove());
  return copy.textContent.trim();
})()"""


@dataclass
class Entry:
    """One line of the outline: a page of the book (``docname``) or a part (``caption``), with its children."""

    title: str
    docname: str | None = None
    children: list[Entry] = field(default_factory=list)

    def pages(self) -> Iterator[Entry]:
        """This entry and its descendants that are pages, in reading order."""
        if self.docname is not None:
            yield self
        for child in self.children:
            yield from child.pages()


def _value(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        end = raw.index(quote, 1)
        text = raw[1:end]
        return json.loads(f'"{text}"') if quote == '"' else text.replace("''", "'")
    return raw.split(" #", 1)[0].strip()


def read_toc(path: Path) -> list[Entry]:
    """The outline of a Jupyter Book ``_toc.yml`` (format jb-book): the root page, then each part (its
    ``caption``) holding its ``file`` entries, ``sections`` nested under the entry above them.

    A small reader for the keys this format uses (the library imports no YAML parser); ``glob`` and ``url``
    entries, which would need the site to resolve, raise ValueError, as does a file that is not jb-book.
    """
    text = path.read_text(encoding="utf-8")
    root: Entry | None = None
    parts: list[Entry] = []
    stack: list[tuple[int, Entry]] = []  # (indent, entry) of the open file entries of the current part
    line_re = re.compile(r"^(?P<indent>\s*)(?P<dash>-\s+)?(?P<key>[A-Za-z_]+):\s*(?P<value>.*)$")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = line_re.match(line)
        if m is None:
            raise ValueError(f"{path}:{number}: not a key of a jb-book table of contents: {line.strip()!r}")
        key, value = m["key"], m["value"]
        indent = len(m["indent"]) + (len(m["dash"]) if m["dash"] else 0)
        if key == "format" and _value(value) != "jb-book":
            raise ValueError(f"{path}: format {_value(value)!r}; only jb-book is read")
        if key in ("glob", "url"):
            raise ValueError(f"{path}:{number}: {key} entries are not supported by the PDF build")
        if key == "root":
            root = Entry(title="", docname=_value(value))
        elif key == "caption":
            parts.append(Entry(title=_value(value)))
            stack = []
        elif key == "file":
            entry = Entry(title="", docname=_value(value).removesuffix(".md").removesuffix(".ipynb"))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if stack:
                stack[-1][1].children.append(entry)
            elif parts:
                parts[-1].children.append(entry)
            else:  # a jb-book without parts: chapters straight under the root
                parts.append(Entry(title="", children=[entry]))
            stack.append((indent, entry))
    if root is None:
        raise ValueError(f"{path}: no root page")
    return [root, *parts]


class _Pipe:
    """Chromium's DevTools protocol over ``--remote-debugging-pipe``: JSON messages ending in NUL, commands on
    the browser's fd 3, replies and events on its fd 4."""

    def __init__(self, binary: str = "chromium") -> None:
        import fcntl  # POSIX only, as the pipe is; imported here so that the module imports anywhere

        exe = shutil.which(binary)
        if exe is None:
            raise FileNotFoundError(f"{binary} is not installed: make chromium (apt-get install -y chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="inferlab-pdf-profile-"))
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def _fds() -> None:  # in the child: our pipe ends as fds 3 and 4 (moved out of the way first)
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                                      "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=_fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, timeout_s: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], timeout_s)
            if not ready:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: str | None = None, timeout_s: float = 120, **params: Any) -> dict:
        """Call ``method`` (in the page ``session``, else on the browser); RuntimeError on a protocol error."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(max(0.1, deadline - time.monotonic()))
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, session: str, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            for i, msg in enumerate(self.events):
                if msg.get("method") == event and msg.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read(max(0.1, deadline - time.monotonic())))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _print_pages(site: Path, docnames: list[str], log: Any = None) -> tuple[str, dict[str, tuple[str, bytes]]]:
    """Print each page ``docname`` of the built ``site``: the URL it was served from, and {docname: (its title,
    its PDF)}."""
    browser = _Pipe()
    printed: dict[str, tuple[str, bytes]] = {}
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        browser.send("Page.enable", session)
        browser.send("Emulation.setEmulatedMedia", session,
                     features=[{"name": "prefers-color-scheme", "value": "light"}])
        with serve_folder(site) as base:
            for docname in docnames:
                t0 = time.perf_counter()
                browser.send("Page.navigate", session, url=f"{base}{docname}.html")
                browser.wait_for("Page.loadEventFired", session)
                ready = _READY % (json.dumps(PDF_ONLY_CSS), json.dumps(CHECK_CELL_NOTE))
                out = browser.send("Runtime.evaluate", session, expression=ready,
                                   awaitPromise=True, returnByValue=True)
                if "exceptionDetails" in out:
                    raise RuntimeError(f"{docname}: {out['exceptionDetails']}")
                title = out["result"].get("value") or docname
                data = browser.send("Page.printToPDF", session, timeout_s=300, printBackground=True,
                                    generateDocumentOutline=True, **PAPER)["data"]
                printed[docname] = (title, base64.b64decode(data))
                if log:
                    log(f"{docname}: {time.perf_counter() - t0:.1f} s")
        return base, printed
    finally:
        browser.close()


def _page_number_stream(number: int, width: float) -> bytes:
    text = str(number).encode()
    x = width / 2 - 2.5 * len(text)
    return b"q BT /InferlabPageNo 9 Tf 0.4 g %.2f 24 Td (%s) Tj ET Q" % (x, text)


def _merge(entries: list[Entry], base: str, printed: dict[str, tuple[str, bytes]], out: Path) -> int:
    """Merge the printed pages in outline order into ``out``, with bookmarks, links (``base``: the URL the pages
    were served from) and page numbers; the number of pages."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import (ArrayObject, DecodedStreamObject, DictionaryObject, IndirectObject, NameObject,
                               NullObject)

    writer = PdfWriter()
    start: dict[str, int] = {}
    headings: dict[str, list[tuple[str, int]]] = {}
    for entry in entries:
        for page in entry.pages():
            title, data = printed[page.docname]
            page.title = page.title or title
            reader = PdfReader(io.BytesIO(data))
            start[page.docname] = len(writer.pages)
            # the page's h2 headings, from the outline Chromium wrote (its top item is the page's h1)
            found = []
            for item in reader.outline:
                if isinstance(item, list):  # the children of the item before it
                    found += [(child.title, reader.get_destination_page_number(child)) for child in item
                              if not isinstance(child, list)]
            headings[page.docname] = found
            writer.append(reader, import_outline=False)

    # links: a page of the book -> that page here; other files of the site -> dropped; the web -> kept
    by_path = {f"{d}.html": n for d, n in start.items()}
    for page in writer.pages:
        annots = page.get("/Annots")
        if annots is None:
            continue
        kept = ArrayObject()
        for ref in annots.get_object():
            annot = ref.get_object()
            action = annot.get("/A")
            uri = action.get_object().get("/URI") if action is not None else None
            if uri is None or not str(uri).startswith(base):
                kept.append(ref)
                continue
            path = unquote(urlsplit(str(uri)).path).lstrip("/") or "index.html"
            if path in by_path:
                target = writer.pages[by_path[path]].indirect_reference
                annot[NameObject("/A")] = DictionaryObject({
                    NameObject("/S"): NameObject("/GoTo"),
                    NameObject("/D"): ArrayObject([target, NameObject("/XYZ"), NullObject(), NullObject(),
                                                   NullObject()])})
                kept.append(ref)
        page[NameObject("/Annots")] = kept

    # bookmarks: the root page, each part with its pages (and their headings)
    def add(entry: Entry, parent: Any = None) -> None:
        first = next(entry.pages(), None)
        if first is None:
            return
        item = writer.add_outline_item(title=entry.title, page_number=start[first.docname], parent=parent)
        if entry.docname is not None:
            for title, number in headings[entry.docname]:
                writer.add_outline_item(title=title, page_number=start[entry.docname] + number, parent=item)
        for child in entry.children:
            add(child, item)

    for entry in entries:
        if entry.docname is None and not entry.title:  # chapters without a part
            for child in entry.children:
                add(child)
        else:
            add(entry)

    # page numbers: one font (the PDF standard Helvetica), one small content stream per page
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for number, page in enumerate(writer.pages, 1):
        if "/Resources" not in page:
            page[NameObject("/Resources")] = DictionaryObject()
        resources = page["/Resources"]  # resolved: changed in place, also where pages share it
        if "/Font" not in resources:
            resources[NameObject("/Font")] = DictionaryObject()
        resources["/Font"][NameObject("/InferlabPageNo")] = font
        before, after = DecodedStreamObject(), DecodedStreamObject()
        before.set_data(b"q")
        after.set_data(b"Q " + _page_number_stream(number, float(page.mediabox.width)))
        raw = page.raw_get("/Contents") if "/Contents" in page else None
        resolved = raw.get_object() if raw is not None else None
        streams = list(resolved) if isinstance(resolved, ArrayObject) else [] if raw is None else [raw]
        streams = [ref if isinstance(ref, IndirectObject) else writer._add_object(ref) for ref in streams]
        page[NameObject("/Contents")] = ArrayObject(
            [writer._add_object(before), *streams, writer._add_object(after)])
    writer.add_metadata({"/Title": entries[0].title, "/Creator": "inferlab.book.pdf (Chromium, pypdf)"})
    writer.page_mode = "/UseOutlines"
    writer.set_page_label(0, len(writer.pages) - 1, style="/D")  # viewers show the stamped numbers
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return len(writer.pages)


def build_pdf(root: Path, site: Path | None = None, out: Path | None = None, log: Any = None) -> Path:
    """Print the book built in ``site`` (``root/_build/html``) into ``out`` (``root/_build/pdf/``) and copy it
    into the site; returns ``out``. ValueError when the site lacks a page of ``_toc.yml``."""
    site = site or root / "_build" / "html"
    out = out or root / "_build" / "pdf" / PDF_NAME
    entries = read_toc(root / "_toc.yml")
    docnames = [page.docname for entry in entries for page in entry.pages()]
    missing = [d for d in docnames if not (site / f"{d}.html").is_file()]
    if missing:
        listed = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ValueError(f"the built site {site} lacks {listed}: run `make book` first")
    base, printed = _print_pages(site, docnames, log)
    pages = _merge(entries, base, printed, out)
    shutil.copy2(out, site / PDF_NAME)
    if log:
        log(f"{out}: {pages} pages, {out.stat().st_size / 1e6:.1f} MB")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the book's folder (holds _toc.yml)")
    parser.add_argument("--site", type=Path, help="the built HTML (default ROOT/_build/html)")
    parser.add_argument("--out", type=Path, help=f"the PDF (default ROOT/_build/pdf/{PDF_NAME})")
    parser.add_argument("-v", "--verbose", action="store_true", help="time each page")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        out = build_pdf(args.root.resolve(), args.site, args.out, log=print if args.verbose else None)
    except (ValueError, FileNotFoundError) as error:  # no site, no chromium: say what to run
        raise SystemExit(f"inferlab.book.pdf: {error}") from None
    print(f"{out}: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
