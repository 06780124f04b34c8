"""Kernels forked from a warm server (nbmake's, tests/_forked_kernels.py) show what plain kernels show."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

import _forked_kernels as fk

ROOT = Path(__file__).resolve().parents[1]

PROBE = [
    "import contextlib, io, os, random, sys\nimport numpy as np, pandas as pd, sympy as sp, matplotlib",
    # pandas sets its display width from where it is imported: a wide frame shows it
    'pd.DataFrame({f"a column with a long name {i}": [i * 1.5] for i in range(12)})',
    'sp.Rational(1, 3) + sp.Symbol("x")',
    "from inferlab.book.plot import new_figure\nfig, ax = new_figure()\nax.plot([0, 1], [0, 1])\nfig",
    "buf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    pd.describe_option()\nprint(buf.getvalue())\n"
    "print(matplotlib.rcParams._get_backend_or_none(), sorted(matplotlib.rcParams.items()), np.get_printoptions())",
    "shell = get_ipython()\nprint(os.getcwd(), sys.path[0], os.path.basename(sys.argv[0]), sorted(os.environ))\n"
    'print({m: sorted(t.__name__ for t in f.type_printers) for m, f in shell.display_formatter.formatters.items()})',
    "print(random.random(), np.random.random())",
]
RANDOM = len(PROBE) - 1


def _outputs() -> list[list[dict]]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in PROBE])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "chapters")}}
                   ).execute()
    return [[{k: v for k, v in out.items() if k != "execution_count"} for out in cell.outputs] for cell in nb.cells]


def test_a_forked_kernel_shows_what_a_plain_one_shows(monkeypatch) -> None:
    from jupyter_client.provisioning import local_provisioner

    forking = fk.forking(local_provisioner.launch_kernel)
    started = []

    def launch(*args, **kwargs):
        started.append(forking(*args, **kwargs))
        return started[-1]

    plain = _outputs()
    monkeypatch.setattr(local_provisioner, "launch_kernel", launch)
    try:
        first, second = _outputs(), _outputs()
    finally:
        forking.server.close()
    assert [type(k) for k in started] == [fk.ForkedKernel] * 2 and not forking.server.failed
    assert all(k.poll() is not None for k in started)  # shut down, and reaped by the server
    assert all(plain[i] for i in range(len(PROBE)) if i != 0)  # every probe showed something
    for i in range(len(PROBE)):
        if i != RANDOM:
            assert first[i] == plain[i], PROBE[i]
            assert second[i] == plain[i], PROBE[i]
    assert first[RANDOM] != second[RANDOM]  # each forked kernel seeds its generators anew


def test_other_commands_start_as_before() -> None:
    calls = []
    forking = fk.forking(lambda cmd, **kw: calls.append(cmd) or "plain")
    assert forking(["/bin/true", "-m", "ipykernel_launcher"]) == "plain"
    assert forking(["python3", "-c", "pass"]) == "plain"
    assert len(calls) == 2 and forking.server._proc is None  # no server was started for them


def test_the_server_preloads_the_models_but_nothing_that_looks_at_the_shell() -> None:
    names = fk._library_modules()
    assert {"inferlab.kvcache", "inferlab.symbolic", "inferlab.serving.load", "inferlab.exercises.core"} <= set(names)
    assert not [n for n in names if any(n == x or n.startswith(x + ".") for x in fk.NOT_PRELOADED)]
    assert "inferlab.book.plot" in fk.NOT_PRELOADED and "inferlab.book.widgets" in fk.NOT_PRELOADED
