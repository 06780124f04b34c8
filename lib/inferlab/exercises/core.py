"""Exercise parts, their references and one comparison rule shared by ``check`` and the grader.

A part names the variable a student assigns in the exercise notebook. Its reference is a function of
the exercise's inputs (the notebook's cell tagged ``parameters``): the public inputs give the answers
``check`` knows (shipped in ``data/exercises/expected.json``, never computed in the student's kernel),
and the grader draws other inputs per student (``Exercise.variant``) and computes their references in
its own process. ``judge`` compares an answer with a reference at the part's precision:

- ``exact``: integers, strings, booleans and exact decimals must match;
- ``sig:N`` ("to N significant figures") and ``dec:N`` ("to N decimals"): every value that rounds to the
  reference's N figures (or decimals) is correct, and so is every value within half a unit of the last
  figure asked for (so both the exact value and a correctly rounded one pass, whichever way a tie rounds);
- ``about``: within 0.5 % of the reference.

A number within ten times that tolerance is "close: check the rounding", not "not yet": the method is
right. Tables (DataFrames) and dicts (Series arrive as dicts) are compared by their labels, in any order;
labels that name nothing asked for (0, 1, 2 ... for batch sizes) are refused. ``...`` (or None) means
not attempted; free-text parts are marked for a human grader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is not imported here: check in a notebook should start fast (numpy scalars are Reals)
    import numpy as np

__all__ = ["Part", "Exercise", "Inputs", "Precision", "Verdict", "STATUSES", "judge", "attempted", "compare"]

STATUSES = ("correct", "close", "wrong", "wrong on variant", "not attempted", "manual", "needs review", "error",
            "timeout")
CLOSE_FACTOR = 10.0  # a number within this many tolerances of the reference is close: check the rounding
ABOUT_RTOL = 5e-3
EXACT_RTOL = 1e-9  # float noise only, for answers the task asks for exactly


class Inputs(dict):
    """An exercise's inputs (name -> value) whose names read as attributes too: ``p.prompt_tokens``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class Precision:
    """How precisely a number must match: ``exact``, ``sig:N``, ``dec:N`` or ``about`` (see the module docstring)."""

    kind: str
    digits: int = 0

    @classmethod
    def parse(cls, text: str) -> Precision:
        """``'exact'``, ``'about'``, ``'sig:3'`` or ``'dec:2'``; ValueError otherwise."""
        kind, _, digits = str(text).partition(":")
        if kind in ("exact", "about") and not digits:
            return cls(kind)
        if kind in ("sig", "dec") and digits.isdigit() and (int(digits) >= 1 or kind == "dec"):
            return cls(kind, int(digits))
        raise ValueError(f"precision must be 'exact', 'about', 'sig:N' or 'dec:N', got {text!r}")

    @property
    def text(self) -> str:
        """The words a task uses to ask for this precision."""
        if self.kind == "sig":
            return f"to {_WORDS.get(self.digits, self.digits)} significant figures"
        if self.kind == "dec":
            return f"to {_WORDS.get(self.digits, self.digits)} decimal{'s' if self.digits != 1 else ''}"
        return "about (within 0.5 %)" if self.kind == "about" else "exactly"

    def tolerance(self, expected: float) -> float:
        """The largest accepted distance from ``expected`` (besides same rounding)."""
        e = abs(expected)
        if self.kind == "sig":
            exponent = math.floor(math.log10(e)) if e > 0 else 0
            return 0.5 * 10.0 ** (exponent - self.digits + 1)
        if self.kind == "dec":
            return 0.5 * 10.0 ** -self.digits
        if self.kind == "about":
            return ABOUT_RTOL * e
        return EXACT_RTOL * max(1.0, e)

    def same_rounding(self, a: float, e: float) -> bool:
        """True when ``a`` and ``e`` round to the same figures (sig) or decimals (dec)."""
        if self.kind == "sig":
            return f"{a:.{self.digits - 1}e}" == f"{e:.{self.digits - 1}e}"
        if self.kind == "dec":
            return f"{a + 0.0:.{self.digits}f}" == f"{e + 0.0:.{self.digits}f}"
        return False


_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


@dataclass(frozen=True)
class Part:
    """One answer: the variable ``name``, its points, a reference (a function of the inputs) and a precision.

    ``forbids``: dotted names (``inferlab.memory``) a hand calculation must not use; ``probes``: for a
    function answer, the arguments it is called with; ``unordered``: a list whose order does not matter;
    ``choice``: an answer picked among a few (a letter, 4 or 5) that a variant need not change.
    """

    name: str
    question: str
    reference: Callable[[Inputs], Any] | None = None  # None: free text, graded by a person
    points: float = 1.0
    precision: str = "exact"
    hint: str = ""
    probes: tuple[tuple[Any, ...], ...] = ()  # for a function answer: arguments to call it with
    forbids: tuple[str, ...] = ()
    unordered: bool = False
    choice: bool = False
    _inputs: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"name must be a Python identifier, got {self.name!r}")
        if self.points < 0 or not math.isfinite(self.points):
            raise ValueError(f"points must be a finite number >= 0, got {self.points!r}")
        Precision.parse(self.precision)
        for f in self.forbids:
            if not (isinstance(f, str) and all(w.isidentifier() for w in f.split("."))):
                raise ValueError(f"forbids must hold dotted names, got {f!r}")

    @property
    def manual(self) -> bool:
        """True when a person grades this part (free text)."""
        return self.reference is None

    @property
    def tolerance(self) -> Precision:
        """The part's precision, parsed."""
        return Precision.parse(self.precision)

    def expected(self, inputs: Mapping[str, Any] | None = None) -> Any:
        """The reference for ``inputs`` (default: the public ones), computed now (a function: its probes' outputs)."""
        if self.reference is None:
            raise ValueError(f"part {self.name!r} is graded by a person and has no reference")
        ref = self.reference(Inputs(self._inputs if inputs is None else inputs))
        return [ref(*args) for args in self.probes] if self.probes else ref


@dataclass(frozen=True)
class Exercise:
    """An exercise of the chapter: its number, title, parts, public inputs and how to draw other inputs.

    ``vary(rng)`` proposes changed inputs (a dict of some input names) for ``variant``.
    """

    id: str
    title: str
    parts: tuple[Part, ...]
    notebook: str = ""
    core: bool = False
    inputs: Mapping[str, Any] = field(default_factory=dict)
    vary: Callable[[np.random.Generator], Mapping[str, Any]] | None = field(default=None, compare=False)
    _by_name: dict[str, Part] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"exercise {self.id}: part names must be distinct")
        clash = set(names) & set(self.inputs)
        if clash:
            raise ValueError(f"exercise {self.id}: inputs and parts share names {sorted(clash)}")
        for name in self.inputs:
            if not name.isidentifier():
                raise ValueError(f"exercise {self.id}: input names must be identifiers, got {name!r}")
        for p in self.parts:
            object.__setattr__(p, "_inputs", dict(self.inputs))
        object.__setattr__(self, "_by_name", {p.name: p for p in self.parts})

    def part(self, name: str) -> Part:
        """The part named ``name``; ValueError naming the parts otherwise."""
        if name not in self._by_name:
            raise ValueError(f"part must be one of {sorted(self._by_name)} for exercise {self.id}, got {name!r}")
        return self._by_name[name]

    @property
    def max_points(self) -> float:
        """Points of the machine-graded parts."""
        return sum(p.points for p in self.parts if not p.manual)

    def expected(self, inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every machine-graded part's reference for ``inputs`` (default: the public inputs)."""
        return {p.name: p.expected(inputs) for p in self.parts if not p.manual}

    def variant(self, seed: int, tries: int = 40,
                public: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Inputs drawn from ``seed`` and their references: (inputs, expected); ``public``: ``expected()`` if known.

        Candidates whose references fail or are not finite are skipped; the first candidate that changes
        every numeric answer (all but ``choice`` parts, booleans and strings) so that the public answer is wrong on it
        (not merely close) is taken, else the one that
        changes most. Without ``vary`` the public inputs come back.
        """
        import numpy as np

        public = self.expected() if public is None else public
        if self.vary is None:
            return dict(self.inputs), public
        rng = np.random.default_rng(seed)
        graded = [p for p in self.parts if not p.manual and not p.choice
                  and not (_is_bool(public[p.name]) or isinstance(public[p.name], str))]
        best: tuple[int, dict[str, Any], dict[str, Any]] | None = None
        for _ in range(tries):
            candidate = {**self.inputs, **self.vary(rng)}
            try:
                found = self.expected(candidate)
            except (ValueError, ArithmeticError, KeyError, IndexError):
                continue
            if not all(_finite(v) for v in found.values()):
                continue
            # a public answer must be plainly wrong on the variant, not "close": else a typist reads as a rounder
            changed = sum(compare(public[p.name], found[p.name], p)[0] == "wrong" for p in graded)
            if best is None or changed > best[0]:
                best = (changed, candidate, found)
            if changed == len(graded):
                break
        return (best[1], best[2]) if best else (dict(self.inputs), public)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"


def _finite(v: Any) -> bool:
    if v is None:
        return False
    if _is_bool(v) or isinstance(v, str):
        return True
    if isinstance(v, Real):
        return math.isfinite(float(v))
    if type(v).__name__ == "DataFrame":
        return all(math.isfinite(float(x)) for x in v.to_numpy().ravel())
    if isinstance(v, Mapping):
        return all(_finite(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return all(_finite(x) for x in v)
    return True


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing one answer: a status from ``STATUSES``, the points earned and a message."""

    status: str
    points: float
    message: str

    def _ipython_display_(self) -> None:
        """Nothing: ``check`` has already shown the verdict as a line of text, so a cell ending in it shows no repr."""


def attempted(value: Any) -> bool:
    """False for the placeholders a shipped notebook holds (``...``, None, an empty or '...' string)."""
    if value is Ellipsis or value is None:
        return False
    if isinstance(value, str) and value.strip() in ("", "...", "TODO"):
        return False
    return True


# ---- the comparison ---------------------------------------------------------------------------------------
_ORDER = {"correct": 0, "close": 1, "wrong": 2}


def _worst(results: list[tuple[str, str]]) -> tuple[str, str]:
    if not results:
        return "correct", ""
    return max(results, key=lambda r: (_ORDER[r[0]], bool(r[1])))


def _label(x: Any) -> str:
    """A label as compared: integral numbers as integers ('1' for 1 and 1.0), text stripped."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, Real) and math.isfinite(float(x)) and float(x) == int(float(x)):
        return str(int(float(x)))
    return str(x).strip()


def _number(a: float, e: float, precision: Precision, integral: bool) -> str:
    if not math.isfinite(a) or not math.isfinite(e):
        return "correct" if a == e else "wrong"
    if precision.kind == "exact":
        if integral:
            return "correct" if a == e else "wrong"
        return "correct" if abs(a - e) <= precision.tolerance(e) else "wrong"
    tol = precision.tolerance(e)
    if abs(a - e) <= tol * (1 + 1e-9) + 1e-12 * abs(e) or precision.same_rounding(a, e):
        return "correct"
    return "close" if abs(a - e) <= CLOSE_FACTOR * tol else "wrong"


def compare(answer: Any, expected: Any, part: Part) -> tuple[str, str]:
    """(``correct`` | ``close`` | ``wrong``, why when wrong for a reason other than the value) for one answer."""
    prec = part.tolerance
    if type(expected).__name__ == "ndarray":
        expected = expected.tolist()
    if type(answer).__name__ == "ndarray":
        answer = answer.tolist()
    if _is_bool(expected):
        ok = _is_bool(answer) and bool(answer) == bool(expected)
        return ("correct" if ok else "wrong"), ("" if ok or _is_bool(answer) else "answer True or False")
    if isinstance(expected, Real):
        if _is_bool(answer) or not isinstance(answer, Real):
            return "wrong", "a number is asked for" if not isinstance(answer, (list, dict)) else ""
        return _number(float(answer), float(expected), prec, isinstance(expected, Integral)), ""
    if isinstance(expected, str):
        ok = isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
        return ("correct" if ok else "wrong"), ""
    if type(expected).__name__ == "DataFrame":
        return _frame(answer, expected, part)
    if isinstance(expected, Mapping):
        if not isinstance(answer, Mapping):
            return "wrong", "a dict is asked for"
        want = {_label(k): v for k, v in expected.items()}
        got: dict[str, Any] = {}
        for k, v in answer.items():
            got.setdefault(_label(k), v)
        if set(got) != set(want) or len(got) != len(answer):
            return "wrong", "use the keys the task names"
        return _worst([compare(got[k], v, part) for k, v in want.items()])
    if isinstance(expected, Sequence):
        if isinstance(answer, Mapping) and answer.keys() == {"error"}:
            return "wrong", f"calling your function raised {answer['error']}"
        if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
            return "wrong", "a function is asked for" if part.probes else "a list is asked for"
        if len(answer) != len(expected):
            return "wrong", ""
        errors = [a["error"] for a in answer if isinstance(a, Mapping) and a.keys() == {"error"}]
        if errors:
            return "wrong", f"calling your function raised {errors[0]}"
        pairs = list(zip(answer, expected))
        if part.unordered:
            try:
                pairs = list(zip(sorted(answer), sorted(expected)))
            except TypeError:
                return "wrong", ""
        return _worst([compare(a, e, part) for a, e in pairs])
    return ("correct" if answer == expected else "wrong"), ""


def _frame(answer: Any, expected: Any, part: Part) -> tuple[str, str]:
    import pandas as pd

    if isinstance(answer, Mapping):
        try:
            answer = pd.DataFrame(answer)
        except (ValueError, TypeError):
            return "wrong", "a table (pandas.DataFrame) is asked for"
    if not isinstance(answer, pd.DataFrame):
        return "wrong", "a table (pandas.DataFrame) is asked for"
    rows, cols = [_label(i) for i in answer.index], [_label(c) for c in answer.columns]
    want_rows, want_cols = [_label(i) for i in expected.index], [_label(c) for c in expected.columns]
    if len(set(rows)) != len(rows) or len(set(cols)) != len(cols) or set(rows) != set(want_rows) \
            or set(cols) != set(want_cols):
        return "wrong", "label the rows and columns as the task asks"
    values = dict(zip(((r, c) for r in rows for c in cols), answer.to_numpy().ravel().tolist()))
    exp = expected.to_numpy().tolist()
    return _worst([compare(values[r, c], exp[i][j], part) for i, r in enumerate(want_rows)
                   for j, c in enumerate(want_cols)])


def judge(part: Part, answer: Any, expected: Any | None = None) -> Verdict:
    """Compare ``answer`` with ``expected`` (default: the public reference, computed here); check and grader both."""
    if not attempted(answer):
        return Verdict("not attempted", 0.0, "not attempted yet")
    if part.manual:
        return Verdict("manual", 0.0, "saved for your instructor to read")
    exp = part.expected() if expected is None else expected
    try:
        status, why = compare(answer, exp, part)
    except Exception:  # an answer of a shape we cannot compare is simply wrong
        status, why = "wrong", ""
    if status == "correct":
        return Verdict("correct", part.points, "correct")
    if status == "close":
        return Verdict("close", 0.0, f"close: check the rounding ({part.tolerance.text})")
    return Verdict("wrong", 0.0, "not yet" + (f": {why}" if why else f": {part.hint}" if part.hint else ""))
