"""Serial against parallel drafting (section 8.5.3): how many tokens per round a faster drafter may give up.

A draft network whose forward takes T_fwd drafts m tokens in m forwards (serial) or in one (parallel, DFlash-like);
either way the target then verifies the round in T_verify. Per output token the two cost
(m T_fwd + T_verify) / N_ser and (T_fwd + T_verify) / N_par, with N_ser and N_par the tokens each round emits
on average. The parallel drafter is at least as fast exactly when

    N_par >= N_ser (T_fwd + T_verify) / (m T_fwd + T_verify),

so it may emit fewer tokens per round by the factor by which its round is shorter, and no fewer.
All times in seconds.
"""

from __future__ import annotations

from typing import Any

from .._validate import non_negative, positive, positive_int
from .cost import drafting_s

__all__ = ["drafted_per_token_s", "tokens_to_tie", "tie_derivation"]


def _tokens(name: str, value: float) -> float:
    if positive(name, value) < 1:
        raise ValueError(f"{name} must be at least 1 (a round emits one token or more), got {value!r}")
    return float(value)


def drafted_per_token_s(drafts: int, forward_s: float, verify_s: float, tokens_per_round: float,
                        parallel: bool = False) -> float:
    """Seconds per output token of a draft network: its drafting plus one verification, over the round's tokens.

    ``drafts`` tokens are drafted in one forward of ``forward_s`` each (serial) or one forward for all
    (``parallel``); ``tokens_per_round`` (>= 1) is the mean the round emits.
    """
    if not isinstance(parallel, bool):
        raise ValueError(f"parallel must be True or False, got {parallel!r}")
    draft = drafting_s(positive_int("drafts", drafts), forward_s, parallel)
    return (draft + positive("verify_s", verify_s)) / _tokens("tokens_per_round", tokens_per_round)


def tokens_to_tie(serial_tokens: float, drafts: int, forward_s: float, verify_s: float) -> float:
    """Tokens per round a parallel drafter needs to match, per output token, a serial one emitting ``serial_tokens``.

    N_par = N_ser (T_fwd + T_verify) / (m T_fwd + T_verify); below it the parallel drafter is slower.
    """
    n = _tokens("serial_tokens", serial_tokens)
    m = positive_int("drafts", drafts)
    fwd, verify = non_negative("forward_s", forward_s), positive("verify_s", verify_s)
    return n * (fwd + verify) / (m * fwd + verify)


def tie_derivation() -> tuple[Any, Any]:
    """The tie in sympy: (the equation of the two times per token, its solution for N_par).

    Symbols: m, T_fwd, T_verify, N_ser, N_par (all positive).
    """
    import sympy as sp

    m = sp.Symbol("m", positive=True, integer=True)
    fwd, verify = sp.Symbol(r"T_{\mathrm{fwd}}", positive=True), sp.Symbol(r"T_{\mathrm{verify}}", positive=True)
    n_ser, n_par = sp.Symbol(r"N_{\mathrm{ser}}", positive=True), sp.Symbol(r"N_{\mathrm{par}}", positive=True)
    from sympy.solvers.solvers import solve_linear

    tie = sp.Eq((fwd + verify) / n_par, (m * fwd + verify) / n_ser)
    # times the (positive) denominators the equation is linear in N_par; solve_linear skips sp.solve's
    # general machinery (a fifth of a second the first time a kernel calls it)
    numerator = sp.fraction(sp.together(tie.lhs - tie.rhs))[0]
    symbol, solution = solve_linear(numerator, symbols=[n_par])
    if symbol != n_par:
        raise AssertionError(f"the tie is not linear in N_par: {numerator}")
    return tie, sp.factor(solution)
