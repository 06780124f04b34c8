"""Synthetic submissions for the grader's tests: shipped notebooks with answer cells filled in.

``SOLUTIONS`` holds an honest answer cell for every part: code that computes the answer from the inputs of
the notebook's ``parameters`` cell, as the exercises ask, so it is right on any variant. ``submission``
fills a notebook with them (or with wrong numbers); ``typist`` fills it with the public answers typed as
numbers, right for ``check`` and wrong on a variant.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd

from inferlab.exercises import EXERCISES, public

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = {"blocks_saved": ("lambda b: (b - 1) * extra_shared_blocks", "lambda b: b")}  # (right, wrong)

SOLUTIONS: dict[str, dict[str, str]] = {
    "8-1": {
        "per_token_gib": "from inferlab.units import GiB\n"
                         "per_token_gib = pd.DataFrame({str(L): [(weight_bytes / b + L * kv_bytes_per_token) / GiB "
                         "for b in batches] for L in contexts}, index=batches)",
        "b_kv_short": "import math\nb_kv_short = math.ceil(weight_bytes / (contexts[0] * kv_bytes_per_token))",
        "b_kv_long": "b_kv_long = math.ceil(weight_bytes / (contexts[1] * kv_bytes_per_token))",
        "max_requests_short": "def fit(L):\n"
                              "    blocks = math.ceil((L + output_tokens - 1) / block_tokens)\n"
                              "    return int(kv_budget_gib * GiB // (blocks * block_tokens * kv_bytes_per_token))\n"
                              "max_requests_short = fit(contexts[0])",
        "max_requests_long": "max_requests_long = fit(contexts[1])",
        "capacity_binds_first": "capacity_binds_first = (max_requests_short < b_kv_short\n"
                                "                        and max_requests_long < b_kv_long)",
    },
    "8-2": {
        "prefill_r0_r1_ms": "pairs = lambda c, h: c * h + c * (c + 1) // 2\n"
                            "def cost_ms(tokens, n_pairs):\n"
                            "    return fixed_ms + per_token_us / 1e3 * tokens + per_pair_ns / 1e6 * n_pairs\n"
                            "prefill_r0_r1_ms = cost_ms(2 * prompt_short, 2 * pairs(prompt_short, 0))",
        "decode_ms": "decode_ms = cost_ms(2, 2 * (prompt_short + 1))",
        "admit_r2_ms": "admit_r2_ms = cost_ms(prompt_long + 1, pairs(prompt_long, 0) + prompt_short + 2)",
        "pairs_h0": "pairs_h0 = pairs(chunk_tokens, 0)",
        "pairs_cached": "pairs_cached = pairs(chunk_tokens, cached_tokens)",
        "budget_within_gap": "budget_within_gap = int(record.index[record['max_itl_s'] < gap_limit_ms / 1000].max())",
        "budget_fastest": "budget_fastest = int(record['late_queue_mean_s'].idxmin())",
    },
    "8-3": {
        "tail_waste": "import math\ntail_waste = {b: [math.ceil(n / b) * b - n for n in lengths] for b in block_sizes}",
        "total_waste": "total_waste = {b: sum(w) for b, w in tail_waste.items()}",
        "table_entries": "table_entries = {b: sum(math.ceil(n / b) for n in lengths) for b in block_sizes}",
        "independent_mib": "from inferlab.units import MiB\n"
                           "def kv_mib(n, shared):\n"
                           "    shared_blocks = shared // block_tokens\n"
                           "    rest = prompt_tokens + output_tokens - 1 - shared_blocks * block_tokens\n"
                           "    private = math.ceil(rest / block_tokens)\n"
                           "    return (shared_blocks + n * private) * block_tokens * kv_bytes_per_token / MiB\n"
                           "independent_mib = {n: kv_mib(n, 0) for n in request_counts}",
        "shared_mib": "shared_mib = {n: kv_mib(n, shared_prefix_tokens) for n in request_counts}",
    },
    "8-4": {
        "value_a_ms": "from inferlab.example import MODEL\n"
                      "def times(tokens, link_gb_s):\n"
                      "    t_rec = MODEL.flops(tokens, logits=1) / (peak_tflops * 1e12 * mfu)\n"
                      "    t_fetch = tokens * kv_bytes_per_token / (link_gb_s * 1e9)\n"
                      "    return t_rec, t_fetch\n"
                      "def value(tokens, p, link_gb_s):\n"
                      "    t_rec, t_fetch = times(tokens, link_gb_s)\n"
                      "    return p * (t_rec - t_fetch) - t_fetch\n"
                      "value_a_ms = value(a_tokens, p_hit, link_gb_s) * 1e3",
        "value_three_b_ms": "value_three_b_ms = b_count * value(b_tokens, p_hit, link_gb_s) * 1e3",
        "p_a_crossover": "def crossover(link_gb_s):\n"
                         "    t_rec, t_fetch = times(a_tokens, link_gb_s)\n"
                         "    return (b_count * value(b_tokens, p_hit, link_gb_s) + t_fetch) / (t_rec - t_fetch)\n"
                         "p_a_crossover = crossover(link_gb_s)",
        "p_a_crossover_gen4": "p_a_crossover_gen4 = crossover(gen4_gb_s)",
        "common_share": "common_share = replay['shared_with_previous'].sum() / replay['input_tokens'].sum()",
        "hit_share_1gib": "hit_share_1gib = replay['hit_tokens_1gib'].sum() / replay['input_tokens'].sum()",
    },
    "8-5": {
        "net_mib": "net_mib = {b: (offloaded - b) * ffn_mib for b in buffers}",
        "extra_inputs": "extra_inputs = {b: int(net_mib[b] // input_state_mib) for b in buffers}",
        "extra_requests": "extra_requests = {b: int(net_mib[b] // request_state_mib) for b in buffers}",
        "copy_step_ms": "from inferlab.units import GB, MiB\n"
                        "copy_bytes = offloaded * ffn_mib * MiB\n"
                        "copy_step_ms = {k: copy_bytes / (bw * GB) * 1e3 for k, bw in links_gb_s.items()}",
        "copy_total_s": "copy_total_s = {k: steps * copy_bytes / (bw * GB) for k, bw in links_gb_s.items()}",
        "min_bandwidth_gb_s": "min_bandwidth_gb_s = steps * copy_bytes / copy_budget_s / GB",
    },
    "8-6": {
        "kv_mib": "import math\nfrom inferlab.units import MiB\n"
                  "def kv(tokens, bits):\n"
                  "    values = math.ceil(tokens / block_tokens) * block_tokens * kv_bytes_per_token / 2\n"
                  "    return values / 32 * (32 * bits / 8 + 2) / MiB\n"
                  "kv_mib = {f: {'input': kv(prompt_tokens, bits),\n"
                  "              'request': kv(prompt_tokens + output_tokens - 1, bits)}\n"
                  "          for f, bits in (('q8_0', 8), ('q4_0', 4))}",
        "changed_tasks": "by = grid.groupby(['config', 'task'])['correct'].sum().unstack()\n"
                         "changed_tasks = [t for t in tasks if by.loc['BF16 KV', t] != by.loc['FP8 KV + BF16 Q', t]]",
        "with_retries_s": "with_retries_s = retries['seconds'].sum()",
        "last_only_s": "last_only_s = retries.loc[retries['correct'], 'seconds'].sum()",
        "retry_overhead_s": "retry_overhead_s = with_retries_s - last_only_s",
    },
    "8-7": {
        "expected_tokens": "expected_tokens = {m: 1 + sum(accept ** j for j in range(1, m + 1)) for m in lengths}",
        "ms_per_token": "ms_per_token = {m: (verify_ms + draft_ms * m) / expected_tokens[m] for m in lengths}",
        "grouped_ms_per_token": "import math\n"
                                "tokens = lambda m: 1 + sum(accept ** j for j in range(1, m + 1))\n"
                                "grouped_ms_per_token = {m: (verify_ms + draft_ms * group * math.ceil(m / group))\n"
                                "                           / tokens(m) for m in compare}",
        "better_length": "better_length = min(compare, key=lambda m: grouped_ms_per_token[m])",
    },
    "8-8": {
        "halved_s": "total = sum(stages_s.values())\n"
                    "halved_s = {s: total - t + t / halving for s, t in stages_s.items()}",
        "net_speedup": "decode = stages_s['decode']\n"
                       "net_speedup = total / (total - decode + decode / decode_speedup + setup_s)",
        "breakeven_setup_s": "breakeven_setup_s = decode - decode / decode_speedup",
    },
    "8-9": {
        "e_kv_mib": "import math\nfrom inferlab.units import GiB, MiB, ms\n"
                    "shared_blocks = shared_prefix_tokens // block_tokens\n"
                    "rest = prompt_tokens + output_tokens - 1 - shared_blocks * block_tokens\n"
                    "private = math.ceil(rest / block_tokens)\n"
                    "e_kv_mib = (shared_blocks + n_requests * private) * block_tokens * kv_bytes_per_token / MiB",
        "e_total_s": "rounds = math.ceil((output_tokens - 1) / tokens_per_round)\n"
                     "e_total_s = prefill_s + rounds * (step_ms + lookup_ms) / 1000",
        "e_gpu_s_per_good": "e_gpu_s_per_good = e_total_s / n_requests",
        "best_12gib": "from inferlab import serving\n"
                      "chapter = serving.CHAPTER_CONFIGS\n"
                      "E = serving.ServingConfig('E', 'context lookup', shared_prefix=True,\n"
                      "                          tokens_per_round=tokens_per_round, round_overhead_s=lookup_ms * ms,\n"
                      "                          prefill_s=chapter['B'].prefill_s, decode_step_s=step_ms * ms)\n"
                      "def best(budget_gib, outputs):\n"
                      "    table = serving.evaluate_configs([chapter['B'], chapter['D'], E],\n"
                      "                                     kv_budget_bytes=budget_gib * GiB,\n"
                      "                                     output_tokens=outputs, deadline_s=deadline_s)\n"
                      "    return serving.feasible(table)[0]\n"
                      "best_12gib = best(12, output_tokens)",
        "best_6gib": "best_6gib = best(6, output_tokens)",
        "best_16_outputs": "best_16_outputs = best(12, 16)",
    },
}


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


def submission(ex_id: str, student: str = "", wrong: bool = False, extra: str = "", typed: bool = False,
               answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The shipped notebook with every answer filled in, a name, and optional extra code at the end.

    Right answers are computed from the inputs (``SOLUTIONS``); ``wrong`` types wrong numbers; ``typed`` types
    the public answers as numbers (a typist: right for ``check``, wrong on any variant); ``answers`` replaces
    some parts' cells with the code given.
    """
    nb = nbformat.read(notebook_path(ex_id), as_version=4)
    ex = EXERCISES[ex_id]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.startswith("STUDENT ="):
            cell.source = re.sub(r'STUDENT = ""', f"STUDENT = {student!r}", cell.source, count=1)
        for part in ex.parts:
            if cell.source.startswith(f"{part.name} = "):
                if answers and part.name in answers:
                    cell.source = answers[part.name]
                elif part.manual:
                    cell.source = f"{part.name} = {'My explanation.'!r}"
                elif part.name in FUNCTIONS and not typed:
                    cell.source = f"{part.name} = {FUNCTIONS[part.name][wrong]}"
                elif wrong or typed:  # the public answers as shipped for check (no reference runs here)
                    cell.source = f"{part.name} = {_literal(public.load(ex_id)[part.name], wrong)}"
                else:
                    cell.source = SOLUTIONS[ex_id][part.name]
    if extra:
        nb.cells.append(nbformat.v4.new_code_cell(extra))
    return nb


def typist(ex_id: str, student: str = "") -> nbformat.NotebookNode:
    """The public answers typed as numbers (a function part: a table of its public outputs)."""
    nb = submission(ex_id, student, typed=True)
    for cell in nb.cells:
        for name in FUNCTIONS:
            if cell.cell_type == "code" and cell.source.startswith(f"{name} = "):
                outputs = public.load(ex_id)[name]
                probes = [a[0] for a in EXERCISES[ex_id].part(name).probes]
                cell.source = f"{name} = {dict(zip(probes, outputs))!r}.get"
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
from inferlab.exercises import EXERCISES, public
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
        if cell.cell_type == "code" and cell.source.startswith("total = sum("):
            cell.source += "\nhalved_s = {k.encode(): v for k, v in halved_s.items()}"
    return nb


def forbidden_call() -> nbformat.NotebookNode:
    """Right answers, one of them (net_speedup) computed by the library function its rules forbid."""
    return submission("8-8", "", answers={"net_speedup": (
        "from inferlab import serving as sv\ndecode = stages_s['decode']\n"
        "net_speedup = sum(stages_s.values()) / sv.task_time(stages_s, {'decode': decode_speedup}, added_s=setup_s)")})


def no_parameters() -> nbformat.NotebookNode:
    """Right answers, but the parameters cell is gone: the inputs are set where the grader cannot replace them."""
    nb = submission("8-8", "")
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            inputs = dict(EXERCISES["8-8"].inputs)
            cell.metadata["tags"] = []
            cell.source = f"globals().update({inputs!r})"
    return nb
