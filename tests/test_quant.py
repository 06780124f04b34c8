"""GGML block formats byte for byte (against the gguf package), FP8/BF16 rounding, and format sizes (8.4.1)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from inferlab.compression import FORMATS, block_format, dequantize, formats, quantize

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402

GGUF_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q2_K": T.Q2_K}


def weights(shape, seed=0, scale=0.02) -> np.ndarray:
    """Weight-like values: normal with a few heavy-tailed outliers."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * scale
    x += rng.standard_t(3, shape) * scale * 0.1
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_bytes_identical_to_gguf_quantize(fmt: str) -> None:
    x = weights((64, 1024))
    x[0, :32] = 0.0  # an all-zero block
    x[1, :32] = 0.5
    x[1, 7] = -0.5  # a tie in magnitude: ggml keeps the first
    x[2, :32] = np.arange(32) - 15.5  # exact halves after scaling
    ours = quantize(x, fmt)
    assert ours.dtype == np.uint8 and ours.shape == (64, 1024 // 32 * block_format(fmt).block_bytes)
    assert np.array_equal(ours, gguf.quantize(x, GGUF_TYPES[fmt]))


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q2_K"])
def test_values_identical_to_gguf_dequantize(fmt: str) -> None:
    x = weights((16, 2048), seed=1)
    data = quantize(x, fmt)
    ours = dequantize(data, fmt)
    assert ours.dtype == np.float32 and ours.shape == x.shape
    assert np.array_equal(ours, gguf.dequantize(data, GGUF_TYPES[fmt]))


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q2_K"])
def test_dequantize_random_bytes_like_gguf(fmt: str) -> None:
    """Any bytes (not just our encoder's) decode like gguf, except blocks whose fp16 scales are NaN/inf."""
    f = block_format(fmt)
    data = np.random.default_rng(2).integers(0, 256, (8, f.block_bytes * 8), dtype=np.uint8)
    # keep the fp16 scales finite: clear their exponent's top bit
    blocks = data.reshape(-1, f.block_bytes)
    for off in ((0,) if fmt != "q2_K" else (80, 82)):
        blocks[:, off + 1] &= 0x3F
    assert np.array_equal(dequantize(data, fmt), gguf.dequantize(data, GGUF_TYPES[fmt]))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, (2, 64), elements=st.floats(-1e4, 1e4, width=32)))
def test_q8_q4_match_gguf_on_any_finite_input(x: np.ndarray) -> None:
    for fmt in ("q8_0", "q4_0"):
        with np.errstate(all="ignore"):  # gguf's reference divides by subnormal scales as ggml does; ours does not warn
            ref = gguf.quantize(x, GGUF_TYPES[fmt])
        assert np.array_equal(quantize(x, fmt), ref)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_subnormal_block_matches_gguf_and_decodes_to_zero(fmt: str) -> None:
    x = np.zeros((1, 64), np.float32)
    x[0, :32] = np.float32(1e-40) * np.arange(32)
    x[0, 32:] = 1.0
    with np.errstate(all="ignore"):
        ref = gguf.quantize(x, GGUF_TYPES[fmt])
    ours = quantize(x, fmt)
    y = dequantize(ours, fmt)
    assert np.isfinite(y).all() and (y[0, :32] == 0).all()
    assert np.array_equal(ours, ref)


def test_q2_K_layout_by_hand() -> None:
    """One block decoded from bytes written by hand: scales | 2-bit codes | d | dmin."""
    blk = np.zeros(84, np.uint8)
    blk[:16] = np.arange(16) | (1 << 4)  # scale j = j, min = 1 for every sub-block
    blk[16:80] = 0b11_10_01_00  # in each byte: codes 0, 1, 2, 3 for k = 0..3
    blk[80:82] = np.array([0.5], np.float16).view(np.uint8)
    blk[82:84] = np.array([0.25], np.float16).view(np.uint8)
    y = dequantize(blk, "q2_K")
    idx = np.arange(256)
    sub = idx // 16
    k = (idx % 128) // 32
    assert np.array_equal(y, (0.5 * sub * k - 0.25).astype(np.float32))


def test_q2_K_fields_decode_the_block() -> None:
    x = weights((1, 256), seed=6)
    blk = quantize(x, "q2_K")
    f = formats.q2_K_fields(blk)
    codes = ((blk[0, 16:80].reshape(2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)[None, :, None]) & 3).reshape(16, 16)
    y = (f["step d*sc_j"].to_numpy(np.float32)[:, None] * codes - f["offset dmin*m_j"].to_numpy(np.float32)[:, None])
    assert np.array_equal(y.astype(np.float32).ravel(), dequantize(blk, "q2_K").ravel())
    t = formats.format_table()
    assert t.loc["q2_K", "bits per value"] == 2.625 and round(t.loc["q2_K", "metadata share"], 2) == 0.24
    with pytest.raises(ValueError, match="multiple of 84"):
        formats.q2_K_fields(blk[:, :40])


def test_q2_K_round_trip_error_and_bits() -> None:
    x = weights((8, 4096), seed=3)
    errs = {f: float(np.sqrt(np.mean((formats.round_trip(x, f) - x) ** 2)) / x.std()) for f in formats.GGML_FORMATS}
    assert errs["q8_0"] < 0.01 < errs["q4_0"] < 0.2 < errs["q2_K"] < 0.6
    assert errs["q8_0"] < errs["q4_0"] < errs["q2_K"]


def test_round_away_is_c_roundf() -> None:
    rng = np.random.default_rng(4)
    v = np.concatenate([rng.uniform(-127.5, 127.5, 100_000).astype(np.float32),
                        np.arange(-127.5, 128, 0.5, dtype=np.float32),
                        np.nextafter(np.arange(-127.5, 128, 0.5, dtype=np.float32), np.float32(0))])
    v = v[np.abs(v) < 127.5]  # ggml's codes stay within int8: |x / d| <= 127
    ref = np.trunc(v.astype(np.float64) + np.copysign(0.5, v.astype(np.float64)))
    assert np.array_equal(formats._round_away_int8(v.copy()), ref.astype(np.int8))


def test_format_sizes() -> None:
    q8, q4, q2 = (FORMATS[f] for f in ("q8_0", "q4_0", "q2_K"))
    assert (q8.bits_per_value, q4.bits_per_value, q2.bits_per_value) == (8.5, 4.5, 2.625)
    assert (q2.code_bytes, q2.meta_bytes, q2.block_bytes) == (64, 20, 84)
    assert round(q2.metadata_share * 100) == 24
    assert q8.ratio_to(2) == 34 / 64 and q4.ratio_to(2) == 18 / 64
    assert q8.stored_bytes(33) == 68 and q8.stored_bytes(0) == 0


def test_fp8_and_bf16_round_trip() -> None:
    import ml_dtypes

    x = weights((4, 256), seed=5)
    codes, scale = formats.fp8_e4m3_encode(x)
    assert codes.dtype == np.uint8 and scale == pytest.approx(np.abs(x).max() / 448)
    y = formats.fp8_e4m3_decode(codes, scale)
    e4m3 = (x / np.float32(scale)).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(y, e4m3.astype(np.float32) * np.float32(scale))
    rel = np.abs(y - x) / np.maximum(np.abs(x), 1e-3 * np.abs(x).max())
    assert np.median(rel) < 2 ** -4  # 3 mantissa bits: half an ulp is 2^-4 relative
    assert np.abs(formats.fp8_e4m3_round_trip(np.array([1000.0]), scale=1.0)).max() == 448.0  # saturates
    assert np.array_equal(formats.to_bf16(np.array([1.0 + 2**-9], np.float32)), np.array([1.0], np.float32))


@pytest.mark.parametrize("bad, match", [
    (lambda: quantize(np.zeros(33), "q8_0"), "multiple of 32"),
    (lambda: quantize(np.zeros(32), "q3_K"), "fmt must be one of"),
    (lambda: quantize(np.full(32, np.nan), "q4_0"), "finite"),
    (lambda: dequantize(np.zeros(34, np.float32), "q8_0"), "uint8"),
    (lambda: dequantize(np.zeros(35, np.uint8), "q8_0"), "multiple of 34"),
    (lambda: formats.fp8_e4m3_round_trip(np.ones(3), scale=-1.0), "scale"),
    (lambda: FORMATS["q8_0"].stored_bytes(-1), "n_values"),
])
def test_bad_input(bad, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bad()


def test_q2_K_encoder_matches_ggml_reference_digest() -> None:
    """Bytes equal ggml's C ``quantize_row_q2_K_ref`` (gcc -O2, no FMA contraction) on a seeded input.

    gguf has no q2_K encoder, so the reference is the C function run once outside this repository;
    its output's SHA-256 is pinned here. Includes a zero block, a negative constant and an all-positive block.
    """
    import hashlib

    rng = np.random.default_rng(2024)
    x = (rng.standard_normal((64, 256)) * 0.02 + rng.standard_t(3, (64, 256)) * 0.002).astype(np.float32)
    x[0] = 0
    x[1] = -0.01
    x[2] = np.abs(x[2])
    digest = hashlib.sha256(quantize(x, "q2_K").tobytes()).hexdigest()
    assert digest == "0bb4a2b04bffc1749631fa3121fa7583921c29b2699dd3f0c57da004b5922b8b"
