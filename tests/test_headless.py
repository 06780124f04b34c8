"""The headless-execution fixes are installed, remove the Output-widget stall (nbclient#312) and give
kernels Unix sockets that no other process can take."""

import asyncio
import glob
import os
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from jupyter_client.channels import AsyncZMQSocketChannel
from nbclient import NotebookClient

import inferlab.headless as headless


def test_fixes_are_installed() -> None:
    headless.install()  # conftest.py installed them already; installing again changes nothing
    assert AsyncZMQSocketChannel.send is headless._send_and_recheck
    assert NotebookClient.shutdown_kernel.default_value == "immediate"
    if os.name == "posix":
        assert NotebookClient.create_kernel_manager is headless._create_kernel_manager


def test_output_widget_cell_does_not_wait_for_the_cell_timeout() -> None:
    timeout = 20
    t0 = time.perf_counter()
    NotebookClient(headless.stall_probe_notebook(), timeout=timeout).execute()
    elapsed = time.perf_counter() - t0
    # Without the fix the execute_reply is read only when the 20 s poll expires.
    assert elapsed < timeout / 2, f"execution took {elapsed:.1f} s: the reply waited for the cell timeout"


@pytest.mark.skipif(os.name != "posix", reason="fix C is POSIX only: Windows kernels keep TCP")
def test_kernels_started_at_once_in_different_folders_each_get_their_own_sockets(tmp_path: Path) -> None:
    """Two kernels at once, each in its own working folder: each runs over IPC at an absolute path of its own,
    answers from its folder, and leaves no socket or connection file behind."""
    folders = [tmp_path / "a", tmp_path / "b"]
    probe = ("import os, time; from ipykernel.kernelapp import IPKernelApp; app = IPKernelApp.instance()\n"
             "time.sleep(0.3); print(os.getcwd(), app.transport, app.ip, app.abs_connection_file)")
    clients = []
    for folder in folders:
        folder.mkdir()
        nb = new_notebook(cells=[new_code_cell(probe)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        where = {"metadata": {"path": str(folder)}}
        clients.append(NotebookClient(nb, timeout=20, startup_timeout=20, resources=where))
    assert isinstance(NotebookClient(new_notebook()).create_kernel_manager(), headless.IPCKernelManager)

    async def run_both() -> None:
        await asyncio.gather(*(c.async_execute() for c in clients))

    asyncio.run(run_both())
    seen = [c.nb.cells[0].outputs[0]["text"].split() for c in clients]
    assert [cwd for cwd, *_ in seen] == [str(f) for f in folders]
    assert all(transport == "ipc" and os.path.isabs(ip) for _, transport, ip, _ in seen)
    assert seen[0][2] != seen[1][2]
    for _, _, ip, connection_file in seen:  # shut down: nothing left behind
        assert not glob.glob(ip + "-*") and not os.path.exists(connection_file)
