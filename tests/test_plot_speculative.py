"""Figures of section 8.5: the draft-length legend sits in its own headroom, above every plotted value."""

import numpy as np
import pytest

from inferlab.plot import speculative as splot
from inferlab.plot import to_png


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
