"""What a good result costs, and the bar a deadline sets on tokens per round (section 8.6.3).

Cost. Over an observation that occupied the accelerator for T_GPU seconds and used E_obs joules, with N_g good
results (correct and on time), each good result costs T_GPU / N_g GPU-seconds and E_obs / N_g joules. Work spent
on wrong or late answers stays in the numerators; with no good result the cost is infinite. Without an energy
counter, the card's power limit bounds the energy: E_obs <= W_max T_GPU.

Deadline. A batch that prefills in T_prefill and then runs rounds of T_step, each emitting E[N] tokens per request
on average, delivers G outputs by T_SLO only if T_prefill + (G - 1) T_step / E[N] <= T_SLO, that is

    E[N] >= (G - 1) T_step / (T_SLO - T_prefill).

(``configs.tokens_per_round_needed`` is the same bar counted in whole rounds.)
"""

from __future__ import annotations

import math
from typing import Any

from .._validate import non_negative, non_negative_int, positive, positive_int

__all__ = ["PREFILL_MFU_CACHED_6K", "MEASURED_SHARED_REQUEST_S", "per_good", "energy_bound_j",
           "tokens_per_round_bound", "deadline_derivation"]

# Two measurements of experiment 8-1 that section 8.6.3 prints beside its estimates (RTX PRO 6000, Qwen3-8B, BF16):
#: Prefill efficiency (share of peak BF16) for 8K prompts whose first 6K were cached: 52 % to 58 %
#: (config B's batch of sixteen reached the top of the range).
PREFILL_MFU_CACHED_6K: tuple[float, float] = (0.52, 0.58)
#: Median request time of config B's condition (16 x 8K prompts, 6K cached, 256 outputs), seconds.
MEASURED_SHARED_REQUEST_S = 9.02


def per_good(total: float, n_good: int) -> float:
    """``total`` (GPU-seconds T_GPU, or joules E_obs) over the good results N_g; infinite when there are none."""
    spent = non_negative("total", total)
    n = non_negative_int("n_good", n_good)
    return spent / n if n else math.inf


def energy_bound_j(gpu_s: float, power_w: float) -> float:
    """Upper bound on the energy of ``gpu_s`` accelerator-seconds at the card's power limit: W_max T_GPU (joules)."""
    return non_negative("gpu_s", gpu_s) * positive("power_w", power_w)


def tokens_per_round_bound(output_tokens: int, prefill_s: float, step_s: float, deadline_s: float) -> float:
    """Fewest tokens per round (mean per request) that deliver ``output_tokens`` by ``deadline_s``.

    max(1, (G - 1) T_step / (T_SLO - T_prefill)), rounds counted as a continuous number (a round emits at least
    one token); infinite when the prefill alone reaches the deadline. Seconds throughout.
    """
    g = positive_int("output_tokens", output_tokens)
    prefill, step = non_negative("prefill_s", prefill_s), positive("step_s", step_s)
    left = positive("deadline_s", deadline_s) - prefill
    if left <= 0:
        return math.inf
    return max(1.0, (g - 1) * step / left)


def deadline_derivation() -> tuple[Any, Any]:
    """The deadline check in sympy: (the inequality on the batch's finish time, its solution for E[N]).

    Symbols: T_prefill, T_step, T_SLO, G (all positive) and E[N] (tokens per round per request).
    """
    import sympy as sp

    prefill, step, slo = (sp.Symbol(rf"T_{{\mathrm{{{n}}}}}", positive=True) for n in ("prefill", "step", "SLO"))
    g, tokens = sp.Symbol("G", positive=True), sp.Symbol(r"\mathbb{E}[N]", positive=True)
    from sympy.solvers.solvers import solve_linear

    finish = sp.Le(prefill + (g - 1) * step / tokens, slo)
    # times E[N] > 0 the equality is linear in E[N]: T_prefill E[N] + (G - 1) T_step - T_SLO E[N] = 0
    numerator = sp.fraction(sp.together(finish.lhs - finish.rhs))[0]
    symbol, bar = solve_linear(numerator, symbols=[tokens])
    if symbol != tokens:
        raise AssertionError(f"the deadline is not linear in E[N]: {numerator}")
    return finish, sp.factor(bar)
