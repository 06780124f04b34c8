"""Grade a class's exercise notebooks: ``python -m inferlab.grade SUBMISSIONS... --out DIR [-j N] [--timeout S]``.

Each submission (a notebook, a folder of them, or a zip as a learning-management system exports it)
runs headless in its own kernel inside its own sandbox (``sandbox``: bubblewrap, an unprivileged uid,
no network, no view of other submissions, the output folder or the grader, limits on memory, tasks,
CPU, files and time). The worker in the sandbox (``worker``) asks the kernel for the answer variables;
nothing the notebook prints is read. What the student's code cannot decide is decided here:

- the student is the name the file was submitted under (its path in the folder or zip, without the
  extension), never code the student runs; a ``STUDENT`` variable that disagrees is flagged, and so
  are two submissions of one exercise under one name, and metadata naming another exercise than the name;
- references are computed here by ``inferlab``; in the sandbox the library is read-only and its
  catalog is a stub whose references refuse to run, so ``expected()`` gives a kernel nothing;
- each part is judged here from its own value: a value that cannot be decoded is that part's error;
- every input becomes a row (an empty zip, an unreadable file, a symbolic link, a dead worker), and an
  error while grading one submission becomes that submission's error row;
- ``report.json`` and ``grades.csv`` are written only here, each atomically; CSV cells that a
  spreadsheet would run as a formula are escaped.

Without a sandbox the grader refuses (one line says why) unless told ``--no-sandbox``; ``report.json``
records which was used. Submissions are read, never written; temporary files live in a per-run folder
(``sandbox.run_folder``) that the next run removes if this one was killed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import EXERCISES, Exercise, attempted, judge  # light: references import their modules when computed
from . import sandbox as sb
from .answers import Unreadable, decode

__all__ = ["PartResult", "Submission", "Entry", "collect", "grade_file", "grade", "main", "SandboxUnavailable"]

SandboxUnavailable = sb.SandboxUnavailable
DEFAULT_TIMEOUT_S = 120.0
STARTUP_S = 30.0  # beyond --timeout: Python, nbclient and the kernel starting, the answers read back
MAX_NOTEBOOK_BYTES = 32 << 20
INSIDE = Path("/run/inferlab/submission.ipynb")  # where the sandbox sees the submission
_EXERCISE_IN_NAME = re.compile(r"(?<!\d)8-([1-9])(?!\d)")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


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
    """One submitted file and what became of it: ``student`` from the file's name, ``declared`` from its STUDENT."""

    file: str
    student: str
    exercise: str
    status: str  # graded | error | timeout
    message: str = ""
    parts: list[PartResult] = field(default_factory=list)
    declared: str = ""
    flags: list[str] = field(default_factory=list)

    @property
    def points(self) -> float:
        """Points earned on machine-graded parts."""
        return sum(p.points for p in self.parts)


@dataclass(frozen=True)
class Entry:
    """One submission found in the inputs: the file to read (None if there is none), its name, its label."""

    path: Path | None
    name: str  # the path it was submitted under, in its folder or zip: the student and exercise are read from it
    label: str  # what the report calls it: a path, or zip:member
    error: str = ""  # why there is nothing to grade


# ---- inputs ----------------------------------------------------------------------------------------
def collect(inputs: list[Path], staging: Path) -> list[Entry]:
    """Every notebook, folder member and zip member of ``inputs`` as an Entry; zip members unpack into ``staging``.

    Folders are walked without following symbolic links: a link becomes an error entry, never read.
    A zip with nothing in it becomes an error entry, so its student does not vanish.
    """
    found: list[Entry] = []
    for n, item in enumerate(inputs):
        if item.is_dir():
            found += _walk(item)
        elif item.suffix.lower() == ".zip" and zipfile.is_zipfile(item):
            found += _unzip(item, staging / f"{n:03d}")
        elif item.exists():
            found.append(Entry(item.resolve(), item.name, str(item)))
        else:
            raise ValueError(f"submissions: {item} does not exist")
    return found


def _walk(folder: Path) -> list[Entry]:
    out = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files) + [d for d in dirs if (Path(here) / d).is_symlink()]:
            path = Path(here) / name
            if name.startswith("."):
                continue
            known_as = path.relative_to(folder).as_posix()  # a folder per student keeps the students apart
            if path.is_symlink():
                out.append(Entry(None, known_as, str(path), "a symbolic link: not followed"))
            elif path.is_file():
                out.append(Entry(path, known_as, str(path)))
            else:  # a pipe, a socket, a device: opening it could block or worse
                out.append(Entry(None, known_as, str(path), "not a regular file"))
    return out


def _unzip(archive: Path, staging: Path) -> list[Entry]:
    out = []
    try:
        with zipfile.ZipFile(archive) as z:
            for i, info in enumerate(z.infolist()):
                name = info.filename  # the member's path: an LMS's folder per student keeps the students apart
                base = PurePosixPath(name).name
                if info.is_dir() or not base or base.startswith(".") or "__MACOSX" in PurePosixPath(name).parts:
                    continue
                label = f"{archive}:{info.filename}"
                if info.file_size > MAX_NOTEBOOK_BYTES:
                    out.append(Entry(None, name, label, f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB"))
                    continue
                try:
                    data = z.read(info)
                except Exception as err:  # encrypted, corrupt, unsupported compression
                    out.append(Entry(None, name, label, f"cannot be unpacked: {err}"[:300]))
                    continue
                target = staging / f"{i:05d}" / "member"
                target.parent.mkdir(parents=True)
                target.write_bytes(data)
                out.append(Entry(target, name, label))
    except (zipfile.BadZipFile, OSError) as err:
        return [Entry(None, archive.name, str(archive), f"a zip that cannot be read: {err}"[:300])]
    return out or [Entry(None, archive.name, str(archive), "the zip holds no files")]


def _read(path: Path) -> bytes:
    """The file's bytes, without following a symbolic link, at most MAX_NOTEBOOK_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    return data


# ---- references, computed here --------------------------------------------------------------------------
class _References(Mapping):
    """Each exercise's references, computed once, on first use, by this process's inferlab."""

    def __init__(self) -> None:
        self._done: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, ex_id: str) -> dict[str, Any]:
        with self._lock:
            if ex_id not in self._done:
                self._done[ex_id] = {p.name: p.expected() for p in EXERCISES[ex_id].parts if not p.manual}
            return self._done[ex_id]

    def __iter__(self):
        return iter(EXERCISES)

    def __len__(self) -> int:
        return len(EXERCISES)


# ---- one run's sandbox settings -------------------------------------------------------------------------
@dataclass
class _Run:
    """What every submission of one run shares: its folder, the sandbox's mounts and limits."""

    folder: Path
    timeout_s: float
    confined: bool
    binds: list[Path] = field(default_factory=list)
    covers: dict[Path, Path] = field(default_factory=dict)  # inside -> outside, over files of the binds
    limits: sb.Limits = sb.Limits()

    @classmethod
    def make(cls, folder: Path, timeout_s: float, confined: bool) -> _Run:
        import inferlab

        from .. import datasets
        from . import catalog

        lib = Path(inferlab.__file__).resolve().parents[1]
        stub = folder / "catalog.py"
        stub.write_text(_withheld_catalog(), encoding="utf-8")
        empty = folder / "empty"
        empty.mkdir()
        covers = {Path(catalog.__file__).resolve(): stub}
        pycache = Path(catalog.__file__).resolve().parent / "__pycache__"
        if pycache.is_dir():  # the real catalog's bytecode would give its references back
            covers[pycache] = empty
        limits = sb.Limits(cpu_s=math.ceil(timeout_s + STARTUP_S))
        return cls(folder, timeout_s, confined, [*sb.python_paths(), lib, datasets.DATA_DIR], covers, limits)

    def describe(self) -> dict[str, Any]:
        """What report.json says about how the notebooks ran."""
        if not self.confined:
            return {"sandbox": "none", "note": f"--no-sandbox: student code ran unconfined as uid {os.geteuid()}",
                    "timeout_s": self.timeout_s}
        return {"sandbox": "bwrap", "note": f"uid {sb.SANDBOX_UID} without capabilities in new user, pid, "
                "network, IPC and UTS namespaces; system, Python and library read-only; references withheld; "
                "/tmp a private tmpfs", "timeout_s": self.timeout_s, "limits": asdict(self.limits)}


def _withheld_catalog() -> str:
    """catalog.py as the sandbox sees it: the same exercises and parts, every reference refusing to run."""
    lines = ['"""The exercise catalog with its references withheld: a notebook being graded cannot compute them."""',
             "from .core import Exercise, Part", "", "__all__ = ['EXERCISES']", "", "",
             "def _withheld():", "    raise RuntimeError('references are withheld while a notebook is graded')", "", "",
             "EXERCISES = {"]
    for ex in EXERCISES.values():
        parts = "".join(f"\n        Part({p.name!r}, {p.question!r}, {'None' if p.manual else '_withheld'}, "
                        f"points={p.points!r}, rtol={p.rtol!r}, atol={p.atol!r}, hint={p.hint!r}, "
                        f"probes={p.probes!r})," for p in ex.parts)
        lines.append(f"    {ex.id!r}: Exercise({ex.id!r}, {ex.title!r}, notebook={ex.notebook!r}, core={ex.core!r}, "
                     f"parts=({parts}\n    )),")
    return "\n".join(lines + ["}", ""])


# ---- one submission ---------------------------------------------------------------------------------
def _exercise_of(name: str, nb: Any) -> tuple[str | None, str]:
    """The exercise (the notebook's metadata, else 8-N in the file's name) and a flag when the two disagree."""
    meta = nb.get("metadata", {}).get("inferlab", {})
    said = meta.get("exercise") if isinstance(meta, dict) and meta.get("exercise") in EXERCISES else None
    m = _EXERCISE_IN_NAME.search(PurePosixPath(name).name)
    named = f"8-{m.group(1)}" if m and f"8-{m.group(1)}" in EXERCISES else None
    flag = f"the notebook says exercise {said}, its name {named}" if said and named and said != named else ""
    return said or named, flag


def _student(name: str) -> str:
    """The student a submission belongs to: the name it was submitted under, without the extension."""
    p = PurePosixPath(name)
    return str(p.with_suffix("")) if p.suffix and p.stem else name


def _disagrees(declared: str, student: str) -> bool:
    """True when a word of the STUDENT variable does not appear in the name the file was submitted under."""
    words = re.findall(r"[^\W_]+", declared.casefold())
    return bool(words) and not all(w in student.casefold() for w in words)


def grade_file(path: Path, timeout_s: float = DEFAULT_TIMEOUT_S, label: str | None = None,
               expected: Mapping[str, Mapping[str, Any]] | None = None, *, name: str | None = None,
               sandbox: bool = True, run: _Run | None = None) -> Submission:
    """Grade one submitted file (never modified); every failure becomes the submission's row, never an exception.

    ``name``: the path it was submitted under (default ``path.name``): the student is that without the extension.
    Without ``run`` (``grade`` passes one), a run folder and sandbox are made for this file alone.
    """
    name = name or path.name
    if run is None:
        if sandbox and (reason := sb.unavailable()):
            raise SandboxUnavailable(reason)
        with sb.run_folder() as folder:
            return grade_file(path, timeout_s, label, expected, name=name, run=_Run.make(folder, timeout_s, sandbox))
    shown = label or str(path)
    try:
        return _grade(path, name, shown, expected if expected is not None else _References(), run)
    except Exception as err:  # a grader bug or an input nobody foresaw: this row, not the batch
        return Submission(shown, _student(name), "", "error",
                          f"the grader failed here: {type(err).__name__}: {err}"[:300])


def _grade(path: Path, name: str, shown: str, expected: Mapping[str, Mapping[str, Any]], run: _Run) -> Submission:
    import nbformat

    student = _student(name)
    try:
        data = _read(path)
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # not JSON, not a notebook, not UTF-8, a link, too large ...
        return Submission(shown, student, "", "error", f"not a readable notebook: {err}"[:300])
    ex_id, exercise_flag = _exercise_of(name, nb)
    if ex_id is None:
        return Submission(shown, student, "", "error",
                          "cannot tell which exercise this is (no inferlab metadata, no 8-N in the name)")
    ex = EXERCISES[ex_id]
    spec = json.dumps({"names": [p.name for p in ex.parts],
                       "probes": {p.name: [list(a) for a in p.probes] for p in ex.parts if p.probes}})
    work = Path(tempfile.mkdtemp(prefix="sub-", dir=run.folder))
    try:
        copy = work / "submission.ipynb"
        copy.write_bytes(data)
        copy.chmod(0o644)
        inside = INSIDE if run.confined else copy
        out = sb.run([sb.PYTHON, "-m", "inferlab.exercises.worker", str(inside), spec, f"{run.timeout_s:g}"],
                     deadline_s=run.timeout_s + STARTUP_S, binds=run.binds, files={**run.covers, INSIDE: copy},
                     limits=run.limits, confined=run.confined, cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if out.timed_out:
        return _all(ex, shown, student, "timeout", f"ran longer than {run.timeout_s:g} s")
    try:
        result = json.loads(out.result)
        status, message = str(result["status"]), str(result.get("message", ""))[:300]
    except (ValueError, TypeError, KeyError):
        why = "its output was too large" if out.too_large else (out.stderr.strip().splitlines() or ["no result"])[-1]
        return _all(ex, shown, student, "error", f"the worker died ({why})"[:300])
    if status != "graded":
        return _all(ex, shown, student, "timeout" if status == "timeout" else "error", message)
    answers, nonce = result.get("answers"), str(result.get("nonce", ""))
    answers = answers if isinstance(answers, dict) else {}
    sub = Submission(shown, student, ex_id, "graded", message, _part_results(ex, answers, nonce, expected))
    sub.flags += [exercise_flag] if exercise_flag else []
    try:
        declared = decode(answers.get("STUDENT", {"error": ""}), nonce)
    except Unreadable:
        declared = None
    if isinstance(declared, str) and attempted(declared):
        sub.declared = declared.strip()[:100]
        if _disagrees(sub.declared, student):
            sub.flags.append(f"STUDENT = {sub.declared!r} does not match the file name")
    return sub


def _part_results(ex: Exercise, answers: dict[str, Any], nonce: str,
                  expected: Mapping[str, Mapping[str, Any]]) -> list[PartResult]:
    results, refs, failed = [], {}, ""
    try:
        refs = expected[ex.id] if ex.id in expected else _References()[ex.id]
    except Exception as err:  # a reference failed here: the grader's fault, said as such
        failed = f"the grader could not compute the references: {type(err).__name__}: {err}"[:300]
    for part in ex.parts:
        max_points = 0.0 if part.manual else part.points
        if failed and not part.manual:
            results.append(PartResult(part.name, "error", 0.0, max_points, failed))
            continue
        try:
            value = decode(answers.get(part.name, {"error": "no answer came back"}), nonce)
        except Unreadable as err:
            results.append(PartResult(part.name, "error", 0.0, max_points, f"the answer could not be read: {err}"))
            continue
        verdict = judge(part, value, None if part.manual else refs[part.name])
        results.append(PartResult(part.name, verdict.status, verdict.points, max_points,
                                  "" if verdict.status == "correct" else verdict.message))
    return results


def _all(ex: Exercise, file: str, student: str, status: str, message: str) -> Submission:
    parts = [PartResult(p.name, status, 0.0, 0.0 if p.manual else p.points, message) for p in ex.parts]
    return Submission(file, student, ex.id, status, message, parts)


# ---- the batch ------------------------------------------------------------------------------------------
def grade(inputs: list[Path], out_dir: Path, jobs: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
          progress: bool = True, sandbox: bool = True) -> list[Submission]:
    """Grade every submission in ``inputs`` in parallel and write report.json and grades.csv into ``out_dir``.

    ``sandbox=False`` runs student code unconfined (the report says so); with ``sandbox=True`` and no
    sandbox possible here, SandboxUnavailable says why before anything runs.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    if sandbox and (reason := sb.unavailable()):
        raise SandboxUnavailable(reason)
    expected = _References()
    with sb.run_folder() as folder:
        run = _Run.make(folder, timeout_s, sandbox)
        entries = collect(inputs, folder / "staging")
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_grade_entry, e, expected, run) for e in entries]
            if progress:
                from tqdm.auto import tqdm

                for _ in tqdm(cf.as_completed(futures), total=len(futures), desc="grading", unit="notebook"):
                    pass
            results = [f.result() for f in futures]
    _flag_duplicates(results)
    _write(results, out_dir, run.describe())
    return results


def _grade_entry(entry: Entry, expected: _References, run: _Run) -> Submission:
    if entry.path is None:
        return Submission(entry.label, _student(entry.name), "", "error", entry.error)
    return grade_file(entry.path, run.timeout_s, entry.label, expected, name=entry.name, run=run)


def _flag_duplicates(results: list[Submission]) -> None:
    counts = Counter((s.student, s.exercise) for s in results)
    for s in results:
        if (n := counts[s.student, s.exercise]) > 1:
            s.flags.append(f"{n} submissions of {s.exercise or 'this file'} under this name")


def _cell(v: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula (a leading = + - @ gets a quote)."""
    return "'" + v if isinstance(v, str) and v.startswith(_FORMULA) else v


def _write(results: list[Submission], out_dir: Path, how: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"grader": how, "submissions": [{**asdict(s), "points": s.points} for s in results]}
    _atomic(out_dir / "report.json", json.dumps(report, indent=1, default=str))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student", "exercise", "part", "status", "points", "max_points", "file", "message", "flags"])
    for s in results:
        flags = "; ".join(s.flags)
        rows = [[p.part, p.status, p.points, p.max_points, p.message] for p in s.parts] or \
            [["", s.status, 0, 0, s.message]]
        for part, status, points, max_points, message in rows:
            w.writerow([_cell(x) for x in (s.student, s.exercise, part, status, points, max_points, s.file, message,
                                           flags)])
    _atomic(out_dir / "grades.csv", buf.getvalue())


def _atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then os.replace."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """Command line: grade submissions into --out; exit status 0 when the report was written, 2 when refused."""
    ap = argparse.ArgumentParser(prog="python -m inferlab.grade", description=__doc__.split("\n")[0])
    ap.add_argument("submissions", nargs="+", type=Path, help="notebooks, folders or zip files")
    ap.add_argument("--out", required=True, type=Path, help="folder for report.json and grades.csv")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help="seconds for a notebook's cells together (the kernel's start not counted)")
    ap.add_argument("--no-sandbox", action="store_true",
                    help="run student code unconfined, as this user (only for code you trust)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        results = grade(args.submissions, args.out, args.jobs, args.timeout, sandbox=not args.no_sandbox)
    except SandboxUnavailable as err:
        print(f"refusing to grade: no sandbox for student code ({err}); install bubblewrap "
              "(apt-get install bubblewrap) or pass --no-sandbox for notebooks you trust", file=sys.stderr)
        return 2
    graded = sum(s.status == "graded" for s in results)
    print(f"{len(results)} submissions, {graded} graded; report in {args.out}")
    return 0
