"""Section 8.4.2's page: experiment 8-1's marginal read rate and the read floor under the H100 fit.

The values pinned here are the ones the page computed in its cells before they moved into the library
(``compression.marginal_decode_read``, ``compression.read_floor_share``), to the last bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferlab import compression
from inferlab.compression import kv as kc
from inferlab.compression import kv_break_even as be
from inferlab.datasets import published
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.units import GB, ms

PAGE = Path(__file__).resolve().parents[1] / "chapters" / "8-4-2-kv-compression.ipynb"
K_LLAMA = MODELS["llama-3.1-8b"].kv_bytes_per_token()
H100_BW = ACCELERATORS["h100-sxm"].hbm_bandwidth


# ---- the marginal rate between experiment 8-1's rows --------------------------------------------

def test_marginal_read_batch_16_to_64_is_the_pages_6_6_tb_s() -> None:
    m = compression.marginal_decode_read(16, 64)
    assert (m.from_batch, m.to_batch) == (16, 64)
    assert m.extra_bytes == 14490000000.000002 and m.extra_s == 0.002190000000000001  # the page's old cell
    assert m.bandwidth == 6616438356164.382
    assert (round(m.extra_bytes / GB, 2), round(m.extra_s / ms, 2), round(m.bandwidth / 1e12, 1)) == (14.49, 2.19, 6.6)
    assert compression.marginal_decode_read() == m  # the defaults are the page's rows


def test_marginal_read_is_faster_than_the_card_and_than_the_whole_step_average() -> None:
    m = compression.marginal_decode_read(16, 64)
    assert m.bandwidth > ACCELERATORS["rtx-pro-6000"].hbm_bandwidth  # 6.6 TB/s > 1792 GB/s
    assert round(m.bandwidth / kc.decode_bandwidth_measured(64), 1) == 5.7


def test_marginal_read_is_the_slope_between_any_two_rows() -> None:
    sweep = published("batch_sweep_8_1").set_index("batch")
    for lo, hi in [(1, 4), (4, 16), (1, 64)]:
        m = compression.marginal_decode_read(lo, hi)
        dbytes = (sweep.loc[hi, "step_read_gb"] - sweep.loc[lo, "step_read_gb"]) * GB
        ds = sweep.loc[hi, "decode_step_s"] - sweep.loc[lo, "decode_step_s"]
        assert m.bandwidth == pytest.approx(dbytes / ds, rel=1e-12) and m.extra_s > 0
    # over 1 -> 64 the rate is a bytes-weighted blend of the segments: between their extremes
    rates = [compression.marginal_decode_read(a, b).bandwidth for a, b in [(1, 4), (4, 16), (16, 64)]]
    assert min(rates) < compression.marginal_decode_read(1, 64).bandwidth < max(rates)


@pytest.mark.parametrize("args, name", [((3, 64), "from_batch"), ((16, 128), "to_batch"), ((0, 64), "from_batch"),
                                        ((16.0, 64), "from_batch"), ((True, 64), "from_batch"),
                                        ((16, "64"), "to_batch"), ((64, 16), "to_batch"), ((16, 16), "to_batch")])
def test_marginal_read_refuses_batches_the_sweep_does_not_hold(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        compression.marginal_decode_read(*args)


# ---- the read floor under the H100 fit ---------------------------------------------------------

def test_read_floor_share_is_the_pages_89_5_percent() -> None:
    b = kc.ITL_BF16_H100
    share = compression.read_floor_share(K_LLAMA, b, H100_BW)
    assert share == 0.8953311246968817  # the page's old cell: k / beta / tau_1
    assert (round(K_LLAMA / H100_BW * 1e9, 1), round(share, 3)) == (39.1, 0.895)
    assert share == pytest.approx(be.implied_bandwidth(K_LLAMA, b) / H100_BW, rel=1e-15)


def test_read_floor_share_scales_as_the_read_time_over_the_slope() -> None:
    b, f = kc.ITL_BF16_H100, kc.ITL_FP8_H100
    share = compression.read_floor_share(K_LLAMA, b, H100_BW)
    assert compression.read_floor_share(K_LLAMA, b, 2 * H100_BW) == pytest.approx(share / 2)
    assert compression.read_floor_share(K_LLAMA / 2, f, H100_BW) == pytest.approx(
        share / 2 * b.per_token_s / f.per_token_s)
    # FP8's fitted slope lies between the bytes-only slope (s = 1) and the slope at the floor (s = share)
    assert b.per_token_s / 2 < f.per_token_s < b.per_token_s * (1 - share / 2)


@pytest.mark.parametrize("kwargs, name", [
    (dict(kv_bytes_per_token=0.0), "kv_bytes_per_token"), (dict(bandwidth=-1.0), "bandwidth"),
    (dict(bandwidth=float("nan")), "bandwidth"), (dict(line=0.5), "line"),
    (dict(line=kc.LinearITL("flat", 1e-3, 0.0)), "line.per_token_s"), (dict(bandwidth=5e-324), "bandwidth"),
])
def test_read_floor_share_refuses_bad_input(kwargs: dict, name: str) -> None:
    args = dict(kv_bytes_per_token=K_LLAMA, line=kc.ITL_BF16_H100, bandwidth=H100_BW) | kwargs
    with pytest.raises(ValueError, match=name):
        compression.read_floor_share(**args)


# ---- the page itself -----------------------------------------------------------------------------

def _page_text() -> tuple[str, str]:
    cells = json.loads(PAGE.read_text())["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"
                     and not "".join(c["source"]).startswith("# Check"))  # the check cell recomputes on purpose
    return markdown, code


def test_page_calls_the_library_for_both_numbers() -> None:
    _, code = _page_text()
    assert "compression.marginal_decode_read(16, 64)" in code and "compression.read_floor_share(" in code
    assert "step_read_gb - " not in code and "k_llama / h100_bw" not in code  # no copies left in the cells


def test_page_names_the_crossover_L_x_not_L_star() -> None:
    markdown, code = _page_text()
    assert "L_{\\times}" in markdown
    assert "L^*" not in markdown + code and "L^{*}" not in markdown + code  # L* is 8.2.1's compute = KV read


def test_page_marks_the_cause_of_fp8s_fixed_offset_as_a_guess() -> None:
    markdown, _ = _page_text()
    paragraph = next(p for p in markdown.split("\n\n") if "fixed_diff" in p and "comes from" in p)
    assert "Nor does the fit say where" in paragraph and "neither tested" in paragraph
