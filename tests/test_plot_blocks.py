"""Section 8.3 drawings: every figure and widget view renders from real library state, at the sliders' extremes."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from inferlab.cache_value import context_update_options, prefix_cost
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.paging import BlockManager
from inferlab.paging_scenarios import cancellation_timeline, decode_with_preemption
from inferlab.plot import blocks as bplot
from inferlab.prefix_cache import RadixCache
from inferlab.snapshots import restore
from inferlab.units import GiB, MiB
from inferlab.widgets import explore, float_slider, int_slider
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
        bplot.draw_capacity_vs_requests(40, 1188 * MiB, 864 * MiB, 324 * MiB, 12 * GiB),
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


@pytest.mark.parametrize("explorer", [
    explore(bplot.paged_allocation_view, block_size=int_slider("block size", 1, 16, 4)),
    explore(bplot.refcount_view, step=int_slider("step", 0, 3, 0)),
    explore(bplot.copy_on_write_view, step=int_slider("step", 0, 2, 0)),
    explore(bplot.branch_sharing_view, branches=int_slider("branches", 1, 16, 4),
            prefix_tokens=int_slider("prefix", 0, 4096, 1520, step=8), block_size=int_slider("p", 1, 64, 16)),
    explore(bplot.shared_batch_view, prefix_tokens=int_slider("prefix", 0, 8192, 6144, step=256),
            block_size=int_slider("p", 1, 64, 16)),
    explore(bplot.snapshot_view, interval=int_slider("interval", 512, 16_384, 4096, step=512)),
    explore(bplot.value_view, link_gb_per_s=float_slider("link", 8, 128, 64, 8), p_hit=float_slider("p", 0, 1, 0.5, 0.01)),
    explore(bplot.cache_choice_view, link_gb_per_s=float_slider("link", 8, 128, 64, 8),
            p_hit=float_slider("p", 0, 1, 0.5, 0.01)),
    explore(bplot.pool_view, pool_gib=float_slider("pool", 0.5, 8, 6, 0.5)),
], ids=lambda e: e.draw.__name__)
def test_every_view_renders_at_its_extremes(explorer) -> None:
    for _, fig in explorer.sweep():
        assert isinstance(fig, Figure)


def test_eviction_sweep_lru_steps_up_value_per_byte_earlier() -> None:
    sweep = bplot.eviction_sweep()
    grid = list(bplot.POOL_GRID_GIB)
    assert sweep["total"] == [19_016]
    assert sweep["LRU"][grid.index(1.0)] == 0 and sweep["LRU"][grid.index(6.0)] == 16_266
    assert all(v >= l for v, l in zip(sweep["value per byte"], sweep["LRU"]))
    assert sweep["LRU"] == sorted(sweep["LRU"])
