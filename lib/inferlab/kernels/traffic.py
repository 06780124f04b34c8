"""What one batched decode step of the tiny decoder reads (section 8.2.1): shared weights once, private KV per row.

``TinyQwen3.decode`` stacks one row per sequence into a matrix and multiplies it by every weight
matrix once, so the weights a step fetches do not depend on how many sequences it serves. Its
attention then reads, for each sequence, only that sequence's K and V through its own block table.
``decode_traffic`` counts both on the real arrays after such a step: the weights (every array but
the input embedding, of which a step looks up one row per token) once, and per sequence
2 x layers x KV heads x head_dim x element bytes per token it holds. At the arrays' element size
these are ``ModelSpec.matrix_weight_bytes`` and ``ModelSpec.kv_bytes_per_token`` of the model's
``TinyConfig.spec``: D(b, L) = D_w + sum of L_i k over the batch is the count of what this code reads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .._validate import distinct_ids, instance
from .paged_kv import PagedKVCache
from .tiny_model import TinyQwen3

__all__ = ["StepTraffic", "decode_traffic"]

#: The one weight array a decode step does not stream through a matrix product: it looks up rows.
_LOOKED_UP = ("embed",)


@dataclass(frozen=True)
class StepTraffic:
    """Bytes of one decode step: the weights, read once for the whole batch, and each sequence's own KV."""

    weight_bytes: int
    kv_bytes: dict[Hashable, int]

    @property
    def batch(self) -> int:
        """Sequences (rows) the step served."""
        return len(self.kv_bytes)

    @property
    def total_bytes(self) -> int:
        """Everything the step read: D = D_w + the KV of every sequence."""
        return self.weight_bytes + sum(self.kv_bytes.values())

    @property
    def bytes_per_output_token(self) -> float:
        """The step's bytes spread over its output tokens, one per sequence: d = D / b."""
        return self.total_bytes / self.batch


def decode_traffic(model: TinyQwen3, cache: PagedKVCache, seq_ids: Sequence[Hashable]) -> StepTraffic:
    """Bytes the decode step just run over ``seq_ids`` read: its weights once, and each sequence's K and V.

    Call it after ``model.decode(cache, seq_ids, ...)``: a sequence's context is then every token it
    holds in ``cache``, the one fed in this step included (the step wrote its K/V and attended to it).
    """
    instance("model", model, TinyQwen3)
    instance("cache", cache, PagedKVCache)
    c = model.config
    if (cache.n_layers, cache.n_kv_heads, cache.head_dim) != (c.n_layers, c.n_kv_heads, c.head_dim):
        raise ValueError(f"cache must be shaped for model (layers, KV heads, head_dim = {c.n_layers}, {c.n_kv_heads}, "
                         f"{c.head_dim}), got {cache.n_layers}, {cache.n_kv_heads}, {cache.head_dim}")
    seq_ids = distinct_ids("seq_ids", seq_ids)
    per_token = 2 * c.n_layers * c.n_kv_heads * c.head_dim * cache.dtype_bytes
    kv: dict[Hashable, int] = {}
    for s in seq_ids:
        try:
            kv[s] = cache.length(s) * per_token
        except ValueError:
            raise ValueError(f"seq_ids must name sequences held in cache, got {s!r:.80}") from None
    weights = sum(int(a.nbytes) for name, a in model.w.items() if name not in _LOOKED_UP)
    return StepTraffic(weights, kv)
