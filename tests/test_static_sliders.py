"""The static book's assets: staged from the pinned npm packages, loaded only where a page uses them, the banner."""

from pathlib import Path

import pytest

from inferlab.book import sphinx_offline

ROOT = Path(__file__).resolve().parents[1]


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
