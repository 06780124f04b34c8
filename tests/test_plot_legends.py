"""BookLegend: the pixels of Matplotlib's Legend, each box measured once per draw."""

import io

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.offsetbox import TextArea
from matplotlib.patches import Patch

from inferlab.book.plot import new_figure, refresh_legend, to_png
from inferlab.book.plot.legends import BookLegend, book_legend
from inferlab.book.plot.ticks import BookAxes


def _legends(book: bool) -> Figure:
    """Legends of every kind the book draws: titled, in columns, expanded, placed by 'best', on the figure."""
    keep = book_legend if book else (lambda legend: legend)
    fig = Figure(figsize=(7.0, 4.0))
    left, right = fig.subplots(1, 2)
    for i, style in enumerate(["-", "--", ":"]):
        left.plot([0, 1, 2], [i, i + 1, i * i], style, marker="os^"[i], label=f"line {i}\nsecond row" if i else "line 0")
    left.bar([0.5, 1.5], [1, 2], color="C3", label="bars")
    keep(left.legend(title="a title", ncols=2, fontsize=8, loc="best"))
    right.fill_between([0, 1], [0, 1], alpha=0.4, label="area")
    right.scatter([0.2, 0.8], [0.5, 0.1], label="points")
    keep(right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), mode="expand", ncols=2))
    keep(fig.legend(handles=[Patch(color="C1", label="prefill"), Patch(color="C2", label="decode")],
                    loc="lower center", ncols=2))
    return fig


def test_book_legends_draw_the_pixels_of_matplotlibs():
    assert to_png(_legends(book=True)) == to_png(_legends(book=False))
    tight = [io.BytesIO(), io.BytesIO()]
    for buf, book in zip(tight, (True, False)):
        _legends(book).savefig(buf, format="png", bbox_inches="tight")  # measured outside a draw too
    assert tight[0].getvalue() == tight[1].getvalue()


def test_each_entry_is_measured_once_per_draw(monkeypatch):
    from inferlab.book.plot.legends import _boxes

    calls = []
    original = TextArea.get_bbox

    def counted(self, renderer):
        calls.append(self)
        return original(self, renderer)

    monkeypatch.setattr(TextArea, "get_bbox", counted)
    for book in (False, True):
        fig = Figure(figsize=(4.0, 3.0))
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1], label="one")
        ax.plot([0, 1], [1, 0], label="two")
        legend = book_legend(ax.legend(loc="upper left")) if book else ax.legend(loc="upper left")
        calls.clear()
        to_png(fig)
        counts = sorted(calls.count(text) for text in set(calls))
        assert counts == [1, 1] if book else len(counts) == 2 and min(counts) >= 3, counts  # Matplotlib's: 3 or more
    assert not any("get_bbox" in box.__dict__ for box in _boxes(legend._legend_box))  # nothing kept after the draw
    narrow = legend.get_window_extent().width
    legend.texts[0].set_text("a much longer label than before")
    assert legend.get_window_extent().width > narrow + 20  # outside a draw: measured anew


def test_legends_of_book_figures_are_book_legends():
    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1], label="a")
    assert isinstance(ax, BookAxes) and isinstance(ax.legend(), BookLegend)
    assert isinstance(ax.twinx().legend(handles=[Patch(label="b")]), BookLegend)
    refresh_legend(ax, on_figure=True, loc="lower center")
    assert isinstance(ax._inferlab_figure_legend, BookLegend) and fig.legends == [ax._inferlab_figure_legend]
    assert type(Figure().subplots()) is Axes  # Matplotlib's own figures are left alone
    with pytest.raises(ValueError, match="legend"):
        book_legend(ax)


def test_kept_answers_end_with_the_block_even_when_it_raises():
    from inferlab.book.plot.per_draw import kept_for_draw

    class Box:
        calls = 0

        def size(self, scale):
            Box.calls += 1
            return 2 * scale

    box = Box()
    with pytest.raises(RuntimeError), kept_for_draw([box], ("size",)):
        assert box.size(3) == box.size(3) == 6 and Box.calls == 1  # once per argument inside the block
        raise RuntimeError("a draw that fails")
    assert "size" not in box.__dict__ and box.size(3) == 6 and Box.calls == 2  # worked out again after it
