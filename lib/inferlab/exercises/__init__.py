"""Exercises 8-1 ... 8-9: parts, references computed by the library, and feedback in the notebook.

In an exercise notebook::

    from inferlab.exercises import checker
    check = checker("8-1")
    # the cell tagged parameters holds the inputs; answers are computed from them
    b_kv_short = ...         # the student's answer replaces the ...
    check("b_kv_short", b_kv_short)

``check`` says correct, close (check the rounding), not yet (with a hint, never the answer) or not
attempted, for the public inputs: it compares with their expected answers shipped in
``data/exercises/expected.json`` (``public``) and never runs a reference. It sends the answer through
the same encoding the grader reads (``answers.roundtrip``) and judges it with the same rule
(``core.judge``). The grader (``python -m inferlab.grade``) runs the notebook again on a variant of the
inputs drawn per student and computes that variant's references in its own process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import EXERCISES
from .core import STATUSES, Exercise, Part, Verdict, attempted, judge

__all__ = ["EXERCISES", "Exercise", "Part", "Verdict", "STATUSES", "attempted", "judge", "exercise", "answer_of",
           "check", "checker"]

_SYMBOLS = {"correct": "✓ correct", "close": "≈ close", "wrong": "✗ not yet",  # symbols the book's webfonts carry
            "not attempted": "○ not attempted", "manual": "✎ saved for your instructor"}


def exercise(exercise_id: str) -> Exercise:
    """The exercise numbered ``exercise_id`` ('8-1' ... '8-9')."""
    if exercise_id not in EXERCISES:
        raise ValueError(f"exercise_id must be one of {sorted(EXERCISES)}, got {exercise_id!r}")
    return EXERCISES[exercise_id]


def answer_of(part: Part, value: Any) -> Any:
    """What gets compared: ``value`` as the grader reads it (a function answer: its outputs on the part's probes)."""
    from .answers import roundtrip

    return roundtrip(value, part.probes)


def _inputs_changed(ex: Exercise) -> bool:
    """True when the notebook's input variables differ from the printed ones (check knows only their answers)."""
    try:
        from IPython import get_ipython

        user = get_ipython().user_ns  # type: ignore[union-attr]
    except (ImportError, AttributeError):
        return False
    for name, value in ex.inputs.items():
        try:
            if name in user and bool(user[name] != value):
                return True
        except Exception:  # an array, or a value that will not compare: not the printed input
            return True
    return False


def check(exercise_id: str, part: str, value: Any) -> Verdict:
    """Compare one answer with the public inputs' expected answer and show the verdict (a Markdown line)."""
    ex = exercise(exercise_id)
    p = ex.part(part)
    if not attempted(value) or p.manual:
        verdict = judge(p, value)  # returns before any reference is needed
    else:
        from .answers import Unreadable
        from .public import load

        try:
            verdict = judge(p, answer_of(p, value), load(exercise_id)[part])
        except Unreadable as err:
            verdict = Verdict("wrong", 0.0, f"not yet: the answer cannot be read ({err})")
        except Exception as err:  # the student's value misbehaved: say so, do not crash the notebook
            verdict = Verdict("wrong", 0.0, f"not yet: reading your answer raised {type(err).__name__}: {err}")
    text = f"**{exercise_id} `{part}`**: {_SYMBOLS[verdict.status]}"
    if verdict.status == "close":
        text += verdict.message.removeprefix("close")
    elif verdict.status == "wrong" and verdict.message != "not yet":
        text += f" ({verdict.message.removeprefix('not yet: ')})"
    if verdict.status in ("wrong", "close") and _inputs_changed(ex):
        text += " (your inputs differ from the printed ones, and check knows only their answers)"
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # pragma: no cover - outside IPython
        print(text)
    return verdict


def checker(exercise_id: str) -> Callable[[str, Any], Verdict]:
    """``check`` bound to one exercise: ``check = checker('8-1'); check('b_kv_short', b_kv_short)``."""
    exercise(exercise_id)
    return lambda part, value: check(exercise_id, part, value)
