"""Units: binary (KiB, MiB, GiB) and decimal (KB, MB, GB) byte prefixes kept apart, times, formatters.

Everything inside inferlab is SI: bytes, seconds, FLOP, bytes/s. Convert only at the edges.
"""

from __future__ import annotations

from ._validate import finite, non_negative_int, one_of

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4

TFLOP = 1e12  # also TFLOP/s when divided by one second

s = 1.0
ms = 1e-3
us = 1e-6
ns = 1e-9

_BINARY = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB}
_DECIMAL = {"B": 1, "KB": KB, "MB": MB, "GB": GB, "TB": TB}
_TIME = {"s": s, "ms": ms, "us": us, "ns": ns}


def to(value: float, unit: str) -> float:
    """Express a quantity in bytes or seconds in ``unit`` (e.g. ``to(x, 'MiB')``, ``to(t, 'ms')``)."""
    scale = {**_BINARY, **_DECIMAL, **_TIME}
    one_of("unit", unit, scale)
    return finite("value", value) / scale[unit]


def _digits(digits: int) -> int:
    """Decimals to print: an integer in [0, 20] (a float holds 17 significant digits)."""
    if non_negative_int("digits", digits) > 20:
        raise ValueError(f"digits must be at most 20, got {digits!r}")
    return digits


def _auto(value: float, table: dict[str, float]) -> str:
    units = sorted(table.items(), key=lambda kv: kv[1])
    name, scale = units[0]
    for name_i, scale_i in units:
        if abs(value) >= scale_i:
            name, scale = name_i, scale_i
    return f"{value / scale:,.3g} {name}" if scale != 1 else f"{value:,.0f} B"


def fmt_binary(n_bytes: float, unit: str | None = None, digits: int = 2) -> str:
    """Format bytes with a binary prefix (KiB, MiB, GiB); automatic unit if ``unit`` is None."""
    n_bytes, digits = finite("n_bytes", n_bytes), _digits(digits)
    if unit is None:
        return _auto(n_bytes, _BINARY)
    one_of("unit", unit, _BINARY)
    return f"{n_bytes / _BINARY[unit]:,.{digits}f} {unit}"


def fmt_decimal(n_bytes: float, unit: str | None = None, digits: int = 2) -> str:
    """Format bytes with a decimal prefix (KB, MB, GB); automatic unit if ``unit`` is None."""
    n_bytes, digits = finite("n_bytes", n_bytes), _digits(digits)
    if unit is None:
        return _auto(n_bytes, _DECIMAL)
    one_of("unit", unit, _DECIMAL)
    return f"{n_bytes / _DECIMAL[unit]:,.{digits}f} {unit}"


def fmt_bytes(n_bytes: float) -> str:
    """Format bytes both ways, e.g. ``'1,152 MiB (1.21 GB)'``, so the two prefixes never get mixed up."""
    n_bytes = finite("n_bytes", n_bytes)
    return f"{_auto(n_bytes, _BINARY)} ({_auto(n_bytes, _DECIMAL)})"


def fmt_time(seconds: float, unit: str | None = None, digits: int = 2) -> str:
    """Format a duration in s, ms or us (automatic if ``unit`` is None)."""
    seconds, digits = finite("seconds", seconds), _digits(digits)
    if unit is None:
        unit = "s" if abs(seconds) >= 1 else "ms" if abs(seconds) >= 1e-3 else "us"
    one_of("unit", unit, _TIME)
    return f"{seconds / _TIME[unit]:,.{digits}f} {unit}"
