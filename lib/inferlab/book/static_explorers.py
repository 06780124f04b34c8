"""Explorers in the static book: every knob live, with no kernel and no network.

When the book is built, each explorer is drawn for every combination of its knobs' values on a grid (``knobs``:
the values a knob's meaning calls for, set per explorer with ``explore(grid=...)``, else a few round values over
its range). Each state is drawn by the explorer's own code, as the notebook draws it, and saved as Matplotlib's
SVG, whose text stays text. Most lines of two states are equal (axes, legend, a curve a knob does not move), so
the states are kept as one list of distinct lines and, per state, runs of indices into it (``frames``). That
data, gzip'd, goes into ``_static/explorers/<key>.js`` (``write_site_data``, called by the Sphinx extension
``inferlab.book.sphinx_offline``; cached across builds). The page itself holds the default state's picture and
the knobs (``placeholder_html``); the book's script loads the data and shows the state the knobs name. Nothing is
computed in the browser: it only puts back together lines the library drew.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import io
import itertools
import json
import math
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w
import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_mixed import MixedModeRenderer
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure
from matplotlib.textpath import TextToPath

from .plot.display import SVG_RC, describe, inline_svg
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from .widgets import Explorer

__all__ = ["MAX_STATES", "Knob", "slider_values", "knobs", "picks", "Frames", "frames", "state_svg", "placeholder_html",
           "data_script", "read_data_script", "write_site_data", "explorer_key"]

#: At most this many states per explorer: each costs one Matplotlib draw and SVG save at build time (30-60 ms).
MAX_STATES = 250
#: Values a slider gets on its own, before the budget thins them (never below 3: both ends and one between).
_SLIDER_VALUES = 5
_MIN_VALUES = 3


@dataclass(frozen=True)
class Knob:
    """One knob of an explorer in the static book: its grid values, their labels and where it starts."""

    name: str  #: the keyword of the explorer's draw function
    label: str  #: as the live widget writes it, "context (tokens)"
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    default: int  #: index of the live widget's default value in ``values``
    choice: bool  #: a list to pick from (a dropdown) rather than a range

    def __post_init__(self) -> None:
        if len(self.values) < 1 or len(self.values) != len(self.labels):
            raise ValueError(f"knob {self.name}: values and labels must be as many, and at least one")
        if not 0 <= self.default < len(self.values):
            raise ValueError(f"knob {self.name}: default must index values, got {self.default}")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "labels": list(self.labels), "default": self.default}


def _label(control: w.ValueWidget, value: Any) -> str:
    if isinstance(control, w.Dropdown):
        return str(control._options_labels[list(control._options_values).index(value)])
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cast(control: w.ValueWidget, value: float) -> Any:
    return int(round(value)) if isinstance(control, w.IntSlider) else float(round(value, 12))


def slider_values(control: w.ValueWidget, n: int) -> list[Any]:
    """At most about ``n`` round values over a slider's range, its ends and its default among them.

    A range over more than five doublings from 1 or more (batch 1-256, context 128-32768) gets powers of two; any
    other gets Matplotlib's round tick values (0, 0.25, 0.5 ...), snapped to the slider's step.
    """
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    lo, hi, value = control.min, control.max, control.value
    if isinstance(control, w.FloatLogSlider):
        exps = np.unique(np.round(np.linspace(control.min, control.max, n) / control.step) * control.step)
        grid = [control.base ** float(e) for e in exps]
        lo, hi = control.base**control.min, control.base**control.max
    elif lo >= 1 and hi / lo >= 32:
        twos = [2.0**k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)]
        pick = np.unique(np.round(np.linspace(0, len(twos) - 1, max(n - 2, 1))).astype(int))
        grid = [lo, *[twos[i] for i in pick], hi]
    else:
        step = getattr(control, "step", 0) or 0
        ticks = MaxNLocator(nbins=max(n - 1, 1), steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        gap = (ticks[1] - ticks[0]) / 2 if len(ticks) > 1 else 0
        ticks = [t for t in ticks if all(abs(t - end) >= gap for end in (lo, hi, value))]  # no near-twins
        grid = [lo, *[round(lo + round((t - lo) / step) * step, 12) if step else t for t in ticks], hi]
    return sorted({_cast(control, v) for v in grid if lo - 1e-12 <= v <= hi + 1e-12} | {value})


def _auto_values(control: w.ValueWidget, n: int) -> list[Any]:
    if isinstance(control, w.Dropdown):
        return list(control._options_values)
    if isinstance(control, w.Checkbox | w.ToggleButton):
        return [False, True]
    if hasattr(control, "min") and hasattr(control, "max"):
        return slider_values(control, n)
    return [control.value]


def knobs(explorer: Explorer, max_states: int = MAX_STATES) -> list[Knob]:
    """The explorer's knobs with their grids: ``explorer.grid`` where given, else round values over each range.

    Sliders without a grid lose values (down to three) while all combinations number more than ``max_states``.
    """
    if max_states < 1:
        raise ValueError(f"max_states must be positive, got {max_states}")
    grid = dict(explorer.grid or {})
    unknown = set(grid) - set(explorer.controls)
    if unknown:
        raise ValueError(f"grid names no knob of the explorer: {sorted(unknown)}")
    sizes = {name: _SLIDER_VALUES for name in explorer.controls}
    values: dict[str, list[Any]] = {}

    def compute(name: str) -> list[Any]:
        control = explorer.controls[name]
        if name in grid:
            given = list(grid[name])
            if control.value in given:
                return given
            return [*given, control.value] if isinstance(control, w.Dropdown) else sorted([*given, control.value])
        return _auto_values(control, sizes[name])

    for name in explorer.controls:
        values[name] = compute(name)
    while math.prod(len(v) for v in values.values()) > max_states:
        free = [n for n, c in explorer.controls.items() if n not in grid and hasattr(c, "min")
                and not isinstance(c, w.Dropdown) and len(values[n]) > _MIN_VALUES and sizes[n] > 2]
        if not free:
            break  # too many combinations still: ``picks`` draws a subset
        widest = max(free, key=lambda n: len(values[n]))
        sizes[widest] -= 1
        values[widest] = compute(widest)
    out = []
    for name, control in explorer.controls.items():
        vals = values[name]
        if isinstance(control, w.Dropdown):
            options = list(control._options_values)
            bad = [v for v in vals if v not in options]
            if bad:
                raise ValueError(f"grid of {name}: {bad} are not options of the knob")
            vals = [v for v in options if v in vals]  # in the dropdown's order
        elif hasattr(control, "min"):
            lo, hi = ((control.base**control.min, control.base**control.max)
                      if isinstance(control, w.FloatLogSlider) else (control.min, control.max))
            bad = [v for v in vals if not lo - 1e-12 <= v <= hi + 1e-12]
            if bad:
                raise ValueError(f"grid of {name}: {bad} lie outside the knob's range [{lo}, {hi}]")
        out.append(Knob(name, control.description or name, tuple(vals), tuple(_label(control, v) for v in vals),
                        vals.index(control.value), isinstance(control, w.Dropdown)))
    return out


def picks(ks: Sequence[Knob], extra: Sequence[dict[str, Any]] = (), max_states: int = MAX_STATES) -> list[tuple[int, ...]]:
    """The combinations drawn, as the index of each knob's value: all of them where they number at most
    ``max_states``; else every one that moves at most two knobs from their defaults (each pair of knobs meets in
    every combination of their values), plus the ``extra`` settings (a "Try it" that moves three knobs).
    In the page, a combination not drawn shows the nearest drawn one and says which knobs it shows elsewhere."""
    sizes = [len(k.values) for k in ks]
    if math.prod(sizes) <= max_states:
        return list(itertools.product(*(range(n) for n in sizes)))
    default = tuple(k.default for k in ks)
    chosen: dict[tuple[int, ...], None] = {default: None}
    for a, b in itertools.combinations(range(len(ks)), 2):
        for i, j in itertools.product(range(sizes[a]), range(sizes[b])):
            pick = list(default)
            pick[a], pick[b] = i, j
            chosen[tuple(pick)] = None
    for setting in extra:
        unknown = set(setting) - {k.name for k in ks}
        missing = [f"{k.name}={setting[k.name]!r}" for k in ks if k.name in setting and setting[k.name] not in k.values]
        if unknown or missing:
            raise ValueError(f"extra setting {setting} names no knob {sorted(unknown)} or values off the grid {missing}")
        chosen[tuple(k.values.index(setting[k.name]) if k.name in setting else k.default for k in ks)] = None
    if len(chosen) > max_states:
        raise ValueError(f"the knobs make {len(chosen)} states even two at a time, more than {max_states}: "
                         "give explore() a smaller grid")
    return sorted(chosen)


class _SVGRenderer(RendererSVG):
    """Matplotlib's SVG renderer, remembering text extents across saves: the same labels are measured in every
    state (layout was half the time of a save, 2x faster with this). Its mathtext parser is one for all saves too:
    Matplotlib caches parsed math per parser, and a new renderer's new parser re-parsed every axis label with math
    in every state (the value explorer: 100 -> 55 ms a state)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._text2path = _TEXT_TO_PATH

    def get_text_width_height_descent(self, s: str, prop: Any, ismath: Any) -> tuple[float, float, float]:
        return _text_extent(s, prop, ismath)


_TEXT_TO_PATH = TextToPath()


@functools.lru_cache(maxsize=8192)
def _text_extent(s: str, prop: Any, ismath: Any) -> tuple[float, float, float]:
    return _TEXT_TO_PATH.get_text_width_height_descent(s, prop, ismath)


def _svg(fig: Figure) -> str:
    """The figure as Matplotlib's SVG (what ``savefig(format="svg")`` writes, at 72 dpi), trimmed for a page."""
    buffer = io.StringIO()
    width, height = fig.get_size_inches()
    dpi = fig.dpi
    with mpl.rc_context(SVG_RC):
        fig.dpi = 72  # SVG units are points
        try:
            renderer = _SVGRenderer(width * 72, height * 72, buffer, image_dpi=72,
                                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
            fig.draw(MixedModeRenderer(fig, width, height, 72, renderer))
            renderer.finalize()
        finally:
            fig.dpi = dpi
    return buffer.getvalue()


def state_svg(result: Any, prefix: str = "") -> str:
    """What one state shows, as HTML: a Figure as inline SVG (``plot.display.inline_svg``: labelled with what it
    shows, its ids prefixed with ``prefix`` so that several on a page do not clash), anything else as its HTML
    or text."""
    if isinstance(result, Figure):
        return inline_svg(_svg(result), describe(result), prefix)[0]
    if hasattr(result, "_repr_html_"):
        return result._repr_html_()
    return f"<pre>{html.escape(str(getattr(result, 'data', result)))}</pre>"


def _draw_state(explorer: Explorer, values: dict[str, Any], prefix: str) -> str:
    try:
        return state_svg(explorer.frame(**values), prefix)
    except ValueError as err:
        return f"<p><strong>These settings are not valid:</strong> {html.escape(str(err))}</p>"


@dataclass(frozen=True)
class Frames:
    """The drawn states of an explorer: the knobs' value indices of each (``picks``), the distinct ``lines`` of
    all their pictures, and per state runs ``[start, length, ...]`` into them."""

    knobs: tuple[Knob, ...]
    picks: tuple[tuple[int, ...], ...]
    lines: tuple[str, ...]
    runs: tuple[tuple[int, ...], ...]

    def index(self, **values: Any) -> int:
        """The state drawn for ``values`` (by knob name; the others at their defaults); ValueError if not drawn."""
        pick = tuple(k.values.index(values[k.name]) if k.name in values else k.default for k in self.knobs)
        try:
            return self.picks.index(pick)
        except ValueError:
            raise ValueError(f"values {values} were not drawn") from None

    def state(self, index: int) -> str:
        """The HTML of state ``index``, put back together as the page's script does."""
        run = self.runs[index]
        return "\n".join(line for a, n in zip(run[::2], run[1::2]) for line in self.lines[a:a + n])


def _runs(indices: list[int]) -> tuple[int, ...]:
    out: list[int] = []
    for i in indices:
        if out and out[-2] + out[-1] == i:
            out[-1] += 1
        else:
            out += [i, 1]
    return tuple(out)


def explorer_key(explorer: Explorer) -> str:
    """The name the site's data file and the page's placeholder share (``roofline.weight_reuse_explorer``)."""
    if not explorer.key:
        raise ValueError(f"explorer of {explorer.draw.__name__} has no key: build it in a *_explorer factory of "
                         "an inferlab.book.plot module")
    return explorer.key


def _prefix(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key.lower()) + "-"


def frames(explorer: Explorer, max_states: int = MAX_STATES) -> Frames:
    """Draw the states of ``explorer`` that ``picks`` chooses on its knobs' grids, kept as shared lines."""
    ks = knobs(explorer, max_states)
    chosen = picks(ks, explorer.extra_states, max_states)
    prefix = _prefix(explorer.key or explorer.draw.__name__)
    pool: dict[str, int] = {}
    runs = []
    for pick in chosen:
        values = {k.name: k.values[i] for k, i in zip(ks, pick)}
        lines = _draw_state(explorer, values, prefix).split("\n")
        runs.append(_runs([pool.setdefault(line, len(pool)) for line in lines]))
    return Frames(tuple(ks), tuple(chosen), tuple(pool), tuple(runs))


def data_script(key: str, fr: Frames) -> str:
    """The site's data file of one explorer: a call that hands the gzip'd, base64'd JSON to the page's script."""
    payload = json.dumps({"knobs": [k.as_dict() for k in fr.knobs], "picks": fr.picks, "lines": fr.lines,
                          "runs": fr.runs}, separators=(",", ":"))
    packed = base64.b64encode(gzip.compress(payload.encode(), compresslevel=9, mtime=0)).decode()
    return f"inferlabExplorerData({json.dumps(key)}, {json.dumps(packed)});\n"


def read_data_script(script: str) -> dict[str, Any]:
    """The JSON a data file carries (tests and benchmarks read what the page reads)."""
    packed = json.loads(script[script.index(",") + 1:script.rindex(")")])
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def placeholder_html(explorer: Explorer) -> str:
    """The explorer as the static page shows it: its default picture, every knob, and a caption; the book's
    script enables the knobs once the explorer's data file (``data-file``, under ``_static``) has loaded."""
    key = explorer_key(explorer)
    ks = knobs(explorer)
    picture = _draw_state(explorer, explorer.values(), _prefix(key))
    controls = []
    for k in ks:
        label = html.escape(k.label)
        if k.choice:
            options = "".join(f'<option value="{i}"{" selected" if i == k.default else ""}>{html.escape(t)}</option>'
                              for i, t in enumerate(k.labels))
            field = f'<select data-knob="{html.escape(k.name)}" aria-label="{label}" disabled>{options}</select>'
        else:
            field = (f'<input type="range" data-knob="{html.escape(k.name)}" min="0" max="{len(k.values) - 1}" '
                     f'step="1" value="{k.default}" aria-label="{label}" disabled>')
        controls.append(f'<label class="inferlab-knob"><span>{label}</span>{field}'
                        f'<output>{html.escape(k.labels[k.default])}</output></label>')
    n = len(picks(ks, explorer.extra_states))
    return (
        f'<figure class="inferlab-explorer" data-explorer="{html.escape(key)}" data-states="{n}" '
        f'data-file="explorers/{html.escape(key)}.js">'
        f'<div class="inferlab-explorer-stage inferlab-figure-scroll">{picture}</div>'
        f'<div class="inferlab-explorer-knobs">{"".join(controls)}</div>'
        f'<p class="inferlab-explorer-note" aria-live="polite"></p>'
        f"<figcaption>Every knob moves over values drawn by the book's library when the book was built "
        f"({n} combinations); in the notebook (\"Try it live\" at the top of the page, Binder or Colab) the "
        f"knobs take any value.</figcaption></figure>"
    )


# ---- the site's data files, built by the Sphinx extension after the pages are written ----
def _fingerprint(root: Path) -> str:
    """A hash of what an explorer's pictures depend on: the library's code, the data, Matplotlib's version."""
    digest = hashlib.sha256(mpl.__version__.encode())
    for folder in (root / "lib" / "inferlab", root / "data"):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".woff2"):
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _build_one(key: str) -> str:
    from . import plot

    explorer = plot.explorer_factories()[key]()
    return data_script(key, frames(explorer))


def write_site_data(keys: Sequence[str], out: Path, cache: Path, root: Path, jobs: int = 2) -> list[Path]:
    """Write ``out/<key>.js`` for each explorer ``key``, from ``cache`` where the library has not changed since."""
    from . import plot

    known = plot.explorer_factories()
    unknown = sorted(set(keys) - set(known))
    if unknown:
        raise ValueError(f"keys name no explorer factory: {unknown}")
    if jobs < 1:
        raise ValueError(f"jobs must be positive, got {jobs}")
    stamp = _fingerprint(root)
    cache.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    todo = [k for k in sorted(set(keys)) if not (cache / f"{stamp}-{k}.js").is_file()]
    if todo:
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
            for key, script in zip(todo, pool.map(_build_one, todo)):
                (cache / f"{stamp}-{key}.js").write_text(script, encoding="utf-8")
    for stale in cache.glob("*.js"):
        if not stale.name.startswith(stamp):
            stale.unlink()
    written = []
    for key in sorted(set(keys)):
        target = out / f"{key}.js"
        target.write_bytes((cache / f"{stamp}-{key}.js").read_bytes())
        written.append(target)
    return written
