"""CUDA-graph shape buckets: a batch of n rows runs as the smallest captured size >= n.

Captured graphs replay only at their recorded shapes, so n rows are padded up to the next
bucket; one row fewer saves nothing until n drops below the bucket beneath. More buckets mean
less padding but more capture time and a little more memory: the graphs share one memory pool
sized by the largest graph, and each graph adds its own small overhead (Chapter 8, section 8.2.4).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .._validate import non_negative, positive_int

__all__ = ["normalize", "bucket_for", "padded_rows", "padded_rows_each", "padding_rows", "padding_fraction", "bucket_costs",
           "powers_of_two", "multiples"]


def normalize(buckets: Iterable[int]) -> tuple[int, ...]:
    """Sorted, distinct captured sizes (each an integer >= 1)."""
    sizes = sorted({positive_int("buckets", b) for b in buckets})
    if not sizes:
        raise ValueError("buckets must hold at least one captured size")
    return tuple(sizes)


def bucket_for(rows: int, buckets: Iterable[int]) -> int | None:
    """Smallest captured size >= ``rows``, or None if ``rows`` exceeds every bucket (runs without a graph)."""
    n = positive_int("rows", rows)
    sizes = normalize(buckets)
    i = int(np.searchsorted(sizes, n))
    return sizes[i] if i < len(sizes) else None


def padded_rows(rows: int, buckets: Iterable[int]) -> int:
    """Rows actually computed: the bucket size, or ``rows`` itself past the largest bucket."""
    size = bucket_for(rows, buckets)
    return rows if size is None else size


def padded_rows_each(rows: Sequence[int] | np.ndarray, buckets: Iterable[int]) -> np.ndarray:
    """``padded_rows`` of every batch size in ``rows`` at once (int64 array; each size an integer >= 1)."""
    n = np.asarray(rows)
    if n.ndim != 1 or (n.size and (n.dtype.kind not in "iu" or n.min() < 1)):
        raise ValueError(f"rows must be a 1-D sequence of integers >= 1, got {rows!r:.80}")
    sizes = np.asarray(normalize(buckets))
    at = np.searchsorted(sizes, n)
    return np.where(at < sizes.size, sizes[np.minimum(at, sizes.size - 1)], n).astype(np.int64)


def padding_rows(rows: int, buckets: Iterable[int]) -> int:
    """Padding rows computed for nothing: padded_rows - rows."""
    return padded_rows(rows, buckets) - rows


def padding_fraction(rows: Sequence[int], buckets: Iterable[int]) -> float:
    """Share of computed rows that are padding, over a workload of batch sizes ``rows``."""
    sizes = normalize(buckets)
    if len(rows) == 0:
        raise ValueError("rows must not be empty")
    real = sum(positive_int("rows", r) for r in rows)
    return 1 - real / int(padded_rows_each(np.asarray(rows, dtype=np.int64), sizes).sum())


def bucket_costs(buckets: Iterable[int], capture_s_per_graph: float, buffer_bytes_per_row: float,
                 overhead_bytes_per_graph: float = 0.0) -> dict[str, float]:
    """Up-front capture seconds and resident bytes of a bucket set, with one memory pool shared by all graphs.

    vLLM captures the largest shape first so that the smaller graphs reuse its memory pool
    (``gpu_model_runner.capture_model``); the pool therefore scales with the *largest* captured
    rows (``largest x buffer_bytes_per_row``), and each extra graph adds only
    ``overhead_bytes_per_graph`` of its own and ``capture_s_per_graph`` of start-up time.
    Returns graphs, largest, capture_s, pool_bytes, overhead_bytes and memory_bytes (pool + overhead).
    """
    sizes = normalize(buckets)
    non_negative("capture_s_per_graph", capture_s_per_graph)
    non_negative("buffer_bytes_per_row", buffer_bytes_per_row)
    non_negative("overhead_bytes_per_graph", overhead_bytes_per_graph)
    pool = sizes[-1] * buffer_bytes_per_row
    overhead = len(sizes) * overhead_bytes_per_graph
    return {
        "graphs": len(sizes),
        "largest": sizes[-1],
        "capture_s": len(sizes) * capture_s_per_graph,
        "pool_bytes": pool,
        "overhead_bytes": overhead,
        "memory_bytes": pool + overhead,
    }


def powers_of_two(largest: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``largest`` (inclusive when a power of two)."""
    top = positive_int("largest", largest)
    return tuple(1 << i for i in range(top.bit_length()))


def multiples(step: int, largest: int, small: Iterable[int] = (1, 2, 4)) -> tuple[int, ...]:
    """``small`` sizes plus every multiple of ``step`` up to ``largest`` (vLLM's capture-size pattern)."""
    s = positive_int("step", step)
    top = positive_int("largest", largest)
    return normalize([*[b for b in small if b <= top], *range(s, top + 1, s)])
