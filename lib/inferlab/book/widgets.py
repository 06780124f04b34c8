"""Widgets built one way: labelled controls with units, wired to a pure draw function.

``explore(draw, batch=int_slider(...), ...)`` shows the controls and ``draw(**values)``'s
result (a Figure, a DataFrame, Markdown...) as a plain output with a display id; a change
of any control calls ``draw`` again and updates that output in place. The first result is
an ordinary output, so the static HTML shows the default state, and no ``Output`` widget is
involved (which also keeps headless execution free of the nbclient stall, see ``inferlab.headless``).

Offline frames: when the book is built (``INFERLAB_OFFLINE_FRAMES`` set by ``conftest.py`` and by
the Sphinx extension ``inferlab.book.sphinx_offline``), displaying an explorer emits instead a plain
HTML block: frames of ``draw`` rendered for a few values of its first control (the others at
their defaults) behind an ``<input type=range>``, which the book's small script swaps with no
kernel and no network. The dead ipywidgets controls are then not shown.
"""

from __future__ import annotations

import base64
import gc
import html
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w
import numpy as np
from matplotlib.figure import Figure

from .plot import to_png

#: Environment variable that switches displayed explorers to offline frames (set for headless builds).
OFFLINE_ENV = "INFERLAB_OFFLINE_FRAMES"
#: Frames per offline slider (each costs one draw and render, ~0.1 s), and their resolution (dots per inch;
#: the live widget uses the style's 100; the render time hardly depends on it, the page size does).
OFFLINE_FRAMES = 6
OFFLINE_DPI = 85

_LAYOUT = {"description_width": "160px"}
_WIDTH = "460px"


def _label(label: str, unit: str) -> str:
    return f"{label} ({unit})" if unit else label


def int_slider(label: str, min: int, max: int, value: int, step: int = 1, unit: str = "") -> w.IntSlider:
    """An integer slider labelled ``label (unit)`` that updates on release."""
    if not min <= value <= max:
        raise ValueError(f"value ({value}) must lie in [min, max] = [{min}, {max}]")
    return w.IntSlider(value=value, min=min, max=max, step=step, description=_label(label, unit),
                       continuous_update=False, style=_LAYOUT, layout=w.Layout(width=_WIDTH))


def float_slider(label: str, min: float, max: float, value: float, step: float, unit: str = "",
                 readout_format: str = ".3g") -> w.FloatSlider:
    """A float slider labelled ``label (unit)`` that updates on release."""
    if not min <= value <= max:
        raise ValueError(f"value ({value}) must lie in [min, max] = [{min}, {max}]")
    return w.FloatSlider(value=value, min=min, max=max, step=step, description=_label(label, unit),
                         continuous_update=False, readout_format=readout_format, style=_LAYOUT,
                         layout=w.Layout(width=_WIDTH))


def log_slider(label: str, min_exp: float, max_exp: float, value: float, base: float = 2, step: float = 1,
               unit: str = "") -> w.FloatLogSlider:
    """A logarithmic slider from base**min_exp to base**max_exp (e.g. batch 1 ... 256)."""
    return w.FloatLogSlider(value=value, base=base, min=min_exp, max=max_exp, step=step,
                            description=_label(label, unit), continuous_update=False,
                            readout_format=".4g", style=_LAYOUT, layout=w.Layout(width=_WIDTH))


def choice(label: str, options: Sequence[Any] | dict[str, Any], value: Any = None) -> w.Dropdown:
    """A dropdown over ``options`` (a list, or a mapping label -> value)."""
    dd = w.Dropdown(options=options, description=label, style=_LAYOUT, layout=w.Layout(width=_WIDTH))
    if value is not None:
        dd.value = value
    return dd


def _extremes(control: w.ValueWidget) -> list[Any]:
    if isinstance(control, w.Dropdown):
        return list(control._options_values)  # list, (label, value) pairs or a mapping, as ipywidgets 8 keeps them
    if isinstance(control, w.FloatLogSlider):
        return [control.base**control.min, control.base**control.max]
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max]
    if isinstance(control, w.Checkbox | w.ToggleButton):
        return [False, True]
    return [control.value]


def _snap(x: float, lo: float, step: float) -> float:
    return round(lo + round((x - lo) / step) * step, 12) if step else x


def _spread(grid: list[Any], current: Any, n: int) -> list[Any]:
    """``grid`` (sorted, ends first and last) with ``current`` in place of its nearest inner point."""
    if current in grid:
        return grid
    inner = grid[1:-1]
    if len(grid) >= n and inner:
        grid = [g for g in grid if g is not min(inner, key=lambda g: abs(g - current))]
    return sorted([*grid, current])


def knob_values(control: w.ValueWidget, n: int = OFFLINE_FRAMES) -> list[Any]:
    """At most ``n`` values spread over ``control``'s range, snapped to its step, its current value included."""
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    current = control.value
    if isinstance(control, w.Dropdown):
        options = _extremes(control)
        if len(options) <= n:
            return options
        picks = sorted(set(np.linspace(0, len(options) - 1, n).round().astype(int).tolist()))
        return [options[i] for i in _spread(picks, options.index(current), n)]
    if isinstance(control, w.Checkbox | w.ToggleButton):
        return [False, True]
    if isinstance(control, w.FloatLogSlider):
        exps = sorted({_snap(e, control.min, control.step) for e in np.linspace(control.min, control.max, n)})
        return _spread([round(control.base**e, 12) for e in exps], current, n)
    if hasattr(control, "min") and hasattr(control, "max"):
        step = getattr(control, "step", 0) or 0
        cast = int if isinstance(control, w.IntSlider) else float
        grid = {cast(min(max(_snap(float(x), control.min, step), control.min), control.max))
                for x in np.linspace(control.min, control.max, n)}
        return _spread(sorted(grid), current, n)
    return [current]


def _option_label(control: w.ValueWidget, value: Any) -> str:
    if isinstance(control, w.Dropdown):
        return str(control._options_labels[list(control._options_values).index(value)])
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _frame_html(result: Any, dpi: int) -> str:
    """One frame: a Figure as an inline PNG at ``dpi``; anything else as its HTML, Markdown or text."""
    if isinstance(result, Figure):
        width = round(result.get_figwidth() * dpi)
        return f'<img src="data:image/png;base64,{base64.b64encode(to_png(result, dpi)).decode()}" width="{width}" alt="">'
    for method in ("_repr_html_",):
        if hasattr(result, method):
            return getattr(result, method)()
    text = getattr(result, "data", result)
    return f"<pre>{html.escape(str(text))}</pre>"


_heap_settled = False


def settle_heap() -> None:
    """Collect the young generations, then move every live object out of the collector's sight (``gc.freeze``).

    A redraw leaves a figure's worth of reference cycles; the collections they trigger scan the whole
    heap (numpy, pandas, sympy, Matplotlib...), pausing a slider 100-250 ms now and then. What is alive
    when an explorer is first shown lives as long as the kernel anyway. Done once per process.

    Only the young generations are collected first: a full collection here took 130-190 ms and found
    3-670 more objects (a discarded figure at most), which the freeze keeps instead. A flag, not
    ``gc.get_freeze_count``, says it was done: that count walks the frozen heap (about 20 ms) on every call.
    """
    global _heap_settled
    if not _heap_settled:
        gc.collect(1)
        gc.freeze()
        _heap_settled = True


def offline_mode() -> bool:
    """True when displayed explorers should emit offline frames (a headless book build)."""
    return os.environ.get(OFFLINE_ENV, "") not in ("", "0")


@dataclass
class Explorer:
    """A pure ``draw`` function and the controls that feed its keyword arguments."""

    draw: Callable[..., Any]
    controls: dict[str, w.ValueWidget]
    #: ``update(figure, **values) -> bool``: redraw a figure ``draw`` made, in place, for new values; False
    #: (figure untouched) where it cannot. Keeping the artists saves building them on every slider move.
    update: Callable[..., bool] | None = None
    _handle: Any = field(default=None, init=False, repr=False)
    _shown: Any = field(default=None, init=False, repr=False)

    def values(self) -> dict[str, Any]:
        """Current value of every control, by keyword."""
        return {name: c.value for name, c in self.controls.items()}

    def render(self, **overrides: Any) -> Any:
        """Call ``draw`` with the current values, overridden by ``overrides``."""
        return self.draw(**{**self.values(), **overrides})

    def frame(self, **overrides: Any) -> Any:
        """What the widget shows for the current values (``overrides`` on top): the figure shown last,
        redrawn in place where ``update`` can, else a new ``draw``. Tested to give ``render``'s pixels."""
        values = {**self.values(), **overrides}
        if self.update is not None and self._shown is not None and self.update(self._shown, **values):
            return self._shown
        self._shown = None  # a failed draw leaves nothing to update
        result = self.draw(**values)
        if isinstance(result, Figure) and self.update is not None:
            self._shown = result
        return result

    def sweep(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """Render each control at each of its extremes (the others at their defaults)."""
        for name, control in self.controls.items():
            for value in _extremes(control):
                yield {name: value}, self.render(**{name: value})

    def corners(self) -> Iterator[dict[str, Any]]:
        """Every pair of controls at every combination of their extremes (the rest at defaults)."""
        names = list(self.controls)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for va in _extremes(self.controls[a]):
                    for vb in _extremes(self.controls[b]):
                        yield {a: va, b: vb}

    def pairwise(self) -> list[dict[str, Any]]:
        """A few states, every control at one of its extremes, in which each pair of controls meets every
        combination of their extremes: a covering array of strength two (pairwise testing).

        It reaches every pair ``corners`` reaches in about a quarter of the states (184 for 766 over the
        book's explorers), with the other knobs at extremes rather than defaults. Built greedily and
        deterministically: each state starts from the first pair not yet met, and gives every other
        control the extreme that meets the most new pairs with the controls already set.
        """
        levels = [_extremes(c) for c in self.controls.values()]
        k = len(levels)
        unmet = {(a, i, b, j) for a in range(k) for b in range(a + 1, k)
                 for i in range(len(levels[a])) for j in range(len(levels[b]))}
        states: list[dict[str, Any]] = []
        while unmet:
            a, i, b, j = min(unmet)
            pick = {a: i, b: j}  # control -> index of its extreme
            for c in range(k):
                if c not in pick:
                    pick[c] = max(range(len(levels[c])), key=lambda v: sum(
                        ((m, pick[m], c, v) if m < c else (c, v, m, pick[m])) in unmet for m in pick))
            unmet -= {(x, pick[x], y, pick[y]) for x in range(k) for y in range(x + 1, k)}
            states.append({name: levels[c][pick[c]] for c, name in enumerate(self.controls)})
        return states

    def displayable(self) -> Any:
        """The current result, a Figure rendered once to PNG; a ValueError from the knobs becomes a message."""
        try:
            result = self.frame()
        except ValueError as err:
            from IPython.display import Markdown

            return Markdown(f"**These settings are not valid:** {err}")
        if isinstance(result, Figure):
            from IPython.display import Image

            return Image(to_png(result))
        return result

    def offline_html(self, n_frames: int = OFFLINE_FRAMES, dpi: int = OFFLINE_DPI) -> str:
        """A self-contained HTML block: frames for values of the first control behind a range input."""
        name, control = next(iter(self.controls.items()))
        values = knob_values(control, n_frames)
        frames = []
        for value in values:
            try:
                body = _frame_html(self.frame(**{name: value}), dpi)  # each frame is a PNG before the next
            except ValueError as err:
                body = f"<p><strong>These settings are not valid:</strong> {html.escape(str(err))}</p>"
            label = html.escape(_option_label(control, value))
            hidden = "" if value == control.value else " hidden"
            frames.append(f'<div class="inferlab-frame" data-label="{label}"{hidden}>{body}</div>')
        start = values.index(control.value)
        knob = html.escape(control.description or name)
        others = ", ".join(f"{html.escape(c.description or n)} = {html.escape(_option_label(c, c.value))}"
                           for n, c in list(self.controls.items())[1:])
        fixed = f" The other knobs stay at their defaults ({others})." if others else ""
        return (
            f'<figure class="inferlab-frames" data-knob="{html.escape(name)}">'
            f'<div class="inferlab-frames-stage">{"".join(frames)}</div>'
            f'<label class="inferlab-frames-control">{knob}: '
            f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{start}" aria-label="{knob}"> '
            f'<output>{html.escape(_option_label(control, control.value))}</output></label>'
            f'<figcaption>Offline, this slider moves <em>{knob}</em> over {len(values)} frames drawn when the '
            f'book was built.{fixed} Every knob is live in the notebook: "Try it live" at the top of the page '
            f"(in your browser), Binder or Colab.</figcaption></figure>"
        )

    def _update(self, _change: dict | None = None) -> None:
        if self._handle is not None:
            self._handle.update(self.displayable())

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if offline_mode():
            display({"text/html": self.offline_html(), "text/plain": f"<Explorer of {self.draw.__name__}>"},
                    raw=True)
            return
        settle_heap()
        display(w.VBox(list(self.controls.values())))
        self._handle = display(self.displayable(), display_id=True)
        for control in self.controls.values():
            control.observe(self._update, names="value")


def explore(draw: Callable[..., Any], update: Callable[..., bool] | None = None, **controls: w.ValueWidget) -> Explorer:
    """Wire ``controls`` (keyword = argument of ``draw``) to ``draw``; display the result to get the widget.

    ``update(figure, **values) -> bool`` optionally redraws a figure of ``draw`` in place (``Explorer.frame``).
    """
    if not controls:
        raise ValueError("controls must name at least one widget")
    if update is not None and not callable(update):
        raise ValueError(f"update must be callable or None, got {update!r}")
    return Explorer(draw, dict(controls), update)
