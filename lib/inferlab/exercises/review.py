"""Read a notebook's code (never run it) for what a part's rules forbid: those parts go to a person for review.

A part done by hand lists the library names it must not use (``Part.forbids``, from the notebook's Rules).
``flags`` parses every code cell (IPython magics and shell lines blanked), resolves the names its
imports bind (``import inferlab.memory as m``, ``from inferlab import memory``, ``from inferlab.memory
import paged_waste``), and for each part reads the code that makes its answer: the statements that
assign it, those that name it in the part's own cells (from just after the previous part's ``check``
cell to its own), and every top-level definition this code uses (a helper function, a variable; not
another part's answer, which that part answers for), followed as far as it goes. A use of a forbidden
name there flags the part. Any import of ``inferlab.exercises`` beyond ``checker`` (``check``) and
``data.exercise_data``, by a statement or a string (``importlib.import_module``, ``__import__``), flags
every machine-graded part: the catalog is where the references live.

This is a reading, not a proof: code built from strings (``exec``) is not seen. A flagged part is marked
"needs review", neither zero nor full marks, with the reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .core import Exercise

__all__ = ["ALLOWED_EXERCISE_NAMES", "flags", "cell_sources"]

#: The names of ``inferlab.exercises`` a notebook may import (the shipped cells' own imports).
ALLOWED_EXERCISE_NAMES = ("inferlab.exercises.checker", "inferlab.exercises.check",
                          "inferlab.exercises.data.exercise_data")
_MAGIC = re.compile(r"^(\s*)[%!].*$", re.MULTILINE)
_ASSIGN_HEAD = re.compile(r"^(\s*)[A-Za-z_][A-Za-z_0-9]*\s*=\s*!.*$", re.MULTILINE)  # x = !ls


def cell_sources(nb: Mapping[str, Any]) -> list[str]:
    """The source of every code cell of ``nb``, in order."""
    out = []
    for cell in nb.get("cells") or []:
        if cell.get("cell_type") == "code":
            src = cell.get("source", "")
            out.append("".join(src) if isinstance(src, list) else str(src))
    return out


def _parse(source: str) -> ast.Module | None:
    cleaned = _ASSIGN_HEAD.sub(r"\1pass", _MAGIC.sub(r"\1pass", source))
    try:
        return compile(cleaned, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                       dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def _imports(node: ast.AST) -> list[tuple[str, str]]:
    """(name bound, dotted path it stands for) for an import statement."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names]
    return []


def _imported_paths(node: ast.AST) -> list[str]:
    """Every dotted path an import statement brings in (``import a.b`` brings a.b, not only a)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [f"{node.module}.{a.name}" for a in node.names]
    return []


def _dotted(node: ast.AST, aliases: Mapping[str, str]) -> str | None:
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(attrs)])
    return None


def _under(path: str, prefixes: Sequence[str]) -> str | None:
    for p in prefixes:
        if path == p or path.startswith(p + "."):
            return p
    return None


def _bound(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (imports excluded: they are resolved, not followed)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _exercise_import(tree: ast.Module, aliases: Mapping[str, str]) -> str:
    """Why this cell reaches into inferlab.exercises beyond the allowed names, or ''."""
    for node in ast.walk(tree):
        for path in _imported_paths(node):
            if _under(path, ["inferlab.exercises"]) and path not in ALLOWED_EXERCISE_NAMES:
                return f"imports {path}"
        if isinstance(node, ast.Call):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                        arg.value.startswith("inferlab.exercises") and arg.value != "inferlab.exercises.data":
                    return f"imports {arg.value} (by name)"
        if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
            path = _dotted(node, aliases)
            if path and _under(path, ["inferlab.exercises"]) and path not in ALLOWED_EXERCISE_NAMES \
                    and not any(a.startswith(path + ".") for a in ALLOWED_EXERCISE_NAMES):
                return f"uses {path}"
    return ""


def flags(nb: Mapping[str, Any], ex: Exercise) -> dict[str, str]:
    """Part name -> why it needs review, for every machine-graded part whose code uses what it forbids."""
    trees = [_parse(s) for s in cell_sources(nb)]
    aliases: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree) if tree else []:
            aliases.update(_imports(node))
    graded = [p for p in ex.parts if not p.manual]
    for tree in trees:
        why = _exercise_import(tree, aliases) if tree else ""
        if why:
            return {p.name: f"the notebook {why}, where the references live" for p in graded}
    defs: dict[str, list[ast.stmt]] = {}
    for tree in trees:
        for stmt in tree.body if tree else []:
            for name in _bound(stmt):
                defs.setdefault(name, []).append(stmt)
    ends = {p.name: _anchor(trees, p.name) for p in ex.parts}
    order = sorted((i, name) for name, i in ends.items() if i is not None)
    start_of: dict[str, int] = {}
    previous = -1
    for i, name in order:
        start_of[name] = previous + 1
        previous = i
    out = {}
    for part in graded:
        if not part.forbids or ends[part.name] is None:
            continue
        segment = [s for t in trees[start_of[part.name]: ends[part.name] + 1] if t for s in t.body]
        roots = [s for s in segment if part.name in {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}]
        others = {k: v for k, v in defs.items() if k not in ex._by_name}
        why = _forbidden_use(roots + defs.get(part.name, []), others, aliases, part.forbids)
        if why:
            out[part.name] = f"its code uses {why}, which this part's rules forbid (a hand calculation)"
    return out


def _anchor(trees: list[ast.Module | None], name: str) -> int | None:
    """The cell that closes a part: its ``check("name", ...)`` cell, else the last cell that assigns it."""
    checked = assigned = None
    for i, tree in enumerate(trees):
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check" and \
                    node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == name:
                checked = i
        if name in {n for stmt in tree.body for n in _bound(stmt)}:
            assigned = i
    return checked if checked is not None else assigned


def _forbidden_use(stmts: list[ast.stmt], defs: Mapping[str, list[ast.stmt]], aliases: Mapping[str, str],
                   forbids: Sequence[str]) -> str:
    seen: set[int] = set()
    todo = list(stmts)
    while todo:
        stmt = todo.pop()
        if id(stmt) in seen or isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        seen.add(id(stmt))
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Attribute, ast.Name)):
                path = _dotted(node, aliases)
                if path and _under(path, forbids):
                    return path
            if isinstance(node, ast.Name) and node.id in defs and node.id not in aliases:
                todo += defs[node.id]
    return ""
