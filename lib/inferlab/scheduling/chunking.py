"""Chunked prefill arithmetic: causal pairs of a chunk, FLOP growth with history, weight re-reads, chunk size from a gap limit.

A chunk of c new tokens after h cached tokens has c*h + c(c+1)/2 causal query-key pairs: a
c x h rectangle (new tokens against the history) and a triangle (inside the chunk). With c
fixed the triangle stays and the rectangle widens as h grows (Chapter 8, section 8.2.3).
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import non_negative, non_negative_int, positive, positive_int
from ..models import ModelSpec, causal_pairs
from .iteration import CostFn, Work
from .simulator import Request

__all__ = ["causal_pairs", "pair_grid", "chunks", "chunk_flops", "flop_growth", "weight_reads",
           "chunked_prefill_time", "max_chunk_tokens"]

#: Cell values of ``pair_grid``.
FUTURE, HISTORY, IN_CHUNK = 0, 1, 2


def pair_grid(new_tokens: int, cached_tokens: int = 0) -> np.ndarray:
    """Grid of a chunk's query rows x key columns: HISTORY (c x h), IN_CHUNK (causal triangle), FUTURE (masked)."""
    c = positive_int("new_tokens", new_tokens)
    h = non_negative_int("cached_tokens", cached_tokens)
    grid = np.full((c, h + c), FUTURE, dtype=np.int8)
    grid[:, :h] = HISTORY
    rows, cols = np.tril_indices(c)
    grid[rows, h + cols] = IN_CHUNK
    return grid


def chunks(prompt_tokens: int, chunk_tokens: int, cached_tokens: int = 0) -> list[tuple[int, int]]:
    """(new tokens, cached tokens) of each piece when a prompt is prefilled ``chunk_tokens`` at a time."""
    p = positive_int("prompt_tokens", prompt_tokens)
    c = positive_int("chunk_tokens", chunk_tokens)
    h = non_negative_int("cached_tokens", cached_tokens)
    if h >= p:
        raise ValueError(f"cached_tokens ({h}) must be less than prompt_tokens ({p})")
    return [(min(c, p - start), start) for start in range(h, p, c)]


def chunk_flops(model: ModelSpec, new_tokens: int, cached_tokens: int = 0) -> float:
    """Backbone FLOP of one chunk (linear layers and attention, no lm_head)."""
    return model.flops(positive_int("new_tokens", new_tokens), cached_tokens, logits=0)


def flop_growth(model: ModelSpec, prompt_tokens: int, chunk_tokens: int) -> float:
    """Relative backbone FLOP of a prompt's last chunk over its first (0.32 = +32 %)."""
    pieces = chunks(prompt_tokens, chunk_tokens)
    (c0, h0), (c1, h1) = pieces[0], pieces[-1]
    return chunk_flops(model, c1, h1) / chunk_flops(model, c0, h0) - 1


def weight_reads(weight_bytes: float, tokens: int, chunk_tokens: int) -> float:
    """Bytes of ``weight_bytes`` read when ``tokens`` run in pieces of ``chunk_tokens``: one read per piece."""
    non_negative("weight_bytes", weight_bytes)
    return math.ceil(positive_int("tokens", tokens) / positive_int("chunk_tokens", chunk_tokens)) * weight_bytes


def chunked_prefill_time(cost: CostFn, prompt_tokens: int, chunk_tokens: int, cached_tokens: int = 0) -> float:
    """Seconds to prefill a prompt alone, one chunk per iteration, under ``cost``."""
    r = Request("prompt", 0.0, prompt_tokens, 1)
    total = 0.0
    for c, h in chunks(prompt_tokens, chunk_tokens, cached_tokens):
        total += cost([Work(r, "prefill", c, h, 1 if c + h == prompt_tokens else 0)])
    return total


def max_chunk_tokens(cost: CostFn, iteration_limit_s: float, cached_tokens: int,
                     decode_contexts: tuple[int, ...] = (), limit_tokens: int = 1 << 20) -> int:
    """Largest prompt piece after ``cached_tokens`` whose iteration (with decodes at ``decode_contexts``) fits the limit; 0 if none.

    The two-step rule of section 8.2.4: a gap limit gives the longest iteration; the context
    decides how many new tokens fit in it. Assumes ``cost`` grows with the piece (binary search).
    """
    positive("iteration_limit_s", iteration_limit_s)
    h = non_negative_int("cached_tokens", cached_tokens)
    r = Request("piece", 0.0, 1, 1)
    decodes = [Work(r, "decode", 1, non_negative_int("decode_contexts", d), 1) for d in decode_contexts]

    def fits(c: int) -> bool:
        return cost([*decodes, Work(r, "prefill", c, h, 0)]) <= iteration_limit_s

    if not fits(1):
        return 0
    lo, hi = 1, positive_int("limit_tokens", limit_tokens)
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
