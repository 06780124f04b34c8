"""GGML block formats byte for byte (against the gguf package), FP8/BF16 rounding, and format sizes (8.4.1)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from inferlab.compression import FORMATS, block_format, dequantize, formats, quantize

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402

GGUF_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q2_K": T.Q2_K}
F16_MAX = float(np.finfo(np.float16).max)  # 65504: GGML stores block scales in float16


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


def test_block_format_and_format_table_check_their_arguments() -> None:
    """Non-str names, float/bool sizes and NaN were accepted; 2**63 blamed block_bytes; tiny divisors gave inf."""
    good = dict(name="q8_0", block_values=32, block_bytes=34, code_bits=8, description="int8 codes")
    for field, bad in (("name", 1), ("description", None), ("block_values", 2.0), ("code_bits", True),
                       ("block_bytes", float("nan")), ("block_bytes", "1"), ("code_bits", 2**63)):
        with pytest.raises(ValueError, match=rf"^{field} must"):
            formats.BlockFormat(**{**good, field: bad})
    with pytest.raises(ValueError, match="block_values x code_bits / 8 = 64 bytes"):
        formats.BlockFormat(**{**good, "block_values": 64})
    with pytest.raises(ValueError, match="bytes_per_value"):
        FORMATS["q8_0"].ratio_to(5e-324)  # 34 / (32 x 5e-324) overflows
    for bad in ([], "ab", 1.5, None, [["q8_0"]], ["q8_0", "q9"]):
        with pytest.raises(ValueError, match="^names must"):
            formats.format_table(bad)
    assert formats.format_table(["q4_0"]).index.tolist() == ["q4_0"]


def test_stored_nan_and_inf_decode_as_the_formats_define_them() -> None:
    """Bytes quantize never writes (an fp16 scale 0xFFFF, FP8 code 0x7F) decode to NaN/inf, as documented."""
    assert np.isnan(dequantize(np.full(34, 0xFF, np.uint8), "q8_0")).all()  # scale 0xFFFF: NaN
    inf_scale = np.zeros(18, np.uint8)
    inf_scale[:2] = np.array([np.inf], np.float16).view(np.uint8)
    inf_scale[2:] = 0x11  # codes 1 - 8 = -7: -inf
    assert np.isneginf(dequantize(inf_scale, "q4_0")).all()
    assert np.isnan(formats.fp8_e4m3_decode(np.array([0x7F, 0xFF], np.uint8))).all()
    assert formats.fp8_e4m3_decode(np.array([0x7E], np.uint8))[0] == 448.0
    assert formats.q2_K_fields(np.full(84, 0xFF, np.uint8))["step d*sc_j"].isna().all()
    for doc in (dequantize.__doc__, formats.fp8_e4m3_decode.__doc__, formats.q2_K_fields.__doc__):
        assert "NaN" in doc
    with pytest.raises(ValueError, match="^block must hold one q2_K block"):
        formats.q2_K_fields(np.zeros(0, np.uint8))


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


@pytest.mark.parametrize("fmt, big, ok", [
    ("q8_0", 127 * F16_MAX, 127 * F16_MAX),  # scale max|x| / 127
    ("q4_0", 8 * F16_MAX, 8 * F16_MAX),  # scale max|x| / 8
    ("q2_K", 3e6, 2.9e6),  # scale about (max - min(x, 0)) / 3 / 15: the limit 3 x 15 x 65504 = 2.95e6 is approximate
    ("q2_K", -1e6, -9.5e5),  # min about -min(x, 0) / 15: the limit 15 x 65504 = 9.8e5
])
def test_block_scale_beyond_float16_is_refused(fmt: str, big: float, ok: float) -> None:
    """A finite block whose scale overflows float16 raised nothing and decoded to inf/NaN (with a numpy warning)."""
    bv = block_format(fmt).block_values
    x = np.zeros((2, 2 * bv), np.float32)
    x[1, bv:] = 1.0
    x[1, bv] = np.nextafter(np.float32(big), np.float32(np.copysign(np.inf, big)))  # just past the limit: block 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"^x: block 3 .*float16.*{fmt}"):
            quantize(x, fmt)
        x[1, bv] = ok
        y = formats.round_trip(x, fmt)
    assert np.isfinite(y).all() and abs(y[1, bv] - ok) <= 0.05 * abs(ok)


def test_q4_0_overflow_example_from_the_report() -> None:
    x = np.zeros(32, np.float32)
    x[0], x[1] = 6e5, 1
    with pytest.raises(ValueError, match=r"block 0 .*8 x 65504 = 524032"):
        formats.round_trip(x, "q4_0")


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float32, (1, 256), elements=st.floats(width=32, allow_nan=False, allow_infinity=False)))
def test_any_finite_input_is_refused_or_decodes_finite(x: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fmt in formats.GGML_FORMATS:
            try:
                y = formats.round_trip(x, fmt)
            except ValueError as e:
                assert "float16" in str(e)
            else:
                assert np.isfinite(y).all()


@pytest.mark.parametrize("x", [np.array([1e-45, 0], np.float32), np.array([3e-43, -1e-44, 0], np.float32),
                               np.float32(1e-40) * np.arange(-8, 8, dtype=np.float32)])
def test_fp8_tiny_tensor_round_trips_finite(x: np.ndarray) -> None:
    """max|x| / 448 underflowed float32 to 0: zeros decoded as 0/0 = NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        codes, scale = formats.fp8_e4m3_encode(x)
        y = formats.fp8_e4m3_decode(codes, scale)
    assert np.isfinite(y).all() and (y[x == 0] == 0).all()
    i = np.abs(x).argmax()
    assert abs(y[i] - x[i]) <= 2 ** -4 * abs(x[i])  # the largest value keeps e4m3's precision


def test_fp8_explicit_scale_must_fit_float32() -> None:
    with pytest.raises(ValueError, match="scale"):
        formats.fp8_e4m3_round_trip(np.array([1.0, 0.0]), scale=1e-50)  # 0 in float32: 0/0 = NaN
    with pytest.raises(ValueError, match="scale"):
        formats.fp8_e4m3_decode(np.array([0x7E, 0], np.uint8), scale=1e39)  # inf in float32: 0 x inf = NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = formats.fp8_e4m3_round_trip(np.array([1.0, 0.0]), scale=1e-40)  # a subnormal scale saturates
    assert np.array_equal(y, np.float32(448) * np.float32(1e-40) * np.array([1, 0], np.float32))


CALLS = {
    "quantize": (lambda v: quantize(v, "q8_0"), "x"), "round_trip q4_0": (lambda v: formats.round_trip(v, "q4_0"), "x"),
    "round_trip bf16": (lambda v: formats.round_trip(v, "bf16"), "x"),
    "round_trip fp8": (lambda v: formats.round_trip(v, "fp8_e4m3"), "x"), "to_bf16": (formats.to_bf16, "x"),
    "fp8_e4m3_scale": (formats.fp8_e4m3_scale, "x"), "fp8_e4m3_encode": (formats.fp8_e4m3_encode, "x"),
    "fp8_e4m3_round_trip": (formats.fp8_e4m3_round_trip, "x"), "dequantize": (lambda v: dequantize(v, "q8_0"), "data"),
    "fp8_e4m3_decode": (formats.fp8_e4m3_decode, "codes"), "q2_K_fields": (formats.q2_K_fields, "block"),
}


@pytest.mark.parametrize("bad", [np.full(32, 1 + 2j), np.ones(32, bool), np.ones(32, object)],
                         ids=["complex", "bool", "object"])
@pytest.mark.parametrize("call, name", CALLS.values(), ids=CALLS.keys())
def test_complex_bool_object_refused(call, name: str, bad: np.ndarray) -> None:
    """Complex input was accepted with a ComplexWarning (its imaginary part dropped), bool and object silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"^{name} must"):
            call(bad)


def test_q2_K_subnormal_and_zero_blocks_match_ggml_reference() -> None:
    """Bytes of ggml's C ``quantize_row_q2_K_ref`` (gcc -O2 -ffp-contract=off, run outside this repository).

    On float32-subnormal sub-blocks 3 / (max - min) overflows to inf; ggml's nearest_int turns inf and NaN into
    codes 0 (numpy's rint and clip made them 3, bytes 0xFF). d = 0 there, so the decoded values were equal.
    """
    import hashlib

    rng = np.random.default_rng(7)
    x = np.zeros((6, 256), np.float32)
    x[0] = rng.uniform(-1, 1, 256) * 1e-39  # subnormal, both signs
    x[1] = rng.uniform(0, 1, 256) * 1e-39  # subnormal, positive
    x[2] = -rng.uniform(0, 1, 256) * 1e-39  # subnormal, negative
    x[3] = np.float32(1e-40) * np.arange(256)  # up to 2.55e-38: 3 / (max - min) is finite in the later sub-blocks
    x[4] = rng.standard_normal(256) * 0.02
    x[4, 32:64] = rng.uniform(-1, 1, 32) * 1e-39  # two subnormal sub-blocks in a normal block
    x[5] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = quantize(x, "q2_K")
    zero = np.zeros(84, np.uint8)
    for i in (0, 1, 2, 5):
        assert np.array_equal(q[i], zero)
    codes = b"\xc0" * 16 + b"\xf0" * 16 + b"\xff" * 32  # code 3 in sub-blocks 5-15, where 3 / max is finite
    assert q[3].tobytes() == bytes(16) + codes + bytes(4)  # scale and min codes 0, d = dmin = 0
    z = x[4].copy()
    z[32:64] = 0
    assert np.array_equal(q[4], quantize(z, "q2_K"))  # subnormal sub-blocks store like zero ones
    assert hashlib.sha256(q.tobytes()).hexdigest() == "795e3571d56abab9d004f00e18466dcdaa59ab75bbd567c8e673f244ee1493f3"


def test_q2_K_requantization_past_2_22_follows_ggml_nearest_int() -> None:
    """Where (x + dm) / d passes 2^22, ggml's nearest_int (a float32 bit trick) stops rounding and its codes are
    not numpy's rint-and-clip; bytes of the C reference, as above."""
    import hashlib

    rng = np.random.default_rng(9)
    x = (rng.standard_normal((1, 256)) * 3e-4).astype(np.float32)
    x[0, :16] = -2e5  # dmin = 2e5 / 15: sub-block 1's min code rounds to 0, so dm = 0 there
    x[0, 16:32] -= 5000  # and (x + dm) / d is about -5000 / 3.2e-4 = -1.6e7
    digest = hashlib.sha256(quantize(x, "q2_K").tobytes()).hexdigest()
    assert digest == "c8620104e189e901a98ae377a60db07d35e0dd7052ae5b08e0f6ac632b1811bd"
