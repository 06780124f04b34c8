"""Synthetic submissions for the grader's tests: shipped notebooks with answer cells filled in."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd

from inferlab.exercises import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = {"blocks_saved": ("lambda b: b - 1", "lambda b: b")}  # (right, wrong)


def _literal(value: object, wrong: bool) -> str:
    if hasattr(value, "item") and not isinstance(value, pd.DataFrame):  # numpy scalar
        value = value.item()
    if isinstance(value, pd.DataFrame):
        frame = value * (1.5 if wrong else 1.0)
        return f"__import__('pandas').DataFrame({frame.to_dict(orient='list')!r}, index={list(frame.index)!r})"
    if isinstance(value, bool):
        return repr(not value if wrong else value)
    if isinstance(value, (int, float)):
        return repr(type(value)(value * 3 + 7) if wrong else value)
    if isinstance(value, str):
        return repr("Z" if wrong else value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v, wrong)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, wrong) for v in value) + "]"
    return repr(value)


def notebook_path(ex_id: str) -> Path:
    """The shipped notebook of exercise ``ex_id``."""
    return ROOT / "exercises" / EXERCISES[ex_id].notebook


def submission(ex_id: str, student: str = "", wrong: bool = False, extra: str = "") -> nbformat.NotebookNode:
    """The shipped notebook with every answer filled in (right or wrong), a name, and optional extra code at the end."""
    nb = nbformat.read(notebook_path(ex_id), as_version=4)
    ex = EXERCISES[ex_id]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.startswith("STUDENT ="):
            cell.source = re.sub(r'STUDENT = ""', f"STUDENT = {student!r}", cell.source, count=1)
        for part in ex.parts:
            if cell.source.startswith(f"{part.name} = "):
                if part.manual:
                    answer = repr("My explanation.")
                elif part.name in FUNCTIONS:
                    answer = FUNCTIONS[part.name][wrong]
                else:
                    answer = _literal(part.reference(), wrong)
                cell.source = f"{part.name} = {answer}"
    if extra:
        nb.cells.append(nbformat.v4.new_code_cell(extra))
    return nb
