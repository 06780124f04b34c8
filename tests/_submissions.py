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


# ---- hostile submissions: each tries one way around the grader (tests/test_grade.py grades them in one batch) ----
def _with(nb: nbformat.NotebookNode, *cells: str) -> nbformat.NotebookNode:
    for code in cells:
        nb.cells.append(nbformat.v4.new_code_cell(code))
    return nb


def forger(known: dict, name: str) -> nbformat.NotebookNode:
    """Wrong answers, STUDENT set to another student, and every way to make the grader read other values or name.

    ``known``: the right answers (as a friend might pass them on). The notebook prints them in the old dump
    format from hooks, a patched ``print``, ``json.dumps`` and ``sys.stdout``, and asks the library for the
    references; the grader must read none of it.
    """
    forged = {**known, "STUDENT": name, "halved_s": {"__frame__": 1}}
    return _with(submission("8-8", name, wrong=True), f'''
import builtins, json, sys
LINE = "@@inferlab-answers@@" + json.dumps({forged!r})
ip = get_ipython()
ip.events.register("pre_run_cell", lambda *a: sys.__stdout__.write(LINE + "\\n"))
ip.events.register("post_run_cell", lambda *a: print(LINE))
_print = builtins.print
builtins.print = lambda *a, **k: _print(LINE)
_dumps = json.dumps  # the old grader dumped a dict holding STUDENT: forge that one, keep the kernel's own messages
json.dumps = lambda o, *a, **k: LINE[20:] if isinstance(o, dict) and "STUDENT" in o else _dumps(o, *a, **k)
class Out:
    def write(self, s): sys.__stdout__.write(LINE + "\\n"); return len(s)
    def flush(self): pass
sys.stdout = Out()
print("anything")
''', '''
from inferlab.exercises import EXERCISES
for _p in EXERCISES["8-8"].parts:          # the references, if the library gives them
    try:
        globals()[_p.name] = _p.expected()
    except Exception as err:
        REFUSED = str(err)
''')


_SNOOP = r"""
import glob, marshal, os, re
for path, text in [(T["canary"], "changed"), (T["out"] + "/grades.csv", "x"), (T["out"] + "/report.json", "[]"),
                   (T["lib"] + "/inferlab/exercises/catalog.py", "\n# SNOOPED\n"), (T["lib"] + "/snooped.txt", "x")]:
    try:
        with open(path, "a") as f:
            f.write(text)
    except OSError:
        pass
found = []
places = [T["honest"]] + glob.glob(T["runs"] + "/**/*", recursive=True) + glob.glob("/tmp/*/*.ipynb")
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ("cmdline", "environ"):
        try:
            text = open(f"/proc/{pid}/{what}", "rb").read().decode(errors="replace")
        except OSError:
            continue
        places += re.findall(r"[^\x00\s]+\.ipynb", text)
    try:
        places += glob.glob(os.readlink(f"/proc/{pid}/cwd") + "/*.ipynb")
    except OSError:
        pass
for path in places:
    try:
        found.append(open(path).read())
    except OSError:
        pass
for text in found:
    if "8-8" not in text or "halved_s = ..." in text:
        continue
    for name in ("halved_s", "net_speedup", "breakeven_setup_s"):
        m = re.search(name + r" = ([^\\\n\"]+)", text)
        if m:
            try:
                globals()[name] = eval(m.group(1))
            except Exception:
                pass
for pyc in glob.glob(T["lib"] + "/inferlab/exercises/__pycache__/catalog*.pyc"):
    try:
        ns = {"__name__": "inferlab.exercises.catalog", "__package__": "inferlab.exercises"}
        exec(marshal.loads(open(pyc, "rb").read()[16:]), ns)
        for p in ns["EXERCISES"]["8-8"].parts:
            globals()[p.name] = p.expected()
    except Exception:
        pass
"""

_DAEMON = r"""
import os, subprocess, sys, time
for _ in range(25):
    subprocess.Popen(["sleep", "600"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 60
        while time.time() < end:
            for path, text in [(T["out"] + "/grades.csv", "student\nforged"), (T["out"] + "/report.json", "[]"),
                               (T["canary"], "changed")]:
                try:
                    with open(path, "w") as f:
                        f.write(text)
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
"""


def snoop(targets: dict) -> nbformat.NotebookNode:
    """Wrong answers; looks for another student's notebook (by its path, through /proc, in the run folders) and
    for the references (the catalog's bytecode), and copies any answers it finds. Then tries to write outside:
    a canary file, the report folder, the library. ``targets``: absolute paths (honest, runs, canary, out, lib)."""
    return _with(submission("8-8", "", wrong=True), f"T = {targets!r}\n" + _SNOOP)


def daemon(targets: dict) -> nbformat.NotebookNode:
    """Right answers; leaves a double-forked setsid daemon that holds the worker's pipes and keeps trying to
    rewrite the report and a canary for a minute, and 25 processes in sessions of their own."""
    return _with(submission("8-8", ""), f"T = {targets!r}\n" + _DAEMON)


def hog() -> nbformat.NotebookNode:
    """Wrong answers; asks for 5 GB of memory, writes a 200 MB file, then prints 24 MB."""
    return _with(submission("8-8", "", wrong=True), '''
try:
    big = bytearray(5 * 10**9)
except MemoryError:
    pass
try:
    with open("big.bin", "wb") as f:
        for _ in range(200):
            f.write(b"x" * 10**6)
except OSError:
    pass
''', "for _ in range(24):\n    print('x' * 10**6)")


def worker_killer(known: dict) -> nbformat.NotebookNode:
    """Wrong answers; starts 300 processes (a fork bomb, cut short), writes a forged result with the right
    answers (``known``) into every descriptor of the process that drives the kernel (the grader's worker),
    then kills that process so its own result never comes."""
    return _with(submission("8-8", "", wrong=True), f"KNOWN = {known!r}\n" + '''
import json, os, signal, subprocess
procs = []
try:
    for _ in range(300):
        procs.append(subprocess.Popen(["sleep", "600"]))
except OSError:
    pass
def lit(v):
    if isinstance(v, dict):
        return "{'__dict__': [%s]}" % ", ".join("(%r, %r)" % kv for kv in v.items())
    return repr(v)
forged = json.dumps({"status": "graded", "nonce": "n", "message": "",
                     "answers": {k: repr("{'nonce': 'n', 'value': %s}" % lit(v)) for k, v in KNOWN.items()}})
worker = os.getppid()
try:
    fds = os.listdir(f"/proc/{worker}/fd")
except OSError:
    fds = [str(n) for n in range(3, 64)]
for fd in fds:
    try:
        out = os.open(f"/proc/{worker}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        os.write(out, forged.encode())
        os.close(out)
    except OSError:
        pass
os.kill(worker, signal.SIGKILL)
''')


def bytes_keys() -> nbformat.NotebookNode:
    """Right answers, except one dict keyed by bytes ({b"prefill": ...}): an answer the grader must decode."""
    nb = submission("8-8", "")
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("halved_s = "):
            cell.source = re.sub(r"'(prefill|decode|tools)'", r"b'\1'", cell.source)
    return nb
