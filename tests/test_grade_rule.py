"""check and the grader share one rule: the same few hundred random answers get the same verdicts from both.

``check`` runs in the student's kernel (``inferlab.exercises.check``); the grader reads the kernel's
variables through a user expression (``answers.expression``, as its worker does), decodes the text in
its own process (``answers.decode``) and judges it there (``judge``). The answers below are drawn from
the public expected values: exact, rounded as people round, slightly and grossly off, of other types
(numpy scalars, strings, tuples, sets, Series, arrays), reordered or relabelled tables, dicts with
missing or extra keys, and functions right, wrong or raising. One kernel evaluates them all.
"""

from __future__ import annotations

import random

import pytest
from jupyter_client.manager import KernelManager

from inferlab.exercises import EXERCISES, answers, judge, public
from inferlab.exercises.worker import _text

ANSWERS = 300


def _num(rng: random.Random, x: float, integral: bool) -> str:
    choice = rng.randrange(9)
    if choice == 0:
        return repr(x)
    if choice == 1:
        return repr(round(x, rng.randrange(0, 4)))
    if choice == 2:
        return f"float('{x:.{rng.randrange(1, 5)}g}')"
    if choice == 3:
        return repr(x * rng.choice([1.0005, 0.999, 1.004, 0.97, 1.2, 3.0]))
    if choice == 4:
        return f"np.float64({x!r})" if not integral else f"np.int64({int(x)})"
    if choice == 5:
        return repr(int(round(x))) if not integral else repr(float(x))
    if choice == 6:
        return repr(str(round(x, 2)))
    if choice == 7:
        return rng.choice(["None", "...", "True", "[1, 2]", "'...'", "float('nan')"])
    return repr(x + rng.choice([-1, 1, 0.01, -0.004]))


def _answer(rng: random.Random, value, depth: int = 0) -> str:
    """A Python expression for an answer drawn around ``value`` (a public expected value)."""
    import pandas as pd

    if isinstance(value, bool):
        return rng.choice(["True", "False", "np.bool_(True)", "1", "'True'"])
    if isinstance(value, (int, float)):
        return _num(rng, float(value) if isinstance(value, float) else value, isinstance(value, int))
    if isinstance(value, str):
        return rng.choice([repr(value), repr(value.lower()), repr(f" {value} "), "'Z'", "None"])
    if isinstance(value, pd.DataFrame):
        cols = list(value.columns)
        data = {c: {i: value.loc[i, c] for i in value.index} for c in cols}
        choice = rng.randrange(6)
        if choice == 0:
            return f"pd.DataFrame({data!r})"
        if choice == 1:  # reordered rows and columns, rounded
            body = {c: {i: round(float(v), rng.choice([2, 3])) for i, v in reversed(list(d.items()))}
                    for c, d in reversed(list(data.items()))}
            return f"pd.DataFrame({body!r})"
        if choice == 2:  # meaningless labels
            return f"pd.DataFrame({ {c: list(d.values()) for c, d in data.items()}!r})"
        if choice == 3:  # integer column labels, float index
            return f"pd.DataFrame({ {int(c): {float(i): v for i, v in d.items()} for c, d in data.items()}!r})"
        if choice == 4:  # one value off
            bad = {c: dict(d) for c, d in data.items()}
            bad[cols[0]][next(iter(bad[cols[0]]))] *= 1.3
            return f"pd.DataFrame({bad!r})"
        return f"pd.DataFrame({data!r}).T"
    if isinstance(value, dict):
        items = [(k, _answer(rng, v, depth + 1)) for k, v in value.items()]
        choice = rng.randrange(6)
        if choice == 1:
            items = items[::-1]
        if choice == 2:
            items = [(str(k), v) for k, v in items]
        if choice == 3 and len(items) > 1:
            items = items[1:]
        if choice == 4:
            items = items + [("extra", "1.0")]
        body = "{" + ", ".join(f"{k!r}: {v}" for k, v in items) + "}"
        if choice == 5 and depth == 0 and all(isinstance(v, (int, float)) for v in value.values()):
            return f"pd.Series({body})"
        return body
    if isinstance(value, list):
        parts = [_answer(rng, v, depth + 1) if rng.random() < 0.3 else repr(v) for v in value]
        choice = rng.randrange(5)
        if choice == 1:
            return "(" + ", ".join(parts) + ",)"
        if choice == 2:
            return "[" + ", ".join(parts[::-1]) + "]"
        if choice == 3:
            return "{" + ", ".join(repr(v) for v in value) + "}" if value else "set()"
        if choice == 4:
            return f"np.array({value!r})"
        return "[" + ", ".join(parts) + "]"
    return "None"


def _function(rng: random.Random) -> str:
    return rng.choice(["lambda b: b - 1", "lambda b: (b - 1) * 1.0", "lambda b: b", "lambda b: 1 / 0",
                       "lambda b: [b]", "lambda: 0", "3", "{1: 0, 2: 1, 16: 15, 100: 99}.get"])


def _draws() -> list[tuple[str, str, str]]:
    rng = random.Random(28)
    parts = [(ex.id, p.name) for ex in EXERCISES.values() for p in ex.parts if not p.manual]
    out = []
    for i in range(ANSWERS):
        ex_id, name = parts[i % len(parts)] if i < len(parts) else rng.choice(parts)
        part = EXERCISES[ex_id].part(name)
        code = _function(rng) if part.probes else _answer(rng, public.load(ex_id)[name])
        out.append((ex_id, name, code))
    return out


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    # over Unix sockets, as inferlab.headless runs the grader's kernels: no TCP port to lose to a race
    km = KernelManager(kernel_name="python3", transport="ipc",
                       connection_file=str(tmp_path_factory.mktemp("kernel") / "k.json"))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    kc.execute_interactive("import numpy as np, pandas as pd\nfrom inferlab.exercises import check", timeout=60)
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _ask(kc, code: str, expressions: dict[str, str]) -> dict:
    reply = kc.execute_interactive(code, user_expressions=expressions, timeout=30, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply["content"]["user_expressions"]


def test_check_and_the_grader_give_the_same_verdicts(kernel) -> None:
    from inferlab.exercises import check

    draws = _draws()
    namespace = {}
    exec("import numpy as np, pandas as pd", namespace)
    seen = {"correct": 0, "close": 0, "wrong": 0, "not attempted": 0}
    for n, (ex_id, name, code) in enumerate(draws):
        part = EXERCISES[ex_id].part(name)
        nonce = f"n{n}"
        found = _ask(kernel, f"{name} = {code}\n_v = check({ex_id!r}, {name!r}, {name})", {
            "answer": answers.expression(name, [list(a) for a in part.probes], nonce),
            "status": "_v.status", "message": "_v.message"})
        # the grader's side: the kernel's text, decoded and judged here
        try:
            graded = judge(part, answers.decode(_text(found["answer"]), nonce), public.load(ex_id)[name])
            grader_says = (graded.status, graded.message)
        except answers.Unreadable:
            grader_says = ("wrong", "unreadable")
        in_kernel = (eval(found["status"]["data"]["text/plain"]), eval(found["message"]["data"]["text/plain"]))
        # and check called here, in this process, on the same value
        local = check(ex_id, name, eval(code, dict(namespace)))
        assert grader_says[0] == in_kernel[0] == local.status, (ex_id, name, code, grader_says, in_kernel, local)
        if grader_says[1] != "unreadable":
            assert grader_says[1] == in_kernel[1] == local.message, (ex_id, name, code)
        seen[local.status] += 1
    assert sum(seen.values()) == ANSWERS and min(seen.values()) >= 10, seen  # every verdict is exercised
