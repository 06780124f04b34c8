"""Time the grader on synthetic submissions: N students x the shipped exercise 8-8 (right, typed, wrong, empty).

python benchmarks/grade_bench.py [N] [JOBS] [--no-sandbox]   (defaults 100 and 2); prints the time per submission
(wall; with --no-sandbox also the CPU seconds of the grader and everything it started, which the machine's other
load does not inflate: a sandbox's processes are not reaped by the grader, so their CPU time does not show), the
load average while it ran, and a sample of grades.csv. Each notebook runs in its own bubblewrap sandbox unless
--no-sandbox is given, twice in one kernel: on the student's variant of the inputs, then on the public ones.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from inferlab.exercises import grader as grade  # noqa: E402

from _submissions import submission, typist  # noqa: E402


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(n: int = 100, jobs: int = 2, sandbox: bool = True) -> dict[str, float]:
    kinds = ["right", "typed", "wrong", "empty"]
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        subs.mkdir()
        for i in range(n):
            kind = kinds[i % len(kinds)]
            nb = (submission("8-8", f"student{i:03d}", wrong=kind == "wrong") if kind in ("right", "wrong") else
                  typist("8-8", f"student{i:03d}") if kind == "typed" else
                  nbformat.read(ROOT / "exercises" / "8-8-task-time.ipynb", as_version=4))
            nbformat.write(nb, subs / f"student{i:03d}_8-8-task-time.ipynb")
        load0, cpu0, t0 = os.getloadavg()[0], _cpu(), time.perf_counter()
        results = grade.grade([subs], Path(tmp) / "out", jobs=jobs, timeout_s=60, progress=False, sandbox=sandbox)
        elapsed, cpu, load1 = time.perf_counter() - t0, _cpu() - cpu0, os.getloadavg()[0]
        how = "sandboxed" if sandbox else "no sandbox"
        cpu_text = "" if sandbox else f"{cpu / n:.2f} CPU-s per submission; "
        print(f"{n} submissions, -j {jobs}, {how}, two runs each (variant, public): {elapsed:.1f} s "
              f"({elapsed / n:.2f} s per submission; {cpu_text}load average {load0:.1f} -> {load1:.1f} "
              f"on {os.cpu_count()} cores)")
        lines = (Path(tmp) / "out" / "grades.csv").read_text().splitlines()
        for line in lines[:13]:
            print(line)
        assert sum(r.status == "graded" for r in results) == n
        statuses = {kind: {p.status for r in results[i::len(kinds)] for p in r.parts} for i, kind in enumerate(kinds)}
        assert statuses == {"right": {"correct"}, "typed": {"wrong on variant"}, "wrong": {"wrong"},
                            "empty": {"not attempted"}}, statuses
        return {"seconds_per_submission": elapsed / n, "cpu_seconds_per_submission": cpu / n}


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3] if a.isdigit()), sandbox="--no-sandbox" not in sys.argv)
