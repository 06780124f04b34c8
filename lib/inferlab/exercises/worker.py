"""The grader's worker: execute a submission's runs in one kernel and ask the kernel for the answers (in the sandbox).

``python -m inferlab.exercises.worker NOTEBOOK SPEC TIMEOUT`` runs the notebook's cells (nbclient, a
fresh kernel, cwd an empty folder), then asks the kernel for every answer variable in one
``execute_request`` whose ``user_expressions`` (``answers.expression``) carry a random nonce made here.
SPEC may name more notebooks (``runs``: the grader's variant and public copies of one submission): they
run one after the other in the same kernel, its namespace reset and its working folder fresh between
them, each with its own nonce and its own TIMEOUT, so the second costs no kernel start and no imports.
The values come back in that request's reply, never from printed text: nothing a cell prints, no hook
and no patched ``print``, ``json`` or ``sys.stdout`` is read as an answer.

The result goes to the descriptor in ``$SANDBOX_RESULT_FD`` (``sandbox.run``), which the kernel does not
inherit; the worker makes itself non-dumpable, so the kernel (same uid) cannot reach that descriptor
through ``/proc`` either. The result holds the kernel's answer texts as received: the grader decodes and
judges them (``answers.decode``), and owns everything else (the student's name, the statuses, the report).

Each run's cells get ``TIMEOUT`` seconds together, counted from the moment the kernel is ready (the first)
or reset (the next); outputs are not kept (only errors are counted), and a submission that prints more
than ``OUTPUT_LIMIT_BYTES`` in all is stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from .answers import expression

__all__ = ["OUTPUT_LIMIT_BYTES", "run_notebook", "main"]

OUTPUT_LIMIT_BYTES = 16 << 20
_PR_SET_DUMPABLE = 4

async def _run(nbs: list[Any], names: list[str], probes: dict[str, list[list[Any]]],
               timeout_s: float) -> dict[str, Any]:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    class Client(NotebookClient):
        """nbclient that keeps no outputs: errors are counted, the rest only measured."""

        output_bytes = 0
        errors = 0

        def output(self, outs: list, msg: dict[str, Any], display_id: str | None, cell_index: int) -> None:
            content = msg.get("content") or {}
            if msg.get("msg_type") == "error":
                self.errors += 1
            self.output_bytes += len(content.get("text", "")) + sum(
                len(v) for v in (content.get("data") or {}).values() if isinstance(v, str))
            return None

        def handle_comm_msg(self, outs: list, msg: dict[str, Any], cell_index: int) -> None:
            return None  # widget state is not kept either

    workdir = os.path.abspath("work")  # in the sandbox /tmp/work: the kernel's empty, writable folder
    os.makedirs(workdir, exist_ok=True)
    client = Client(nbs[0], timeout=timeout_s, allow_errors=True, kernel_name="python3",
                    resources={"metadata": {"path": workdir}})
    deadline = time.monotonic() + timeout_s
    client.timeout_func = lambda cell: max(0.05, deadline - time.monotonic())
    runs: list[dict[str, Any]] = []
    try:
        async with client.async_setup_kernel():
            await client.async_wait_for_reply(client.kc.kernel_info())
            for number, nb in enumerate(nbs):
                if number:  # a clean namespace in a fresh folder: the run before leaves nothing behind
                    fresh = os.path.abspath(f"work{number}")
                    os.makedirs(fresh, exist_ok=True)
                    reset = client.kc.execute(f"__import__('IPython').get_ipython().run_line_magic('reset', '-f')\n"
                                              f"__import__('os').chdir({fresh!r})", silent=True,
                                              store_history=False, allow_stdin=False)
                    if await _reply(client, reset, time.monotonic() + timeout_s) is None:
                        runs.append({"status": "timeout", "message": "the kernel did not reset in time"})
                        break
                client.nb, client.errors = nb, 0
                deadline = time.monotonic() + timeout_s  # each run's cells get the whole budget
                run = await _one_run(client, nb, names, probes, timeout_s, lambda: deadline)
                runs.append(run)
                if run["status"] != "graded":
                    break
    except CellTimeoutError:
        runs.append({"status": "timeout", "message": f"the cells ran longer than {timeout_s:g} s in all"})
    except DeadKernelError as err:
        runs.append({"status": "error", "message": f"the kernel died: {err}"[:300]})
    first = runs[0] if runs else {"status": "error", "message": "nothing ran"}
    if first["status"] != "graded":
        return {"status": first["status"], "message": first["message"]}
    return {"status": "graded", "runs": runs, "message": first["message"]}


async def _one_run(client: Any, nb: Any, names: list[str], probes: dict[str, list[list[Any]]], timeout_s: float,
                   deadline: Any) -> dict[str, Any]:
    """Execute ``nb``'s code cells in the client's kernel, then read the answers: one run's result."""
    from nbclient.exceptions import CellTimeoutError

    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            await client.async_execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
            if client.output_bytes > OUTPUT_LIMIT_BYTES:
                return {"status": "error",
                        "message": f"the notebook printed more than {OUTPUT_LIMIT_BYTES >> 20} MB; it was stopped"}
    except CellTimeoutError:
        return {"status": "timeout", "message": f"the cells ran longer than {timeout_s:g} s in all"}
    nonce = secrets.token_hex(16)
    keys = {name: f"{name}_{nonce}" for name in names + ["STUDENT"]}
    msg_id = client.kc.execute("", silent=True, store_history=False, allow_stdin=False, user_expressions={
        key: expression(name, probes.get(name, []), nonce) for name, key in keys.items()})
    reply = await _reply(client, msg_id, deadline())
    if reply is None:
        return {"status": "timeout", "message": f"the cells ran longer than {timeout_s:g} s in all"}
    found = (reply.get("content") or {}).get("user_expressions") or {}
    answers = {name: _text(found.get(key)) for name, key in keys.items()}
    errors = client.errors
    return {"status": "graded", "nonce": nonce, "answers": answers,
            "message": f"{errors} cell(s) raised an error" if errors else ""}


async def _reply(client: Any, msg_id: str, deadline: float) -> dict[str, Any] | None:
    """The shell reply to ``msg_id``, or None at the deadline (other replies are skipped)."""
    from queue import Empty

    while (left := deadline - time.monotonic()) > 0:
        try:
            msg = await client.kc.shell_channel.get_msg(timeout=left)
        except Empty:
            return None
        if (msg.get("parent_header") or {}).get("msg_id") == msg_id:
            return msg
    return None


def _text(found: Any) -> Any:
    """One user expression's result as the kernel sent it: its text, or its error."""
    if not isinstance(found, dict):
        return {"error": "no answer came back"}
    if found.get("status") != "ok":
        return {"error": f"{found.get('ename', 'error')}: {found.get('evalue', '')}"[:300]}
    text = (found.get("data") or {}).get("text/plain")
    return text if isinstance(text, str) else {"error": "the answer came back without text"}


def run_notebook(path: str | list[str], names: list[str], probes: dict[str, list[list[Any]]],
                 timeout_s: float) -> dict[str, Any]:
    """Execute the notebook(s) at ``path`` and read ``names`` from one kernel: a dict for the grader (module doc)."""
    import nbformat

    from .. import headless

    headless.install()
    try:
        nbs = [nbformat.reads(Path(p).read_text(encoding="utf-8"), as_version=4)
               for p in ([path] if isinstance(path, str) else path)]
    except Exception as err:  # the grader has validated it; say so rather than crash
        return {"status": "error", "message": f"not a readable notebook: {err}"[:300]}
    return asyncio.run(_run(nbs, names, probes, timeout_s))


def _undumpable() -> None:
    """Make this process non-dumpable: a process of the same uid (the kernel) cannot ptrace it or open its fds."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def main(argv: list[str] | None = None) -> int:
    """``NOTEBOOK SPEC TIMEOUT``: run, write the result (JSON) to ``$SANDBOX_RESULT_FD``, exit."""
    path, spec, timeout = (sys.argv[1:] if argv is None else argv)[:3]
    fd = int(os.environ.pop("SANDBOX_RESULT_FD"))
    os.set_inheritable(fd, False)
    _undumpable()
    wanted = json.loads(spec)
    try:
        result = run_notebook(wanted.get("runs") or path, wanted["names"], wanted["probes"], float(timeout))
    except Exception as err:  # report, never hang: the grader turns this into an error row
        result = {"status": "error", "message": f"the worker failed: {type(err).__name__}: {err}"[:300]}
    data = json.dumps(result).encode()
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
