"""Ground layer: units, accelerators and model dimensions reproduce the chapter's numbers."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab import units
from inferlab.hardware import ACCELERATORS, Accelerator
from inferlab.models import MODELS, ModelSpec, causal_pairs

QWEN = MODELS["qwen3-8b"]
RTX = ACCELERATORS["rtx-pro-6000"]


def test_binary_and_decimal_prefixes_are_distinct() -> None:
    assert units.GiB == 1024**3 and units.GB == 10**9
    assert units.to(2 * units.GiB, "MiB") == 2048
    assert units.to(units.GiB, "GB") == pytest.approx(1.073741824)
    assert units.fmt_binary(1152 * units.MiB, "MiB", 0) == "1,152 MiB"
    assert units.fmt_bytes(1152 * units.MiB) == "1.12 GiB (1.21 GB)"
    assert units.fmt_time(0.0265) == "26.50 ms"


def test_units_reject_unknown_names() -> None:
    with pytest.raises(ValueError, match="unit"):
        units.to(1.0, "mib")


@given(st.floats(min_value=0, max_value=1e15, allow_nan=False))
def test_unit_round_trip(x: float) -> None:
    for unit in ("KiB", "MiB", "GiB", "KB", "MB", "GB", "ms", "us"):
        scale = {"KiB": units.KiB, "MiB": units.MiB, "GiB": units.GiB, "KB": units.KB, "MB": units.MB,
                 "GB": units.GB, "ms": units.ms, "us": units.us}[unit]
        assert units.to(x, unit) * scale == pytest.approx(x)


def test_running_example_card() -> None:
    assert RTX.hbm_bandwidth == 1792e9
    assert RTX.peak_bf16_flops == 503.8e12
    assert RTX.power_w == 600
    assert RTX.host_link_bandwidth == 64e9
    assert set(ACCELERATORS) == {"rtx-pro-6000", "h100-sxm", "h200", "a100-80gb", "gh200", "m2-max"}
    assert RTX.memory_time(8192 * 147_456) == pytest.approx(8192 * 147_456 / 1792e9)


def test_accelerator_validates() -> None:
    with pytest.raises(ValueError, match="hbm_bandwidth"):
        Accelerator("x", 1, 0, 1, 1, 1, "link", "src")
    with pytest.raises(ValueError, match="efficiency"):
        RTX.compute_time(1e12, efficiency=0)


def test_qwen3_8b_matches_the_chapter() -> None:
    assert QWEN.n_params == 8_190_735_360
    assert QWEN.weight_bytes() == 16_381_470_720
    assert QWEN.matrix_weight_bytes() == 15_136_811_008
    assert QWEN.linear_params == 6_945_767_424
    assert QWEN.kv_bytes_per_token() == 147_456 == 144 * units.KiB
    assert round(QWEN.weight_bytes() / units.GiB, 1) == 15.3
    assert round(QWEN.matrix_weight_bytes() / units.GiB, 1) == 14.1
    assert QWEN.ffn_layer_bytes() == 288 * units.MiB


def test_flop_formula_matches_the_chapter() -> None:
    assert round(QWEN.flops(6144) / 1e12, 1) == 96.5
    assert round(16 * QWEN.flops(8192) / 1e12, 1) == 2137.5


def test_other_models_from_public_configs() -> None:
    assert round(MODELS["llama-3.1-8b"].n_params / 1e9, 2) == 8.03
    moe = MODELS["qwen3-235b-a22b"]
    assert round(moe.n_params / 1e9) == 235
    assert round(moe.active_linear_params / 1e9) == 21  # ~22B active with embeddings and lm_head
    assert round(8192 * moe.kv_bytes_per_token() / units.GiB, 2) == 1.47
    assert round(32768 * moe.kv_bytes_per_token() / units.GiB, 2) == 5.88


def test_causal_pairs() -> None:
    assert causal_pairs(4) == 10
    assert causal_pairs(4, 8) == 42
    assert causal_pairs(512) == 131_328
    assert causal_pairs(512, 7680) == 4_063_488


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_pairs_and_flops_grow_with_history(c: int, h: int) -> None:
    assert causal_pairs(c, h + 1) >= causal_pairs(c, h)
    assert QWEN.flops(c, h + 1) >= QWEN.flops(c, h)
    # splitting a chunk into two never changes the total pair count
    a = c // 2
    assert causal_pairs(a, h) + causal_pairs(c - a, h + a) == causal_pairs(c, h)


def test_model_validation() -> None:
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelSpec("bad", 2, 6, 4, 64, 256, 512, 1000)
    with pytest.raises(ValueError, match="new_tokens"):
        QWEN.flops(-1)
    with pytest.raises(ValueError, match="logits"):
        QWEN.flops(4, logits=5)
    with pytest.raises(ValueError, match="dtype_bytes"):
        QWEN.kv_bytes_per_token(0)
    assert math.isfinite(QWEN.flops(0))


def test_symbols_print_as_the_notation_page_writes_them() -> None:
    import sympy as sp

    from inferlab import symbolic as S

    assert sp.latex(S.KV_PER_TOKEN) == r"2 H_{\mathrm{kv}} d_{h} n_{\mathrm{layer}} s_{\mathrm{kv}}"
    assert S.n_layer is S.L
    assert r"\mathrm{ITL}" in sp.latex(S.REQUEST_TIME) and r"T_{\mathrm{queue}}" in sp.latex(S.TTFT)
    assert S.beta_s == S.beta  # one beta, whichever module built it
    step = {S.T_step: 0.02626, S.D_step: 15.44e9, S.beta: 1792e9}
    assert round(float(S.STEP_OVERHEAD.subs(step)) * 1e3, 1) == 17.6
    assert round(float(S.MBU.subs(step)), 2) == 0.33
    assert abs(float(S.TPOT.subs({S.t_1: 0.196, S.t_G: 6.9535, S.G: 256})) - 0.0265) < 1e-12


def test_argument_checks_take_numbers_of_any_kind_and_refuse_bools_and_non_finite_values():
    import numpy as np

    from inferlab._validate import non_negative, non_negative_int, positive, positive_int

    assert positive("x", 3) == 3.0 and positive("x", np.float32(0.5)) == 0.5 and non_negative("x", 0) == 0.0
    assert positive_int("n", np.int64(4)) == 4 and type(positive_int("n", np.int64(4))) is int
    assert non_negative_int("n", 0) == 0
    for check, bad in ((positive, 0), (positive, float("nan")), (positive, float("inf")), (positive, True),
                       (positive, "1"), (non_negative, -1e-9), (non_negative, False), (positive_int, 0),
                       (positive_int, 2.0), (positive_int, True), (non_negative_int, -1), (non_negative_int, np.float64(1)),
                       (non_negative_int, False)):
        with pytest.raises(ValueError, match="^x must|^n must"):
            check("x" if check in (positive, non_negative) else "n", bad)


def test_member_names_what_an_unknown_or_unhashable_key_must_be() -> None:
    from inferlab._validate import member

    assert member("step_id", 3, {3: "a"}, "a step in flight") == 3
    for bad in (4, [3], {"x": 1}):  # unknown, and unhashable values looked up in a mapping
        with pytest.raises(ValueError, match="step_id must name a step in flight, got"):
            member("step_id", bad, {3: "a"}, "a step in flight")


def test_written_sums_keep_the_order_they_are_given_and_the_value() -> None:
    import sympy as sp

    from inferlab.symbolic import written_product, written_sum

    a, b, c = sp.symbols("a b c")
    shown = written_sum(c, written_product(b, a))
    assert sp.latex(shown, order="none") == "c + b a" and sp.simplify(shown - (a * b + c)) == 0
