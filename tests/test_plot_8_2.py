"""Section 8.2 drawings: every figure and widget callback builds a Figure, also at its controls' extremes."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from inferlab.book.plot import roofline as PR
from inferlab.book.plot import schedule as PS
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.scheduling import budget_sweep, replay_requests, run_example

M = MODELS["qwen3-8b"]


def test_gantt_draws_one_bar_per_iteration_and_request():
    s = run_example("chunked")
    fig = PS.gantt(s, xmax_s=1.0, figure_caption="Figure 8-7: chunked")
    ax = fig.axes[0]
    bars = sum(len(c.get_paths()) for c in ax.collections)
    assert bars == sum(len(it.work) for it in s.iterations)
    assert ax.get_xlim() == (0, 1000)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["r0", "r1", "r2", "r3"]


def test_shared_axis_fits_every_schedule():
    ss = [run_example(p) for p in ("fixed", "continuous", "chunked")]
    assert PS.shared_xmax(ss) >= max(s.makespan_s for s in ss)


@pytest.mark.parametrize("kwargs", [{}, {"policy": "fixed"}, {"policy": "chunked", "chunk_tokens": 128},
                                    {"policy": "chunked", "token_budget": 512, "chunk_tokens": 8192},
                                    {"policy": "continuous", "max_running": 4}, {"max_running": 1}])
def test_draw_example_extremes(kwargs):
    assert isinstance(PS.draw_example(**kwargs), Figure)


@pytest.mark.parametrize(("c", "h"), [(1, 0), (4, 0), (4, 8), (64, 0), (16, 2048)])
def test_pair_grid_figure(c, h):
    fig = PS.pair_grid_figure(c, h)
    assert f"{c * h}" in fig.axes[0].get_title()


@pytest.mark.parametrize(("c", "h"), [(64, 0), (512, 7680), (4096, 32768)])
def test_draw_chunk(c, h):
    assert isinstance(PS.draw_chunk(c, h), Figure)


def test_budget_sweep_figure_with_published_points():
    ours = budget_sweep(replay_requests(), [512, 8192])
    pub = pd.DataFrame({"late_queue_s": [0.149, 0.0001], "max_itl_s": [0.032, 0.183]}, index=[512, 8192])
    fig = PS.budget_sweep_figure(ours, pub)
    assert len(fig.axes) == 2 and len(fig.axes[0].get_lines()) == 2


@pytest.mark.parametrize(("step", "largest"), [(1, 16), (8, 64), (32, 512), (64, 16)])
def test_draw_padding(step, largest):
    assert isinstance(PS.draw_padding(step, largest), Figure)


def test_roofline_figures():
    assert isinstance(PR.bytes_per_token_figure(M, figure_caption="Figure 8-3: x"), Figure)
    assert isinstance(PR.fast_store_figure(M, figure_caption="Figure 8-4: x"), Figure)
    fig = PR.step_time_figure(M, ACCELERATORS["rtx-pro-6000"], 128, max_batch=1024)
    assert "compute-bound above" in fig.axes[0].get_title()


def test_step_time_figure_with_a_separate_weight_store():
    acc = ACCELERATORS["rtx-pro-6000"]
    for context, bound in ((128, "compute-bound"), (2048, "memory-bound")):
        fig = PR.step_time_figure(M, acc, context, separate_weight_store=True)
        ax = fig.axes[0]
        title = ax.get_title()
        assert f"{bound} at every b" in title and "L* = 370" in title and "b = 0" not in title
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert not any("D_w" in label for label in labels) and not any("crossover" in label for label in labels)
        drawn = [line for line in ax.lines if line.get_visible() and len(line.get_xdata())]
        assert len(drawn) == 3  # compute, reads, max: no vertical crossover line (hidden), no marked batch


def test_weight_reuse_accelerator_choice_takes_effect():
    def memory_line(fig):
        return fig.axes[1].lines[1].get_ydata()
    rtx, h200 = PR.draw_weight_reuse(accelerator="rtx-pro-6000"), PR.draw_weight_reuse(accelerator="h200")
    ratio = memory_line(rtx) / memory_line(h200)
    assert ratio == pytest.approx(ACCELERATORS["h200"].hbm_bandwidth / ACCELERATORS["rtx-pro-6000"].hbm_bandwidth)
    doubled = PR.draw_weight_reuse(accelerator="h200", bandwidth_scale=2.0)
    assert memory_line(h200) / memory_line(doubled) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="bandwidth_scale"):
        PR.draw_weight_reuse(bandwidth_scale=0)


@pytest.mark.parametrize("kwargs", [{}, {"batch": 1}, {"batch": 256}, {"context_tokens": 128},
                                    {"context_tokens": 32768}, {"bandwidth_scale": 0.25},
                                    {"bandwidth_scale": 4.0}, {"accelerator": "m2-max"}])
def test_draw_weight_reuse_extremes(kwargs):
    fig = PR.draw_weight_reuse(**kwargs)
    assert len(fig.axes) == 2


def test_per_token_time_figure_draws_both_stores_and_the_kv_floor():
    fig = PR.per_token_time_figure(M, ACCELERATORS["rtx-pro-6000"], 8192, overhead_s=0.0176,
                                   figure_caption="Figure: time per output token")
    ax, bx = fig.axes[:2]
    assert len(ax.get_lines()) == 3 and len(bx.get_lines()) == 2
    hbm, store = (line.get_ydata() for line in ax.get_lines()[:2])
    assert (hbm > store).all() and store[0] > store[-1]  # the weight read is gone, the fixed cost still spreads


def test_legible_raises_only_the_labels_below_the_floor():
    from inferlab.book.plot import new_figure
    from inferlab.book.plot.legibility import legible, smallest_label_pt

    fig, ax = new_figure(width=14.0)  # drawn twice the page width: shown at half size
    small, large = ax.text(0, 0, "small", fontsize=8), ax.text(0, 1, "large", fontsize=20)
    assert smallest_label_pt(fig) < 8
    assert legible(fig) is fig and smallest_label_pt(fig) == pytest.approx(8)
    assert small.get_fontsize() == pytest.approx(16) and large.get_fontsize() == 20


def test_wide_figures_keep_every_label_legible_at_the_page_width():
    from inferlab import example
    from inferlab.book.plot import timeline as PT
    from inferlab.book.plot.legibility import MIN_LABEL_PT, smallest_label_pt
    from inferlab.datasets import published

    ours = budget_sweep(replay_requests(), [512, 8192], max_running=8, whole_chunks=False)
    figs = {
        "weight reuse": PR.draw_weight_reuse(16, 8192, 0.5),
        "per-token time": PR.per_token_time_figure(M, ACCELERATORS["rtx-pro-6000"], 8192, 0.0176,
                                                   figure_caption="caption"),
        "chunk": PS.draw_chunk(512, 16384),
        "budget sweep": PS.budget_sweep_figure(ours, published("token_budget_8_2_4").set_index("token_budget")),
        "request": PT.request_timeline(example.single_short_request(), 0.1, 7.0, "Figure 8-2"),
        "batch": PT.draw_batch(32),
    }
    for name, fig in figs.items():
        assert smallest_label_pt(fig) >= MIN_LABEL_PT - 1e-9, name
    assert "\n" in figs["weight reuse"].axes[1].get_title()  # the long roofline title wraps instead of being cut


@pytest.mark.parametrize(("step", "largest"), [(1, 16), (8, 64), (32, 512), (64, 16), (3, 100)])
def test_padding_curve_is_the_library_rule_for_every_row(step, largest):
    from inferlab.scheduling import shapes

    line = PS.draw_padding(step, largest).axes[0].lines[0]
    rows, computed = line.get_xdata(), line.get_ydata()
    sizes = shapes.normalize(shapes.multiples(step, max(largest, step)))
    assert computed.tolist() == [shapes.padded_rows(int(r), sizes) for r in rows]


@pytest.mark.parametrize("history", [0, 4096, 5000, 32768])
def test_budget_rule_curve_is_the_library_rule_and_runs_through_the_mark(history):
    from inferlab.scheduling import FITTED_COST, chunking

    ax = PS.draw_budget_rule(80.0, history, 3).axes[0]
    curve, mark = ax.lines[0], ax.lines[1]
    hs, tokens = curve.get_xdata(), curve.get_ydata()
    assert (np.diff(hs) > 0).all() and history in hs.tolist()
    assert tokens.tolist() == [chunking.max_chunk_tokens(FITTED_COST, 0.080, int(h), (2048,) * 3) for h in hs]
    assert mark.get_ydata()[0] == tokens[hs.tolist().index(history)]


def test_budget_rule_reuses_the_curve_when_only_the_history_moves():
    PS._largest_pieces.cache_clear()
    PS.draw_budget_rule(120.0, 0, 5)
    PS.draw_budget_rule(120.0, 9000, 5)
    assert PS._largest_pieces.cache_info().hits == 1
    from inferlab.scheduling import FITTED_COST

    hs, tokens = PS._largest_pieces(FITTED_COST, 0.120, (2048,) * 5, 32768)
    with pytest.raises(ValueError):
        tokens[0] = 0  # the cached arrays are read-only


def test_chunk_parts_add_up_to_the_iteration_time():
    from inferlab.scheduling import FITTED_COST
    from inferlab.units import ms

    bx = PS.draw_chunk(512, 7680).axes[1]
    widths = [p.get_width() for p in bx.patches]
    lefts = [p.get_x() for p in bx.patches]
    assert sum(widths) == pytest.approx(FITTED_COST.of(512, 7680) / ms)
    assert lefts == pytest.approx(np.concatenate([[0], np.cumsum(widths)[:-1]]))
    labels = [t.get_text() for t in bx.get_legend().get_texts()]
    assert [label.split(":")[0] for label in labels] == ["fixed", "per token", "pairs c*h", "pairs c(c+1)/2"]


def test_gantt_bars_keep_their_iteration_spans_and_colours():
    from matplotlib.colors import to_rgba

    from inferlab.book.plot import COLORS
    from inferlab.units import ms

    s = run_example("chunked")
    (bars,) = PS.gantt(s).axes[0].collections
    work = [(it, w) for it in s.iterations for w in it.work]
    for path, color, (it, w) in zip(bars.get_paths(), bars.get_facecolors(), work):
        xs = path.vertices[:, 0]
        assert (xs.min(), xs.max()) == pytest.approx((it.start_s / ms, (it.start_s + it.duration_s) / ms))
        assert tuple(color) == pytest.approx(to_rgba(COLORS[w.kind]))
