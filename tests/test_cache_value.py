"""Value of keeping a prefix (8.3.4): every number the chapter prints, and the exercise 8-4 crossover."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.hardware import ACCELERATORS, PCIE_GEN4_X16, PCIE_GEN5_X16
from inferlab.kvcache import (PrefixCost, best_use_of_space, break_even_hit_probability, context_update_options,
                              expected_saving, keep_ratio_threshold, prefix_cost, recompute_to_fetch_ratio,
                              slowest_paying_link)
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


def test_recompute_costs_19x_a_gen5_fetch_at_every_length() -> None:
    lengths = [1, 2, 16, 64, 256, 1024, 2048, 6144, 32_768]
    ratio = recompute_to_fetch_ratio(QWEN, RTX, lengths, PCIE_GEN5_X16)
    assert ratio.min() > 19 and round(ratio.min()) == 19  # no length where dropping beats a Gen5 fetch per hit
    assert list(ratio[3:]) == sorted(ratio[3:])  # past the logits row, attention makes the ratio grow
    gen4 = recompute_to_fetch_ratio(QWEN, RTX, lengths, PCIE_GEN4_X16)
    assert gen4 == pytest.approx(ratio / 2)


def test_keep_ratio_threshold_is_where_value_changes_sign() -> None:
    assert keep_ratio_threshold(0.5) == 3.0 and keep_ratio_threshold(0.5, 0.0) == 1.0
    a = _a()
    p0 = a.break_even()
    assert a.recompute_s / a.fetch_s == pytest.approx(keep_ratio_threshold(p0))
    assert keep_ratio_threshold(0.25, 2.0) == 9.0


@given(p=st.floats(0.01, 1), m=st.floats(0, 5), n=st.integers(1, 20_000))
def test_slowest_paying_link_is_the_break_even_bandwidth(p: float, m: float, n: int) -> None:
    beta = slowest_paying_link(QWEN, RTX, n, p, m)
    at = prefix_cost(QWEN, RTX, n, link_bandwidth=beta)
    v = p * (at.recompute_s - at.fetch_s) - m * at.fetch_s
    assert v == pytest.approx(0, abs=1e-12)
    faster = prefix_cost(QWEN, RTX, n, link_bandwidth=beta * 1.1)
    assert p * (faster.recompute_s - faster.fetch_s) - m * faster.fetch_s > 0


def test_when_recomputing_wins_for_prefix_a() -> None:
    assert round(slowest_paying_link(QWEN, RTX, 6144, 0.5) / GB, 1) == 8.8  # at even odds only a very slow link
    contended = prefix_cost(QWEN, RTX, 6144, link_bandwidth=8 * GB)
    assert contended.value(0.5) < 0 < _a().value(0.5)
    assert slowest_paying_link(QWEN, RTX, 6144, 0.1) > PCIE_GEN4_X16  # Gen4 at p_h = 0.1: below its 10.1 %
    m_even = 0.5 * (_a().recompute_s / _a().fetch_s - 1)  # maintenance, in transfers, that cancels an even-odds hit
    assert round(m_even, 1) == 10.4 and _a().break_even_maintenance(0.5) == pytest.approx(m_even * _a().fetch_s)
    assert prefix_cost(QWEN, RTX, 6144, maintain_s=(m_even + 0.1) * _a().fetch_s).value(0.5) < 0
    assert prefix_cost(QWEN, RTX, 6144, maintain_s=(m_even - 0.1) * _a().fetch_s).value(0.5) > 0


def test_new_functions_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="p_hit"):
        keep_ratio_threshold(0.0)
    with pytest.raises(ValueError, match="maintain_per_fetch"):
        keep_ratio_threshold(0.5, -1)
    with pytest.raises(ValueError, match="tokens"):
        recompute_to_fetch_ratio(QWEN, RTX, [])
    with pytest.raises(ValueError, match="tokens"):
        recompute_to_fetch_ratio(QWEN, RTX, [0, 5])
    with pytest.raises(ValueError, match="p_hit"):
        slowest_paying_link(QWEN, RTX, 6144, 1.5)


def test_generating_the_summary_takes_its_decode_steps() -> None:
    from inferlab.example import MODEL
    from inferlab.kvcache import context_update_options, generation_time

    append, rewrite, summary = context_update_options(8192, 1024, 2048)
    assert generation_time(append, MODEL) == generation_time(rewrite, MODEL) == 0  # nothing to generate
    assert round(generation_time(summary, MODEL), 1) == 54.6  # 2047 batch-1 steps of about 26.7 ms
    with pytest.raises(ValueError, match="update must be a ContextUpdate"):
        generation_time("summarize", MODEL)
