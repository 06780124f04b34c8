"""The answers' way from the kernel to the grader: ENCODER runs in the student's kernel, ``decode`` in the grader.

The worker asks the kernel for each answer with a user expression (``expression``) that runs ENCODER in
a fresh namespace: it writes the variable's value as a Python literal with the built-in types' own
``__repr__`` (not ``json``, which a cell can patch), tagged for what a literal cannot hold (a DataFrame,
a dict with any keys, ``...``, a missing name, a function's outputs on the probes), together with a
nonce the worker made for this request. IPython returns the expression's value as text.

``decode`` (in the grader) takes that text as untrusted: two ``ast.literal_eval`` (never ``eval``),
the nonce must match, only the tags ENCODER writes are accepted, and anything else raises Unreadable,
which the grader turns into an error for that one part. Dict keys that Python cannot hash (a list,
the text of a bytes key) become a tuple or their text, so an answer like ``{b"prefill": 90.0}`` is
judged (as ``check`` judges it) instead of crashing the batch.

``check`` in a notebook sends every answer through the same two steps (``roundtrip``: ENCODER in the
kernel's own process, then ``decode``), so the notebook and the grader compare the same value with
the same rule (``core.judge``). ``literal`` and ``from_literal`` write and read the public expected
values that ``check`` compares with (``data/exercises/expected.json``) in the same form.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["ENCODER", "expression", "decode", "Unreadable", "roundtrip", "literal", "from_literal"]

_TAGS = ("__ellipsis__", "__missing__", "__float__", "__frame__", "__dict__", "__calls__", "__error__", "__repr__")


# ---- kernel side: encode --------------------------------------------------------------------------------
#: Kernel side: ``encode(user_namespace, name, probes, nonce)`` -> the value of ``name`` as a Python literal.
#: Executed in a fresh namespace (not the user's); built-in types' methods cannot be patched by a cell.
ENCODER = r'''
def encode(user, name, probes, nonce):
    import math, numbers
    r_str, r_int, r_float = str.__repr__, int.__repr__, float.__repr__
    def enc(v, depth=0):
        if depth > 40:
            return "{'__repr__': 'too deep'}"
        if v is Ellipsis:
            return "{'__ellipsis__': True}"
        if v is None:
            return "None"
        if type(v).__name__ in ("bool", "bool_"):
            return "True" if bool(v) else "False"
        if isinstance(v, str):
            return r_str(str(v))
        if isinstance(v, numbers.Integral):
            return r_int(int(v))
        if isinstance(v, numbers.Real):
            f = float(v)
            return r_float(f) if math.isfinite(f) else "{'__float__': %s}" % r_str(r_float(f))
        kind = type(v).__name__
        if kind == "DataFrame":
            return "{'__frame__': {'index': %s, 'columns': %s, 'data': %s}}" % (
                enc(list(v.index), depth + 1), enc([str(c) for c in v.columns], depth + 1),
                enc(v.to_numpy().tolist(), depth + 1))
        if kind == "Series":
            return enc(v.to_dict(), depth + 1)
        if kind == "ndarray":
            return enc(v.tolist(), depth + 1)
        if isinstance(v, dict):
            return "{'__dict__': [%s]}" % ", ".join(
                "(%s, %s)" % (enc(k, depth + 1), enc(x, depth + 1)) for k, x in list(v.items()))
        if isinstance(v, (list, tuple)):
            return "[%s]" % ", ".join(enc(x, depth + 1) for x in list(v))
        if isinstance(v, (set, frozenset)):
            return "[%s]" % ", ".join(sorted(enc(x, depth + 1) for x in list(v)))
        return "{'__repr__': %s}" % r_str(repr(v)[:200])
    if name not in user:
        body = "{'__missing__': True}"
    elif probes and callable(user[name]):
        calls = []
        for args in probes:
            try:
                calls.append(enc(user[name](*args)))
            except Exception as err:
                calls.append("{'__error__': %s}" % r_str(f"{type(err).__name__}: {err}"[:200]))
        body = "{'__calls__': [%s]}" % ", ".join(calls)
    else:
        body = enc(user[name])
    return "{'nonce': %s, 'value': %s}" % (r_str(nonce), body)
'''


def expression(name: str, probes: list[list[Any]], nonce: str) -> str:
    """A user expression that runs ENCODER in a fresh namespace on the user's globals (nothing is defined there)."""
    return (f"(lambda ns, user: exec({ENCODER!r}, ns) or ns['encode'](user, {name!r}, {probes!r}, {nonce!r}))"
            "({}, globals())")


_LOCAL: dict[str, Any] = {}


def roundtrip(value: Any, probes: Any = ()) -> Any:
    """What the grader would read for ``value``: ENCODER (here, in this process) then ``decode``."""
    if "encode" not in _LOCAL:
        exec(ENCODER, _LOCAL)  # noqa: S102 - our own constant code
    nonce = "local"
    text = _LOCAL["encode"]({"value": value}, "value", [list(a) for a in probes], nonce)
    return decode(repr(text), nonce)


_WRAP = "{'nonce': '', 'value': %s}"


def literal(value: Any) -> str:
    """``value`` as ENCODER writes it (the value alone): how expected.json stores a public expected value."""
    if "encode" not in _LOCAL:
        exec(ENCODER, _LOCAL)  # noqa: S102 - our own constant code
    text = _LOCAL["encode"]({"value": value}, "value", [], "")
    head, tail = _WRAP.split("%s")
    return text[len(head):-len(tail)]


def from_literal(text: str) -> Any:
    """The value ``literal`` wrote (Unreadable if it is not such a text)."""
    return decode(repr(_WRAP % text), "")


# ---- grader side: decode ------------------------------------------------------------------------------
class Unreadable(Exception):
    """An answer that came back in a form the grader does not accept (the message says how)."""


def decode(text: Any, nonce: str) -> Any:
    """One answer from the kernel's text of ``{'nonce': ..., 'value': ...}`` (ENCODER); Unreadable otherwise."""
    if isinstance(text, dict):
        raise Unreadable(str(text.get("error", "no answer")))
    try:
        payload = ast.literal_eval(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
        raise Unreadable(f"not a literal: {type(err).__name__}") from None
    if not (isinstance(payload, dict) and set(payload) == {"nonce", "value"} and payload["nonce"] == nonce):
        raise Unreadable("not the answer that was asked for")
    try:
        return _decode(payload["value"])
    except (ValueError, TypeError, KeyError, RecursionError) as err:
        raise Unreadable(f"malformed: {type(err).__name__}: {err}"[:200]) from None


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if not (isinstance(v, dict) and len(v) == 1 and next(iter(v)) in _TAGS):
        raise ValueError(f"unexpected {type(v).__name__}")
    ((tag, x),) = v.items()
    if tag in ("__ellipsis__", "__missing__"):
        return Ellipsis
    if tag == "__float__":
        return float(str(x))
    if tag == "__frame__":
        import pandas as pd

        if not (isinstance(x, dict) and set(x) == {"index", "columns", "data"}):
            raise ValueError("a frame needs index, columns and data")
        return pd.DataFrame(_decode(x["data"]), index=_decode(x["index"]), columns=_decode(x["columns"]))
    if tag == "__dict__":
        if not (isinstance(x, list) and all(isinstance(kv, tuple) and len(kv) == 2 for kv in x)):
            raise ValueError("a dict needs (key, value) pairs")
        return {_key(_decode(k)): _decode(val) for k, val in x}
    if tag == "__calls__":
        return [_decode(c) for c in _list(x)]
    if tag == "__error__":
        return {"error": str(x)}
    return {"repr": str(x)}


def _list(x: Any) -> list[Any]:
    if not isinstance(x, list):
        raise ValueError("expected a list")
    return x


def _key(k: Any) -> Any:
    """A dict key as Python can hold it: lists become tuples, anything else unhashable its text."""
    try:
        hash(k)
        return k
    except TypeError:
        if isinstance(k, list):
            return tuple(_key(x) for x in k)
        return k["repr"] if isinstance(k, dict) and isinstance(k.get("repr"), str) else repr(k)
