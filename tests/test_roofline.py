"""Section 8.2.1: weight reuse, bytes per output token, b_KV, the step-time roofline, LoRA adapters."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import roofline as R
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.units import GB, GiB, MiB, ms

M = MODELS["qwen3-8b"]
ACC = ACCELERATORS["rtx-pro-6000"]
DW = M.matrix_weight_bytes()
K = M.kv_bytes_per_token()


def test_weight_intensity_is_2b_over_sw():
    assert R.weight_intensity(1) == 1.0
    assert R.weight_intensity(16) == 16.0
    assert R.weight_intensity(16, weight_element_bytes=1) == 32.0


def test_chapter_read_sizes_2k():
    assert round(DW / GiB, 1) == 14.1
    assert 2048 * K / GiB == 0.28125
    assert round(DW / 16 / GiB, 2) == 0.88
    assert round(DW / 64 / GiB, 2) == 0.22
    d1 = R.bytes_per_output_token(1, 2048, DW, K)
    d64 = R.bytes_per_output_token(64, 2048, DW, K)
    assert round(d1 / GiB, 2) == 14.38
    assert round(d64 / GiB, 2) == 0.50
    assert round(d1 / d64) == 29
    # at batch 64 each output token reads more KV than (amortized) weights
    assert 2048 * K > DW / 64


def test_b_kv_is_51_at_2k_and_13_at_8k():
    assert R.b_kv(DW, 2048, K) == 51
    assert R.b_kv(DW, 8192, K) == 13
    # definition: smallest b with b*L*k >= D_w
    for L in (2048, 8192):
        b = R.b_kv(DW, L, K)
        assert b * L * K >= DW > (b - 1) * L * K


def test_a_batch_of_64_short_requests_needs_the_chapters_35_7_gb():
    assert round(R.resident_bytes(64, 2049, M.weight_bytes(), K) / GB, 1) == 35.7


@pytest.mark.parametrize(("batch", "gb", "ms_"), [(1, 15.44, 8.62), (4, 16.34, 9.12), (16, 19.97, 11.14),
                                                  (64, 34.46, 19.23)])
def test_step_reads_and_read_times_of_table_8_6_3(batch, gb, ms_):
    read = R.step_read_bytes(batch, 2048, DW, K)
    assert round(read / GB, 2) == gb
    assert round(R.decode_step_time(M, ACC, batch, 2048) / ms, 2) == ms_


def test_lora_adapter_sizes():
    one = R.lora_adapter_bytes(M, rank=16, targets=("q", "v"))
    assert round(one / MiB, 1) == 14.6
    assert round(100 * one / GiB, 2) == 1.43
    assert 100 * one < DW
    assert 100 * 8192 * K / GiB == 112.5
    assert R.lora_adapter_bytes(M, rank=32) == 2 * one
    with pytest.raises(ValueError, match="targets"):
        R.lora_adapter_bytes(M, targets=("x",))
    with pytest.raises(ValueError, match="targets"):
        R.lora_adapter_bytes(M, targets=())


def test_adapter_groups_split_a_batch():
    groups = R.adapter_groups(["a", "b", "a", "c", "a", "b"])
    assert groups == {"a": 3, "b": 2, "c": 1}
    assert list(groups) == ["a", "b", "c"]
    assert R.adapter_weight_intensity(["a"] * 16) == 16.0
    assert R.adapter_weight_intensity(list("abcdefghijklmnop")) == 1.0
    with pytest.raises(ValueError, match="adapters"):
        R.adapter_groups([])


def test_step_time_is_max_of_compute_and_memory():
    t = R.step_time(4, 1e9, 2048, DW, K, 1e15, 1e12)
    assert t == pytest.approx(max(4e9 / 1e15, (DW + 4 * 2048 * K) / 1e12))
    assert R.step_time(4, 1e9, 2048, DW, K, 1e15, 1e12, mbu=0.5) == pytest.approx(2 * t)
    compute_bound = R.step_time(1000, 1e12, 1, 0, 1, 1e12, 1e15)
    assert compute_bound == pytest.approx(1000.0)
    assert R.step_time(1000, 1e12, 1, 0, 1, 1e12, 1e15, mfu=0.5) == pytest.approx(2000.0)


def test_separate_weight_store_drops_weight_reads():
    conventional = R.hbm_bytes_per_output_token(8, DW, 8192 * K)
    fast = R.hbm_bytes_per_output_token(8, DW, 8192 * K, separate_weight_store=True)
    assert conventional == DW / 8 + 8192 * K
    assert fast == 8192 * K
    t_conv = R.decode_step_time(M, ACC, 8, 8192)
    t_fast = R.decode_step_time(M, ACC, 8, 8192, separate_weight_store=True)
    assert t_conv - t_fast == pytest.approx(DW / ACC.hbm_bandwidth)


def test_crossover_never_at_2k_decode_but_exists_for_short_context():
    f = R.decode_flops_per_request(M, 2048)
    assert R.compute_memory_crossover(f, 2048, DW, K, ACC.peak_bf16_flops, ACC.hbm_bandwidth) == math.inf
    f128 = R.decode_flops_per_request(M, 128)
    b = R.compute_memory_crossover(f128, 128, DW, K, ACC.peak_bf16_flops, ACC.hbm_bandwidth)
    assert 400 < b < 450
    # at the crossover both roofline terms are equal
    compute = b * f128 / ACC.peak_bf16_flops
    memory = (DW + b * 128 * K) / ACC.hbm_bandwidth
    assert compute == pytest.approx(memory)


def test_no_batch_crossover_without_shared_weights():
    # weights from a separate store: both terms are linear in b, so there is no crossover in batch
    f128 = R.decode_flops_per_request(M, 128)
    assert R.compute_memory_crossover(f128, 128, 0.0, K, ACC.peak_bf16_flops, ACC.hbm_bandwidth) == math.inf
    assert R.compute_memory_crossover(f128, 4096, 0.0, K, ACC.peak_bf16_flops, ACC.hbm_bandwidth) == math.inf


def test_context_crossover_of_a_decode_token():
    l_star = R.decode_context_crossover(M, ACC)
    assert round(l_star) == 370
    f0 = R.decode_flops_per_request(M, 0)
    slope = R.decode_flops_per_request(M, 1) - f0
    # at L*, one request's compute time equals its KV read time
    assert (f0 + slope * l_star) / ACC.peak_bf16_flops == pytest.approx(l_star * K / ACC.hbm_bandwidth)
    # below it a batch crossover exists (with weights in HBM); above it, none
    assert R.compute_memory_crossover(R.decode_flops_per_request(M, 128), 128, DW, K, ACC.peak_bf16_flops,
                                      ACC.hbm_bandwidth) < math.inf
    assert R.compute_memory_crossover(R.decode_flops_per_request(M, 512), 512, DW, K, ACC.peak_bf16_flops,
                                      ACC.hbm_bandwidth) == math.inf
    # with a separate weight store the step is compute-bound at every batch below L*, memory-bound above
    for L, compute_bound in ((128, True), (2048, False)):
        for b in (1, 64):
            t = R.decode_step_time(M, ACC, b, L, separate_weight_store=True)
            assert (t == pytest.approx(b * R.decode_flops_per_request(M, L) / ACC.peak_bf16_flops)) is compute_bound
    # slower compute (lower MFU) moves L* up; reads that grow slower than compute never cross
    assert R.decode_context_crossover(M, ACC, mfu=0.5) > l_star
    assert R.context_crossover(1e9, 1e6, 1.0, 1e15, 1e15) == math.inf


def test_symbolic_forms_match_the_library():
    import inferlab.symbolic as Y
    assert Y.B_KV.subs({Y.D_w: DW, Y.L_ctx: 2048, Y.k_tok: K}) == pytest.approx(DW / (2048 * K))
    assert math.ceil(float(Y.B_KV.subs({Y.D_w: DW, Y.L_ctx: 8192, Y.k_tok: K}))) == R.b_kv(DW, 8192, K) == 13
    f = R.decode_flops_per_request(M, 128)
    num = {Y.D_w: DW, Y.L_ctx: 128, Y.k_tok: K, Y.F_req: f, Y.P_peak: ACC.peak_bf16_flops, Y.beta: ACC.hbm_bandwidth}
    assert float(Y.BATCH_CROSSOVER.subs(num)) == pytest.approx(
        R.compute_memory_crossover(f, 128, DW, K, ACC.peak_bf16_flops, ACC.hbm_bandwidth))
    f0 = R.decode_flops_per_request(M, 0)
    l_num = {Y.F_0: f0, Y.F_slope: R.decode_flops_per_request(M, 1) - f0, Y.k_tok: K, Y.P_peak: ACC.peak_bf16_flops,
             Y.beta: ACC.hbm_bandwidth}
    assert float(Y.CONTEXT_CROSSOVER.subs(l_num)) == pytest.approx(R.decode_context_crossover(M, ACC))
    assert float(Y.WEIGHT_INTENSITY.subs({Y.b_s: 16, Y.s_w: 2})) == R.weight_intensity(16) == 16


def test_efficiency_check_is_shared():
    assert R.efficiency("mfu", 1.0) == 1.0 and R.efficiency("mbu", 0.65) == 0.65
    for bad in (0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match="mfu"):
            R.efficiency("mfu", bad)
    from inferlab.scheduling import RooflineCost
    with pytest.raises(ValueError, match="mbu"):
        RooflineCost(M, ACC, mbu=0)
    with pytest.raises(ValueError, match="mfu"):
        RooflineCost(M, ACC, mfu=1.5)


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 512), L=st.integers(1, 32768))
def test_bytes_per_token_falls_with_batch_towards_kv_floor(b, L):
    d = R.bytes_per_output_token(b, L, DW, K)
    assert d >= L * K
    assert R.bytes_per_output_token(b + 1, L, DW, K) < d
    assert d == pytest.approx(R.step_read_bytes(b, L, DW, K) / b)


@pytest.mark.parametrize(
    "call",
    [
        lambda: R.bytes_per_output_token(0, 2048, DW, K),
        lambda: R.bytes_per_output_token(1, -1, DW, K),
        lambda: R.b_kv(DW, 0, K),
        lambda: R.step_time(1, 1e9, 2048, DW, K, 1e15, 1e12, mfu=1.5),
        lambda: R.step_time(1, 1e9, 2048, DW, K, 1e15, 1e12, mbu=0),
        lambda: R.weight_intensity(1, 0),
        lambda: R.hbm_bytes_per_output_token(0, DW, K),
        lambda: R.step_time(1, 1e9, 2048, DW, K, 1e15, 1e12, overhead_s=-1e-3),
        lambda: R.fixed_step_cost(0.005, 1, 2048, DW, K, ACC.hbm_bandwidth),  # shorter than its reads at peak
        lambda: R.step_mfu(1, 1e9, 0.0, 1e15),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# ---- the fixed per-step cost, and what a separate weight store changes (section 8.2.1) -----------
def test_fixed_step_cost_of_experiment_8_1_is_17_6_ms():
    # 26.26 ms measured at batch 1, 2K context; its reads (15.44 GB) take 8.62 ms at 1792 GB/s
    extra = R.fixed_step_cost(0.02626, 1, 2048, DW, K, ACC.hbm_bandwidth)
    assert round(extra / ms, 1) == 17.6
    assert extra + R.step_read_bytes(1, 2048, DW, K) / ACC.hbm_bandwidth == pytest.approx(0.02626)


def test_overhead_is_added_to_the_roofline_step():
    base = R.decode_step_time(M, ACC, 16, 8192)
    assert R.decode_step_time(M, ACC, 16, 8192, overhead_s=0.0176) == pytest.approx(base + 0.0176)


def test_separate_store_removes_the_weight_term_but_batching_still_spreads_the_fixed_cost():
    fixed = 0.0176
    per_token = {b: R.decode_time_per_token(M, ACC, b, 8192, fixed, separate_weight_store=True) for b in (1, 16, 64)}
    kv_read = 8192 * K / ACC.hbm_bandwidth
    for b, t in per_token.items():  # memory-bound at 8K: fixed/b + L*k/beta exactly
        assert t == pytest.approx(fixed / b + kv_read)
    assert per_token[1] > per_token[16] > per_token[64]
    # without a fixed cost the separate store makes the time per token independent of the batch
    flat = [R.decode_time_per_token(M, ACC, b, 8192, 0.0, separate_weight_store=True) for b in (1, 16, 64)]
    assert max(flat) - min(flat) < 1e-15
    # the gap between the two stores is the weight read shared by the batch, D_w / (beta * b)
    for b in (1, 16, 64):
        gap = R.decode_time_per_token(M, ACC, b, 8192, fixed) - per_token[b]
        assert gap == pytest.approx(DW / ACC.hbm_bandwidth / b)


def test_compute_utilization_rises_with_the_batch():
    u = [R.decode_mfu(M, ACC, b, 8192, 0.0176, separate_weight_store=True) for b in (1, 4, 16, 64, 256)]
    assert all(x < y for x, y in zip(u, u[1:])) and 0 < u[0] and u[-1] <= 1
    f = R.decode_flops_per_request(M, 8192)
    t = R.decode_step_time(M, ACC, 16, 8192, overhead_s=0.0176, separate_weight_store=True)
    assert R.decode_mfu(M, ACC, 16, 8192, 0.0176, True) == pytest.approx(16 * f / (ACC.peak_bf16_flops * t))


@settings(max_examples=50, deadline=None)
@given(b=st.integers(1, 512), L=st.integers(1, 32768), extra=st.floats(0, 0.05))
def test_time_per_token_never_rises_with_the_batch(b, L, extra):
    t = R.decode_time_per_token(M, ACC, b, L, extra)
    assert R.decode_time_per_token(M, ACC, b + 1, L, extra) <= t * (1 + 1e-12)


def test_module_level_solutions_equal_sympys_simplified_ones() -> None:
    """symbolic solves with simplify=False (no sympy.physics import, ~0.4 s per kernel); the answers are unchanged."""
    import sympy as sp

    from inferlab import symbolic as S
    from inferlab.speculative import symbolic as Q

    assert S.B_KV == sp.solve(sp.Eq(S.b_s * S.L_ctx * S.k_tok, S.D_w), S.b_s)[0]
    assert S.BATCH_CROSSOVER == sp.solve(sp.Eq(S.T_COMPUTE, S.T_MEMORY), S.b_s)[0]
    assert S.CONTEXT_CROSSOVER == sp.solve(sp.Eq(S.DECODE_FLOPS / S.P_peak, S.L_ctx * S.k_tok / S.beta), S.L_ctx)[0]
    assert Q.BREAK_EVEN_DRAFT == sp.solve(sp.Eq(Q.ROUND_TIME_PER_TOKEN, Q.T_p), Q.t_d)[0]
    assert Q.MARGINAL_CONDITION.rhs == sp.solve(sp.Eq((Q.T + Q.dT) / (Q.N + Q.dN), Q.T / Q.N), Q.dT)[0]


def test_solve_linear_is_sympys_solution_and_refuses_other_equations() -> None:
    import sympy as sp

    from inferlab.symbolic import solve_linear

    x, a, b = sp.symbols("x a b", positive=True)
    assert sp.cancel(solve_linear(sp.Eq(a * x + b, 3 * b), x) - sp.solve(sp.Eq(a * x + b, 3 * b), x)[0]) == 0
    assert solve_linear(a * x - b, x) == b / a  # an expression is taken as equal to zero
    with pytest.raises(ValueError, match="exactly one solution"):
        solve_linear(sp.Eq(x**2, a), sp.Symbol("y"))  # no solution for y
    with pytest.raises(ValueError, match="exactly one solution"):
        solve_linear(sp.Eq(sp.Symbol("z") ** 2, 4), sp.Symbol("z"))  # two roots
