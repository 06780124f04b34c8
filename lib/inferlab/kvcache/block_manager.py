"""Paged KV cache bookkeeping: a block pool with reference counts and per-sequence block tables.

This is the CPU side of PagedAttention (vLLM, nano-vllm): no tensors, only block ids. A
sequence's *block table* maps logical block i (token positions i*p ... i*p+p-1) to a
physical block. Blocks are shared by reference counting:

* ``fork`` gives a child every block of its parent (refcount + 1 each);
* a block is also shared *by content*: every block that becomes full, at admission or by
  decode, is registered in a ``BlockIndex`` under its tokens and its exact prefix; admission
  looks up its leading full blocks there. A hit is verified against the block's tokens and
  its predecessor's node (by induction, the whole prefix), so a hash collision never aliases
  two contexts; when several physical copies of a block exist, a live one is taken first;
* like vLLM and SGLang, at least the last prompt token is always computed (its logits give
  the first output token), so a hit is capped at ``(len(tokens) - 1) // block_size`` blocks:
  a prompt that is entirely cached still recomputes its last block;
* writing into a shared, partially filled tail copies it first (copy-on-write); a submitted
  step that reads a block counts as one more reader, so a rolled-back slot it reads is never
  overwritten in place while the step is in flight. A write drops whatever the block held
  after the written slot (a rolled-back full block leaves the index);
* a block whose last reference is dropped while an in-flight step still reads it is
  *draining*: it returns to the free pool only when that step completes.

Freed blocks keep their tokens and registration until they are reused (never-used blocks
first, then the oldest freed), so a sequence admitted again after preemption finds its full
blocks still cached.

Block states: free (refcount 0, not read by a step), referenced (refcount > 0) or draining
(refcount 0, read by an in-flight step). free + used = total, where used = referenced +
draining.

Refused operations change nothing: token ids (Python or numpy ints, not bools, in
[0, vocab_size), 2**63 by default) are checked for the whole list before any block moves,
and a check that fails raises ``ValueError`` (bad input) or ``OutOfBlocks`` (no room), so a
retry works. Every sequence holds at least one token (an empty prompt and ``truncate`` to 0
are refused), so a resume always recomputes at least the last token. ``recomputed_tokens``
counts what resumes actually ran again; a preempted sequence may be truncated or freed.

Size limit: ``num_blocks`` up to 2**31 - 1 (block ids fit int32, as in vLLM's block tables).
Construction takes constant time and memory (O(num_blocks) only with ``free_order``):
``BlockManager(10**7)`` takes microseconds and under 1 KB. Memory grows with the blocks
actually used, about 1.6 KB per 16-token block counting the sequences' own token lists.
``state()`` is O(num_blocks): it is for figures.

This file is long because one class keeps the pool's invariants (reference counts, draining blocks,
the content index, copy-on-write) and every method that moves a block must see all of that state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .._validate import TOKEN_ID_LIMIT, flag, instance, mapping, member, non_negative_int, positive_int, token_ids
from .block_index import BlockIndex, HashFn, PrefixNode, chained_hash

__all__ = ["MAX_BLOCKS", "BlockManager", "OutOfBlocks", "PoolState", "SeqState"]

MAX_BLOCKS = 2**31 - 1


class OutOfBlocks(RuntimeError):
    """Raised when an operation needs more free blocks than the pool has (check ``can_*`` first)."""


class _Block:
    """A physical block that has been used: refcount, the tokens whose KV it holds, its index node."""

    __slots__ = ("ref", "tokens", "node")

    def __init__(self) -> None:
        self.ref = 1
        self.tokens: list[int] = []
        self.node: PrefixNode | None = None


@dataclass(slots=True)
class SeqState:
    """A sequence's tokens (its KV, in order) and its block table; empty table when preempted."""

    tokens: list[int]
    block_table: list[int] = field(default_factory=list)
    preempted: bool = False
    tail: _Block | None = None  # the block of block_table[-1], for the decode step

    def __post_init__(self) -> None:
        # the manager creates empty states and fills them: one check; anything else the full one
        if type(self.tokens) is list and not self.tokens and type(self.block_table) is list and not self.block_table \
                and self.preempted is False and self.tail is None:
            return
        self.tokens = token_ids(self.tokens, "tokens")
        self.block_table = token_ids(self.block_table, "block_table")
        flag("preempted", self.preempted)
        if self.tail is not None:
            instance("tail", self.tail, _Block, "the block of block_table[-1] (or None)")


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

    def __post_init__(self) -> None:
        positive_int("block_size", self.block_size)
        for name in ("tables", "lengths"):
            mapping(name, getattr(self, name))
        for table in self.tables.values():
            token_ids(instance("tables", table, tuple, "a dict of block-id tuples"), "tables")
        for n in self.lengths.values():
            non_negative_int("lengths", n)
        for name in ("ref_counts", "contents"):
            instance(name, getattr(self, name), tuple)
        token_ids(self.ref_counts, "ref_counts")
        for content in self.contents:
            token_ids(instance("contents", content, tuple, "a tuple of token-id tuples"), "contents")
        if len(self.contents) != len(self.ref_counts):
            raise ValueError(f"contents must hold one entry per block of ref_counts ({len(self.ref_counts)}), "
                             f"got {len(self.contents)}")
        for name in ("free", "draining"):
            token_ids(instance(name, getattr(self, name), frozenset, "a frozenset of block ids"), name)
        if self.free & self.draining:
            raise ValueError("free and draining must be disjoint sets of block ids")

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
                 hash_fn: HashFn = chained_hash, free_order: Sequence[int] | None = None,
                 vocab_size: int | None = None) -> None:
        self.num_blocks = positive_int("num_blocks", num_blocks)
        if self.num_blocks > MAX_BLOCKS:
            raise ValueError(f"num_blocks must be at most {MAX_BLOCKS} (int32 block ids), got {num_blocks}")
        self.block_size = positive_int("block_size", block_size)
        self.vocab_size = TOKEN_ID_LIMIT if vocab_size is None else positive_int("vocab_size", vocab_size)
        if self.vocab_size > TOKEN_ID_LIMIT:
            raise ValueError(f"vocab_size must be at most 2**63, got {vocab_size}")
        self.prefix_caching = flag("prefix_caching", prefix_caching)
        self._index = BlockIndex(hash_fn)
        self._order = None if free_order is None else _permutation(free_order, self.num_blocks)
        self._fresh = 0  # blocks _order[_fresh:] (or range(_fresh, n)) were never used
        self._freed: OrderedDict[int, None] = OrderedDict()  # used blocks now free, oldest first
        self._blocks: dict[int, _Block] = {}  # every block ever used
        self.seqs: dict[Hashable, SeqState] = {}
        self.in_flight: dict[int, int] = {}  # block id -> number of in-flight steps reading it
        self._steps: dict[int, list[int]] = {}
        self._next_step = 0
        self._version = 0  # bumped by every change of the pool; keys the admission plan below
        self._plan_memo: tuple | None = None
        self.recomputed_tokens = 0  # tokens that resumed sequences ran again
        self.cached_tokens_total = 0  # tokens found by content at admission and resumption

    @property
    def hash_fn(self) -> HashFn:
        """The chained block hash of the content index."""
        return self._index.hash_fn

    # ---- queries ----------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks in the free pool."""
        return self.num_blocks - self._fresh + len(self._freed)

    @property
    def num_used(self) -> int:
        """Blocks referenced by a table or still read by an in-flight step."""
        return self._fresh - len(self._freed)

    @property
    def num_draining(self) -> int:
        """Blocks with no reference that wait for an in-flight step to finish."""
        return sum(1 for b in self.in_flight if self._blocks[b].ref == 0)

    @property
    def num_indexed(self) -> int:
        """Distinct (prefix, block content) entries in the content index."""
        return len(self._index)

    def ref_count(self, block_id: int) -> int:
        """Block-table entries pointing at ``block_id``."""
        blk = self._blocks.get(self._block_id(block_id))
        return 0 if blk is None else blk.ref

    def is_free(self, block_id: int) -> bool:
        """Whether ``block_id`` is in the free pool."""
        bid = self._block_id(block_id)
        return bid not in self._blocks or bid in self._freed

    def block_tokens(self, block_id: int) -> tuple[int, ...]:
        """Token ids whose KV ``block_id`` holds (kept after it is freed, until it is reused)."""
        blk = self._blocks.get(self._block_id(block_id))
        return () if blk is None else tuple(blk.tokens)

    def block_prefix(self, block_id: int) -> tuple[int, ...] | None:
        """The whole token prefix a registered full block was computed after and holds; None if unregistered."""
        blk = self._blocks.get(self._block_id(block_id))
        return None if blk is None or blk.node is None else blk.node.prefix()

    def block_table(self, seq_id: Hashable) -> list[int]:
        """Physical block ids of ``seq_id``, logical block 0 first."""
        return list(self._seq(seq_id).block_table)

    def batch_tables(self, seq_ids: Iterable[Hashable], pad: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """Block tables of ``seq_ids`` as int32 ``[batch, max_blocks]`` (padded with ``pad``) and int64 token counts."""
        if isinstance(seq_ids, (str, bytes)) or not isinstance(seq_ids, Iterable):
            raise ValueError(f"seq_ids must be a list of sequence ids, got {seq_ids!r}")
        if type(pad) is not int and (isinstance(pad, bool) or not isinstance(pad, (int, np.integer))) \
                or not -2**31 <= pad < 2**31:
            raise ValueError(f"pad must be an int32 integer (a block id or -1), got {pad!r:.80}")
        seqs = [self._seq(s, "seq_ids") for s in seq_ids]
        if any(q.preempted for q in seqs):
            raise ValueError("seq_ids must not name a preempted sequence (it holds no blocks)")
        tables = np.full((len(seqs), max((len(q.block_table) for q in seqs), default=0)), pad, np.int32)
        for row, q in zip(tables, seqs):
            row[:len(q.block_table)] = q.block_table
        return tables, np.array([len(q.tokens) for q in seqs], np.int64)

    def num_tokens(self, seq_id: Hashable) -> int:
        """Tokens whose KV ``seq_id`` holds."""
        return len(self._seq(seq_id).tokens)

    def last_block_fill(self, seq_id: Hashable) -> int:
        """Filled slots of the sequence's last block (block_size when it is full)."""
        n = len(self._seq(seq_id).tokens)
        return 0 if n == 0 else (n - 1) % self.block_size + 1

    def read(self, seq_id: Hashable) -> list[int]:
        """The tokens ``seq_id`` sees through its block table (what attention would read)."""
        seq = self._seq(seq_id)
        n, p = len(seq.tokens), self.block_size
        out: list[int] = []
        for i, bid in enumerate(seq.block_table):
            out += self._blocks[bid].tokens[: min(p, n - i * p)]
        return out

    def blocks_needed(self, tokens: Sequence[int]) -> int:
        """Free blocks that admitting ``tokens`` would take (cached blocks already in use cost none)."""
        return self._plan(tokens)[-1]

    def can_allocate(self, tokens: Sequence[int]) -> bool:
        """Whether ``tokens`` can be admitted now (``allocate`` right after reuses this lookup)."""
        return self._plan(tokens)[-1] <= self.num_free

    def append_blocks_needed(self, seq_id: Hashable, n_tokens: int = 1) -> int:
        """Free blocks that appending ``n_tokens`` to ``seq_id`` would take (new blocks + a copy-on-write)."""
        non_negative_int("n_tokens", n_tokens)
        return self._append_need(self._seq(seq_id), n_tokens)

    def can_append(self, seq_id: Hashable, n_tokens: int = 1) -> bool:
        """Whether ``n_tokens`` can be appended to ``seq_id`` now."""
        # The decode step answers without ``append_blocks_needed``, whose calls made the allocator benchmark's ops
        # 1.25-1.5x slower; tests/test_paging.py holds the two to the same answers.
        if type(n_tokens) is int and n_tokens == 1:
            try:
                seq = self.seqs[seq_id]
            except (KeyError, TypeError):
                seq = self._seq(seq_id)  # raises the ValueError
            if not seq.preempted:
                fill = len(seq.tokens) % self.block_size
                if fill == 0:
                    return self._fresh < self.num_blocks or bool(self._freed)
                if seq.tail.ref == 1 and len(seq.tail.tokens) == fill:
                    return True
        return self.append_blocks_needed(seq_id, n_tokens) <= self.num_free

    def state(self) -> PoolState:
        """A frozen copy of the pool for drawing and comparing: tables, refcounts, contents, states."""
        blocks, n = self._blocks, self.num_blocks
        draining = frozenset(b for b in self.in_flight if blocks[b].ref == 0)
        return PoolState(
            block_size=self.block_size,
            tables={s: tuple(q.block_table) for s, q in self.seqs.items()},
            lengths={s: len(q.tokens) for s, q in self.seqs.items()},
            ref_counts=tuple(blocks[b].ref if b in blocks else 0 for b in range(n)),
            contents=tuple(tuple(blocks[b].tokens) if b in blocks else () for b in range(n)),
            free=frozenset(b for b in range(n) if b not in blocks or b in self._freed),
            draining=draining,
        )

    # ---- admission, growth, sharing --------------------------------------------------
    def allocate(self, seq_id: Hashable, tokens: Sequence[int]) -> int:
        """Admit ``seq_id`` holding ``tokens`` (at least one); return how many leading tokens were cached."""
        try:
            old = self.seqs.get(seq_id)
        except TypeError:
            raise ValueError(f"seq_id must be hashable, got {seq_id!r}") from None
        if old is not None and not old.preempted:
            raise ValueError(f"seq_id {seq_id!r} is already allocated")
        if old is not None:
            raise ValueError(f"seq_id {seq_id!r} is preempted; use resume")
        seq = SeqState(tokens=[])
        cached = self._admit(seq_id, seq, tokens)
        self.seqs[seq_id] = seq
        return cached

    def append(self, seq_id: Hashable, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """Append ``tokens`` to ``seq_id`` (new blocks on demand); return the (src, dst) block copies made."""
        if type(tokens) is list and len(tokens) == 1 and type(tokens[0]) is int:
            return self.append_token(seq_id, tokens[0])
        seq = self._seq(seq_id)
        if seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is preempted; resume it first")
        toks = token_ids(tokens, limit=self.vocab_size)
        return self._append(seq_id, seq, toks) if toks else []

    def append_token(self, seq_id: Hashable, token: int) -> list[tuple[int, int]]:
        """Append one token (a decode step) to ``seq_id``; return the (src, dst) block copies made."""
        # Writing in place or into a new block skips ``_append`` (with can_append's shortcut, the general path made
        # the allocator benchmark's ops 1.5-1.9x slower); a copy, a rolled-back tail or a full pool takes it.
        # tests/test_paging.py compares the two.
        try:
            seq = self.seqs[seq_id]
        except (KeyError, TypeError):
            seq = self._seq(seq_id)  # raises the ValueError
        if seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is preempted; resume it first")
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_ids([token], "token", limit=self.vocab_size)[0]  # a numpy int passes, anything else raises
        stoks, blk = seq.tokens, seq.tail
        fill = len(stoks) % self.block_size
        if fill:
            if blk.ref == 1 and len(blk.tokens) == fill:  # sole owner, nothing after the slot: no copy
                blk.tokens.append(token)
                stoks.append(token)
                if fill + 1 == self.block_size and self.prefix_caching:  # full: indexed (plans change)
                    self._version += 1
                    self._register(blk, seq.block_table[-1], len(seq.block_table) - 1, seq.block_table)
                return []
        elif self.block_size > 1 and (self._fresh < self.num_blocks or self._freed):
            self._version += 1  # a new block: reusing a freed one may drop an indexed block
            bid = self._take()
            blk = seq.tail = self._blocks[bid]
            blk.tokens.append(token)
            stoks.append(token)
            seq.block_table.append(bid)
            return []
        return self._append(seq_id, seq, [token])

    def _append(self, seq_id: Hashable, seq: SeqState, toks: list[int]) -> list[tuple[int, int]]:
        """Check room for the validated ``toks``, then write them."""
        need = self._append_need(seq, len(toks))
        if need > self.num_free:
            raise OutOfBlocks(f"{seq_id!r} needs {need} blocks, {self.num_free} free")
        self._version += 1
        return self._write(seq, toks)

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Give ``child_id`` the parent's tokens and every one of its blocks (no copy until a write)."""
        parent = self._seq(parent_id, "parent_id")
        if parent.preempted:
            raise ValueError(f"parent_id {parent_id!r} is preempted")
        try:
            exists = child_id in self.seqs
        except TypeError:
            raise ValueError(f"child_id must be hashable, got {child_id!r}") from None
        if exists:
            raise ValueError(f"child_id {child_id!r} already exists")
        self._version += 1
        blocks = self._blocks
        for bid in parent.block_table:
            blocks[bid].ref += 1
        child = self.seqs[child_id] = SeqState([])
        child.tokens, child.block_table, child.tail = list(parent.tokens), list(parent.block_table), parent.tail

    def truncate(self, seq_id: Hashable, n_tokens: int) -> None:
        """Keep the first ``n_tokens`` (>= 1) of ``seq_id`` (roll back rejected tokens), releasing emptied blocks.

        The kept blocks keep their KV: a full block cut back stays in the index until a write
        into it replaces its content. A preempted sequence is shortened too (its resume
        recomputes only what is left).
        """
        seq = self._seq(seq_id)
        positive_int("n_tokens", n_tokens)
        if n_tokens > len(seq.tokens):
            raise ValueError(f"n_tokens ({n_tokens}) must not exceed the sequence length ({len(seq.tokens)})")
        self._version += 1
        keep = -(-n_tokens // self.block_size)
        for bid in reversed(seq.block_table[keep:]):
            self._unref(bid)
        del seq.block_table[keep:]
        del seq.tokens[n_tokens:]
        if seq.block_table:
            seq.tail = self._blocks[seq.block_table[-1]]

    def free(self, seq_id: Hashable) -> None:
        """Drop ``seq_id`` and its references; blocks read by an in-flight step return when it completes."""
        seq = self._seq(seq_id)
        self._version += 1
        self._release(seq.block_table)
        del self.seqs[seq_id]

    def preempt(self, seq_id: Hashable) -> int:
        """Evict ``seq_id``'s blocks (recompute policy); return the tokens it holds (its blocks stay cached)."""
        seq = self._seq(seq_id)
        if seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is already preempted")
        self._version += 1
        self._release(seq.block_table)
        seq.block_table, seq.tail, seq.preempted = [], None, True
        return len(seq.tokens)

    def resume(self, seq_id: Hashable) -> int:
        """Re-admit a preempted sequence; return the tokens to recompute (at least one: the last token)."""
        seq = self._seq(seq_id)
        if not seq.preempted:
            raise ValueError(f"seq_id {seq_id!r} is not preempted")
        cached = self._admit(seq_id, seq, seq.tokens)
        recompute = len(seq.tokens) - cached
        self.recomputed_tokens += recompute
        return recompute

    # ---- in-flight steps -------------------------------------------------------------
    def begin_step(self, seq_ids: Iterable[Hashable]) -> int:
        """Mark the blocks of ``seq_ids`` (a list of ids, not a str) as read by a submitted step; return its id."""
        if isinstance(seq_ids, (str, bytes)) or not isinstance(seq_ids, Iterable):
            raise ValueError(f"seq_ids must be a list of sequence ids, got {seq_ids!r}")
        bids = [bid for s in list(seq_ids) for bid in self._seq(s, "seq_ids").block_table]
        self._version += 1
        for bid in bids:
            self.in_flight[bid] = self.in_flight.get(bid, 0) + 1
        step = self._next_step
        self._next_step += 1
        self._steps[step] = bids
        return step

    def end_step(self, step_id: int) -> int:
        """Complete a step; return how many draining blocks went back to the free pool."""
        member("step_id", step_id, self._steps, f"a step in flight ({self.steps_in_flight})")
        self._version += 1
        returned = 0
        for bid in self._steps.pop(step_id):
            self.in_flight[bid] -= 1
            if self.in_flight[bid] == 0:
                del self.in_flight[bid]
                if self._blocks[bid].ref == 0:
                    self._freed[bid] = None
                    returned += 1
        return returned

    @property
    def steps_in_flight(self) -> list[int]:
        """Ids of submitted steps that have not completed."""
        return list(self._steps)

    # ---- internals -------------------------------------------------------------------
    def _seq(self, seq_id: Hashable, name: str = "seq_id") -> SeqState:
        try:
            seq = self.seqs.get(seq_id)
        except TypeError:
            raise ValueError(f"{name} must be a hashable seq_id, got {seq_id!r:.80}") from None
        if seq is None:
            raise ValueError(f"{name} must name an allocated sequence, got {seq_id!r:.80} (not allocated)")
        return seq

    def _block_id(self, block_id: int) -> int:
        if type(block_id) is int and 0 <= block_id < self.num_blocks:  # the common case, without a call
            return block_id
        if not 0 <= non_negative_int("block_id", block_id) < self.num_blocks:
            raise ValueError(f"block_id must lie in [0, {self.num_blocks}), got {block_id!r}")
        return int(block_id)

    def _plan(self, tokens: Sequence[int]) -> tuple[list[int], list[tuple[int, ...]], list[int], PrefixNode, int]:
        """Validated tokens, their full blocks, cached blocks to share, the last matched node, free blocks needed.

        Remembered for the same, unchanged list until the pool changes, so ``can_allocate``
        followed by ``allocate`` validates and looks up once.
        """
        memo = self._plan_memo
        if memo is not None and memo[0] == self._version and memo[1] is tokens and memo[2] == tokens:
            return memo[2:]
        toks = token_ids(tokens, limit=self.vocab_size, allow_empty=False)
        p = self.block_size
        chunks = list(zip(*[iter(toks)] * p)) if self.prefix_caching else []  # full blocks, as tuples
        hits, node = self._match(chunks[:(len(toks) - 1) // p])
        freed = self._freed
        need = -(-len(toks) // p) - sum(1 for b in hits if b not in freed)
        if type(tokens) is list:
            self._plan_memo = (self._version, tokens, toks, chunks, hits, node, need)
        return toks, chunks, hits, node, need

    def _match(self, chunks: list[tuple[int, ...]]) -> tuple[list[int], PrefixNode]:
        """Blocks holding the leading ``chunks`` after exactly their prefix, live copies first.

        The caller passes at most ``(len - 1) // block_size`` blocks, as in vLLM's
        ``get_computed_blocks``: the last prompt token must run for the first output's logits.
        """
        node = self._index.root
        hits: list[int] = []
        hash_fn, buckets, freed = self._index.hash_fn, self._index.buckets, self._freed
        default = hash_fn is chained_hash
        for chunk in chunks:
            prev = node.hash
            if default:  # chained_hash, inlined (BlockIndex.hash)
                h = hash(chunk) if prev is None else hash((prev, chunk))
            else:
                h = hash_fn(prev, chunk)
            for cand in buckets.get(h, ()):
                if cand.parent is node and cand.tokens == chunk:
                    break
            else:
                break
            if not cand.carriers:
                break  # the content is known but no block holds it any more
            best = -1
            for bid in cand.carriers:
                if bid not in freed:
                    best = bid  # a live (or draining) copy costs no free block
                    break
            hits.append(next(iter(cand.carriers)) if best < 0 else best)
            node = cand
        return hits, node

    def _admit(self, seq_id: Hashable, seq: SeqState, tokens: Sequence[int]) -> int:
        """Give ``seq`` the cached blocks of ``tokens`` and write the rest; return the cached tokens."""
        toks, chunks, hits, node, need = self._plan(tokens)
        if need > self.num_free:
            raise OutOfBlocks(f"{seq_id!r} needs {need} blocks, {self.num_free} free")
        self._version += 1
        blocks, freed, table = self._blocks, self._freed, []
        for bid in hits:
            if bid in freed:
                del freed[bid]
            blocks[bid].ref += 1
            table.append(bid)
        p, cached, index = self.block_size, len(hits) * self.block_size, self._index
        for j in range(len(hits), -(-len(toks) // p)):
            bid = self._take()
            blk = blocks[bid]
            blk.tokens = toks[j * p:(j + 1) * p]
            table.append(bid)
            if j < len(chunks):  # a full block (chunks is empty without prefix caching)
                node = blk.node = index.add(bid, node, chunks[j])
        seq.tokens, seq.block_table, seq.preempted, seq.tail = toks, table, False, blocks[table[-1]]
        self.cached_tokens_total += cached
        return cached

    def _append_need(self, seq: SeqState, n_tokens: int) -> int:
        if seq.preempted:
            raise ValueError("seq_id is preempted; resume it first")
        n, p = len(seq.tokens), self.block_size
        new = -(-(n + n_tokens) // p) - len(seq.block_table)
        fill = n % p
        return new + (1 if n_tokens and fill and self._must_copy(seq.block_table[-1], fill) else 0)

    def _must_copy(self, bid: int, fill: int) -> bool:
        """Whether writing slot ``fill`` of block ``bid`` needs a copy: another table or an in-flight step reads it."""
        blk = self._blocks[bid]
        return blk.ref > 1 or (bid in self.in_flight and len(blk.tokens) > fill)

    def _take(self) -> int:
        """A free block, referenced once and empty: never-used blocks first, then the oldest freed."""
        if self._fresh < self.num_blocks:
            bid = self._fresh if self._order is None else int(self._order[self._fresh])
            self._fresh += 1
            self._blocks[bid] = _Block()
            return bid
        bid, _ = self._freed.popitem(last=False)
        blk = self._blocks[bid]
        if blk.node is not None:
            self._index.remove(bid, blk.node)
            blk.node = None
        blk.ref, blk.tokens = 1, []
        return bid

    def _release(self, table: list[int]) -> None:
        """Drop one reference to each block of ``table``, tail first (it is the least likely to be reused)."""
        blocks, freed, in_flight = self._blocks, self._freed, self.in_flight
        for bid in reversed(table):
            blk = blocks[bid]
            blk.ref -= 1
            if blk.ref == 0 and bid not in in_flight:
                freed[bid] = None

    def _unref(self, bid: int) -> None:
        blk = self._blocks[bid]
        if blk.ref <= 0:
            raise RuntimeError(f"double free of block {bid}")
        blk.ref -= 1
        if blk.ref == 0 and bid not in self.in_flight:
            self._freed[bid] = None

    def _write(self, seq: SeqState, toks: list[int]) -> list[tuple[int, int]]:
        """Write ``toks`` after the sequence's last token: copy a shared tail, fill it, open new blocks."""
        p, table, blocks, copies = self.block_size, seq.block_table, self._blocks, []
        index = self._index if self.prefix_caching else None
        n, k = len(seq.tokens), len(toks)
        fill, i = n % p, 0
        if fill:
            bid = table[-1]
            blk = blocks[bid]
            if self._must_copy(bid, fill):  # copy-on-write: a table or a step still reads it
                new = self._take()
                blocks[new].tokens = blk.tokens[:fill]
                self._unref(bid)
                table[-1] = new
                copies.append((bid, new))
                bid, blk = new, blocks[new]
            elif len(blk.tokens) > fill:  # rolled back: the write replaces what followed
                if blk.node is not None:
                    self._index.remove(bid, blk.node)
                    blk.node = None
                del blk.tokens[fill:]
            i = min(p - fill, k)
            blk.tokens += toks[:i]
            if index is not None and fill + i == p:
                self._register(blk, bid, len(table) - 1, table)
        while i < k:
            bid = self._take()
            blk = blocks[bid]
            blk.tokens = toks[i:i + p]
            table.append(bid)
            if index is not None and len(blk.tokens) == p:
                self._register(blk, bid, len(table) - 1, table)
            i += p
        seq.tokens += toks
        seq.tail = blk
        return copies

    def _register(self, blk: _Block, bid: int, pos: int, table: list[int]) -> None:
        """Index the block that just became full at logical ``pos``, after its predecessor's node."""
        parent = self._blocks[table[pos - 1]].node if pos else self._index.root
        if parent is not None:  # an unregistered predecessor (caching switched off) cannot chain
            blk.node = self._index.add(bid, parent, tuple(blk.tokens))


def _permutation(order: Sequence[int], n: int) -> np.ndarray:
    """``order`` as an int64 array if it is a permutation of range(n)."""
    arr = np.asarray(order)
    if arr.shape != (n,) or arr.dtype.kind not in "iu" or not np.array_equal(np.sort(arr), np.arange(n)):
        raise ValueError("free_order must be a permutation of range(num_blocks)")
    return arr.astype(np.int64)
