"""Argument checks shared by every public function: each raises ValueError naming the parameter."""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping
from numbers import Integral, Real

import numpy as np


#: Largest count a list, an array or a loop is sized by (requests, turns, windows, tokens of one request):
#: token positions and lengths are int32 in vLLM's attention metadata, and 2**31 Python objects outgrow memory.
MAX_COUNT = 2**31 - 1

# Plain int and float are checked first: ``isinstance`` against the numbers ABCs costs a few microseconds,
# which simulators calling these per event felt (a third of 8.3.4's eviction replay).

def _real(value: object) -> bool:
    return type(value) in (float, int) or (not isinstance(value, bool) and isinstance(value, Real))


def _integral(value: object) -> bool:
    return type(value) is int or (not isinstance(value, bool) and isinstance(value, Integral))


def _finite(value: float) -> bool:
    """``math.isfinite``, False (not OverflowError) for an int beyond the float range."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def finite(name: str, value: float) -> float:
    """Return ``value`` if it is a finite real number (of either sign)."""
    if not _real(value) or not _finite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r:.80}")
    return float(value)


def finite_result(value: float, *names: str) -> float:
    """Return a computed ``value`` if it is finite; else ValueError: ``names`` are too large (it overflows a float)."""
    if not _finite(value):
        raise ValueError(f"{' and '.join(names)} must be small enough for a finite result (it overflows a float)")
    return value


def positive(name: str, value: float) -> float:
    """Return ``value`` if it is a finite real number > 0."""
    if not _real(value) or not _finite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r:.80}")
    return float(value)


def non_negative(name: str, value: float) -> float:
    """Return ``value`` if it is a finite real number >= 0."""
    if not _real(value) or not _finite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r:.80}")
    return float(value)


def positive_int(name: str, value: int, at_most: int | None = None) -> int:
    """Return ``value`` if it is an integer >= 1 (and <= ``at_most``, e.g. ``MAX_COUNT``)."""
    if not _integral(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r:.80}")
    if at_most is not None and value > at_most:
        raise ValueError(f"{name} must be an integer in [1, {at_most}], got {value!r:.80}")
    return int(value)


def non_negative_int(name: str, value: int, at_most: int | None = None) -> int:
    """Return ``value`` if it is an integer >= 0 (and <= ``at_most``, e.g. ``MAX_COUNT``)."""
    if not _integral(value) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r:.80}")
    if at_most is not None and value > at_most:
        raise ValueError(f"{name} must be an integer in [0, {at_most}], got {value!r:.80}")
    return int(value)


def fraction(name: str, value: float) -> float:
    """Return ``value`` if it lies in [0, 1]."""
    non_negative(name, value)
    if value > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r:.80}")
    return float(value)


def _contains(container: Container, value: object) -> bool:
    """``value in container``, False (not a TypeError) for an unhashable value looked up in a mapping or set."""
    try:
        return value in container
    except TypeError:
        return False


def one_of(name: str, value: str, allowed: "dict | list | tuple") -> str:
    """Return ``value`` if it is one of ``allowed`` (a mapping's keys or a sequence)."""
    if not _contains(allowed, value):
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r:.80}")
    return value


def member(name: str, value: object, container: Container, what: str) -> object:
    """Return ``value`` if it is in ``container`` (a key of a mapping...); else a ValueError saying ``name`` must
    name ``what``. Unlike ``one_of`` it does not list the container (a block manager's sequences, steps in flight)."""
    if not _contains(container, value):
        raise ValueError(f"{name} must name {what}, got {value!r:.80}")
    return value


def flag(name: str, value: bool) -> bool:
    """Return ``value`` if it is True or False (a numpy bool too): not 0, 1 or a string such as 'False'."""
    if type(value) is not bool and not isinstance(value, np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r:.80}")
    return bool(value)


def instance(name: str, value: object, kind: type | tuple[type, ...], what: str = "") -> object:
    """Return ``value`` if it is a ``kind`` (``what`` describes it in the message; default: the type's name)."""
    if not isinstance(value, kind):
        expected = what or (f"a {kind.__name__}" if isinstance(kind, type) else "one of " + ", ".join(
            k.__name__ for k in kind))
        raise ValueError(f"{name} must be {expected}, got {type(value).__name__}: {value!r:.80}")
    return value


def items(name: str, value: Iterable) -> list:
    """``value``'s items as a new list if it is a sequence or another iterable (not a str, bytes or mapping)."""
    if not isinstance(value, (str, bytes, bytearray, Mapping)) and isinstance(value, Iterable):
        try:
            return list(value)
        except TypeError:  # a 0-d array
            pass
    raise ValueError(f"{name} must be a sequence (a list, tuple or array), got {type(value).__name__}: {value!r:.80}")


def distinct_ids(name: str, values: Iterable) -> list:
    """``values`` as a list if they are at least one id, hashable and all different (sequence ids of a batch)."""
    ids = items(name, values)
    try:
        distinct = len(set(ids)) == len(ids)
    except TypeError:  # an unhashable id
        distinct = False
    if not ids or not distinct:
        raise ValueError(f"{name} must be distinct, hashable sequence ids (at least one), got {ids!r:.80}")
    return ids


def real_array(name: str, values: Iterable[float]) -> np.ndarray:
    """``values`` as a new 1-D float64 array if they are real numbers (ints or floats: not bools, complex or str)."""
    listed = None if isinstance(values, np.ndarray) else items(name, values)
    try:
        raw = np.asarray(values if listed is None else listed)
    except ValueError:  # a ragged nesting
        raw = None
    ok = raw is not None and raw.ndim == 1 and (raw.size == 0 or raw.dtype.kind in "iuf")
    if ok and listed:
        ok = not any(issubclass(k, (bool, np.bool_)) for k in set(map(type, listed)))
    if not ok:
        raise ValueError(f"{name} must be a 1-D sequence of real numbers, got {values!r:.80}")
    return raw.astype(np.float64)


def mapping(name: str, value: Mapping) -> Mapping:
    """Return ``value`` if it is a mapping (a dict)."""
    return instance(name, value, Mapping, "a mapping (a dict)")


def function(name: str, value: Callable) -> Callable:
    """Return ``value`` if it can be called."""
    if not callable(value):
        raise ValueError(f"{name} must be callable, got {type(value).__name__}: {value!r:.80}")
    return value


def generator(name: str, value: "np.random.Generator | int") -> np.random.Generator:
    """``value`` itself if it is a numpy Generator, else a fresh Generator seeded with it (an int >= 0)."""
    if isinstance(value, np.random.Generator):
        return value
    if not _integral(value) or value < 0:
        raise ValueError(f"{name} must be a numpy.random.Generator or an int seed >= 0, got {value!r:.80}")
    return np.random.default_rng(int(value))


# ---- token ids (the paged allocator, the radix prefix cache, the traces) ----------------------------
TOKEN_ID_LIMIT = 2**63  # ids are stored as int64 by kernels and block tables


def token_ids(tokens: Iterable[int], name: str = "tokens", limit: int = TOKEN_ID_LIMIT,
              allow_empty: bool = True) -> list[int]:
    """``tokens`` as a new list of Python ints in [0, ``limit``); ValueError naming ``name`` otherwise."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 1-D array of integer token ids, got dtype {tokens.dtype} "
                             f"and shape {tokens.shape}")
        out = tokens.tolist()
    elif isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise ValueError(f"{name} must be a sequence of integer token ids, got {type(tokens).__name__}")
    else:
        out = list(tokens)
        kinds = set(map(type, out))
        if kinds != {int} and out:
            bad = [k for k in kinds if issubclass(k, bool) or not issubclass(k, (int, np.integer))]
            if bad:
                example = next(t for t in out if type(t) in bad)
                raise ValueError(f"{name} must hold integer token ids (not bool, float or str), got {example!r}")
            out = [int(t) for t in out]
    if not out:
        if not allow_empty:
            raise ValueError(f"{name} must hold at least one token id")
        return out
    lo, hi = min(out), max(out)
    if lo < 0 or hi >= limit:
        raise ValueError(f"{name} must lie in [0, {limit}), got {lo if lo < 0 else hi}")
    return out
