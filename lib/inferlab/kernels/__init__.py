"""Kernels: attention over a paged KV cache, with real tensors.

- ``reference``: the numpy reference kernels (causal grouped-query attention, paged attention over block
  tables, and the slot mapping, write and gather that move K/V in and out of the pool);
- ``paged_kv``: per-layer K/V block pools driven by a ``kvcache.BlockManager``;
- ``tiny_model``: a tiny Qwen3-style decoder in numpy that runs for real over that cache;
- ``triton_paged``: the same decode attention in Triton, reading K/V in place through the block table (it
  imports torch and triton, so it is not imported here; the GPU measurements in ``inferlab.gpu`` run it).
"""

from .paged_kv import PagedKVCache
from .reference import (PAD, attention, gather_kv, paged_attention, paged_prefill_attention, slot_mapping,
                        tables_from_manager, write_kv)
from .tiny_model import TinyConfig, TinyQwen3

__all__ = [
    "PAD", "attention", "gather_kv", "paged_attention", "paged_prefill_attention", "slot_mapping",
    "tables_from_manager", "write_kv", "PagedKVCache", "TinyConfig", "TinyQwen3",
]
