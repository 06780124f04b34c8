"""Section 8.3 drawings: every figure and widget view renders from real library state, at the sliders' extremes."""

from __future__ import annotations

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from inferlab.book.plot import COLORS
from inferlab.book.plot import blocks as bplot
from inferlab.hardware import ACCELERATORS
from inferlab.kvcache import BlockManager, RadixCache, context_update_options, prefix_cost
from inferlab.kvcache.scenarios import cancellation_timeline, decode_with_preemption, refcount_steps
from inferlab.kvcache.snapshots import hybrid_restore_table, restore
from inferlab.memory import max_concurrent_requests, paged_slots
from inferlab.models import MODELS
from inferlab.units import GiB, MiB
from inferlab.workloads import agent_session, reuse_from_previous


def test_static_drawings_return_figures() -> None:
    bm = BlockManager(4, 4, free_order=[2, 0, 3, 1])
    bm.allocate("s", list(range(10)))
    s = agent_session(13)
    tree = RadixCache(10**6)
    for t in s:
        tree.insert(t.input_ids)
    a = prefix_cost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], 6144)
    b = prefix_cost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], 2048)
    figs = [
        bplot.draw_pool(bm.state(), figure="Figure 8-10: x"),
        bplot.draw_slots([9, 13, 5, 15], "ABCD", max_tokens=16),
        bplot.draw_slots([9, 13, 5, 15], "ABCD", block_size=4),
        bplot.draw_waste_vs_block_size([9, 13, 5, 15], [1, 2, 4], [0, 4, 10], [42, 23, 13], 4),
        bplot.draw_branch_sharing(416, 131),
        bplot.draw_capacity_vs_requests(40, 1188 * MiB, 864 * MiB, 324 * MiB, 12 * GiB, 10, 35),
        bplot.draw_pool_steps(refcount_steps()),
        bplot.draw_hybrid_restore(hybrid_restore_table(8192, 1024)),
        bplot.draw_cancellation(cancellation_timeline(), 104),
        bplot.draw_preemption(decode_with_preemption(12, 4, {"a": list(range(10)), "b": list(range(50, 60))}, 12), 12),
        bplot.draw_prefix_tree(tree, {t.input_ids: t.name for t in s}),
        bplot.draw_turn_reuse([t.name for t in s], [len(t.input_ids) for t in s], reuse_from_previous(s)),
        bplot.draw_snapshot_restore(restore(10_752, [4096, 8192]), [4096, 8192], 12_288),
        bplot.draw_context_updates(context_update_options()),
        bplot.draw_value_vs_hit_probability({"A": a, "B": b}, 0.5),
        bplot.draw_cache_choice(a, b, 3, 0.5, 0.5),
        bplot.draw_hits_vs_pool([GiB, 2 * GiB], {"LRU": [0, 10]}, 20),
    ]
    assert all(isinstance(f, Figure) for f in figs)
    caption = bplot.caption(bplot.draw_branch_sharing(416, 131), "Figure 8-99: " + "long caption " * 20)
    assert "Figure 8-99" in caption._suptitle.get_text()


def test_pool_drawing_shows_the_table_it_was_given() -> None:
    bm = BlockManager(4, 4, free_order=[2, 0, 3, 1])
    bm.allocate("s", list(range(10)))
    fig = bplot.draw_pool(bm.state())
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "[2, 0, 3]" in texts and "free" in texts and "3 table references" in fig.axes[0].get_title()


def test_view_step_out_of_range_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="step"):
        bplot.refcount_view(len(refcount_steps()))
    with pytest.raises(ValueError, match="step"):
        bplot.copy_on_write_view(-1)


def test_shared_batch_axis_extends_past_the_fit_counts() -> None:
    fig = bplot.shared_batch_view(8192, 64)
    fit = max_concurrent_requests(12 * GiB, MODELS["qwen3-8b"], 8192, 256, 64, 8191)
    assert fit == 247 and fig.axes[0].get_xlim()[1] > fit
    assert str(fit) in fig.axes[0].get_title()


def test_figure_8_14_has_four_panels() -> None:
    fig = bplot.draw_pool_steps(refcount_steps())
    assert len(fig.axes) == 4
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[1].startswith("2.") and "draining" in " ".join(t.get_text() for t in fig.axes[2].texts)


def test_pool_sweep_lru_steps_up_value_per_byte_earlier() -> None:
    hits, total = bplot.pool_sweep()
    grid = list(bplot.POOL_GRID_GIB)
    assert total == 20_322
    assert hits["LRU"][grid.index(1.0)] == 0 and hits["LRU"][grid.index(6.0)] == 16_899
    assert all(v >= l for v, l in zip(hits["value per byte"], hits["LRU"]))
    assert hits["LRU"] == sorted(hits["LRU"])
    assert set(hits) == {"LRU", "value per byte", "value per byte, no hint"}


def _all_section_figures() -> dict[str, Figure]:
    shared = BlockManager(num_blocks=12, block_size=4)
    shared.allocate("A", list(range(9)))
    shared.allocate("B", list(range(8)) + [500, 501, 502, 503, 504])
    shared.allocate("C", [600 + t for t in range(5)])
    shared.allocate("D", [700 + t for t in range(15)])
    s = agent_session(13)
    tree = RadixCache(10**6)
    for t in s:
        tree.insert(t.input_ids)
    return {
        "8-13": bplot.caption(bplot.draw_pool(shared.state(), ["A", "B", "C", "D"]), "Figure 8-13: " + "words " * 30),
        "8-14": bplot.draw_pool_steps(refcount_steps()),
        "8-15": bplot.copy_on_write_view(2),
        "8-17": bplot.draw_prefix_tree(tree, {t.input_ids: t.name for t in s}),
        "8-19": bplot.draw_snapshot_restore(restore(10_752, [4096, 8192]), [4096, 8192], 12_288),
        "8-20": bplot.draw_context_updates(context_update_options()),
        "8-21": bplot.draw_hybrid_restore(hybrid_restore_table(8192, 1024)),
        "8-22": bplot.cache_choice_view(64, 0.5, 0.5),
        "keep": bplot.keep_or_recompute_view(8, 0.5, 1.0),
        "value": bplot.value_view(64, 0.5, 1.0),
    }


def test_labels_are_at_least_8_pt_at_the_page_width() -> None:
    for name, fig in _all_section_figures().items():
        assert fig.get_figwidth() <= bplot.PAGE_WIDTH_IN, name
        assert bplot.smallest_label_pt(fig) >= bplot.MIN_LABEL_PT, name


def test_smallest_label_scales_a_wide_figure_down() -> None:
    fig = Figure(figsize=(14, 3))
    fig.text(0.5, 0.5, "x", fontsize=10)
    assert bplot.smallest_label_pt(fig) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="fig"):
        bplot.smallest_label_pt(Figure(figsize=(3, 3)))


def test_count_axes_have_integer_ticks() -> None:
    fig = bplot.draw_preemption(decode_with_preemption(12, 4, {"a": list(range(10)), "b": list(range(50, 60))}, 12), 12)
    ax = fig.axes[0]
    for ticks in (ax.xaxis.get_major_locator()(), ax.yaxis.get_major_locator()()):
        assert all(float(t).is_integer() for t in ticks)


def test_cache_choice_takes_one_probability_per_prefix() -> None:
    even = bplot.cache_choice_view(64, 0.5, 0.5)
    assert even.axes[0].get_title().startswith("keep A")
    low_a = bplot.cache_choice_view(64, 0.40, 0.5)  # below the exercise's crossover, three B win
    assert low_a.axes[0].get_title().startswith("keep 3 x B")


def test_keep_or_recompute_view_draws_three_links_and_the_keep_line() -> None:
    fig = bplot.keep_or_recompute_view(8, 0.5, 1.0)
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 4  # three links and one threshold
    assert ax.get_lines()[3].get_ydata()[0] == 3.0  # (p_h + m) / p_h at even odds, one transfer of maintenance
    assert len(bplot.keep_or_recompute_view(64, 0.01, 0).axes[0].get_lines()) == 4


def test_paged_slots_draw_one_cell_per_allocated_position_and_colour_the_used_ones() -> None:
    lengths = [9, 13, 5, 15]
    for block_size in (1, 4, 16):
        ax = bplot.draw_slots(lengths, "ABCD", block_size=block_size).axes[0]
        cells, outlines = [c for c in ax.collections if isinstance(c, PolyCollection)]
        faces = cells.get_facecolors()
        assert len(cells.get_paths()) == paged_slots(lengths, block_size)
        assert sum(tuple(f) == to_rgba(COLORS["prefill"]) for f in faces) == sum(lengths)
        assert len(outlines.get_paths()) == sum(-(-n // block_size) for n in lengths)  # one outline per block
