"""Block manager: worked examples of 8.3.1-8.3.2, edge cases, and stateful tests over random operation sequences.

The stateful machines run ``STATEFUL_EXAMPLES`` random sequences of up to ``STATEFUL_STEPS``
operations each (defaults keep CI fast; set INFERLAB_STATEFUL_EXAMPLES / _STEPS for a long run)
and check every invariant after every operation.
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from inferlab import memory
from inferlab.models import MODELS
from inferlab.paging import BlockManager, OutOfBlocks, chained_hash
from inferlab.paging_scenarios import cancellation_timeline, decode_with_preemption
from inferlab.units import GiB, MiB

STATEFUL_EXAMPLES = int(os.environ.get("INFERLAB_STATEFUL_EXAMPLES", "250"))
STATEFUL_STEPS = int(os.environ.get("INFERLAB_STATEFUL_STEPS", "80"))
QWEN = MODELS["qwen3-8b"]


# ---- worked examples ---------------------------------------------------------------------
def test_figure_8_10_table_points_to_scattered_blocks() -> None:
    bm = BlockManager(4, 4, free_order=[2, 0, 3, 1])
    bm.allocate("seq", list(range(10)))
    assert bm.block_table("seq") == [2, 0, 3]
    assert bm.state().free == {1}
    assert bm.read("seq") == list(range(10))
    assert bm.last_block_fill("seq") == 2


def _four_requests(bm: BlockManager, share: bool) -> None:
    a = list(range(9))
    b = (list(range(8)) if share else list(range(100, 108))) + [200, 201, 202, 203, 204]
    bm.allocate("A", a)
    bm.allocate("B", b)
    bm.allocate("C", [300 + i for i in range(5)])
    bm.allocate("D", [400 + i for i in range(15)])


def test_9_13_5_15_example_64_52_44_slots() -> None:
    lengths = [9, 13, 5, 15]
    assert memory.reserved_slots(lengths, 16) == 64
    assert memory.paged_slots(lengths, 4) == 52
    assert memory.shared_prefix_slots(lengths, 4, 8, 2) == 44
    assert memory.reserved_slots(lengths, 16) - sum(lengths) == 22
    assert memory.paged_slots(lengths, 4) - sum(lengths) == 10
    for share, slots in ((False, 52), (True, 44)):
        bm = BlockManager(32, 4)
        _four_requests(bm, share)
        assert bm.num_used * 4 == slots  # counted from the allocator's real state
    assert bm.block_table("A")[:2] == bm.block_table("B")[:2]


def test_exercise_8_3_tail_waste_and_table_entries() -> None:
    lengths = [9, 13, 5, 15]
    assert memory.paged_waste(lengths, 2) == [1, 1, 1, 1]
    assert memory.paged_waste(lengths, 4) == [3, 3, 3, 1]
    assert memory.paged_waste(lengths, 8) == [7, 3, 3, 1]
    assert [sum(memory.paged_waste(lengths, p)) for p in (2, 4, 8)] == [4, 10, 14]
    assert [memory.block_table_entries(lengths, p) for p in (2, 4, 8)] == [23, 13, 7]
    assert memory.blocks_saved_by_sharing(16, 1) == 15


@pytest.mark.parametrize("n, independent, shared", [(8, 9504, 3456), (16, 19008, 6048), (32, 38016, 11232)])
def test_exercise_8_3_long_requests_independent_vs_shared(n: int, independent: int, shared: int) -> None:
    assert memory.batch_kv_bytes(n, QWEN, 8192, 256) / MiB == independent
    assert memory.batch_kv_bytes(n, QWEN, 8192, 256, shared_prefix_tokens=6144) / MiB == shared


def test_four_branches_416_references_131_blocks() -> None:
    refs, physical, saved = memory.branch_blocks(4, 95, 9)
    assert (refs, physical, round(saved * 100)) == (416, 131, 69)
    bm = BlockManager(200, 4)
    bm.allocate("root", list(range(95 * 4)))
    for i in range(1, 4):
        bm.fork("root", f"b{i}")
    for i, s in enumerate(["root", "b1", "b2", "b3"]):
        bm.append(s, [10_000 * (i + 1) + t for t in range(9 * 4)])
    state = bm.state()
    assert (state.references, state.used_blocks) == (416, 131)


def test_sixteen_long_requests_share_a_6144_token_prefix() -> None:
    per_block = 16 * QWEN.kv_bytes_per_token()
    bm = BlockManager(int(12 * GiB // per_block), 16)
    prefix = list(range(6144))
    for r in range(16):
        bm.allocate(r, prefix + [10**6 * (r + 1) + t for t in range(2048)])
        bm.append(r, [10**6 * (r + 1) + 5000 + t for t in range(255)])
    assert bm.num_used * per_block / MiB == 6048
    assert memory.max_concurrent_requests(12 * GiB, QWEN, 8192, 256, shared_prefix_tokens=6144) == 35
    assert memory.max_concurrent_requests(12 * GiB, QWEN, 8192, 256) == 10
    # admission with reservation to completion: 35 fit, the 36th does not
    bm = BlockManager(int(12 * GiB // per_block), 16)
    admitted = 0
    while bm.can_allocate(prefix + [10**6 * (admitted + 1) + t for t in range(2303)]):
        bm.allocate(admitted, prefix + [10**6 * (admitted + 1) + t for t in range(2303)])
        admitted += 1
    assert admitted == 35


# ---- sharing, copy-on-write, freeing ----------------------------------------------------
def test_copy_on_write_of_a_shared_partial_tail_figure_8_15() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("p", [1, 2, 3, 4, 10, 11, 12])  # tail a, b, c
    bm.fork("p", "q")
    tail = bm.block_table("p")[-1]
    assert bm.blocks[tail].ref_count == 2
    copies = bm.append("p", [20])  # x
    assert copies == [(tail, bm.block_table("p")[-1])]
    assert bm.append("q", [30]) == []  # y: q is now the only owner, writes in place
    assert bm.block_table("q")[-1] == tail
    assert bm.block_table("p")[0] == bm.block_table("q")[0]  # full block still shared
    assert bm.read("p")[-4:] == [10, 11, 12, 20] and bm.read("q")[-4:] == [10, 11, 12, 30]


def test_refcount_and_free_condition_figure_8_14() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("A", list(range(8)))
    assert bm.allocate("B", list(range(8)) + [99]) == 8
    shared = bm.block_table("A")
    assert [bm.blocks[b].ref_count for b in shared] == [2, 2]
    bm.free("A")
    assert [bm.blocks[b].ref_count for b in shared] == [1, 1]
    step = bm.begin_step(["B"])
    bm.free("B")
    assert bm.num_draining == 3 and not set(shared) & set(bm.free_ids)
    assert bm.end_step(step) == 3
    assert bm.num_free == 8


def test_cancellation_returns_blocks_after_the_step() -> None:
    ev = cancellation_timeline()
    assert [e.time_s * 1e3 for e in ev] == [0, 1.6, 31]
    assert ev[1].free_blocks == ev[0].free_blocks and ev[1].draining_blocks == 104
    assert ev[2].free_blocks - ev[1].free_blocks == 104 and ev[2].draining_blocks == 0


def test_whole_prompt_cached_still_recomputes_its_last_block() -> None:
    # vLLM (get_computed_blocks) and SGLang cap a hit at len - 1 tokens: the last prompt token
    # must run to give the first output's logits; with whole blocks that is the last block.
    bm = BlockManager(8, 4)
    bm.allocate("a", list(range(8)))
    free = bm.num_free
    assert bm.blocks_needed(list(range(8))) == 1
    assert bm.allocate("b", list(range(8))) == 4  # one whole block (4 tokens) recomputed
    assert bm.num_free == free - 1
    assert bm.block_table("b")[0] == bm.block_table("a")[0] and bm.block_table("b")[1] != bm.block_table("a")[1]
    assert bm.allocate("c", list(range(9))) == 8  # one token past the cached blocks: both hit
    bm.append("b", [50])  # the next token opens a new block, the shared ones are untouched
    assert bm.read("a") == list(range(8)) and bm.read("b") == list(range(8)) + [50]


def test_prefix_hit_after_preemption() -> None:
    bm = BlockManager(6, 4)
    bm.allocate("a", list(range(10)))
    assert bm.preempt("a") == 10
    assert bm.num_free == 6
    assert bm.resume("a") == 2  # two full blocks still cached: only the partial tail is recomputed
    assert bm.read("a") == list(range(10))
    assert bm.recomputed_tokens == 2


def test_resume_of_a_block_aligned_sequence_recomputes_its_last_block() -> None:
    bm = BlockManager(6, 4)
    bm.allocate("a", list(range(8)))
    bm.preempt("a")
    assert bm.resume("a") == 4  # both blocks cached, but the last token must run: its block is redone
    assert bm.read("a") == list(range(8))


def test_in_flight_step_is_a_reader_no_overwrite_in_place() -> None:
    # A and B share full block #0; a step reads B; B is cancelled; A rolls back into block #0 and
    # writes: the step must still read [1, 2, 3, 4], so A's write goes to a copy.
    bm = BlockManager(4, 4)
    bm.allocate("A", [1, 2, 3, 4, 5])
    bm.allocate("B", [1, 2, 3, 4, 6])
    shared = bm.block_table("A")[0]
    assert bm.block_table("B")[0] == shared
    step = bm.begin_step(["B"])
    bm.free("B")
    bm.truncate("A", 2)
    assert bm.append_blocks_needed("A", 2) == 1
    copies = bm.append("A", [7, 7])
    assert copies and copies[0][0] == shared
    assert bm.blocks[shared].tokens == [1, 2, 3, 4]  # what the in-flight step reads is intact
    assert bm.read("A") == [1, 2, 7, 7]
    assert bm.num_draining == 2  # the old block #0 and B's tail drain until the step ends
    bm.end_step(step)
    assert bm.num_draining == 0 and shared in bm.free_ids


def test_appending_into_free_slots_of_an_in_flight_block_needs_no_copy() -> None:
    bm = BlockManager(4, 4)
    bm.allocate("A", [1, 2])
    step = bm.begin_step(["A"])
    assert bm.append("A", [3]) == []  # the step reads slots 0-1; slot 2 was never written
    bm.end_step(step)


def test_exact_parent_rule_is_stricter_than_vllm() -> None:
    # Two physical copies of the same first block exist (the second was recomputed because
    # "b" was wholly cached). A block registered after the copy is not found through the
    # original: a lost hit (vLLM, trusting the chain hash alone, would hit), never a wrong one.
    bm = BlockManager(12, 4)
    bm.allocate("a", [0, 1, 2, 3])
    bm.allocate("b", [0, 1, 2, 3])  # recomputes its only block: a second copy
    assert bm.block_table("a") != bm.block_table("b")
    bm.append("b", [4, 5, 6, 7])  # registered after b's copy of block 0
    assert bm.allocate("c", list(range(9))) == 4  # block 0 hits a's copy, block 1's parent differs
    assert bm.read("c") == list(range(9))


def test_prefix_evicted_after_preemption_is_recomputed() -> None:
    bm = BlockManager(3, 4)
    bm.allocate("a", list(range(8)))
    bm.preempt("a")
    bm.allocate("b", [100 + t for t in range(12)])  # reuses every block
    bm.free("b")
    assert bm.resume("a") == 8


def test_fork_with_partial_tail_then_truncate_and_rewrite() -> None:
    bm = BlockManager(10, 4)
    bm.allocate("a", list(range(6)))
    bm.fork("a", "b")
    bm.truncate("b", 4)  # roll back into the shared full block boundary
    assert bm.block_table("b") == bm.block_table("a")[:1]
    bm.append("b", [7, 8])
    bm.truncate("a", 3)  # a's first block is shared and full; a now sees 3 of its slots
    bm.append("a", [42])  # must copy: b still reads slot 3 of that block
    assert bm.read("a") == [0, 1, 2, 42] and bm.read("b") == [0, 1, 2, 3, 7, 8]


def test_hash_collision_never_aliases_content() -> None:
    bm = BlockManager(16, 2, hash_fn=lambda prev, toks: 7)  # every block collides
    bm.allocate("a", [1, 2, 3, 4])
    assert bm.allocate("b", [3, 4, 1, 2]) == 0
    assert bm.allocate("c", [1, 2, 1, 2]) == 2  # first block verified; the second chains to another parent
    assert len(set(bm.block_table("c"))) == 2
    assert bm.read("c") == [1, 2, 1, 2]


def test_chained_hash_depends_on_predecessor() -> None:
    assert chained_hash(None, (1, 2)) != chained_hash(chained_hash(None, (0, 0)), (1, 2))
    assert chained_hash(5, (1, 2)) == chained_hash(5, (1, 2))


def test_out_of_blocks_and_bad_input() -> None:
    bm = BlockManager(2, 4)
    assert not bm.can_allocate(list(range(9)))
    with pytest.raises(OutOfBlocks):
        bm.allocate("a", list(range(9)))
    bm.allocate("a", list(range(8)))
    assert not bm.can_append("a", 1)
    with pytest.raises(OutOfBlocks):
        bm.append("a", [1])
    with pytest.raises(ValueError, match="seq_id"):
        bm.append("zz", [1])
    with pytest.raises(ValueError, match="already"):
        bm.allocate("a", [1])
    with pytest.raises(ValueError, match="n_tokens"):
        bm.truncate("a", 9)
    with pytest.raises(ValueError, match="num_blocks"):
        BlockManager(0, 4)
    with pytest.raises(ValueError, match="block_size"):
        BlockManager(4, 0)
    with pytest.raises(ValueError, match="free_order"):
        BlockManager(3, 4, free_order=[0, 0, 1])
    with pytest.raises(ValueError, match="step_id"):
        bm.end_step(99)
    with pytest.raises(ValueError, match="tokens"):
        bm.allocate("b", ["a"])
    with pytest.raises(ValueError, match="tokens"):
        bm.can_allocate([1, -2])
    with pytest.raises(ValueError, match="spare_blocks"):
        cancellation_timeline(spare_blocks=-1)


def test_decode_with_preemption_recomputes_and_finishes_all() -> None:
    prompts = {s: [100 * i + t for t in range(10)] for i, s in enumerate("abc")}
    run = decode_with_preemption(12, 4, prompts, 12)
    assert sorted(run.finished) == ["a", "b", "c"]
    assert run.preemptions and run.recomputed_tokens > 0
    assert run.recomputed_tokens == sum(r for _, _, r in run.resumes) and len(run.resumes) == len(run.preemptions)
    assert all(r >= 1 for _, _, r in run.resumes)
    assert max(run.used_blocks) <= 12 and run.used_blocks[-1] == 0
    # no thrashing: the sequence running longest is never the one preempted, and admission
    # never happens in a step that preempted
    assert run.finished[0] == "a" and "a" not in {s for _, s, _ in run.preemptions}
    assert not {st_ for st_, _, _ in run.preemptions} & {st_ for st_, _, _ in run.resumes}
    roomy = decode_with_preemption(64, 4, prompts, 12)
    assert roomy.preemptions == [] and roomy.recomputed_tokens == 0


# ---- stateful property tests --------------------------------------------------------------
_ALPHABET = st.integers(0, 3)  # tiny alphabet: prefixes collide often, so blocks get shared by content


class BlockManagerMachine(RuleBasedStateMachine):
    """Random admits, appends, forks, truncations, frees, preemptions and in-flight steps."""

    hash_fn = staticmethod(chained_hash)

    @initialize(num_blocks=st.integers(2, 24), block_size=st.integers(1, 4))
    def setup(self, num_blocks: int, block_size: int) -> None:
        self.bm = BlockManager(num_blocks, block_size, hash_fn=self.hash_fn)
        self.model: dict[int, list[int]] = {}  # what each sequence must read
        self.preempted: set[int] = set()
        self.steps: dict[int, list[int]] = {}
        self.snapshots: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        self.next_id = 0

    def _live(self) -> list[int]:
        return sorted(s for s in self.model if s not in self.preempted)

    @rule(prefix_from=st.integers(0, 50), cut=st.integers(0, 40), tail=st.lists(_ALPHABET, max_size=12))
    def allocate(self, prefix_from: int, cut: int, tail: list[int]) -> None:
        base = self.model[sorted(self.model)[prefix_from % len(self.model)]] if self.model else []
        tokens = base[:cut] + tail
        if not tokens:
            return
        sid, self.next_id = self.next_id, self.next_id + 1
        if self.bm.can_allocate(tokens):
            free_before, needed = self.bm.num_free, self.bm.blocks_needed(tokens)
            cached = self.bm.allocate(sid, tokens)
            assert cached % self.bm.block_size == 0 and cached <= len(tokens) - 1
            assert free_before - self.bm.num_free == needed
            self.model[sid] = list(tokens)
        else:
            with pytest.raises(OutOfBlocks):
                self.bm.allocate(sid, tokens)

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 50), tokens=st.lists(_ALPHABET, min_size=1, max_size=9))
    def append(self, pick: int, tokens: list[int]) -> None:
        sid = self._live()[pick % len(self._live())]
        if self.bm.can_append(sid, len(tokens)):
            free_before, needed = self.bm.num_free, self.bm.append_blocks_needed(sid, len(tokens))
            self.bm.append(sid, tokens)
            assert free_before - self.bm.num_free == needed
            self.model[sid].extend(tokens)
        else:
            with pytest.raises(OutOfBlocks):
                self.bm.append(sid, tokens)

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
    @rule(pick=st.integers(0, 50), keep=st.integers(0, 40))
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
        del self.model[sid]
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
        if not tokens:
            return
        if self.bm.can_allocate(tokens):
            recompute = self.bm.resume(sid)
            assert 1 <= recompute <= len(tokens)  # the last token always runs again
            self.preempted.discard(sid)
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
        p = self.bm.block_size  # what the step reads: each table's filled slots
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
        bm = self.bm
        free = set(bm.free_ids)
        assert len(free) == len(bm.free_ids)  # no block twice in the free list
        referenced = {b.block_id for b in bm.blocks if b.ref_count > 0}
        reading = {b for bids in self.steps.values() for b in bids}
        draining = {b.block_id for b in bm.blocks if b.ref_count == 0} & reading
        assert not free & referenced and not free & reading
        # the three states partition the pool, counted from refcounts and open steps, not from the free list
        assert free | referenced | draining == set(range(bm.num_blocks))
        assert len(free) + len(referenced) + len(draining) == bm.num_blocks
        assert bm.num_draining == len(draining) and bm.num_used == len(referenced) + len(draining)

    @invariant()
    def in_flight_reads_never_change(self) -> None:
        for snap in self.snapshots.values():
            for bid, tokens in snap:
                assert tuple(self.bm.blocks[bid].tokens[: len(tokens)]) == tokens

    @invariant()
    def shared_blocks_were_written_under_the_same_prefix(self) -> None:
        p = self.bm.block_size
        for sid, tokens in self.model.items():
            context = None
            for i, bid in enumerate(self.bm.block_table(sid)):
                assert self.bm.blocks[bid].context == context  # KV computed after exactly this prefix
                context = chained_hash(context, tuple(tokens[i * p:(i + 1) * p]))

    @invariant()
    def refcount_equals_table_entries(self) -> None:
        counts = [0] * self.bm.num_blocks
        for seq in self.bm.seqs.values():
            for b in seq.block_table:
                counts[b] += 1
        assert counts == [b.ref_count for b in self.bm.blocks]

    @invariant()
    def every_sequence_reads_what_it_wrote(self) -> None:
        assert set(self.bm.seqs) == set(self.model)
        for sid, tokens in self.model.items():
            assert self.bm.num_tokens(sid) == len(tokens)
            if sid in self.preempted:
                assert self.bm.block_table(sid) == []
                continue
            table = self.bm.block_table(sid)
            assert len(table) == -(-len(tokens) // self.bm.block_size)
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
    def hash_index_is_consistent(self) -> None:
        for h, bid in self.bm.hash_to_block.items():
            block = self.bm.blocks[bid]
            assert block.hash == h and len(block.tokens) == self.bm.block_size


class CollidingHashMachine(BlockManagerMachine):
    """Same machine with a 2-valued hash: only the stored-token and chain checks keep contexts apart."""

    hash_fn = staticmethod(lambda prev, toks: (sum(toks) + (prev or 0)) % 2)


_SETTINGS = settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestBlockManagerStateful = BlockManagerMachine.TestCase
TestBlockManagerStateful.settings = _SETTINGS
TestCollidingHashStateful = CollidingHashMachine.TestCase
TestCollidingHashStateful.settings = _SETTINGS


def test_fork_branches_reproduces_the_four_branch_experiment() -> None:
    from inferlab.paging_scenarios import fork_branches

    state = fork_branches(branches=4, prefix_tokens=95 * 16, private_tokens=9 * 16, block_size=16)
    assert (state.references, state.used_blocks) == (416, 131)
    assert fork_branches(1, 0, 5, 4).used_blocks == 2


def test_shared_prefix_batch_matches_the_capacity_formula() -> None:
    from inferlab.example import KV_BUDGET_BYTES, MODEL
    from inferlab.memory import batch_kv_bytes
    from inferlab.paging_scenarios import shared_prefix_batch

    per_block = 16 * MODEL.kv_bytes_per_token()
    bm = shared_prefix_batch(16, 6144, 8192, 256, num_blocks=int(KV_BUDGET_BYTES // per_block))
    assert bm.num_used * per_block == batch_kv_bytes(16, MODEL, 8192, 256, shared_prefix_tokens=6144)
    with pytest.raises(ValueError, match="prefix_tokens"):
        shared_prefix_batch(2, 10, 5, 2, num_blocks=8)
