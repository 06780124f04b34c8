"""Grade a class's exercise notebooks: ``python -m inferlab.grade SUBMISSIONS... --out DIR [-j N] [--timeout S]``.

Each submission (a notebook, a folder of them, or a zip as a learning-management system exports
it) runs headless in its own kernel, in its own process, under a time limit. After the student's
cells, one extra cell reads the answer variables and prints them as JSON. The comparison happens
here, in the grader's process, against references computed here by ``inferlab``: a submission
that redefines ``check`` or patches ``inferlab`` in its kernel changes nothing. Submissions are
read, never written. The report is ``DIR/report.json`` and ``DIR/grades.csv`` (one row per
student, exercise and part).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import EXERCISES, Exercise, judge  # light: references import their modules when computed

__all__ = ["PartResult", "Submission", "collect", "grade_file", "grade", "main"]

MARKER = "@@inferlab-answers@@"
DEFAULT_TIMEOUT_S = 120.0
_EXERCISE_IN_NAME = re.compile(r"(?<!\d)8-([1-9])(?!\d)")


@dataclass
class PartResult:
    """One graded part."""

    part: str
    status: str
    points: float
    max_points: float
    message: str = ""


@dataclass
class Submission:
    """One submitted file and what became of it."""

    file: str
    student: str
    exercise: str
    status: str  # graded | error | timeout
    message: str = ""
    parts: list[PartResult] = field(default_factory=list)

    @property
    def points(self) -> float:
        """Points earned on machine-graded parts."""
        return sum(p.points for p in self.parts)


# ---- kernel side: read the answers (runs inside the student's kernel) -----------------------------
_EXTRACT = r'''
def __inferlab_answers(names, probes):
    import json, math, numbers
    def enc(v):
        if v is Ellipsis:
            return {"__ellipsis__": True}
        if v is None or isinstance(v, str):
            return v
        if type(v).__name__ in ("bool", "bool_"):
            return bool(v)
        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, numbers.Real):
            f = float(v)
            return f if math.isfinite(f) else {"__float__": repr(f)}
        kind = type(v).__name__
        if kind == "DataFrame":
            return {"__frame__": {"index": enc(list(v.index)), "columns": enc([str(c) for c in v.columns]),
                                  "data": enc(v.to_numpy().tolist())}}
        if kind == "Series":
            return enc(v.to_dict())
        if kind == "ndarray":
            return enc(v.tolist())
        if isinstance(v, dict):
            return {"__dict__": [[enc(k), enc(x)] for k, x in v.items()]}
        if isinstance(v, (list, tuple)):
            return [enc(x) for x in v]
        return {"__repr__": repr(v)[:200]}
    out = {}
    g = globals()
    for name in names + ["STUDENT"]:
        if name not in g:
            out[name] = {"__missing__": True}
            continue
        value = g[name]
        if name in probes and callable(value):
            calls = []
            for args in probes[name]:
                try:
                    calls.append(enc(value(*args)))
                except Exception as err:
                    calls.append({"__error__": f"{type(err).__name__}: {err}"[:200]})
            out[name] = {"__calls__": calls}
        else:
            out[name] = enc(value)
    print("%s" + json.dumps(out))
__inferlab_answers(%r, %r)
'''


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "__ellipsis__" in v or "__missing__" in v:
        return Ellipsis
    if "__float__" in v:
        return float(v["__float__"])
    if "__frame__" in v:
        import pandas as pd

        f = v["__frame__"]
        return pd.DataFrame(_decode(f["data"]), index=_decode(f["index"]), columns=_decode(f["columns"]))
    if "__dict__" in v:
        return {_hashable(_decode(k)): _decode(x) for k, x in v["__dict__"]}
    if "__calls__" in v:
        return [_decode(x) for x in v["__calls__"]]
    if "__error__" in v:
        return {"error": v["__error__"]}
    if "__repr__" in v:
        return {"repr": v["__repr__"]}
    return {k: _decode(x) for k, x in v.items()}


def _hashable(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


# ---- worker: execute one notebook (its own process) ------------------------------------------------
def _worker(path: str, spec: str, timeout_s: float) -> dict[str, Any]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .. import headless

    headless.install()
    wanted = json.loads(spec)
    nb = nbformat.reads(Path(path).read_text(encoding="utf-8"), as_version=4)
    names, probes = wanted["names"], wanted["probes"]
    nb.cells.append(nbformat.v4.new_code_cell(_EXTRACT % (MARKER, names, probes)))
    workdir = tempfile.mkdtemp(prefix="inferlab-grade-")
    client = NotebookClient(nb, timeout=timeout_s, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    except CellTimeoutError:
        return {"status": "timeout", "message": f"a cell ran longer than {timeout_s:g} s"}
    except DeadKernelError as err:
        return {"status": "error", "message": f"the kernel died: {err}"[:300]}
    errors = [o for c in nb.cells[:-1] if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    for out in nb.cells[-1].get("outputs", []):
        text = out.get("text", "") if out.get("output_type") == "stream" else ""
        for line in text.splitlines():
            if line.startswith(MARKER):
                return {"status": "graded", "answers": json.loads(line[len(MARKER):]),
                        "message": f"{len(errors)} cell(s) raised an error" if errors else ""}
    return {"status": "error", "message": "the answers could not be read (the kernel state was broken)"}


# ---- grader side ----------------------------------------------------------------------------------
def _exercise_of(path: Path, nb: Any) -> str | None:
    meta = nb.get("metadata", {}).get("inferlab", {})
    if isinstance(meta, dict) and meta.get("exercise") in EXERCISES:
        return meta["exercise"]
    m = _EXERCISE_IN_NAME.search(path.name)
    return f"8-{m.group(1)}" if m and f"8-{m.group(1)}" in EXERCISES else None


def _student_from_name(path: Path) -> str:
    return path.stem


def _part_results(ex: Exercise, answers: dict[str, Any], expected: dict[str, Any]) -> list[PartResult]:
    results = []
    for part in ex.parts:
        value = _decode(answers.get(part.name, {"__missing__": True}))
        verdict = judge(part, value, None if part.manual else expected[part.name])
        results.append(PartResult(part.name, verdict.status, verdict.points, 0.0 if part.manual else part.points,
                                  "" if verdict.status == "correct" else verdict.message))
    return results


def grade_file(path: Path, timeout_s: float = DEFAULT_TIMEOUT_S, label: str | None = None,
               expected: dict[str, dict[str, Any]] | None = None) -> Submission:
    """Grade one submitted file (never modified); every failure becomes an entry, never an exception."""
    import nbformat

    shown = label or str(path)
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # not JSON, not a notebook, not UTF-8 ...
        return Submission(shown, _student_from_name(path), "", "error", f"not a readable notebook: {err}"[:300])
    ex_id = _exercise_of(path, nb)
    if ex_id is None:
        return Submission(shown, _student_from_name(path), "", "error",
                          "cannot tell which exercise this is (no inferlab metadata, no 8-N in the name)")
    ex = EXERCISES[ex_id]
    with tempfile.TemporaryDirectory(prefix="inferlab-sub-") as tmp:
        copy = Path(tmp) / "submission.ipynb"
        copy.write_bytes(path.read_bytes())
        spec = json.dumps({"names": [p.name for p in ex.parts],
                           "probes": {p.name: [list(a) for a in p.probes] for p in ex.parts if p.probes}})
        cmd = [sys.executable, "-m", "inferlab.grade", "--worker", str(copy), spec, str(timeout_s)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s + 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return _all(ex, shown, _student_from_name(path), "timeout", f"ran longer than {timeout_s:g} s")
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return _all(ex, shown, _student_from_name(path), "error", f"grader worker failed: {err.strip()[-300:]}")
    if result["status"] != "graded":
        return _all(ex, shown, _student_from_name(path), result["status"], result["message"])
    answers = result["answers"]
    student = _decode(answers.get("STUDENT"))
    student = student.strip() if isinstance(student, str) and student.strip() else _student_from_name(path)
    exp = (expected or {}).get(ex_id) or {p.name: p.expected() for p in ex.parts if not p.manual}
    return Submission(shown, student, ex_id, "graded", result["message"], _part_results(ex, answers, exp))


def _all(ex: Exercise, file: str, student: str, status: str, message: str) -> Submission:
    parts = [PartResult(p.name, status, 0.0, 0.0 if p.manual else p.points, message) for p in ex.parts]
    return Submission(file, student, ex.id, status, message, parts)


def collect(inputs: list[Path], staging: Path) -> list[tuple[Path, str]]:
    """(file to grade, label) for every notebook, folder member and zip member; zips unpack into ``staging``."""
    found: list[tuple[Path, str]] = []
    for item in inputs:
        if item.is_dir():
            found += [(p, str(p)) for p in sorted(item.rglob("*")) if p.is_file()
                      and not any(part.startswith(".") for part in p.relative_to(item).parts)]
        elif item.suffix == ".zip" and zipfile.is_zipfile(item):
            with zipfile.ZipFile(item) as z:
                for i, info in enumerate(z.infolist()):
                    name = Path(info.filename)
                    if info.is_dir() or name.name.startswith(".") or "__MACOSX" in name.parts:
                        continue
                    target = staging / f"{i:05d}" / name.name
                    target.parent.mkdir(parents=True)
                    target.write_bytes(z.read(info))
                    found.append((target, f"{item}:{info.filename}"))
        elif item.exists():
            found.append((item, str(item)))
        else:
            raise ValueError(f"submissions: {item} does not exist")
    return found


def grade(inputs: list[Path], out_dir: Path, jobs: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
          progress: bool = True) -> list[Submission]:
    """Grade every submission in ``inputs`` in parallel and write report.json and grades.csv into ``out_dir``."""
    if jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    expected = {ex.id: {p.name: p.expected() for p in ex.parts if not p.manual} for ex in EXERCISES.values()}
    with tempfile.TemporaryDirectory(prefix="inferlab-zip-") as staging:
        files = collect(inputs, Path(staging))
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(grade_file, p, timeout_s, label, expected) for p, label in files]
            if progress:
                from tqdm.auto import tqdm

                for _ in tqdm(cf.as_completed(futures), total=len(futures), desc="grading", unit="notebook"):
                    pass
            results = [f.result() for f in futures]
    _write(results, out_dir)
    return results


def _write(results: list[Submission], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(
        [{**asdict(s), "points": s.points} for s in results], indent=1, default=str), encoding="utf-8")
    with open(out_dir / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "exercise", "part", "status", "points", "max_points", "file", "message"])
        for s in results:
            if not s.parts:
                w.writerow([s.student, s.exercise, "", s.status, 0, 0, s.file, s.message])
            for p in s.parts:
                w.writerow([s.student, s.exercise, p.part, p.status, p.points, p.max_points, s.file, p.message])


def main(argv: list[str] | None = None) -> int:
    """Command line: grade submissions into --out; exit status 0 when the report was written."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        print(json.dumps(_worker(argv[1], argv[2], float(argv[3]))))
        return 0
    ap = argparse.ArgumentParser(prog="python -m inferlab.grade", description=__doc__.split("\n")[0])
    ap.add_argument("submissions", nargs="+", type=Path, help="notebooks, folders or zip files")
    ap.add_argument("--out", required=True, type=Path, help="folder for report.json and grades.csv")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per notebook")
    args = ap.parse_args(argv)
    results = grade(args.submissions, args.out, args.jobs, args.timeout)
    graded = sum(s.status == "graded" for s in results)
    print(f"{len(results)} submissions, {graded} graded; report in {args.out}")
    return 0

