"""All benchmarks (`make bench`): scheduler throughput, widget redraw times, notebook execution times."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, *args: str) -> None:
    """Run one benchmark script with this interpreter, streaming its output."""
    print(f"\n== {script} {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], check=True)


def notebook_times() -> None:
    """Execute every notebook once (headless, with inferlab.headless) and print its wall time."""
    import nbformat
    from nbclient import NotebookClient

    from inferlab import headless

    headless.install()

    print("\n== notebook execution times")
    for path in sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*.ipynb")]):
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
        print(f"{path.relative_to(ROOT)!s:55s} {time.perf_counter() - t0:6.1f} s", flush=True)


if __name__ == "__main__":
    run("scheduler_bench.py")
    run("widgets_bench.py")
    notebook_times()
