"""Tick locators of the redraws: only ticks inside the view are made, and few of them."""

import numpy as np
import pytest
from matplotlib.ticker import MaxNLocator

from inferlab.book.plot import _TEMPLATE_TICKS, explorer_factories, new_figure, to_png
from inferlab.book.plot.ticks import InView, decade_ticks, few_ticks


def test_in_view_drops_the_ticks_a_locator_puts_outside_the_view():
    inner = MaxNLocator(nbins=5)
    raw = inner.tick_values(0.3, 9.7)
    assert raw.min() < 0.3 and raw.max() > 9.7  # Matplotlib's own locator overshoots on both sides
    kept = InView(MaxNLocator(nbins=5)).tick_values(0.3, 9.7)
    assert kept.tolist() == [t for t in raw.tolist() if 0.3 <= t <= 9.7]
    assert InView(MaxNLocator(nbins=5)).tick_values(0.0, 10.0).tolist() == [0, 2, 4, 6, 8, 10]  # ends kept


def test_few_ticks_makes_only_the_tick_objects_drawn():
    fig, ax = new_figure()
    ax.plot([0.3, 97.0], [-1.3, 2.9])
    few_ticks(ax, x=4, y=3)
    to_png(fig)
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        locs = axis.get_majorticklocs()
        # tick objects beyond the drawn ones: at most those a figure template brings ready-made (cheap)
        assert len(axis.majorTicks) <= max(len(locs), _TEMPLATE_TICKS) and ((locs >= lo) & (locs <= hi)).all()
    assert len(ax.xaxis.get_majorticklocs()) <= 5 and len(ax.yaxis.get_majorticklocs()) <= 4


def test_decade_ticks_on_a_log_axis():
    fig, ax = new_figure()
    ax.plot([1, 256], [0.03, 47.0])
    ax.set_yscale("log")
    decade_ticks(ax)
    to_png(fig)
    assert np.allclose(ax.yaxis.get_majorticklocs(), [0.1, 1, 10])
    assert ax.yaxis.get_minorticklocs().size == 0


def test_bad_arguments_are_named():
    fig, ax = new_figure()
    with pytest.raises(ValueError, match="x and y"):
        few_ticks(ax, x=0)
    with pytest.raises(ValueError, match="which"):
        decade_ticks(ax, which="z")
    with pytest.raises(ValueError, match="inner"):
        InView("auto")


@pytest.mark.parametrize("name", sorted(explorer_factories()))
def test_explorers_make_no_tick_outside_the_view_and_at_most_eight_per_axis(name):
    fig = explorer_factories()[name]().render()
    to_png(fig)
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            locs = np.asarray(axis.get_majorticklocs())
            slack = 1e-9 * max(abs(lo), abs(hi))
            assert ((locs >= lo - slack) & (locs <= hi + slack)).all(), (name, axis.axis_name, locs, lo, hi)
            assert len(axis.majorTicks) <= max(len(locs), _TEMPLATE_TICKS) and len(locs) <= 8, (name, axis.axis_name, locs)


def test_round_log_ticks_thin_out_as_the_span_grows():
    from inferlab.book.plot.ticks import round_log_ticks

    narrow = round_log_ticks(np.array([1.5, 9.0]))  # under a decade: 1-2-3-5
    assert {1.0, 2.0, 3.0, 5.0} <= set(narrow)
    assert set(round_log_ticks(np.array([1.0, 100.0]))) >= {1.0, 3.0, 10.0, 30.0, 100.0}  # two decades: 1-3
    wide = round_log_ticks(np.array([0.01, 1000.0]))  # five decades: powers of ten only
    assert all(np.isclose(np.log10(t), round(np.log10(t))) for t in wide)
    with pytest.raises(ValueError, match="values"):
        round_log_ticks(np.array([0.0, 1.0]))


def _labelled_figure(axes_class):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.0))
    left, right = fig.subplots(1, 2, subplot_kw={"axes_class": axes_class})
    left.plot([1, 300], [0.02, 47.0])
    left.set(xscale="log", yscale="log", xlabel="batch", ylabel="GiB per token", title="log")
    right.bar(["a", "bb", "ccc"], [3.0, 1.5, 12345.0])
    right.set(xlabel="category", ylabel="a long label")
    right.twinx().plot([0, 2], [1e-3, 2e-3])
    fig.align_ylabels([left, right])  # siblings: each axis measures the other's tick labels too
    return fig


def test_book_axes_draw_the_pixels_of_matplotlibs_axes():
    from matplotlib.axes import Axes

    from inferlab.book.plot.ticks import BookAxes

    assert to_png(_labelled_figure(BookAxes)) == to_png(_labelled_figure(Axes))
    _, ax = new_figure()
    assert isinstance(ax, BookAxes) and isinstance(ax.twinx(), BookAxes) and isinstance(ax.twiny(), BookAxes)


def test_book_axes_work_ticks_out_once_per_draw(monkeypatch):
    from matplotlib.axis import Axis

    calls = []
    original = Axis._update_ticks

    def counted(self):
        calls.append(self)
        return original(self)

    monkeypatch.setattr(Axis, "_update_ticks", counted)
    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1])
    to_png(fig)
    assert calls.count(ax.xaxis) == 1 and calls.count(ax.yaxis) == 1  # Matplotlib's Axes: twice each
    calls.clear()
    ax.set_xlim(0, 7)
    assert ax.xaxis.get_majorticklocs().max() == 7 and len(ax.xaxis._update_ticks()) >= 2  # outside a draw: as usual
    to_png(fig)
    assert calls.count(ax.xaxis) == 2  # the call above and one in the draw: nothing kept from the last draw
