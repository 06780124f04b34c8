"""The grader: full marks for right answers, none for wrong or faked ones, every failure reported, inputs untouched."""

import csv
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from inferlab.exercises import EXERCISES
from inferlab.exercises import grader as grade

from _submissions import notebook_path, submission

CHEAT = """
import inferlab.exercises as ie, inferlab.exercises.core as core
from inferlab.exercises.core import Verdict
core.judge = lambda part, answer, expected=None: Verdict("correct", part.points, "correct")
ie.judge = core.judge
check = lambda *a, **k: None
"""


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    nbformat.write(submission("8-8", "Ada"), subs / "ada_8-8-task-time.ipynb")
    nbformat.write(submission("8-8", "Bob", wrong=True), subs / "bob_8-8-task-time.ipynb")
    nbformat.write(submission("8-8", "Cy", wrong=True, extra=CHEAT), subs / "cy_8-8-task-time.ipynb")
    # a cell that never ends; it sleeps, so its 12 s leave the CPU to the rest of the test suite
    nbformat.write(submission("8-3", "", extra="import time\nwhile True:\n    time.sleep(0.05)"),
                   subs / "dee_8-3-block-size.ipynb")
    (subs / "eve_8-1.ipynb").write_text('{"cells": [', encoding="utf-8")
    (subs / "notes.txt").write_text("not a notebook", encoding="utf-8")
    nbformat.write(nbformat.read(notebook_path("8-9"), as_version=4), subs / "fay_8-9.ipynb")
    zipped = tmp_path_factory.mktemp("zip") / "class.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("gus_1234_8-3-block-size.ipynb", nbformat.writes(submission("8-3", "")))
    before = {**_digest(subs), **_digest(zipped.parent)}
    out = tmp_path_factory.mktemp("out")
    t0 = time.perf_counter()
    results = grade.grade([subs, zipped], out, jobs=2, timeout_s=12, progress=False)
    elapsed = time.perf_counter() - t0
    after = {**_digest(subs), **_digest(zipped.parent)}
    return {r.student: r for r in results}, out, before, after, elapsed


def test_right_answers_score_full_marks(graded) -> None:
    by, *_ = graded
    ada = by["Ada"]
    assert ada.status == "graded" and ada.points == EXERCISES["8-8"].max_points
    assert {p.status for p in ada.parts} == {"correct"}


def test_wrong_answers_score_zero(graded) -> None:
    by, *_ = graded
    assert by["Bob"].points == 0 and {p.status for p in by["Bob"].parts} == {"wrong"}


def test_patching_check_and_judge_in_the_kernel_gains_nothing(graded) -> None:
    by, *_ = graded
    assert by["Cy"].status == "graded" and by["Cy"].points == 0


def test_an_endless_loop_times_out(graded) -> None:
    by, *_ = graded
    dee = by["dee_8-3-block-size"]
    assert dee.status == "timeout" and all(p.status == "timeout" for p in dee.parts)


def test_broken_files_are_reported_and_the_run_goes_on(graded) -> None:
    by, *_ = graded
    assert by["eve_8-1"].status == "error" and "notebook" in by["eve_8-1"].message
    assert by["notes"].status == "error"


def test_shipped_notebook_is_not_attempted_and_manual_parts_are_marked(graded) -> None:
    by, *_ = graded
    fay = by["fay_8-9"]
    assert fay.status == "graded" and {p.status for p in fay.parts} == {"not attempted"}


def test_zip_members_are_graded_and_named_by_file(graded) -> None:
    by, *_ = graded
    gus = by["gus_1234_8-3-block-size"]
    assert gus.status == "graded" and gus.points == EXERCISES["8-3"].max_points


def test_inputs_are_never_modified(graded) -> None:
    _, _, before, after, _ = graded
    assert before == after


def test_report_files(graded) -> None:
    by, out, _, _, elapsed = graded
    report = json.loads((out / "report.json").read_text())
    assert {r["student"] for r in report} == set(by)
    with open(out / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {"student", "exercise", "part", "status", "points"} <= set(rows[0])
    ada = [r for r in rows if r["student"] == "Ada"]
    assert len(ada) == len(EXERCISES["8-8"].parts) and all(r["status"] == "correct" for r in ada)
    assert elapsed < 120


def test_command_line(tmp_path) -> None:
    nbformat.write(submission("8-8", "Ada"), tmp_path / "a_8-8.ipynb")
    run = subprocess.run([sys.executable, "-m", "inferlab.grade", str(tmp_path / "a_8-8.ipynb"), "--out",
                          str(tmp_path / "out"), "-j", "1"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "1 graded" in run.stdout and (tmp_path / "out" / "grades.csv").exists()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="jobs"):
        grade.grade([], Path("x"), jobs=0)
    with pytest.raises(ValueError, match="does not exist"):
        grade.collect([Path("/nonexistent/sub.ipynb")], Path("/tmp"))
