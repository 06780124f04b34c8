"""A paged KV cache with real tensors: per-layer K/V block pools driven by an ``inferlab.kvcache.BlockManager``.

The block manager decides *which* physical block holds each token (block tables, sharing by
reference count and content hash, copy-on-write); this module holds *what* the blocks
contain: ``k`` and ``v`` arrays of shape ``[n_layers, num_blocks, block_size, n_kv_heads,
head_dim]``. Every copy-on-write the manager reports is applied to the arrays, so a
sequence always reads, through its block table, the K/V of exactly its own tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .._validate import non_negative_int, positive_int
from ..kvcache.block_manager import BlockManager, OutOfBlocks
from . import reference


@dataclass
class PagedKVCache:
    """K/V pools of ``num_blocks`` blocks of ``block_size`` tokens for every layer, plus their block manager."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    num_blocks: int
    block_size: int = 16
    prefix_caching: bool = True
    dtype: str = "float32"
    manager: BlockManager = field(init=False, repr=False)
    k: np.ndarray = field(init=False, repr=False)
    v: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("n_layers", "n_kv_heads", "head_dim", "num_blocks", "block_size"):
            positive_int(name, getattr(self, name))
        if self.dtype not in ("float32", "float16", "float64"):
            raise ValueError(f"dtype must be one of ['float16', 'float32', 'float64'], got {self.dtype!r}")
        self.manager = BlockManager(self.num_blocks, self.block_size, prefix_caching=self.prefix_caching)
        shape = (self.n_layers, self.num_blocks, self.block_size, self.n_kv_heads, self.head_dim)
        try:
            self.k = np.zeros(shape, self.dtype)
            self.v = np.zeros(shape, self.dtype)
        except (MemoryError, ValueError):  # beyond memory, or beyond numpy's largest array
            raise ValueError(f"n_layers x num_blocks x block_size x n_kv_heads x head_dim must fit in memory as two "
                             f"{self.dtype} pools, got {shape}") from None

    # ---- sizes ----------------------------------------------------------------------------
    @property
    def dtype_bytes(self) -> int:
        """Bytes of one stored K or V element."""
        return int(np.dtype(self.dtype).itemsize)

    @property
    def block_bytes(self) -> int:
        """Bytes one physical block holds over all layers, K and V."""
        return 2 * self.n_layers * self.block_size * self.n_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def bytes_in_use(self) -> int:
        """Bytes of the blocks currently referenced (or still read): what the requests hold."""
        return self.manager.num_used * self.block_bytes

    @property
    def pool_bytes(self) -> int:
        """Bytes of the whole pool (K and V arrays)."""
        return int(self.k.nbytes + self.v.nbytes)

    # ---- bookkeeping ----------------------------------------------------------------------
    def can_admit(self, tokens: Sequence[int]) -> bool:
        """Whether a sequence holding ``tokens`` can be admitted now."""
        return self.manager.can_allocate(tokens)

    def admit(self, seq_id: Hashable, tokens: Sequence[int]) -> int:
        """Give ``seq_id`` slots for ``tokens``; return how many leading tokens already have their K/V (prefix hit)."""
        if not self.can_admit(tokens):
            raise OutOfBlocks(f"{seq_id!r} needs {self.manager.blocks_needed(tokens)} blocks, "
                              f"{self.manager.num_free} free")
        return self.manager.allocate(seq_id, tokens)

    def can_append(self, seq_id: Hashable, n_tokens: int = 1) -> bool:
        """Whether ``n_tokens`` more tokens of ``seq_id`` fit now."""
        return self.manager.can_append(seq_id, n_tokens)

    def append(self, seq_id: Hashable, tokens: Sequence[int]) -> None:
        """Give ``seq_id`` slots for ``tokens`` after its last one, copying any block it shared (copy-on-write)."""
        for src, dst in self.manager.append(seq_id, tokens):
            self.k[:, dst] = self.k[:, src]
            self.v[:, dst] = self.v[:, src]

    def truncate(self, seq_id: Hashable, n_tokens: int) -> None:
        """Keep the first ``n_tokens`` of ``seq_id`` (roll back rejected draft tokens)."""
        self.manager.truncate(seq_id, n_tokens)

    def free(self, seq_id: Hashable) -> None:
        """Release ``seq_id``'s blocks (their K/V stays cached until the blocks are reused)."""
        self.manager.free(seq_id)

    def length(self, seq_id: Hashable) -> int:
        """Tokens whose slots ``seq_id`` holds."""
        return self.manager.num_tokens(seq_id)

    def block_table(self, seq_id: Hashable) -> list[int]:
        """Physical blocks of ``seq_id``, logical block 0 first."""
        return self.manager.block_table(seq_id)

    def tables(self, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """(block_tables padded with -1, context_lens) of ``seq_ids``, the arrays the kernels take."""
        return reference.tables_from_manager(self.manager, seq_ids)

    # ---- data -----------------------------------------------------------------------------
    def write(self, layer: int, seq_id: Hashable, start: int, k: np.ndarray, v: np.ndarray) -> None:
        """Store layer ``layer``'s K/V ``[n, n_kv_heads, head_dim]`` of positions start ... start + n - 1 of ``seq_id``."""
        layer = self._layer(layer)
        reference.write_kv(self.k[layer], self.v[layer], self.block_table(seq_id), start, k, v)

    def write_slots(self, layer: int, slots: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Store K/V rows at flat slots (block * block_size + offset) of layer ``layer`` (one decode token a sequence).

        Every argument is checked before either pool is written: a refused call changes nothing.
        """
        layer = self._layer(layer)
        at = reference.indices("slots", slots, 1)
        n_slots = self.num_blocks * self.block_size
        if at.size and (at.min() < 0 or at.max() >= n_slots):
            raise ValueError(f"slots must lie in [0, num_blocks x block_size = {n_slots}), "
                             f"got {at.min()} .. {at.max()}")
        rows = (len(at), self.n_kv_heads, self.head_dim)
        k, v = reference.reals("k", k, 3), reference.reals("v", v, 3)
        if k.shape != rows or v.shape != rows:
            raise ValueError(f"k and v must have shape [len(slots), n_kv_heads, head_dim] = {list(rows)}, "
                             f"got {k.shape} and {v.shape}")
        k, v = reference.cast("k", k, self.k.dtype.type), reference.cast("v", v, self.v.dtype.type)
        self.k[layer].reshape(-1, self.n_kv_heads, self.head_dim)[at] = k
        self.v[layer].reshape(-1, self.n_kv_heads, self.head_dim)[at] = v

    def read(self, layer: int, seq_id: Hashable) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``layer``'s K and V of every token of ``seq_id``, in order: two ``[n, n_kv_heads, head_dim]`` arrays."""
        layer = self._layer(layer)
        table, n = self.block_table(seq_id), self.length(seq_id)
        return reference.gather_kv(self.k[layer], table, n), reference.gather_kv(self.v[layer], table, n)

    def _layer(self, layer: int) -> int:
        if non_negative_int("layer", layer) >= self.n_layers:
            raise ValueError(f"layer must lie in [0, n_layers = {self.n_layers}), got {layer!r}")
        return int(layer)
