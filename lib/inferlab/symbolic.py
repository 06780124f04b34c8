"""Symbolic forms of the chapter's formulas (sympy), so notebooks derive them and then substitute numbers.

Symbols print as in ``notation.md`` (one symbol, one meaning, book-wide); the Python names are kept
stable for the pages that use them.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from ._validate import instance, non_negative, positive_int


def solve_linear(eq: sp.Eq | sp.Expr, x: sp.Symbol) -> sp.Expr:
    """The one solution for ``x`` of ``eq`` (an equation, or an expression equal to zero), unsimplified.

    ``sp.solve``'s final simplify and its solution checks import ``sympy.physics.units`` (0.2-0.5 s per
    kernel); for an equation with a single root in ``x`` they add nothing (``sp.cancel`` the root where
    lowest terms read better).
    """
    instance("eq", eq, sp.Basic, "a sympy equation or expression")
    instance("x", x, sp.Symbol, "a sympy Symbol")
    roots = sp.solve(eq, x, simplify=False, check=False)
    if len(roots) != 1:
        raise ValueError(f"eq must have exactly one solution for {x}, got {roots}")
    return roots[0]

# ---- 8.1.2 memory -----------------------------------------------------------------------
L, H_kv, d_h, s_kv = sp.symbols(r"n_{\mathrm{layer}} H_{\mathrm{kv}} d_h s_{\mathrm{kv}}", positive=True, integer=True)
n_layer = L  # the number of layers (``L`` is the old Python name; $L$ in the book is the context length)
#: KV bytes per token k: K and V, for every layer, KV head and head dimension, s_kv bytes each.
KV_PER_TOKEN = 2 * L * H_kv * d_h * s_kv

M_w, M_KV, M_a, M_u, C = sp.symbols(r"M_w M_{\mathrm{KV}} M_a M_u C", nonnegative=True)
#: The memory inequality of one accelerator (terms kept in reading order; print with ``order="none"``).
MEMORY_FITS = sp.Le(sp.Add(M_w, M_KV, M_a, M_u, evaluate=False), C)

# ---- 8.1.3 request time -----------------------------------------------------------------
t_a, t_1, t_G, T_q, T_p, ITL, G = sp.symbols(r"t_a t_1 t_G T_{\mathrm{queue}} T_{\mathrm{prefill}} \mathrm{ITL} G",
                                             positive=True)
#: Time to first token of a request: queueing plus prefill.
TTFT = T_q + T_p
#: Request time of a request with a constant inter-token latency: TTFT + (G - 1) ITL (reading order kept).
REQUEST_TIME = sp.Add(T_q, T_p, sp.Mul(sp.Add(G, -1, evaluate=False), ITL, evaluate=False), evaluate=False)

b, T_step = sp.symbols(r"b T_{\mathrm{step}}", positive=True)
#: Output throughput R_out of a decode batch: b tokens per step.
THROUGHPUT = b / T_step

D_step, beta_s = sp.symbols("D beta", positive=True)
#: Time to read a step's D bytes at peak bandwidth beta: the memory floor of the step.
T_READ = D_step / beta_s
#: The part of a measured step its reads at peak do not explain: T_ovh = T_step - D/beta.
STEP_OVERHEAD = T_step - T_READ
#: Bandwidth efficiency (MBU) of a measured step: its read floor over its duration.
MBU = T_READ / T_step
#: Mean time per output token after the first: (t_G - t_1) / (G - 1).
TPOT = (t_G - t_1) / (G - 1)


def kv_per_token_for(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> sp.Integer:
    """KV_PER_TOKEN with the model's dimensions substituted (bytes)."""
    sizes = {name: positive_int(name, value) for name, value in (
        ("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim), ("dtype_bytes", dtype_bytes))}
    return KV_PER_TOKEN.subs({L: sizes["n_layers"], H_kv: sizes["n_kv_heads"], d_h: sizes["head_dim"],
                              s_kv: sizes["dtype_bytes"]})

# ---- 8.2.1 weight reuse and the step roofline ---------------------------------------------
b_s, s_w = sp.symbols("b s_w", positive=True)
#: Arithmetic intensity of weight reads when b rows share each weight element of s_w bytes.
WEIGHT_INTENSITY = 2 * b_s / s_w

L_ctx, k_tok, D_w = sp.symbols("L k D_w", positive=True)
#: Bytes one decode step reads: the matrix weights once and every request's KV.
STEP_READ_BYTES = D_w + b_s * L_ctx * k_tok
#: Bytes read per output token: d(b, L) = D_w/b + L*k.
BYTES_PER_OUTPUT_TOKEN = sp.expand(STEP_READ_BYTES / b_s)
#: The batch at which the KV reads equal the shared weight reads (before rounding up): D_w / (L*k).
B_KV = solve_linear(sp.Eq(b_s * L_ctx * k_tok, D_w), b_s)

F_req, P_peak, beta = sp.symbols("F P beta", positive=True)
#: Compute time and read time of one decode step of b requests.
T_COMPUTE = b_s * F_req / P_peak
T_MEMORY = STEP_READ_BYTES / beta
#: The batch at which compute time equals read time.
BATCH_CROSSOVER = solve_linear(sp.Eq(T_COMPUTE, T_MEMORY), b_s)

F_0, F_slope = sp.symbols("F_0 F_1", positive=True)
#: One request's FLOP per decode token, linear in its context: F(L) = F_0 + F_1*L.
DECODE_FLOPS = F_0 + F_slope * L_ctx
#: The context at which one request's compute time equals its KV read time (weights aside).
CONTEXT_CROSSOVER = sp.cancel(solve_linear(sp.Eq(DECODE_FLOPS / P_peak, L_ctx * k_tok / beta), L_ctx))

# ---- 8.2.2 - 8.2.4 iteration time and causal pairs -----------------------------------------
c_new, h_cached, i_tok = sp.symbols("c h i", positive=True, integer=True)
#: Causal query-key pairs of a chunk of c new tokens after h cached ones, summed token by token.
CAUSAL_PAIRS_SUM = sp.Sum(h_cached + i_tok, (i_tok, 1, c_new))
#: The same in closed form: c*h + c(c+1)/2.
CAUSAL_PAIRS = c_new * h_cached + c_new * (c_new + 1) / 2

t_0, c_tok, c_pair, N_tok, N_pair = sp.symbols(
    r"t_0 t_{\mathrm{tok}} t_{\mathrm{pair}} N_{\mathrm{tok}} N_{\mathrm{pair}}", positive=True)
#: Fitted iteration time: a fixed part, a part per new token, a part per causal pair.
ITERATION_TIME = t_0 + c_tok * N_tok + c_pair * N_pair

n_d, L_d, T_max = sp.symbols(r"n_d L_d T_{\max}", positive=True)
#: Iteration with n_d decodes at context L_d and one prompt piece of c after h (the two-step rule of 8.2.4).
PIECE_ITERATION_TIME = ITERATION_TIME.subs({N_tok: c_new + n_d,
                                            N_pair: CAUSAL_PAIRS + n_d * (L_d + 1)})


def iteration_time_for(fixed_s: float, per_token_s: float, per_pair_s: float) -> sp.Expr:
    """ITERATION_TIME with the fitted coefficients substituted (seconds, in N_tok and N_pair)."""
    return ITERATION_TIME.subs(_coefficients(fixed_s, per_token_s, per_pair_s))


def _coefficients(fixed_s: float, per_token_s: float, per_pair_s: float) -> dict[sp.Symbol, float]:
    return {t_0: non_negative("fixed_s", fixed_s), c_tok: non_negative("per_token_s", per_token_s),
            c_pair: non_negative("per_pair_s", per_pair_s)}


@cache
def _piece_roots(quadratic: bool) -> list[sp.Expr]:
    """The roots c of PIECE_ITERATION_TIME = T_max in the coefficients' symbols (no pair term unless ``quadratic``).

    Solved once and substituted: solving again with float coefficients took minutes at extreme magnitudes.
    """
    expr = PIECE_ITERATION_TIME if quadratic else PIECE_ITERATION_TIME.subs(c_pair, 0)
    return sp.solve(sp.Eq(expr, T_max), c_new, simplify=False)


def largest_piece(fixed_s: float, per_token_s: float, per_pair_s: float) -> sp.Expr:
    """The positive root c of PIECE_ITERATION_TIME = T_max with fitted coefficients (in h, n_d, L_d, T_max)."""
    values = _coefficients(fixed_s, per_token_s, per_pair_s)
    if values[c_tok] == 0 and values[c_pair] == 0:
        raise ValueError("per_token_s and per_pair_s must not both be 0 (no piece size would change the time)")
    roots = [r.subs(values) for r in _piece_roots(values[c_pair] > 0)]
    probe = {T_max: 1.0, h_cached: 0, n_d: 0, L_d: 1}
    return max(roots, key=lambda r: float(sp.re(r.subs(probe))))


def written_sum(*terms: sp.Expr) -> sp.Expr:
    """``terms`` added in the order given, not sympy's (for displaying a formula as a person writes it)."""
    return sp.Add(*terms, evaluate=False)


def written_product(*factors: sp.Expr) -> sp.Expr:
    """``factors`` multiplied in the order given, not sympy's (``written_sum``'s partner)."""
    return sp.Mul(*factors, evaluate=False)
