"""Argument checks shared by every public function: each raises ValueError naming the parameter."""

from __future__ import annotations

import math
from numbers import Integral, Real


# Plain int and float are checked first: ``isinstance`` against the numbers ABCs costs a few microseconds,
# which simulators calling these per event felt (a third of 8.3.4's eviction replay).

def _real(value: object) -> bool:
    return type(value) in (float, int) or (not isinstance(value, bool) and isinstance(value, Real))


def _integral(value: object) -> bool:
    return type(value) is int or (not isinstance(value, bool) and isinstance(value, Integral))


def positive(name: str, value: float) -> float:
    """Return ``value`` if it is a finite real number > 0."""
    if not _real(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def non_negative(name: str, value: float) -> float:
    """Return ``value`` if it is a finite real number >= 0."""
    if not _real(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def positive_int(name: str, value: int) -> int:
    """Return ``value`` if it is an integer >= 1."""
    if not _integral(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def non_negative_int(name: str, value: int) -> int:
    """Return ``value`` if it is an integer >= 0."""
    if not _integral(value) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def fraction(name: str, value: float) -> float:
    """Return ``value`` if it lies in [0, 1]."""
    non_negative(name, value)
    if value > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return float(value)


def one_of(name: str, value: str, allowed: "dict | list | tuple") -> str:
    """Return ``value`` if it is one of ``allowed`` (a mapping's keys or a sequence)."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")
    return value
