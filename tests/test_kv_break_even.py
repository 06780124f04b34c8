"""From which context a compressed KV format saves time per step (8.4.2)."""

import math

import pytest
import sympy as sp

from inferlab.compression import kv as kc
from inferlab.compression import kv_break_even as be
from inferlab.example import MODEL
from inferlab.models import MODELS
from inferlab.units import GB, MiB, ms

BETA = kc.decode_bandwidth_measured(64)


def test_symbolic_crossover() -> None:
    eq, crossover = be.crossover_context_symbolic()
    L = next(s for s in eq.rhs.free_symbols if s.name == "L")
    assert sp.simplify(eq.rhs.subs(L, crossover)) == 0


def test_crossover_matches_net_saving() -> None:
    for fmt in ("q8_0", "q4_0", "fp8_e4m3"):
        x = be.crossover_context(MODEL, fmt, BETA, 0.2 * ms)
        k, rho = MODEL.kv_bytes_per_token(), kc.block_format(fmt).ratio_to(2.0)
        assert math.isclose(x * k * (1 - rho) / BETA, 0.2 * ms)
    assert round(be.crossover_context(MODEL, "q8_0", BETA, 0.2 * ms)) == 3365
    with pytest.raises(ValueError, match="fmt"):
        be.crossover_context(MODEL, "bf16", BETA, 0.2 * ms)


def test_net_saving_is_the_chapter_arithmetic() -> None:
    assert round(be.net_saving(MODEL, 8192, "q8_0", BETA, 0.2 * ms) / ms, 3) == 0.287
    assert round(be.net_saving(MODEL, 8192, "q8_0", BETA, 0.8 * ms) / ms, 3) == -0.313
    assert be.net_saving(MODEL, 2048, "q8_0", BETA, 0.2 * ms) < 0
    assert kc.kv_bytes_in_format(MODEL, 2048, 1, "bf16") == 288 * MiB


def test_grid_searches() -> None:
    contexts = range(1024, 32769, 1024)
    assert be.first_paying_context(MODEL, "q8_0", BETA, 0.2 * ms, contexts) == 4096
    assert be.first_paying_context(MODEL, "q8_0", BETA, 5 * ms, contexts) is None
    steps = [i * 0.05 * ms for i in range(21)]
    assert be.last_paying_conversion(MODEL, 8192, "q4_0", BETA, steps) == pytest.approx(0.70 * ms)
    assert be.last_paying_conversion(MODEL, 4096, "q4_0", BETA, steps) == pytest.approx(0.35 * ms)
    assert be.last_paying_conversion(MODEL, 8192, "q4_0", BETA, [5 * ms]) is None


def test_what_a_fitted_line_implies() -> None:
    k = MODELS["llama-3.1-8b"].kv_bytes_per_token()
    assert round(be.implied_bandwidth(k, kc.ITL_BF16_H100) / GB) == 2999
    assert be.bytes_only_slope(kc.ITL_BF16_H100, 0.5) == pytest.approx(kc.ITL_BF16_H100.per_token_s / 2)
    with pytest.raises(ValueError, match="ratio"):
        be.bytes_only_slope(kc.ITL_BF16_H100, 0.0)
