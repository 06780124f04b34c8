"""Figures of section 8.6: legends that match the bars drawn."""
import pandas as pd
import pytest

from inferlab.book.plot import serving as splot
from inferlab.datasets import published


def _ours() -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples([(1, "one-at-a-time"), (1, "chunked"), (4, "one-at-a-time"), (4, "chunked")],
                                      names=["arrival_rate_per_s", "policy"])
    return pd.DataFrame({"completion_rps": [0.9, 1.0, 1.4, 2.2], "goodput_rps": [0.8, 0.9, 0.4, 0.8]}, index=index)


def test_goodput_legend_names_each_policy_and_the_experiment():
    chapter = published("goodput_8_6_2").set_index(["arrival_rate_per_s", "policy"])
    fig = splot.goodput_view(_ours(), chapter)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["ours, single", "ours, batched", "experiment 8-9 (median)"]
    colors = [h.get_facecolor() for h in fig.axes[1].get_legend().legend_handles[:2]]
    assert colors[0] != colors[1]


def test_goodput_legend_without_the_experiment():
    fig = splot.goodput_view(_ours())
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["ours, single", "ours, batched"]


def test_goodput_windows_draw_a_dot_per_window_and_the_printed_medians():
    index = pd.MultiIndex.from_tuples([(4, p, w) for p in ("one-at-a-time", "chunked") for w in (1, 2, 3)],
                                      names=["arrival_rate_per_s", "policy", "window"])
    windows = pd.DataFrame({"completion_rps": [1.4, 1.3, 1.5, 2.1, 2.2, 2.5],
                            "goodput_rps": [0.4, 0.5, 0.4, 1.8, 0.7, 0.8]}, index=index)
    chapter = published("goodput_8_6_2").set_index(["arrival_rate_per_s", "policy"])
    fig = splot.goodput_windows_view(windows, chapter)
    left, right = fig.axes[:2]
    dots = [line for line in right.lines if line.get_marker() == "o"]
    assert sorted(float(y) for line in dots for y in line.get_ydata()) == sorted(windows["goodput_rps"])
    assert [round(b.get_height(), 3) for b in right.patches] == [0.4, 0.8]  # the medians
    dashes = [float(line.get_ydata()[0]) for line in right.lines if line.get_marker() == "_"]
    assert dashes == [0.31, 1.02]  # experiment 8-9 at 4/s, one at a time and continuous
    labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert labels == ["one at a time, median", "continuous batching, median", "one window (ours)",
                      "experiment 8-9, median"]
    bare = splot.goodput_windows_view(windows)
    assert not [line for line in bare.axes[0].lines if line.get_marker() == "_"]


def test_arrivals_title_states_the_library_summary():
    from inferlab import example, serving

    fig = splot.arrivals_view(8.0, 6.0, 5.0, "one-at-a-time", False)
    reqs = serving.poisson_requests(8.0, 40, example.SHORT.prompt_tokens, 64, seed=7)
    s = serving.summarize_served(serving.serve(reqs, serving.EngineSetup("one-at-a-time", kv_budget_bytes=6.0 * 2**30),
                                                   deadline_s=5.0))
    assert (f"{int(s['on_time'])} of 40 on time; {s['mean_in_system']:.1f} in the system on average, "
            f"{s['mean_latency_s']:.1f} s each") in fig._suptitle.get_text()


def test_configuration_plane_colours_the_feasible_points():
    from matplotlib.colors import to_rgba

    from inferlab.book.plot import COLORS

    fig = splot.config_view(kv_budget_gib=12.0, deadline_s=7.0)
    ax = fig.axes[0]
    (points,) = [c for c in ax.collections if len(c.get_offsets()) == 4]
    names = [t.get_text() for t in ax.texts]
    assert names == ["A", "B", "C", "D"]
    green = [tuple(c) == to_rgba(COLORS["decode"]) for c in points.get_facecolors()]
    assert green == [name == "D" for name in names]  # the chapter: only D fits and finishes on time
    assert "cheapest feasible: D" in fig._suptitle.get_text()


def test_amdahl_limits_are_drawn_and_kept_in_view():
    from matplotlib.collections import LineCollection

    fig = splot.amdahl_explorer_view(decode_share=0.95, max_speedup=2.0)
    ax = fig.axes[0]
    (limits,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    heights = [seg[0][1] for seg in limits.get_segments()]
    assert heights == pytest.approx([1 / (1 - f) for f in (0.2, 0.5, 0.8, 0.95)])
    assert ax.get_ylim()[1] > 20  # the 95 % limit (20x) stays in view although the curves end near 2
    assert len([line for line in ax.get_lines() if line.get_linestyle() == "-"]) == 4
    assert ax.get_ylim() == splot.amdahl_explorer_view(decode_share=0.2, max_speedup=64.0).axes[0].get_ylim()
