"""The grader: full marks for right answers, none for wrong or faked ones, every failure reported, inputs untouched.

One batch (the ``graded`` fixture) holds honest notebooks beside hostile ones (``tests/_submissions.py``),
each trying one way around the grader: typing the public answers instead of computing them from the
inputs, calling the library a part forbids, hiding the inputs from the parameters cell, forging the
answers or the name, reading another student's notebook or the references, writing outside its
sandbox, leaving processes behind, exhausting memory, processes, disk or output, killing its worker,
and inputs that used to lose the whole batch. The tests check that the honest grades are unchanged,
that no cheater gains a mark, that nothing outside the sandbox changed and no process of the
sandbox's uid is left, and that the report is complete.
"""

import csv
import fcntl
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat
import psutil
import pytest

from inferlab.exercises import EXERCISES
from inferlab.exercises import grader as grade
from inferlab.exercises import sandbox

import _submissions as subs_
from _submissions import notebook_path, submission

needs_sandbox = pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox: {sandbox.unavailable()}")

CHEAT = """
import inferlab.exercises as ie, inferlab.exercises.core as core
from inferlab.exercises.core import Verdict
core.judge = lambda part, answer, expected=None: Verdict("correct", part.points, "correct")
ie.judge = core.judge
check = lambda *a, **k: None
"""
LIB = Path(grade.__file__).resolve().parents[2]
SECRET = "the canary's secret text"


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def sandbox_processes(owner: int) -> list[psutil.Process]:
    """Live processes of the sandbox's uid started by the grader ``owner`` (a pid), or that hide who started them.

    Sandboxes carry their grader's pid in $SANDBOX_OWNER, so tests running side by side (xdist) do not see
    each other's; a process that removed it from its environment is counted as this grader's.
    """
    out = []
    for p in psutil.process_iter(["uids", "status"]):
        if not p.info["uids"] or p.info["uids"].real != sandbox.SANDBOX_UID or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if p.environ().get(sandbox.OWNER_ENV, str(owner)) == str(owner):
                out.append(p)
        except psutil.Error:  # gone meanwhile
            pass
    return out


def wait_for_no_sandbox_processes(owner: int, seconds: float = 3.0) -> list[psutil.Process]:
    end = time.monotonic() + seconds
    while (left := sandbox_processes(owner)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The batch, graded once per test session: under xdist the first worker grades it, the others read its pickle."""
    if sandbox.unavailable():
        pytest.skip(f"no sandbox: {sandbox.unavailable()} (make bubblewrap)")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this session's, for every worker
    with open(shared / "graded.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cache = shared / "graded.pickle"
        if not cache.exists():
            cache.write_bytes(pickle.dumps(_grade_the_batch(tmp_path_factory)))
        return pickle.loads(cache.read_bytes())


def _grade_the_batch(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out")
    outside = tmp_path_factory.mktemp("outside")
    canary = outside / "canary.txt"
    canary.write_text(SECRET, encoding="utf-8")
    targets = {"honest": str(subs / "ada_8-8-task-time.ipynb"), "runs": str(sandbox.runs_root()),
               "canary": str(canary), "out": str(out), "lib": str(LIB)}
    known = {p.name: p.expected() for p in EXERCISES["8-8"].parts}
    nbformat.write(submission("8-8", "Ada"), subs / "ada_8-8-task-time.ipynb")
    nbformat.write(submission("8-8", "Bob", wrong=True), subs / "bob_8-8-task-time.ipynb")
    nbformat.write(submission("8-8", "Cy", wrong=True, extra=CHEAT), subs / "cy_8-8-task-time.ipynb")
    # a cell that never ends; it sleeps, so its 8 s leave the CPU to the rest of the test suite
    nbformat.write(submission("8-3", "", extra="import time\nwhile True:\n    time.sleep(0.05)"),
                   subs / "dee_8-3-block-size.ipynb")
    (subs / "eve_8-1.ipynb").write_text('{"cells": [', encoding="utf-8")
    (subs / "notes.txt").write_text("not a notebook", encoding="utf-8")
    nbformat.write(nbformat.read(notebook_path("8-9"), as_version=4), subs / "fay_8-9.ipynb")
    # hostile notebooks (tests/_submissions.py says what each tries)
    nbformat.write(subs_.forger(known, "Ada"), subs / "mallory_8-8.ipynb")
    nbformat.write(subs_.snoop(targets), subs / "sly_8-8.ipynb")
    nbformat.write(subs_.daemon(targets), subs / "dae_8-8.ipynb")
    nbformat.write(subs_.hog(), subs / "hog_8-8.ipynb")
    nbformat.write(subs_.worker_killer(known), subs / "zed_8-8.ipynb")
    nbformat.write(subs_.bytes_keys(), subs / "kim_8-8.ipynb")
    nbformat.write(subs_.typist("8-8", "Tim"), subs / "tim_8-8.ipynb")
    nbformat.write(subs_.forbidden_call(), subs / "che_8-8.ipynb")
    nbformat.write(subs_.no_parameters(), subs / "nop_8-8.ipynb")
    nbformat.write(submission("8-8", ""), subs / "=HYPERLINK(1)_8-8.ipynb")
    (subs / "link_8-8.ipynb").symlink_to(canary)
    os.mkfifo(subs / "pipe_8-8.ipynb")
    zips = tmp_path_factory.mktemp("zip")
    with zipfile.ZipFile(zips / "class.zip", "w") as z:
        z.writestr("gus_1234_8-3-block-size.ipynb", nbformat.writes(submission("8-3", "")))
    with zipfile.ZipFile(zips / "late.zip", "w") as z:  # a second zip: its members' staging names must not clash
        z.writestr("gus_1234_8-3-block-size.ipynb", nbformat.writes(submission("8-3", "", wrong=True)))
    with zipfile.ZipFile(zips / "empty.zip", "w"):
        pass
    # this process' own grading folders: other workers and test chains grade beside this one, in their own folders
    mine = f"-{os.getpid()}-"
    temporary = lambda: ({p for p in Path(tempfile.gettempdir()).glob("inferlab-grade*") if p != sandbox.runs_root()}  # noqa: E731
                         | {p for p in sandbox.runs_root().glob("*") if mine in p.name})
    temporary_before = temporary()
    inputs_before = {**_digest(subs), **_digest(zips)}
    lib_before = _digest(LIB / "inferlab" / "exercises")
    t0 = time.perf_counter()
    # 8 s per run: the never-ending cell sleeps it out (no CPU taken), while an honest 8-8 run, about 1 s alone,
    # stays well inside it while make test runs up to five busy processes on two cores (the unit tests' two
    # workers beside the PDF's and the browser test's Chromium; at 2 s one run timed out there)
    results = grade.grade([subs, zips / "class.zip", zips / "late.zip", zips / "empty.zip"], out, jobs=2,
                          timeout_s=8, progress=False, secret="the batch's secret")
    elapsed = time.perf_counter() - t0
    leftover = wait_for_no_sandbox_processes(os.getpid())
    time.sleep(0.3)  # a daemon that survived would rewrite the report or the canary now
    state = {"inputs": inputs_before == {**_digest(subs), **_digest(zips)}, "leftover": [p.pid for p in leftover],
             "canary": canary.read_text(encoding="utf-8"), "lib_before": lib_before,
             "lib_after": _digest(LIB / "inferlab" / "exercises"), "temporary": temporary() - temporary_before}
    by = {r.file.rsplit("/", 1)[-1]: r for r in results}
    print(f"\n{len(results)} submissions graded in {elapsed:.1f} s at -j 2")
    return by, out, state, elapsed


def test_right_answers_score_full_marks(graded) -> None:
    by, *_ = graded
    ada = by["ada_8-8-task-time.ipynb"]
    assert ada.status == "graded" and ada.points == EXERCISES["8-8"].max_points
    assert {p.status for p in ada.parts} == {"correct"}
    assert ada.student == "ada_8-8-task-time" and ada.declared == "Ada" and ada.flags == []
    assert ada.variant and ada.variant != dict(EXERCISES["8-8"].inputs)  # graded on a variant of the inputs


def test_typed_public_answers_fail_the_variant_and_the_report_says_so(graded) -> None:
    """A typist passes check (the public inputs) beside Ada in the same batch, and fails the variant."""
    by, *_ = graded
    tim = by["tim_8-8.ipynb"]
    assert tim.status == "graded" and tim.points == 0 and tim.variant
    assert {p.status for p in tim.parts} == {"wrong on variant"}
    assert all("correct on the public inputs, wrong on the variant" in p.message for p in tim.parts)
    assert by["ada_8-8-task-time.ipynb"].points == EXERCISES["8-8"].max_points  # the honest grade unchanged
    assert tim.variant != by["ada_8-8-task-time.ipynb"].variant  # each student draws a variant of their own


def test_a_forbidden_call_or_a_missing_parameters_cell_needs_review(graded) -> None:
    by, *_ = graded
    che = {p.part: p for p in by["che_8-8.ipynb"].parts}
    assert che["net_speedup"].status == "needs review" and che["net_speedup"].points == 0
    assert "inferlab.serving.task_time" in che["net_speedup"].message and "correct" in che["net_speedup"].message
    assert che["halved_s"].status == che["breakeven_setup_s"].status == "correct"
    nop = by["nop_8-8.ipynb"]
    assert {p.status for p in nop.parts} == {"needs review"} and nop.points == 0 and not nop.variant
    assert any("parameters" in f for f in nop.flags) and all("parameters" in p.message for p in nop.parts)


def test_wrong_answers_score_zero(graded) -> None:
    by, *_ = graded
    assert by["bob_8-8-task-time.ipynb"].points == 0
    assert {p.status for p in by["bob_8-8-task-time.ipynb"].parts} == {"wrong"}


def test_patching_check_and_judge_in_the_kernel_gains_nothing(graded) -> None:
    by, *_ = graded
    assert by["cy_8-8-task-time.ipynb"].status == "graded" and by["cy_8-8-task-time.ipynb"].points == 0


def test_an_endless_loop_times_out(graded) -> None:
    by, *_ = graded
    dee = by["dee_8-3-block-size.ipynb"]
    assert dee.status == "timeout" and all(p.status == "timeout" for p in dee.parts)


def test_broken_files_are_reported_and_the_run_goes_on(graded) -> None:
    by, *_ = graded
    assert by["eve_8-1.ipynb"].status == "error" and "notebook" in by["eve_8-1.ipynb"].message
    assert by["notes.txt"].status == "error"


def test_shipped_notebook_is_not_attempted_and_manual_parts_are_marked(graded) -> None:
    by, *_ = graded
    fay = by["fay_8-9.ipynb"]
    assert fay.status == "graded" and {p.status for p in fay.parts} == {"not attempted"}


def test_zip_members_are_graded_named_by_file_and_duplicates_flagged(graded) -> None:
    by, *_ = graded
    gus, late = by["class.zip:gus_1234_8-3-block-size.ipynb"], by["late.zip:gus_1234_8-3-block-size.ipynb"]
    assert gus.status == "graded" and gus.points == EXERCISES["8-3"].max_points and gus.student == late.student
    assert late.status == "graded" and late.points == 0
    assert all(any("2 submissions of 8-3" in f for f in s.flags) for s in (gus, late))


def test_forged_output_hooks_and_patches_change_neither_name_nor_grade(graded) -> None:
    by, *_ = graded
    mallory = by["mallory_8-8.ipynb"]
    assert mallory.status == "graded" and mallory.points == 0 and mallory.student == "mallory_8-8"
    assert mallory.declared == "Ada" and any("does not match" in f for f in mallory.flags)
    assert by["ada_8-8-task-time.ipynb"].points == EXERCISES["8-8"].max_points  # the real Ada keeps her grade


def test_other_submissions_references_and_files_outside_are_out_of_reach(graded) -> None:
    by, out, state, _ = graded
    assert by["sly_8-8.ipynb"].status == "graded" and by["sly_8-8.ipynb"].points == 0
    assert state["canary"] == SECRET
    assert state["lib_after"] == state["lib_before"] and not (LIB / "snooped.txt").exists()
    assert "SNOOPED" not in (LIB / "inferlab" / "exercises" / "catalog.py").read_text(encoding="utf-8")


def test_no_process_outlives_the_run_and_the_report_is_the_graders(graded) -> None:
    by, out, state, elapsed = graded
    assert state["leftover"] == []
    dae = by["dae_8-8.ipynb"]  # its daemon held the pipes and wrote for a minute: the grade stands, on time
    assert dae.status == "graded" and dae.points == EXERCISES["8-8"].max_points
    report = json.loads((out / "report.json").read_text())
    assert len(report["submissions"]) == len(by) and report["grader"]["sandbox"] == "bwrap"
    assert elapsed < 60


def test_resource_hogs_and_a_killed_worker_are_rows(graded) -> None:
    by, *_ = graded
    hog = by["hog_8-8.ipynb"]
    assert hog.status == "error" and "printed more than" in hog.message and hog.points == 0
    zed = by["zed_8-8.ipynb"]
    assert zed.status == "error" and zed.points == 0 and "worker" in zed.message


def test_awkward_inputs_are_rows_not_crashes(graded) -> None:
    by, out, *_ = graded
    kim = {p.part: p.status for p in by["kim_8-8.ipynb"].parts}  # {b"prefill": ...}: decoded, judged as check does
    assert kim == {"halved_s": "wrong", "net_speedup": "correct", "breakeven_setup_s": "correct"}
    assert by["empty.zip"].status == "error" and "no files" in by["empty.zip"].message
    assert by["link_8-8.ipynb"].status == "error" and "symbolic link" in by["link_8-8.ipynb"].message
    assert by["pipe_8-8.ipynb"].status == "error"
    assert SECRET not in (out / "report.json").read_text() + (out / "grades.csv").read_text()


def test_inputs_are_never_modified_and_no_temporary_folder_is_left(graded) -> None:
    _, _, state, _ = graded
    assert state["inputs"] and state["temporary"] == set()


def test_report_files(graded) -> None:
    by, out, _, _ = graded
    report = json.loads((out / "report.json").read_text())
    assert {r["file"] for r in report["submissions"]} == {s.file for s in by.values()}
    assert report["grader"]["limits"]["tasks"] > 0
    with open(out / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {"student", "exercise", "part", "status", "points", "flags"} <= set(rows[0])
    ada = [r for r in rows if r["student"] == "ada_8-8-task-time"]
    assert len(ada) == len(EXERCISES["8-8"].parts) and all(r["status"] == "correct" for r in ada)
    formula = [r for r in rows if "HYPERLINK" in r["student"]]
    assert formula and all(r["student"].startswith("'=") and r["file"][0] not in "=+-@" for r in formula)
    assert {r["student"] for r in rows} >= {"empty", "link_8-8"}  # nobody vanishes
    assert not list(out.glob(".*")) and not list((out / "prairielearn").glob(".*"))  # no temporary files
    assert report["grader"]["secret"] == "--secret" and "the batch's secret" not in json.dumps(report)
    pl = json.loads((out / "prairielearn" / "ada_8-8-task-time__8-8.json").read_text())
    assert pl["score"] == 1 and {t["name"] for t in pl["tests"]} == {f"8-8 {p.name}" for p in EXERCISES["8-8"].parts}
    assert len(list((out / "prairielearn").glob("*.json"))) == len(report["submissions"])
    assert (out / "free_text.md").read_text().startswith("# Free-text answers")


@needs_sandbox
def test_sigkill_of_the_grader_leaves_no_process_and_the_next_run_cleans_up(tmp_path) -> None:
    endless = submission("8-3", "", extra="import time\nwhile True:\n    time.sleep(0.05)")
    nbformat.write(endless, tmp_path / "d_8-3.ipynb")
    grader = subprocess.Popen([sys.executable, "-m", "inferlab.grade", str(tmp_path / "d_8-3.ipynb"), "--out",
                               str(tmp_path / "out0"), "--timeout", "60"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)

    def kernel_started() -> bool:  # the sandbox's kernel, not the grader's first check that sandboxes work
        for p in sandbox_processes(grader.pid):
            try:
                if "ipykernel" in " ".join(p.cmdline()):
                    return True
            except psutil.Error:
                pass
        return False

    end = time.monotonic() + 60
    while not kernel_started() and time.monotonic() < end:
        time.sleep(0.05)
    assert kernel_started(), "the sandbox never started"
    grader.kill()
    grader.wait()
    assert wait_for_no_sandbox_processes(grader.pid) == []
    stale = list(sandbox.runs_root().glob(f"run-{grader.pid}-*"))  # its run folder is named after its pid
    assert stale, "the killed run left no folder: nothing to clean"
    # the next run (the command line, one notebook) removes the killed run's folder
    nbformat.write(submission("8-8", "Ada"), tmp_path / "a_8-8.ipynb")
    run = subprocess.run([sys.executable, "-m", "inferlab.grade", str(tmp_path / "a_8-8.ipynb"), "--out",
                          str(tmp_path / "out"), "-j", "1"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "1 graded" in run.stdout and (tmp_path / "out" / "grades.csv").exists()
    assert not any(p.exists() for p in stale)


def test_without_a_sandbox_the_grader_refuses_unless_told(tmp_path) -> None:
    nbformat.write(submission("8-8", "Ada"), tmp_path / "a_8-8.ipynb")
    tools = tmp_path / "bin"  # a PATH with the limits tool but no bwrap
    tools.mkdir()
    (tools / "prlimit").symlink_to("/usr/bin/prlimit")
    env = {**os.environ, "PATH": str(tools)}
    cmd = [sys.executable, "-m", "inferlab.grade", str(tmp_path / "a_8-8.ipynb"), "--out", str(tmp_path / "out")]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "bwrap is not installed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    told = subprocess.run(cmd + ["--no-sandbox"], capture_output=True, text=True, env=env, timeout=120)
    assert told.returncode == 0, told.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["grader"]["sandbox"] == "none" and report["submissions"][0]["points"] == 3


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="jobs"):
        grade.grade([], Path("x"), jobs=0)
    with pytest.raises(ValueError, match="does not exist"):
        grade.collect([Path("/nonexistent/sub.ipynb")], Path("/tmp"))
