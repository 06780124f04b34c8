"""Hidden variants: each student's inputs, drawn from a secret only the grader knows, written into the notebook.

The grader runs every submission twice in one sandbox: once with a variant of the inputs and once with
the public ones, each time with the notebook's cell tagged ``parameters`` rewritten (``with_inputs``: the
cell's assignments to input names get the run's values, the rest of the cell is kept). The variant is
``Exercise.variant(seed)`` with ``seed = HMAC-SHA256(secret, exercise id + student)``; the secret comes
from ``--secret``, else ``$INFERLAB_GRADE_SECRET``, else it is drawn for the run and recorded nowhere.
Nothing of it reaches the sandbox: the notebooks it runs hold the inputs, never the seed or the secret.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from typing import Any

__all__ = ["SECRET_ENV", "TAG", "secret", "seed", "parameters_cell", "assignments", "with_inputs"]

SECRET_ENV = "INFERLAB_GRADE_SECRET"
TAG = "parameters"


def secret(given: str | None = None) -> tuple[bytes, str]:
    """The run's secret and where it came from: ``given`` (--secret), ``$INFERLAB_GRADE_SECRET`` or drawn now."""
    if given:
        return given.encode(), "--secret"
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV].encode(), f"${SECRET_ENV}"
    return secrets.token_bytes(32), "drawn for this run, recorded nowhere"


def seed(key: bytes, student: str, exercise_id: str) -> int:
    """The variant seed of ``student`` for ``exercise_id``: the first 8 bytes of HMAC-SHA256(key, id NUL student)."""
    digest = hmac.new(key, f"{exercise_id}\0{student}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def _tags(cell: Mapping[str, Any]) -> list[str]:
    tags = (cell.get("metadata") or {}).get("tags") or []
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _assigned(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}


def parameters_cell(nb: Mapping[str, Any], names: list[str]) -> int | None:
    """Index of the code cell tagged ``parameters``; else of the first code cell that assigns most of ``names``."""
    cells = nb.get("cells") or []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and TAG in _tags(cell):
            return i
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and names and 2 * len(_assigned(_source(cell)) & set(names)) > len(names):
            return i
    return None


def assignments(source: str, inputs: Mapping[str, Any]) -> str:
    """``source`` with every top-level assignment to an input name given that input's value (``repr``).

    Other code and comments stay; inputs the cell does not assign are appended. A cell that does not
    parse (a magic, a typo) is replaced by the assignments alone.
    """
    lines = [f"{name} = {value!r}" for name, value in inputs.items()]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "# the grader's inputs (the cell did not parse)\n" + "\n".join(lines) + "\n"
    text = source.splitlines(keepends=True)
    offsets = [0]
    for line in text:
        offsets.append(offsets[-1] + len(line))
    spans, done = [], set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id in inputs:
            v = node.value
            start = offsets[v.lineno - 1] + len(text[v.lineno - 1].encode()[:v.col_offset].decode(errors="ignore"))
            end = offsets[v.end_lineno - 1] + len(
                text[v.end_lineno - 1].encode()[:v.end_col_offset].decode(errors="ignore"))
            spans.append((start, end, repr(inputs[targets[0].id])))
            done.add(targets[0].id)
    out = source
    for start, end, value in sorted(spans, reverse=True):
        out = out[:start] + value + out[end:]
    missing = [line for name, line in zip(inputs, lines) if name not in done]
    if missing:
        out = out.rstrip("\n") + "\n" + "\n".join(missing) + "\n"
    return out


def with_inputs(nb: Mapping[str, Any], index: int, inputs: Mapping[str, Any]) -> Any:
    """A copy of ``nb`` whose cell ``index`` assigns ``inputs`` (``assignments``); ``nb`` is left as it was."""
    out = copy.deepcopy(nb)
    cell = out["cells"][index]
    cell["source"] = assignments(_source(cell), inputs)
    return out
