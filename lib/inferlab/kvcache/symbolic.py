"""Section 8.3's closed forms in sympy: paging's tail waste, what a shared prefix saves, what a prefix hit leaves.

Symbols follow notation.md: ``B`` the block size, ``L`` a context length, ``b`` the requests (or
branches) that share, ``M_pre`` / ``M_priv`` the shared and the private memory of one request (bytes
or blocks), ``C_KV`` the KV budget, ``L_in`` a prompt, ``L_pre`` the tokens it shares with a cached
prompt, ``Delta_snap`` the spacing of recurrent-state snapshots. Pages show the forms with
``sympy.latex`` and substitute their numbers with ``value``; the tests hold every form to the
allocator, the cache or the function that computes the same number.
"""

from __future__ import annotations

import sympy as sp

from .._validate import finite, instance

__all__ = [
    "B", "L", "q", "r", "b", "M_pre", "M_priv", "C_KV", "L_in", "L_pre", "Delta_snap",
    "TAIL_WASTE", "TAIL_WASTE_BY_REMAINDER", "MAX_TAIL_WASTE", "MEAN_TAIL_WASTE",
    "SEPARATE_KV", "SHARED_KV", "SAVED_SHARE", "SAVED_SHARE_LIMIT", "MAX_SHARERS",
    "HIT_TOKENS", "COMPUTED_TOKENS", "SNAPSHOT_RECOMPUTE", "SNAPSHOTS_KEPT", "value",
]

B = sp.Symbol("B", positive=True, integer=True)
L = sp.Symbol("L", positive=True, integer=True)
q = sp.Symbol("q", nonnegative=True, integer=True)  # full blocks before the last one
r = sp.Symbol("r", positive=True, integer=True)  # tokens in the last block, 1 <= r <= B
b = sp.Symbol("b", positive=True, integer=True)
M_pre = sp.Symbol(r"M_{\mathrm{pre}}", positive=True)
M_priv = sp.Symbol(r"M_{\mathrm{priv}}", positive=True)
C_KV = sp.Symbol(r"C_{\mathrm{KV}}", positive=True)
L_in = sp.Symbol(r"L_{\mathrm{in}}", positive=True, integer=True)
L_pre = sp.Symbol(r"L_{\mathrm{pre}}", nonnegative=True, integer=True)
Delta_snap = sp.Symbol(r"\Delta_{\mathrm{snap}}", positive=True, integer=True)

# ---- 8.3.1: paging ---------------------------------------------------------------------------
#: unused token positions in the last of the ceil(L/B) blocks of an L-token sequence
TAIL_WASTE = B * sp.ceiling(L / B) - L
#: the same with L = qB + r, 1 <= r <= B (then ceil(L/B) = q + 1): B - r
TAIL_WASTE_BY_REMAINDER = sp.expand(B * (q + 1) - (q * B + r))
#: its largest value (r = 1)
MAX_TAIL_WASTE = TAIL_WASTE_BY_REMAINDER.subs(r, 1)
#: its mean when the last block's fill r is equally likely to be 1, ..., B (lengths spread evenly)
MEAN_TAIL_WASTE = sp.factor(sp.summation(TAIL_WASTE_BY_REMAINDER, (r, 1, B)) / B)

# ---- 8.3.2: sharing a prefix -----------------------------------------------------------------
#: memory of b requests that each store the prefix: one reference per block-table entry
SEPARATE_KV = b * (M_pre + M_priv)
#: M_KV(b): the prefix stored once, the private parts b times
SHARED_KV = M_pre + b * M_priv
#: share of the separate memory that sharing saves
SAVED_SHARE = sp.factor(sp.simplify(1 - SHARED_KV / SEPARATE_KV))
#: what it tends to with many sharers: the prefix's share of one request
SAVED_SHARE_LIMIT = sp.limit(SAVED_SHARE, b, sp.oo)
#: the largest (real) b with M_KV(b) <= C_KV; a page takes its floor
MAX_SHARERS = sp.solve(sp.Eq(SHARED_KV, C_KV), b)[0]

# ---- 8.3.3: reusing a finished request's prefix ------------------------------------------------
#: cached tokens a prompt of L_in finds when its first L_pre tokens match a cached prompt: whole blocks
#: only, and never the last prompt token (its logits give the first output token)
HIT_TOKENS = B * sp.floor(sp.Min(L_pre, L_in - 1) / B)
#: tokens the prompt still computes
COMPUTED_TOKENS = L_in - HIT_TOKENS
#: tokens recomputed after the nearest snapshot when a recurrent model resumes a match of L_pre tokens
SNAPSHOT_RECOMPUTE = L_pre - Delta_snap * sp.floor(L_pre / Delta_snap)
#: snapshots an L-token context keeps
SNAPSHOTS_KEPT = sp.floor(L / Delta_snap)


def value(form: sp.Expr, **numbers: float) -> sp.Expr:
    """``form`` with numbers substituted by symbol name (``value(TAIL_WASTE, L=9, B=4)``), evaluated exactly.

    Floats are taken as the exact rationals they print as (``nsimplify``), so ``value(SAVED_SHARE_LIMIT,
    M_pre=864.0, M_priv=324.0)`` is 8/11. Symbols left unnamed stay symbolic.
    """
    instance("form", form, sp.Expr, "a sympy expression (one of this module's forms)")
    names = {s.name: s for s in form.free_symbols}
    aliases = {"M_pre": M_pre.name, "M_priv": M_priv.name, "C_KV": C_KV.name, "L_in": L_in.name,
               "L_pre": L_pre.name, "Delta_snap": Delta_snap.name}
    subs = {}
    for key, number in numbers.items():
        name = aliases.get(key, key)
        if name not in names:
            raise ValueError(f"numbers must name symbols of the form {sorted(names)}, got {key!r}")
        finite(key, number)
        subs[names[name]] = sp.nsimplify(number)  # an int stays exact
    return sp.simplify(form.subs(subs))
