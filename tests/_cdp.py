"""Headless Chromium driven over the DevTools protocol (websocket-client only), and a loopback file server.

Used by ``test_browser.py``: ``Chromium()`` starts the Debian ``chromium`` with a fresh profile, ``page()``
gives a tab that records console errors and exceptions; ``serve(folder)`` (the PDF build's ``serve_folder``) serves
a built site on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from inferlab.book.pdf import FLAGS  # the same headless Chromium as the PDF build
from inferlab.book.pdf import serve_folder as serve  # noqa: F401  (re-exported for the browser tests)


class Tab:
    """One page target: navigate, evaluate JavaScript; console errors collected per load."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=120, suppress_origin=True, enable_multithread=False)
        self._id = 0
        self.events: list[dict[str, Any]] = []
        # no Network domain: its events carry every data: URL whole (14 MB over the book's 38 pages, a fifth of
        # the browser test's CPU), and the log reports each failed load anyway (see ``errors``)
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a protocol method and return its result; RuntimeError on a protocol error."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout_s: float = 60) -> dict[str, Any]:
        """Wait for the next protocol ``event`` (already-received ones count)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i, msg in enumerate(self.events):
                if msg.get("method") == event:
                    return self.events.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError(event)
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(self.ws.recv()))

    def goto(self, url: str) -> None:
        """Open ``url`` and wait for its load event; the error log restarts."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        out = self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:80]}...: {out['exceptionDetails']}")
        return out["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen since the last ``goto``.

        A resource that fails (an HTTP error or a network error such as a CDN out of reach) is logged as an
        error; a frame that fails to load is not, and shows as a frame navigated to an unreachable URL."""
        # a round trip through the page's event loop: what the page logged before it arrives first
        self.eval("new Promise(r => setTimeout(r, 50))")
        found = []
        for msg in self.events:
            method, params = msg.get("method"), msg.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("exception", {}).get("description")
                             or params["exceptionDetails"].get("text"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
            elif method == "Page.frameNavigated" and params["frame"].get("unreachableUrl"):
                found.append(f"frame failed to load: {params['frame']['unreachableUrl']}")
        return found


class Chromium:
    """The Debian chromium, headless, with a new empty profile; ``close()`` ends it and removes the profile."""

    def __init__(self, binary: str = "chromium") -> None:
        exe = shutil.which(binary)
        if exe is None:
            raise FileNotFoundError(f"{binary} is not installed: apt-get install -y chromium chromium-driver")
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])

    def page(self) -> Tab:
        """The first page target."""
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list"))
        return Tab(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
