"""Attention kernels in numpy: causal grouped-query attention and attention over a paged KV cache.

``attention`` is the reference: the new tokens are the last ``n_new`` of the context, query
head h reads KV head ``h // (n_heads // n_kv_heads)`` (GQA), softmax scale 1/sqrt(head_dim),
everything computed in float32. ``paged_attention`` computes the same thing for one decode
token per sequence, but finds each key through the sequence's block table (token position
t lives in slot ``t % block_size`` of physical block ``block_tables[b, t // block_size]``),
exactly the indirection of vLLM's PagedAttention. ``write_kv`` and ``gather_kv`` are the two
halves of that indirection (scatter new K/V into their slots, read a context back in order);
``tables_from_manager`` turns an ``inferlab.kvcache.BlockManager`` into the kernel's arrays.
Every function reads a table the same way: the ceil(context_len / block_size) entries a context
needs must be block ids in [0, num_blocks); entries past them may also be ``PAD`` (-1). No slot
past a context is read, so a sequence's result does not depend on the rest of its batch.
Values are not checked for NaN or inf (a NaN in a block no context reads is harmless): a NaN or an
infinity in what a kernel reads comes out as NaN or inf in its result.

Shapes: q ``[n_new, n_heads, d]`` (or ``[batch, n_heads, d]`` for decode), K/V
``[n_ctx, n_kv_heads, d]``, caches ``[num_blocks, block_size, n_kv_heads, d]``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from .._validate import MAX_COUNT, instance, items, member, non_negative_int, positive_int
from ..kvcache.block_manager import BlockManager

PAD = -1  # block-table entry past the blocks a sequence's context needs
_F32_MAX = float(np.finfo(np.float32).max)


def _asarray(name: str, x: object, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nesting
        raise ValueError(f"{name} must be an array, got {type(x).__name__} ({e})") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    return a


def reals(name: str, x: object, ndim: int) -> np.ndarray:
    """``x`` as an array of real numbers (integer or floating dtype; not bool, complex or object)."""
    a = _asarray(name, x, ndim)
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers (an integer or floating dtype), got dtype {a.dtype}")
    return a


def indices(name: str, x: object, ndim: int) -> np.ndarray:
    """``x`` as an array of integers of any width and signedness (an empty sequence counts)."""
    a = _asarray(name, x, ndim)
    if a.size == 0 and not isinstance(x, np.ndarray):
        a = a.astype(np.int64)  # np.asarray([]) is float64
    bools = not isinstance(x, np.ndarray) and a.size and any(isinstance(v, bool) for v in np.asarray(x, object).flat)
    if a.dtype.kind not in "iu" or bools:
        raise ValueError(f"{name} must hold integers (not bools), got dtype {'bool' if bools else a.dtype}")
    return a


def cast(name: str, a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` in the floating ``dtype``; finite values beyond its range are refused rather than turned into inf."""
    with np.errstate(over="ignore"):
        out = a.astype(dtype, copy=False)
    if (not np.can_cast(a.dtype, dtype, "safe") and not np.isfinite(out).all()
            and (np.isinf(out) & np.isfinite(a)).any()):
        raise ValueError(f"{name} must fit {np.dtype(dtype)} (|x| <= {np.finfo(dtype).max:.4g}), "
                         "got finite values beyond it")
    return out


def _groups(n_heads: int, n_kv_heads: int) -> int:
    if n_kv_heads == 0 or n_heads % n_kv_heads:
        raise ValueError(f"q's n_heads ({n_heads}) must be a multiple of the caches' n_kv_heads ({n_kv_heads})")
    return n_heads // n_kv_heads


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in the scores' dtype; rows that are entirely -inf are not allowed."""
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    return e / e.sum(axis=-1, keepdims=True)


def _finite(run: Callable[..., np.ndarray], *operands: np.ndarray) -> np.ndarray:
    """``run(*operands)`` on float32 operands; where finite operands overflow float32 on the way (a q.k beyond
    3.4e38), run again in float64. Each output row averages rows of v, so that result fits float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = run(*operands)
    if np.isfinite(out).all() or not all(np.isfinite(x).all() for x in operands):
        return out
    out = run(*(x.astype(np.float64) for x in operands))
    return np.clip(out, -_F32_MAX, _F32_MAX).astype(np.float32)  # the clip only removes rounding past max|v|


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True) -> np.ndarray:
    """Grouped-query attention of the last ``n_new`` context tokens: ``[n_new, n_heads, d]`` float32.

    NaN or inf in ``q``, ``k`` or ``v`` comes out as NaN or inf (values are not checked).
    """
    q = reals("q", q, 3)
    k = reals("k", k, 3)
    v = reals("v", v, 3)
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal must be a bool (True or False), got {causal!r}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {k.shape} and {v.shape}")
    n_new, n_heads, d = q.shape
    n_ctx, n_kv, dk = k.shape
    if dk != d:
        raise ValueError(f"k's head_dim ({dk}) must equal q's ({d})")
    if d == 0:
        raise ValueError("q's head_dim must be >= 1")
    if n_new > n_ctx:
        raise ValueError(f"q's n_new ({n_new}) must not exceed the context length n_ctx ({n_ctx})")
    g = _groups(n_heads, n_kv)
    q, k, v = cast("q", q, np.float32), cast("k", k, np.float32), cast("v", v, np.float32)
    if n_new == 0:
        return np.zeros((0, n_heads, d), np.float32)
    seen = np.arange(n_ctx)[None, :] <= np.arange(n_ctx - n_new, n_ctx)[:, None] if causal else None

    def run(qg: np.ndarray, kt: np.ndarray, vt: np.ndarray) -> np.ndarray:
        scores = (qg @ kt).reshape(n_kv, g, n_new, n_ctx) * qg.dtype.type(1 / np.sqrt(d))
        if seen is not None:
            scores = np.where(seen, scores, qg.dtype.type(-np.inf))
        return _softmax_rows(scores).reshape(n_kv, g * n_new, n_ctx) @ vt  # [n_kv, g * n_new, d]

    # [n_kv, g * n_new, d] @ [n_kv, d, n_ctx]: one BLAS matmul per KV head
    out = _finite(run, q.reshape(n_new, n_kv, g, d).transpose(1, 2, 0, 3).reshape(n_kv, g * n_new, d),
                  k.transpose(1, 2, 0), v.transpose(1, 0, 2))
    return out.reshape(n_kv, g, n_new, d).transpose(2, 0, 1, 3).reshape(n_new, n_heads, d)


def _check_cache(k_cache: object, v_cache: object) -> tuple[np.ndarray, np.ndarray]:
    kc = reals("k_cache", k_cache, 4)
    vc = reals("v_cache", v_cache, 4)
    if kc.shape != vc.shape:
        raise ValueError(f"k_cache and v_cache must have the same shape, got {kc.shape} and {vc.shape}")
    _pool("k_cache", kc)
    return kc, vc


def _pool(name: str, cache: np.ndarray) -> tuple[int, int]:
    """(num_blocks, block_size) of a cache ``[num_blocks, block_size, n_kv_heads, d]``."""
    if cache.shape[0] == 0 or cache.shape[1] == 0 or cache.shape[3] == 0:
        raise ValueError(f"{name}'s num_blocks, block_size and head_dim (shape[0], shape[1], shape[3]) must be >= 1, "
                         f"got shape {cache.shape}")
    return cache.shape[0], cache.shape[1]


def _block_ids(name: str, bt: np.ndarray, context_lens: np.ndarray, block_size: int, num_blocks: int | None
               ) -> np.ndarray:
    """Integer table ``bt`` (a row, or one row per entry of ``context_lens``, in tokens) as int64 block ids.

    The entries a context needs (the first ceil(context_len / block_size) of its row) must be block
    ids in [0, num_blocks); later ones may also be PAD. ``num_blocks=None`` leaves the bound open.
    """
    rows = bt if bt.ndim == 2 else bt[None, :]
    needed = -(-context_lens // block_size)
    ok = rows >= 0 if num_blocks is None else (rows >= 0) & (rows < num_blocks)
    bad = ~ok & ((np.arange(rows.shape[1]) < needed[:, None]) | (rows != PAD))
    if bad.any():
        r, j = np.argwhere(bad)[0]
        ids = "block ids >= 0" if num_blocks is None else f"block ids in [0, num_blocks = {num_blocks})"
        at = f"[{r}, {j}]" if bt.ndim == 2 else j
        raise ValueError(f"{name} entry {at} is {rows[r, j]}: the {needed[r]} entries the "
                         f"context needs must be {ids}; later ones such ids or PAD ({PAD})")
    return bt.astype(np.int64, copy=False)


def paged_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, block_tables: np.ndarray,
                    context_lens: np.ndarray) -> np.ndarray:
    """Attention of one decode token per sequence over K/V found through block tables: ``[batch, n_heads, d]`` float32.

    Row b attends to the first ``context_lens[b]`` tokens of its sequence (the new token's own
    K/V already written); no slot past them is read, so a row's result does not depend on its batch.
    NaN or inf in ``q`` or in the K/V a row reads comes out as NaN or inf in that row (values are not checked).
    """
    q = reals("q", q, 3)
    kc, vc = _check_cache(k_cache, v_cache)
    num_blocks, block_size, n_kv, d = kc.shape
    batch, n_heads, dq = q.shape
    if dq != d:
        raise ValueError(f"q's head_dim ({dq}) must equal the caches' ({d})")
    bt = indices("block_tables", block_tables, 2)
    lens = indices("context_lens", context_lens, 1)
    if len(bt) != batch or len(lens) != batch:
        raise ValueError(f"block_tables and context_lens must have one row per query of q ({batch}), "
                         f"got {len(bt)} and {len(lens)}")
    max_tokens = bt.shape[1] * block_size
    if batch and (lens.min() < 1 or lens.max() > max_tokens):  # compared before any arithmetic: unsigned can't wrap
        raise ValueError(f"context_lens must lie in [1, block_tables' columns x block_size = {max_tokens}], "
                         f"got values in [{lens.min()}, {lens.max()}]")
    lens = lens.astype(np.int64)
    bt = _block_ids("block_tables", bt, lens, block_size, num_blocks)
    g = _groups(n_heads, n_kv)
    q = cast("q", q, np.float32)
    if batch == 0:
        return np.zeros((0, n_heads, d), np.float32)
    # [batch, max_ctx, n_kv, d]: a row's padding reads its own token 0 (inside its context), then is zeroed
    pos = np.arange(int(lens.max()))
    valid = pos[None, :] < lens[:, None]
    pos = np.where(valid, pos, 0)
    blocks, slots = np.take_along_axis(bt, pos // block_size, axis=1), pos % block_size
    k = cast("k_cache", kc[blocks, slots], np.float32)  # fancy indexing copies: the caches stay untouched
    v = cast("v_cache", vc[blocks, slots], np.float32)
    k[~valid] = 0
    v[~valid] = 0

    def run(qg: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        # g query rows per KV head: matrix-vector work, where einsum's loops beat many tiny BLAS calls
        scores = np.einsum("bkgd,bmkd->bkgm", qg, k) * qg.dtype.type(1 / np.sqrt(d))
        scores = np.where(valid[:, None, None, :], scores, qg.dtype.type(-np.inf))
        return np.einsum("bkgm,bmkd->bkgd", _softmax_rows(scores), v)

    return _finite(run, q.reshape(batch, n_kv, g, d), k, v).reshape(batch, n_heads, d)


def _locate(block_table: object, start: int, n_tokens: int, block_size: int, num_blocks: int | None,
            length: str = "start + n_tokens") -> tuple[np.ndarray, np.ndarray]:
    """(physical block, slot in it) of positions start ... start + n_tokens - 1 (ints >= 0), via a checked table."""
    end = start + n_tokens
    table = indices("block_table", block_table, 1)
    if end > len(table) * block_size:
        raise ValueError(f"{length} ({end}) must fit block_table's {len(table)} blocks of {block_size} tokens")
    table = _block_ids("block_table", table, np.array([end]), block_size, num_blocks)
    pos = np.arange(start, end)
    return table[pos // block_size], pos % block_size


def slot_mapping(block_table: Sequence[int] | np.ndarray, start: int, n_tokens: int, block_size: int,
                 num_blocks: int | None = None) -> np.ndarray:
    """Flat cache slots (block * block_size + offset) of token positions start ... start + n_tokens - 1.

    With ``num_blocks`` the table's entries are also checked against the pool's size.
    """
    start = non_negative_int("start", start, at_most=MAX_COUNT)
    n_tokens = non_negative_int("n_tokens", n_tokens, at_most=MAX_COUNT)
    block_size = positive_int("block_size", block_size, at_most=MAX_COUNT)
    if num_blocks is not None:
        num_blocks = non_negative_int("num_blocks", num_blocks, at_most=MAX_COUNT)
    blocks, slots = _locate(block_table, start, n_tokens, block_size, num_blocks)
    return blocks * block_size + slots


def write_kv(k_cache: np.ndarray, v_cache: np.ndarray, block_table: Sequence[int] | np.ndarray, start: int,
             k: np.ndarray, v: np.ndarray) -> None:
    """Store K/V ``[n, n_kv_heads, d]`` of positions start ... start + n - 1 into their slots of the caches (in place)."""
    kc, vc = _check_cache(k_cache, v_cache)
    for name, c, given in (("k_cache", kc, k_cache), ("v_cache", vc, v_cache)):
        if not isinstance(given, np.ndarray) or c.dtype.kind != "f":
            raise ValueError(f"{name} must be a numpy array of a floating dtype (written in place), "
                             f"got {type(given).__name__} of dtype {c.dtype}")
    k = reals("k", k, 3)
    v = reals("v", v, 3)
    if k.shape != v.shape or k.shape[1:] != kc.shape[2:]:
        raise ValueError(f"k and v must both have shape [n, {kc.shape[2]}, {kc.shape[3]}], got {k.shape} and {v.shape}")
    blocks, slots = _locate(block_table, non_negative_int("start", start, at_most=MAX_COUNT), len(k), kc.shape[1],
                            kc.shape[0],
                            length="start + len(k)")
    k, v = cast("k", k, kc.dtype.type), cast("v", v, vc.dtype.type)  # both checked before either is written
    kc[blocks, slots] = k
    vc[blocks, slots] = v


def gather_kv(cache: np.ndarray, block_table: Sequence[int] | np.ndarray, n_tokens: int) -> np.ndarray:
    """The first ``n_tokens`` K (or V) rows of a sequence, in order: ``[n_tokens, n_kv_heads, d]``.

    A copy of what the cache holds, NaN or inf included (values are not checked).
    """
    c = reals("cache", cache, 4)
    num_blocks, block_size = _pool("cache", c)
    n = non_negative_int("n_tokens", n_tokens, at_most=MAX_COUNT)
    return c[_locate(block_table, 0, n, block_size, num_blocks, length="n_tokens")]


def paged_prefill_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                            block_table: Sequence[int] | np.ndarray, context_len: int) -> np.ndarray:
    """Causal attention of a chunk (the last ``len(q)`` of ``context_len`` tokens) over a paged cache.

    Returns ``[n_new, n_heads, d]``. NaN or inf in ``q`` or in the K/V the chunk reads comes out as NaN or inf
    (values are not checked).
    """
    kc, vc = _check_cache(k_cache, v_cache)
    q = reals("q", q, 3)
    n_ctx = non_negative_int("context_len", context_len, at_most=MAX_COUNT)
    if len(q) > n_ctx:
        raise ValueError(f"context_len ({n_ctx}) must be at least q's n_new ({len(q)}): the chunk is its last tokens")
    at = _locate(block_table, 0, n_ctx, kc.shape[1], kc.shape[0], length="context_len")
    return attention(q, cast("k_cache", kc[at], np.float32), cast("v_cache", vc[at], np.float32))


def tables_from_manager(manager: BlockManager, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """(block_tables ``[batch, max_blocks]`` padded with -1, context_lens ``[batch]``) of ``seq_ids`` in a BlockManager."""
    instance("manager", manager, BlockManager)
    seq_ids = items("seq_ids", seq_ids)
    for s in seq_ids:
        member("seq_ids", s, manager.seqs, "allocated sequences of the manager")
    tables = [manager.block_table(s) for s in seq_ids]
    lens = np.array([(len(t) - 1) * manager.block_size + manager.last_block_fill(s) if t else 0
                     for s, t in zip(seq_ids, tables)], dtype=np.int64)
    out = np.full((len(tables), max((len(t) for t in tables), default=0)), PAD, dtype=np.int64)
    for row, t in zip(out, tables):
        row[: len(t)] = t
    return out, lens
