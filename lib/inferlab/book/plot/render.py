"""PNG rendering for redraws: an Agg renderer reused across figures, and text drawn from cached bitmaps.

A slider move draws a new Figure whose text is almost all unchanged (titles, axis labels, most tick
labels). Matplotlib's Agg backend lays out and rasterizes every string glyph by glyph on every render
and makes a new renderer per figure, so its text-metrics cache (keyed on the renderer) never hits
across figures; on the book's 2-core machine text was 60-70 % of a redraw. Here one renderer per
canvas size is kept, and each distinct (string, font, size, dpi) is rasterized once and then blitted:
plain text with FreeType's whole-string layout (the same layout the metrics use), mathtext (``$...$``,
e.g. log-axis tick labels) by Matplotlib on a scratch canvas; text turned by quarter turns (y labels) is the
same bitmap turned. Other angles are left to Matplotlib.
"""

from __future__ import annotations

import io
import math
import struct
import threading
import zlib
from collections import OrderedDict
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.figure import Figure
from matplotlib.font_manager import fontManager, get_font

_MAX_BITMAPS = 8192  # distinct strings kept (a few KB each)
_MAX_RENDERERS = 8  # canvas sizes kept (about 1.3 MB each at the book's sizes)
_lock = threading.Lock()  # one render at a time: the renderers and the FreeType fonts are shared


class _TextCachingRenderer(RendererAgg):
    """RendererAgg whose text comes from a coverage bitmap made once per string, font, dpi and quarter turn."""

    _bitmaps: "OrderedDict[tuple, tuple[np.ndarray, float, float]]" = OrderedDict()
    _heights: "dict[tuple, tuple[float, float, float] | tuple[None, None, None]]" = {}

    def _get_font_height_metrics(self, prop: Any) -> tuple[float, float, float] | tuple[None, None, None]:
        """Ascent, descent and line gap of ``prop``'s font at this dpi, as ``Text._get_layout`` computes them.

        Matplotlib asks the renderer first (the hook its PDF backend uses) and otherwise finds the font
        and reads its tables for every string on every render; here that is done once per font and size.
        """
        key = (prop, self.dpi)
        if key not in self._heights:
            font = get_font(fontManager._find_fonts_by_props(prop))
            table, keys = font.get_sfnt_table("OS/2"), ("sTypoLineGap", "sTypoAscender", "sTypoDescender")
            if table is None:
                table, keys = font.get_sfnt_table("hhea"), ("lineGap", "ascent", "descent")
            if table is None:  # neither table: Matplotlib measures "lp" instead
                return None, None, None
            scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * self.dpi / 72
            gap, ascent, descent = (table[k] for k in keys)
            if len(self._heights) >= _MAX_BITMAPS:
                self._heights.clear()
            self._heights[(prop.copy(), self.dpi)] = (ascent * scale, -descent * scale, gap * scale)
        return self._heights[key]

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):  # noqa: D102 - matplotlib's signature
        turns, rest = divmod(angle % 360, 90)
        if rest or ismath == "TeX" or (ismath and turns):  # other angles, TeX, turned mathtext: as Matplotlib draws
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        aa = gc.get_antialiased()
        key = (s, prop, self.dpi, aa, get_hinting_flag(), bool(ismath), int(turns),
               mpl.rcParams["mathtext.fontset"], mpl.rcParams["mathtext.default"])
        entry = self._bitmaps.get(key)
        if entry is None:
            flat = self._math_bitmap(s, prop, aa) if ismath else self._text_bitmap(s, prop, aa)
            entry = _turned(*flat, int(turns))
            self._bitmaps[(s, prop.copy(), *key[2:])] = entry  # FontProperties is mutable: key on a copy
            if len(self._bitmaps) > _MAX_BITMAPS:
                self._bitmaps.popitem(last=False)
        image, left, bottom = entry  # the bitmap's bottom-left corner relative to (x, y); y counts down
        self._renderer.draw_text_image(image, round(x + left), round(y + bottom), 0, gc)

    def _text_bitmap(self, s: str, prop: Any, aa: bool) -> tuple[np.ndarray, float, float]:
        """FreeType's whole-string layout (the one the text metrics use), placed as Matplotlib 3.9 placed it."""
        font = self._prepare_font(prop)
        font.set_text(s, 0, flags=get_hinting_flag())
        font.draw_glyphs_to_bitmap(antialiased=aa)
        xo, yo = font.get_bitmap_offset()
        return np.array(font.get_image()), xo / 64, (yo + font.get_descent()) / 64 + 1

    def _math_bitmap(self, s: str, prop: Any, aa: bool) -> tuple[np.ndarray, float, float]:
        """Mathtext drawn by Matplotlib once, in black on a transparent scratch canvas; its alpha is the coverage."""
        parse = self.mathtext_parser.parse(s, self.dpi, prop, antialiased=aa)
        margin, up = 2, math.ceil(parse.height) + 2  # room on every side of the origin, whatever the convention
        scratch = RendererAgg(math.ceil(parse.width) + 2 * margin, 2 * up, self.dpi)
        ink = scratch.new_gc()
        ink.set_foreground("black")
        ink.set_antialiased(aa)
        scratch.draw_mathtext(ink, margin, up, s, prop, 0)
        coverage = np.array(np.asarray(scratch.buffer_rgba())[..., 3])
        return coverage, -margin, up

def _turned(image: np.ndarray, left: float, bottom: float, turns: int) -> tuple[np.ndarray, float, float]:
    """The bitmap turned ``turns`` quarter turns counter-clockwise about the text's origin, and its new corner.

    A point (u, v) from the origin (v counts down) goes to (v, -u) per quarter turn, as Matplotlib turns
    text glyph by glyph about its origin (y labels are one quarter turn).
    """
    h, w = image.shape
    corners = [(left, bottom - h), (left + w, bottom)]  # (u, v) of two opposite corners
    for _ in range(turns):
        corners = [(v, -u) for u, v in corners]
    (u0, v0), (u1, v1) = corners
    return np.ascontiguousarray(np.rot90(image, turns)), min(u0, u1), max(v0, v1)


def png_bytes(rgba: np.ndarray, level: int = 1) -> bytes:
    """An (h, w, 4) uint8 image as PNG: rows unfiltered, deflated at ``level``.

    Pillow chooses a filter for every row, which here took longer than the deflate itself (8 ms of
    10 for a two-panel figure); a plot's flat colours compress as well without one (the same size).
    """
    if rgba.ndim != 3 or rgba.shape[2] != 4 or rgba.dtype != np.uint8:
        raise ValueError(f"rgba must be an (h, w, 4) uint8 array, got {rgba.dtype} {rgba.shape}")
    h, w, _ = rgba.shape
    rows = np.zeros((h, 1 + 4 * w), np.uint8)  # each row: filter type 0, then its pixels
    rows[:, 1:] = rgba.reshape(h, 4 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)  # 8 bits per channel, RGBA, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.data, level))
            + chunk(b"IEND", b""))


class _ReusingCanvas(FigureCanvasAgg):
    """An Agg canvas that takes its renderer from a pool keyed by pixel size and dpi, and writes PNG fast."""

    _renderers: "OrderedDict[tuple[int, int, float], _TextCachingRenderer]" = OrderedDict()

    def get_renderer(self) -> RendererAgg:
        w, h = self.get_width_height(physical=True)
        key = (w, h, self.figure.dpi)
        pool = self._renderers
        if key not in pool:
            pool[key] = _TextCachingRenderer(w, h, self.figure.dpi)
            if len(pool) > _MAX_RENDERERS:
                pool.popitem(last=False)
        pool.move_to_end(key)
        self.renderer = pool[key]
        return self.renderer

    def print_png(self, filename_or_obj: Any, **_: Any) -> None:  # to_png asks nothing of print_figure's options
        FigureCanvasAgg.draw(self)
        filename_or_obj.write(png_bytes(np.asarray(self.buffer_rgba())))


def to_png(fig: Figure, dpi: float | None = None) -> bytes:
    """Render ``fig`` to PNG bytes as laid out (no tight bounding box: one pass), at ``dpi`` or the style's."""
    if dpi is not None and not (isinstance(dpi, int | float) and math.isfinite(dpi) and dpi > 0):
        raise ValueError(f"dpi must be a positive number, got {dpi!r}")
    buf = io.BytesIO()
    own = fig.canvas
    with _lock:
        try:
            _ReusingCanvas(fig).print_figure(buf, format="png", dpi=dpi)
        finally:
            fig.set_canvas(own)  # the figure keeps no reference to the shared renderer
    return buf.getvalue()


def cache_info() -> dict[str, Any]:
    """How many text bitmaps and renderers are held (for tests and the benchmark)."""
    return {"bitmaps": len(_TextCachingRenderer._bitmaps), "renderers": len(_ReusingCanvas._renderers),
            "font_heights": len(_TextCachingRenderer._heights)}
