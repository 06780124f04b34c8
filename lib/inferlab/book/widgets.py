"""Widgets built one way: labelled controls with units, wired to a pure draw function.

``explore(draw, batch=int_slider(...), ...)`` shows the controls and ``draw(**values)``'s
result (a Figure, a DataFrame, Markdown...) as a plain output with a display id; a change
of any control calls ``draw`` again and updates that output in place. The first result is
an ordinary output, so the static HTML shows the default state, and no ``Output`` widget is
involved (which also keeps headless execution free of the nbclient stall, see ``inferlab.headless``).

The static book: when the book is built (``INFERLAB_OFFLINE_FRAMES`` set by ``conftest.py`` and by the
Sphinx extension ``inferlab.book.sphinx_offline``), displaying an explorer emits instead its default picture
with every knob as a plain HTML control, which the book's script makes live from data the library drew at
build time (``inferlab.book.static_explorers``), with no kernel and no network.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w
from matplotlib.figure import Figure

from .plot import to_png

#: Environment variable that switches displayed explorers to their static form (set for headless builds).
OFFLINE_ENV = "INFERLAB_OFFLINE_FRAMES"
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
    #: The values each knob takes in the static book (``inferlab.book.static_explorers.knobs``), by keyword,
    #: where its meaning calls for particular ones (a "Try it" setting); other knobs get round values.
    grid: dict[str, Sequence[Any]] | None = None
    #: Settings the static book must draw although they move more than two knobs (a "Try it"), by keyword.
    extra_states: tuple[dict[str, Any], ...] = ()
    #: ``module.factory`` of the ``inferlab.book.plot`` factory that built it: names its data in the static book.
    key: str | None = None
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

    def _update(self, _change: dict | None = None) -> None:
        if self._handle is not None:
            self._handle.update(self.displayable())

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if offline_mode():
            from .static_explorers import placeholder_html

            display({"text/html": placeholder_html(self), "text/plain": f"<Explorer of {self.draw.__name__}>"},
                    raw=True)
            return
        settle_heap()
        display(w.VBox(list(self.controls.values())))
        self._handle = display(self.displayable(), display_id=True)
        for control in self.controls.values():
            control.observe(self._update, names="value")


def explore(draw: Callable[..., Any], update: Callable[..., bool] | None = None,
            grid: dict[str, Sequence[Any]] | None = None, extra_states: Sequence[dict[str, Any]] = (),
            **controls: w.ValueWidget) -> Explorer:
    """Wire ``controls`` (keyword = argument of ``draw``) to ``draw``; display the result to get the widget.

    ``update(figure, **values) -> bool`` optionally redraws a figure of ``draw`` in place (``Explorer.frame``);
    ``grid`` gives knobs their values in the static book, ``extra_states`` settings it must draw (see
    ``inferlab.book.static_explorers.picks``). Called from a ``*_explorer`` factory of an
    ``inferlab.book.plot`` module, the explorer is named after it (``Explorer.key``).
    """
    if not controls:
        raise ValueError("controls must name at least one widget")
    if update is not None and not callable(update):
        raise ValueError(f"update must be callable or None, got {update!r}")
    if grid is not None and (not isinstance(grid, dict) or set(grid) - set(controls)):
        raise ValueError(f"grid must map knob names to values, got {grid!r}")
    caller = sys._getframe(1)
    module, name = caller.f_globals.get("__name__", ""), caller.f_code.co_name
    key = (f"{module.rsplit('.', 1)[-1]}.{name}"
           if module.startswith("inferlab.book.plot.") and name.endswith("_explorer") else None)
    return Explorer(draw, dict(controls), update, grid, tuple(extra_states), key)
