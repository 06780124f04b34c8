"""Reliable headless notebook execution (nbmake, jupyter-book): fixes for two nbclient stalls.

A. A cell that puts output into an ipywidgets ``Output`` makes nbclient send a ``comm_msg``
   on the shell channel while it awaits ``execute_reply``. The send goes through a
   synchronous shadow of the asyncio socket and consumes libzmq's edge-triggered wake-up
   for a reply that has just arrived; pyzmq's asyncio poller never re-checks, so the reply
   is read only when the cell timeout expires (jupyter/nbclient#312). Fix: after each send
   on an asyncio channel, ask pyzmq to re-check the socket's pending events.
B. On ``shutdown_request`` ipykernel can deadlock between its control and IOPub threads,
   so nbclient waits for SIGTERM (about 2.5 s). Fix: shut the kernel down immediately.
C. Over TCP, jupyter_client picks five free ports, writes them to the connection file and
   releases them; the kernel binds them a moment later. Anything that takes one in between
   (the local port of another process's connection, say) kills the kernel with "Address already
   in use": seen once in about 25 runs of ``make test``, which keeps many kernels and
   connections open at once. Fix (POSIX): nbclient's kernels talk over Unix sockets (IPC)
   named after a fresh connection file in the temporary folder, so there are no ports to lose.

``install()`` applies all three, idempotently. Sphinx loads this module as an extension through
``_config.yml`` (its ``setup`` installs); ``conftest.py`` installs for nbmake. The investigation behind
A and B (rates before and after, what did not help): ``docs/notebook-execution-stall.md``.
``store_in_book_cache`` lets the book build reuse nbmake's executions (``conftest.py``).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import zmq.asyncio
from jupyter_client import AsyncKernelManager
from jupyter_client.channels import AsyncZMQSocketChannel
from nbclient import NotebookClient
from traitlets import default

_PATCHED = "_inferlab_headless"


def _send_and_recheck(self: AsyncZMQSocketChannel, msg: dict[str, Any]) -> None:
    """Send ``msg``, then re-arm the asyncio poller for events the send may have swallowed."""
    assert self.socket is not None
    self.session.send(self.socket, msg)
    self.socket._schedule_remaining_events()  # private in pyzmq 25-27.3, pinned in requirements


class IPCKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel listens on Unix sockets: ``<connection file>-ipc-<n>``, absolute paths.

    The connection file gets a fresh name in the temporary folder (where jupyter_client puts one by
    default), and the socket paths derive from it, so kernels started at once never share a path and
    the kernel finds its sockets whatever its working folder. Shutting down removes the sockets.
    """

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("connection_file")
    def _connection_file_default(self) -> str:
        # a short name: a socket path may hold 107 bytes on Linux, 103 on macOS, whose temporary folder is long
        return os.path.join(tempfile.gettempdir(), f"kernel-{uuid.uuid4().hex[:12]}.json")


_plain_create_kernel_manager = NotebookClient.create_kernel_manager


def _create_kernel_manager(self: NotebookClient) -> Any:
    """nbclient's own step, with ``IPCKernelManager`` where the client was left with the default manager."""
    if self.kernel_manager_class is AsyncKernelManager:
        self.kernel_manager_class = IPCKernelManager
    return _plain_create_kernel_manager(self)


def install() -> None:
    """Apply the fixes once per process (C on POSIX only: Windows has no Unix sockets for zmq)."""
    if getattr(AsyncZMQSocketChannel, _PATCHED, False):
        return
    if not hasattr(zmq.asyncio.Socket, "_schedule_remaining_events"):
        raise ImportError("pyzmq lacks Socket._schedule_remaining_events; pin pyzmq as requirements.txt does")
    AsyncZMQSocketChannel.send = _send_and_recheck
    NotebookClient.shutdown_kernel.default_value = "immediate"
    if os.name == "posix":
        NotebookClient.create_kernel_manager = _create_kernel_manager
    setattr(AsyncZMQSocketChannel, _PATCHED, True)


#: The deterministic trigger of stall A: output into an ipywidgets.Output while a cell runs.
STALL_PROBE = """
import ipywidgets as w
from IPython.display import display
out = w.Output()
display(out)
with out:
    for i in range(100):
        display(i)
"""


def stall_probe_notebook() -> Any:
    """A one-cell notebook that stalls for a whole cell timeout without fix A (nbformat node)."""
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(STALL_PROBE)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def store_in_book_cache(nb: Any, path: Path, cache_dir: Path, seconds: float | None = None) -> None:
    """Store the outputs of executed ``nb`` for the source notebook ``path`` where myst-nb's cache finds them.

    The cache is keyed on the source's code cells with their metadata, so the outputs are put into
    the notebook as read from disk (nbclient adds timing metadata to each cell); one writer at a time.
    """
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    source = nbformat.read(path, as_version=4)
    if len(source.cells) != len(nb.cells):
        raise ValueError(f"nb has {len(nb.cells)} cells, {path} has {len(source.cells)}")
    for mine, ran in zip(source.cells, nb.cells):
        if mine.cell_type == "code":
            mine.outputs, mine.execution_count = ran.outputs, ran.execution_count
    source.metadata.update({k: v for k, v in nb.metadata.items() if k != "kernelspec"})
    nb = source

    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(cache_dir.parent / ".jupyter_cache.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        get_cache(str(cache_dir)).cache_notebook_bundle(
            CacheBundleIn(nb, str(path), data={"execution_seconds": seconds}), check_validity=False, overwrite=True)


def setup(app: Any) -> dict[str, Any]:
    """Sphinx extension entry point: install the fixes before myst-nb executes notebooks."""
    install()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
