"""Exercises 8-1 ... 8-9: parts, references computed by the library, and feedback in the notebook.

In an exercise notebook::

    from inferlab.exercises import checker
    check = checker("8-1")
    b_kv_2k = ...            # the student's answer replaces the ...
    check("b_kv_2k", b_kv_2k)

``check`` says correct, not yet (with a hint, never the answer) or not attempted. The grader
(``python -m inferlab.grade``) applies the same rule, with references computed in its own process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import EXERCISES
from .core import STATUSES, Exercise, Part, Verdict, attempted, judge

__all__ = ["EXERCISES", "Exercise", "Part", "Verdict", "STATUSES", "attempted", "judge", "exercise", "answer_of",
           "check", "checker"]

_SYMBOLS = {"correct": "✅ correct", "wrong": "❌ not yet", "not attempted": "⬜ not attempted",
            "manual": "📝 saved for your instructor"}


def exercise(exercise_id: str) -> Exercise:
    """The exercise numbered ``exercise_id`` ('8-1' ... '8-9')."""
    if exercise_id not in EXERCISES:
        raise ValueError(f"exercise_id must be one of {sorted(EXERCISES)}, got {exercise_id!r}")
    return EXERCISES[exercise_id]


def answer_of(part: Part, value: Any) -> Any:
    """What gets compared: the value itself, or a function answer's outputs on the part's probes."""
    if part.probes and callable(value):
        return [value(*args) for args in part.probes]
    return value


def check(exercise_id: str, part: str, value: Any) -> Verdict:
    """Compare one answer with the library's reference and show the verdict (a Markdown line in a notebook)."""
    p = exercise(exercise_id).part(part)
    try:
        verdict = judge(p, answer_of(p, value) if attempted(value) else value)
    except Exception as err:  # the student's function raised: say so, do not crash the notebook
        verdict = Verdict("wrong", 0.0, f"not yet: calling your function raised {type(err).__name__}: {err}")
    text = f"**{exercise_id} `{part}`**: {_SYMBOLS[verdict.status]}"
    if verdict.status == "wrong" and verdict.message != "not yet":
        text += f" ({verdict.message.removeprefix('not yet: ')})"
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # pragma: no cover - outside IPython
        print(text)
    return verdict


def checker(exercise_id: str) -> Callable[[str, Any], Verdict]:
    """``check`` bound to one exercise: ``check = checker('8-1'); check('b_kv_2k', b_kv_2k)``."""
    exercise(exercise_id)
    return lambda part, value: check(exercise_id, part, value)
