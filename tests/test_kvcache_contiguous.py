"""Contiguous allocation against paging (8.3.1): what each allocator holds, copies and needs, and its drawing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.book.plot import blocks as bplot
from inferlab.kvcache.contiguous import ALLOCATORS, arena_map, run_allocator
from inferlab.memory import blocks_for

PROMPTS, OUTPUTS = [48, 32, 64, 40, 56, 24], [20, 90, 8, 60, 35, 120]


def _check_no_overlap(run) -> None:
    for lay in run.layout:
        spans = sorted((s, s + a) for segs in lay.values() for s, _, a in segs)
        assert all(e0 <= s1 for (_, e0), (s1, _) in zip(spans, spans[1:])), run.allocator
        assert all(0 <= s and e <= run.high_water for s, e in spans)


def test_the_page_workload() -> None:
    runs = {a: run_allocator(a, PROMPTS, OUTPUTS, max_output=128) for a in ALLOCATORS}
    stored = runs["grow"].stored
    assert all(r.stored == stored for r in runs.values())  # the same tokens under every allocator
    assert stored[0] == sum(PROMPTS) and runs["grow"].steps == 120
    reserve, grow, paged = runs["reserve"], runs["grow"], runs["paged"]
    assert reserve.high_water == sum(p + 128 for p in PROMPTS) and reserve.copied_tokens == 0
    assert grow.allocated == grow.stored  # exact regions: nothing unused inside them ...
    assert grow.high_water > grow.peak_stored and grow.copied_tokens > 0  # ... but holes and copies
    assert paged.copied_tokens == 0 and paged.high_water == paged.peak_allocated
    assert paged.peak_allocated - paged.peak_stored < len(PROMPTS) * 16
    for run in runs.values():
        _check_no_overlap(run)


def test_grow_moves_only_when_blocked() -> None:
    alone = run_allocator("grow", [10], [30])  # nobody behind it: it grows in place
    assert alone.copied_tokens == 0 and alone.relocations == 0 and alone.high_water == 40
    pair = run_allocator("grow", [4, 4], [1, 1])  # the first is blocked by the second at once
    # the first moves past the second; then the second is blocked by it and slides into the freed room
    assert pair.relocations == 2 and pair.copied_tokens == 8
    assert pair.layout[1] == {0: [(8, 5, 5)], 1: [(0, 5, 5)]} and pair.high_water == 13
    done = run_allocator("grow", [4, 4], [1, 0])  # a request without outputs leaves at admission
    assert done.relocations == 0 and done.layout[1] == {0: [(0, 5, 5)]}


def test_reserve_refuses_a_cap_below_an_output() -> None:
    with pytest.raises(ValueError, match="max_output"):
        run_allocator("reserve", [4], [10], max_output=5)
    with pytest.raises(ValueError, match="allocator"):
        run_allocator("buddy", [4], [1])
    with pytest.raises(ValueError, match="same length"):
        run_allocator("grow", [4, 4], [1])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 30)), min_size=1, max_size=6), st.integers(1, 8))
def test_invariants(work, block) -> None:
    ps, gs = [p for p, _ in work], [g for _, g in work]
    runs = [run_allocator(a, ps, gs, block_size=block) for a in ALLOCATORS]
    for run in runs:
        _check_no_overlap(run)
        assert run.stored == runs[0].stored
        assert all(a >= s for a, s in zip(run.allocated, run.stored))
    paged = runs[2]
    for lay in paged.layout:  # whole blocks, at most B - 1 unused per request
        for segs in lay.values():
            used = sum(u for _, u, _ in segs)
            assert len(segs) == blocks_for(used, block) and sum(a for _, _, a in segs) - used < block


def test_arena_map_and_drawing() -> None:
    runs = [run_allocator(a, PROMPTS, OUTPUTS, max_output=128) for a in ALLOCATORS]
    img = arena_map(runs[1])
    assert img.shape == (runs[1].high_water, 121)
    assert (img >= 0).sum(axis=0).tolist() == runs[1].stored
    assert ((img == -1).sum() == 0)  # "grow" never holds unused positions
    assert (arena_map(runs[0]) == -1).sum(axis=0).tolist() == [a - s for a, s in
                                                                zip(runs[0].allocated, runs[0].stored)]
    fig = bplot.draw_arena_maps(runs, [f"r{i + 1}" for i in range(6)], figure="Figure: x")
    assert len(fig.axes) == 3 and bplot.smallest_label_pt(fig) >= bplot.MIN_LABEL_PT
    with pytest.raises(ValueError, match="names"):
        bplot.draw_arena_maps(runs, ["r1"])
    assert np.array_equal(arena_map(runs[2], 10), arena_map(runs[2])[:10])


@pytest.mark.parametrize(("kwargs", "name"), [
    (dict(prompts=[0], outputs=[1]), "prompts"), (dict(prompts=[4], outputs=[-1]), "outputs"),
    (dict(prompts=[4.5], outputs=[1]), "prompts"), (dict(prompts=[True], outputs=[1]), "prompts"),
    (dict(prompts="abc", outputs=[1]), "prompts"), (dict(prompts=[], outputs=[]), "prompts"),
    (dict(prompts=[4], outputs=[1], block_size=0), "block_size"),
    (dict(prompts=[4], outputs=[1], max_output=-1), "max_output"),
])
def test_bad_input_names_its_parameter(kwargs, name) -> None:
    for allocator in ALLOCATORS:
        with pytest.raises(ValueError, match=name):
            run_allocator(allocator, **kwargs)
