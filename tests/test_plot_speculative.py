"""Figures of section 8.5: the draft-length legend sits in its own headroom, above every plotted value."""

import numpy as np
import pytest

from inferlab.book.plot import speculative as splot
from inferlab.book.plot import to_png


@pytest.mark.parametrize("kwargs", [dict(accept=0.75, decay=1.0, per_draft_ms=3.6, group=8, batch=1),
                                    dict(accept=1.0, decay=1.0, per_draft_ms=0.0, group=1, batch=1),
                                    dict(accept=0.05, decay=0.5, per_draft_ms=8.0, group=16, batch=256)])
def test_draft_length_legend_hides_no_data(kwargs):
    fig = splot.draft_length_view(**kwargs)
    to_png(fig)
    ax = fig.axes[0]
    legend_bottom = ax.transData.inverted().transform(ax.get_legend().get_window_extent().get_points())[0, 1]
    highest = max(np.max(line.get_ydata()) for line in ax.lines)
    assert legend_bottom > highest
    frame = splot.draft_length_frame(**kwargs)
    best = int(frame["ms per token"].idxmin())
    assert f"best m = {best}" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_round_cost_marks_the_break_even_points_and_the_lookups():
    from inferlab.speculative import cost as C

    ax = splot.round_cost_figure(0.6, 5, 2.0, 30.0).axes[0]
    circles, squares = ax.collections
    assert np.asarray(circles.get_offsets())[:, 0] == pytest.approx([8.7, 53.9], abs=0.05)  # the chapter's figures
    yours = (30.0 + 2.0) / C.expected_tokens([0.6] * 5)
    assert np.asarray(squares.get_offsets())[-1] == pytest.approx([2.0, yours])
    assert len(squares.get_offsets()) == 3 and len(ax.get_lines()) == 5  # three curves, plain decode, your crossing
    crossing = 26.26 * C.expected_tokens([0.6] * 5) - 30.0  # where (verify + q) / E[N] meets the plain step
    assert ax.get_lines()[3].get_xdata()[0] == pytest.approx(crossing)
    assert f"yours: {crossing:.1f} ms" in [t.get_text() for t in ax.texts]
