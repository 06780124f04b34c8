"""Decode attention that reads K/V in place through the block table: the kernel the allocator feeds, in Triton.

``paged_attention_triton`` computes what ``inferlab.kernels.paged_attention`` (numpy) does, the way vLLM's
Triton attention does it. One program handles one sequence and one KV head, so the query heads that share
that KV head (GQA) go through it together, as the rows of one matrix. It walks the sequence's context in
tiles of ``TILE`` token positions; each position finds its key and value through the block table (block
``t // block_size``, slot ``t % block_size``), so no copy of the context is ever made, and only the blocks
below ``context_lens[b]`` are touched: the -1 entries past them, and the tail of the last block, are masked
out and never loaded. Softmax is online: a running max and sum per query row, the accumulator rescaled
whenever the max grows, all in float32 with scale 1/sqrt(head_dim).

K/V may also be stored compressed (``kv_format``), as section 8.4.2 stores them, and are then converted in
registers after the load, per tile, never into a full-precision copy: the kernel reads only the stored bytes.

- ``fp8``: FP8 e4m3fn bytes (``uint8``, or ``torch.float8_e4m3fn``) with one scale per tensor for K and one for
  V (``inferlab.compression.fp8_e4m3_encode``: scale = max|x| / 448). A byte becomes its float16 value / 256
  with integer operations (its sign, exponent and mantissa bits moved into a float16's; exact, the two NaN
  codes 0x7F and 0xFF give NaN), which every CUDA GPU runs; the scale (times 256) multiplies the scores for K
  and the output for V, outside the inner loop over positions.
- ``q8_0``: GGML's q8_0 along head_dim (``inferlab.compression``: 32 int8 codes per fp16 scale d, x = d q),
  stored as two arrays of the same layout: codes ``int8`` like the cache, scales ``[..., head_dim / 32]``;
  34 bytes per 32 values, as GGML's blocks. Each value is its code times its group's scale.

This module imports torch and triton at its top; the rest of the library imports it only inside a
function that runs it (tests/test_layout.py).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

TILE = 32  # token positions per step; tl.dot wants every dimension >= 16
KV_FORMATS = {"same": 0, "fp8": 1, "q8_0": 2}  # how K/V are stored (the kernel's KV_FORMAT)
Q8_0_GROUP = 32  # values per q8_0 scale
FP8_UNIT = 256.0  # _e4m3_to_f16 gives a byte's FP8 e4m3 value / 256


@triton.jit
def _e4m3_to_f16(bits):
    """FP8 e4m3fn bytes -> their value / 256 as float16, exactly: sign, exponent and mantissa moved into place."""
    b = bits.to(tl.int32) & 0xFF
    h = ((b & 0x80) << 8) | ((b & 0x7F) << 7)  # e4m3's 4 exponent bits, bias 7, as float16's (bias 15): 2^-8 x
    x = h.to(tl.int16).to(tl.float16, bitcast=True)
    return tl.where((b & 0x7F) == 0x7F, float("nan"), x)  # e4m3fn has no inf; 0x7F and 0xFF are NaN


@triton.jit
def _load_kv(ptr, scale_ptr, at, scale_at, dims, mask, KV_FORMAT: tl.constexpr):
    """A tile of K or V ``[TILE, BLOCK_D]`` where it lies in the pool, converted from how it is stored."""
    x = tl.load(ptr + at[:, None] + dims[None, :], mask=mask, other=0)
    if KV_FORMAT == 1:  # FP8 e4m3: value / 256; the per-tensor scale x 256 is applied by the caller
        x = _e4m3_to_f16(x)
    elif KV_FORMAT == 2:  # q8_0: code x the fp16 scale of its group of 32 along head_dim
        d = tl.load(scale_ptr + scale_at[:, None] + dims[None, :] // 32, mask=mask, other=0.0)
        x = x.to(tl.float32) * d.to(tl.float32)
    return x


@triton.jit
def _paged_decode(q_ptr, k_ptr, v_ptr, out_ptr, tables_ptr, lens_ptr, ks_ptr, vs_ptr,
                  stride_block, stride_slot, stride_head, s_block, s_slot, s_head, max_blocks, scale, out_scale,
                  N_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                  BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, TILE: tl.constexpr, KV_FORMAT: tl.constexpr,
                  UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    rows = tl.arange(0, BLOCK_G)  # the query heads of this KV head, padded to BLOCK_G
    dims = tl.arange(0, BLOCK_D)  # head_dim, padded to BLOCK_D
    row_ok = rows < GROUP
    dim_ok = dims < HEAD_DIM

    heads = kv_head * GROUP + rows
    q_at = q_ptr + (seq * N_HEADS + heads[:, None]) * HEAD_DIM + dims[None, :]
    q = tl.load(q_at, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    if UPCAST:  # bfloat16 under Triton's interpreter, whose bfloat16 tl.dot is wrong: float32 dots
        q = q.to(tl.float32)

    m = tl.full([BLOCK_G], float("-inf"), tl.float32)  # running max of each row's scores
    s = tl.zeros([BLOCK_G], tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)  # running sum of exp(score - m) * v
    n_ctx = tl.load(lens_ptr + seq)
    for start in range(0, n_ctx, TILE):
        pos = start + tl.arange(0, TILE)
        used = pos < n_ctx  # the tail of the last block, and every block past it, stay unread
        block = tl.load(tables_ptr + seq * max_blocks + pos // BLOCK_SIZE, mask=used, other=0).to(tl.int64)
        kv_at = block * stride_block + (pos % BLOCK_SIZE) * stride_slot + kv_head * stride_head
        kv_mask = used[:, None] & dim_ok[None, :]
        scale_at = block * s_block + (pos % BLOCK_SIZE) * s_slot + kv_head * s_head  # q8_0's scales
        k = _load_kv(k_ptr, ks_ptr, kv_at, scale_at, dims, kv_mask, KV_FORMAT).to(q.dtype)
        v = _load_kv(v_ptr, vs_ptr, kv_at, scale_at, dims, kv_mask, KV_FORMAT).to(q.dtype)

        # [BLOCK_G, TILE] in float32; "ieee" keeps float32 inputs out of TF32 (16-bit inputs are unaffected)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # scale: 1/sqrt(d), times FP8's K scale
        scores = tl.where(used[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)  # 0 on the first tile, where m is -inf
        p = tl.exp(scores - m_new[:, None])
        s = s * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m = m_new

    out_at = out_ptr + (seq * N_HEADS + heads[:, None]) * HEAD_DIM + dims[None, :]
    out = acc * (out_scale / s[:, None])  # out_scale: 1, or FP8's V scale
    tl.store(out_at, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


def _tensor(name: str, x: object, ndim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != ndim:
        raise ValueError(f"{name} must be a torch tensor with {ndim} dimensions, got {getattr(x, 'shape', type(x))}")
    return x


def _scales(name: str, x: object, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    x = _tensor(name, x, 4)
    if tuple(x.shape) != shape or x.dtype not in (torch.float16, torch.float32) or x.stride(-1) != 1 \
            or x.device != device:
        raise ValueError(f"{name} must be float16 or float32 q8_0 scales of shape {shape} (one per 32 values along "
                         f"head_dim) with a contiguous last axis on {device}, got {tuple(x.shape)} {x.dtype} "
                         f"on {x.device}")
    return x


def _fp8_scale(name: str, x: object) -> float:
    if isinstance(x, torch.Tensor):
        x = float(x) if x.numel() == 1 else math.nan
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0 < x < math.inf):
        raise ValueError(f"{name} must be the FP8 tensor's scale, a finite number > 0, got {x!r}")
    return float(x)


def paged_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor,
                           check_values: bool = True, *, kv_format: str = "same",
                           k_scale: "torch.Tensor | float | None" = None,
                           v_scale: "torch.Tensor | float | None" = None) -> torch.Tensor:
    """Attention of one decode token per sequence over K/V read in place through block tables: ``[batch, n_heads, d]``.

    q ``[batch, n_heads, d]`` (float16, bfloat16 or float32); caches ``[num_blocks, block_size, n_kv_heads, d]``
    (any strides but a contiguous last axis, the same for both) stored as ``kv_format`` says: ``same``, in q's
    dtype; ``fp8``, FP8 e4m3fn bytes (uint8 or float8_e4m3fn) with ``k_scale``, ``v_scale`` the per-tensor
    scales (numbers > 0); ``q8_0``, int8 codes with ``k_scale``, ``v_scale`` their float16 (or float32) scales
    ``[num_blocks, block_size, n_kv_heads, d / 32]`` (d a multiple of 32). block_tables ``[batch, max_blocks]``
    integers padded with -1; context_lens ``[batch]`` integers, each >= 1. The result has q's dtype, computed
    in float32 (the dots' inputs in q's dtype). ``check_values`` also checks the lengths and the table entries
    they use (one device sync: pass False when timing or capturing a CUDA graph).
    """
    q = _tensor("q", q, 3)
    k_cache = _tensor("k_cache", k_cache, 4)
    v_cache = _tensor("v_cache", v_cache, 4)
    block_tables = _tensor("block_tables", block_tables, 2)
    context_lens = _tensor("context_lens", context_lens, 1)
    if kv_format not in KV_FORMATS:
        raise ValueError(f"kv_format must be one of {sorted(KV_FORMATS)}, got {kv_format!r}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q must be float16, bfloat16 or float32, got {q.dtype}")
    if kv_format == "fp8":
        k_cache, v_cache = (c.view(torch.uint8) if c.dtype == torch.float8_e4m3fn else c for c in (k_cache, v_cache))
    stored = {"same": q.dtype, "fp8": torch.uint8, "q8_0": torch.int8}[kv_format]
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        if c.dtype != stored or c.shape != k_cache.shape or c.stride() != k_cache.stride() or c.stride(-1) != 1:
            raise ValueError(f"{name} must hold {stored} ({kv_format!r} K/V), have k_cache's shape and strides and "
                             f"a contiguous last axis; got {c.dtype}, shape {tuple(c.shape)}")
    for name, t in (("block_tables", block_tables), ("context_lens", context_lens)):
        if t.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{name} must hold int32 or int64, got {t.dtype}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("block_tables", block_tables),
                    ("context_lens", context_lens)):
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device ({q.device}), got {t.device}")
    batch, n_heads, d = q.shape
    num_blocks, block_size, n_kv, dk = k_cache.shape
    if dk != d:
        raise ValueError(f"k_cache's head_dim ({dk}) must equal q's ({d})")
    if block_size == 0 or d == 0:
        raise ValueError(f"k_cache's block_size and head_dim must be >= 1, got shape {tuple(k_cache.shape)}")
    if n_kv == 0 or n_heads % n_kv:
        raise ValueError(f"q's n_heads ({n_heads}) must be a multiple of the caches' n_kv_heads ({n_kv})")
    if block_tables.shape[0] != batch or context_lens.shape[0] != batch:
        raise ValueError(f"block_tables and context_lens must have one row per query ({batch}), "
                         f"got {block_tables.shape[0]} and {context_lens.shape[0]}")
    softmax_scale, out_scale = 1 / math.sqrt(d), 1.0
    ks, vs = k_cache, v_cache  # the scale pointers of a format without scale arrays: never read
    if kv_format == "fp8":
        k_mul, v_mul = (_fp8_scale(n, x) * FP8_UNIT for n, x in (("k_scale", k_scale), ("v_scale", v_scale)))
        softmax_scale, out_scale = softmax_scale * k_mul, v_mul
    elif kv_format == "q8_0":
        if d % Q8_0_GROUP:
            raise ValueError(f"q's head_dim must be a multiple of {Q8_0_GROUP} for q8_0 K/V, got {d}")
        shape = (num_blocks, block_size, n_kv, d // Q8_0_GROUP)
        ks, vs = _scales("k_scale", k_scale, shape, q.device), _scales("v_scale", v_scale, shape, q.device)
        if ks.stride() != vs.stride() or ks.dtype != vs.dtype:
            raise ValueError("v_scale must have k_scale's dtype and strides")
    elif k_scale is not None or v_scale is not None:
        raise ValueError(f"k_scale and v_scale must be None for K/V stored in q's dtype, got {type(k_scale)}")
    max_blocks = block_tables.shape[1]
    if check_values and batch:
        if (context_lens < 1).any() or (context_lens > max_blocks * block_size).any():
            raise ValueError(f"context_lens must lie in [1, max_blocks * block_size = {max_blocks * block_size}]")
        needed = (context_lens[:, None] + block_size - 1) // block_size
        used = torch.arange(max_blocks, device=q.device)[None, :] < needed
        if ((block_tables < 0) | (block_tables >= num_blocks))[used].any():
            raise ValueError(f"block_tables entries of used blocks must lie in [0, num_blocks = {num_blocks})")

    q = q.contiguous()
    out = torch.empty_like(q)
    if batch == 0:
        return out
    group = n_heads // n_kv
    interpreted = type(_paged_decode).__name__ == "InterpretedFunction"  # TRITON_INTERPRET=1: numpy on the CPU
    _paged_decode[(batch, n_kv)](
        q, k_cache, v_cache, out, block_tables.to(torch.int32).contiguous(), context_lens.to(torch.int32).contiguous(),
        ks, vs, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), ks.stride(0), ks.stride(1), ks.stride(2),
        max_blocks, softmax_scale, out_scale,
        N_HEADS=n_heads, GROUP=group, HEAD_DIM=d, BLOCK_SIZE=block_size,
        BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_D=max(16, triton.next_power_of_2(d)), TILE=TILE,
        KV_FORMAT=KV_FORMATS[kv_format], UPCAST=interpreted and q.dtype == torch.bfloat16)
    return out
