"""Paged KV cache bookkeeping: a block pool with reference counts and per-sequence block tables.

This is the CPU side of PagedAttention (vLLM, nano-vllm): no tensors, only block ids. A
sequence's *block table* maps logical block i (token positions i*p ... i*p+p-1) to a
physical block. Blocks are shared by reference counting:

* ``fork`` gives a child every block of its parent (refcount + 1 each);
* a full block is also shared *by content*: its chained hash (hash of the previous block's
  hash and its own tokens) is looked up when a sequence is admitted, and a hit is verified
  against the tokens stored in the block *and* against the exact physical block it was
  chained after, so a hash collision can never alias two contexts. This is deliberately
  stricter than vLLM, which trusts the chain hash alone: when two physical copies of the
  same prefix block exist, a block registered after one copy is not found through the other
  (a lost hit, never a wrong one);
* like vLLM and SGLang, at least the last prompt token is always computed (its logits give
  the first output token), so a hit is capped at ``(len(tokens) - 1) // block_size`` blocks:
  a prompt that is entirely cached still recomputes its last block;
* writing into a shared, partially filled tail copies it first (copy-on-write); a submitted
  step that reads a block counts as one more reader, so a rolled-back slot it reads is never
  overwritten in place while the step is in flight;
* a block whose last reference is dropped while an in-flight step still reads it is
  *draining*: it returns to the free pool only when that step completes.

Freed blocks keep their tokens and hash until they are reused (oldest freed first), so a
sequence admitted again after preemption finds its full prefix blocks still cached.

Block states: free (in the free list, refcount 0, not read by a step), referenced
(refcount > 0) or draining (refcount 0, read by an in-flight step). free + used = total,
where used = referenced + draining.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validate import non_negative_int, positive_int

HashFn = Callable[[int | None, tuple[int, ...]], int]


class OutOfBlocks(RuntimeError):
    """Raised when an operation needs more free blocks than the pool has (check ``can_*`` first)."""


def chained_hash(prev_hash: int | None, tokens: tuple[int, ...]) -> int:
    """64-bit hash of a full block's tokens chained to its predecessor's hash (None for block 0)."""
    h = hashlib.blake2b(b"root" if prev_hash is None else prev_hash.to_bytes(8, "little"), digest_size=8)
    h.update(np.asarray(tokens, dtype=np.int64).tobytes())
    return int.from_bytes(h.digest(), "little")


@dataclass
class Block:
    """One physical block: the tokens whose KV it stores, its refcount and content hash."""

    block_id: int
    ref_count: int = 0
    tokens: list[int] = field(default_factory=list)
    hash: int | None = None  # set only while the block is full and registered for sharing
    parent: tuple[int, int] | None = None  # (block id, generation) of the predecessor it was hashed after
    generation: int = 0  # bumped whenever the block's content is replaced
    context: int | None = None  # chained_hash of every token before the block's first slot (None: none)


@dataclass
class SeqState:
    """A sequence's tokens (its KV, in order) and its block table; empty table when preempted."""

    tokens: list[int]
    block_table: list[int] = field(default_factory=list)
    preempted: bool = False


@dataclass(frozen=True)
class PoolState:
    """Snapshot of a ``BlockManager``: what a figure of the pool needs."""

    block_size: int
    tables: dict[Hashable, tuple[int, ...]]
    lengths: dict[Hashable, int]
    ref_counts: tuple[int, ...]
    contents: tuple[tuple[int, ...], ...]
    free: frozenset[int]
    draining: frozenset[int]

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool."""
        return len(self.ref_counts)

    @property
    def used_blocks(self) -> int:
        """Blocks not in the free pool."""
        return self.num_blocks - len(self.free)

    @property
    def references(self) -> int:
        """Block-table entries over all sequences."""
        return sum(len(t) for t in self.tables.values())


class BlockManager:
    """Allocator of ``num_blocks`` KV blocks of ``block_size`` tokens, shared by reference counts."""

    def __init__(self, num_blocks: int, block_size: int = 16, prefix_caching: bool = True,
                 hash_fn: HashFn = chained_hash, free_order: Sequence[int] | None = None) -> None:
        self.num_blocks = positive_int("num_blocks", num_blocks)
        self.block_size = positive_int("block_size", block_size)
        self.prefix_caching = bool(prefix_caching)
        self.hash_fn = hash_fn
        self.blocks = [Block(i) for i in range(num_blocks)]
        order = list(range(num_blocks)) if free_order is None else [int(b) for b in free_order]
        if sorted(order) != list(range(num_blocks)):
            raise ValueError("free_order must be a permutation of range(num_blocks)")
        self.free_ids: OrderedDict[int, None] = OrderedDict.fromkeys(order)  # taken from the front
        self.hash_to_block: dict[int, int] = {}
        self.seqs: dict[Hashable, SeqState] = {}
        self.in_flight: dict[int, int] = {}  # block id -> number of in-flight steps reading it
        self._steps: dict[int, list[int]] = {}
        self._next_step = 0
        self.recomputed_tokens = 0  # tokens that preempted sequences must run again on resume
        self.cached_tokens_total = 0  # tokens found by content hash at admission

    # ---- queries ----------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks in the free pool."""
        return len(self.free_ids)

    @property
    def num_used(self) -> int:
        """Blocks referenced by a table or still read by an in-flight step."""
        return self.num_blocks - len(self.free_ids)

    @property
    def num_draining(self) -> int:
        """Blocks with no reference that wait for an in-flight step to finish."""
        return sum(1 for b in self.blocks if b.ref_count == 0 and b.block_id not in self.free_ids)

    def block_table(self, seq_id: Hashable) -> list[int]:
        """Physical block ids of ``seq_id``, logical block 0 first."""
        return list(self._seq(seq_id).block_table)

    def num_tokens(self, seq_id: Hashable) -> int:
        """Tokens whose KV ``seq_id`` holds."""
        return len(self._seq(seq_id).tokens)

    def last_block_fill(self, seq_id: Hashable) -> int:
        """Filled slots of the sequence's last block (block_size when it is full, 0 when empty)."""
        n = self.num_tokens(seq_id)
        return 0 if n == 0 else (n - 1) % self.block_size + 1

    def read(self, seq_id: Hashable) -> list[int]:
        """The tokens ``seq_id`` sees through its block table (what attention would read)."""
        seq = self._seq(seq_id)
        n, p = len(seq.tokens), self.block_size
        out: list[int] = []
        for i, bid in enumerate(seq.block_table):
            out.extend(self.blocks[bid].tokens[: min(p, n - i * p)])
        return out

    def blocks_needed(self, tokens: Sequence[int]) -> int:
        """Free blocks that admitting ``tokens`` would take (cached blocks already in use cost none)."""
        tokens = self._tokens(tokens)
        hits = self._match(tokens)
        in_use = sum(1 for bid in hits if self.blocks[bid].ref_count > 0 or bid not in self.free_ids)
        return -(-len(tokens) // self.block_size) - in_use

    def can_allocate(self, tokens: Sequence[int]) -> bool:
        """Whether ``tokens`` can be admitted now."""
        return self.blocks_needed(tokens) <= self.num_free

    def append_blocks_needed(self, seq_id: Hashable, n_tokens: int = 1) -> int:
        """Free blocks that appending ``n_tokens`` to ``seq_id`` would take (new blocks + a copy-on-write)."""
        non_negative_int("n_tokens", n_tokens)
        seq = self._seq(seq_id)
        n, p = len(seq.tokens), self.block_size
        new = -(-(n + n_tokens) // p) - len(seq.block_table)
        cow = n_tokens > 0 and n % p != 0 and self._must_copy(seq.block_table[-1], n % p)
        return new + int(cow)

    def can_append(self, seq_id: Hashable, n_tokens: int = 1) -> bool:
        """Whether ``n_tokens`` can be appended to ``seq_id`` now."""
        return self.append_blocks_needed(seq_id, n_tokens) <= self.num_free

    def state(self) -> PoolState:
        """A frozen copy of the pool for drawing and comparing: tables, refcounts, contents, states."""
        return PoolState(
            block_size=self.block_size,
            tables={s: tuple(q.block_table) for s, q in self.seqs.items()},
            lengths={s: len(q.tokens) for s, q in self.seqs.items()},
            ref_counts=tuple(b.ref_count for b in self.blocks),
            contents=tuple(tuple(b.tokens) for b in self.blocks),
            free=frozenset(self.free_ids),
            draining=frozenset(b.block_id for b in self.blocks if b.ref_count == 0 and b.block_id not in self.free_ids),
        )

    # ---- admission, growth, sharing --------------------------------------------------
    def allocate(self, seq_id: Hashable, tokens: Sequence[int]) -> int:
        """Admit ``seq_id`` holding ``tokens``; return how many leading tokens were found cached (no prefill)."""
        if seq_id in self.seqs and not self.seqs[seq_id].preempted:
            raise ValueError(f"seq_id {seq_id!r} is already allocated")
        tokens = self._tokens(tokens)
        if not self.can_allocate(tokens):
            raise OutOfBlocks(f"{seq_id!r} needs {self.blocks_needed(tokens)} blocks, {self.num_free} free")
        hits = self._match(tokens)
        table = []
        for bid in hits:
            self._ref(bid)
            table.append(bid)
        seq = SeqState(tokens=tokens[: len(hits) * self.block_size], block_table=table)
        self.seqs[seq_id] = seq
        self._write(seq, tokens[len(hits) * self.block_size:])
        cached = len(hits) * self.block_size
        self.cached_tokens_total += cached
        return cached

    def append(self, seq_id: Hashable, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """Append ``tokens`` to ``seq_id`` (new blocks on demand); return the (src, dst) block copies made."""
        seq = self._seq(seq_id)
        if seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is preempted; allocate it again first")
        tokens = self._tokens(tokens)
        if not self.can_append(seq_id, len(tokens)):
            raise OutOfBlocks(f"{seq_id!r} needs {self.append_blocks_needed(seq_id, len(tokens))} blocks, "
                              f"{self.num_free} free")
        return self._write(seq, tokens)

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Give ``child_id`` the parent's tokens and every one of its blocks (no copy until a write)."""
        parent = self._seq(parent_id)
        if parent.preempted:
            raise ValueError(f"parent_id {parent_id!r} is preempted")
        if child_id in self.seqs:
            raise ValueError(f"child_id {child_id!r} already exists")
        for bid in parent.block_table:
            self._ref(bid)
        self.seqs[child_id] = SeqState(tokens=list(parent.tokens), block_table=list(parent.block_table))

    def truncate(self, seq_id: Hashable, n_tokens: int) -> None:
        """Keep the first ``n_tokens`` of ``seq_id`` (roll back rejected tokens), releasing emptied blocks."""
        seq = self._seq(seq_id)
        non_negative_int("n_tokens", n_tokens)
        if n_tokens > len(seq.tokens):
            raise ValueError(f"n_tokens ({n_tokens}) must not exceed the sequence length ({len(seq.tokens)})")
        keep = -(-n_tokens // self.block_size)
        for bid in seq.block_table[keep:]:
            self._unref(bid)
        del seq.block_table[keep:]
        del seq.tokens[n_tokens:]

    def free(self, seq_id: Hashable) -> None:
        """Drop ``seq_id`` and its references; blocks read by an in-flight step return when it completes."""
        seq = self._seq(seq_id)
        for bid in reversed(seq.block_table):  # tail first: it is the least likely to be reused
            self._unref(bid)
        del self.seqs[seq_id]

    def preempt(self, seq_id: Hashable) -> int:
        """Evict ``seq_id``'s blocks (recompute policy); return the tokens it must run again on resume."""
        seq = self._seq(seq_id)
        if seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is already preempted")
        for bid in reversed(seq.block_table):
            self._unref(bid)
        seq.block_table = []
        seq.preempted = True
        self.recomputed_tokens += len(seq.tokens)
        return len(seq.tokens)

    def resume(self, seq_id: Hashable) -> int:
        """Re-admit a preempted sequence; return the tokens to recompute (at least one: the last token)."""
        seq = self._seq(seq_id)
        if not seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is not preempted")
        cached = self.allocate(seq_id, seq.tokens)
        self.recomputed_tokens -= cached
        return len(self.seqs[seq_id].tokens) - cached

    # ---- in-flight steps -------------------------------------------------------------
    def begin_step(self, seq_ids: Sequence[Hashable]) -> int:
        """Mark the blocks of ``seq_ids`` as read by a submitted accelerator step; return its id."""
        bids = [bid for s in seq_ids for bid in self._seq(s).block_table]
        for bid in bids:
            self.in_flight[bid] = self.in_flight.get(bid, 0) + 1
        step = self._next_step
        self._next_step += 1
        self._steps[step] = bids
        return step

    def end_step(self, step_id: int) -> int:
        """Complete a step; return how many draining blocks went back to the free pool."""
        if step_id not in self._steps:
            raise ValueError(f"step_id {step_id!r} is not in flight")
        returned = 0
        for bid in self._steps.pop(step_id):
            self.in_flight[bid] -= 1
            if self.in_flight[bid] == 0:
                del self.in_flight[bid]
                if self.blocks[bid].ref_count == 0:
                    self.free_ids[bid] = None
                    returned += 1
        return returned

    @property
    def steps_in_flight(self) -> list[int]:
        """Ids of submitted steps that have not completed."""
        return list(self._steps)

    # ---- internals -------------------------------------------------------------------
    def _seq(self, seq_id: Hashable) -> SeqState:
        if seq_id not in self.seqs:
            raise ValueError(f"seq_id {seq_id!r} is not allocated")
        return self.seqs[seq_id]

    @staticmethod
    def _tokens(tokens: Sequence[int]) -> list[int]:
        """``tokens`` as a list of non-negative ints (ValueError naming ``tokens`` otherwise)."""
        out = []
        for t in tokens:
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
                raise ValueError(f"tokens must be non-negative integer token ids, got {t!r}")
            out.append(int(t))
        return out

    def _must_copy(self, bid: int, fill: int) -> bool:
        """Whether writing slot ``fill`` of block ``bid`` needs a copy: another table or an in-flight step reads it."""
        block = self.blocks[bid]
        return block.ref_count > 1 or (bid in self.in_flight and len(block.tokens) > fill)

    def _match(self, tokens: Sequence[int]) -> list[int]:
        """Cached blocks for the leading full blocks of ``tokens``, verified token by token and by parent.

        The match stops one token short of the end (``(len(tokens) - 1) // block_size`` blocks
        at most), as in vLLM's ``get_computed_blocks``: the last prompt token must run to give
        the logits of the first output token.
        """
        if not self.prefix_caching:
            return []
        p, prev, hits = self.block_size, None, []
        for i in range(max(len(tokens) - 1, 0) // p):
            chunk = tuple(int(t) for t in tokens[i * p:(i + 1) * p])
            prev = self.hash_fn(prev, chunk)
            bid = self.hash_to_block.get(prev)
            parent = (hits[-1], self.blocks[hits[-1]].generation) if hits else None
            block = self.blocks[bid] if bid is not None else None
            if block is None or block.hash != prev or block.parent != parent or tuple(block.tokens) != chunk:
                break  # a collision or a stale entry: the stored tokens and chain are the truth
            hits.append(bid)
        return hits

    def _ref(self, bid: int) -> None:
        block = self.blocks[bid]
        if block.ref_count == 0:
            self.free_ids.pop(bid, None)  # a cached free block comes back into use
        block.ref_count += 1

    def _unref(self, bid: int) -> None:
        block = self.blocks[bid]
        if block.ref_count <= 0:
            raise RuntimeError(f"double free of block {bid}")
        block.ref_count -= 1
        if block.ref_count == 0 and bid not in self.in_flight:
            self.free_ids[bid] = None

    def _take_free(self, context: int | None) -> int:
        bid, _ = self.free_ids.popitem(last=False)
        block = self.blocks[bid]
        self._unregister(block)
        block.tokens, block.parent, block.generation = [], None, block.generation + 1
        block.ref_count, block.context = 1, context
        return bid

    def _unregister(self, block: Block) -> None:
        if block.hash is not None and self.hash_to_block.get(block.hash) == block.block_id:
            del self.hash_to_block[block.hash]
        block.hash = None

    def _write(self, seq: SeqState, tokens: list[int]) -> list[tuple[int, int]]:
        """Write ``tokens`` after the sequence's last token: copy a shared tail, fill, open new blocks."""
        p, copies = self.block_size, []
        for t in tokens:
            n = len(seq.tokens)
            if n % p == 0:
                if seq.block_table:
                    last = self.blocks[seq.block_table[-1]]
                    context = chained_hash(last.context, tuple(seq.tokens[n - p:n]))
                else:
                    context = None
                seq.block_table.append(self._take_free(context))
            else:
                block = self.blocks[seq.block_table[-1]]
                fill = n % p
                if self._must_copy(block.block_id, fill):  # copy-on-write: a table or a step still reads it
                    new = self._take_free(block.context)
                    self.blocks[new].tokens = block.tokens[:fill]
                    self._unref(block.block_id)
                    seq.block_table[-1] = new
                    copies.append((block.block_id, new))
                elif len(block.tokens) > fill or block.hash is not None:  # rolled back: overwrite in place
                    self._unregister(block)
                    del block.tokens[fill:]
                    block.parent, block.generation = None, block.generation + 1
            block = self.blocks[seq.block_table[-1]]
            block.tokens.append(t)
            seq.tokens.append(t)
            if len(seq.tokens) % p == 0 and self.prefix_caching:
                self._register(seq, len(seq.block_table) - 1)
        return copies

    def _register(self, seq: SeqState, index: int) -> None:
        """Give the full block at logical ``index`` its chained hash so later sequences can share it."""
        p = self.block_size
        before = self.blocks[seq.block_table[index - 1]] if index else None
        if before is not None and before.hash is None:  # predecessor not registered: cannot chain
            return
        prev = self.hash_fn(before.hash if before else None, tuple(seq.tokens[index * p:(index + 1) * p]))
        block = self.blocks[seq.block_table[index]]
        if block.hash == prev:
            return
        self._unregister(block)
        block.hash = prev
        block.parent = (before.block_id, before.generation) if before else None
        self.hash_to_block.setdefault(prev, block.block_id)

