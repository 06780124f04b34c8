"""Chunked prefill arithmetic: causal pairs of a chunk, FLOP growth with history, weight re-reads, chunk size from a gap limit.

``piece_size_sweep`` runs section 8.2.2's example once per piece size: the trade-off table of section 8.2.3.

A chunk of c new tokens after h cached tokens has c*h + c(c+1)/2 causal query-key pairs: a
c x h rectangle (new tokens against the history) and a triangle (inside the chunk). With c
fixed the triangle stays and the rectangle widens as h grows (Chapter 8, section 8.2.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from .._validate import items, non_negative, non_negative_int, positive, positive_int
from ..models import ModelSpec, causal_pairs
from ..units import ms
from .iteration import FITTED_COST, CostFn, Work
from .simulator import EXAMPLE_MAX_RUNNING, Request, example_requests, run_example

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["causal_pairs", "pair_grid", "chunks", "chunk_flops", "flop_growth", "weight_reads",
           "chunked_prefill_time", "max_chunk_tokens", "PIECE_SIZES", "piece_size_sweep"]

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


#: The piece sizes of section 8.2.3's trade-off table: 256 tokens up to the whole 8K prompt.
PIECE_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def piece_size_sweep(chunk_sizes: Iterable[int] = PIECE_SIZES, cost: CostFn = FITTED_COST) -> "pd.DataFrame":
    """Section 8.2.2's example with every prompt cut into pieces of each size: what a smaller piece buys and costs.

    One row per piece size ``c`` (index "piece c", in the order given), each from a chunked run of the example
    (``run_example``) under ``cost``. Its token budget is one piece plus one decode per running request
    (``c + EXAMPLE_MAX_RUNNING``): a whole piece always fits beside the running decodes, though a second
    prompt's piece does not (pieces are kept whole: ``run_example``'s default).

    Columns: "budget" (tokens per iteration); "8K alone (ms)", the example's longest prompt (8192 tokens)
    prefilled by itself in pieces of ``c`` (``chunked_prefill_time``); "all done (ms)", the run's makespan;
    "longest gap (ms)", its longest gap between two tokens of one request.
    """
    import pandas as pd

    sizes = [positive_int("chunk_sizes", c) for c in items("chunk_sizes", chunk_sizes)]
    if not sizes:
        raise ValueError("chunk_sizes must name at least one piece size")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"chunk_sizes must not repeat a size, got {sizes!r:.80}")
    longest = max(r.prompt_tokens for r in example_requests())
    rows = []
    for chunk in sizes:
        budget = chunk + EXAMPLE_MAX_RUNNING
        run = run_example("chunked", cost, token_budget=budget, chunk_tokens=chunk)
        rows.append({"piece c": chunk, "budget": budget,
                     "8K alone (ms)": chunked_prefill_time(cost, longest, chunk) / ms,
                     "all done (ms)": run.makespan_s / ms, "longest gap (ms)": run.max_itl_s / ms})
    return pd.DataFrame(rows).set_index("piece c")
