"""Static figures in the book's HTML (``inferlab.book.plot.display``): SVG with real text, the caption as a
``<figcaption>`` with the figure's id, an alt text read from the axes; the figure itself left as it was."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from inferlab.book import plot
from inferlab.book.plot import display


def _figure(caption: str | None = None) -> Figure:
    fig, ax = plot.new_figure(width=7, height=3)
    b = np.arange(1, 257)
    ax.loglog(b, 16e9 / b + 1e8, label="L = 2,048")
    ax.loglog(b, 16e9 / b + 4e8, label="$p_h$ = 0.50")
    ax.set_xlabel("batch")
    ax.set_ylabel("bytes per output token")
    ax.text(10, 1e9, "small note", fontsize=6)
    ax.legend()
    return plot.caption(fig, caption) if caption else fig


def test_a_numbered_caption_becomes_the_figcaption_and_the_id() -> None:
    text = "Figure 8-3: bytes read per output token against batch & context <log-log>"
    out = display.figure_html(_figure(text))
    assert out.startswith('<figure class="inferlab-figure" id="figure-8-3"')
    caption = re.search(r"<figcaption>(.*?)<a ", out).group(1)
    assert caption == "Figure 8-3: bytes read per output token against batch &amp; context &lt;log-log&gt;"
    assert 'href="#figure-8-3"' in out
    assert "Figure 8-3" not in out.split("<figcaption>")[0], "the caption is not drawn into the SVG"


def test_the_svg_has_text_an_alt_text_and_page_safe_ids() -> None:
    out = display.figure_html(_figure("Figures 8-30 and 8-31: two"))
    assert 'id="figure-8-30"' in out and "<svg" in out and "<?xml" not in out and "<style" not in out
    assert ">batch</text>" in out, "text stays text (svg.fonttype none)"
    label = re.search(r'aria-label="([^"]*)"', out).group(1)
    assert label == ("Line chart of bytes per output token (log) against batch (log); "
                     "series: L = 2,048, p_h = 0.50.")
    ids = re.findall(r'\sid="([^"]+)"', out.split("<figcaption>")[0])
    assert all(i.startswith("f") and "-" in i for i in ids[1:]), ids  # the figure's own id, then prefixed ones
    for ref in re.findall(r'url\(#([^)]+)\)', out):
        assert ref in ids


def test_small_text_is_raised_to_the_floor_for_the_page_only() -> None:
    fig = _figure("Figure 8-1: x")
    before = (fig.get_size_inches().tolist(), fig._suptitle.get_visible(), [t.get_fontsize() for t in fig.texts])
    out = display.figure_html(fig)
    runs = re.findall(r"<text\b.*?</text>", out, flags=re.S)  # a run's size: its largest (mathtext: its base)
    sizes = [max(float(s) for s in re.findall(r"font-size: ([\d.]+)px", run)) for run in runs]
    assert min(sizes) >= plot.legibility.MIN_LABEL_PT and "<!--" not in out
    assert float(re.search(r'data-min-text-px="([\d.]+)"', out).group(1)) >= 11
    after = (fig.get_size_inches().tolist(), fig._suptitle.get_visible(), [t.get_fontsize() for t in fig.texts])
    assert after == before, "the figure is left as it was"


def test_an_uncaptioned_figure_is_captioned_by_its_title_or_in_words_and_a_heavy_one_is_a_png() -> None:
    out = display.figure_html(_figure())
    assert ' id="figure' not in out and re.search(
        r'<figcaption class="inferlab-figure-described">Line chart of bytes per output token \(log\) against', out)
    fig = _figure()
    fig.axes[0].set_title("the short request arrives behind the long one")
    out = display.figure_html(fig)
    assert "<figcaption>The short request arrives behind the long one</figcaption>" in out
    assert ">the short request" not in out.split("<figcaption>")[0], "the title moved into the caption"
    assert fig.axes[0].title.get_visible()
    fig, ax = plot.new_figure()
    ax.scatter(np.random.default_rng(0).random(20_000), np.random.default_rng(1).random(20_000), s=1)
    out = display.figure_html(fig)
    assert '<img class="inferlab-figure-img" src="data:image/png;base64,' in out
    assert re.search(r'alt="Scatter plot\.?"', out)


@pytest.mark.parametrize(("label", "text"), [("$p_h$ = 0.5", "p_h = 0.5"), (r"$\mathrm{GiB}\times 2$", "GiB×2"),
                                              ("plain", "plain"), (r"$\Delta t$ (ms)", "Δt (ms)")])
def test_plain_reads_mathtext_as_text(label: str, text: str) -> None:
    assert display.plain(label) == text


def test_figure_ids() -> None:
    assert display.figure_id("Figure 8-12: x") == "figure-8-12"
    assert display.figure_id("Figure 8-17 (our synthetic trace): x") == "figure-8-17"
    assert display.figure_id("Where three allocators keep ...") is None
