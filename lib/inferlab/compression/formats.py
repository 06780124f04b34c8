"""Group quantization formats of GGML (q8_0, q4_0, q2_K) byte for byte, and FP8/BF16 rounding (section 8.4).

A format stores values in blocks: low-bit codes plus per-block metadata (scales, minimums).
``quantize`` returns the blocks as raw bytes in GGML's layout and ``dequantize`` reads them back:

- ``q8_0``: 32 values -> fp16 scale d, 32 int8 codes; x = d q (34 bytes).
- ``q4_0``: 32 values -> fp16 scale d, 16 bytes of nibbles (value j in the low nibble of byte j,
  value j + 16 in its high nibble); x = d (q - 8) (18 bytes).
- ``q2_K``: 256 values in 16 sub-blocks of 16 -> 16 bytes of 4-bit scale | 4-bit min, 64 bytes of
  2-bit codes, fp16 super-scale d and super-min dmin; x = d s_j q - dmin m_j (84 bytes).

Encoders follow ggml's reference ``quantize_row_*_ref`` in float32, so q8_0 and q4_0 bytes equal the
``gguf`` package's and q2_K the C reference's; the work is vectorized over blocks in cache-sized chunks.
Scales are stored in float16, so a block must stay within 65504 x its code range (``quantize`` refuses more).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import MAX_COUNT, finite_result, instance, items, one_of, positive, positive_int

_CHUNK_VALUES = 1 << 16  # values processed per pass: keeps the temporaries in cache
_JUST_BELOW_HALF = np.nextafter(np.float32(0.5), np.float32(0))
_BYTE_ONES = np.uint64(0x0101010101010101)
_F16_MAX = float(np.finfo(np.float16).max)  # 65504, the largest block scale GGML can store
_F32 = np.finfo(np.float32)
_F32_SUBNORMAL = float(_F32.smallest_subnormal)  # 2^-149


@dataclass(frozen=True)
class BlockFormat:
    """One block format: how many values a block holds and how its bytes divide into codes and metadata."""

    name: str
    block_values: int
    block_bytes: int
    code_bits: int
    description: str

    def __post_init__(self) -> None:
        instance("name", self.name, str)
        instance("description", self.description, str)
        for field in ("block_values", "block_bytes", "code_bits"):
            positive_int(field, getattr(self, field), MAX_COUNT)
        if self.block_values * self.code_bits % 8:
            raise ValueError("block_values x code_bits must be whole bytes")
        if self.code_bytes > self.block_bytes:
            raise ValueError(f"block_bytes must hold the codes, block_values x code_bits / 8 = {self.code_bytes} "
                             f"bytes, got {self.block_bytes}")

    @property
    def code_bytes(self) -> int:
        """Bytes of codes per block (block_values x code_bits / 8)."""
        return self.block_values * self.code_bits // 8

    @property
    def meta_bytes(self) -> int:
        """Bytes of scales, minimums and other metadata per block."""
        return self.block_bytes - self.code_bytes

    @property
    def bits_per_value(self) -> float:
        """Stored bits per value, metadata included (8.5, 4.5, 2.625)."""
        return self.block_bytes * 8 / self.block_values

    @property
    def metadata_share(self) -> float:
        """Fraction of the stored bytes that is metadata (about 24 % for q2_K)."""
        return self.meta_bytes / self.block_bytes

    def ratio_to(self, bytes_per_value: float = 2.0) -> float:
        """Stored size relative to ``bytes_per_value`` per value (34/64 for q8_0 against BF16)."""
        return finite_result(self.block_bytes / (self.block_values * positive("bytes_per_value", bytes_per_value)),
                             "bytes_per_value")

    def stored_bytes(self, n_values: int) -> int:
        """Bytes to store ``n_values`` values (whole blocks)."""
        if isinstance(n_values, bool) or not isinstance(n_values, (int, np.integer)) or n_values < 0:
            raise ValueError(f"n_values must be an integer >= 0, got {n_values!r}")
        return -(-int(n_values) // self.block_values) * self.block_bytes


FORMATS: dict[str, BlockFormat] = {
    f.name: f
    for f in [
        BlockFormat("bf16", 1, 2, 16, "bfloat16: 1 sign, 8 exponent, 7 mantissa bits"),
        BlockFormat("fp8_e4m3", 1, 1, 8, "FP8 e4m3: 1 sign, 4 exponent, 3 mantissa bits (scale kept apart)"),
        BlockFormat("q8_0", 32, 34, 8, "32 int8 codes and one fp16 scale"),
        BlockFormat("q4_0", 32, 18, 4, "32 4-bit codes and one fp16 scale"),
        BlockFormat("q2_K", 256, 84, 2, "256 2-bit codes; 16 sub-blocks with 4-bit scale and min; fp16 d, dmin"),
    ]
}
GGML_FORMATS = ("q8_0", "q4_0", "q2_K")


def format_table(names: tuple[str, ...] = ("bf16", "q8_0", "q4_0", "q2_K")) -> "pd.DataFrame":
    """Per format: values and bytes per group, code and metadata bytes, bits per value, metadata share.

    ``names``: a sequence of at least one name of FORMATS.
    """
    import pandas as pd

    names = [one_of("names", n, FORMATS) for n in items("names", names)]
    if not names:
        raise ValueError("names must hold at least one format name")
    rows = [{"format": n, "values per group": f.block_values, "bytes per group": f.block_bytes,
             "code bytes": f.code_bytes, "metadata bytes": f.meta_bytes, "bits per value": f.bits_per_value,
             "metadata share": f.metadata_share} for n, f in ((n, FORMATS[n]) for n in names)]
    return pd.DataFrame(rows).set_index("format")


def block_format(fmt: str) -> BlockFormat:
    """The ``BlockFormat`` named ``fmt`` (one of FORMATS)."""
    return FORMATS[one_of("fmt", fmt, FORMATS)]


# ---- helpers ------------------------------------------------------------------------------

def _round_away_int8(v: np.ndarray) -> np.ndarray:
    """C ``(int8_t)roundf(v)`` for |v| <= 127.5: nearest integer, halves away from zero.

    Adding the largest float below 0.5 (with v's sign) and truncating rounds exactly like roundf: an exact
    half reaches the next integer through the addition's own rounding, anything below a half stays under it.
    """
    r = np.copysign(_JUST_BELOW_HALF, v)
    r += v
    return r.astype(np.int8)  # float -> int casts truncate toward zero


def _fp16(d: np.ndarray) -> np.ndarray:
    """float32 scales -> float16, round to nearest even; |d| above 65504 (or NaN) -> inf, which quantize refuses."""
    return np.where(np.abs(d) <= _F16_MAX, d, np.float32(np.inf)).astype(np.float16)


def _fp16_bytes(d: np.ndarray) -> np.ndarray:
    """float32 column (n, 1) -> its fp16 bytes (n, 2), as ``_fp16``."""
    return _fp16(d).view(np.uint8)


def _fp16_at(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The fp16 stored at byte ``offset`` of each block, as a float32 column (n, 1)."""
    return np.ascontiguousarray(blocks[:, offset:offset + 2]).view(np.float16).astype(np.float32)


def _finite_float32(x: np.ndarray, name: str = "x") -> np.ndarray:
    """``x`` as a float32 array; ValueError unless it holds finite real numbers (not bool, complex or objects)."""
    x = np.asarray(x)
    if x.dtype.kind not in "fiu" and x.dtype.type.__module__ != "ml_dtypes":  # ml_dtypes' bfloat16, float8 ...
        raise ValueError(f"{name} must hold real numbers (float or integer), got dtype {x.dtype}")
    x = x.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise ValueError(f"{name} must be finite in float32 (no NaN or inf)")
    return x


def _check_values(x: np.ndarray, fmt: BlockFormat) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 0 or x.shape[-1] % fmt.block_values:
        raise ValueError(f"x must have a last axis that is a multiple of {fmt.block_values} for {fmt.name}, "
                         f"got shape {x.shape}")
    return np.ascontiguousarray(_finite_float32(x))


def _check_bytes(data: np.ndarray, fmt: BlockFormat, name: str = "data") -> np.ndarray:
    data = np.asarray(data)
    if data.dtype != np.uint8:
        raise ValueError(f"{name} must be a uint8 array of {fmt.name} blocks, got dtype {data.dtype}")
    if data.ndim == 0 or data.shape[-1] % fmt.block_bytes:
        raise ValueError(f"{name} must have a last axis that is a multiple of {fmt.block_bytes} bytes for "
                         f"{fmt.name}, got shape {data.shape}")
    return np.ascontiguousarray(data)


# ---- q8_0 ---------------------------------------------------------------------------------

def _q8_0_encode(b: np.ndarray, out: np.ndarray) -> None:
    a = np.abs(b)
    d = np.take_along_axis(a, a.argmax(axis=1, keepdims=True), axis=1) / np.float32(127)  # argmax beats max here
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
    with np.errstate(over="ignore", invalid="ignore"):  # subnormal blocks: 1/d overflows, d is 0 in fp16 anyway
        q = _round_away_int8(b * inv).view(np.uint8)
    out[:, :2] = _fp16_bytes(d)
    out[:, 2:] = q


def _q8_0_decode(blk: np.ndarray, out: np.ndarray) -> None:
    np.multiply(blk[:, 2:].view(np.int8), _fp16_at(blk, 0), out=out)  # int8 x float32 -> float32, no temporary


# ---- q4_0 ---------------------------------------------------------------------------------

def _signed_absmax(b: np.ndarray) -> np.ndarray:
    """Per row, the value of largest magnitude, the first one on ties (as ggml): column (n, 1)."""
    return np.take_along_axis(b, np.abs(b).argmax(axis=1, keepdims=True), axis=1)


def _q4_0_encode(b: np.ndarray, out: np.ndarray) -> None:
    d = _signed_absmax(b) / np.float32(-8)
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
    with np.errstate(over="ignore", invalid="ignore"):  # subnormal blocks: 1/d overflows, d is 0 in fp16 anyway
        v = b * inv
        v += np.float32(8.5)  # in [0.5, 16.5]: the uint8 cast truncates like ggml's (int8_t) cast
        q = v.astype(np.uint8).view(np.uint64)  # (n, 4): eight codes per lane
    # clamp 16 to 15 (subtract bit 4 of each byte), then pack nibble j | nibble j+16 << 4
    q -= (q >> np.uint64(4)) & _BYTE_ONES
    out[:, :2] = _fp16_bytes(d)
    out[:, 2:] = (q[:, :2] | (q[:, 2:] << np.uint64(4))).view(np.uint8)


def _q4_0_decode(blk: np.ndarray, out: np.ndarray) -> None:
    q = blk[:, 2:]
    np.bitwise_and(q, np.uint8(15), out=out[:, :16], casting="unsafe")
    np.right_shift(q, np.uint8(4), out=out[:, 16:], casting="unsafe")
    out -= np.float32(8)
    out *= _fp16_at(blk, 0)


# ---- q2_K ---------------------------------------------------------------------------------

_STEPS = list(np.float32(-0.5) + np.float32(0.1) * np.arange(16, dtype=np.float32) + np.float32(3))
_ROUNDER = np.float32(12582912)  # 1.5 x 2^23: v + _ROUNDER holds round(v) in its low 23 bits


def _nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int on float32 ``v`` (int32): round half to even for |v| < 2^22; inf -> -2^22, NaN -> 0."""
    i = (v + _ROUNDER).view(np.int32)
    i &= 0x7FFFFF
    i -= 0x400000
    return i


def _codes(v: np.ndarray) -> np.ndarray:
    """ggml's MAX(0, MIN(3, nearest_int(v))) as float32: inf and NaN (subnormal sub-blocks) give 0."""
    i = _nearest_int(v)
    np.clip(i, 0, 3, out=i)  # in place: several times faster than a new int32 array here
    return i.astype(np.float32)


def _seqsum(a: np.ndarray) -> np.ndarray:
    """Sum over axis 0 in sequential order, in float32 (as a C loop accumulates): a[0] + a[1] + ..."""
    out = a[0].copy()
    for row in a[1:]:
        out += row
    return out


def _qkx2(xt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml's make_qkx2_quants(n=16, nmax=3, weights=|x|, rmin=-0.5, rdelta=0.1, nstep=15, mad) per column.

    ``xt`` is (16, m): one sub-block per column, so every reduction is a loop of 16 vector operations.
    Returns (codes (16, m) float32, scale (m,), the_min (m,)) in float32.
    """
    f32 = np.float32
    w = np.abs(xt)
    mn = np.minimum(xt.min(axis=0), f32(0))
    mx = xt.max(axis=0)
    sum_w = _seqsum(w)
    sum_x = _seqsum(w * xt)
    flat = mx == mn
    iscale = f32(3) / np.where(flat, f32(1), mx - mn)  # inf where max - min is below 8.8e-39
    scale = f32(1) / iscale
    L = _codes(iscale * (xt - mn))
    best = _seqsum(w * np.abs(scale * L + mn - xt))

    # ggml runs the 16 trial scales in order and a step it accepts moves ``min`` for the next ones,
    # so the steps stay a loop (each one vectorized over all sub-blocks)
    for step in _STEPS:
        iscale = step / np.where(flat, f32(1), mx - mn)
        La = _codes(iscale * (xt - mn))
        wl = w * La
        sum_l, sum_l2, sum_xl = _seqsum(wl), _seqsum(wl * La), _seqsum(wl * xt)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, f32(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Ds
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        pos = this_min > 0
        if pos.any():
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
            this_min = np.where(pos, f32(0), this_min)
        err = _seqsum(w * np.abs(this_scale * La + this_min - xt))
        take = ok & (err < best)
        L = np.where(take, La, L)
        best = np.where(take, err, best)
        scale = np.where(take, this_scale, scale)
        mn = np.where(take, this_min, mn)
    L = np.where(flat, f32(0), L)
    scale = np.where(flat, f32(0), scale)
    return L, scale.astype(f32), (-mn).astype(f32)


# float32 as ggml computes it: sub-blocks of subnormals overflow 1 / (max - min), blocks past float16's range
# overflow (quantize refuses them)
@np.errstate(over="ignore", invalid="ignore", divide="ignore")
def _q2_K_encode(b: np.ndarray, out: np.ndarray) -> None:
    f32 = np.float32
    n = b.shape[0]
    L, scales, mins = _qkx2(np.ascontiguousarray(b.reshape(n * 16, 16).T))
    L, scales, mins = L.T.reshape(n, 16, 16), scales.reshape(n, 16), mins.reshape(n, 16)
    max_scale = np.maximum(scales.max(axis=1), f32(0))
    max_min = np.maximum(mins.max(axis=1), f32(0))
    isc = np.where(max_scale > 0, f32(15) / max_scale, f32(0))
    imn = np.where(max_min > 0, f32(15) / max_min, f32(0))
    sc = np.where(max_scale[:, None] > 0, _nearest_int(isc[:, None] * scales), 0)
    sc = sc | np.where(max_min[:, None] > 0, _nearest_int(imn[:, None] * mins) << 4, 0)
    sc = (sc & 0xFF).astype(np.uint8)
    d16 = _fp16(max_scale / f32(15))
    dmin16 = _fp16(max_min / f32(15))

    d = d16.astype(f32)[:, None] * (sc & 15).astype(f32)  # (n, 16)
    dm = dmin16.astype(f32)[:, None] * (sc >> 4).astype(f32)
    requant = _codes((b.reshape(n, 16, 16) + dm[:, :, None]) / d[:, :, None])
    L = np.where((d != 0)[:, :, None], requant, L).astype(np.uint8)

    q = L.reshape(n, 2, 4, 32) << np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]
    out[:, :16] = sc
    out[:, 16:80] = np.bitwise_or.reduce(q, axis=2).reshape(n, 64)
    out[:, 80:82] = d16.view(np.uint8).reshape(n, 2)
    out[:, 82:84] = dmin16.view(np.uint8).reshape(n, 2)


_CRUMB_SHIFTS = np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)


def _q2_K_decode(blk: np.ndarray, out: np.ndarray) -> None:
    n = blk.shape[0]
    sc = blk[:, :16]
    dl = (_fp16_at(blk, 80) * (sc & 15).astype(np.float32))[:, :, None]  # (n, 16, 1)
    ml = (_fp16_at(blk, 82) * (sc >> 4).astype(np.float32))[:, :, None]
    # byte l of half h holds values h*128 + 32*k + l for k = 0..3 (2 bits each, low bits first)
    q = (blk[:, 16:80].reshape(n, 2, 1, 32) >> _CRUMB_SHIFTS) & np.uint8(3)
    values = out.reshape(n, 16, 16)  # a view: out is a run of rows of a C-contiguous array (_blockwise)
    values[...] = q.reshape(n, 16, 16)
    values *= dl
    values -= ml


def q2_K_fields(block: np.ndarray) -> "pd.DataFrame":
    """The 16 sub-blocks of one q2_K block: scale and min codes sc_j, m_j; step d*sc_j and offset dmin*m_j.

    Bytes are read as the format defines them: a stored fp16 d or dmin that is NaN or inf (exponent bits all
    ones, which ``quantize`` never writes) gives NaN or inf steps and offsets.
    """
    import pandas as pd

    blk = _check_bytes(np.asarray(block).reshape(-1)[:84], FORMATS["q2_K"], "block")
    if blk.size == 0:
        raise ValueError("block must hold one q2_K block of 84 bytes, got none")
    blk = blk.reshape(1, 84)
    sc = blk[0, :16]
    d, dmin = float(_fp16_at(blk, 80)[0, 0]), float(_fp16_at(blk, 82)[0, 0])
    return pd.DataFrame({"scale code sc_j": sc & 15, "min code m_j": sc >> 4, "step d*sc_j": d * (sc & 15),
                         "offset dmin*m_j": dmin * (sc >> 4)}, index=pd.RangeIndex(16, name="sub-block"))


_CODECS = {
    "q8_0": (_q8_0_encode, _q8_0_decode),
    "q4_0": (_q4_0_encode, _q4_0_decode),
    "q2_K": (_q2_K_encode, _q2_K_decode),
}


_SCALE_BYTES = {"q8_0": (0,), "q4_0": (0,), "q2_K": (80, 82)}  # offsets of each block's fp16 scales
_SCALE_LIMITS = {  # what a block holds with float16 scales: 65504 x the largest code (x 15, q2_K's largest sub-scale)
    "q8_0": f"|x| <= 127 x {_F16_MAX:.0f} = {127 * _F16_MAX:.0f}",
    "q4_0": f"|x| <= 8 x {_F16_MAX:.0f} = {8 * _F16_MAX:.0f}",
    "q2_K": f"max(x) - min(x, 0) up to about 3 x 15 x {_F16_MAX:.0f} = {3 * 15 * _F16_MAX:.0f} and min(x) down to "
            f"about -15 x {_F16_MAX:.0f} = {-15 * _F16_MAX:.0f}",
}


def _check_scales(blocks: np.ndarray, fmt: str) -> None:
    """Refuse the blocks whose fp16 scale came out inf (``_fp16``), naming the first one and the limit."""
    bad = np.zeros(blocks.shape[0], bool)
    for at in _SCALE_BYTES[fmt]:
        bad |= blocks[:, at + 1] & 0x7C == 0x7C  # high byte: exponent bits all ones
    if bad.any():
        i, n = int(bad.argmax()), FORMATS[fmt].block_values
        raise ValueError(f"x: block {i} (x.ravel()[{i * n}:{(i + 1) * n}]) needs a scale above float16's maximum "
                         f"{_F16_MAX:.0f} (GGML stores the scale in float16); {fmt} holds "
                         f"{_SCALE_LIMITS[fmt]} per block")


def _ggml_format(fmt: str) -> BlockFormat:
    return block_format(one_of("fmt", fmt, GGML_FORMATS))


def _blockwise(rows: np.ndarray, codec, width: int, dtype: type, rows_per_chunk: int) -> np.ndarray:
    """Apply ``codec(rows, out)`` to ``rows`` a chunk at a time (bounded temporaries), writing each chunk's result
    straight into its rows of an array of ``width`` columns."""
    out = np.empty((rows.shape[0], width), dtype)
    for i in range(0, rows.shape[0], rows_per_chunk):
        codec(rows[i:i + rows_per_chunk], out[i:i + rows_per_chunk])
    return out


def quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    """Encode ``x`` (last axis a multiple of the block size) into GGML ``fmt`` blocks: uint8 (..., bytes)."""
    f = _ggml_format(fmt)
    x = _check_values(x, f)
    out = _blockwise(x.reshape(-1, f.block_values), _CODECS[fmt][0], f.block_bytes, np.uint8,
                     max(_CHUNK_VALUES // f.block_values, 1))
    _check_scales(out, fmt)
    return out.reshape(*x.shape[:-1], x.shape[-1] // f.block_values * f.block_bytes)


def dequantize(data: np.ndarray, fmt: str) -> np.ndarray:
    """Decode GGML ``fmt`` blocks (uint8, last axis whole blocks) into float32 values (..., n).

    Any bytes decode as the format (and gguf) defines them: a block whose stored fp16 scale is NaN or inf
    (exponent bits all ones, which ``quantize`` never writes) decodes to NaN or inf values.
    """
    f = _ggml_format(fmt)
    data = _check_bytes(data, f)
    out = _blockwise(data.reshape(-1, f.block_bytes), _CODECS[fmt][1], f.block_values, np.float32,
                     max(_CHUNK_VALUES // f.block_values, 1))
    return out.reshape(*data.shape[:-1], data.shape[-1] // f.block_bytes * f.block_values)


def round_trip(x: np.ndarray, fmt: str) -> np.ndarray:
    """``x`` as stored in ``fmt`` and read back (float32): GGML formats, ``bf16`` or ``fp8_e4m3``."""
    one_of("fmt", fmt, FORMATS)
    if fmt == "bf16":
        return to_bf16(x)
    if fmt == "fp8_e4m3":
        return fp8_e4m3_round_trip(x)
    return dequantize(quantize(x, fmt), fmt)


# ---- FP8 and BF16 (ml_dtypes) ---------------------------------------------------------------

FP8_E4M3_MAX = 448.0  # largest finite e4m3fn value


def _fp8_scale(scale: float) -> np.float32:
    """``scale`` as the float32 that codes are divided and multiplied by: > 0 and 448 x scale finite there."""
    s = positive("scale", scale)
    with np.errstate(over="ignore"):
        s32 = np.float32(s)
        top = s32 * np.float32(FP8_E4M3_MAX)
    if s32 == 0 or not np.isfinite(top):
        raise ValueError(f"scale must be > 0 and 448 x scale finite in float32 (scale from {_F32_SUBNORMAL:.3g} to "
                         f"{float(_F32.max) / FP8_E4M3_MAX:.3g}), got {scale!r}")
    return s32


def to_bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (nearest even) and returned as float32."""
    import ml_dtypes

    return _finite_float32(x).astype(ml_dtypes.bfloat16).astype(np.float32)


def fp8_e4m3_scale(x: np.ndarray) -> float:
    """Per-tensor scale that maps max|x| to 448 (the e4m3 maximum); 1.0 for an all-zero tensor.

    Below float32's normal range (max|x| < 5.3e-36) it is rounded up to float32's subnormal grid (multiples of
    2^-149), on which codes are scaled, so that max|x| / scale stays <= 448.
    """
    amax = float(np.abs(_finite_float32(x)).max(initial=0.0))
    if amax == 0:
        return 1.0
    s = amax / FP8_E4M3_MAX
    return s if s >= _F32.tiny else math.ceil(s / _F32_SUBNORMAL) * _F32_SUBNORMAL


def fp8_e4m3_encode(x: np.ndarray, scale: float | None = None) -> tuple[np.ndarray, float]:
    """Encode x / scale as FP8 e4m3fn bytes (saturating at +-448); returns (uint8 codes, scale)."""
    import ml_dtypes

    x = _finite_float32(x)
    s = fp8_e4m3_scale(x) if scale is None else positive("scale", scale)
    with np.errstate(over="ignore"):  # x / a subnormal scale may overflow to inf: saturates at 448 below
        y = np.clip(x / _fp8_scale(s), -FP8_E4M3_MAX, FP8_E4M3_MAX)
    return y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8), s


def fp8_e4m3_decode(codes: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Decode FP8 e4m3fn bytes and multiply by ``scale``: float32.

    Every code decodes as E4M3FN defines it: 0x7F and 0xFF are its NaN (it has no inf) and decode to NaN.
    """
    import ml_dtypes

    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"codes must be uint8 FP8 bytes, got dtype {codes.dtype}")
    return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * _fp8_scale(scale)


def fp8_e4m3_round_trip(x: np.ndarray, scale: float | None = None) -> np.ndarray:
    """``x`` stored as scaled FP8 e4m3 and read back (float32); per-tensor scale max|x|/448 by default."""
    codes, s = fp8_e4m3_encode(x, scale)
    return fp8_e4m3_decode(codes, s)
