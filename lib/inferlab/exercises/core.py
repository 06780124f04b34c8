"""Exercise parts, their references and one comparison rule shared by ``check`` and the grader.

A part names the variable a student assigns in the exercise notebook. Its reference is computed
by ``inferlab`` when asked (never stored in the notebook), and ``judge`` compares an answer with
it within the part's tolerance. ``...`` (or None) means not attempted; free-text parts are marked
for a human grader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = ["Part", "Exercise", "Verdict", "STATUSES", "judge", "attempted"]

STATUSES = ("correct", "wrong", "not attempted", "manual", "error", "timeout")


@dataclass(frozen=True)
class Part:
    """One answer: the variable ``name``, its points, a reference function and a tolerance (relative and absolute)."""

    name: str
    question: str
    reference: Callable[[], Any] | None = None  # None: free text, graded by a person
    points: float = 1.0
    rtol: float = 1e-3
    atol: float = 0.0
    hint: str = ""
    probes: tuple[tuple[Any, ...], ...] = ()  # for a function answer: arguments to call it with

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"name must be a Python identifier, got {self.name!r}")
        if self.points < 0 or not math.isfinite(self.points):
            raise ValueError(f"points must be a finite number >= 0, got {self.points!r}")
        if self.rtol < 0 or self.atol < 0:
            raise ValueError("rtol and atol must be >= 0")

    @property
    def manual(self) -> bool:
        """True when a person grades this part (free text)."""
        return self.reference is None

    def expected(self) -> Any:
        """The reference answer, computed now by the library (for a function answer: its outputs on the probes)."""
        if self.reference is None:
            raise ValueError(f"part {self.name!r} is graded by a person and has no reference")
        ref = self.reference()
        return [ref(*args) for args in self.probes] if self.probes else ref


@dataclass(frozen=True)
class Exercise:
    """An exercise of the chapter: its number, title and parts."""

    id: str
    title: str
    parts: tuple[Part, ...]
    notebook: str = ""
    core: bool = False
    _by_name: dict[str, Part] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"exercise {self.id}: part names must be distinct")
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


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing one answer: a status from ``STATUSES``, the points earned and a message."""

    status: str
    points: float
    message: str


def attempted(value: Any) -> bool:
    """False for the placeholders a shipped notebook holds (``...``, None, an empty or '...' string)."""
    if value is Ellipsis or value is None:
        return False
    if isinstance(value, str) and value.strip() in ("", "...", "TODO"):
        return False
    return True


def _close(answer: Any, expected: Any, rtol: float, atol: float) -> bool:
    if isinstance(expected, (bool, np.bool_)):
        return isinstance(answer, (bool, np.bool_)) and bool(answer) == bool(expected)
    if isinstance(answer, (bool, np.bool_)):
        return False
    if isinstance(expected, (Real, np.number)):
        if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (Real, np.number)):
            return False
        a, e = float(answer), float(expected)
        if not math.isfinite(a):
            return math.isinf(e) and a == e
        if isinstance(expected, (Integral, np.integer)) and rtol == 0 and atol == 0:
            return a == e
        return abs(a - e) <= atol + rtol * abs(e)
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
    if type(expected).__name__ == "DataFrame":
        import pandas as pd

        frame = answer if isinstance(answer, pd.DataFrame) else None
        if frame is None:
            try:
                frame = pd.DataFrame(answer)
            except (ValueError, TypeError):
                return False
        if frame.shape != expected.shape:
            return False
        return _close(frame.to_numpy().tolist(), expected.to_numpy().tolist(), rtol, atol)
    if isinstance(expected, Mapping):
        return (isinstance(answer, Mapping) and set(map(str, answer)) == set(map(str, expected))
                and all(_close(answer[k] if k in answer else answer[str(k)], v, rtol, atol)
                        for k, v in expected.items()))
    if isinstance(expected, (Sequence, np.ndarray)):
        if isinstance(answer, (str, bytes)) or not isinstance(answer, (Sequence, np.ndarray)):
            return False
        return len(answer) == len(expected) and all(_close(a, e, rtol, atol) for a, e in zip(answer, expected))
    return answer == expected


def judge(part: Part, answer: Any, expected: Any | None = None) -> Verdict:
    """Compare ``answer`` with the part's reference (computed here unless given); the rule of check and grader."""
    if not attempted(answer):
        return Verdict("not attempted", 0.0, "not attempted yet")
    if part.manual:
        return Verdict("manual", 0.0, "saved for your instructor to read")
    exp = part.expected() if expected is None else expected
    try:
        ok = _close(answer, exp, part.rtol, part.atol)
    except Exception:  # an answer of a shape we cannot compare is simply wrong
        ok = False
    if ok:
        return Verdict("correct", part.points, "correct")
    return Verdict("wrong", 0.0, "not yet" + (f": {part.hint}" if part.hint else ""))
