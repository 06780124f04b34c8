"""The Triton paged-attention kernel against the numpy reference, on the CPU through the Triton interpreter.

Every block and slot a sequence does not use holds NaN, so any read past a context (a -1 table entry, the
tail of the last block, a block of another sequence) would show in the result; the reference is given the
caches with NaN set to 0, so only the kernel is held to this. The interpreter computes bfloat16 tl.dot
wrongly, so these tests use float32 and float16, and bfloat16 only where the kernel computes its dots in float32
under the interpreter; bfloat16 dots are checked on a GPU.

K/V stored compressed (FP8 e4m3 with a per-tensor scale, GGML's q8_0) are encoded by ``inferlab.compression``
(q8_0 byte for byte as GGML: the fp16 scale and the 32 codes split out of each 34-byte block) and compared with
the numpy reference over the decoded values; unused slots hold FP8's NaN code, or a NaN q8_0 scale.
"""

from __future__ import annotations

import math
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run in numpy on the CPU

import hypothesis.strategies as st  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from inferlab import kernels  # noqa: E402
from inferlab.compression import formats  # noqa: E402
from inferlab.kernels import triton_paged  # noqa: E402
from inferlab.kernels.triton_paged import paged_attention_triton  # noqa: E402

TOL = {"float32": 1e-5, "float16": 3e-3}


def paged_layout(rng: np.random.Generator, lens: list[int], block_size: int, n_kv: int, d: int, spare: int = 2):
    """Caches of NaN but for the used slots, each sequence's blocks shuffled over the pool, tables padded with -1."""
    need = [-(-n // block_size) for n in lens]
    num_blocks = sum(need) + spare
    k_cache = np.full((num_blocks, block_size, n_kv, d), np.nan, np.float32)
    v_cache = k_cache.copy()
    tables = np.full((len(lens), max(need) + 1), kernels.PAD, np.int32)  # at least one -1 column
    free = list(1 + rng.permutation(num_blocks - 1))  # block 0, where a masked position's address falls, stays NaN
    for b, n in enumerate(lens):
        tables[b, : need[b]] = [free.pop() for _ in range(need[b])]
        kernels.write_kv(k_cache, v_cache, tables[b], 0, rng.normal(size=(n, n_kv, d)), rng.normal(size=(n, n_kv, d)))
    return k_cache, v_cache, tables, np.array(lens)


def check(seed: int, lens: list[int], block_size: int, n_heads: int, n_kv: int, d: int, dtype: str) -> None:
    rng = np.random.default_rng(seed)
    k_cache, v_cache, tables, context_lens = paged_layout(rng, lens, block_size, n_kv, d)
    q = rng.normal(size=(len(lens), n_heads, d)).astype(dtype)
    k_cache, v_cache = k_cache.astype(dtype), v_cache.astype(dtype)
    got = paged_attention_triton(*(torch.from_numpy(x) for x in (q, k_cache, v_cache, tables, context_lens)))
    assert got.dtype == getattr(torch, dtype) and got.shape == q.shape
    want = kernels.paged_attention(q, np.nan_to_num(k_cache), np.nan_to_num(v_cache), tables, context_lens)
    np.testing.assert_allclose(got.float().numpy(), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("lens, block_size, n_heads, n_kv, d", [
    ([1, 5, 3], 1, 4, 4, 8),  # one token per block, no GQA, head_dim below tl.dot's 16
    ([1, 8, 13], 4, 8, 2, 16),  # length 1, a context ending on a block boundary, a ragged tail
    ([16, 33, 70], 16, 6, 1, 24),  # six query heads on one KV head, several tiles of 32 positions
    ([9, 10], 3, 4, 2, 32),  # a block size that is not a power of two
])
def test_matches_the_reference(lens, block_size, n_heads, n_kv, d, dtype) -> None:
    check(0, lens, block_size, n_heads, n_kv, d, dtype)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lens=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       block_size=st.sampled_from([1, 2, 4, 8, 16, 32]), n_kv=st.sampled_from([1, 2]),
       group=st.sampled_from([1, 2, 4, 8]), d=st.sampled_from([8, 16, 64]), dtype=st.sampled_from(list(TOL)))
def test_matches_the_reference_on_random_layouts(seed, lens, block_size, n_kv, group, d, dtype) -> None:
    check(seed, lens, block_size, group * n_kv, n_kv, d, dtype)


def test_reads_caches_with_any_strides() -> None:
    """A pool stored [num_blocks, n_kv, block_size, d] and viewed in the kernel's order is read in place."""
    rng = np.random.default_rng(1)
    k_cache, v_cache, tables, lens = paged_layout(rng, [7, 12], 4, 2, 16)
    q = rng.normal(size=(2, 4, 16)).astype(np.float32)
    kt, vt = (torch.from_numpy(c).transpose(1, 2).contiguous().transpose(1, 2) for c in (k_cache, v_cache))
    assert not kt.is_contiguous()
    got = paged_attention_triton(torch.from_numpy(q), kt, vt, torch.from_numpy(tables), torch.from_numpy(lens))
    want = kernels.paged_attention(q, np.nan_to_num(k_cache), np.nan_to_num(v_cache), tables, lens)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_bad_input_names_the_parameter() -> None:
    q = torch.zeros(2, 4, 16)
    cache = torch.zeros(5, 4, 2, 16)
    tables = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    lens = torch.tensor([8, 3])
    good = dict(q=q, k_cache=cache, v_cache=cache, block_tables=tables, context_lens=lens)
    for kw, name in [(dict(q=q[0]), "q"), (dict(v_cache=cache.half()), "v_cache"), (dict(q=q.double()), "q"),
                     (dict(block_tables=tables.float()), "block_tables"), (dict(context_lens=lens[:1]), "context_lens"),
                     (dict(context_lens=torch.tensor([8, 0])), "context_lens"),
                     (dict(context_lens=torch.tensor([9, 3])), "context_lens"),
                     (dict(block_tables=torch.tensor([[0, 5], [2, -1]])), "block_tables"),
                     (dict(q=torch.zeros(2, 3, 16)), "n_heads"), (dict(q=torch.zeros(2, 4, 8)), "head_dim"),
                     (dict(k_cache=cache[:, :0], v_cache=cache[:, :0]), "block_size")]:
        with pytest.raises(ValueError, match=name):
            paged_attention_triton(**{**good, **kw})
    empty = paged_attention_triton(q[:0], cache, cache, tables[:0], lens[:0])
    assert empty.shape == (0, 4, 16)


# ---- K/V stored as FP8 e4m3 or q8_0, converted in the kernel --------------------------------------
def q8_0_planes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GGML q8_0 blocks of x's last axis (``formats.quantize``), split into int8 codes like x and fp16 scales."""
    blocks = formats.quantize(x, "q8_0").reshape(*x.shape[:-1], -1, 34)
    scales = np.ascontiguousarray(blocks[..., :2]).view(np.float16)[..., 0]
    codes = np.ascontiguousarray(blocks[..., 2:]).view(np.int8).reshape(x.shape)
    return codes, scales


def encoded(cache: np.ndarray, fmt: str):
    """(stored, scale, decoded) of a NaN-padded cache: the used slots encoded, the others NaN as the format stores it."""
    used = ~np.isnan(cache[..., 0])
    if fmt == "fp8":
        codes, scale = formats.fp8_e4m3_encode(cache[used])
        stored = np.full(cache.shape, 0x7F, np.uint8)  # e4m3fn's NaN
        stored[used] = codes
        decoded = np.zeros_like(cache)
        decoded[used] = formats.fp8_e4m3_decode(codes, scale)
        return torch.from_numpy(stored), scale, decoded
    codes, scales = q8_0_planes(np.nan_to_num(cache))
    scales[~used] = np.nan
    decoded = codes.astype(np.float32) * np.repeat(scales.astype(np.float32), 32, axis=-1)
    decoded[~used] = 0.0
    return torch.from_numpy(codes), torch.from_numpy(scales), decoded


def check_quantized(seed: int, lens: list[int], block_size: int, n_heads: int, n_kv: int, d: int, dtype: str,
                    fmt: str) -> None:
    rng = np.random.default_rng(seed)
    k_cache, v_cache, tables, context_lens = paged_layout(rng, lens, block_size, n_kv, d)
    k_cache *= 3.0  # scales away from 1
    (kq, ks, k_dec), (vq, vs, v_dec) = encoded(k_cache, fmt), encoded(v_cache, fmt)
    q = rng.normal(size=(len(lens), n_heads, d)).astype(np.float32)
    tq = torch.from_numpy(q).to(getattr(torch, dtype))
    got = paged_attention_triton(tq, kq, vq, torch.from_numpy(tables), torch.from_numpy(context_lens),
                                 kv_format=fmt, k_scale=ks, v_scale=vs)
    assert got.dtype == tq.dtype and got.shape == q.shape
    # the kernel's dots take K/V in q's dtype: q8_0's code x scale is rounded to it (FP8's values are exact)
    k_dec, v_dec = (torch.from_numpy(x).to(tq.dtype).float().numpy() for x in (k_dec, v_dec))
    want = kernels.paged_attention(tq.float().numpy(), k_dec, v_dec, tables, context_lens)
    tol = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}[dtype]
    np.testing.assert_allclose(got.float().numpy(), want, rtol=tol, atol=tol)


def test_fp8_bytes_decode_exactly() -> None:
    """Every one of the 256 FP8 e4m3fn bytes decodes to its value / 256 (NaN for 0x7F and 0xFF), as ml_dtypes'."""
    import ml_dtypes
    import triton
    import triton.language as tl

    @triton.jit
    def decode(x_ptr, out_ptr):
        i = tl.arange(0, 256)
        tl.store(out_ptr + i, triton_paged._e4m3_to_f16(tl.load(x_ptr + i)))

    codes = torch.arange(256, dtype=torch.uint8)
    out = torch.empty(256, dtype=torch.float16)
    decode[(1,)](codes, out)
    want = codes.numpy().view(ml_dtypes.float8_e4m3fn).astype(np.float32) / triton_paged.FP8_UNIT
    np.testing.assert_array_equal(out.float().numpy(), want)  # equal NaNs at equal places


@pytest.mark.parametrize("fmt", ["fp8", "q8_0"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("lens, block_size, n_heads, n_kv, d", [
    ([1, 8, 13], 4, 8, 2, 32),  # length 1, a full last block, a ragged tail
    ([33, 70], 16, 6, 1, 64),  # six query heads on one KV head, several tiles, two q8_0 groups per head
    ([9, 10], 3, 4, 4, 96),  # a block size and a head_dim that are not powers of two (3 q8_0 groups)
])
def test_compressed_kv_matches_the_reference_on_decoded_values(lens, block_size, n_heads, n_kv, d, dtype,
                                                                fmt) -> None:
    check_quantized(0, lens, block_size, n_heads, n_kv, d, dtype, fmt)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lens=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       block_size=st.sampled_from([1, 2, 4, 8, 16]), n_kv=st.sampled_from([1, 2]), group=st.sampled_from([1, 4]),
       d=st.sampled_from([32, 64]), dtype=st.sampled_from(["float32", "float16"]), fmt=st.sampled_from(["fp8", "q8_0"]))
def test_compressed_kv_matches_the_reference_on_random_layouts(seed, lens, block_size, n_kv, group, d, dtype,
                                                               fmt) -> None:
    check_quantized(seed, lens, block_size, group * n_kv, n_kv, d, dtype, fmt)


def test_fp8_accepts_torch_float8_and_equals_its_bytes() -> None:
    rng = np.random.default_rng(3)
    k_cache, v_cache, tables, lens = paged_layout(rng, [5, 11], 4, 2, 16)
    k8, v8 = (torch.from_numpy(np.nan_to_num(c)).to(torch.float8_e4m3fn) for c in (k_cache, v_cache))
    q, t, n = torch.from_numpy(rng.normal(size=(2, 4, 16)).astype(np.float32)), torch.from_numpy(tables), \
        torch.from_numpy(lens)
    got = paged_attention_triton(q, k8, v8, t, n, kv_format="fp8", k_scale=1.0, v_scale=torch.tensor(2.0))
    same = paged_attention_triton(q, k8.view(torch.uint8), v8.view(torch.uint8), t, n, kv_format="fp8",
                                  k_scale=1.0, v_scale=2.0)
    torch.testing.assert_close(got, same, rtol=0, atol=0)
    want = kernels.paged_attention(q.numpy(), k8.float().numpy(), 2 * v8.float().numpy(), tables, lens)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_compressed_kv_bad_input_names_the_parameter() -> None:
    q = torch.zeros(2, 4, 32)
    codes = torch.zeros(5, 4, 2, 32, dtype=torch.int8)
    scales = torch.ones(5, 4, 2, 1, dtype=torch.float16)
    tables, lens = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32), torch.tensor([8, 3])
    fp8 = dict(kv_format="fp8", k_cache=codes.view(torch.uint8), v_cache=codes.view(torch.uint8), k_scale=1.0,
               v_scale=1.0)
    q8 = dict(kv_format="q8_0", k_cache=codes, v_cache=codes, k_scale=scales, v_scale=scales)
    for good, kw, name in [
        (q8, dict(kv_format="q4_0"), "kv_format"), (fp8, dict(k_scale=None), "k_scale"),
        (fp8, dict(v_scale=0.0), "v_scale"), (fp8, dict(v_scale=math.inf), "v_scale"),
        (fp8, dict(k_cache=codes), "k_cache"), (q8, dict(v_cache=codes.view(torch.uint8)), "v_cache"),
        (q8, dict(k_scale=scales[..., :0]), "k_scale"), (q8, dict(v_scale=scales.double()), "v_scale"),
        (q8, dict(v_scale=scales.float()), "v_scale"), (q8, dict(q=torch.zeros(2, 4, 16), k_cache=codes[..., :16],
                                                              v_cache=codes[..., :16]), "multiple of 32"),
        (dict(k_cache=torch.zeros(5, 4, 2, 32), v_cache=torch.zeros(5, 4, 2, 32)), dict(k_scale=1.0), "k_scale"),
    ]:
        args = dict(q=q, block_tables=tables, context_lens=lens, **good)
        with pytest.raises(ValueError, match=name):
            paged_attention_triton(**{**args, **kw})
    ok = paged_attention_triton(q, block_tables=tables, context_lens=lens, **q8)
    assert ok.shape == q.shape and bool((ok == 0).all())  # codes of 0: V is 0 everywhere
