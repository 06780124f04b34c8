"""One figure style for the whole book, and small drawing helpers shared by every section.

Importing this module sets the book's rcParams (``STYLE``). Figures are built as
``matplotlib.figure.Figure`` objects, not through pyplot, so that a widget callback can redraw
without pyplot's global state and without leaking figures.
Section-specific drawings live in submodules (``plot.timeline``, ...), each built on these.

Where Matplotlib's internals are changed, and why: an explorer must redraw in at most 50 ms on a 2-core
machine, and a plain Matplotlib redraw took 60-126 ms there (text layout 60-70 % of it). Four modules
therefore reach into Matplotlib: ``render`` (one Agg renderer per canvas size, text blitted from cached
bitmaps), ``pickled`` (figure templates unpickled with their transform links rebuilt), ``ticks`` and
``legends`` with ``per_draw`` (ticks and legend boxes measured once per draw). Each relies on private
behaviour of the Matplotlib version pinned in requirements.txt; ``tests/test_render.py`` fails on any other
version, and the widget tests compare every in-place frame with a plain new draw pixel for pixel.
"""

from __future__ import annotations

import pickle
import textwrap
from collections import OrderedDict
from dataclasses import dataclass

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import AutoLocator

from . import pickled
from .display import figure_html, record_caption
from .legends import book_legend
from .render import to_png
from .ticks import BookAxes, InView

__all__ = ["COLORS", "REQUEST_COLORS", "STYLE", "use_style", "new_figure", "caption", "InPlace", "refresh_legend",
           "rescale", "deadline_line", "add_boxes", "box_corners", "explorer_factories", "to_png", "book_legend",
           "BookAxes", "InView"]

# Roles, not hues: every section colours the same thing the same way.
COLORS: dict[str, str] = {
    "prefill": "#1f77b4",  # blue: processing input
    "decode": "#2ca02c",  # green: generating output
    "queue": "#bdbdbd",  # grey: waiting
    "weights": "#7f7f7f",
    "kv": "#ff7f0e",  # orange: KV cache
    "shared": "#1f77b4",
    "private": "#ff7f0e",
    "free": "#f0f0f0",
    "unused": "#d9d9d9",
    "deadline": "#d62728",  # red: limits and deadlines
    "highlight": "#9467bd",
    "accent": "#17becf",
}

# Identities, not roles: one colour per request where requests (not phases) are told apart.
REQUEST_COLORS: list[str] = ["#4c72b0", "#8c8c8c", "#b07aa1", "#9c755f", "#76b7b2", "#edc948"]

STYLE: dict[str, object] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.facecolor": "white",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "font.size": 10,
    "axes.titley": 1.0,  # a fixed title position: placing it automatically measures every tick label again
}


def use_style() -> None:
    """Make the book's rcParams the defaults of this process (done on import; cheap to repeat)."""
    mpl.rcParams.update(STYLE)


use_style()


#: Major ticks made ready on every axis of a template. Matplotlib builds a tick (five artists) in about
#: 1 ms here; unpickled with the figure, one costs about 0.2 ms, also when it is not drawn. Four per axis
#: measured best over the slowest explorers (0, 2, 4, 6 and 8 tried).
_TEMPLATE_TICKS = 4
_MAX_TEMPLATES = 32


@dataclass
class _Template:
    rc: dict  # the rcParams the template was built under
    blob: bytes | None = None  # the pickled figure, from its second request on (b"": it cannot be pickled)


_templates: "OrderedDict[tuple, _Template]" = OrderedDict()


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 7.0, height: float = 3.2, **subplot_kw) -> tuple[Figure, "Axes | list"]:
    """A styled Figure (not registered with pyplot) and its axes; width and height in inches.

    A widget redraw asks for the same empty figure again and again, and building its Axes and ticks
    was a third of a redraw. From the second request of a shape on, the empty figure (ticks made) is
    kept pickled, and each request unpickles a new, independent copy (4-5x faster). A change of
    rcParams builds it anew.
    """
    try:
        key = (nrows, ncols, float(width), float(height), *sorted(subplot_kw.items()))
        hash(key)
    except TypeError:  # unhashable options (a gridspec_kw dict...): build it every time
        return _build_figure(nrows, ncols, width, height, subplot_kw)
    template = _templates.get(key)
    if template is not None and dict.__eq__(template.rc, mpl.rcParams):
        _templates.move_to_end(key)
        if template.blob:
            fig = pickled.loads(template.blob)
            return fig, (fig.axes if nrows * ncols > 1 else fig.axes[0])
        fig, axes = _build_figure(nrows, ncols, width, height, subplot_kw)
        if template.blob is None:  # the second request: keep a copy
            for ax in fig.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    axis.get_major_ticks(_TEMPLATE_TICKS)
            try:
                template.blob = pickle.dumps(fig)
            except (pickle.PicklingError, TypeError, AttributeError):  # something in rcParams pickle cannot copy
                template.blob = b""  # then this shape is built every time
        return fig, axes
    _templates[key] = _Template(dict.copy(mpl.rcParams))
    if len(_templates) > _MAX_TEMPLATES:
        _templates.popitem(last=False)
    return _build_figure(nrows, ncols, width, height, subplot_kw)


def _build_figure(nrows: int, ncols: int, width: float, height: float, subplot_kw: dict) -> tuple[Figure, "Axes | list"]:
    fig = Figure(figsize=(width, height))
    # Fixed margins in inches: constrained layout would double the render time of a redraw.
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.55 / height,
                        top=1 - 0.35 / height, wspace=0.35, hspace=0.5)
    per_axes = {"axes_class": BookAxes, **subplot_kw.get("subplot_kw", {})}  # every axes a BookAxes
    axes = fig.subplots(nrows, ncols, squeeze=True, **{**subplot_kw, "subplot_kw": per_axes})
    if nrows * ncols > 1:
        axes = list(axes.ravel())
    for ax in axes if isinstance(axes, list) else [axes]:
        _apply_style(ax)
    return fig, axes


def _apply_style(ax: Axes) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, alpha=0.3)
    ax.set_axisbelow(True)
    for axis in (ax.xaxis, ax.yaxis):  # Matplotlib's ticks, without the ones it builds outside the view
        axis.set_major_locator(InView(AutoLocator()))
        axis.isDefault_majloc = True  # so categories, dates and log scales still choose their own


def caption(fig: Figure, text: str) -> Figure:
    """Give the figure a caption ("Figure 8-5: ..."): recorded for the book's HTML (``display.figure_html``: a
    ``<figcaption>``, the figure linkable as ``#figure-8-5``), and drawn above the figure, wrapped to its width,
    for its PNG (plain frontends, the explorers' frames); the figure grows to make room.

    Captioning again (a figure redrawn in place) replaces the caption and sizes the figure from its
    uncaptioned size, as a first caption would.
    """
    record_caption(fig, text)
    wrapped = textwrap.fill(text, int(fig.get_figwidth() * 12))
    if not hasattr(fig, "_inferlab_uncaptioned"):
        w, h = fig.get_size_inches()
        fig._inferlab_uncaptioned = (w, h, (1 - fig.subplotpars.top) * h, fig.subplotpars.bottom * h)
    w, h, top_in, bottom_in = fig._inferlab_uncaptioned
    extra = 0.19 * (wrapped.count("\n") + 1) + 0.1
    fig.set_size_inches(w, h + extra)
    fig.subplots_adjust(top=1 - (top_in + extra) / (h + extra), bottom=bottom_in / (h + extra))
    fig.suptitle(wrapped, fontsize=10, ha="center", va="top", y=1 - 0.06 / (h + extra), color="#222222")
    return fig


class InPlace:
    """A drawing's artists, built once and redrawn in place by ``set`` (an explorer's update path).

    A subclass builds its artists, then calls ``keep_on(fig)``; its ``set(...)`` changes their data, or
    returns False, touching nothing, where the figure cannot show the values (another picture is needed).
    ``draw`` functions build and ``set``; ``update`` functions call ``redraw``.
    """

    def keep_on(self, fig: Figure) -> None:
        fig._inferlab_parts = self

    def set(self, *args, **kwargs) -> bool | None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @classmethod
    def redraw(cls, fig: Figure, *args, **kwargs) -> bool:
        """Set ``fig``'s artists to new values; False if ``fig`` keeps no ``cls`` or it cannot show them."""
        view = getattr(fig, "_inferlab_parts", None)
        return isinstance(view, cls) and view.set(*args, **kwargs) is not False


def refresh_legend(ax: Axes, handles: list | None = None, *, on_figure: bool = False, **style) -> None:
    """Give ``ax`` a legend of its labelled artists as they are now (``style``: ``Axes.legend`` keywords).

    ``handles``: the artists to list (default: those of ``ax``), each under its label; ``on_figure``: the
    legend belongs to the figure (``Figure.legend``), as one placed outside the axes does. For figures
    redrawn in place: the legend is rebuilt only when an entry changed (label, colour, line style,
    marker), since building one costs a few ms and most slider moves leave it as it was.
    """
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    else:
        labels = [h.get_label() for h in handles]
    key = (tuple(labels), tuple(id(h) for h in handles),
           tuple((h.get_color(), h.get_linestyle(), h.get_linewidth(), h.get_marker())
                 if hasattr(h, "get_marker") else () for h in handles), tuple(sorted(style.items())))
    legend = getattr(ax, "_inferlab_figure_legend", None) if on_figure else ax.get_legend()
    if legend is not None and getattr(legend, "_inferlab_key", None) == key:
        return
    if on_figure:
        if legend is not None:
            legend.remove()
        legend = ax._inferlab_figure_legend = book_legend(ax.figure.legend(handles, labels, **style))
    else:
        legend = ax.legend(handles, labels, **style)
    legend._inferlab_key = key


def rescale(ax: Axes, reference: Line2D | None = None) -> None:
    """Fit ``ax``'s view to its visible artists again (a figure redrawn in place).

    ``reference``, a line made by ``axvline`` or ``axhline`` (a deadline, a zero line), widens the view
    only when it falls outside it, as those functions do when they add it: a new draw and a redraw in
    place then frame the data alike.
    """
    if reference is None or not reference.get_visible():
        ax.relim(visible_only=True)
        ax.autoscale_view()
        return
    if reference.get_transform() is ax.get_xaxis_transform(which="grid"):
        at, bound = reference.get_xdata()[0], ax.get_xbound
    elif reference.get_transform() is ax.get_yaxis_transform(which="grid"):
        at, bound = reference.get_ydata()[0], ax.get_ybound
    else:
        raise ValueError("reference must be a line of ax made by axvline or axhline")
    reference.set_visible(False)
    rescale(ax)
    reference.set_visible(True)
    lo, hi = bound()
    if not lo <= at <= hi:
        rescale(ax)


def deadline_line(ax: Axes, x: float, label: str = "deadline", vertical: bool = True) -> Line2D:
    """Draw a dashed red limit line (a deadline or a memory budget) with its label."""
    line = ax.axvline if vertical else ax.axhline
    return line(x, color=COLORS["deadline"], ls="--", lw=1.2, label=label)


def add_boxes(ax: Axes, x0, y0, x1, y1, **style) -> PolyCollection:
    """Rectangles [x0, x1] x [y0, y1] (data units, arrays or scalars) as one collection on ``ax``.

    One artist instead of a patch per box (a redraw lays out each artist); the axes' limits are left to
    the caller. ``style``: PolyCollection keywords (facecolors, edgecolors, linewidths...).
    """
    return ax.add_collection(PolyCollection(box_corners(x0, y0, x1, y1), **style), autolim=False)


def box_corners(x0, y0, x1, y1) -> np.ndarray:
    """The corners of rectangles [x0, x1] x [y0, y1], (n, 4, 2): ``add_boxes``'s, or a redraw's ``set_verts``."""
    x0, y0, x1, y1 = np.broadcast_arrays(*(np.asarray(v, float) for v in (x0, y0, x1, y1)))
    return np.stack([np.column_stack([x.ravel(), y.ravel()]) for x, y in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))],
                    axis=1)


def explorer_factories() -> dict:
    """Every ``*_explorer`` factory of the ``inferlab.book.plot`` submodules, by 'module.name' (tests and benchmarks sweep them)."""
    import importlib
    import pkgutil

    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.update({f"{info.name}.{n}": getattr(module, n) for n in dir(module)
                      if n.endswith("_explorer") and callable(getattr(module, n))})
    return found


def _register_formatters() -> None:
    """Inside IPython, show any Figure returned by a cell as one PNG render (pyplot is never imported) and as
    the book's HTML figure (``display.figure_html``: SVG, caption, alt text), which the book's build prefers."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, to_png)
        shell.display_formatter.formatters["text/html"].for_type(Figure, figure_html)


_register_formatters()
