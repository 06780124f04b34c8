"""What a group format costs per value, derived in sympy, and what a whole model weighs in it (section 8.4.1).

A group of n_g values keeps n_bit-bit codes and s_meta bytes of metadata (scales, minimums), so it
takes s_g = n_g n_bit / 8 + s_meta bytes and

    bpv = 8 s_g / n_g = n_bit + 8 s_meta / n_g,        phi_meta = s_meta / s_g = 8 s_meta / (n_g n_bit + 8 s_meta).

The metadata share phi_meta falls as n_bit grows (its derivative is negative), so the fewer bits the codes
keep, the larger the part of the file the metadata becomes. Symbols as in ``notation.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .._validate import non_negative_int, one_of, positive
from .formats import GGML_FORMATS, block_format

__all__ = ["GroupBits", "group_bits_symbolic", "group_bits_for", "uniform_bytes", "mean_bits_per_value"]


@dataclass(frozen=True)
class GroupBits:
    """The symbolic accounting of one group: its bytes, bits per value, metadata share and that share's slope."""

    n_g: sp.Symbol
    n_bit: sp.Symbol
    s_meta: sp.Symbol
    s_g: sp.Expr
    bpv: sp.Expr
    share: sp.Expr
    dshare_dbits: sp.Expr

    def substitute(self, n_g: int, n_bit: int, s_meta: int) -> dict[str, float]:
        """The group's bytes, bits per value and metadata share for these numbers (exact, as floats)."""
        values = {self.n_g: n_g, self.n_bit: n_bit, self.s_meta: s_meta}
        return {"s_g": float(self.s_g.subs(values)), "bpv": float(self.bpv.subs(values)),
                "share": float(self.share.subs(values))}


def group_bits_symbolic() -> GroupBits:
    """Derive s_g, bpv = 8 s_g / n_g, phi_meta = s_meta / s_g and d phi_meta / d n_bit with sympy."""
    n_g, n_bit, s_meta = sp.symbols(r"n_g n_{\mathrm{bit}} s_{\mathrm{meta}}", positive=True)
    s_g = n_g * n_bit / 8 + s_meta
    bpv = sp.expand(8 * s_g / n_g)
    share = sp.cancel(s_meta / s_g)
    slope = sp.factor(sp.diff(share, n_bit))
    return GroupBits(n_g, n_bit, s_meta, s_g, bpv, share, slope)


def group_bits_for(fmt: str) -> dict[str, float]:
    """``group_bits_symbolic`` with the numbers of format ``fmt`` (q8_0, q4_0, q2_K): s_g, bpv and share."""
    f = block_format(one_of("fmt", fmt, GGML_FORMATS))
    return group_bits_symbolic().substitute(f.block_values, f.code_bits, f.meta_bytes)


def uniform_bytes(n_values: int, fmt: str) -> tuple[int, int]:
    """(code bytes, metadata bytes) if all ``n_values`` values were stored in ``fmt``, in whole groups."""
    non_negative_int("n_values", n_values)
    f = block_format(fmt)
    total = f.stored_bytes(n_values)
    groups = total // f.block_bytes
    return groups * f.code_bytes, groups * f.meta_bytes


def mean_bits_per_value(n_bytes: float, n_values: int) -> float:
    """Average stored bits per value of ``n_values`` values that take ``n_bytes`` bytes in all."""
    if non_negative_int("n_values", n_values) == 0:
        raise ValueError("n_values must be > 0")
    return 8 * positive("n_bytes", n_bytes) / n_values
