"""The headless-execution fixes are installed and remove the Output-widget stall (nbclient#312)."""

import time

import nbformat
from jupyter_client.channels import AsyncZMQSocketChannel
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

import inferlab.headless as headless

# The deterministic trigger: output into an ipywidgets.Output during the cell (see shared notes).
AMPLIFIED = """
import ipywidgets as w
from IPython.display import display
out = w.Output()
display(out)
with out:
    for i in range(100):
        display(i)
"""


def test_fixes_are_installed() -> None:
    assert AsyncZMQSocketChannel.send is headless._send_and_recheck
    assert NotebookClient.shutdown_kernel.default_value == "immediate"
    headless.install()  # idempotent
    assert AsyncZMQSocketChannel.send is headless._send_and_recheck


def test_output_widget_cell_does_not_wait_for_the_cell_timeout() -> None:
    nb = new_notebook(cells=[new_code_cell(AMPLIFIED)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    timeout = 20
    t0 = time.perf_counter()
    NotebookClient(nbformat.from_dict(nb), timeout=timeout).execute()
    elapsed = time.perf_counter() - t0
    # Without the fix the execute_reply is read only when the 20 s poll expires.
    assert elapsed < timeout / 2, f"execution took {elapsed:.1f} s: the reply waited for the cell timeout"
