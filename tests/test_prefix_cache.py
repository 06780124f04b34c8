"""Radix-tree prefix cache: unit tests, eviction policies, and stateful tests over random operation sequences."""

from __future__ import annotations

import os
from dataclasses import dataclass

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from inferlab.calibration import prefill_time
from inferlab.hardware import ACCELERATORS
from inferlab.kvcache import LRU, RadixCache, ValuePerByte, eviction_sweep, replay, standard_policies
from inferlab.models import MODELS
from inferlab.units import GiB
from inferlab.workloads import agent_workload

STATEFUL_EXAMPLES = int(os.environ.get("INFERLAB_STATEFUL_EXAMPLES", "150"))
STATEFUL_STEPS = int(os.environ.get("INFERLAB_STATEFUL_STEPS", "60"))
QWEN, RTX = MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"]


def _vpb(use_hint: bool = True) -> ValuePerByte:
    return ValuePerByte(lambda n, c: prefill_time(QWEN, RTX, n, c), QWEN.kv_bytes_per_token(), use_hint)


def test_insert_match_and_split() -> None:
    c = RadixCache(100)
    assert c.insert([1, 2, 3, 4]) == 4
    assert c.insert([1, 2, 5]) == 1  # splits the edge after [1, 2]
    assert c.size == 5
    keys = sorted(n.key for n in c.nodes())
    assert keys == [(1, 2), (3, 4), (5,)]
    m = c.match([1, 2, 3, 9])
    assert m.length == 3 and c.prefix_of(m.node) == (1, 2, 3)  # matching inside an edge splits it too
    assert c.peek([1, 2, 5, 6]) == 3 and c.peek([7]) == 0


def test_timestamp_in_front_destroys_reuse() -> None:
    tools = list(range(100, 400))
    c = RadixCache(10_000)
    c.insert([1] + tools + [7, 8])
    assert c.match([2] + tools + [9]).length == 0  # a different first token: nothing reused
    c.insert(tools + [1, 7, 8])
    assert c.match(tools + [2, 9]).length == len(tools)  # stable part first: all of it reused


def test_lru_evicts_oldest_leaf_first_and_locks_protect() -> None:
    c = RadixCache(6, LRU())
    c.insert([1, 2])
    c.insert([3, 4])
    c.match([1, 2])  # touch [1, 2]
    c.insert([5, 6])
    c.insert([7, 8])  # needs room: [3, 4] is the least recently used
    assert c.peek([3, 4]) == 0 and c.peek([1, 2]) == 2
    m = c.match([5, 6])
    c.lock(m.node)
    assert c.evict(100) == 4  # everything but the locked path
    assert c.peek([5, 6]) == 2 and c.size == 2
    c.unlock(m.node)
    with pytest.raises(ValueError, match="not locked"):
        c.unlock(m.node)
    assert c.evict(100) == 2 and c.size == 0


def test_insert_stores_only_what_fits_beside_locked_nodes() -> None:
    c = RadixCache(5)
    c.insert([1, 2, 3])
    c.lock(c.match([1, 2, 3]).node)
    assert c.insert([9, 8, 7, 6]) == 2
    assert c.size == 5 and c.peek([9, 8, 7]) == 2


def test_value_per_byte_keeps_a_reused_prefix_that_lru_drops() -> None:
    # the session prefix [0..99] is reused; one-off requests stream through a small cache
    session = list(range(100))
    lru, vpb = RadixCache(300, LRU()), RadixCache(300, _vpb())
    for c in (lru, vpb):
        c.insert(session)
        c.match(session)
        c.insert(session)
        for i in range(3):
            c.insert([1000 * (i + 1) + t for t in range(120)])
    assert vpb.peek(session) == 100
    assert lru.peek(session) == 0


def test_reuse_hint_is_recorded_on_the_path() -> None:
    c = RadixCache(100, _vpb())
    c.insert([1, 2, 3], reuse_hint=0.9)
    assert all(n.reuse_hint == 0.9 for n in c.nodes())
    with pytest.raises(ValueError, match="reuse_hint"):
        c.insert([4], reuse_hint=1.5)
    with pytest.raises(ValueError, match="capacity_tokens"):
        RadixCache(0)


def test_agent_replay_hits_with_a_large_pool_and_not_with_a_small_one() -> None:
    trace = agent_workload(13, other_per_gap=8)
    per_token = QWEN.kv_bytes_per_token()
    big = replay(trace, int(6 * GiB // per_token), LRU())
    small = replay(trace, int(1 * GiB // per_token), LRU())
    assert big.session_input_tokens == 20_322  # chapter's real trace: 19,556
    assert big.session_hit_tokens == 16_899 and small.session_hit_tokens == 0  # chapter: 16,304 and 0
    assert replay(trace, int(1 * GiB // per_token), _vpb()).session_hit_tokens == 16_418  # with the hint
    assert replay(trace, int(1 * GiB // per_token), _vpb(False)).session_hit_tokens == 0  # without it


def test_eviction_sweep_and_standard_policies() -> None:
    trace = agent_workload(13, other_per_gap=8)
    per_token = QWEN.kv_bytes_per_token()
    sweep = eviction_sweep(trace, [1 * GiB, 6 * GiB], per_token, standard_policies(QWEN, RTX))
    assert sweep == {"LRU": [0, 16_899], "value per byte": [16_418, 16_899], "value per byte, no hint": [0, 16_899]}
    with pytest.raises(ValueError, match="pool_bytes"):
        eviction_sweep(trace, [0.0], per_token, standard_policies(QWEN, RTX))
    with pytest.raises(ValueError, match="policies"):
        eviction_sweep(trace, [GiB], per_token, {})
    with pytest.raises(ValueError, match="mfu"):
        standard_policies(QWEN, RTX, mfu=2)


def test_replay_caches_input_and_output_but_the_last_token() -> None:
    @dataclass
    class R:
        name: str
        input_ids: tuple
        output_ids: tuple
        session: bool = True

    first = R("a", (1, 2, 3), (4, 5))
    res = replay([first, R("b", (1, 2, 3, 4, 5, 6), (7,))], 100)
    assert res.hit_tokens == [0, 4]  # (1, 2, 3, 4) cached: token 5 was sampled but never run


def test_insert_refreshes_the_path_it_walks_and_one_tick_per_request() -> None:
    c = RadixCache(6)
    c.insert([1, 1, 1])
    c.insert([2, 2, 2])
    c.insert([1, 1, 1])  # refreshes (1, 1, 1): it is now more recent than (2, 2, 2)
    c.insert([3, 3, 3])  # needs room: the least recently used is (2, 2, 2)
    assert c.peek([1, 1, 1]) == 3 and c.peek([2, 2, 2]) == 0
    c2 = RadixCache(100)
    res_clock = c2.clock
    c2.match([1])
    c2.insert([1, 2], tick=False)  # the same request: one tick in all
    assert c2.clock == res_clock + 1


def test_value_per_byte_hit_probability_is_per_use() -> None:
    c = RadixCache(100, _vpb(False))
    c.insert([1, 2, 3], reuse_hint=0.9)
    node = c.match([1, 2, 3]).node
    assert c.policy.hit_probability(node, c) == pytest.approx(1 / 2)  # one reuse after one use
    c.match([1, 2, 3])
    assert c.policy.hit_probability(node, c) == pytest.approx(2 / 3)
    assert _vpb(True).hit_probability(node, c) == pytest.approx(0.9)  # the hint wins when larger


# ---- refused operations -------------------------------------------------------------------
@pytest.mark.parametrize("bad", [[1.9, 2.2], "ab", ["a", "b"], [True, False], [1, -1], [2**63], [None]])
def test_token_ids_are_validated_by_match_peek_and_insert(bad) -> None:
    c = RadixCache(100)
    c.insert([1, 2, 3])
    for call in (c.match, c.peek, c.insert):
        with pytest.raises(ValueError, match="tokens"):
            call(bad)
    assert c.size == 3 and c.clock == 1 and [n.key for n in c.nodes()] == [(1, 2, 3)]
    assert c.match(np.array([1, 2, 9])).length == 2  # numpy ids are fine
    assert all(type(t) is int for n in c.nodes() for t in n.key)


def test_lock_of_an_evicted_node_and_unlock_without_a_lock_are_refused() -> None:
    c = RadixCache(10)
    c.insert([1, 2, 3])
    m = c.match([1, 2, 3])
    assert c.evict(10) == 3
    with pytest.raises(ValueError, match="not in the cache"):
        c.lock(m.node)  # it would protect nothing
    assert c.root.lock_ref == 0
    with pytest.raises(ValueError, match="not locked"):
        c.unlock(c.root)
    with pytest.raises(ValueError, match="not in the cache"):
        RadixCache(10).lock(c.root)  # a node of another cache
    with pytest.raises(ValueError, match="node"):
        c.lock("root")
    c.insert([4, 5])
    node = c.match([4, 5]).node
    c.lock(node)
    c.unlock(node)
    with pytest.raises(ValueError, match="not locked"):
        c.unlock(node)  # a refused unlock changes nothing
    assert node.lock_ref == 0 and c.root.lock_ref == 0


# ---- stateful ----------------------------------------------------------------------------
_TOK = st.integers(0, 3)


class RadixMachine(RuleBasedStateMachine):
    """Random inserts, matches (with locks), unlocks and evictions; the tree is checked after each."""

    @initialize(capacity=st.integers(1, 40), value_policy=st.booleans())
    def setup(self, capacity: int, value_policy: bool) -> None:
        self.cache = RadixCache(capacity, _vpb() if value_policy else LRU())
        self.locks: list = []
        self.history: list[tuple[int, ...]] = []

    def _tokens(self, base: int, cut: int, tail: list[int]) -> tuple[int, ...]:
        prefix = self.history[base % len(self.history)][:cut] if self.history else ()
        return tuple(prefix) + tuple(tail)

    @rule(base=st.integers(0, 30), cut=st.integers(0, 20), tail=st.lists(_TOK, max_size=10))
    def insert(self, base: int, cut: int, tail: list[int]) -> None:
        tokens = self._tokens(base, cut, tail)
        before = self.cache.peek(tokens)
        room = self.cache.capacity - self.cache.locked_tokens
        added = self.cache.insert(tokens)
        assert added <= len(tokens) - before
        if len(tokens) <= room:  # everything fits beside the locked paths: all of it is cached now
            assert self.cache.peek(tokens) == len(tokens)
        self.history.append(tokens)

    @rule(base=st.integers(0, 30), cut=st.integers(0, 20), tail=st.lists(_TOK, max_size=6), lock=st.booleans())
    def match(self, base: int, cut: int, tail: list[int], lock: bool) -> None:
        tokens = self._tokens(base, cut, tail)
        expected = self.cache.peek(tokens)
        m = self.cache.match(tokens)
        assert m.length == expected
        assert self.cache.prefix_of(m.node) == tokens[: m.length]
        if lock and m.length:
            self.cache.lock(m.node)
            self.locks.append((m.node, tokens[: m.length]))

    @precondition(lambda self: self.locks)
    @rule(pick=st.integers(0, 20))
    def unlock(self, pick: int) -> None:
        node, _ = self.locks.pop(pick % len(self.locks))
        self.cache.unlock(node)

    @rule(n=st.integers(0, 50))
    def evict(self, n: int) -> None:
        evictable = self.cache.evictable_tokens
        before = list(self.cache.nodes())
        freed = self.cache.evict(n)
        assert freed >= min(n, evictable) or freed == evictable
        assert freed <= evictable
        alive = set(map(id, self.cache.nodes()))
        for node in before:
            if id(node) not in alive:  # an evicted node can be neither locked nor unlocked
                with pytest.raises(ValueError, match="not in the cache"):
                    self.cache.lock(node)
                with pytest.raises(ValueError, match="not in the cache"):
                    self.cache.unlock(node)

    @invariant()
    def structure(self) -> None:
        c = self.cache
        total = 0
        for node in c.nodes():
            assert node.key and node.parent is not None
            assert node.parent.children[node.key[0]] is node
            assert node.start == (node.parent.end if node.parent is not c.root else 0)
            total += len(node.key)
        assert total == c.size <= c.capacity

    @invariant()
    def lock_counts_and_locked_paths_survive(self) -> None:
        c = self.cache
        for node, tokens in self.locks:
            assert c.peek(tokens) == len(tokens)  # a locked prefix is never evicted
        for node in c.nodes():
            expected = 0
            for locked, _ in self.locks:
                n = locked
                while n is not None and n is not node:
                    n = n.parent
                expected += n is node
            assert node.lock_ref == expected
        assert c.root.lock_ref == len(self.locks)

    @invariant()
    def peek_is_the_longest_cached_prefix(self) -> None:
        c = self.cache
        paths = [c.prefix_of(n) for n in c.nodes() if n.is_leaf]
        for tokens in self.history[-5:]:
            best = 0
            for p in paths:
                k = 0
                while k < min(len(p), len(tokens)) and p[k] == tokens[k]:
                    k += 1
                best = max(best, k)
            assert c.peek(tokens) == best


TestRadixStateful = RadixMachine.TestCase
TestRadixStateful.settings = settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS,
                                      deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_replay_never_counts_the_last_input_token_as_a_hit() -> None:
    from types import SimpleNamespace

    from inferlab.kvcache import replay

    a = SimpleNamespace(name="a", input_ids=(1, 2, 3, 4), output_ids=(9,), session=True, reuse_hint=None)
    again = SimpleNamespace(name="b", input_ids=(1, 2, 3, 4), output_ids=(8,), session=True, reuse_hint=None)
    result = replay([a, again], capacity_tokens=100)
    assert result.hit_tokens == [0, 3]  # the repeated prompt recomputes its last token


def test_smallest_pool_reaching_a_share_of_the_best() -> None:
    from inferlab.kvcache import smallest_pool

    assert smallest_pool([0.5, 1, 2, 4], [0, 50, 95, 100]) == 2
    assert smallest_pool([4, 1, 2], [100, 100, 10], fraction_of_best=1.0) == 1
    with pytest.raises(ValueError, match="fraction_of_best"):
        smallest_pool([1], [1], fraction_of_best=0)
    with pytest.raises(ValueError, match="pool_sizes"):
        smallest_pool([1, 2], [1])


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_common_prefix_matches_a_token_by_token_scan(a, b):
    from inferlab.kvcache.radix import _common

    naive = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert _common(tuple(a), tuple(b)) == naive
