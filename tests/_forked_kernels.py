"""Notebook kernels forked from a warm process, for nbmake: each notebook still gets a fresh kernel process.

A new ipykernel spends about a second starting (Python, IPython, zmq, tornado) and a section
notebook then another 1.5-2 s importing numpy, pandas, sympy and Matplotlib: two thirds of what
``make test`` spent executing the book's 31 notebooks. Here one server per pytest process imports
most of that once, and every kernel nbmake asks for is a ``fork`` of it that then runs ``ipykernel_launcher``
exactly as ``python -m ipykernel_launcher -f <connection file>`` would: its own process, session,
working directory, environment and random seeds, every cell of the notebook executed, every import
statement too (they find the module already loaded, as a second import in one kernel does).

Only modules whose import does not look at the running shell are preloaded (with the environment
ipykernel gives a kernel, ``MPLBACKEND`` included), and pandas, which only asks whether it is imported
inside a kernel (its display width depends on it): it is imported with ``get_ipython()`` saying so.
inferlab's models and simulators are preloaded; not its notebook front end (``plot`` registers its PNG
formatter with the shell, ``widgets`` imports ipywidgets, which registers its comm target) nor its GPU
runners (``tqdm.auto`` picks a notebook or a terminal bar at import); the server fails, and kernels start
plainly, if any of those got imported anyway. Two caches a first use would fill in every kernel are filled
once: sympy's first sum imports ``sympy.tensor`` (0.1 s), Matplotlib's first mathtext builds its parser
(0.2 s). ``tests/test_forked_kernels.py`` checks that a notebook shows the same outputs from a forked
kernel as from a plain one. The reader's cold start is measured without any of this (``benchmarks/run.py``
starts plain kernels).

``install()`` is called by ``conftest.py`` when nbmake runs. A kernel command that is not this
interpreter's ``-m ipykernel_launcher`` is started as before, and so is every kernel if the server
fails. The grader's kernels (``inferlab.exercises.grader``) are never forked: the patch lives in nbmake runs only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PRELOAD = ("numpy", "sympy", "sympy.tensor.tensor", "matplotlib", "matplotlib.figure", "matplotlib.axes",
           "matplotlib.backends.backend_agg", "ipykernel.kernelapp")
#: inferlab's parts that look at the shell when imported, or import what does, and the tools no notebook imports
NOT_PRELOADED = ("inferlab.book.plot", "inferlab.book.widgets", "inferlab.book.static_explorers", "inferlab.book.sphinx_offline",
                 "inferlab.book.install_cell", "inferlab.gpu", "inferlab.exercises.grader", "inferlab.grade",
                 "inferlab.headless", "inferlab.kernels.triton_paged")
#: modules whose import looks at the shell: preloading must not have imported any of them
SHELL_AWARE = ("inferlab.book.plot", "ipywidgets", "tqdm.autonotebook", "matplotlib_inline")
_PATCHED = "_inferlab_forked"


class ForkedKernel:
    """The parts of ``subprocess.Popen`` jupyter_client's LocalProvisioner uses, for a kernel the server forked.

    The server (its parent) reaps it, so it is alive while ``kill(pid, 0)`` finds it; its exit status
    is not seen here: 0, or minus the last signal sent to it.
    """

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._signal = 0

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -self._signal
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            self._signal = signum
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


class _Server:
    """One warm process per pytest process: a JSON line in (command, environment, folder), a pid out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self.failed = False

    def launch(self, cmd: list[str], env: dict[str, str], cwd: str | None) -> ForkedKernel:
        with self._lock:
            if self._proc is None:
                warm = {"MPLBACKEND": "module://matplotlib_inline.backend_inline", **env}  # as ipykernel sets it
                self._proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, env=warm, text=True, bufsize=1)
                if self._proc.stdout.readline().strip() != "ready":
                    raise RuntimeError("the kernel fork server did not start")
            request = {"cmd": [str(c) for c in cmd], "env": env, "cwd": str(cwd or os.getcwd())}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            reply = json.loads(self._proc.stdout.readline() or '{"error": "the kernel fork server exited"}')
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return ForkedKernel(reply["pid"])

    def close(self) -> None:
        """End the server (its kernels end with it: they watch their parent)."""
        with self._lock:
            if self._proc is not None:
                self._proc.stdin.close()
                self._proc.wait(10)
                self._proc.stdout.close()
                self._proc = None


def forking(plain: Callable[..., Any]) -> Callable[..., Any]:
    """A ``launch_kernel`` that forks this interpreter's ``-m ipykernel_launcher`` kernels from a warm server
    (its ``.server``), and starts any other command, or any kernel once the server failed, with ``plain``."""
    server = _Server()

    def launch_kernel(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
                      independent: bool = False, **kw: Any) -> Any:
        ours = (len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"]
                and os.path.realpath(cmd[0]) == os.path.realpath(sys.executable))
        if ours and not server.failed and sys.platform != "win32":
            forked_env = dict(os.environ if env is None else env)
            if not independent:
                forked_env["JPY_PARENT_PID"] = str(os.getpid())
            try:
                return server.launch(cmd, forked_env, cwd)
            except (OSError, RuntimeError, ValueError) as err:  # a plain start is always possible
                server.failed = True
                print(f"forked kernels off ({err}); starting kernels as subprocesses", file=sys.stderr)
        return plain(cmd, env=env, cwd=cwd, independent=independent, **kw)

    launch_kernel.server = server
    return launch_kernel


def install() -> None:
    """Start kernels through ``forking`` in this process from now on (once)."""
    from jupyter_client.provisioning import local_provisioner

    if not getattr(local_provisioner, _PATCHED, False):
        local_provisioner.launch_kernel = forking(local_provisioner.launch_kernel)
        setattr(local_provisioner, _PATCHED, True)


def _child(request: dict[str, Any], ready: int) -> None:
    """In the forked process: become ``python -m ipykernel_launcher ...`` started by Popen, then run it.

    ``ready`` (a pipe) is written to once the process leads its own session: the server replies only then,
    since jupyter_client signals the kernel's process group (the server's would be the test run's).
    """
    import random
    import runpy
    import signal

    import numpy as np

    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # as Popen's start_new_session: interrupts go to the kernel's own group
        os.write(ready, b"1")
        os.close(ready)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(2, 1)  # the kernel writes where the server's errors go (the pytest process's stderr)
        random.seed()
        np.random.seed()
        sys.argv = ["ipykernel_launcher", *request["cmd"][3:]]
        sys.path[0] = request["cwd"]  # what `python -m` puts first
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported, then the process ends as a failed kernel would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _import_as_in_a_kernel(name: str) -> None:
    """Import ``name`` where a kernel would: ``get_ipython()`` answers with a shell that has a kernel, and
    ``sys.stdout`` has the encoding of the kernel's stream.

    pandas reads both once, at import: ``display.max_columns`` (20 in a kernel, 0 in a terminal) and
    ``display.encoding``. Nothing else of a kernel is there to be seen, so a module that looks further
    fails the probe test.
    """
    import builtins
    import importlib

    from ipykernel.iostream import OutStream

    class _KernelShell:
        kernel = True

    class _KernelStream:
        encoding = OutStream.encoding

    builtins.get_ipython, stdout, sys.stdout = _KernelShell, sys.stdout, _KernelStream()
    try:
        importlib.import_module(name)
    finally:
        del builtins.get_ipython
        sys.stdout = stdout


def _library_modules() -> list[str]:
    """inferlab's modules, less ``NOT_PRELOADED`` and what lies under them (found without importing those)."""
    import pkgutil
    from pathlib import Path

    import inferlab

    found, folders = [], [(Path(inferlab.__file__).parent, "inferlab.")]
    while folders:
        folder, prefix = folders.pop()
        for info in pkgutil.iter_modules([str(folder)], prefix):
            if info.name not in NOT_PRELOADED and not info.name.endswith(".__main__"):
                found.append(info.name)
                if info.ispkg:
                    folders.append((folder / info.name.rsplit(".", 1)[1], info.name + "."))
    return sorted(found)


def _serve() -> None:
    """Import ``PRELOAD``, then fork one kernel per request line until stdin closes."""
    import importlib
    import signal

    for name in PRELOAD:
        importlib.import_module(name)
    _import_as_in_a_kernel("pandas")
    for name in _library_modules():
        importlib.import_module(name)
    if looked := [name for name in SHELL_AWARE if name in sys.modules]:
        raise RuntimeError(f"preloading imported {looked}, which look at the shell when imported")
    from matplotlib.font_manager import FontProperties
    from matplotlib.mathtext import MathTextParser

    MathTextParser("agg").parse("$x$", 72, FontProperties())

    def reap(*_: Any) -> None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass

    signal.signal(signal.SIGCHLD, reap)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        waiting, ready = os.pipe()
        try:
            pid = os.fork()
        except OSError as err:
            os.close(waiting)
            os.close(ready)
            print(json.dumps({"error": f"fork failed: {err}"}), flush=True)
            continue
        if pid == 0:
            os.close(waiting)
            _child(request, ready)
        os.close(ready)
        ok = os.read(waiting, 1) == b"1"  # empty: the child ended before leading its session
        os.close(waiting)
        print(json.dumps({"pid": pid} if ok else {"error": "the forked kernel did not start"}), flush=True)


if __name__ == "__main__":
    _serve()
