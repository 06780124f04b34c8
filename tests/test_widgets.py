"""Widget helpers, and every section explorer swept to its extremes.

Explorers are found automatically: every function named ``*_explorer`` in a module of
``inferlab.plot`` builds one, so a new section's widgets are tested as soon as they exist.
"""


import ipywidgets as w
import pytest
from matplotlib.figure import Figure

import inferlab.plot
from inferlab import widgets
from inferlab.plot import timeline as tplot
from inferlab.plot import to_png


def test_explorer_renders_current_values_and_sweeps_extremes() -> None:
    def draw(a: int, b: str) -> str:
        return f"{a}-{b}"

    ex = widgets.explore(draw, a=widgets.int_slider("a", 1, 9, 3), b=widgets.choice("b", ["x", "y"], "y"))
    assert ex.render() == "3-y"
    assert ex.render(a=7) == "7-y"
    swept = [args for args, _ in ex.sweep()]
    assert swept == [{"a": 1}, {"a": 9}, {"b": "x"}, {"b": "y"}]


def test_controls_validate() -> None:
    with pytest.raises(ValueError, match="value"):
        widgets.int_slider("n", 1, 5, 9)
    with pytest.raises(ValueError, match="controls"):
        widgets.explore(lambda: None)
    assert isinstance(widgets.log_slider("batch", 0, 8, 16), w.FloatLogSlider)




FACTORIES = inferlab.plot.explorer_factories()


def test_the_8_1_explorers_are_found() -> None:
    assert {"timeline.request_explorer", "timeline.capacity_explorer", "timeline.batch_explorer"} <= set(FACTORIES)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_explorer_at_its_extremes(name: str) -> None:
    explorer = FACTORIES[name]()
    assert isinstance(explorer.render(), (Figure, str)) or explorer.render() is not None
    for args, result in explorer.sweep():
        assert result is not None, args
        if isinstance(result, Figure):
            assert to_png(result)[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_explorer_at_pairs_of_extremes(name: str) -> None:
    """Two knobs at once reach combinations one-at-a-time sweeps miss; each must draw or raise ValueError."""
    explorer = FACTORIES[name]()
    for overrides in explorer.corners():
        try:
            result = explorer.render(**overrides)
        except ValueError as err:  # rejected by name: the widget shows the message instead of a figure
            assert str(err), overrides
        else:
            assert result is not None, overrides


def test_a_rejected_combination_renders_as_a_message() -> None:
    def draw(n: int) -> str:
        if n > 3:
            raise ValueError("n must be at most 3")
        return str(n)

    ex = widgets.explore(draw, n=widgets.int_slider("n", 1, 5, 5))
    assert "n must be at most 3" in ex.displayable().data


def test_capacity_figure_with_a_prefix_longer_than_the_prompt_is_clamped() -> None:
    fig = tplot.draw_capacity("qwen3-8b", 12, 1024, 16, shared_prefix_tokens=8192)
    assert "fit in 12 GiB" in fig._suptitle.get_text()
    fig = tplot.draw_capacity("qwen3-8b", 12, 8192, 1, 16, 2, 32768)  # prefix covers the whole prompt
    assert "fit in 12 GiB" in fig._suptitle.get_text()


def test_draw_functions_reject_unknown_models_by_name() -> None:
    with pytest.raises(ValueError, match="model"):
        tplot.draw_capacity("gpt-5", 12, 1024, 16)


def test_showing_a_live_explorer_freezes_the_heap_once(monkeypatch) -> None:
    import gc

    from inferlab import widgets

    monkeypatch.setenv(widgets.OFFLINE_ENV, "0")
    gc.unfreeze()
    try:
        ex = widgets.explore(lambda n: f"n = {n}", n=widgets.int_slider("n", 1, 3, 2))
        ex._ipython_display_()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        ex._ipython_display_()  # a second explorer does not freeze again
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
