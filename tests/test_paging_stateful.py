"""Block manager under random operation streams: invariants after every operation, and a differential model.

The differential model is independent of the manager's index: a dict from physical block id
to the full token prefix whose KV that block validly holds (updated from what each operation
writes, with the copies the manager reports), so the most an exact-content lookup could find
is the longest run of leading full blocks whose prefixes some block holds (capped, as the
manager's, at ``(len - 1) // block_size`` blocks). Every admission and resumption must find
exactly that many cached tokens: no lost hit, no wrong one.

The machines run ``STATEFUL_EXAMPLES`` random sequences of up to ``STATEFUL_STEPS``
operations each (defaults keep CI fast; set INFERLAB_STATEFUL_EXAMPLES / _STEPS for a long run).
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from inferlab.kvcache.block_manager import BlockManager, OutOfBlocks, chained_hash

STATEFUL_EXAMPLES = int(os.environ.get("INFERLAB_STATEFUL_EXAMPLES", "250"))
STATEFUL_STEPS = int(os.environ.get("INFERLAB_STATEFUL_STEPS", "80"))

_ALPHABET = st.integers(0, 3)  # tiny alphabet: prefixes collide often, so blocks get shared by content
_SYSTEM_PROMPTS = ([0, 1, 2, 3, 0, 1, 2, 3, 0, 1], [3, 3, 2, 2, 1, 1, 0, 0], [1, 0, 1])


class BlockManagerMachine(RuleBasedStateMachine):
    """Random admits (system prompts, resends, continuations), appends, forks, truncations, frees, preemptions."""

    hash_fn = staticmethod(chained_hash)

    @initialize(num_blocks=st.integers(2, 24), block_size=st.integers(1, 4))
    def setup(self, num_blocks: int, block_size: int) -> None:
        self.bm = BlockManager(num_blocks, block_size, hash_fn=self.hash_fn)
        self.p = block_size
        self.model: dict[int, list[int]] = {}  # what each sequence must read
        self.preempted: set[int] = set()
        self.steps: dict[int, list[int]] = {}
        self.snapshots: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        self.history: list[list[int]] = [list(s) for s in _SYSTEM_PROMPTS]  # prompts and finished sequences
        self.holds: dict[int, tuple[int, ...]] = {}  # differential model: block id -> valid KV prefix
        self.next_id = 0

    # -- the differential model --
    def _most_cached(self, tokens: list[int]) -> int:
        """Tokens an exact-content lookup finds: leading full blocks whose exact prefix some block holds."""
        present = {h for h in self.holds.values() if h and len(h) % self.p == 0}
        k = 0
        while k < (len(tokens) - 1) // self.p and tuple(tokens[:(k + 1) * self.p]) in present:
            k += 1
        return k * self.p

    def _written(self, sid: int, start: int, copies: list[tuple[int, int]] = ()) -> None:
        """Record the writes of positions ``start`` ... end of ``sid`` (a write drops what followed it)."""
        tokens, table, p = self.model[sid], self.bm.block_table(sid), self.p
        for src, dst in copies:  # the engine copies the source block's valid slots before the write
            assert self.holds[src][:start] == tuple(tokens[:start])
            self.holds[dst] = self.holds[src][:start]
        for j in range(start // p, len(table)):
            self.holds[table[j]] = tuple(tokens[:min((j + 1) * p, len(tokens))])

    def _live(self) -> list[int]:
        return sorted(s for s in self.model if s not in self.preempted)

    def _admit(self, tokens: list[int]) -> None:
        sid, self.next_id = self.next_id, self.next_id + 1
        if self.bm.can_allocate(tokens):
            free_before, needed = self.bm.num_free, self.bm.blocks_needed(tokens)
            expected = self._most_cached(tokens)
            cached = self.bm.allocate(sid, tokens)
            assert cached == expected  # every hit an exact-content lookup could find, and no other
            assert free_before - self.bm.num_free == needed
            self.model[sid] = list(tokens)
            self.history.append(list(tokens))
            self._written(sid, cached)
        else:
            with pytest.raises(OutOfBlocks):
                self.bm.allocate(sid, tokens)

    @rule(prefix_from=st.integers(0, 50), cut=st.integers(0, 40), tail=st.lists(_ALPHABET, max_size=12))
    def allocate(self, prefix_from: int, cut: int, tail: list[int]) -> None:
        base = self.model[sorted(self.model)[prefix_from % len(self.model)]] if self.model else []
        tokens = base[:cut] + tail
        if tokens:
            self._admit(tokens)

    @rule(pick=st.integers(0, 50), tail=st.lists(_ALPHABET, max_size=6))
    def resend_or_continue(self, pick: int, tail: list[int]) -> None:
        """A system prompt or an earlier prompt resent as is, or a finished conversation continued."""
        self._admit(self.history[pick % len(self.history)] + tail)

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 50), tokens=st.lists(_ALPHABET, min_size=1, max_size=9))
    def append(self, pick: int, tokens: list[int]) -> None:
        sid = self._live()[pick % len(self._live())]
        if self.bm.can_append(sid, len(tokens)):
            free_before, needed = self.bm.num_free, self.bm.append_blocks_needed(sid, len(tokens))
            start = len(self.model[sid])
            copies = self.bm.append(sid, tokens)
            assert free_before - self.bm.num_free == needed
            self.model[sid].extend(tokens)
            self._written(sid, start, copies)
        else:
            with pytest.raises(OutOfBlocks):
                self.bm.append(sid, tokens)

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 50), n=st.integers(1, 6))
    def decode(self, pick: int, n: int) -> None:
        """One token at a time, as decode steps write them."""
        sid = self._live()[pick % len(self._live())]
        for t in range(n):
            if not self.bm.can_append(sid, 1):
                return
            start = len(self.model[sid])
            copies = self.bm.append(sid, [t % 4])
            self.model[sid].append(t % 4)
            self._written(sid, start, copies)

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 50))
    def fork(self, pick: int) -> None:
        parent = self._live()[pick % len(self._live())]
        sid, self.next_id = self.next_id, self.next_id + 1
        free_before = self.bm.num_free
        self.bm.fork(parent, sid)
        assert self.bm.num_free == free_before  # forking copies nothing
        self.model[sid] = list(self.model[parent])

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 50), keep=st.integers(1, 40))
    def truncate(self, pick: int, keep: int) -> None:
        sid = sorted(self.model)[pick % len(self.model)]
        keep = min(keep, len(self.model[sid]))
        self.bm.truncate(sid, keep)
        del self.model[sid][keep:]

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 50))
    def free(self, pick: int) -> None:
        sid = sorted(self.model)[pick % len(self.model)]
        self.bm.free(sid)
        self.history.append(self.model.pop(sid))
        self.preempted.discard(sid)
        with pytest.raises(ValueError):
            self.bm.free(sid)  # a second free is refused, never a double decrement

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 50))
    def preempt(self, pick: int) -> None:
        sid = self._live()[pick % len(self._live())]
        assert self.bm.preempt(sid) == len(self.model[sid])
        self.preempted.add(sid)

    @precondition(lambda self: self.preempted)
    @rule(pick=st.integers(0, 50))
    def resume(self, pick: int) -> None:
        sid = sorted(self.preempted)[pick % len(self.preempted)]
        tokens = self.model[sid]
        if self.bm.can_allocate(tokens):
            expected = len(tokens) - self._most_cached(tokens)
            before = self.bm.recomputed_tokens
            recompute = self.bm.resume(sid)
            assert recompute == expected and 1 <= recompute <= len(tokens)  # the last token always runs again
            assert self.bm.recomputed_tokens - before == recompute
            self.preempted.discard(sid)
            self._written(sid, len(tokens) - recompute)
        else:
            with pytest.raises(OutOfBlocks):
                self.bm.resume(sid)

    @precondition(lambda self: self._live())
    @rule(picks=st.lists(st.integers(0, 50), min_size=1, max_size=3))
    def begin_step(self, picks: list[int]) -> None:
        live = self._live()
        sids = sorted({live[p % len(live)] for p in picks})
        step = self.bm.begin_step(sids)
        self.steps[step] = [b for s in sids for b in self.bm.block_table(s)]
        p = self.p  # what the step reads: each table's filled slots
        self.snapshots[step] = [(bid, tuple(self.model[s][i * p:(i + 1) * p]))
                                for s in sids for i, bid in enumerate(self.bm.block_table(s))]

    @precondition(lambda self: self.steps)
    @rule(pick=st.integers(0, 50))
    def end_step(self, pick: int) -> None:
        step = sorted(self.steps)[pick % len(self.steps)]
        self.bm.end_step(step)
        del self.steps[step]
        del self.snapshots[step]

    # -- invariants, checked after every rule --
    @invariant()
    def every_block_free_or_used_never_both(self) -> None:
        bm, state = self.bm, self.bm.state()
        referenced = {b for b in range(bm.num_blocks) if bm.ref_count(b) > 0}
        reading = {b for bids in self.steps.values() for b in bids}
        draining = {b for b in range(bm.num_blocks) if bm.ref_count(b) == 0} & reading
        assert not state.free & referenced and not state.free & reading
        # the three states partition the pool, counted from refcounts and open steps, not from the free pool
        assert state.free | referenced | draining == set(range(bm.num_blocks))
        assert len(state.free) + len(referenced) + len(draining) == bm.num_blocks == bm.num_free + bm.num_used
        assert bm.num_draining == len(draining) and bm.num_used == len(referenced) + len(draining)
        assert state.draining == draining and len(state.free) == bm.num_free

    @invariant()
    def in_flight_reads_never_change(self) -> None:
        for snap in self.snapshots.values():
            for bid, tokens in snap:
                assert self.bm.block_tokens(bid)[: len(tokens)] == tokens

    @invariant()
    def full_blocks_are_indexed_under_their_exact_prefix(self) -> None:
        p = self.p
        for sid, tokens in self.model.items():
            for i, bid in enumerate(self.bm.block_table(sid)):
                if (i + 1) * p <= len(tokens):  # KV computed after exactly this prefix, and findable
                    assert self.bm.block_prefix(bid) == tuple(tokens[:(i + 1) * p])

    @invariant()
    def model_and_manager_agree_on_every_block(self) -> None:
        p = self.p
        for bid, held in self.holds.items():
            start = (len(held) - 1) // p * p
            assert self.bm.block_tokens(bid) == held[start:]
            prefix = self.bm.block_prefix(bid)
            assert prefix is None or prefix == held  # an indexed block holds exactly what the model says
            if len(held) % p == 0 and self.bm.ref_count(bid) > 0:
                assert prefix == held  # a full block in use is findable

    @invariant()
    def refcount_equals_table_entries(self) -> None:
        counts = [0] * self.bm.num_blocks
        for seq in self.bm.seqs.values():
            for b in seq.block_table:
                counts[b] += 1
        assert counts == [self.bm.ref_count(b) for b in range(self.bm.num_blocks)]

    @invariant()
    def every_sequence_reads_what_it_wrote(self) -> None:
        assert set(self.bm.seqs) == set(self.model)
        for sid, tokens in self.model.items():
            assert self.bm.num_tokens(sid) == len(tokens) >= 1
            if sid in self.preempted:
                assert self.bm.block_table(sid) == []
                continue
            table = self.bm.block_table(sid)
            assert len(table) == -(-len(tokens) // self.p)
            assert len(set(table)) == len(table)
            assert self.bm.read(sid) == tokens

    @invariant()
    def in_flight_counts_match_open_steps(self) -> None:
        expected: dict[int, int] = {}
        for bids in self.steps.values():
            for b in bids:
                expected[b] = expected.get(b, 0) + 1
        assert self.bm.in_flight == expected

    @invariant()
    def index_holds_only_verified_live_nodes(self) -> None:
        index = self.bm._index
        for h, bucket in index.buckets.items():
            for node in bucket:
                assert h == index.hash_fn(node.parent.hash, node.tokens) and len(node.tokens) == self.p
                assert node.carriers or node.children  # no dead node is kept
                for bid in node.carriers:
                    assert self.bm.block_prefix(bid) == node.prefix()
        assert sum(len(b) for b in index.buckets.values()) == self.bm.num_indexed


class CollidingHashMachine(BlockManagerMachine):
    """Same machine with a 2-valued hash: only the stored-token and parent checks keep contexts apart."""

    hash_fn = staticmethod(lambda prev, toks: (sum(toks) + (prev or 0)) % 2)


_SETTINGS = settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestBlockManagerStateful = BlockManagerMachine.TestCase
TestBlockManagerStateful.settings = _SETTINGS
TestCollidingHashStateful = CollidingHashMachine.TestCase
TestCollidingHashStateful.settings = _SETTINGS
