"""Test-session set-up: reliable headless notebook execution for nbmake (xdist workers too).

Under nbmake, notebooks execute as the book build executes them (explorers emit offline frames),
and each notebook that passes is stored in the book's execution cache (``_build/.jupyter_cache``),
so ``make test`` executes every notebook once: nbmake runs it, the book build reuses its outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from inferlab import headless  # noqa: E402
from inferlab.book.widgets import OFFLINE_ENV  # noqa: E402
from inferlab.headless import store_in_book_cache  # noqa: E402

headless.install()

ROOT = Path(__file__).resolve().parent
BOOK_CACHE = ROOT / "_build" / ".jupyter_cache"


def _share_nbmake_runs_with_the_book() -> None:
    import time

    from nbmake.nb_run import NotebookRun

    if getattr(NotebookRun, "_inferlab_cached", False):
        return
    execute = NotebookRun.execute

    def execute_and_cache(self: NotebookRun):
        t0 = time.perf_counter()
        result = execute(self)
        if result.error is None:
            store_in_book_cache(result.nb, Path(self.filename).resolve(), BOOK_CACHE, time.perf_counter() - t0)
        return result

    NotebookRun.execute = execute_and_cache
    NotebookRun._inferlab_cached = True


def _forked_kernels():
    """tests/_forked_kernels.py (the tests folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_forked_kernels", ROOT / "tests" / "_forked_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "book: needs the built book in _build/html (make test builds it first)")
    if getattr(config.option, "nbmake", False):
        os.environ[OFFLINE_ENV] = "1"  # kernels inherit it: explorers draw their offline frames, as in the book
        _share_nbmake_runs_with_the_book()
        if os.environ.get("INFERLAB_FORKED_KERNELS", "1") != "0":
            _forked_kernels().install()
