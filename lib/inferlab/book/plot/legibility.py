"""Legibility of figures at the book's page width: the smallest label as rendered, and a floor for it."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Text

PAGE_WIDTH_IN = 7.0  # the book's text column at 100 dpi: wider figures are scaled down to it
#: The smallest label a reader should have to read at the page width: the book shows figures at 100 CSS px per
#: inch (``display.CSS_PX_PER_IN``), so 8 pt is 11.1 px on a desktop page (``tests/test_browser_pages.py``); and
#: ``display.figure_html`` raises any smaller text of a static figure to it.
MIN_LABEL_PT = 8.0


def min_font_pt(width_in: float, min_pt: float = MIN_LABEL_PT, page_width_in: float = PAGE_WIDTH_IN) -> float:
    """The smallest font size (points) that reads as ``min_pt`` once a figure ``width_in`` wide is fitted to the page."""
    if not width_in > 0:
        raise ValueError(f"width_in must be positive, got {width_in!r}")
    return min_pt / min(1.0, page_width_in / width_in)


def smallest_label_pt(fig: Figure, page_width_in: float = PAGE_WIDTH_IN) -> float:
    """Size in points of the smallest non-empty text of ``fig`` once it is scaled to ``page_width_in`` inches."""
    scale = min(1.0, page_width_in / fig.get_figwidth())
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    if not sizes:
        raise ValueError("fig has no visible text")
    return min(sizes) * scale


def legible(fig: Figure, min_pt: float = MIN_LABEL_PT, page_width_in: float = PAGE_WIDTH_IN) -> Figure:
    """Raise every text of ``fig`` to at least ``min_pt`` points as rendered at ``page_width_in`` inches; returns fig."""
    floor = min_font_pt(fig.get_figwidth(), min_pt, page_width_in)
    for text in fig.findobj(Text):
        if text.get_fontsize() < floor:
            text.set_fontsize(floor)
    return fig
