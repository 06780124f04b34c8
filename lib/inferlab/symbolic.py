"""Symbolic forms of the chapter's formulas (sympy), so notebooks derive them and then substitute numbers."""

from __future__ import annotations

import sympy as sp

# ---- 8.1.2 memory -----------------------------------------------------------------------
L, H_kv, d_h, s_kv = sp.symbols("L H_kv d_h s", positive=True, integer=True)
#: KV bytes per token: K and V, for every layer, KV head and head dimension, s bytes each.
KV_PER_TOKEN = 2 * L * H_kv * d_h * s_kv

M_w, M_KV, M_a, M_u, C = sp.symbols("M_w M_KV M_a M_u C", nonnegative=True)
#: The memory inequality of one accelerator.
MEMORY_FITS = sp.Le(M_w + M_KV + M_a + M_u, C)

# ---- 8.1.3 request time -----------------------------------------------------------------
t_a, t_1, t_G, T_q, T_p, ITL, G = sp.symbols("t_a t_1 t_G T_queue T_prefill ITL G", positive=True)
TTFT = T_q + T_p
#: Request time of a request with a constant inter-token latency: TTFT + (G - 1) ITL.
REQUEST_TIME = TTFT + (G - 1) * ITL

b, T_step = sp.symbols("b T_step", positive=True)
#: Output throughput of a decode batch: b tokens per step.
THROUGHPUT = b / T_step


def kv_per_token_for(n_layers: int, n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> sp.Integer:
    """KV_PER_TOKEN with the model's dimensions substituted (bytes)."""
    return KV_PER_TOKEN.subs({L: n_layers, H_kv: n_kv_heads, d_h: head_dim, s_kv: dtype_bytes})
