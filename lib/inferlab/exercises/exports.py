"""What the grader writes for instructors: the report, the grade sheet, the free-text answers and LMS results.

``write_reports(results, out_dir, how)`` writes, each file atomically (a temporary file beside it, then
``os.replace``):

- ``report.json``: how the notebooks ran (``how``) and every submission with its parts, flags and variant;
- ``grades.csv``: one row per part (CSV cells a spreadsheet would run as a formula are escaped);
- ``free_text.md``: every free-text answer, by exercise and part, for a person to grade (each answer in a
  code fence longer than any run of backticks inside it, so no answer can break the page's structure);
- ``prairielearn/<student>__<exercise>.json``: PrairieLearn's external-grader ``results.json`` per
  submission (``score`` 0-1, ``tests`` with ``name``, ``points``, ``max_points``, ``output``), and
  ``results.json`` itself when the batch holds one submission (as PrairieLearn grades one at a time).

``gradescope_results`` builds Gradescope's ``results.json`` (per-part ``score``, ``max_score``, ``name``,
``output``, ``visibility``) for the autograder bundle (``bundle``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .catalog import EXERCISES

__all__ = ["write_reports", "free_text", "prairielearn_results", "gradescope_results", "atomic", "csv_cell"]

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(v: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula (a leading = + - @ gets a quote)."""
    return "'" + v if isinstance(v, str) and v.startswith(_FORMULA) else v


def atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _grades_csv(results: list[Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student", "exercise", "part", "status", "points", "max_points", "file", "message", "flags"])
    for s in results:
        flags = "; ".join(s.flags)
        rows = [[p.part, p.status, p.points, p.max_points, p.message] for p in s.parts] or \
            [["", s.status, 0, 0, s.message]]
        for part, status, points, max_points, message in rows:
            w.writerow([csv_cell(x) for x in (s.student, s.exercise, part, status, points, max_points, s.file, message,
                                              flags)])
    return buf.getvalue()


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}text\n{text}\n{bar}"


def free_text(results: list[Any]) -> str:
    """Every free-text answer as Markdown: a section per exercise and part (its question), one entry per student."""
    by: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)
    for s in results:
        for p in s.parts:
            if p.status == "manual":
                by[s.exercise, p.part].append((s.student, s.file, p.answer))
    lines = ["# Free-text answers", "", "One section per exercise and part; each answer as the student's notebook "
             "held it. Grade them here; the machine-graded parts are in grades.csv.", ""]
    for ex_id in sorted({k[0] for k in by}):
        ex = EXERCISES.get(ex_id)
        lines += [f"## Exercise {ex_id}" + (f" · {ex.title}" if ex else ""), ""]
        for part in [p.name for p in ex.parts] if ex else sorted(k[1] for k in by if k[0] == ex_id):
            if (ex_id, part) not in by:
                continue
            question = ex.part(part).question if ex else ""
            lines += [f"### `{part}`: {question}", ""]
            for student, file, answer in sorted(by[ex_id, part]):
                lines += [f"**{student}** ({file})", "", _fence(answer), ""]
    if not by:
        lines += ["(no free-text answers in this batch)", ""]
    return "\n".join(lines)


def _tests(s: Any) -> list[dict[str, Any]]:
    ex = EXERCISES.get(s.exercise)
    out = []
    for p in s.parts:
        question = ex.part(p.part).question if ex and p.part in ex._by_name else ""
        out.append({"name": f"{s.exercise} {p.part}", "description": question, "points": p.points,
                    "max_points": p.max_points, "output": f"{p.status}: {p.message}" if p.message else p.status})
    return out


def prairielearn_results(s: Any) -> dict[str, Any]:
    """PrairieLearn's external-grader results for one submission (``score`` from 0 to 1)."""
    total = sum(p.max_points for p in s.parts)
    message = "; ".join([s.message, *s.flags]).strip("; ")
    return {"gradable": s.status == "graded", "score": (s.points / total) if total else 0.0,
            "message": message, "output": message, "tests": _tests(s)}


def gradescope_results(subs: list[Any], note: str, execution_time: float | None = None) -> dict[str, Any]:
    """Gradescope's results.json for one student's submission (its notebooks ``subs``): one test per part."""
    tests = []
    for s in subs:
        for t in _tests(s):
            tests.append({"name": f"{t['name']}: {t['description']}" if t["description"] else t["name"],
                          "score": t["points"], "max_score": t["max_points"], "output": t["output"],
                          "visibility": "visible", "status": "passed" if t["points"] >= t["max_points"] else "failed"})
    lines = [note] + [f"{s.file}: {s.status}" + (f" ({s.message})" if s.message else "") for s in subs] + \
        [f"{s.file}: {f}" for s in subs for f in s.flags]
    out: dict[str, Any] = {"score": sum(s.points for s in subs), "output": "\n".join(lines), "visibility": "visible",
                           "stdout_visibility": "hidden", "tests": tests}
    if execution_time is not None:
        out["execution_time"] = round(execution_time, 1)
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"


def write_reports(results: list[Any], out_dir: Path, how: dict[str, Any]) -> None:
    """report.json, grades.csv, free_text.md and the PrairieLearn results of ``results`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"grader": how, "submissions": [{**asdict(s), "points": s.points} for s in results]}
    atomic(out_dir / "report.json", json.dumps(report, indent=1, default=str))
    atomic(out_dir / "grades.csv", _grades_csv(results))
    atomic(out_dir / "free_text.md", free_text(results))
    seen: dict[str, int] = defaultdict(int)
    for s in results:
        stem = _safe(f"{s.student}__{s.exercise or 'unknown'}")
        seen[stem] += 1
        name = stem if seen[stem] == 1 else f"{stem}__{seen[stem]}"
        atomic(out_dir / "prairielearn" / f"{name}.json", json.dumps(prairielearn_results(s), indent=1, default=str))
    if len(results) == 1:
        atomic(out_dir / "results.json", json.dumps(prairielearn_results(results[0]), indent=1, default=str))
