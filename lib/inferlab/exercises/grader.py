"""Grade a class's exercise notebooks: ``python -m inferlab.grade SUBMISSIONS... --out DIR [-j N] [--timeout S]``.

Each submission (a notebook, a folder of them, or a zip as a learning-management system exports it)
runs headless in its own kernel inside its own sandbox (``sandbox``: bubblewrap, an unprivileged uid,
no network, no view of other submissions, the output folder or the grader, limits on memory, tasks,
CPU, files and time). The worker in the sandbox (``worker``) asks the kernel for the answer variables;
nothing the notebook prints is read.

Each notebook runs twice in that one sandbox and kernel (``variants``): first with its cell tagged
``parameters`` given a variant of the inputs drawn for this student from a secret only the grader
knows, then with the public inputs. Every machine-graded part is graded on the variant, whose
references are computed here; a part right on the public inputs only is "wrong on variant", and the
report says so. A part whose code uses what its rules forbid, or a notebook that imports the catalog,
is "needs review" (``review``), and so is every part of a notebook without its parameters cell. What
the student's code cannot decide is decided here:

- the student is the name the file was submitted under (its path in the folder or zip, without the
  extension), never code the student runs; a ``STUDENT`` variable that disagrees is flagged, and so
  are two submissions of one exercise under one name, and metadata naming another exercise than the name;
- references are computed here by ``inferlab``; in the sandbox the library is read-only and its
  catalog is a stub whose references refuse to run, so ``expected()`` gives a kernel nothing;
- each part is judged here from its own value: a value that cannot be decoded is that part's error;
- every input becomes a row (an empty zip, an unreadable file, a symbolic link, a dead worker), and an
  error while grading one submission becomes that submission's error row;
- ``report.json``, ``grades.csv``, ``free_text.md`` and the PrairieLearn results are written only here,
  each atomically (``exports``); CSV cells that a spreadsheet would run as a formula are escaped.

``python -m inferlab.grade bundle --gradescope OUT.zip`` writes a Gradescope autograder (``bundle``).

Without a sandbox the grader refuses (one line says why) unless told ``--no-sandbox``; ``report.json``
records which was used. Submissions are read, never written; temporary files live in a per-run folder
(``sandbox.run_folder``) that the next run removes if this one was killed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from . import EXERCISES, Exercise, attempted, judge  # light: references import their modules when computed
from . import exports, review, variants
from . import sandbox as sb
from .answers import Unreadable, decode
from .intake import MAX_NOTEBOOK_BYTES, Entry, collect
from .intake import read as _read

__all__ = ["PartResult", "Submission", "Entry", "collect", "grade_file", "grade", "main", "SandboxUnavailable",
           "MAX_NOTEBOOK_BYTES"]

SandboxUnavailable = sb.SandboxUnavailable
DEFAULT_TIMEOUT_S = 120.0
STARTUP_S = 30.0  # beyond --timeout: Python, nbclient and the kernel starting, the answers read back
INSIDE = Path("/run/inferlab")  # where the sandbox sees the submission's runs (variant.ipynb, public.ipynb)
_EXERCISE_IN_NAME = re.compile(r"(?<!\d)8-([1-9])(?!\d)")
MAX_TEXT = 20_000  # characters of a free-text answer kept for the instructor


@dataclass
class PartResult:
    """One graded part."""

    part: str
    status: str
    points: float
    max_points: float
    message: str = ""
    answer: str = ""  # a free-text part's answer, for the instructor


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
    variant: dict[str, Any] = field(default_factory=dict)  # the inputs of the graded run, when they were a variant

    @property
    def points(self) -> float:
        """Points earned on machine-graded parts."""
        return sum(p.points for p in self.parts)


# ---- references, computed here --------------------------------------------------------------------------
class _References:
    """Each exercise's public references and each drawn variant, computed once, on first use, by this process."""

    def __init__(self) -> None:
        self._public: dict[str, dict[str, Any]] = {}
        self._variants: dict[tuple[str, int], tuple[dict[str, Any], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def public(self, ex_id: str) -> dict[str, Any]:
        """The public inputs' references of exercise ``ex_id``."""
        with self._lock:
            if ex_id not in self._public:
                self._public[ex_id] = EXERCISES[ex_id].expected()
            return self._public[ex_id]

    def variant(self, ex_id: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """(inputs, references) of the variant drawn from ``seed``."""
        self.public(ex_id)
        with self._lock:
            if (ex_id, seed) not in self._variants:
                self._variants[ex_id, seed] = EXERCISES[ex_id].variant(seed, public=self._public[ex_id])
            return self._variants[ex_id, seed]


# ---- one run's sandbox settings -------------------------------------------------------------------------
@dataclass
class _Run:
    """What every submission of one run shares: its folder, the sandbox's mounts and limits, the variants' key."""

    folder: Path
    timeout_s: float
    confined: bool
    binds: list[Path] = field(default_factory=list)
    covers: dict[Path, Path] = field(default_factory=dict)  # inside -> outside, over files of the binds
    limits: sb.Limits = sb.Limits()
    key: bytes = field(default=b"", repr=False)  # the variants' secret: never written, never in the sandbox
    key_source: str = ""

    @classmethod
    def make(cls, folder: Path, timeout_s: float, confined: bool, secret: str | None = None) -> _Run:
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
        limits = sb.Limits(cpu_s=math.ceil(2 * timeout_s + STARTUP_S))
        key, source = variants.secret(secret)
        return cls(folder, timeout_s, confined, [*sb.python_paths(), lib, datasets.DATA_DIR], covers, limits, key,
                   source)

    def describe(self) -> dict[str, Any]:
        """What report.json says about how the notebooks ran."""
        runs = {"variants": "each notebook runs twice in one kernel: its parameters cell given the student's "
                "variant (graded), then the public inputs; seed = HMAC-SHA256(secret, exercise NUL student)",
                "secret": self.key_source}
        if not self.confined:
            return {"sandbox": "none", "note": f"--no-sandbox: student code ran unconfined as uid {os.geteuid()}",
                    "timeout_s": self.timeout_s, **runs}
        return {"sandbox": "bwrap", "note": f"uid {sb.SANDBOX_UID} without capabilities in new user, pid, "
                "network, IPC and UTS namespaces; system, Python and library read-only; references withheld; "
                "/tmp a private tmpfs", "timeout_s": self.timeout_s, "limits": asdict(self.limits), **runs}


def _withheld_catalog() -> str:
    """catalog.py as the sandbox sees it: the same exercises, parts and public inputs; no reference runs."""
    lines = ['"""The exercise catalog with its references withheld: a notebook being graded cannot compute them."""',
             "from .core import Exercise, Part", "", "__all__ = ['EXERCISES']", "", "",
             "def _withheld(*args):", "    raise RuntimeError('references are withheld while a notebook is graded')",
             "", "", "EXERCISES = {"]
    for ex in EXERCISES.values():
        parts = "".join(f"\n        Part({p.name!r}, {p.question!r}, {'None' if p.manual else '_withheld'}, "
                        f"points={p.points!r}, precision={p.precision!r}, hint={p.hint!r}, probes={p.probes!r}, "
                        f"forbids={p.forbids!r}, unordered={p.unordered!r}, choice={p.choice!r}),"
                        for p in ex.parts)
        lines.append(f"    {ex.id!r}: Exercise({ex.id!r}, {ex.title!r}, notebook={ex.notebook!r}, core={ex.core!r}, "
                     f"inputs={dict(ex.inputs)!r}, parts=({parts}\n    )),")
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
               references: _References | None = None, *, name: str | None = None,
               sandbox: bool = True, run: _Run | None = None, secret: str | None = None) -> Submission:
    """Grade one submitted file (never modified); every failure becomes the submission's row, never an exception.

    ``name``: the path it was submitted under (default ``path.name``): the student is that without the extension.
    Without ``run`` (``grade`` passes one), a run folder and sandbox are made for this file alone (``secret``:
    the variants' secret, as ``--secret``).
    """
    name = name or path.name
    if run is None:
        if sandbox and (reason := sb.unavailable()):
            raise SandboxUnavailable(reason)
        with sb.run_folder() as folder:
            return grade_file(path, timeout_s, label, references, name=name,
                              run=_Run.make(folder, timeout_s, sandbox, secret))
    shown = label or str(path)
    try:
        return _grade(path, name, shown, references or _References(), run)
    except Exception as err:  # a grader bug or an input nobody foresaw: this row, not the batch
        return Submission(shown, _student(name), "", "error",
                          f"the grader failed here: {type(err).__name__}: {err}"[:300])


def _grade(path: Path, name: str, shown: str, refs: _References, run: _Run) -> Submission:
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
    try:
        public = refs.public(ex_id)
        chosen, expected = refs.variant(ex_id, variants.seed(run.key, student, ex_id))
    except Exception as err:  # a reference failed here: the grader's fault, said as such
        return _all(ex, shown, student, "error",
                    f"the grader could not compute the references: {type(err).__name__}: {err}"[:300])
    index = variants.parameters_cell(nb, list(ex.inputs)) if ex.inputs else None
    books = {"public": nb} if index is None else {"variant": variants.with_inputs(nb, index, chosen),
                                                   "public": variants.with_inputs(nb, index, ex.inputs)}
    try:
        flagged = review.flags(nb, ex)
    except Exception as err:  # the reading failed: a person looks at every part
        flagged = {p.name: f"its code could not be read for review ({type(err).__name__})" for p in ex.parts}
    spec = {"names": [p.name for p in ex.parts],
            "probes": {p.name: [list(a) for a in p.probes] for p in ex.parts if p.probes}}
    work = Path(tempfile.mkdtemp(prefix="sub-", dir=run.folder))
    try:
        files, inside = {}, []
        for label, book in books.items():
            copy = work / f"{label}.ipynb"
            copy.write_text(nbformat.writes(book), encoding="utf-8")
            copy.chmod(0o644)
            files[INSIDE / copy.name] = copy
            inside.append(str(INSIDE / copy.name if run.confined else copy))
        spec["runs"] = inside
        out = sb.run([sb.PYTHON, "-m", "inferlab.exercises.worker", inside[0], json.dumps(spec), f"{run.timeout_s:g}"],
                     deadline_s=len(books) * run.timeout_s + STARTUP_S, binds=run.binds, files={**run.covers, **files},
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
    runs = {}
    for label, r in zip(books, result.get("runs") if isinstance(result.get("runs"), list) else []):
        if isinstance(r, dict) and r.get("status") == "graded" and isinstance(r.get("answers"), dict):
            runs[label] = (r["answers"], str(r.get("nonce", "")))
    if not runs:
        return _all(ex, shown, student, "error", "no answers came back")
    sub = Submission(shown, student, ex_id, "graded", message,
                     _part_results(ex, runs, expected, public, flagged, varied=index is not None),
                     variant=chosen if index is not None else {})
    sub.flags += [exercise_flag] if exercise_flag else []
    if index is None:
        sub.flags.append("no cell tagged parameters: the notebook could not be run on a variant")
    if "variant" in books and "public" not in runs:
        sub.flags.append("the run on the public inputs did not finish: graded on the variant alone")
    answers, nonce = runs.get("public") or next(iter(runs.values()))
    try:
        declared = decode(answers.get("STUDENT", {"error": ""}), nonce)
    except Unreadable:
        declared = None
    if isinstance(declared, str) and attempted(declared):
        sub.declared = declared.strip()[:100]
        if _disagrees(sub.declared, student):
            sub.flags.append(f"STUDENT = {sub.declared!r} does not match the file name")
    return sub


class _Unread(str):
    """Why an answer could not be read (a part's error)."""


def _value(runs: Mapping[str, tuple[dict[str, Any], str]], label: str, name: str) -> Any:
    answers, nonce = runs[label]
    try:
        return decode(answers.get(name, {"error": "no answer came back"}), nonce)
    except Unreadable as err:
        return _Unread(str(err))


def _part_results(ex: Exercise, runs: Mapping[str, tuple[dict[str, Any], str]], expected: Mapping[str, Any],
                  public: Mapping[str, Any], flagged: Mapping[str, str] | None = None,
                  varied: bool = True) -> list[PartResult]:
    """Each part's result from the runs' answers (``runs``: 'variant' and/or 'public' -> (answers, nonce)).

    ``expected``: the variant's references, ``public``: the public ones; ``flagged``: parts the review sends to
    a person; ``varied``: whether the notebook could be run on the variant at all.
    """
    flagged = flagged or {}
    graded_on = "variant" if "variant" in runs else "public"
    results = []
    for part in ex.parts:
        max_points = 0.0 if part.manual else part.points
        value = _value(runs, graded_on, part.name)
        if isinstance(value, _Unread):
            results.append(PartResult(part.name, "error", 0.0, max_points, f"the answer could not be read: {value}"))
            continue
        if part.manual:
            text = _value(runs, "public", part.name) if "public" in runs else value
            text = text if isinstance(text, str) and not isinstance(text, _Unread) else value
            verdict = judge(part, text)
            results.append(PartResult(part.name, verdict.status, 0.0, 0.0, "" if verdict.status == "manual" else
                                      verdict.message, str(text)[:MAX_TEXT] if verdict.status == "manual" else ""))
            continue
        verdict = judge(part, value, (expected if graded_on == "variant" else public)[part.name])
        on_public = None
        if graded_on == "variant" and "public" in runs:
            seen = _value(runs, "public", part.name)
            on_public = None if isinstance(seen, _Unread) else judge(part, seen, public[part.name])
        results.append(_combine(part, max_points, verdict, on_public, flagged.get(part.name, ""), varied))
    return results


def _combine(part: Any, max_points: float, verdict: Any, on_public: Any, flagged: str, varied: bool) -> PartResult:
    """One part's status from its verdict on the variant, on the public inputs, and what the review found."""
    name = part.name
    if verdict.status == "not attempted":
        return PartResult(name, "not attempted", 0.0, max_points, verdict.message)
    if flagged:
        return PartResult(name, "needs review", 0.0, max_points, f"{flagged}; the answer is {verdict.status}"
                          + ("" if varied else " on the notebook's own inputs"))
    if not varied:
        return PartResult(name, "needs review", 0.0, max_points, "the cell tagged parameters is missing, so the "
                          f"notebook ran on its own inputs only; the answer is {verdict.status} on them")
    public_ok = on_public is None or on_public.status == "correct"
    if verdict.status == "correct" and public_ok:
        return PartResult(name, "correct", verdict.points, max_points, "")
    if verdict.status == "correct":
        return PartResult(name, "needs review", 0.0, max_points,
                          f"correct on the variant but {on_public.status} on the public inputs")
    if verdict.status == "close":
        return PartResult(name, "close", 0.0, max_points, verdict.message)
    if on_public is not None and on_public.status == "correct":
        return PartResult(name, "wrong on variant", 0.0, max_points, "correct on the public inputs, wrong on the "
                          "variant: compute the answer from the inputs in the parameters cell, not typed numbers")
    return PartResult(name, verdict.status, 0.0, max_points, verdict.message)


def _all(ex: Exercise, file: str, student: str, status: str, message: str) -> Submission:
    parts = [PartResult(p.name, status, 0.0, 0.0 if p.manual else p.points, message) for p in ex.parts]
    return Submission(file, student, ex.id, status, message, parts)


# ---- the batch ------------------------------------------------------------------------------------------
def grade(inputs: list[Path], out_dir: Path, jobs: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
          progress: bool = True, sandbox: bool = True, secret: str | None = None) -> list[Submission]:
    """Grade every submission in ``inputs`` in parallel and write the reports (``exports``) into ``out_dir``.

    ``sandbox=False`` runs student code unconfined (the report says so); with ``sandbox=True`` and no
    sandbox possible here, SandboxUnavailable says why before anything runs. ``secret`` seeds the
    variants (default ``$INFERLAB_GRADE_SECRET``, else drawn for this run).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    if sandbox and (reason := sb.unavailable()):
        raise SandboxUnavailable(reason)
    references = _References()
    with sb.run_folder() as folder:
        run = _Run.make(folder, timeout_s, sandbox, secret)
        entries = collect(inputs, folder / "staging")
        with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_grade_entry, e, references, run) for e in entries]
            if progress:
                from tqdm.auto import tqdm

                for _ in tqdm(cf.as_completed(futures), total=len(futures), desc="grading", unit="notebook"):
                    pass
            results = [f.result() for f in futures]
    _flag_duplicates(results)
    _write(results, out_dir, run.describe())
    return results


def _grade_entry(entry: Entry, references: _References, run: _Run) -> Submission:
    if entry.path is None:
        return Submission(entry.label, _student(entry.name), "", "error", entry.error)
    return grade_file(entry.path, run.timeout_s, entry.label, references, name=entry.name, run=run)


def _flag_duplicates(results: list[Submission]) -> None:
    counts = Counter((s.student, s.exercise) for s in results)
    for s in results:
        if (n := counts[s.student, s.exercise]) > 1:
            s.flags.append(f"{n} submissions of {s.exercise or 'this file'} under this name")


def _write(results: list[Submission], out_dir: Path, how: dict[str, Any]) -> None:
    """report.json, grades.csv, free_text.md and the PrairieLearn results (``exports.write_reports``)."""
    exports.write_reports(results, out_dir, how)


def main(argv: list[str] | None = None) -> int:
    """Command line: grade submissions into --out (0 when the report was written, 2 when refused); or
    ``bundle --gradescope OUT.zip`` (write a Gradescope autograder) and ``gradescope --root DIR`` (what that
    autograder runs)."""
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] in (["bundle"], ["gradescope"]):
        from . import bundle

        return bundle.main(args_in)
    ap = argparse.ArgumentParser(prog="python -m inferlab.grade", description=__doc__.split("\n")[0],
                                 epilog="python -m inferlab.grade bundle --gradescope OUT.zip writes a Gradescope "
                                 "autograder instead.")
    ap.add_argument("submissions", nargs="+", type=Path, help="notebooks, folders or zip files")
    ap.add_argument("--out", required=True, type=Path,
                    help="folder for report.json, grades.csv, free_text.md and the PrairieLearn results")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="submissions graded at once")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help="seconds for a notebook's cells together, per run (the kernel's start not counted)")
    ap.add_argument("--secret", default=None, help=f"seeds the students' variants (default ${variants.SECRET_ENV}, "
                    "else drawn for this run and recorded nowhere)")
    ap.add_argument("--no-sandbox", action="store_true",
                    help="run student code unconfined, as this user (only for code you trust)")
    args = ap.parse_args(args_in)
    try:
        results = grade(args.submissions, args.out, args.jobs, args.timeout, sandbox=not args.no_sandbox,
                        secret=args.secret)
    except SandboxUnavailable as err:
        print(f"refusing to grade: no sandbox for student code ({err}); install bubblewrap "
              "(apt-get install bubblewrap) or pass --no-sandbox for notebooks you trust", file=sys.stderr)
        return 2
    graded = sum(s.status == "graded" for s in results)
    print(f"{len(results)} submissions, {graded} graded; report in {args.out}")
    return 0
