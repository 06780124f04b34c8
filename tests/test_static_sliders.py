"""Offline sliders: frames of an explorer's first knob behind a plain range input, and the book's assets."""

import base64
import re
from pathlib import Path

import ipywidgets as w
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import inferlab.book.plot
from inferlab.book import sphinx_offline, widgets

ROOT = Path(__file__).resolve().parents[1]
FRAME = re.compile(r'<div class="inferlab-frame" data-label="([^"]*)"( hidden)?>(.*?)</div>', re.S)
PNG = re.compile(r'src="data:image/png;base64,([^"]+)"')


def _draw(n: int, label: str = "x") -> str:
    if n > 40:
        raise ValueError("n must be at most 40")
    return f"<b>{label}:{n}</b>"


def test_knob_values_are_snapped_inside_the_range_with_the_default() -> None:
    values = widgets.knob_values(widgets.int_slider("n", 1, 100, 37, step=3), 8)
    assert 37 in values and values == sorted(set(values)) and len(values) <= 8
    assert all(1 <= v <= 100 and (v - 1) % 3 == 0 or v == 37 for v in values)
    assert values[0] == 1 and all(isinstance(v, int) for v in values)
    floats = widgets.knob_values(widgets.float_slider("f", 0.0, 2.0, 0.1, 0.05), 8)
    assert 0.1 in floats and floats[0] == 0.0 and floats[-1] == 2.0
    assert all(abs(v / 0.05 - round(v / 0.05)) < 1e-9 for v in floats)


def test_knob_values_of_log_sliders_dropdowns_and_checkboxes() -> None:
    log = widgets.knob_values(widgets.log_slider("batch", 0, 8, 16), 8)
    assert 16 in log and log[0] == 1 and log[-1] == 256
    assert all(v == 2 ** round(__import__("math").log2(v)) for v in log)
    dd = widgets.choice("size", list(range(20)), 13)
    picked = widgets.knob_values(dd, 8)
    assert 13 in picked and picked[0] == 0 and picked[-1] == 19 and len(picked) <= 8
    assert widgets.knob_values(widgets.choice("p", {"A": 1, "B": 2}, 2)) == [1, 2]
    assert widgets.knob_values(w.Checkbox(value=True)) == [False, True]
    with pytest.raises(ValueError, match="n must be at least 2"):
        widgets.knob_values(dd, 1)


def test_offline_html_has_one_visible_frame_per_value_and_names_the_live_knob() -> None:
    ex = widgets.explore(_draw, n=widgets.int_slider("count", 1, 50, 10, unit="items"),
                         label=widgets.choice("label", ["x", "y"], "y"))
    html = ex.offline_html(n_frames=6)
    frames = FRAME.findall(html)
    values = widgets.knob_values(ex.controls["n"], 6)
    assert [label for label, _, _ in frames] == [str(v) for v in values]
    visible = [label for label, hidden, _ in frames if not hidden]
    assert visible == ["10"]
    assert f'max="{len(values) - 1}"' in html and f'value="{values.index(10)}"' in html
    assert "<em>count (items)</em>" in html and "label = y" in html and "Try it live" in html
    bodies = {label: body for label, _, body in frames}
    assert bodies["10"] == "<pre>&lt;b&gt;y:10&lt;/b&gt;</pre>"
    assert "not valid" in bodies["50"] and "at most 40" in bodies["50"]


def test_figure_frames_are_pngs_at_the_offline_resolution() -> None:
    from inferlab.book.plot import timeline

    ex = timeline.batch_explorer()
    html = ex.offline_html(n_frames=3, dpi=50)
    pngs = [base64.b64decode(p) for p in PNG.findall(html)]
    assert len(pngs) == len(widgets.knob_values(ex.controls["batch"], 3)) and len(set(pngs)) == len(pngs)
    width = int.from_bytes(pngs[0][16:20], "big")
    assert width == round(ex.render().get_figwidth() * 50)


def test_display_emits_frames_and_no_dead_widgets_when_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    InteractiveShell.instance()
    ex = widgets.explore(_draw, n=widgets.int_slider("n", 1, 5, 2))
    monkeypatch.setenv(widgets.OFFLINE_ENV, "1")
    with capture_output() as captured:
        ex._ipython_display_()
    assert len(captured.outputs) == 1
    assert "inferlab-frames" in captured.outputs[0].data["text/html"]
    monkeypatch.setenv(widgets.OFFLINE_ENV, "0")
    with capture_output() as captured:
        ex._ipython_display_()
    assert "application/vnd.jupyter.widget-view+json" in captured.outputs[0].data




@pytest.mark.parametrize("name", sorted(inferlab.book.plot.explorer_factories()))
def test_every_explorer_first_knob_changes_the_offline_picture(name: str) -> None:
    ex = inferlab.book.plot.explorer_factories()[name]()
    frames = FRAME.findall(ex.offline_html(n_frames=2, dpi=30))
    assert len(frames) >= 2 and sum(not hidden for _, hidden, _ in frames) == 1
    assert len({body for _, _, body in frames}) >= 2, "moving the knob must change the picture"


@pytest.mark.parametrize("name", sorted(n for n, f in inferlab.book.plot.explorer_factories().items() if f().update))
def test_offline_frames_redrawn_in_place_are_the_frames_drawn_anew(name: str) -> None:
    from dataclasses import replace

    ex = inferlab.book.plot.explorer_factories()[name]()
    anew = replace(ex, update=None)  # the same draw and controls, every frame a new figure
    assert ex.offline_html(n_frames=4, dpi=40) == anew.offline_html(n_frames=4, dpi=40)


def test_assets_are_staged_from_the_pinned_npm_packages(tmp_path: Path) -> None:
    out = sphinx_offline.stage_assets(ROOT / "web" / "node_modules", tmp_path)
    for name in ["mathjax/tex-mml-chtml.js", "mathjax/output/chtml/fonts/woff-v2", "require.js",
                 "embed-amd.js", "inferlab-frames.js", "inferlab-frames.css",
                 *[f"{folder}/1551f4f60c37af51121f.woff2" for folder in sphinx_offline.WIDGET_FONTS]]:
        assert (out / name).exists(), name
    with pytest.raises(ValueError, match="node_modules"):
        sphinx_offline.stage_assets(tmp_path / "nowhere", tmp_path)


def test_try_live_banner_links_the_lite_copy_of_the_page() -> None:
    banner = sphinx_offline.try_live_banner("chapters/8-1-1-request-lifecycle")
    assert 'href="../lite/lab/index.html?path=chapters/8-1-1-request-lifecycle.ipynb"' in banner
    assert "Pyodide CDN" in banner


def test_scripts_added_twice_are_kept_once() -> None:
    from sphinx.builders.html._assets import _JavaScript as Js

    ctx = {"script_files": [Js("", body="const THEBE_JS_URL = 1"), Js("a.js"),
                            Js(None, body="const THEBE_JS_URL = 1"), Js("", body="other")]}
    sphinx_offline._dedupe_scripts(ctx)
    assert [(s.filename, s.attributes.get("body")) for s in ctx["script_files"]] == [
        ("", "const THEBE_JS_URL = 1"), ("a.js", None), ("", "other")]


def test_pages_without_widget_views_load_no_widget_manager_and_no_remote_css() -> None:
    from sphinx.builders.html._assets import _CascadingStyleSheet as Css
    from sphinx.builders.html._assets import _JavaScript as Js

    scripts = [Js("ipywidgets_state", type="application/vnd.jupyter.widget-state+json", body="{}"),
               Js("_static/require.js"), Js("_static/embed-amd.js"), Js("_static/inferlab-frames.js")]
    css = [Css("https://fonts.example/css?family=X"), Css("inferlab-frames.css")]
    ctx = {"script_files": list(scripts), "css_files": css, "body": "<p>no widgets</p>"}
    sphinx_offline._offline_assets(ctx, {"require.js", "embed-amd.js"}, "chapters/x")
    assert [s.filename for s in ctx["script_files"]] == ["_static/inferlab-frames.js"]
    assert [c.filename for c in ctx["css_files"]] == ["inferlab-frames.css"]
    ctx = {"script_files": list(scripts), "css_files": [], "body": "application/vnd.jupyter.widget-view+json"}
    sphinx_offline._offline_assets(ctx, {"require.js", "embed-amd.js"}, "chapters/x")
    assert [s.filename for s in ctx["script_files"]][1:4] == ["_static/require.js", None, "_static/embed-amd.js"]
    assert '"@jupyter-widgets": "../_static/@jupyter-widgets"' in ctx["script_files"][2].attributes["body"]
