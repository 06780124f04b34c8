"""The grader's sandbox and its bookkeeping, piece by piece: what code inside can see and do, deadlines and caps on
what it sends back, the per-run folders, the decoding of answers, and the inputs and report cells that used to
lose a batch. The whole-batch behaviour against hostile notebooks is in tests/test_grade.py."""

import csv
import fcntl
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from inferlab.exercises import EXERCISES, answers, sandbox
from inferlab.exercises import grader as grade

needs_sandbox = pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox: {sandbox.unavailable()}")

PROBE = r"""
import json, os, resource, socket, subprocess, sys
out = {"uid": os.getuid(), "gid": os.getgid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
       "limits": {k: resource.getrlimit(getattr(resource, k))[0] for k in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU",
                                                                          "RLIMIT_FSIZE")},
       "visible": {p: os.path.exists(p) for p in sys.argv[1:]}, "writable": {}}
for p in ["/tmp/x", sys.argv[1] + "/x"]:
    try:
        open(p, "w").write("x")
        out["writable"][p] = True
    except OSError:
        out["writable"][p] = False
try:
    socket.create_connection(("1.1.1.1", 80), timeout=1)
    out["network"] = True
except OSError:
    out["network"] = False
procs = []
try:
    for _ in range(200):
        procs.append(subprocess.Popen(["sleep", "60"]))
except OSError:
    pass
out["started"] = len(procs)
try:
    bytearray(5 * 10**9)
    out["memory"] = True
except MemoryError:
    out["memory"] = False
from inferlab.exercises import EXERCISES
try:
    out["reference"] = EXERCISES["8-8"].part("net_speedup").expected()
except RuntimeError as err:
    out["reference"] = str(err)
import inferlab.exercises.catalog as c
out["catalog"] = open(c.__file__).read()[:200]
out["pycache"] = os.listdir(os.path.dirname(c.__file__) + "/__pycache__") if os.path.isdir(
    os.path.dirname(c.__file__) + "/__pycache__") else []
os.write(int(os.environ["SANDBOX_RESULT_FD"]), json.dumps(out).encode())
"""


@needs_sandbox
def test_inside_the_sandbox(tmp_path) -> None:
    """The grader's mounts: nobody, alone in /proc, no network, limits hold, references withheld, nothing else seen."""
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "probe.py").chmod(0o644)
    tmp_path.chmod(0o755)
    with sandbox.run_folder() as folder:
        run = grade._Run.make(folder, 5, True)
        repo = Path(grade.__file__).parents[3]
        hidden = [str(p) for p in (tmp_path, repo / "tests", repo / "exercises", repo / ".git", Path.home() / ".bashrc")
                  if p.exists()]  # other submissions' places, the repository beside the library, the home folder
        t0 = time.perf_counter()
        out = sandbox.run([sandbox.PYTHON, "/probe/probe.py", *hidden], deadline_s=30, binds=run.binds,
                          files={**run.covers, Path("/probe/probe.py"): tmp_path / "probe.py"},
                          limits=sandbox.Limits(tasks=64))
        elapsed = time.perf_counter() - t0
    seen = json.loads(out.result)
    assert seen["uid"] == seen["gid"] == sandbox.SANDBOX_UID
    assert max(seen["pids"]) < 10  # its own few processes only: a fresh pid namespace
    assert not any(seen["visible"].values()) and seen["writable"] == {"/tmp/x": True, hidden[0] + "/x": False}
    assert not seen["network"] and not seen["memory"] and 10 < seen["started"] < 64
    assert seen["limits"]["RLIMIT_NPROC"] == 64 and seen["limits"]["RLIMIT_AS"] == 4 << 30
    assert "withheld" in seen["reference"] and "withheld" in seen["catalog"] and seen["pycache"] == []
    assert not (tmp_path / "x").exists() and elapsed < 10


def test_bwrap_command_names_every_namespace_and_limit() -> None:
    cmd = sandbox.bwrap_command(["true"], binds=[Path(sys.prefix)], limits=sandbox.Limits(tasks=7))
    assert cmd[0] == "bwrap" and cmd[-1] == "true"
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in cmd
    assert cmd[cmd.index("--tmpfs") + 1] == "/tmp" and "--nproc=7:7" in cmd
    assert ["--ro-bind", os.path.abspath(sys.prefix), os.path.abspath(sys.prefix)] == \
        cmd[cmd.index(os.path.abspath(sys.prefix)) - 1: cmd.index(os.path.abspath(sys.prefix)) + 2]
    as_root = sandbox.bwrap_command(["true"], userns_fd=9)
    assert "--userns" in as_root and "--unshare-user" not in as_root and f"--reuid={sandbox.SANDBOX_UID}" in as_root


@needs_sandbox
def test_plain_bwrap_user_namespace_works_too() -> None:
    """The command a grader that is not root runs (bwrap maps uid 65534 inside): it starts and isolates."""
    cmd = sandbox.bwrap_command(["sh", "-c", "id -u; ls /proc | grep -c '^[0-9]'"])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    uid, pids = out.stdout.split()
    assert int(uid) == sandbox.SANDBOX_UID and int(pids) < 5


NOT_ROOT = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("sandbox", sys.argv[1])
sb = sys.modules["sandbox"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
code = ("import os, subprocess\nn = 0\ntry:\n    while True:\n        subprocess.Popen(['sleep', '30']); n += 1\n"
        "except OSError:\n    pass\nos.write(int(os.environ['SANDBOX_RESULT_FD']), repr([os.getuid(), n]).encode())")
out = sb.run([sys.executable, "-c", code], deadline_s=20, limits=sb.Limits(tasks=16))
print(json.dumps([json.loads(out.result), sb.unavailable()]))
"""


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(), reason="needs root to become nobody")
def test_a_grader_that_is_not_root_gets_the_same_sandbox() -> None:
    """bwrap maps 65534 inside to the grader's uid outside; the task limit counts the sandbox alone."""
    cmd = ["setpriv", f"--reuid={sandbox.SANDBOX_UID}", f"--regid={sandbox.SANDBOX_UID}", "--clear-groups",
           "/usr/bin/python3", "-c", NOT_ROOT, sandbox.__file__]  # the system's Python: ours lives in /root
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    (uid, started), reason = json.loads(out.stdout)
    assert uid == sandbox.SANDBOX_UID and 5 < started < 16 and reason is None


@needs_sandbox
def test_deadline_and_byte_cap_hold_whatever_the_command_does() -> None:
    py = sandbox.PYTHON
    hold = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ntime.sleep(600)"
    t0 = time.perf_counter()
    out = sandbox.run([py, "-c", hold], deadline_s=1, binds=sandbox.python_paths())
    assert out.timed_out and out.returncode is None and time.perf_counter() - t0 < 4
    flood = "import os\nfd = int(os.environ['SANDBOX_RESULT_FD'])\nwhile True:\n    os.write(fd, b'x' * 65536)"
    out = sandbox.run([py, "-c", flood], deadline_s=20, binds=sandbox.python_paths(),
                      limits=sandbox.Limits(result_bytes=1 << 20))
    assert out.too_large and len(out.result) <= 1 << 20
    # a result, then a daemon that keeps stderr open: the result counts and the daemon dies with the sandbox
    early = ("import os, sys, time\nos.write(int(os.environ['SANDBOX_RESULT_FD']), b'done')\n"
             "os.close(int(os.environ['SANDBOX_RESULT_FD']))\n"
             "if os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n")
    t0 = time.perf_counter()
    out = sandbox.run([py, "-c", early], deadline_s=20, binds=sandbox.python_paths())
    assert out.result == b"done" and not out.timed_out and time.perf_counter() - t0 < 5


def test_run_folders_of_killed_runs_are_removed_and_live_ones_kept(tmp_path) -> None:
    root = sandbox.runs_root()
    root.mkdir(mode=0o700, exist_ok=True)
    dead, live = root / "run-test-dead", root / "run-test-live"
    for d in (dead, live):
        d.mkdir(exist_ok=True)
        (d / ".lock").touch()
        (d / "submission.ipynb").write_text("{}")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\nf = open(sys.argv[1])\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)",
                               str(live / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with sandbox.run_folder() as mine:
            assert mine.is_dir() and not dead.exists() and live.exists()
            with open(mine / ".lock") as f, pytest.raises(BlockingIOError):
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not mine.exists()
    finally:
        holder.kill()
        holder.wait()
        import shutil

        shutil.rmtree(live, ignore_errors=True)


# ---- answers as the kernel sends them ------------------------------------------------------------------
def _text(value: str, nonce: str = "n") -> str:
    return repr("{'nonce': %r, 'value': %s}" % (nonce, value))


def test_answers_decode_and_malformed_ones_are_that_parts_error() -> None:
    # {b"prefill": 1.5, (1, 2): 2} as the kernel encodes it: the bytes key by its text, the tuple as a list
    pairs = "[({'__repr__': \"b'prefill'\"}, 1.5), ([1, 2], 2)]"
    assert answers.decode(_text("{'__dict__': %s}" % pairs), "n") == {"b'prefill'": 1.5, (1, 2): 2}
    assert answers.decode(_text("{'__float__': 'inf'}"), "n") == float("inf")
    frame = answers.decode(_text("{'__frame__': {'index': [1], 'columns': ['a'], 'data': [[2.0]]}}"), "n")
    assert frame.loc[1, "a"] == 2.0
    for bad in ("{'__frame__': 1}", "{'__dict__': 5}", "{'x': 1, 'y': 2}", "{'__calls__': 3}", "(1, 2)",
                "{'__float__': 'nope'}", "b'raw'"):
        with pytest.raises(answers.Unreadable):
            answers.decode(_text(bad), "n")
    with pytest.raises(answers.Unreadable, match="asked for"):
        answers.decode(_text("1.0", nonce="other"), "n")
    for junk in ("@@inferlab-answers@@{}", "'" + "[" * 500 + "'", {"error": "NameError: x"}, 12):
        with pytest.raises(answers.Unreadable):
            answers.decode(junk, "n")


def test_a_part_that_cannot_be_read_leaves_the_others_graded() -> None:
    ex = EXERCISES["8-8"]
    inputs, refs = ex.variant(1)
    answers = {"halved_s": _text("{'__frame__': 1}"), "net_speedup": _text(repr(refs["net_speedup"])),
               "breakeven_setup_s": {"error": "ZeroDivisionError"}}
    parts = {p.part: p.status for p in grade._part_results(ex, {"variant": (answers, "n")}, refs, ex.expected())}
    assert parts == {"halved_s": "error", "net_speedup": "correct", "breakeven_setup_s": "error"}


def test_each_part_is_graded_on_the_variant_and_compared_with_the_public_run() -> None:
    ex = EXERCISES["8-8"]
    inputs, refs = ex.variant(2)
    public = ex.expected()
    lit = lambda v: _text(answers.literal(v))  # noqa: E731
    variant_run = {"halved_s": lit(refs["halved_s"]), "net_speedup": lit(public["net_speedup"]),
                   "breakeven_setup_s": lit(round(refs["breakeven_setup_s"], 1) + 0.2)}
    public_run = {"halved_s": lit(public["halved_s"]), "net_speedup": lit(public["net_speedup"]),
                  "breakeven_setup_s": lit(public["breakeven_setup_s"])}
    runs = {"variant": (variant_run, "n"), "public": (public_run, "n")}
    parts = {p.part: p for p in grade._part_results(ex, runs, refs, public)}
    assert parts["halved_s"].status == "correct" and parts["halved_s"].points == 1
    assert parts["net_speedup"].status == "wrong on variant" and parts["net_speedup"].points == 0
    assert "correct on the public inputs, wrong on the variant" in parts["net_speedup"].message
    assert parts["breakeven_setup_s"].status == "close" and "rounding" in parts["breakeven_setup_s"].message
    flagged = grade._part_results(ex, runs, refs, public, {"halved_s": "its code uses inferlab.serving.task_time"})
    assert flagged[0].status == "needs review" and flagged[0].points == 0 and "task_time" in flagged[0].message


def test_the_sandboxs_catalog_has_every_part_and_no_reference() -> None:
    ns: dict = {}
    source = grade._withheld_catalog()
    code = compile(source.replace("from .core import", "from inferlab.exercises.core import"), "stub", "exec")
    exec(code, ns)
    for ex_id, ex in EXERCISES.items():
        stub = ns["EXERCISES"][ex_id]
        def fields(p):
            return p.name, p.points, p.probes, p.manual, p.precision, p.hint, p.forbids, p.unordered, p.choice

        assert [fields(p) for p in stub.parts] == [fields(p) for p in ex.parts]
        assert stub.inputs == ex.inputs and stub.vary is None  # the public inputs, no way to draw a variant
        for p in stub.parts:
            if not p.manual:
                with pytest.raises(RuntimeError, match="withheld"):
                    p.expected()


# ---- inputs and the report ---------------------------------------------------------------------------------
def test_collect_names_every_input_and_follows_no_link(tmp_path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_8-8.ipynb").write_text("{}")
    (folder / ".hidden.ipynb").write_text("{}")
    (folder / "link.ipynb").symlink_to("/etc/hostname")
    (folder / "sub").symlink_to("/etc", target_is_directory=True)
    os.mkfifo(folder / "fifo.ipynb")
    for name in ("one.zip", "two.zip"):  # the same member names in two zips
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("x/b_8-8.ipynb", "{}")
            z.writestr("__MACOSX/._b_8-8.ipynb", "")
    with zipfile.ZipFile(tmp_path / "none.zip", "w"):
        pass
    entries = grade.collect([folder, tmp_path / "one.zip", tmp_path / "two.zip", tmp_path / "none.zip"],
                            tmp_path / "staging")
    by = {e.label.replace(f"{tmp_path}/", "").replace("in/", ""): e for e in entries}
    assert set(by) == {"a_8-8.ipynb", "link.ipynb", "sub", "fifo.ipynb", "one.zip:x/b_8-8.ipynb",
                       "two.zip:x/b_8-8.ipynb", "none.zip"}
    assert by["link.ipynb"].path is None and "symbolic link" in by["link.ipynb"].error
    assert by["sub"].path is None and by["fifo.ipynb"].path is None and "no files" in by["none.zip"].error
    assert by["one.zip:x/b_8-8.ipynb"].path != by["two.zip:x/b_8-8.ipynb"].path
    assert by["one.zip:x/b_8-8.ipynb"].name == "x/b_8-8.ipynb" and grade._student("x/b_8-8.ipynb") == "x/b_8-8"


def test_report_is_written_atomically_with_formulas_escaped(tmp_path) -> None:
    subs = [grade.Submission("=cmd|x.ipynb", "=cmd|x", "8-8", "error", "@SUM(1)", flags=["+1"]),
            grade.Submission("b.ipynb", "-b", "8-8", "graded", parts=[grade.PartResult("p", "wrong", 0, 1, "-no")])]
    grade._flag_duplicates(subs)
    grade._write(subs, tmp_path, {"sandbox": "test"})
    rows = list(csv.reader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)
    assert rows[1][0] == "'=cmd|x" and rows[2][-2] == "'-no"
    assert json.loads((tmp_path / "report.json").read_text())["grader"] == {"sandbox": "test"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["free_text.md", "grades.csv", "prairielearn", "report.json"]


def test_duplicates_and_a_student_variable_that_disagrees_are_flagged() -> None:
    subs = [grade.Submission(f"{i}", "ada_8-8", "8-8", "graded") for i in range(2)]
    subs.append(grade.Submission("c", "ada_8-8", "8-3", "graded"))
    grade._flag_duplicates(subs)
    assert [bool(s.flags) for s in subs] == [True, True, False]
    assert grade._disagrees("alice", "bob_8-8") and not grade._disagrees("Ada Lovelace", "lovelace_ada_1234_8-8")
    assert not grade._disagrees("", "bob_8-8")


def test_the_exercise_comes_from_metadata_or_name_and_a_disagreement_is_flagged() -> None:
    said = {"metadata": {"inferlab": {"exercise": "8-8"}}}
    assert grade._exercise_of("x/ada_8-3.ipynb", said) == ("8-8", "the notebook says exercise 8-8, its name 8-3")
    assert grade._exercise_of("ada_8-3.ipynb", {"metadata": {}}) == ("8-3", "")
    assert grade._exercise_of("8-8/ada.ipynb", {"metadata": {}}) == (None, "")


def test_a_run_that_requires_the_sandbox_stops_when_none_can_be_made(tmp_path) -> None:
    """``make unit`` sets INFERLAB_REQUIRE_SANDBOX: without bwrap the session stops with the reason, nothing skips."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "INFERLAB_REQUIRE_SANDBOX": "1", "PATH": str(tmp_path)}  # no bwrap on this PATH
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/test_layout.py::test_every_module_is_in_a_layer", "-q",
                          "-p", "no:cacheprovider", "-p", "no:xdist"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode != 0 and "the grader's sandbox is required here" in run.stdout + run.stderr
    assert "bwrap is not installed" in run.stdout + run.stderr
    env.pop("INFERLAB_REQUIRE_SANDBOX")
    assert subprocess.run([sys.executable, "-m", "pytest", "tests/test_layout.py::test_every_module_is_in_a_layer",
                           "-q", "-p", "no:cacheprovider", "-p", "no:xdist"], cwd=root, env=env,
                          capture_output=True, timeout=120).returncode == 0
