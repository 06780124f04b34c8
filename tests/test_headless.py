"""The headless-execution fixes are installed and remove the Output-widget stall (nbclient#312)."""

import time

from jupyter_client.channels import AsyncZMQSocketChannel
from nbclient import NotebookClient

import inferlab.headless as headless


def test_fixes_are_installed() -> None:
    headless.install()  # conftest.py installed them already; installing again changes nothing
    assert AsyncZMQSocketChannel.send is headless._send_and_recheck
    assert NotebookClient.shutdown_kernel.default_value == "immediate"


def test_output_widget_cell_does_not_wait_for_the_cell_timeout() -> None:
    timeout = 20
    t0 = time.perf_counter()
    NotebookClient(headless.stall_probe_notebook(), timeout=timeout).execute()
    elapsed = time.perf_counter() - t0
    # Without the fix the execute_reply is read only when the 20 s poll expires.
    assert elapsed < timeout / 2, f"execution took {elapsed:.1f} s: the reply waited for the cell timeout"
