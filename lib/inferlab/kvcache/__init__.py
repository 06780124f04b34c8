"""The KV cache (section 8.3): paged blocks, sharing, copy-on-write, prefix caching and eviction.

- ``block_manager``: the block pool with reference counts and per-sequence block tables (PagedAttention's
  CPU side), sharing by hash and copy-on-write; ``block_index``: the exact-content index of full blocks it
  looks prefixes up in;
- ``capacity``: how many requests fit, in sympy, and both admission rules run on a real pool; ``contiguous``:
  reserving or growing in place, the allocators paging replaces; ``symbolic``: the section's sympy forms;
- ``radix``: a radix tree of cached prefixes with locks and eviction policies (SGLang's RadixCache);
- ``value``: what a cached prefix is worth (keep, fetch or recompute);
- ``snapshots``: prefix reuse in hybrid attention/recurrent models through state snapshots;
- ``scenarios``: the section's worked scenarios (freeing, copy-on-write, preemption) run on a real pool.
"""

from .block_manager import MAX_BLOCKS, BlockManager, OutOfBlocks, PoolState, SeqState
from .capacity import ReservationRun, admit_and_decode, max_batch, pool_blocks
from .radix import (LRU, Match, RadixCache, RadixNode, ValuePerByte, eviction_sweep, replay, smallest_pool,
                    standard_policies)
from .value import (ContextUpdate, PrefixCost, best_use_of_space, break_even_hit_probability, context_update_options,
                    expected_saving, generation_time, keep_ratio_threshold, prefix_cost, recompute_to_fetch_ratio,
                    slowest_paying_link)
from .value import SessionGap, session_gaps

__all__ = [
    "MAX_BLOCKS", "BlockManager", "OutOfBlocks", "PoolState", "SeqState", "ReservationRun", "admit_and_decode",
    "max_batch", "pool_blocks", "LRU", "Match", "RadixCache", "RadixNode",
    "ValuePerByte", "eviction_sweep", "replay", "smallest_pool", "standard_policies", "ContextUpdate", "PrefixCost",
    "best_use_of_space", "break_even_hit_probability", "context_update_options", "expected_saving", "generation_time",
    "keep_ratio_threshold", "prefix_cost", "recompute_to_fetch_ratio", "slowest_paying_link",
    "SessionGap", "session_gaps",
]
