"""Widget helpers, and every section explorer swept to its extremes.

Explorers are found automatically: every function named ``*_explorer`` in a module of
``inferlab.book.plot`` builds one, so a new section's widgets are tested as soon as they exist.
"""

from pathlib import Path

import ipywidgets as w
import pytest
from matplotlib.figure import Figure

import inferlab.book.plot
from inferlab.book import widgets
from inferlab.book.plot import timeline as tplot
from inferlab.book.plot import to_png


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




FACTORIES = inferlab.book.plot.explorer_factories()


def test_the_8_1_explorers_are_found() -> None:
    assert {"timeline.request_explorer", "timeline.capacity_explorer", "timeline.batch_explorer"} <= set(FACTORIES)


MISMATCHES = Path(__file__).resolve().parents[1] / "_build" / "widget-mismatch"


def _same_as_the_widget_shows(explorer, overrides: dict, fresh_png: bytes | None, out: Path = MISMATCHES) -> bool:
    """For an explorer that redraws in place: its next frame has exactly the pixels of a new draw
    (``fresh_png``; None moves on to the frame without comparing). A frame that differs fails the test;
    both pictures are kept for review. (A stale transform once made such a difference depend on memory
    addresses; ``inferlab.book.plot.pickled`` is the fix.)

    Returns whether the frame reused the figure shown before it (the in-place path ran)."""
    before = explorer._shown
    shown = explorer.frame(**overrides)
    if fresh_png is not None:
        png = to_png(shown)
        if png != fresh_png:
            out.mkdir(parents=True, exist_ok=True)
            stem = f"{explorer.draw.__name__}-{abs(hash(repr(sorted(overrides.items())))):x}"
            (out / f"{stem}-frame.png").write_bytes(png)
            (out / f"{stem}-new.png").write_bytes(fresh_png)
            raise AssertionError(f"{overrides}: frame (reused: {shown is before}) differs from a new draw, see {stem}")
    return before is not None and shown is before


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_explorer_at_its_extremes(name: str) -> None:
    explorer = FACTORIES[name]()
    assert isinstance(explorer.render(), (Figure, str)) or explorer.render() is not None
    for args, result in explorer.sweep():
        assert result is not None, args
        if isinstance(result, Figure):
            png = to_png(result)
            assert png[:4] == b"\x89PNG"
            if explorer.update is not None:
                _same_as_the_widget_shows(explorer, args, png)


def _walk(explorer, states: list[dict], compare_every: int = 2) -> tuple[list[dict], int]:
    """Show ``states`` in turn, as a reader's slider moves would; each must draw or raise ValueError.

    An explorer that redraws in place has every ``compare_every``-th frame (and the last) checked against a
    new draw, pixel for pixel: a state one update leaves behind for the next shows there. The frames between
    are not drawn anew: a reader reaches a new draw there only when the update declines, and then ``frame``
    draws it. Returns the states drawn and how many frames were redrawn in place."""
    drawn, reused = [], 0
    for i, overrides in enumerate(states):
        compare = i % compare_every == 0 or i == len(states) - 1
        try:
            result = explorer.render(**overrides) if explorer.update is None or compare else None
            if explorer.update is not None:
                reused += _same_as_the_widget_shows(explorer, overrides, to_png(result) if compare else None)
        except ValueError as err:  # rejected by name: the widget shows the message instead of a figure
            assert str(err), overrides
            if explorer.update is not None:
                with pytest.raises(ValueError):
                    explorer.frame(**overrides)
                with pytest.raises(ValueError):
                    explorer.render(**overrides)
        else:
            assert result is not None or explorer.update is not None, overrides
            drawn.append(overrides)
    return drawn, reused


def _unmet(explorer, states: list[dict]) -> list[dict]:
    """The corners (a pair of knobs at extremes) that no state in ``states`` meets."""
    return [c for c in explorer.corners() if not any(all(s[k] == v for k, v in c.items()) for s in states)]


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_explorer_at_pairs_of_extremes(name: str) -> None:
    """Two knobs at once reach combinations one-at-a-time sweeps miss; each must draw or raise ValueError.

    The explorer is walked through ``pairwise`` states (every pair of knobs meets every combination of
    their extremes, the other knobs at extremes too), then through the pairs (the rest at defaults) that no
    drawn state met because the states holding them were rejected. Either way every pair of extremes is
    drawn somewhere or shown to be rejected on its own."""
    explorer = FACTORIES[name]()
    states = explorer.pairwise()
    drawn, reused = _walk(explorer, states)
    missed = _unmet(explorer, drawn)
    drawn_alone, reused_alone = _walk(explorer, missed)
    if explorer.update is not None:
        frames = len(states) + len(missed)
        assert reused + reused_alone >= frames // 2, f"only {reused + reused_alone} of {frames} frames were redrawn in place"


def test_pairwise_states_meet_every_pair_of_extremes() -> None:
    ex = widgets.explore(lambda **_: None, a=widgets.int_slider("a", 0, 1, 0), b=widgets.choice("b", [1, 2, 3], 2),
                         c=widgets.log_slider("c", 0, 4, 2), d=widgets.choice("d", ["x", "y"], "x"),
                         e=widgets.int_slider("e", 5, 9, 6))
    states = ex.pairwise()
    assert all(set(s) == set(ex.controls) for s in states)
    assert not _unmet(ex, states)
    assert 6 <= len(states) < len(list(ex.corners())) // 3  # at least |b| * 2 states; far fewer than corners
    assert ex.pairwise() == states  # deterministic
    assert widgets.explore(lambda a: a, a=widgets.int_slider("a", 0, 1, 0)).pairwise() == []


def test_a_rejected_pairwise_state_falls_back_to_its_pairs_alone() -> None:
    """A state rejected as a whole leaves its pairs unmet; each is then tried with the other knobs at defaults."""
    def draw(a: int, b: int, c: int) -> str:
        if (a, b, c) == (9, 9, 0):
            raise ValueError("a = b = 9 needs c > 0")
        return f"{a}{b}{c}"

    ex = widgets.explore(draw, a=widgets.int_slider("a", 0, 9, 5), b=widgets.int_slider("b", 0, 9, 5),
                         c=widgets.int_slider("c", 0, 9, 5))
    states = ex.pairwise()
    drawn, _ = _walk(ex, states)
    assert len(drawn) == len(states) - 1
    missed = _unmet(ex, drawn)
    assert missed == [{"a": 9, "b": 9}, {"a": 9, "c": 0}, {"b": 9, "c": 0}]  # met only in the rejected state
    assert _walk(ex, missed)[0] == missed  # with the third knob at its default, each pair draws


#: Explorers that draw anew on every move: block diagrams whose boxes and labels change in number with each value,
#: all well under the 50 ms a move may take (make bench). Any other explorer redraws in place.
DRAWN_ANEW = {"blocks_explorers.branch_sharing_explorer", "blocks_explorers.cache_choice_explorer",
              "blocks_explorers.copy_on_write_explorer", "blocks_explorers.paged_allocation_explorer",
              "blocks_explorers.refcount_explorer"}


def test_every_explorer_but_the_block_diagrams_redraws_in_place() -> None:
    assert {name for name, factory in FACTORIES.items() if factory().update is None} == DRAWN_ANEW


def test_frame_updates_in_place_falls_back_to_a_new_draw_and_keeps_only_figures() -> None:
    from matplotlib.figure import Figure as F

    drawn, updated = [], []

    def draw(n: int) -> F:
        if n > 3:
            raise ValueError("n must be at most 3")
        drawn.append(n)
        fig = F()
        fig.n = n
        return fig

    def update(fig: F, n: int) -> bool:
        if n > 3:
            raise ValueError("n must be at most 3")
        if n == 1:  # a picture of its own: draw anew
            return False
        updated.append(n)
        fig.n = n
        return True

    ex = widgets.explore(draw, update, n=widgets.int_slider("n", 1, 5, 2))
    first = ex.frame()
    assert ex.frame(n=3) is first and first.n == 3 and updated == [3] and drawn == [2]
    with pytest.raises(ValueError, match="n must be at most 3"):
        ex.frame(n=5)
    assert ex.frame(n=2) is first  # a rejected value left the shown figure as it was
    other = ex.frame(n=1)
    assert other is not first and drawn == [2, 1]
    ex.controls["n"].value = 5
    assert "n must be at most 3" in ex.displayable().data  # the widget's path: a message, no figure
    with pytest.raises(ValueError, match="update"):
        widgets.explore(draw, "not a function", n=widgets.int_slider("n", 1, 5, 2))
    text = widgets.explore(lambda n: f"n = {n}", lambda fig, n: True, n=widgets.int_slider("n", 1, 5, 2))
    assert text.frame() == "n = 2" and text.frame(n=3) == "n = 3"  # only figures are kept to redraw


def test_a_frame_redrawn_wrongly_in_place_fails_the_comparison_with_new_draws(tmp_path: Path) -> None:
    from inferlab.book.plot import new_figure

    def draw(y: int) -> Figure:
        fig, ax = new_figure(width=3.0, height=2.0)
        ax.plot([0, 1], [0, y])
        ax.set_ylim(0, 4)
        return fig

    def update(fig: Figure, y: int) -> bool:
        fig.axes[0].lines[0].set_ydata([0, y + 1])  # one off: the wrong picture
        return True

    ex = widgets.explore(draw, update, y=widgets.int_slider("y", 1, 3, 1))
    ex.frame()
    with pytest.raises(AssertionError, match="differs from a new draw"):
        _same_as_the_widget_shows(ex, {"y": 2}, to_png(ex.render(y=2)), tmp_path)
    assert len(list(tmp_path.glob("*.png"))) == 2  # the frame and the new draw, kept for review


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

    from inferlab.book import widgets

    monkeypatch.setenv(widgets.OFFLINE_ENV, "0")
    monkeypatch.setattr(widgets, "_heap_settled", False)
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


def test_captioning_again_sizes_the_figure_as_a_first_caption_does() -> None:
    from inferlab.book.plot import caption, new_figure

    once, _ = new_figure(width=6.0, height=3.0)
    caption(once, "short")
    twice, _ = new_figure(width=6.0, height=3.0)
    caption(twice, "a caption long enough to wrap onto a second line and a third " * 3)
    caption(twice, "short")
    assert tuple(twice.get_size_inches()) == tuple(once.get_size_inches())
    assert twice.subplotpars.top == once.subplotpars.top and twice.subplotpars.bottom == once.subplotpars.bottom
    assert twice._suptitle.get_text() == "short" and len(twice.texts) == len(once.texts)


def test_refresh_legend_rebuilds_only_when_an_entry_changed() -> None:
    from inferlab.book.plot import new_figure, refresh_legend

    _, ax = new_figure()
    line, = ax.plot([0, 1], [0, 1], color="red", label="a")
    refresh_legend(ax, loc="upper left")
    first = ax.get_legend()
    refresh_legend(ax, loc="upper left")
    assert ax.get_legend() is first
    line.set_color("blue")
    refresh_legend(ax, loc="upper left")
    assert ax.get_legend() is not first
    second = ax.get_legend()
    line.set_label("_hidden")
    refresh_legend(ax, loc="upper left")
    assert ax.get_legend() is not second and [t.get_text() for t in ax.get_legend().get_texts()] == []


def test_in_place_redraw_needs_the_figure_to_keep_its_own_kind() -> None:
    from inferlab.book.plot import InPlace, new_figure

    class Mark(InPlace):
        def __init__(self, ax) -> None:
            self.line, = ax.plot([0, 1], [0, 0])
            self.keep_on(ax.figure)

        def set(self, y: float) -> bool:
            if y < 0:
                return False  # a picture of its own
            self.line.set_ydata([y, y])
            return True

    class Other(InPlace):
        def set(self) -> None:
            pass

    fig, ax = new_figure()
    plain, _ = new_figure()
    Mark(ax)
    assert Mark.redraw(fig, 2.0) and list(ax.lines[0].get_ydata()) == [2.0, 2.0]
    assert not Mark.redraw(fig, -1.0) and list(ax.lines[0].get_ydata()) == [2.0, 2.0]
    assert not Mark.redraw(plain, 2.0) and not Other.redraw(fig)


def test_rescale_lets_a_reference_line_widen_the_view_only_when_outside_it_as_axvline_does() -> None:
    from inferlab.book.plot import new_figure, rescale

    for x, widened in ((0.5, False), (3.0, True)):
        _, fresh = new_figure()
        fresh.plot([0, 1], [0, 1])
        fresh.axvline(x)  # Matplotlib's own rule, for the figure drawn anew
        _, kept = new_figure()
        line, = kept.plot([5, 9], [5, 9])
        ref = kept.axvline(7.0)
        line.set_data([0, 1], [0, 1])  # the same picture, redrawn in place
        ref.set_xdata([x, x])
        rescale(kept, ref)
        assert kept.get_xlim() == fresh.get_xlim() and (kept.get_xlim()[1] > 1.05) == widened
    _, ax = new_figure()
    with pytest.raises(ValueError, match="reference"):
        rescale(ax, ax.plot([0, 1], [0, 1])[0])
