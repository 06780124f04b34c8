"""Section 8.5 in sympy: speculative sampling is exact, and the break-even and marginal rules of a round.

Exactness: a draft x ~ q kept with probability min(1, p(x)/q(x)), else a token from
[p - q]+ / Z, emits x with probability min(p, q)(x) + (1 - sum min(p, q)) [p - q]+(x) / Z.
Since sum p = sum min(p, q) + sum [p - q]+, the factor 1 - sum min(p, q) equals Z and the two
terms add to p(x). ``prove_exact`` checks this for symbolic p, q over n symbols, one sign pattern
(which tokens have p > q) at a time, so that Min and Max become linear.
"""

from __future__ import annotations

import itertools

import sympy as sp

from .._validate import positive_int
from ..symbolic import solve_linear

__all__ = ["emission_probability", "prove_exact", "exact_emission", "a", "m", "j", "T_v", "t_d", "T_p",
           "EXPECTED_TOKENS", "ROUND_TIME_PER_TOKEN", "BREAK_EVEN_DRAFT", "T", "N", "dT", "dN",
           "LONGER_IS_FASTER", "MARGINAL_CONDITION"]


def emission_probability(p: list[sp.Expr], q: list[sp.Expr], i: int) -> sp.Expr:
    """P(emit token i) under speculative sampling, with Min/Max left symbolic."""
    mins = [sp.Min(pk, qk) for pk, qk in zip(p, q)]
    plus = [sp.Max(pk - qk, 0) for pk, qk in zip(p, q)]
    return mins[i] + (1 - sp.Add(*mins)) * plus[i] / sp.Add(*plus)


def _pattern_emission(p: list[sp.Expr], q: list[sp.Expr], above: tuple[bool, ...], i: int) -> sp.Expr:
    """The emission probability when exactly the tokens flagged in ``above`` have p > q (Min/Max resolved)."""
    mins = [qk if up else pk for pk, qk, up in zip(p, q, above)]
    plus = [pk - qk if up else sp.Integer(0) for pk, qk, up in zip(p, q, above)]
    return mins[i] + (1 - sp.Add(*mins)) * plus[i] / sp.Add(*plus)


def prove_exact(n_symbols: int = 3) -> dict[tuple[bool, ...], list[sp.Expr]]:
    """For every feasible sign pattern, the simplified P(emit i) - p_i for each token i (all zero when exact).

    p and q are arbitrary positive symbols with sum p = sum q = 1 (the last of each eliminated).
    A pattern with no p > q forces p = q (no rejection ever happens); one with every p > q is
    impossible; both are left out.
    """
    n = positive_int("n_symbols", n_symbols)
    if n < 2:
        raise ValueError(f"n_symbols must be >= 2, got {n}")
    p = list(sp.symbols(f"p_1:{n + 1}", positive=True))
    q = list(sp.symbols(f"q_1:{n + 1}", positive=True))
    normalize = {p[-1]: 1 - sp.Add(*p[:-1]), q[-1]: 1 - sp.Add(*q[:-1])}
    out = {}
    for above in itertools.product((False, True), repeat=n):
        if not any(above) or all(above):
            continue
        out[above] = [sp.simplify((_pattern_emission(p, q, above, i) - p[i]).subs(normalize)) for i in range(n)]
    return out


def exact_emission(p: list[sp.Rational], q: list[sp.Rational]) -> list[sp.Expr]:
    """Emission probabilities for concrete rational p and q (Min/Max evaluated exactly)."""
    if len(p) != len(q) or sum(p) != 1 or sum(q) != 1:
        raise ValueError("p and q must be rational distributions over the same symbols, each summing to 1")
    if list(p) == list(q):
        return list(p)
    return [sp.nsimplify(emission_probability(list(p), list(q), i)) for i in range(len(p))]


# ---- round arithmetic (8.5.2, 8.5.4) --------------------------------------------------------
a = sp.Symbol("a", positive=True)
#: Verification time, draft time and plain decode step, named as in notation.md.
T_v, t_d, T_p = (sp.Symbol(rf"T_{{\mathrm{{{name}}}}}", positive=True) for name in ("verify", "draft", "step"))
m, j = sp.symbols("m j", positive=True, integer=True)
#: Expected tokens per round with m drafts each accepted with probability a: 1 + sum_{j=1}^{m} a^j.
EXPECTED_TOKENS = 1 + sp.Sum(a**j, (j, 1, m))
#: Time per output token of a round: (verification + drafting) / E[N].
ROUND_TIME_PER_TOKEN = (T_v + t_d) / EXPECTED_TOKENS
#: Draft time at which a round ties with plain decode (T_p per token): solve (T_v + t_d)/E[N] = T_p.
BREAK_EVEN_DRAFT = sp.solve(sp.Eq(ROUND_TIME_PER_TOKEN, T_p), t_d, simplify=False)[0].doit()

T, N = sp.symbols("T N", positive=True)
dT, dN = sp.Symbol(r"\Delta T", positive=True), sp.Symbol(r"\Delta N", positive=True)
#: A draft one token longer lowers time per token: (T + dT)/(N + dN) < T/N.
LONGER_IS_FASTER = sp.StrictLessThan((T + dT) / (N + dN), T / N)
#: The same, solved for dT: the marginal rule dT < dN * T / N (i.e. dT/dN < T/N).
MARGINAL_CONDITION = sp.StrictLessThan(dT, solve_linear(sp.Eq((T + dT) / (N + dN), T / N), dT))
