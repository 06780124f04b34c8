"""A radix tree of cached token prefixes with locks and eviction by policy (SGLang's RadixCache, on the CPU).

Each edge holds a run of token ids; the path from the root to a node spells a prefix whose
KV is cached. A request matches its longest cached prefix (splitting an edge where the match
stops inside it), locks the matched path while it runs, and inserts its tokens when done.
When space runs out, unlocked leaves are evicted, lowest policy score first; a parent whose
last child goes becomes a leaf itself. Capacity and sizes are in tokens.

Policies (lower score is evicted first):
* ``LRU``: last access time, on a logical clock that ticks once per request (``match`` ticks;
  the ``insert`` that finishes the same request does not, but refreshes the path it walks,
  as SGLang's ``_insert_helper`` does);
* ``ValuePerByte``: expected saving per byte, p_hat x saving_s / bytes, where the hit
  probability p_h of V_h = p_h (T_r - T_f) - T_m, unknown in advance, is estimated from the
  node's history as reuses / (reuses + 1): the fraction of this prefix's uses so far that
  were followed by another use, a probability per use like p_h itself. With ``use_hint`` it
  is the larger of that and a hint the request gave when it cached the prefix (an agent turn
  that ends in a tool call will likely be continued); the hint is knowledge from outside the
  cache: it tells the policy in advance which contexts will come back. Ties go LRU.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .._validate import (finite_result, flag, fraction, function, instance, items, mapping, non_negative_int,
                         positive, positive_int, token_ids)
from ..calibration import PREFILL_MFU_BATCH1, prefill_time
from ..hardware import Accelerator
from ..models import ModelSpec
from ..roofline import efficiency


@dataclass(eq=False)
class RadixNode:
    """An edge of token ids ending at this node; ``start`` tokens precede it on its path."""

    key: tuple[int, ...] = ()
    parent: RadixNode | None = None
    children: dict[int, RadixNode] = field(default_factory=dict)
    start: int = 0
    lock_ref: int = 0
    last_access: int = 0
    hits: int = 0
    created: int = 0
    reuse_hint: float = 0.0  # p_h announced by the last request that cached this path

    def __post_init__(self) -> None:
        if type(self.key) is not tuple:
            instance("key", self.key, tuple, "a tuple of token ids")
        token_ids(self.key, "key")
        if self.parent is not None and type(self.parent) is not RadixNode:
            instance("parent", self.parent, RadixNode, "a RadixNode or None")
        for child in mapping("children", self.children).values():
            instance("children", child, RadixNode, "a dict of RadixNode by first token")
        for name in ("start", "lock_ref", "last_access", "hits", "created"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                non_negative_int(name, value)
        if type(self.reuse_hint) is not float or not 0.0 <= self.reuse_hint <= 1.0:
            fraction("reuse_hint", self.reuse_hint)

    @property
    def end(self) -> int:
        """Tokens from the root to the end of this node."""
        return self.start + len(self.key)

    @property
    def is_leaf(self) -> bool:
        """Whether the node has no children."""
        return not self.children


def _node(**fields: object) -> RadixNode:
    """A node from the cache's own, already checked values, without ``__post_init__``'s checks (inserts and splits
    are the replay's hot path: checking every key again tripled an eviction sweep)."""
    node = object.__new__(RadixNode)
    node.__dict__.update(fields, children={})
    return node


@dataclass(frozen=True)
class Match:
    """Result of a prefix lookup: matched length in tokens and the deepest node reached."""

    length: int
    node: RadixNode

    def __post_init__(self) -> None:
        if type(self.length) is not int or self.length < 0:
            non_negative_int("length", self.length)
        instance("node", self.node, RadixNode)


class LRU:
    """Evict the least recently used leaf first."""

    name = "LRU"

    def score(self, node: RadixNode, cache: RadixCache) -> float:
        """Last access time (lower is evicted first)."""
        _scored(node, cache)
        return node.last_access


def _scored(node: RadixNode, cache: RadixCache) -> None:
    """Refuse anything but a RadixNode and a RadixCache (eviction passes those: one check)."""
    if type(node) is not RadixNode or type(cache) is not RadixCache:
        instance("node", node, RadixNode), instance("cache", cache, RadixCache)


class ValuePerByte:
    """Evict the leaf with the smallest expected saving per byte (estimated p_h x seconds saved per byte)."""

    name = "value per byte"

    def __init__(self, saving_s: Callable[[int, int], float], bytes_per_token: float, use_hint: bool = True) -> None:
        self.saving_s = function("saving_s", saving_s)  # (new tokens, cached tokens before them) -> seconds a hit saves
        self.bytes_per_token = positive("bytes_per_token", bytes_per_token)
        self.use_hint = flag("use_hint", use_hint)
        self.name = "value per byte" if use_hint else "value per byte, no hint"

    def hit_probability(self, node: RadixNode, cache: RadixCache) -> float:
        """Estimated p_h per use: reuses / (reuses + 1), or the hint it was cached with if larger (``use_hint``)."""
        _scored(node, cache)
        reuses = node.hits - 1  # hits counts the request that cached it, then one per later match
        observed = reuses / (reuses + 1)
        return max(node.reuse_hint, observed) if self.use_hint else observed

    def score(self, node: RadixNode, cache: RadixCache) -> float:
        """p_hat x (seconds a hit on this node's tokens saves) / (its bytes)."""
        _scored(node, cache)
        n = len(node.key)
        return self.hit_probability(node, cache) * self.saving_s(n, node.start) / (n * self.bytes_per_token)


class RadixCache:
    """A prefix cache of at most ``capacity_tokens`` tokens, evicting by ``policy``."""

    def __init__(self, capacity_tokens: int, policy: LRU | ValuePerByte | None = None) -> None:
        self.capacity = positive_int("capacity_tokens", capacity_tokens)
        if policy is not None and not callable(getattr(policy, "score", None)):
            raise ValueError(f"policy must be an eviction policy with score(node, cache) (LRU, ValuePerByte) or None, "
                             f"got {policy!r:.80}")
        self.policy = policy or LRU()
        self.root = RadixNode()  # never evicted (eviction takes leaves below it); locked only by lock()
        self.size = 0
        self.clock = 0
        self.evicted_tokens = 0

    # ---- lookups ---------------------------------------------------------------------
    def match(self, tokens: Sequence[int]) -> Match:
        """Longest cached prefix of ``tokens``; touches the path (access time, hits); splits a partial edge."""
        return self._match(tuple(token_ids(tokens)))

    def _match(self, tokens: tuple[int, ...]) -> Match:
        self.clock += 1
        return self._walk(tokens, touch=True)

    def peek(self, tokens: Sequence[int]) -> int:
        """Length of the longest cached prefix, changing nothing."""
        tokens = tuple(token_ids(tokens))
        node, i = self.root, 0
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            k = _common(child.key, tokens[i:i + len(child.key)])
            i += k
            if k < len(child.key):
                break
            node = child
        return i

    # ---- locks -----------------------------------------------------------------------
    def lock(self, node: RadixNode) -> None:
        """Protect ``node`` and its ancestors from eviction (a request is using them); it must be in the tree."""
        path = self._path(node)
        for n in path:
            n.lock_ref += 1

    def unlock(self, node: RadixNode) -> None:
        """Release a ``lock`` of ``node`` (ValueError if it holds none); nothing changes on refusal."""
        path = self._path(node)
        if any(n.lock_ref <= 0 for n in path):
            raise ValueError("node is not locked")
        for n in path:
            n.lock_ref -= 1

    # ---- insertion and eviction ------------------------------------------------------
    def insert(self, tokens: Sequence[int], reuse_hint: float | None = None, tick: bool = True) -> int:
        """Cache ``tokens`` (evicting as needed); return how many new tokens were stored.

        If locked nodes leave too little room, only the leading part that fits is stored. The
        walked path gets the current access time. ``reuse_hint`` (a probability) is recorded on
        the whole path for value-aware policies. ``tick=False`` when the same request already
        ticked the clock with its ``match``.
        """
        if reuse_hint is not None:
            fraction("reuse_hint", reuse_hint)
        return self._insert(tuple(token_ids(tokens)), reuse_hint, flag("tick", tick))

    def _insert(self, tokens: tuple[int, ...], reuse_hint: float | None, tick: bool) -> int:
        if tick:
            self.clock += 1
        m = self._walk(tokens, touch=False, refresh=True)
        self.lock(m.node)
        try:
            missing = len(tokens) - m.length
            room = self.capacity - self.size
            if missing > room:
                self.evict(missing - room)
                room = self.capacity - self.size
            new = tokens[m.length:m.length + min(missing, room)]
            if new:
                leaf = _node(key=new, parent=m.node, start=m.length, lock_ref=0, last_access=self.clock, hits=1,
                             created=self.clock, reuse_hint=0.0)
                m.node.children[new[0]] = leaf
                self.size += len(new)
            node = m.node.children[new[0]] if new else m.node
            while reuse_hint is not None and node is not self.root:
                node.reuse_hint, node = reuse_hint, node.parent
            return len(new)
        finally:
            self.unlock(m.node)

    def evict(self, n_tokens: int) -> int:
        """Evict unlocked leaves, lowest score first, until ``n_tokens`` are freed or none is left; return freed."""
        non_negative_int("n_tokens", n_tokens)
        heap = [self._entry(n) for n in self.nodes() if n.is_leaf and n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < n_tokens and heap:
            *_, node = heapq.heappop(heap)
            parent = node.parent
            del parent.children[node.key[0]]
            freed += len(node.key)
            self.size -= len(node.key)
            if parent is not self.root and parent.is_leaf and parent.lock_ref == 0:
                heapq.heappush(heap, self._entry(parent))
        self.evicted_tokens += freed
        return freed

    # ---- views -----------------------------------------------------------------------
    def nodes(self) -> Iterator[RadixNode]:
        """Every node but the root, parents before children."""
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    @property
    def locked_tokens(self) -> int:
        """Tokens on locked paths (not evictable)."""
        return sum(len(n.key) for n in self.nodes() if n.lock_ref > 0)

    @property
    def evictable_tokens(self) -> int:
        """Tokens that eviction could free (all unlocked nodes)."""
        return self.size - self.locked_tokens

    def prefix_of(self, node: RadixNode) -> tuple[int, ...]:
        """The token ids from the root to the end of ``node``."""
        instance("node", node, RadixNode)
        parts = []
        while node is not None and node is not self.root:
            parts.append(node.key)
            node = node.parent
        return tuple(t for part in reversed(parts) for t in part)

    # ---- internals -------------------------------------------------------------------
    def _path(self, node: RadixNode) -> list[RadixNode]:
        """``node`` and its ancestors up to the root; ValueError if ``node`` was evicted or is not in this tree."""
        if not isinstance(node, RadixNode):
            raise ValueError(f"node must be a RadixNode of this cache, got {type(node).__name__}")
        path = [node]
        while node is not self.root:
            parent = node.parent
            if parent is None or not node.key or parent.children.get(node.key[0]) is not node:
                raise ValueError("node is not in the cache (evicted, or from another cache)")
            path.append(parent)
            node = parent
        return path

    def _entry(self, node: RadixNode) -> tuple[float, int, int, RadixNode]:
        return (self.policy.score(node, self), node.last_access, id(node), node)

    def _walk(self, tokens: tuple[int, ...], touch: bool, refresh: bool = False) -> Match:
        node, i = self.root, 0
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            k = _common(child.key, tokens[i:i + len(child.key)])
            if k < len(child.key):
                child = self._split(child, k)
            node, i = child, i + k
            if touch:
                self._touch(node)
            elif refresh:
                node.last_access = self.clock
        return Match(i, node)

    def _touch(self, node: RadixNode) -> None:
        node.last_access = self.clock
        node.hits += 1

    def _split(self, child: RadixNode, k: int) -> RadixNode:
        """Cut ``child``'s edge after ``k`` tokens; return the new upper node."""
        parent = child.parent
        upper = _node(key=child.key[:k], parent=parent, start=child.start, lock_ref=child.lock_ref,
                      last_access=child.last_access, hits=child.hits, created=child.created,
                      reuse_hint=child.reuse_hint)
        parent.children[upper.key[0]] = upper
        child.key, child.start, child.parent = child.key[k:], child.start + k, upper
        upper.children[child.key[0]] = child
        return upper


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Length of the common prefix of two tuples: slices compared in C, halving the range to the first mismatch."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# ---- replaying a trace -----------------------------------------------------------------
@dataclass(frozen=True)
class ReplayResult:
    """Per-request hit tokens of a replay; ``session`` marks the requests of the session under study."""

    names: list[str]
    input_tokens: list[int]
    hit_tokens: list[int]
    session: list[bool]

    @property
    def session_input_tokens(self) -> int:
        """Input tokens of the session's requests."""
        return sum(n for n, s in zip(self.input_tokens, self.session) if s)

    @property
    def session_hit_tokens(self) -> int:
        """Input tokens of the session's requests found in the cache."""
        return sum(h for h, s in zip(self.hit_tokens, self.session) if s)


def replay(requests: Sequence, capacity_tokens: int, policy: LRU | ValuePerByte | None = None) -> ReplayResult:
    """Run ``requests`` one after another through a cache of ``capacity_tokens``; count hit input tokens.

    Each request (with ``name``, ``input_ids``, ``output_ids``, ``session``, ``reuse_hint``) matches its input,
    keeps the match locked while it runs, and caches what it computed when it finishes: its
    input and output but the last output token, whose KV is never written (a finished request
    holds prompt + output - 1 tokens), as SGLang's ``cache_finished_req`` does. A hit covers at
    most input - 1 tokens: the last input token always runs, for the logits of the first output
    (SGLang caps the match at input_len - 1). The clock ticks once per request.
    """
    return _replay(_prepared(requests), capacity_tokens, policy)


@dataclass(frozen=True)
class _Prepared:
    """A request as ``replay`` runs it, its ids checked once (a sweep replays the same trace many times)."""

    name: str
    input_len: int
    computed: tuple[int, ...]  # input + output but the last output token
    hint: float | None
    session: bool


def _prepared(requests: Sequence) -> list[_Prepared]:
    out = []
    for r in items("requests", requests):
        if not all(hasattr(r, a) for a in ("name", "input_ids", "output_ids")):
            raise ValueError(f"requests must hold requests with name, input_ids and output_ids "
                             f"(workloads.TraceRequest), got {r!r:.80}")
        hint = getattr(r, "reuse_hint", None)
        if hint is not None:
            fraction("reuse_hint", hint)
        ids = token_ids(tuple(r.input_ids) + tuple(r.output_ids), "input_ids + output_ids")
        out.append(_Prepared(r.name, len(r.input_ids), tuple(ids[:-1]), hint, bool(r.session)))
    return out


def _replay(requests: list[_Prepared], capacity_tokens: int, policy: LRU | ValuePerByte | None) -> ReplayResult:
    cache = RadixCache(capacity_tokens, policy)
    hits = []
    for r in requests:
        m = cache._match(r.computed[:r.input_len - 1])
        cache.lock(m.node)
        cache._insert(r.computed, r.hint, tick=False)
        cache.unlock(m.node)
        hits.append(m.length)
    return ReplayResult([r.name for r in requests], [r.input_len for r in requests], hits,
                        [r.session for r in requests])


def eviction_sweep(requests: Sequence, pool_bytes: Sequence[float], bytes_per_token: float,
                   policies: dict[str, Callable[[], LRU | ValuePerByte]]) -> dict[str, list[int]]:
    """Session tokens hit by ``replay`` for each pool size (bytes) and each policy (name -> factory)."""
    positive("bytes_per_token", bytes_per_token)
    if not mapping("policies", policies):
        raise ValueError("policies must not be empty")
    for make in policies.values():
        function("policies", make)
    out: dict[str, list[int]] = {name: [] for name in policies}
    prepared = _prepared(requests)
    for b in items("pool_bytes", pool_bytes):
        cap = int(finite_result(positive("pool_bytes", b) // bytes_per_token, "pool_bytes", "bytes_per_token"))
        if cap < 1:
            raise ValueError(f"pool_bytes ({b}) must hold at least one token of bytes_per_token "
                             f"({bytes_per_token}) bytes")
        for name, make in policies.items():
            out[name].append(_replay(prepared, cap, make()).session_hit_tokens)
    return out


def smallest_pool(pool_sizes: Sequence[float], hits: Sequence[int], fraction_of_best: float = 0.9) -> float:
    """Smallest pool size of a sweep at which the hits reach ``fraction_of_best`` of the sweep's best."""
    pool_sizes = [positive("pool_sizes", g) for g in items("pool_sizes", pool_sizes)]
    hits = [non_negative_int("hits", h) for h in items("hits", hits)]
    if len(pool_sizes) != len(hits) or not hits:
        raise ValueError("pool_sizes and hits must be non-empty and of equal length")
    if positive("fraction_of_best", fraction_of_best) > 1:
        raise ValueError(f"fraction_of_best must lie in (0, 1], got {fraction_of_best!r}")
    best = max(hits)
    return next(g for g, h in sorted(zip(pool_sizes, hits)) if h >= fraction_of_best * best)


def standard_policies(model, accelerator, mfu: float | None = None) -> dict[str, Callable[[], LRU | ValuePerByte]]:
    """LRU, value per byte (with the requests' reuse hints) and value per byte without hints, for ``eviction_sweep``.

    A hit on a node saves the prefill of its tokens after its cached prefix
    (``calibration.prefill_time``); the pool is on the device, so T_f = 0.
    """
    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    eff = PREFILL_MFU_BATCH1 if mfu is None else efficiency("mfu", mfu)
    per_token = model.kv_bytes_per_token()

    @lru_cache(maxsize=4096)  # eviction scores every leaf again on each call; a leaf's (n, c) rarely changes
    def saving(n: int, c: int) -> float:
        return prefill_time(model, accelerator, n, c, mfu=eff)

    return {"LRU": LRU,
            "value per byte": lambda: ValuePerByte(saving, per_token),
            "value per byte, no hint": lambda: ValuePerByte(saving, per_token, use_hint=False)}
