"""Value of keeping a prefix (8.3.4): every number the chapter prints, and the exercise 8-4 crossover."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.cache_value import (
    context_update_options,
    PrefixCost,
    best_use_of_space,
    break_even_hit_probability,
    expected_saving,
    prefix_cost,
)
from inferlab.hardware import ACCELERATORS, PCIE_GEN4_X16, PCIE_GEN5_X16
from inferlab.models import MODELS
from inferlab.units import GB, MiB, ms

QWEN, RTX = MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"]


def _a(link: float = PCIE_GEN5_X16) -> PrefixCost:
    return prefix_cost(QWEN, RTX, 6144, link_bandwidth=link)


def _b(link: float = PCIE_GEN5_X16) -> PrefixCost:
    return prefix_cost(QWEN, RTX, 2048, link_bandwidth=link)


def test_prefix_a_on_gen5() -> None:
    a = _a()
    assert a.kv_bytes / MiB == 864 and round(a.kv_bytes / GB, 3) == 0.906
    assert round(a.recompute_s / ms, 1) == 307.9
    assert round(a.fetch_s / ms, 1) == 14.2 and a.maintain_s == a.fetch_s
    assert round(a.saving_per_hit_s / ms, 1) == 293.7
    assert round(a.value(0.5) / ms, 1) == 132.7
    assert round(a.break_even() * 100, 1) == 4.8


def test_prefix_a_on_gen4() -> None:
    a = _a(PCIE_GEN4_X16)
    assert round(a.fetch_s / ms, 1) == 28.3 and round(a.maintain_s / ms, 1) == 28.3
    assert round(a.saving_per_hit_s / ms, 1) == 279.6
    assert round(a.break_even() * 100, 1) == 10.1


def test_one_a_against_three_b_figure_8_22() -> None:
    a, b = _a(), _b()
    assert b.kv_bytes / MiB == 288
    assert round(b.recompute_s / ms, 1) == 94.7 and round(b.fetch_s / ms, 1) == 4.7
    assert round(b.value(0.5) / ms, 1) == 40.3
    assert round(3 * b.value(0.5) / ms, 1) == 120.9
    assert round(a.value_per_byte(0.5) * MiB / ms, 3) == 0.154
    assert round(b.value_per_byte(0.5) * MiB / ms, 3) == 0.140
    assert round(a.recompute_s / b.recompute_s, 2) == 3.25
    kept, total = best_use_of_space([(a, 0.5), (b, 0.5), (b, 0.5), (b, 0.5)], 864 * MiB)
    assert kept == [0] and round(total / ms, 1) == 132.7


def test_exercise_8_4_hit_probability_where_a_stops_winning() -> None:
    for link in (PCIE_GEN5_X16, PCIE_GEN4_X16):
        a, b = _a(link), _b(link)
        p = a.hit_probability_for(3 * b.value(0.5))
        assert a.value(p) == pytest.approx(3 * b.value(0.5))
        assert a.value(p + 0.01) > 3 * b.value(0.5) > a.value(p - 0.01)
    assert round(_a().hit_probability_for(3 * _b().value(0.5)), 3) == 0.460
    assert round(_a(PCIE_GEN4_X16).hit_probability_for(3 * _b(PCIE_GEN4_X16).value(0.5)), 3) == 0.458


@given(p=st.floats(0, 1), tr=st.floats(0.01, 1), tf=st.floats(0, 0.009), tm=st.floats(0, 0.1))
def test_value_is_positive_exactly_above_break_even(p: float, tr: float, tf: float, tm: float) -> None:
    v = expected_saving(p, tr, tf, tm)
    p0 = break_even_hit_probability(tr, tf, tm)
    assert v == pytest.approx(p * (tr - tf) - tm)
    if abs(p - p0) > 1e-9:
        assert (v > 0) == (p > p0)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="p_hit"):
        expected_saving(1.2, 1, 0, 0)
    with pytest.raises(ValueError, match="recompute_s"):
        break_even_hit_probability(0.1, 0.2, 0.01)
    with pytest.raises(ValueError, match="tokens"):
        prefix_cost(QWEN, RTX, 0)
    with pytest.raises(ValueError, match="capacity_bytes"):
        best_use_of_space([], 0)
    with pytest.raises(ValueError, match="mfu"):
        prefix_cost(QWEN, RTX, 6144, mfu=2)
    with pytest.raises(ValueError, match="mfu"):
        prefix_cost(QWEN, RTX, 6144, mfu=0)
    flat = PrefixCost(10, 1.0, 0.5, 0.5, 0.1)  # T_r = T_f: a hit saves nothing
    with pytest.raises(ValueError, match="recompute_s"):
        flat.hit_probability_for(0.1)
    a = prefix_cost(QWEN, RTX, 6144)
    with pytest.raises(ValueError, match="target_s"):
        a.hit_probability_for(10.0)  # more than a certain hit can save
    with pytest.raises(ValueError, match="target_s"):
        a.hit_probability_for(-1.0)
    with pytest.raises(ValueError, match="kv_bytes"):
        PrefixCost(10, 0.0, 0.5, 0.1, 0.1).value_per_byte(0.5)


def test_context_update_options_figure_8_20() -> None:
    append, rewrite, summary = context_update_options(8192, 1024, 2048)
    assert [o.reused_tokens for o in (append, rewrite, summary)] == [8192, 0, 0]
    assert [o.processed_tokens for o in (append, rewrite, summary)] == [1024, 9216, 3072]
    assert summary.read_cached_tokens == 8192 and summary.generated_tokens == 2048  # the summary reads the history
    assert append.read_cached_tokens == rewrite.read_cached_tokens == 0
    with pytest.raises(ValueError, match="summary_tokens"):
        context_update_options(1024, 0, 2048)
