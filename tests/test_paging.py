"""Block manager: worked examples of 8.3.1-8.3.2, sharing and copy-on-write, edge cases and refused operations.

The stateful machines and the differential model are in ``test_paging_stateful.py``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import memory
from inferlab.kvcache.block_manager import BlockManager, OutOfBlocks, chained_hash
from inferlab.kvcache.scenarios import cancellation_timeline, decode_with_preemption
from inferlab.models import MODELS
from inferlab.units import GiB, MiB

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


def test_four_requests_take_fewer_slots_paged_than_reserved_and_fewer_still_sharing_a_prefix() -> None:
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
    assert bm.ref_count(tail) == 2
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
    assert [bm.ref_count(b) for b in shared] == [2, 2]
    bm.free("A")
    assert [bm.ref_count(b) for b in shared] == [1, 1]
    step = bm.begin_step(["B"])
    bm.free("B")
    assert bm.num_draining == 3 and not any(bm.is_free(b) for b in shared)
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
    assert bm.block_tokens(shared) == (1, 2, 3, 4)  # what the in-flight step reads is intact
    assert bm.read("A") == [1, 2, 7, 7]
    assert bm.num_draining == 2  # the old block #0 and B's tail drain until the step ends
    bm.end_step(step)
    assert bm.num_draining == 0 and bm.is_free(shared)


def test_appending_into_free_slots_of_an_in_flight_block_needs_no_copy() -> None:
    bm = BlockManager(4, 4)
    bm.allocate("A", [1, 2])
    step = bm.begin_step(["A"])
    assert bm.append("A", [3]) == []  # the step reads slots 0-1; slot 2 was never written
    bm.end_step(step)


P16 = list(range(16))


def test_a_live_copy_is_found_when_two_copies_exist() -> None:
    bm = BlockManager(5, 16)
    bm.allocate("a", P16)
    bm.free("a")  # block 0 keeps P16, cached
    bm.allocate("b", P16)  # a whole-prompt hit recomputes its block: a second copy of P16
    bm.allocate("x", list(range(500, 564)))  # takes every free block, overwriting the first copy
    bm.free("x")
    assert bm.allocate("c", P16 + [1]) == 16  # b's live copy holds exactly that prefix
    assert bm.block_table("c")[0] == bm.block_table("b")[0] and bm.read("c") == P16 + [1]


def test_blocks_filled_by_decode_survive_preemption() -> None:
    bm = BlockManager(8, 16)
    bm.allocate("s", P16)
    bm.preempt("s")
    assert bm.resume("s") == 16  # one block, and the last token must run: the whole block again
    bm.append("s", list(range(100, 117)))  # fills block 1 by decode and opens block 2
    assert bm.block_prefix(bm.block_table("s")[1]) == tuple(P16 + list(range(100, 116)))
    bm.preempt("s")
    assert bm.resume("s") == 1  # two full blocks cached; only the last token runs again
    assert bm.recomputed_tokens == 17 and bm.read("s") == P16 + list(range(100, 117))


def test_decode_fills_one_token_at_a_time_and_registers_each_full_block() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("s", [7, 7, 7])
    for t in range(9):
        bm.append("s", [t])
    assert bm.num_indexed == 3  # [7,7,7,0], [1..4], [5..8]
    bm.free("s")
    assert bm.allocate("t", [7, 7, 7] + list(range(9)) + [99]) == 12


def test_a_live_copy_is_preferred_to_a_cached_free_one() -> None:
    bm = BlockManager(6, 4)
    bm.allocate("a", [1, 2, 3, 4])
    bm.allocate("b", [1, 2, 3, 4])  # second copy (whole-prompt hit recomputes it)
    first, second = bm.block_table("a")[0], bm.block_table("b")[0]
    bm.free("a")  # first copy: free but cached; second: live
    free = bm.num_free
    assert bm.blocks_needed([1, 2, 3, 4, 5]) == 1  # the hit costs no free block
    assert bm.allocate("c", [1, 2, 3, 4, 5]) == 4
    assert bm.block_table("c")[0] == second and bm.is_free(first) and bm.num_free == free - 1


def test_copies_chain_through_any_copy_of_the_predecessor() -> None:
    # formerly a lost hit: block 1 was registered after b's copy of block 0, and c's lookup
    # went through a's copy; both copies hold the same prefix, so the chain continues
    bm = BlockManager(12, 4)
    bm.allocate("a", [0, 1, 2, 3])
    bm.allocate("b", [0, 1, 2, 3])  # recomputes its only block: a second copy
    assert bm.block_table("a") != bm.block_table("b")
    bm.append("b", [4, 5, 6, 7])  # registered after b's copy of block 0
    assert bm.allocate("c", list(range(9))) == 8
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


def test_fork_branches_reproduces_the_four_branch_experiment() -> None:
    from inferlab.kvcache.scenarios import fork_branches

    state = fork_branches(branches=4, prefix_tokens=95 * 16, private_tokens=9 * 16, block_size=16)
    assert (state.references, state.used_blocks) == (416, 131)
    assert fork_branches(1, 0, 5, 4).used_blocks == 2


def test_shared_prefix_batch_matches_the_capacity_formula() -> None:
    from inferlab.example import KV_BUDGET_BYTES, MODEL
    from inferlab.kvcache.scenarios import shared_prefix_batch
    from inferlab.memory import batch_kv_bytes

    per_block = 16 * MODEL.kv_bytes_per_token()
    bm = shared_prefix_batch(16, 6144, 8192, 256, num_blocks=int(KV_BUDGET_BYTES // per_block))
    assert bm.num_used * per_block == batch_kv_bytes(16, MODEL, 8192, 256, shared_prefix_tokens=6144)
    with pytest.raises(ValueError, match="prefix_tokens"):
        shared_prefix_batch(2, 10, 5, 2, num_blocks=8)


# ---- refused operations leave no trace ----------------------------------------------------
def _snapshot(bm: BlockManager) -> tuple:
    return bm.state(), bm.num_indexed, bm.recomputed_tokens, bm.cached_tokens_total, dict(bm.in_flight)


@pytest.mark.parametrize("bad", [
    P16[:15] + [2**63] + [0],  # beyond int64 at position 15 (it used to half-allocate, then overflow)
    [1, -2], [1.9, 2.2], ["a"], [True, 2], [np.float32(1)], "ab", [None],
])
def test_bad_token_ids_are_refused_before_any_change(bad: list) -> None:
    bm = BlockManager(8, 16)
    bm.allocate("s", P16 + [1])
    before = _snapshot(bm)
    with pytest.raises(ValueError, match="tokens"):
        bm.allocate("t", bad)
    with pytest.raises(ValueError, match="tokens"):
        bm.can_allocate(bad)
    with pytest.raises(ValueError, match="tokens"):
        bm.append("s", bad)
    assert _snapshot(bm) == before
    assert bm.allocate("t", P16 + [2]) == 16  # a retry works: nothing was half-done
    bm.append("s", list(range(15)))  # fills block 1 of s


def test_append_filling_a_block_with_a_bad_id_leaves_the_sequence_unchanged() -> None:
    bm = BlockManager(4, 4)
    bm.allocate("s", [1, 2])
    before = _snapshot(bm)
    with pytest.raises(ValueError, match=r"\[0, 1000\)|tokens"):
        bm.append("s", [3, 2**64])
    assert _snapshot(bm) == before and bm.read("s") == [1, 2]
    bm.append("s", [3, 4])
    assert bm.read("s") == [1, 2, 3, 4]


def test_token_ids_below_a_vocabulary_size() -> None:
    bm = BlockManager(4, 4, vocab_size=1000)
    bm.allocate("s", np.array([1, 999]))  # numpy arrays and numpy ints are accepted
    bm.append("s", [np.int64(5)])
    assert bm.read("s") == [1, 999, 5] and all(type(t) is int for t in bm.read("s"))
    with pytest.raises(ValueError, match=r"\[0, 1000\)"):
        bm.append("s", [1000])
    with pytest.raises(ValueError, match="tokens"):
        bm.allocate("t", np.array([[1, 2]]))
    with pytest.raises(ValueError, match="tokens"):
        bm.allocate("t", np.array([1.0]))
    with pytest.raises(ValueError, match="vocab_size"):
        BlockManager(4, 4, vocab_size=0)
    with pytest.raises(ValueError, match="vocab_size"):
        BlockManager(4, 4, vocab_size=2**64)


def test_an_empty_prompt_is_refused_and_a_sequence_never_becomes_empty() -> None:
    # decided: a sequence always holds a token (its last one gives the next logits), so
    # preempt/resume recompute at least one and truncate keeps at least one
    bm = BlockManager(4, 4)
    with pytest.raises(ValueError, match="at least one"):
        bm.allocate("s", [])
    with pytest.raises(ValueError, match="at least one"):
        bm.can_allocate([])
    assert "s" not in bm.seqs
    bm.allocate("s", [5])
    with pytest.raises(ValueError, match="n_tokens"):
        bm.truncate("s", 0)
    assert bm.append("s", []) == [] and bm.read("s") == [5]
    assert bm.preempt("s") == 1 and bm.resume("s") == 1


def test_truncating_a_preempted_sequence_shortens_what_resume_recomputes() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("s", list(range(10)))
    assert bm.preempt("s") == 10 and bm.recomputed_tokens == 0  # counted when it really runs again
    bm.truncate("s", 6)
    assert bm.num_tokens("s") == 6 and bm.block_table("s") == []
    assert bm.resume("s") == 2 and bm.recomputed_tokens == 2  # block 0 cached, tokens 4-5 run
    assert bm.read("s") == list(range(6))
    bm.preempt("s")
    bm.free("s")  # a preempted sequence that never resumes recomputes nothing
    assert bm.recomputed_tokens == 2


def test_allocate_of_a_preempted_sequence_points_to_resume() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("s", [1, 2, 3])
    bm.preempt("s")
    with pytest.raises(ValueError, match="resume"):
        bm.allocate("s", [1, 2, 3])
    with pytest.raises(ValueError, match="preempted"):
        bm.append("s", [4])
    assert bm.resume("s") == 3


def test_begin_step_takes_a_list_of_ids_not_a_string() -> None:
    bm = BlockManager(8, 4)
    bm.allocate("a", [1])
    bm.allocate("b", [2])
    bm.allocate("ab", [3])
    with pytest.raises(ValueError, match="seq_ids"):
        bm.begin_step("ab")  # would have read sequences "a" and "b"
    with pytest.raises(ValueError, match="seq_id"):
        bm.begin_step(["ab", "zz"])
    assert bm.in_flight == {} and bm.steps_in_flight == []
    step = bm.begin_step(["ab"])
    assert bm.in_flight == {bm.block_table("ab")[0]: 1}
    bm.end_step(step)


def test_block_queries_name_the_block_id() -> None:
    bm = BlockManager(4, 4)
    for bad in (-1, 4, 1.5, True):
        with pytest.raises(ValueError, match="block_id"):
            bm.ref_count(bad)
    assert bm.is_free(3) and bm.block_tokens(3) == () and bm.block_prefix(3) is None


def test_can_allocate_then_allocate_looks_up_once_and_sees_changes() -> None:
    calls = []

    def counting(prev, toks):
        calls.append(toks)
        return chained_hash(prev, toks)

    bm = BlockManager(8, 4, hash_fn=counting)
    bm.allocate("a", list(range(9)))
    prompt = list(range(8)) + [50]
    calls.clear()
    assert bm.can_allocate(prompt)
    looked_up = len(calls)
    assert bm.allocate("b", prompt) == 8
    assert len(calls) == looked_up  # the check's lookup is reused
    prompt2 = list(range(8)) + [60]
    assert bm.can_allocate(prompt2)
    prompt2[0] = 99  # changed after the check: the plan is redone
    assert bm.allocate("c", prompt2) == 0


# ---- size and speed -----------------------------------------------------------------------
def test_ten_million_blocks_construct_in_constant_time_and_memory() -> None:
    """Nothing is made per block up front (a clock would make this test flaky on a busy machine; memory does not)."""
    tracemalloc.start()
    try:
        bm = BlockManager(10**7, 16)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # one list or array entry per block would be megabytes
    assert bm.num_free == 10**7 and bm.num_used == 0
    bm.allocate("s", list(range(100)))
    assert bm.num_used == 7 and bm.is_free(10**7 - 1) and bm.ref_count(0) == 1
    with pytest.raises(ValueError, match="num_blocks"):
        BlockManager(2**31, 16)


def test_free_order_is_validated_and_followed() -> None:
    bm = BlockManager(5, 2, free_order=np.array([4, 3, 2, 1, 0]))
    bm.allocate("s", [1, 2, 3])
    assert bm.block_table("s") == [4, 3]
    for bad in ([0, 0, 1, 2, 3], [0, 1, 2, 3], ["a"] * 5, [0.0, 1.0, 2.0, 3.0, 4.0]):
        with pytest.raises(ValueError, match="free_order"):
            BlockManager(5, 2, free_order=bad)


def test_speculative_append_then_truncate_keeps_the_table_and_index_right() -> None:
    bm = BlockManager(16, 4)
    bm.allocate("s", list(range(6)))
    for accepted in (3, 0, 5):
        n = bm.num_tokens("s")
        draft = [100 + n + i for i in range(5)]
        bm.append("s", draft)
        bm.truncate("s", n + accepted)  # rejected drafts are rolled back
        assert bm.read("s") == list(range(6)) + [t for t in bm.read("s")[6:]]
        assert len(bm.block_table("s")) == -(-bm.num_tokens("s") // 4)
        assert bm.last_block_fill("s") == (bm.num_tokens("s") - 1) % 4 + 1
    tokens = bm.read("s")
    for i, bid in enumerate(bm.block_table("s")[: len(tokens) // 4]):
        assert bm.block_prefix(bid) == tuple(tokens[: (i + 1) * 4])


def test_scenarios_refuse_empty_sequences_by_name() -> None:
    from inferlab.kvcache.scenarios import fork_branches, shared_prefix_batch

    assert fork_branches(3, 0, 5, 4).used_blocks == 6  # no prefix: nothing shared
    assert fork_branches(3, 0, 0, 4).used_blocks == 0
    with pytest.raises(ValueError, match="prompts"):
        decode_with_preemption(8, 4, {"a": []}, 2)
    with pytest.raises(ValueError, match="prompt_tokens"):
        shared_prefix_batch(2, 0, 0, 2, num_blocks=8)


def test_unhashable_sequence_ids_are_named() -> None:
    bm = BlockManager(4, 4)
    for call in (lambda: bm.allocate(["s"], [1]), lambda: bm.append(["s"], [1]), lambda: bm.can_append(["s"]),
                 lambda: bm.free(["s"]), lambda: bm.fork(["s"], "t")):
        with pytest.raises(ValueError, match="seq_id"):
            call()
    assert bm.seqs == {} and bm.num_free == 4
    bm.allocate("s", [1])
    with pytest.raises(ValueError, match="child_id"):
        bm.fork("s", ["t"])


def test_append_checks_on_a_preempted_sequence_point_to_resume() -> None:
    bm = BlockManager(4, 4)
    bm.allocate("s", [1, 2, 3])
    bm.preempt("s")
    for call in (lambda: bm.can_append("s"), lambda: bm.can_append("s", 2), lambda: bm.append_blocks_needed("s")):
        with pytest.raises(ValueError, match="preempted"):
            call()


def test_append_token_is_the_checked_decode_step() -> None:
    bm = BlockManager(3, 2, vocab_size=50)
    bm.allocate("s", [1])
    bm.fork("s", "t")
    assert bm.append_token("s", np.int32(7)) != []  # shared partial tail: copied first
    assert bm.append_token("s", 8) == [] and bm.read("s") == [1, 7, 8]
    before = _snapshot(bm)
    for bad in (True, 2.0, -1, 50, "a", None):
        with pytest.raises(ValueError, match="tokens|token"):
            bm.append_token("t", bad)
    assert _snapshot(bm) == before
    bm.append_token("t", 9)  # t owns the old tail now: written in place
    assert bm.append_token("s", 10) == []  # fills s's second block
    with pytest.raises(OutOfBlocks):
        bm.append_token("s", 11)  # s needs a third block; the pool of three is full
    assert bm.read("t") == [1, 9] and bm.read("s") == [1, 7, 8, 10] and bm.num_free == 0


def test_batch_tables_for_a_paged_attention_kernel() -> None:
    bm = BlockManager(16, 4)
    bm.allocate("a", list(range(10)))
    bm.allocate("b", list(range(4)) + [7])  # shares block 0 with a
    tables, lens = bm.batch_tables(["a", "b"])
    assert tables.dtype == np.int32 and lens.dtype == np.int64
    assert tables.tolist() == [bm.block_table("a"), bm.block_table("b") + [-1]] and lens.tolist() == [10, 5]
    assert tables[0, 0] == tables[1, 0]
    assert bm.batch_tables([])[0].shape == (0, 0)
    bm.preempt("b")
    with pytest.raises(ValueError, match="preempted"):
        bm.batch_tables(["a", "b"])
    with pytest.raises(ValueError, match="seq_ids"):
        bm.batch_tables("ab")


# ---- the decode step's fast path -----------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(num_blocks=st.integers(2, 12), block_size=st.integers(1, 4),
       ops=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 30), st.integers(0, 3)), max_size=60))
def test_decode_fast_path_matches_the_general_path(num_blocks: int, block_size: int,
                                                   ops: list[tuple[int, int, int]]) -> None:
    """``can_append(s)`` and ``append_token`` (the decode step's shortcuts) against ``append_blocks_needed`` and
    ``append`` of a tuple (the general path): same answers, copies, tables, contents, index and pool, op by op."""
    fast, general = BlockManager(num_blocks, block_size), BlockManager(num_blocks, block_size)
    steps: list[tuple[int, int]] = []
    next_id = 0
    for kind, pick, token in ops:
        live = [s for s, q in fast.seqs.items() if not q.preempted]
        sid = live[pick % len(live)] if live else None
        if kind <= 2 and sid is not None:  # a decode step, the common case
            can = fast.can_append(sid)
            assert can == (general.append_blocks_needed(sid, 1) <= general.num_free)
            if can:
                assert fast.append_token(sid, token) == general.append(sid, (token,))
            else:
                with pytest.raises(OutOfBlocks):
                    fast.append_token(sid, token)
                with pytest.raises(OutOfBlocks):
                    general.append(sid, (token,))
        elif kind == 3:  # admit a prompt that shares blocks with earlier ones
            prompt = [token] * (1 + pick % 7)
            if fast.can_allocate(prompt):
                assert fast.allocate(next_id, prompt) == general.allocate(next_id, prompt)
                next_id += 1
        elif kind == 4 and sid is not None:  # fork: the tail becomes shared
            fast.fork(sid, next_id), general.fork(sid, next_id)
            next_id += 1
        elif kind == 5 and sid is not None:  # roll back: the tail holds tokens after the slot
            keep = max(1, fast.num_tokens(sid) - 1 - pick % 3)
            fast.truncate(sid, keep), general.truncate(sid, keep)
        elif kind == 6 and sid is not None:  # a step in flight reads the blocks
            steps.append((fast.begin_step([sid]), general.begin_step([sid])))
        elif kind == 7 and steps:
            a, b = steps.pop(pick % len(steps))
            assert fast.end_step(a) == general.end_step(b)
        elif kind == 7 and sid is not None:
            fast.free(sid), general.free(sid)
        assert fast.state() == general.state()
        assert [fast.block_prefix(b) for b in range(num_blocks)] == [general.block_prefix(b) for b in range(num_blocks)]
