"""KV sizes in compressed formats, read saving vs conversion, ITL crossover, weight-file fit (8.4.1-8.4.2)."""

import pytest
import sympy as sp

from inferlab.compression import kv as kc
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.units import GB, GiB, MiB

QWEN = MODELS["qwen3-8b"]


def test_kv_bytes_per_format() -> None:
    assert kc.kv_bytes_in_format(QWEN, 8192, 1, "bf16") == 1152 * MiB
    assert kc.kv_bytes_in_format(QWEN, 8192, 1, "q8_0") == 612 * MiB
    assert kc.kv_bytes_in_format(QWEN, 8192, 1, "q4_0") == 324 * MiB
    long_q8 = kc.kv_bytes_in_format(QWEN, 8192, 256, "q8_0")
    assert long_q8 == 631.125 * MiB
    assert round(16 * long_q8 / GiB, 2) == 9.86 and 16 * long_q8 < 12 * GiB
    assert (1152 - 612, 1152 - 324) == (540, 828)
    fit = {f: kc.requests_that_fit(12 * GiB, QWEN, 8192, 256, f) for f in ("bf16", "q8_0", "q4_0")}
    assert fit == {"bf16": 10, "q8_0": 19, "q4_0": 36}


def test_read_saving() -> None:
    beta = kc.decode_bandwidth_measured()
    assert round(beta / 1e12, 2) == 1.16 and round(beta / (1792 * GB), 2) == 0.65
    saved = kc.break_even_conversion(540 * MiB, beta)
    assert round(saved * 1e3, 3) == 0.487
    assert round(kc.read_saving(540 * MiB, beta, 0.2e-3) * 1e3, 3) == 0.287
    assert round(kc.read_saving(540 * MiB, beta, 0.8e-3) * 1e3, 3) == -0.313
    eq, t_even = kc.read_saving_symbolic()
    dD, beta_s = sorted(t_even.free_symbols, key=str)
    assert float(t_even.subs({dD: 540 * MiB, beta_s: beta})) == pytest.approx(saved)
    with pytest.raises(ValueError, match="bandwidth"):
        kc.read_saving(1.0, 0.0)
    with pytest.raises(ValueError, match="batch must be one of"):
        kc.decode_bandwidth_measured(3)


def test_itl_crossover() -> None:
    b, f = kc.ITL_BF16_H100, kc.ITL_FP8_H100
    assert round(kc.itl_crossover(b, f)) == 7000
    assert (round(b.at(2048) * 1e3, 2), round(f.at(2048) * 1e3, 2)) == (6.53, 6.63)
    assert (round(b.at(16384) * 1e3, 2), round(f.at(16384) * 1e3, 2)) == (7.16, 6.97)
    eq, L_star = kc.itl_crossover_symbolic()
    syms = {str(s): s for s in L_star.free_symbols}
    val = L_star.subs({syms[r"\tau_{0\mathrm{B}}"]: 6.44, syms[r"\tau_{1\mathrm{B}}"]: 4.37e-5,
                       syms[r"\tau_{0\mathrm{F}}"]: 6.58, syms[r"\tau_{1\mathrm{F}}"]: 2.37e-5})
    assert round(float(val)) == 7000
    with pytest.raises(ValueError, match="parallel"):
        kc.itl_crossover(b, b)


def test_qwen3_235b_files_on_m2_max() -> None:
    files = kc.gguf_files()
    q2 = files.loc["Q2_K"]
    assert q2.payload_bytes + q2.metadata_bytes + q2.header_padding_bytes == q2.file_bytes
    assert (round(q2.file_bytes / GiB, 2), round(q2.payload_bytes / GiB, 2), round(q2.metadata_bytes / GiB, 2)) \
        == (79.81, 64.43, 15.37)
    m2 = ACCELERATORS["m2-max"]
    big = MODELS["qwen3-235b-a22b"]
    fit = kc.weight_file_fit(q2.file_bytes, m2.memory_bytes, 8 * GiB, big, 8192)
    assert round(fit.available_bytes / GiB, 2) == 81.41
    assert round(fit.left_bytes / GiB, 2) == 1.60
    assert round(fit.kv_bytes_per_request / GiB, 2) == 1.47 and fit.requests == 1
    assert round(fit.left_after_requests_bytes / GiB, 2) == 0.13
    fit32 = kc.weight_file_fit(q2.file_bytes, m2.memory_bytes, 8 * GiB, big, 32768)
    assert round(fit32.kv_bytes_per_request / GiB, 2) == 5.88 and fit32.requests == 0
    ud_bytes = files.loc["UD-Q2_K_XL", "printed_gib"] * GiB
    ud = kc.weight_file_fit(ud_bytes, m2.memory_bytes, 8 * GiB, big, 8192)
    assert round(-ud.left_bytes / GiB, 2) == 0.56 and ud.requests == 0
    assert round(files.loc["UD-Q2_K_XL", "printed_gib"] - q2.file_bytes / GiB, 2) == 2.16
    with pytest.raises(ValueError, match="reserved_bytes"):
        kc.weight_file_fit(1.0, 1.0, 2.0, big, 1)


def test_compact_states() -> None:
    cs = kc.compact_states()
    v41 = cs.loc["DeepSeek V4.1"]
    assert round(v41.global_mib + v41.swa_mib, 3) == v41.total_mib == 9.531
    assert round(cs.loc["DeepSeek V4", "total_mib"] / v41.total_mib, 2) == 3.20
    assert cs.loc["GQA (Qwen3-8B BF16 KV)", "total_mib"] == kc.kv_bytes_in_format(QWEN, 8192, 1, "bf16") / MiB
    assert sp.Rational(549, 1152) < sp.Rational(1, 2)
