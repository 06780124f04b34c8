"""Explorers in the static book: knob grids, every state drawn by the explorer's own code, the page's placeholder.

That every knob of every explorer changes its picture is checked on the built site, on the states the build drew
(``tests/test_browser_explorers.py``, in ``make test``), not drawn again here."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import ipywidgets as w
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import inferlab.book.plot
from inferlab.book import static_explorers as S
from inferlab.book import widgets

FACTORIES = inferlab.book.plot.explorer_factories()
ROOT = Path(__file__).resolve().parents[1]


def _draw(n: int, label: str = "x") -> str:
    if n > 40:
        raise ValueError("n must be at most 40")
    return f"<b>{label}:{n}</b>"


def _tiny() -> widgets.Explorer:
    return widgets.explore(_draw, n=widgets.int_slider("count", 1, 50, 10, unit="items"),
                           label=widgets.choice("label", ["x", "y", "z"], "y"))


def test_slider_values_are_round_snapped_and_hold_the_ends_and_the_default() -> None:
    values = S.slider_values(widgets.int_slider("n", 1, 100, 37, step=3), 5)
    assert values[0] == 1 and values[-1] == 100 and 37 in values and values == sorted(set(values))
    assert all(isinstance(v, int) for v in values)
    floats = S.slider_values(widgets.float_slider("f", 0.0, 1.0, 0.875, 0.025), 5)
    assert floats == [0.0, 0.25, 0.5, 0.75, 0.875, 1.0]
    assert S.slider_values(widgets.int_slider("b", 1, 16, 4), 5) == [1, 4, 10, 16]  # not 5 beside 4, 15 beside 16
    with pytest.raises(ValueError, match="n must be at least 2"):
        S.slider_values(widgets.int_slider("n", 1, 5, 2), 1)


def test_slider_values_over_many_doublings_are_powers_of_two() -> None:
    batch = S.slider_values(widgets.int_slider("batch", 1, 256, 16), 5)
    assert batch[0] == 1 and batch[-1] == 256 and 16 in batch
    assert all(v & (v - 1) == 0 for v in batch)
    log = S.slider_values(widgets.log_slider("rate", 0, 4, 4.0, step=0.5), 5)
    assert log == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_knobs_take_the_explorers_grid_and_add_the_default() -> None:
    ex = _tiny()
    ex.grid = {"n": (1, 5, 40)}
    n, label = S.knobs(ex)
    assert n.values == (1, 5, 10, 40) and n.default == 2 and n.label == "count (items)" and not n.choice
    assert label.values == ("x", "y", "z") and label.default == 1 and label.choice
    ex.grid = {"n": (0, 10)}
    with pytest.raises(ValueError, match=r"grid of n: \[0\] lie outside"):
        S.knobs(ex)
    ex.grid = {"label": ("x", "w")}
    with pytest.raises(ValueError, match="not options"):
        S.knobs(ex)
    with pytest.raises(ValueError, match="grid must map knob names"):
        widgets.explore(_draw, grid={"m": (1,)}, n=widgets.int_slider("n", 1, 5, 2))


def test_knobs_thin_sliders_to_the_budget_but_keep_three_values() -> None:
    ex = widgets.explore(lambda **k: "", **{f"k{i}": widgets.int_slider(f"k{i}", 0, 100, 50) for i in range(4)})
    ks = S.knobs(ex, max_states=100)
    assert math.prod(len(k.values) for k in ks) <= 100 and all(len(k.values) >= 3 for k in ks)


def test_picks_are_every_combination_within_the_budget() -> None:
    ks = S.knobs(_tiny())
    chosen = S.picks(ks)
    assert chosen == sorted(chosen) and len(chosen) == math.prod(len(k.values) for k in ks) == len(set(chosen))


def test_over_the_budget_picks_move_two_knobs_at_most_plus_the_extra_settings() -> None:
    ex = widgets.explore(lambda **k: "", **{f"k{i}": widgets.int_slider(f"k{i}", 0, 100, 50) for i in range(4)})
    ks = S.knobs(ex, max_states=40)
    chosen = S.picks(ks, max_states=40)
    default = tuple(k.default for k in ks)
    assert all(sum(p != d for p, d in zip(pick, default)) <= 2 for pick in chosen)
    for a in range(4):  # every pair meets in every combination of its values
        for b in range(a + 1, 4):
            assert {(p[a], p[b]) for p in chosen} == {(i, j) for i in range(len(ks[a].values))
                                                     for j in range(len(ks[b].values))}
    far = {k.name: k.values[0] for k in ks[:3]}
    extra = S.picks(ks, [far], max_states=40)
    assert tuple(0 if i < 3 else ks[i].default for i in range(4)) in extra and len(extra) == len(chosen) + 1
    with pytest.raises(ValueError, match="values off the grid"):
        S.picks(ks, [{"k0": 7}], max_states=40)
    with pytest.raises(ValueError, match="even two at a time"):
        S.picks(ks, max_states=10)


def test_frames_put_every_state_back_together_and_share_lines() -> None:
    ex = widgets.explore(lambda n, label: "\n".join(["<div>", f"<b>{label}</b>", "<i>same</i>", str(n), "</div>"]),
                         n=widgets.int_slider("n", 1, 50, 10), label=widgets.choice("label", ["x", "y"], "y"))
    fr = S.frames(ex)
    for i, pick in enumerate(fr.picks):
        assert fr.state(i) == S.state_svg(ex.render(**{k.name: k.values[j] for k, j in zip(fr.knobs, pick)}))
    assert fr.lines.count("&lt;i&gt;same&lt;/i&gt;") == 1 and len(fr.lines) < sum(5 for _ in fr.runs)


def test_an_invalid_state_shows_the_message() -> None:
    ex = _tiny()
    fr = S.frames(ex)
    at_50 = fr.index(n=50)
    assert "not valid" in fr.state(at_50) and "at most 40" in fr.state(at_50)


def test_the_data_script_carries_the_frames() -> None:
    ex = _tiny()
    fr = S.frames(ex)
    data = S.read_data_script(S.data_script("blocks.x_explorer", fr))
    assert data["lines"] == list(fr.lines) and [tuple(r) for r in data["runs"]] == list(fr.runs)
    assert [tuple(p) for p in data["picks"]] == list(fr.picks)
    assert [k["name"] for k in data["knobs"]] == ["n", "label"] and data["knobs"][1]["labels"] == ["x", "y", "z"]


def test_figure_states_are_svg_with_text_as_text_and_prefixed_ids() -> None:
    ex = FACTORIES["blocks_explorers.copy_on_write_explorer"]()
    svg = S.state_svg(ex.render(), "cow-")
    assert svg.startswith("<svg ") and 'role="img"' in svg and "<?xml" not in svg and "<metadata>" not in svg
    assert "<text" in svg  # svg.fonttype none: labels are text, not glyph paths
    ids = re.findall(r'id="([^"]+)"', svg)
    assert ids and all(i.startswith("cow-") for i in ids)
    assert not re.search(r'="[^"]*\d\.\d{3}', svg), "coordinates are kept to a hundredth of a point"


def test_placeholder_shows_the_default_picture_and_every_knob_disabled() -> None:
    ex = FACTORIES["blocks_explorers.shared_batch_explorer"]()
    page = S.placeholder_html(ex)
    ks = S.knobs(ex)
    assert 'data-explorer="blocks_explorers.shared_batch_explorer"' in page
    assert 'data-file="explorers/blocks_explorers.shared_batch_explorer.js"' in page  # what write_site_data names
    assert page.count("data-knob=") == len(ks) == 2 and page.count(" disabled") == 2
    for k in ks:
        assert f'value="{k.default}"' in page and f"<output>{k.labels[k.default]}</output>" in page
    fr_default = S.state_svg(ex.render(), "blocks-explorers-shared-batch-explorer-")
    assert fr_default in page
    with pytest.raises(ValueError, match="no key"):
        S.placeholder_html(_tiny())


def test_display_emits_the_placeholder_and_no_dead_widgets_when_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    InteractiveShell.instance()
    ex = FACTORIES["blocks_explorers.refcount_explorer"]()
    monkeypatch.setenv(widgets.OFFLINE_ENV, "1")
    with capture_output() as captured:
        ex._ipython_display_()
    assert len(captured.outputs) == 1 and "inferlab-explorer" in captured.outputs[0].data["text/html"]
    monkeypatch.setenv(widgets.OFFLINE_ENV, "0")
    with capture_output() as captured:
        ex._ipython_display_()
    assert "application/vnd.jupyter.widget-view+json" in captured.outputs[0].data


@pytest.mark.parametrize("key", sorted(FACTORIES))
def test_every_explorer_is_named_after_its_factory_and_fits_the_budget(key: str) -> None:
    ex = FACTORIES[key]()
    assert ex.key == key
    ks = S.knobs(ex)
    assert [k.name for k in ks] == list(ex.controls)
    assert len(S.picks(ks, ex.extra_states)) <= S.MAX_STATES
    assert all(len(k.values) >= 2 for k in ks)


@pytest.mark.parametrize("key", sorted(k for k, f in FACTORIES.items() if f().update))
def test_states_redrawn_in_place_are_the_states_drawn_anew(key: str) -> None:
    ex = FACTORIES[key]()
    anew = replace(ex, update=None)  # the same draw and controls, every state a new figure
    ks = S.knobs(ex)
    picks = [{}, *({k.name: i} for k in ks for i in (0, len(k.values) - 1))]
    for pick in picks:
        values = {k.name: k.values[pick.get(k.name, k.default)] for k in ks}
        assert S.state_svg(ex.frame(**values)) == S.state_svg(anew.frame(**values)), (key, values)


def test_site_data_is_written_and_then_read_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "blocks_explorers.refcount_explorer"
    out = S.write_site_data([key], tmp_path / "site", tmp_path / "cache", ROOT, jobs=1)
    assert [p.name for p in out] == [f"{key}.js"]
    data = S.read_data_script(out[0].read_text())
    assert len(data["runs"]) == len(S.knobs(FACTORIES[key]())[0].values)

    def refuse(_key: str) -> str:
        raise AssertionError("drawn again although the library did not change")

    monkeypatch.setattr(S, "_build_one", refuse)
    again = S.write_site_data([key], tmp_path / "site2", tmp_path / "cache", ROOT, jobs=1)
    assert again[0].read_text() == out[0].read_text()
    with pytest.raises(ValueError, match="name no explorer"):
        S.write_site_data(["nope.x_explorer"], tmp_path / "site", tmp_path / "cache", ROOT)
