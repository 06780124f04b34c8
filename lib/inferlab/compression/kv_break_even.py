"""From which context does a compressed KV format make a decode step faster? (section 8.4.2)

Reading a context of L tokens in a format of ratio rho (compressed over BF16 bytes) reads
L k (1 - rho) fewer bytes; at an effective bandwidth beta_eff that saves L k (1 - rho) / beta_eff,
and converting costs a fixed T_conv per step. So

    Delta T(L) = L k (1 - rho) / beta_eff - T_conv,       Delta T > 0  iff  L > L_x = T_conv beta_eff / (k (1 - rho)).

These are two straight lines in L, like the fitted ITL lines of ``kv.itl_crossover``: the compressed format
starts T_conv behind and gains k (1 - rho) / beta_eff per token of context. The same reading turned round
gives what a fitted line implies: a BF16 slope tau_1 = k / beta_eff is a bandwidth k / tau_1, and a format
that only read fewer bytes would have the slope rho tau_1. And since no read runs faster than a card's peak
beta, reading a token's KV takes at least k / beta: the share k / (beta tau_1) of the slope is a floor under the
part of it that reading takes (if the reads are not hidden behind other work).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import sympy as sp

from .._validate import instance, items, non_negative, non_negative_int, positive
from ..models import ModelSpec
from ..symbolic import solve_linear
from .formats import block_format
from .kv import LinearITL, kv_bytes_in_format, read_saving

__all__ = ["crossover_context_symbolic", "crossover_context", "net_saving", "first_paying_context",
           "last_paying_conversion", "implied_bandwidth", "bytes_only_slope", "read_floor_share"]


def crossover_context_symbolic() -> tuple[sp.Eq, sp.Expr]:
    """(Delta T(L) = L k (1 - rho) / beta_eff - T_conv, and L_x where it is zero, solved by sympy)."""
    L, k, rho, beta, T_c, dT = sp.symbols(r"L k \rho \beta_{\mathrm{eff}} T_{\mathrm{conv}} \Delta{T}", positive=True)
    eq = sp.Eq(dT, L * k * (1 - rho) / beta - T_c)
    crossover = T_c * beta / (k * (1 - rho))
    if sp.cancel(solve_linear(eq.rhs, L) - crossover) != 0:  # pragma: no cover - guards the closed form
        raise ArithmeticError("sympy's L_x differs from T_conv beta_eff / (k (1 - rho))")
    return eq, crossover


def crossover_context(model: ModelSpec, fmt: str, bandwidth: float, conversion_s: float) -> float:
    """L_x = T_conv beta_eff / (k (1 - rho)): the context (tokens, not rounded) above which ``fmt`` saves time."""
    rho = block_format(fmt).ratio_to(2.0)
    if rho >= 1:
        raise ValueError(f"fmt must store fewer bytes than BF16, got {fmt!r}")
    per_token = model.kv_bytes_per_token(2) * (1 - rho) / positive("bandwidth", bandwidth)
    return non_negative("conversion_s", conversion_s) / per_token


def net_saving(model: ModelSpec, context_tokens: int, fmt: str, bandwidth: float, conversion_s: float) -> float:
    """Time a step saves reading ``context_tokens`` of KV in ``fmt`` instead of BF16, minus the conversion (s).

    Sizes in whole 16-token blocks, as ``kv.kv_bytes_in_format`` counts an input of ``context_tokens`` (the
    explorer of section 8.4.2 draws this).
    """
    non_negative_int("context_tokens", context_tokens)
    bf16 = kv_bytes_in_format(model, context_tokens, 1, "bf16")
    return read_saving(bf16 - kv_bytes_in_format(model, context_tokens, 1, fmt), bandwidth, conversion_s)


def first_paying_context(model: ModelSpec, fmt: str, bandwidth: float, conversion_s: float,
                         contexts: Iterable[int]) -> int | None:
    """The smallest of ``contexts`` at which ``fmt`` saves time (net saving >= 0), or None if none does."""
    paying = [c for c in items("contexts", contexts) if net_saving(model, c, fmt, bandwidth, conversion_s) >= 0]
    return min(paying) if paying else None


def last_paying_conversion(model: ModelSpec, context_tokens: int, fmt: str, bandwidth: float,
                           conversions_s: Iterable[float]) -> float | None:
    """The largest of ``conversions_s`` that still saves time at ``context_tokens`` (net >= 0), or None."""
    paying = [t for t in items("conversions_s", conversions_s)
              if net_saving(model, context_tokens, fmt, bandwidth, t) >= 0]
    return max(paying) if paying else None


def implied_bandwidth(kv_bytes_per_token: float, line: LinearITL) -> float:
    """Bandwidth (B/s) at which reading ``kv_bytes_per_token`` per context token gives ``line``'s slope."""
    return positive("kv_bytes_per_token", kv_bytes_per_token) / positive("line.per_token_s", line.per_token_s)


def bytes_only_slope(line: LinearITL, ratio: float) -> float:
    """The slope (s per context token) ``line`` would have if a format only read ``ratio`` of its bytes."""
    return positive("ratio", ratio) * line.per_token_s


def read_floor_share(kv_bytes_per_token: float, line: LinearITL, bandwidth: float) -> float:
    """The least share of ``line``'s slope that reading the KV takes: k / ``bandwidth`` / tau_1 (a fraction).

    Reading ``kv_bytes_per_token`` at no more than ``bandwidth`` B/s (a card's peak) takes at least
    k / bandwidth per token of context: a floor under the reading part of the slope tau_1, if the reads are
    not hidden behind other work. For Llama-3.1-8B (131,072 B per token) on an H100 (3.35 TB/s) under the
    chapter's BF16 fit that is 39.1 ns of 43.7 ns, 0.895; it equals ``implied_bandwidth(k, line) / bandwidth``.
    Above 1 the slope is shorter than the read alone could be.
    """
    instance("line", line, LinearITL)
    share = positive("kv_bytes_per_token", kv_bytes_per_token) / positive("bandwidth", bandwidth) \
        / positive("line.per_token_s", line.per_token_s)
    if not math.isfinite(share):
        raise ValueError("bandwidth and line.per_token_s must be large enough, and kv_bytes_per_token small enough, "
                         "for a finite share (it overflows a float)")
    return share
