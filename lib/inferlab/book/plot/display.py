"""How a static figure shows in the book: an HTML ``<figure>`` holding the figure as SVG with real text, its
caption as a ``<figcaption>`` ("Figure 8-x: ...", linkable as ``#figure-8-x``) and an alt text read from its axes.

``caption(fig, text)`` records the caption on the figure (and still draws it, for the PNG that plain frontends
and the explorers' frames show). Inside IPython a Figure is then displayed twice over: as that PNG, and as
``figure_html(fig)``, which the book's HTML build prefers. The HTML leaves the drawn caption out, raises any text
below the book's floor (``legibility.MIN_LABEL_PT`` at the page width, about 11 CSS pixels) and writes the SVG
with ``svg.fonttype: none``, so that its text is text: it scales, is found by search and prints as text. A
figure whose SVG would be heavy (many thousands of marks) is written as a PNG at twice its displayed size.
The figure itself is left as it was. A figure shown without a caption gets one all the same: the title of its one
panel (no longer drawn), or else what it shows, in words.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from .legibility import MIN_LABEL_PT, min_font_pt

__all__ = ["CAPTION_ATTR", "CSS_PX_PER_IN", "SVG_MAX_BYTES", "SVG_RC", "describe", "figure_html", "figure_id", "plain",
           "inline_svg", "record_caption"]

#: The attribute of a Figure that holds its caption text (set by ``plot.caption``).
CAPTION_ATTR = "_inferlab_caption"
#: CSS pixels per inch of figure as the book shows it (as its PNGs were, at 100 dpi): 8 pt of text is 11.1 px.
CSS_PX_PER_IN = 100
#: Above this an SVG is replaced by a PNG at ``PNG_SCALE`` times its displayed size.
SVG_MAX_BYTES = 400_000
PNG_SCALE = 2
_NUMBER = re.compile(r"^\s*Figures?\s+(\d+-\d+[a-z]?)")
#: Mathtext commands a label may hold, as the characters a reader sees.
_SYMBOLS: dict[str, str] = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "epsilon": "ε", "lambda": "λ", "mu": "μ",
    "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "theta": "θ", "times": "×", "cdot": "·", "le": "≤", "leq": "≤",
    "ge": "≥", "geq": "≥", "approx": "≈", "infty": "∞", "to": "→", "rightarrow": "→", "pm": "±", "sim": "~",
    "ell": "ℓ", "%": "%", ",": " ", ";": " ", "!": "", " ": " "}


def record_caption(fig: Figure, text: str) -> None:
    """Keep ``text`` on ``fig`` as its caption (what ``figure_html`` writes into the ``<figcaption>``)."""
    setattr(fig, CAPTION_ATTR, text)


def figure_id(text: str) -> str | None:
    """The HTML id of a caption's figure: "Figure 8-3: ..." -> "figure-8-3" (the first number of "Figures 8-30
    and 8-31"); None for a caption without a number."""
    found = _NUMBER.match(text)
    return f"figure-{found.group(1)}" if found else None


def plain(label: str) -> str:
    """A Matplotlib label as plain text: mathtext (``$p_h$``, ``$\\mathrm{GiB}$``) without its markup."""
    if "$" not in label:
        return re.sub(r"\s*\n\s*", "; ", label.strip())
    out = []
    for i, part in enumerate(label.split("$")):
        if i % 2:  # inside $...$
            part = re.sub(r"\\(?:mathrm|mathit|mathbf|mathsf|mathdefault|text|operatorname)\b\s*", "", part)
            part = re.sub(r"\\([A-Za-z]+\s*|.)", lambda m: _SYMBOLS.get(m.group(1).strip() or m.group(1),
                                                                       m.group(1).strip() or m.group(1)), part)
            part = part.replace("{", "").replace("}", "")  # p_h and 10^9 read as they are
        out.append(part)
    return re.sub(r"\s*\n\s*", "; ", "".join(out)).strip()


def _scale(axis_scale: str) -> str:
    """" (log)" after an axis label on a log scale (any scale but linear, by its name)."""
    return f" ({axis_scale})" if axis_scale not in ("linear", "") else ""


def _kind(ax: Axes) -> str:
    """What an axes draws, in words: a line chart, bar chart, scatter plot or diagram."""
    lines = [line for line in ax.lines if isinstance(line, Line2D) and line.get_visible()]
    if any(len(line.get_xdata()) > 2 and line.get_linestyle() not in ("None", "", " ") for line in lines):
        return "line chart"
    if (sum(isinstance(p, Rectangle) and p.get_visible() for p in ax.patches) >= 2
            or any(isinstance(c, PolyCollection) and c.get_visible() for c in ax.collections)):
        return "bar chart"
    if any(isinstance(c, PathCollection) and c.get_visible() for c in ax.collections) or any(
            line.get_marker() not in ("None", "", " ", None) for line in lines):
        return "scatter plot"
    return "block diagram" if ax.patches else "line chart" if lines else "diagram"


def _legend_entries(legend: Legend) -> list[str]:
    """The visible entries of ``legend`` as plain text."""
    return [plain(t.get_text()) for t in legend.get_texts() if t.get_visible() and t.get_text().strip()]


def _categories(axis: Axis) -> list[str]:
    """An axis's tick labels when they name things (not numbers): the rows of a Gantt chart, the bars of a chart."""
    labels = [plain(t.get_text()) for t in axis.get_ticklabels() if t.get_text().strip()]
    named = [label for label in labels if not re.fullmatch(r"[-+−\d.,eE×^ %()]*\d[-+−\d.,eE×^ %()kKMG]*", label)]
    return list(dict.fromkeys(labels)) if named and len(named) == len(labels) else []


def _panel(ax: Axes, twins: list[Axes]) -> str:
    """One panel in words: kind, what it plots against what (log scales named), the right axis, its series."""
    words = _kind(ax)
    y, x = plain(ax.get_ylabel()), plain(ax.get_xlabel())
    if y and x:
        words += f" of {y}{_scale(ax.get_yscale())} against {x}{_scale(ax.get_xscale())}"
    elif x:
        words += f" along {x}{_scale(ax.get_xscale())}"
    elif y:
        words += f" of {y}{_scale(ax.get_yscale())}"
    for twin in twins:
        if twin.get_ylabel().strip():
            words += f", and {plain(twin.get_ylabel())}{_scale(twin.get_yscale())} on the right axis"
    for name, axis in (("rows", ax.yaxis), ("columns", ax.xaxis)):
        categories = _categories(axis)
        if categories:
            words += f"; {name}: " + ", ".join(categories)
    series = [e for a in (ax, *twins) if a.get_legend() is not None for e in _legend_entries(a.get_legend())]
    if series:
        words += "; series: " + ", ".join(dict.fromkeys(series))
    elif not (x or y):  # a diagram: what is written in it
        marks = list(dict.fromkeys(plain(t.get_text()) for t in ax.texts if t.get_visible() and t.get_text().strip()))
        if marks:
            words += "; labelled " + ", ".join(marks[:12]) + (", ..." if len(marks) > 12 else "")
    title = plain(ax.get_title())
    return f"{title}: {words}" if title else words


def describe(fig: Figure) -> str:
    """An alt text for ``fig`` from its axes: each panel's kind, title, axis labels (log scales named), legend
    entries, e.g. "Line chart of bytes per output token (log) against batch (log); series: 2048, 8192"."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    twins: dict[int, list[Axes]] = {}
    panels: list[Axes] = []
    for ax in axes:
        host = next((p for p in panels if p.bbox.bounds == ax.bbox.bounds), None)  # twinx/twiny share the box
        if host is None:
            panels.append(ax)
        else:
            twins.setdefault(id(host), []).append(ax)
    panels = [ax for ax in panels if ax.axison or ax.has_data() or ax.texts or ax.patches]
    parts = [_panel(ax, twins.get(id(ax), [])) for ax in panels]
    figure_series = [e for legend in fig.legends for e in _legend_entries(legend)]
    if not parts:
        text = "Diagram"
    elif len(parts) == 1:
        text = parts[0][0].upper() + parts[0][1:]
    else:
        text = f"{len(parts)} panels. " + " ".join(f"Panel {i}, {p}." for i, p in enumerate(parts, 1))
    if figure_series:
        text = text.rstrip(".") + "; series: " + ", ".join(dict.fromkeys(figure_series))
    text = text.rstrip(".") + "."
    return text if len(text) <= 700 else text[:697].rsplit(" ", 1)[0] + "..."


@contextmanager
def _as_shown(fig: Figure, hidden: list[Text]) -> Iterator[None]:
    """``fig`` for the book, for the duration: the texts ``hidden`` (a drawn caption) left out, no text below the
    floor at the page width."""
    shown = [(t, t.get_visible()) for t in hidden]
    floor = min_font_pt(fig.get_figwidth(), MIN_LABEL_PT)
    raised = [(t, t.get_fontsize()) for t in fig.findobj(Text) if t.get_fontsize() < floor]
    try:
        for t in hidden:
            t.set_visible(False)
        for t, _ in raised:
            t.set_fontsize(floor)
        yield
    finally:
        for t, visible in shown:
            t.set_visible(visible)
        for t, size in raised:
            t.set_fontsize(size)


def _caption(fig: Figure) -> tuple[str, list[Text], bool]:
    """The caption of ``fig`` for its ``<figcaption>``, the drawn texts it replaces, and whether it is the alt
    text (no caption given): the one recorded by ``plot.caption``; else the title of a figure of one panel;
    else what the figure shows, in words (``describe``)."""
    text = getattr(fig, CAPTION_ATTR, None)
    if text is not None:
        return text, [fig._suptitle] if fig._suptitle is not None else [], False
    titled = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().strip()]
    if len(fig.axes) == 1 and titled:
        title = plain(titled[0].get_title())
        return title[0].upper() + title[1:], [titled[0].title], False
    return describe(fig), [], True


#: Matplotlib's settings for the book's SVG: text as text (it scales, a reader can select and search it), and ids
#: that do not change from one build to the next.
SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "inferlab", "svg.id": None}


def _save(fig: Figure, fmt: str, dpi: float) -> bytes:
    """``fig`` as ``fmt`` (svg: text as text), cropped to what it draws, on white."""
    buf = io.BytesIO()
    with mpl.rc_context(SVG_RC):
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", pad_inches=0.06, facecolor="white",
                    metadata={"Date": None} if fmt == "svg" else None)
    return buf.getvalue()


_SVG_HEAD = re.compile(r"^.*?(<svg\b)", re.S)
_SIZE = re.compile(r'\swidth="([\d.]+)pt"\s+height="([\d.]+)pt"')


_FLOAT = re.compile(r"(-?\d+\.\d\d)\d+")
_ATTRIBUTE = re.compile(r'="([^"]*)"')


def inline_svg(svg: str, label: str, prefix: str) -> tuple[str, float]:
    """Matplotlib's SVG made fit to sit in a page: no XML prolog, metadata or page-wide style, coordinates to a
    hundredth of a point, ids prefixed with ``prefix`` (unique to this figure on its page), sized in CSS pixels
    (``CSS_PX_PER_IN``), labelled ``label`` for screen readers; and its width in px. Static figures and the
    states of the explorers (``inferlab.book.static_explorers``) both pass through it."""
    text = _SVG_HEAD.sub(r"\1", svg, count=1)
    text = re.sub(r"<metadata>.*?</metadata>\s*|<!--.*?-->\s*", "", text, flags=re.S)  # comments hold the TeX
    # `*{stroke-linejoin...}` would be a stylesheet of the whole page: inserting one (an explorer's next state)
    # restyled every element of the page, 20-120 ms; the book's CSS scopes the rule to the figures
    text = re.sub(r"<style[^>]*>.*?</style>\s*", "", text, flags=re.S)
    text = re.sub(r">\s*\n\s*<", ">\n<", text)  # the indentation between elements (a tenth of the bytes)
    # in attributes only: a label's "0.125 ms" stays as drawn
    text = _ATTRIBUTE.sub(lambda m: '="' + _FLOAT.sub(lambda f: f"{float(f.group(1)):.2f}", m.group(1)) + '"', text)
    used = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', text))
    text = re.sub(r'\sid="([^"]+)"', lambda m: f' id="{prefix}{m.group(1)}"' if m.group(1) in used else "", text)
    text = re.sub(r'(url\(#|href="#)([^)"]+)', lambda m: m.group(1) + prefix + m.group(2), text)
    size = _SIZE.search(text)
    w_pt, h_pt = (float(size.group(1)), float(size.group(2))) if size else (504.0, 288.0)
    w_px, h_px = w_pt / 72 * CSS_PX_PER_IN, h_pt / 72 * CSS_PX_PER_IN
    text = _SIZE.sub(f' width="{w_px:.0f}" height="{h_px:.0f}" role="img" aria-label="{html.escape(label)}"'
                     ' class="inferlab-figure-svg"', text, count=1)
    return text, w_px


def figure_html(fig: Figure) -> str:
    """``fig`` as the book shows it: ``<figure>`` (id ``figure-8-x`` when its caption is numbered) holding the
    SVG (or a PNG at twice the size, when the SVG would be heavy) labelled with ``describe(fig)``, and its
    caption (``_caption``: the one ``plot.caption`` recorded) as a ``<figcaption>`` with a link to the figure."""
    label = describe(fig)
    text, hidden, described = _caption(fig)
    with _as_shown(fig, hidden):
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        smallest = min(sizes, default=MIN_LABEL_PT) * CSS_PX_PER_IN / 72  # px at the figure's own size
        svg = _save(fig, "svg", 72)
        if len(svg) <= SVG_MAX_BYTES:
            body, width = inline_svg(svg.decode("utf-8"), label, "f" + hashlib.sha1(svg).hexdigest()[:8] + "-")
        else:
            png = _save(fig, "png", CSS_PX_PER_IN * PNG_SCALE)
            w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # the IHDR chunk
            width = w / PNG_SCALE
            body = (f'<img class="inferlab-figure-img" src="data:image/png;base64,{base64.b64encode(png).decode()}"'
                    f' width="{width:.0f}" height="{h / PNG_SCALE:.0f}" alt="{html.escape(label)}">')
    ident = figure_id(text)
    link = f'<a class="headerlink" href="#{ident}" title="Link to this figure">#</a>' if ident else ""
    kind = ' class="inferlab-figure-described"' if described else ""
    attrs = f' id="{ident}"' if ident else ""
    return (f'<figure class="inferlab-figure"{attrs} data-min-text-px="{smallest:.2f}">'
            f'<div class="inferlab-figure-scroll">{body}</div>'
            f"<figcaption{kind}>{html.escape(text)}{link}</figcaption></figure>")
