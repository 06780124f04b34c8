"""Time the grader on synthetic submissions: N students x the shipped exercise 8-8 (mixed right, wrong, empty).

python benchmarks/grade_bench.py [N] [JOBS] [--no-sandbox]   (defaults 100 and 2); prints the time per submission
and a sample of grades.csv. Each notebook runs in its own bubblewrap sandbox unless --no-sandbox is given.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from inferlab.exercises import grader as grade  # noqa: E402

from _submissions import submission  # noqa: E402


def main(n: int = 100, jobs: int = 2, sandbox: bool = True) -> None:
    kinds = ["right", "wrong", "empty"]
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        subs.mkdir()
        for i in range(n):
            kind = kinds[i % 3]
            nb = submission("8-8", f"student{i:03d}", wrong=kind == "wrong") if kind != "empty" else \
                nbformat.read(ROOT / "exercises" / "8-8-task-time.ipynb", as_version=4)
            nbformat.write(nb, subs / f"student{i:03d}_8-8-task-time.ipynb")
        t0 = time.perf_counter()
        results = grade.grade([subs], Path(tmp) / "out", jobs=jobs, timeout_s=60, progress=False, sandbox=sandbox)
        elapsed = time.perf_counter() - t0
        how = "sandboxed" if sandbox else "no sandbox"
        print(f"{n} submissions, -j {jobs}, {how}: {elapsed:.1f} s ({elapsed / n:.2f} s per submission)")
        print((Path(tmp) / "out" / "grades.csv").read_text().splitlines()[0])
        for line in (Path(tmp) / "out" / "grades.csv").read_text().splitlines()[1:10]:
            print(line)
        assert sum(r.status == "graded" for r in results) == n


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3] if a.isdigit()), sandbox="--no-sandbox" not in sys.argv)
