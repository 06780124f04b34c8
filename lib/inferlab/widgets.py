"""Widgets built one way: labelled controls with units, wired to a pure draw function.

``explore(draw, batch=int_slider(...), ...)`` shows the controls and ``draw(**values)``'s
result (a Figure, a DataFrame, Markdown...) as a plain output with a display id; a change
of any control calls ``draw`` again and updates that output in place. The first result is
an ordinary output, so the static HTML shows the default state, and no ``Output`` widget is
involved (which also keeps headless execution free of the nbclient stall, see ``headless``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w
from matplotlib.figure import Figure

from .plot import to_png

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
        return [value for _, value in control.options] if control.options and isinstance(control.options[0], tuple) \
            else list(control.options)
    if isinstance(control, w.FloatLogSlider):
        return [control.base**control.min, control.base**control.max]
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max]
    if isinstance(control, w.Checkbox | w.ToggleButton):
        return [False, True]
    return [control.value]


@dataclass
class Explorer:
    """A pure ``draw`` function and the controls that feed its keyword arguments."""

    draw: Callable[..., Any]
    controls: dict[str, w.ValueWidget]
    _handle: Any = field(default=None, init=False, repr=False)

    def values(self) -> dict[str, Any]:
        """Current value of every control, by keyword."""
        return {name: c.value for name, c in self.controls.items()}

    def render(self, **overrides: Any) -> Any:
        """Call ``draw`` with the current values, overridden by ``overrides``."""
        return self.draw(**{**self.values(), **overrides})

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

    def displayable(self) -> Any:
        """The current result, a Figure rendered once to PNG; a ValueError from the knobs becomes a message."""
        try:
            result = self.render()
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

        display(w.VBox(list(self.controls.values())))
        self._handle = display(self.displayable(), display_id=True)
        for control in self.controls.values():
            control.observe(self._update, names="value")


def explore(draw: Callable[..., Any], **controls: w.ValueWidget) -> Explorer:
    """Wire ``controls`` (keyword = argument of ``draw``) to ``draw``; display the result to get the widget."""
    if not controls:
        raise ValueError("controls must name at least one widget")
    return Explorer(draw, dict(controls))
