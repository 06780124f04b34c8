"""Decode attention that reads K/V in place through the block table: the kernel the allocator feeds, in Triton.

``paged_attention_triton`` computes what ``inferlab.kernels.paged_attention`` (numpy) does, the way vLLM's
Triton attention does it. One program handles one sequence and one KV head, so the query heads that share
that KV head (GQA) go through it together, as the rows of one matrix. It walks the sequence's context in
tiles of ``TILE`` token positions; each position finds its key and value through the block table (block
``t // block_size``, slot ``t % block_size``), so no copy of the context is ever made, and only the blocks
below ``context_lens[b]`` are touched: the -1 entries past them, and the tail of the last block, are masked
out and never loaded. Softmax is online: a running max and sum per query row, the accumulator rescaled
whenever the max grows, all in float32 with scale 1/sqrt(head_dim).

This module imports torch and triton at its top; the rest of the library imports it only inside a
function that runs it (tests/test_layout.py).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

TILE = 32  # token positions per step; tl.dot wants every dimension >= 16


@triton.jit
def _paged_decode(q_ptr, k_ptr, v_ptr, out_ptr, tables_ptr, lens_ptr,
                  stride_block, stride_slot, stride_head, max_blocks, scale,
                  N_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                  BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, TILE: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    rows = tl.arange(0, BLOCK_G)  # the query heads of this KV head, padded to BLOCK_G
    dims = tl.arange(0, BLOCK_D)  # head_dim, padded to BLOCK_D
    row_ok = rows < GROUP
    dim_ok = dims < HEAD_DIM

    heads = kv_head * GROUP + rows
    q_at = q_ptr + (seq * N_HEADS + heads[:, None]) * HEAD_DIM + dims[None, :]
    q = tl.load(q_at, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)

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
        k = tl.load(k_ptr + kv_at[:, None] + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kv_at[:, None] + dims[None, :], mask=kv_mask, other=0.0)

        # [BLOCK_G, TILE] in float32; "ieee" keeps float32 inputs out of TF32 (16-bit inputs are unaffected)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        scores = tl.where(used[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)  # 0 on the first tile, where m is -inf
        p = tl.exp(scores - m_new[:, None])
        s = s * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m = m_new

    out_at = out_ptr + (seq * N_HEADS + heads[:, None]) * HEAD_DIM + dims[None, :]
    tl.store(out_at, (acc / s[:, None]).to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


def _tensor(name: str, x: object, ndim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != ndim:
        raise ValueError(f"{name} must be a torch tensor with {ndim} dimensions, got {getattr(x, 'shape', type(x))}")
    return x


def paged_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor,
                           check_values: bool = True) -> torch.Tensor:
    """Attention of one decode token per sequence over K/V read in place through block tables: ``[batch, n_heads, d]``.

    q ``[batch, n_heads, d]``; caches ``[num_blocks, block_size, n_kv_heads, d]`` (same dtype as q: float16,
    bfloat16 or float32; any strides but a contiguous last axis, the same for both); block_tables
    ``[batch, max_blocks]`` integers padded with -1; context_lens ``[batch]`` integers, each >= 1. The result
    has q's dtype, computed in float32. ``check_values`` also checks the lengths and the table entries they
    use (one device sync: pass False when timing or capturing a CUDA graph).
    """
    q = _tensor("q", q, 3)
    k_cache = _tensor("k_cache", k_cache, 4)
    v_cache = _tensor("v_cache", v_cache, 4)
    block_tables = _tensor("block_tables", block_tables, 2)
    context_lens = _tensor("context_lens", context_lens, 1)
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"q must be float16, bfloat16 or float32, got {q.dtype}")
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        if c.dtype != q.dtype or c.shape != k_cache.shape or c.stride() != k_cache.stride() or c.stride(-1) != 1:
            raise ValueError(f"{name} must have q's dtype, k_cache's shape and strides and a contiguous last axis")
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
    _paged_decode[(batch, n_kv)](
        q, k_cache, v_cache, out, block_tables.to(torch.int32).contiguous(), context_lens.to(torch.int32).contiguous(),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), max_blocks, 1 / math.sqrt(d),
        N_HEADS=n_heads, GROUP=group, HEAD_DIM=d, BLOCK_SIZE=block_size,
        BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_D=max(16, triton.next_power_of_2(d)), TILE=TILE)
    return out
