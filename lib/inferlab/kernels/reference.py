"""Attention kernels in numpy: causal grouped-query attention and attention over a paged KV cache.

``attention`` is the reference: the new tokens are the last ``n_new`` of the context, query
head h reads KV head ``h // (n_heads // n_kv_heads)`` (GQA), softmax scale 1/sqrt(head_dim),
everything computed in float32. ``paged_attention`` computes the same thing for one decode
token per sequence, but finds each key through the sequence's block table (token position
t lives in slot ``t % block_size`` of physical block ``block_tables[b, t // block_size]``),
exactly the indirection of vLLM's PagedAttention. ``write_kv`` and ``gather_kv`` are the two
halves of that indirection (scatter new K/V into their slots, read a context back in order);
``tables_from_manager`` turns an ``inferlab.kvcache.BlockManager`` into the kernel's arrays.

Shapes: q ``[n_new, n_heads, d]`` (or ``[batch, n_heads, d]`` for decode), K/V
``[n_ctx, n_kv_heads, d]``, caches ``[num_blocks, block_size, n_kv_heads, d]``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._validate import non_negative_int

if TYPE_CHECKING:
    from ..kvcache.block_manager import BlockManager

PAD = -1  # block-table entry past a sequence's last block


def _array(name: str, x: object, ndim: int) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")
    return a


def _groups(n_heads: int, n_kv_heads: int) -> int:
    if n_kv_heads == 0 or n_heads % n_kv_heads:
        raise ValueError(f"q's n_heads ({n_heads}) must be a multiple of the caches' n_kv_heads ({n_kv_heads})")
    return n_heads // n_kv_heads


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float32; rows that are entirely -inf are not allowed."""
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    return e / e.sum(axis=-1, keepdims=True)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True) -> np.ndarray:
    """Grouped-query attention of the last ``n_new`` context tokens: ``[n_new, n_heads, d]`` float32."""
    q = _array("q", q, 3)
    k = _array("k", k, 3)
    v = _array("v", v, 3)
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {k.shape} and {v.shape}")
    n_new, n_heads, d = q.shape
    n_ctx, n_kv, dk = k.shape
    if dk != d:
        raise ValueError(f"k's head_dim ({dk}) must equal q's ({d})")
    if n_new > n_ctx:
        raise ValueError(f"q's n_new ({n_new}) must not exceed the context length n_ctx ({n_ctx})")
    g = _groups(n_heads, n_kv)
    if n_new == 0:
        return np.zeros((0, n_heads, d), np.float32)
    # [n_kv, g * n_new, d] @ [n_kv, d, n_ctx]: one BLAS matmul per KV head
    qg = q.astype(np.float32, copy=False).reshape(n_new, n_kv, g, d).transpose(1, 2, 0, 3).reshape(n_kv, g * n_new, d)
    kt = k.astype(np.float32, copy=False).transpose(1, 2, 0)
    scores = (qg @ kt).reshape(n_kv, g, n_new, n_ctx) * np.float32(1 / np.sqrt(d))
    if causal:
        pos = np.arange(n_ctx - n_new, n_ctx)
        scores = np.where(np.arange(n_ctx)[None, :] <= pos[:, None], scores, np.float32(-np.inf))
    p = _softmax_rows(scores).reshape(n_kv, g * n_new, n_ctx)
    out = p @ v.astype(np.float32, copy=False).transpose(1, 0, 2)  # [n_kv, g * n_new, d]
    return out.reshape(n_kv, g, n_new, d).transpose(2, 0, 1, 3).reshape(n_new, n_heads, d)


def _check_cache(k_cache: object, v_cache: object) -> tuple[np.ndarray, np.ndarray]:
    kc = _array("k_cache", k_cache, 4)
    vc = _array("v_cache", v_cache, 4)
    if kc.shape != vc.shape:
        raise ValueError(f"k_cache and v_cache must have the same shape, got {kc.shape} and {vc.shape}")
    return kc, vc


def _check_tables(block_tables: object, context_lens: object, num_blocks: int, block_size: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    bt = _array("block_tables", block_tables, 2)
    lens = _array("context_lens", context_lens, 1)
    if not (np.issubdtype(bt.dtype, np.integer) and np.issubdtype(lens.dtype, np.integer)):
        raise ValueError("block_tables and context_lens must hold integers")
    if len(lens) != len(bt):
        raise ValueError(f"context_lens must have one entry per block-table row ({len(bt)}), got {len(lens)}")
    if (lens < 1).any() or (lens > bt.shape[1] * block_size).any():
        raise ValueError(f"context_lens must lie in [1, max_blocks * block_size = {bt.shape[1] * block_size}]")
    used = np.arange(bt.shape[1])[None, :] < -(-lens[:, None] // block_size)
    if ((bt < 0) | (bt >= num_blocks))[used].any():
        raise ValueError(f"block_tables entries of used blocks must lie in [0, num_blocks = {num_blocks})")
    return bt.astype(np.int64), lens.astype(np.int64)


def paged_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, block_tables: np.ndarray,
                    context_lens: np.ndarray) -> np.ndarray:
    """Attention of one decode token per sequence over K/V found through block tables: ``[batch, n_heads, d]`` float32.

    Row b attends to the first ``context_lens[b]`` tokens of its sequence (the new token's own
    K/V already written); entries of ``block_tables`` past the last used block are ignored.
    """
    q = _array("q", q, 3)
    kc, vc = _check_cache(k_cache, v_cache)
    num_blocks, block_size, n_kv, d = kc.shape
    batch, n_heads, dq = q.shape
    if dq != d:
        raise ValueError(f"q's head_dim ({dq}) must equal the caches' ({d})")
    bt, lens = _check_tables(block_tables, context_lens, num_blocks, block_size)
    if len(bt) != batch:
        raise ValueError(f"block_tables must have one row per query ({batch}), got {len(bt)}")
    g = _groups(n_heads, n_kv)
    if batch == 0:
        return np.zeros((0, n_heads, d), np.float32)
    pos = np.arange(int(lens.max()))
    valid = pos[None, :] < lens[:, None]  # [batch, max_ctx]
    blocks = np.where(valid, bt[:, pos // block_size], 0)
    slots = pos % block_size
    k = kc[blocks, slots].astype(np.float32, copy=False)  # [batch, max_ctx, n_kv, d]
    v = vc[blocks, slots].astype(np.float32, copy=False)
    # g query rows per KV head: matrix-vector work, where einsum's loops beat many tiny BLAS calls
    qg = q.astype(np.float32, copy=False).reshape(batch, n_kv, g, d)
    scores = np.einsum("bkgd,bmkd->bkgm", qg, k) * np.float32(1 / np.sqrt(d))
    scores = np.where(valid[:, None, None, :], scores, np.float32(-np.inf))
    out = np.einsum("bkgm,bmkd->bkgd", _softmax_rows(scores), v)
    return out.reshape(batch, n_heads, d)


def slot_mapping(block_table: Sequence[int] | np.ndarray, start: int, n_tokens: int, block_size: int) -> np.ndarray:
    """Flat cache slots (block * block_size + offset) of token positions start ... start + n_tokens - 1."""
    table = np.asarray(block_table, dtype=np.int64)
    non_negative_int("start", start)
    non_negative_int("n_tokens", n_tokens)
    if start + n_tokens > len(table) * block_size:
        raise ValueError(f"start + n_tokens ({start + n_tokens}) must fit the table's "
                         f"{len(table)} blocks of {block_size} tokens")
    pos = np.arange(start, start + n_tokens)
    return table[pos // block_size] * block_size + pos % block_size


def write_kv(k_cache: np.ndarray, v_cache: np.ndarray, block_table: Sequence[int] | np.ndarray, start: int,
             k: np.ndarray, v: np.ndarray) -> None:
    """Store K/V ``[n, n_kv_heads, d]`` of positions start ... start + n - 1 into their slots of the caches (in place)."""
    kc, vc = _check_cache(k_cache, v_cache)
    num_blocks, block_size = kc.shape[:2]
    k = _array("k", k, 3)
    v = _array("v", v, 3)
    if k.shape != v.shape or k.shape[1:] != kc.shape[2:]:
        raise ValueError(f"k and v must both have shape [n, {kc.shape[2]}, {kc.shape[3]}], got {k.shape} and {v.shape}")
    slots = slot_mapping(block_table, start, len(k), block_size)
    if len(slots) and (slots.min() < 0 or slots.max() >= num_blocks * block_size):
        raise ValueError(f"block_table entries must lie in [0, num_blocks = {num_blocks})")
    kc.reshape(-1, *kc.shape[2:])[slots] = k
    vc.reshape(-1, *vc.shape[2:])[slots] = v


def gather_kv(cache: np.ndarray, block_table: Sequence[int] | np.ndarray, n_tokens: int) -> np.ndarray:
    """The first ``n_tokens`` K (or V) rows of a sequence, in order: ``[n_tokens, n_kv_heads, d]``."""
    c = _array("cache", cache, 4)
    slots = slot_mapping(block_table, 0, n_tokens, c.shape[1])
    return c.reshape(-1, *c.shape[2:])[slots]


def paged_prefill_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                            block_table: Sequence[int] | np.ndarray, context_len: int) -> np.ndarray:
    """Causal attention of a chunk (the last ``len(q)`` of ``context_len`` tokens) over a paged cache: ``[n_new, n_heads, d]``."""
    kc, vc = _check_cache(k_cache, v_cache)
    return attention(q, gather_kv(kc, block_table, context_len), gather_kv(vc, block_table, context_len))


def tables_from_manager(manager: "BlockManager", seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """(block_tables ``[batch, max_blocks]`` padded with -1, context_lens ``[batch]``) of ``seq_ids`` in a BlockManager."""
    tables = [manager.block_table(s) for s in seq_ids]
    lens = np.array([(len(t) - 1) * manager.block_size + manager.last_block_fill(s) if t else 0
                     for s, t in zip(seq_ids, tables)], dtype=np.int64)
    out = np.full((len(tables), max((len(t) for t in tables), default=0)), PAD, dtype=np.int64)
    for row, t in zip(out, tables):
        row[: len(t)] = t
    return out, lens
