"""The redraw renderer (inferlab.book.plot.render): Matplotlib's picture, faster, with no state left on the figure."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from inferlab.book.plot import new_figure, render, to_png


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=int)


def _matplotlib_png(fig) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_figure(buf, format="png")
    return buf.getvalue()


def _figure(title: str = "Time per output token", ylabel: str = "ms"):
    fig, ax = new_figure()
    ax.plot([1, 2, 4, 8], [18.3, 9.1, 4.7, 2.5], marker="o", label="measured")
    ax.set(title=title, xlabel="batch (requests)", ylabel=ylabel)
    ax.annotate("knee", (4, 4.7), xytext=(5, 10), arrowprops={"arrowstyle": "->"})
    ax.text(2, 12, "turned", rotation=90)
    ax.text(6, 14, "upside down", rotation=180)
    ax.text(7, 5, "slanted", rotation=30)  # not a quarter turn: drawn by Matplotlib
    ax.legend(loc="upper right")  # "best" warns when its search takes over 1 s, as on a loaded machine
    return fig


def _log_figure():
    fig, ax = new_figure()
    ax.loglog([1, 16, 256], [1e-3, 1e-1, 10], base=2)
    ax.set(title=r"Mathtext: $T_{\mathrm{rec}} / T_{\mathrm{fetch}} = \frac{p_h + \mu}{p_h}$", xlabel="batch")
    return fig


@pytest.mark.parametrize("make", [_figure, _log_figure], ids=["text", "mathtext"])
def test_same_picture_as_matplotlib(make):
    fig = make()
    ours, theirs = _pixels(to_png(fig)), _pixels(_matplotlib_png(fig))
    assert ours.shape == theirs.shape
    assert np.mean(ours != theirs) < 0.02 and abs(ours.mean() - theirs.mean()) < 0.5
    # text sits on whole pixels instead of sub-pixel positions (and turned text is hinted before it turns):
    # nothing moves, and almost every pixel of ours is matched within one pixel
    padded = np.pad(theirs, 2, mode="edge")
    h, w = ours.shape
    shifted = {(dy, dx): np.abs(ours - padded[dy:dy + h, dx:dx + w]) for dy in range(5) for dx in range(5)}
    assert min(shifted, key=lambda k: (shifted[k] > 64).sum()) == (2, 2)
    nearest = np.min([d for (dy, dx), d in shifted.items() if abs(dy - 2) <= 1 and abs(dx - 2) <= 1], axis=0)
    assert np.mean(nearest > 64) < 0.002


def test_text_changes_show_and_cached_strings_are_drawn_again():
    first = _pixels(to_png(_figure(title="A")))
    second = _pixels(to_png(_figure(title="B")))
    again = _pixels(to_png(_figure(title="A")))
    assert (first != second).any() and (first == again).all()


def test_mutated_font_properties_do_not_reuse_a_stale_bitmap():
    fig, ax = new_figure()
    text = ax.set_title("size matters")
    small = _pixels(to_png(fig))
    text.get_fontproperties().set_size(22)  # the same object, mutated after its bitmap was cached
    large = _pixels(to_png(fig))
    assert (large < 128).sum() > 1.5 * (small < 128).sum()


def test_figure_keeps_its_own_canvas_and_dpi_is_honoured():
    fig = _figure()
    canvas = fig.canvas
    png = to_png(fig, dpi=50)
    assert fig.canvas is canvas
    assert Image.open(io.BytesIO(png)).size == (round(fig.get_figwidth() * 50), round(fig.get_figheight() * 50))


@pytest.mark.parametrize("dpi", [0, -3, float("nan"), float("inf"), "100"])
def test_bad_dpi_is_refused(dpi):
    with pytest.raises(ValueError, match="dpi"):
        to_png(_figure(), dpi=dpi)


def test_caches_stay_bounded():
    for i in range(render._MAX_RENDERERS + 3):
        fig, ax = new_figure(width=3 + i * 0.1, height=2)
        ax.set_title(f"figure {i}")
        to_png(fig)
    info = render.cache_info()
    assert info["renderers"] <= render._MAX_RENDERERS and 0 < info["bitmaps"] <= render._MAX_BITMAPS


def test_png_bytes_decode_to_the_same_pixels():
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, size=(7, 13, 4), dtype=np.uint8)
    fig = _figure()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    plot = np.array(canvas.buffer_rgba())
    for rgba in (noisy, plot):
        decoded = np.asarray(Image.open(io.BytesIO(render.png_bytes(rgba))).convert("RGBA"))
        assert decoded.shape == rgba.shape and (decoded == rgba).all()
    # a plot's flat colours compress: far below its raw size
    assert len(render.png_bytes(plot)) < plot.nbytes / 10


@pytest.mark.parametrize("bad", [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.float32), np.zeros(16, np.uint8)])
def test_png_bytes_refuses_what_is_not_rgba_bytes(bad):
    with pytest.raises(ValueError, match="rgba"):
        render.png_bytes(bad)


def test_text_is_laid_out_exactly_as_matplotlib_lays_it_out():
    """The cached font heights give every text, multi-line and turned included, Matplotlib's own box."""
    fig, ax = new_figure()
    texts = [ax.set_title("one line"), ax.text(0.2, 0.5, "two\nlines", fontsize=13),
             ax.text(0.6, 0.5, "three\nspaced\nlines", linespacing=2.0, rotation=90), ax.set_xlabel("x (tokens)")]
    to_png(fig)  # places the axis label and fills the cache at this dpi
    plain = FigureCanvasAgg(fig).get_renderer()
    theirs = [t.get_window_extent(renderer=plain).bounds for t in texts]
    ours_renderer = render._TextCachingRenderer(*plain.get_canvas_width_height(), fig.dpi)
    assert [t.get_window_extent(renderer=ours_renderer).bounds for t in texts] == theirs
    assert render.cache_info()["font_heights"] >= 1


def test_matplotlib_is_the_version_the_patched_internals_were_written_for() -> None:
    """inferlab.book.plot's render, pickled, ticks and legends rely on Matplotlib internals: pin them to one version."""
    import re
    from pathlib import Path

    import matplotlib

    pinned = re.search(r"^matplotlib==(\S+)$", (Path(__file__).resolve().parents[1] / "requirements.txt").read_text(),
                       re.M)
    assert pinned and matplotlib.__version__ == pinned.group(1), (
        f"Matplotlib {matplotlib.__version__} is not the pinned {pinned and pinned.group(1)}: check inferlab.book.plot's "
        "patched internals against the new version before changing the pin")
