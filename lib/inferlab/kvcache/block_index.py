"""Exact-content index of full KV blocks: a trie of block contents, looked up by chained hash.

A *node* is one full block's token ids after an exact prefix, its parent node (the root for
block 0); by induction a node stands for the whole token prefix up to its block's end. A
node is *carried* by the physical blocks that hold its KV: after a whole-prompt hit
recomputes its last block, or after preemption, two or more copies may exist, and any one
that is alive serves a hit. Nodes are found through ``hash_fn(parent hash, tokens)`` (vLLM's
chained block hash) and verified against their tokens and their parent node, so a hash
collision costs a comparison, never an aliased context. A node with no carrier stays while
a descendant has one (its block's KV is gone, but the descendant's is still valid), so a
later copy of the same content reconnects the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

HashFn = Callable[[int | None, tuple[int, ...]], int]


def chained_hash(prev_hash: int | None, tokens: tuple[int, ...]) -> int:
    """64-bit hash of a full block's token ids chained to its predecessor's hash (None for block 0).

    Python's tuple hash (xxHash-style, in C): deterministic for ints on a 64-bit build, not
    cryptographic; lookups verify every hit, so collisions never alias two contexts.
    """
    return hash(tokens) if prev_hash is None else hash((prev_hash, tokens))


class PrefixNode:
    """One full block's tokens after the exact prefix ``parent``; ``carriers`` are the physical blocks holding it."""

    __slots__ = ("hash", "tokens", "parent", "carriers", "children")

    def __init__(self, hash_: int | None, tokens: tuple[int, ...], parent: PrefixNode | None) -> None:
        self.hash = hash_
        self.tokens = tokens
        self.parent = parent
        self.carriers: dict[int, None] = {}  # block ids, in registration order
        self.children = 0  # child nodes still indexed

    def prefix(self) -> tuple[int, ...]:
        """Every token id from the root to the end of this node's block."""
        parts, node = [], self
        while node.parent is not None:
            parts.append(node.tokens)
            node = node.parent
        return tuple(chain.from_iterable(reversed(parts)))


class BlockIndex:
    """Nodes by chained hash; ``find`` verifies content and parent, ``add``/``remove`` keep carriers."""

    def __init__(self, hash_fn: HashFn = chained_hash) -> None:
        if not callable(hash_fn):
            raise ValueError(f"hash_fn must be callable (prev_hash, tokens) -> int, got {hash_fn!r}")
        self.hash_fn = hash_fn
        self._default = hash_fn is chained_hash  # inlined below: a Python call per block costs as much as the hash
        self.root = PrefixNode(None, (), None)
        self.buckets: dict[int, list[PrefixNode]] = {}

    def __len__(self) -> int:
        """Indexed nodes (the root excluded)."""
        return sum(len(b) for b in self.buckets.values())

    def hash(self, parent: PrefixNode, tokens: tuple[int, ...]) -> int:
        """The chained hash of ``tokens`` right after ``parent``."""
        prev = parent.hash
        if self._default:
            return hash(tokens) if prev is None else hash((prev, tokens))
        return self.hash_fn(prev, tokens)

    def find(self, parent: PrefixNode, tokens: tuple[int, ...]) -> PrefixNode | None:
        """The node for ``tokens`` right after ``parent``, or None."""
        for node in self.buckets.get(self.hash(parent, tokens), ()):
            if node.parent is parent and node.tokens == tokens:
                return node
        return None

    def add(self, block_id: int, parent: PrefixNode, tokens: tuple[int, ...]) -> PrefixNode:
        """Record that ``block_id`` holds ``tokens`` after ``parent``; return its node (found or new)."""
        prev = parent.hash
        if self._default:
            h = hash(tokens) if prev is None else hash((prev, tokens))
        else:
            h = self.hash_fn(prev, tokens)
        bucket = self.buckets.get(h)
        if bucket is None:
            bucket = self.buckets[h] = []
        for node in bucket:
            if node.parent is parent and node.tokens == tokens:
                break
        else:
            node = PrefixNode(h, tokens, parent)
            bucket.append(node)
            parent.children += 1
        node.carriers[block_id] = None
        return node

    def remove(self, block_id: int, node: PrefixNode) -> None:
        """``block_id`` no longer holds ``node``; drop nodes left with neither carrier nor child."""
        del node.carriers[block_id]
        while not node.carriers and not node.children and node is not self.root:
            bucket = self.buckets[node.hash]
            bucket.remove(node)
            if not bucket:
                del self.buckets[node.hash]
            node.parent.children -= 1
            node = node.parent
