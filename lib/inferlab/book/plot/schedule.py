"""Drawings of section 8.2: Gantt charts from the scheduler's iteration log, causal-pair grids, budget and padding plots.

Every function returns a ``matplotlib.figure.Figure`` built with ``plot.new_figure``; the
``draw_*`` functions are the pure callbacks of the section's widgets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from inferlab.scheduling import chunking, shapes
from inferlab.scheduling.iteration import FITTED_COST, IterationCost
from inferlab.scheduling.simulator import Schedule, run_example
from inferlab.units import ms

from . import COLORS, InPlace, add_boxes, box_corners, caption, new_figure, refresh_legend, rescale
from .legends import book_legend
from .legibility import legible, min_font_pt
from .ticks import few_ticks

if TYPE_CHECKING:
    from ..widgets import Explorer

__all__ = ["gantt", "shared_xmax", "draw_example", "pair_grid_figure", "chunk_time_figure", "draw_chunk",
           "budget_sweep_figure", "padding_figure", "draw_padding", "budget_rule_figure",
           "draw_budget_rule", "example_explorer", "chunk_explorer", "padding_explorer", "budget_rule_explorer"]

_BAR_HEIGHT = 0.6


def _margins(fig: Figure, top_in: float, bottom_in: float) -> None:
    """Reserve ``top_in`` / ``bottom_in`` inches above and below the axes (for a caption, a title, a legend)."""
    height = fig.get_figheight()
    fig.subplots_adjust(top=1 - top_in / height, bottom=bottom_in / height)


class _Gantt(InPlace):
    """``gantt``'s bars and arrivals for a fixed set of requests, redrawn in place by ``set``."""

    def __init__(self, ax, names: list[str]) -> None:
        self.ax, self.names = ax, names
        # one collection for every bar (start, duration, row, colour): one artist to lay out, not one per request
        self.bars = add_boxes(ax, [], [], [], [], facecolors=[], edgecolors="white", linewidths=0.8)
        self.arrivals, = ax.plot([], [], marker="v", color="black", markersize=7, linestyle="none", clip_on=False)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.75)
        ax.set_xlabel("time (ms)")
        ax.grid(axis="y", visible=False)
        few_ticks(ax, x=6, y=None)
        handles = [Patch(color=COLORS["prefill"], label="prefill"), Patch(color=COLORS["decode"], label="decode"),
                   ax.plot([], [], "v", color="black", label="arrival")[0]]
        book_legend(ax.figure.legend(handles=handles, loc="lower center", ncols=3))
        self.keep_on(ax.figure)

    def set(self, schedule: Schedule, xmax_s: float | None = None, title: str | None = None) -> bool:
        if list(schedule.served) != self.names:
            return False  # other rows: a figure of its own
        row = {name: i for i, name in enumerate(self.names)}
        work = [(it.start_s, it.duration_s, row[w.request.name], w.kind)
                for it in schedule.iterations for w in it.work if w.kind in ("prefill", "decode")]
        start, length, y = np.array([bar[:3] for bar in work], float).reshape(-1, 3).T
        self.bars.set_verts(box_corners(start / ms, y - _BAR_HEIGHT / 2, (start + length) / ms, y + _BAR_HEIGHT / 2))
        self.bars.set_facecolor([COLORS[kind] for *_, kind in work])
        arrivals = np.array([s.request.arrival_s for s in schedule.served.values()]) / ms
        self.arrivals.set_data(arrivals, np.arange(len(self.names)) - _BAR_HEIGHT / 2 - 0.08)
        self.ax.set_xlim(0, (xmax_s if xmax_s is not None else schedule.makespan_s * 1.02) / ms)
        gap = schedule.max_itl_s
        self.ax.set_title(title or f"{schedule.policy}: all done at {schedule.makespan_s / ms:.0f} ms, "
                                   + ("no gaps" if np.isnan(gap) else f"longest gap {gap / ms:.0f} ms"))
        return True


def gantt(schedule: Schedule, xmax_s: float | None = None, title: str | None = None,
          figure_caption: str | None = None, width: float = 7.5) -> Figure:
    """Gantt chart of ``schedule``: a row per request, a bar per iteration it took part in (ms axis).

    Prefill pieces are blue, decodes green, arrivals are triangles; each bar spans the whole
    iteration it ran in. ``xmax_s`` fixes the time axis so that several charts share one scale.
    """
    names = list(schedule.served)
    fig, ax = new_figure(width=width, height=0.55 * len(names) + 1.9)
    _margins(fig, 0.75 if figure_caption else 0.45, 1.0)
    _Gantt(ax, names).set(schedule, xmax_s, title)
    if figure_caption:
        caption(fig, figure_caption)
    return fig


def _example(policy: str, max_running: int, token_budget: int, chunk_tokens: int) -> Schedule:
    """Section 8.2.2's four requests under ``policy``; the chunk is kept below the budget minus the running decodes,
    so that under the whole-piece rule a full piece always fits beside them (otherwise a long prompt would wait for
    all decodes)."""
    chunk = max(1, min(chunk_tokens, token_budget - max(1, max_running)))
    return run_example(policy, max_running=max(1, max_running), token_budget=max(token_budget, max_running),
                       chunk_tokens=chunk)


def draw_example(policy: str = "continuous", max_running: int = 2, token_budget: int = 4096,
                 chunk_tokens: int = 2048, xmax_s: float = 1.3) -> Figure:
    """Widget callback: section 8.2.2's four requests under ``policy`` and the given limits."""
    s = _example(policy, max_running, token_budget, chunk_tokens)
    return gantt(s, xmax_s=max(xmax_s, s.makespan_s * 1.02))


def update_example(fig: Figure, policy: str = "continuous", max_running: int = 2, token_budget: int = 4096,
                   chunk_tokens: int = 2048, xmax_s: float = 1.3) -> bool:
    """Redraw a ``draw_example`` figure in place (the explorer's path)."""
    s = _example(policy, max_running, token_budget, chunk_tokens)
    return _Gantt.redraw(fig, s, max(xmax_s, s.makespan_s * 1.02))


# ---- causal pairs (Figures 8-8, 8-9) -------------------------------------------------------
_GRID_CMAP = ListedColormap(["white", COLORS["prefill"], COLORS["decode"]])


def pair_grid_figure(new_tokens: int, cached_tokens: int = 0, figure_caption: str | None = None) -> Figure:
    """Query x key grid of one chunk: history pairs blue, in-chunk causal pairs green, future keys white."""
    grid = chunking.pair_grid(new_tokens, cached_tokens)
    c, n = grid.shape
    cell = min(0.35, 6.5 / n)
    fig, ax = new_figure(width=max(3.6, cell * n + 1.6), height=max(2.0, cell * c + 1.6))
    _margins(fig, 0.75 if figure_caption else 0.45, 0.55)
    ax.pcolormesh(np.arange(n + 1), np.arange(c + 1), grid, cmap=_GRID_CMAP, vmin=0, vmax=2,
                  edgecolors="#999999", linewidth=0.5)
    ax.set_ylim(c, 0)
    ax.set_aspect("equal")
    ax.grid(False)
    if n <= 40:
        ax.set_xticks(np.arange(n) + 0.5, [str(i + 1) for i in range(n)], fontsize=8)
        ax.set_yticks(np.arange(c) + 0.5, [str(cached_tokens + i + 1) for i in range(c)], fontsize=8)
    ax.set_xlabel("key position")
    ax.set_ylabel("query (new token)")
    hist, inner = int((grid == chunking.HISTORY).sum()), int((grid == chunking.IN_CHUNK).sum())
    ax.set_title(f"c = {c}, h = {cached_tokens}\n{hist} history + {inner} in-chunk = {hist + inner} pairs", fontsize=10)
    if figure_caption:
        caption(fig, figure_caption)
    return fig


def chunk_time_figure(chunk_tokens: int = 512, history_tokens: int = 7680, cost: IterationCost = FITTED_COST,
                      max_history: int = 16384) -> Figure:
    """Iteration time of one chunk against its history under a linear ``cost``: fixed, per-token and pair parts."""
    width = 8.5
    fig, (ax, bx) = new_figure(1, 2, width=width, height=3.2)
    _ChunkTime(ax, bx, min_font_pt(width)).set(chunk_tokens, history_tokens, cost, max_history)
    return fig


class _ChunkTime(InPlace):
    """``chunk_time_figure``'s artists, built once and redrawn in place by ``set``."""

    PARTS = {"fixed": COLORS["weights"], "per token": COLORS["accent"], "pairs c*h": COLORS["prefill"],
             "pairs c(c+1)/2": COLORS["decode"]}

    def __init__(self, ax, bx, small: float) -> None:
        self.ax, self.bx, self.small = ax, bx, small  # small: the smallest text legible on the page
        self.total, = ax.plot([], [], color=COLORS["prefill"], label="fitted cost of the chunk's iteration")
        self.flat = ax.axhline(0.0, color=COLORS["weights"], ls="--", lw=1, label="without attention pairs")
        self.here, = ax.plot([], [], "o", color=COLORS["highlight"])
        self.here_text = ax.annotate("", (0, 0), textcoords="offset points", xytext=(6, -12), fontsize=small)
        ax.set_xlabel("history h (tokens already cached)")
        ax.set_ylabel("iteration time (ms)")
        few_ticks(ax, x=4, y=4)
        n = len(self.PARTS)
        self.bars = bx.barh(np.zeros(n), np.zeros(n), height=0.8, left=np.zeros(n), color=list(self.PARTS.values()))
        bx.set_yticks([])
        bx.set_ylim(-0.6, 2.2)
        bx.set_xlabel("ms")
        few_ticks(bx, x=4, y=None)
        for a in (ax, bx):
            a.tick_params(labelsize=small)
        self.keep_on(ax.figure)

    def set(self, chunk_tokens: int, history_tokens: int, cost: IterationCost, max_history: int) -> None:
        c = chunk_tokens
        hs = np.linspace(0, max(max_history, history_tokens), 65).astype(int)
        fixed, per_token, per_pair = cost.fixed_s, cost.per_token_s, cost.per_pair_s
        total = np.array([cost.of(c, int(h)) for h in hs]) / ms
        here = cost.of(c, history_tokens) / ms
        self.total.set_data(hs, total)
        self.flat.set_ydata([(fixed + per_token * c) / ms] * 2)
        self.here.set_data([history_tokens], [here])
        self.here_text.set_text(f"{here:.1f} ms")
        self.here_text.xy = (history_tokens, here)
        self.ax.relim()
        self.ax.autoscale_view()
        self.ax.set_ylim(0, total.max() * 1.35)
        self.ax.set_title(f"a chunk of {c} tokens against its history")
        refresh_legend(self.ax, loc="upper left", fontsize=self.small)
        values = np.array([fixed / ms, per_token * c / ms, c * history_tokens * per_pair / ms,
                           c * (c + 1) / 2 * per_pair / ms])
        for bar, label, value, left in zip(self.bars, self.PARTS, values, np.cumsum(values) - values):
            bar.set(x=left, width=value, label=f"{label}: {value:.1f} ms")
        self.bx.relim()
        self.bx.autoscale_view()
        self.bx.set_title(f"one chunk: c = {c}, h = {history_tokens}")
        refresh_legend(self.bx, loc="upper left", fontsize=self.small)


def draw_chunk(chunk_tokens: int = 512, history_tokens: int = 7680) -> Figure:
    """Widget callback: time of a chunk of ``chunk_tokens`` after ``history_tokens`` under the fitted cost."""
    return chunk_time_figure(chunk_tokens, history_tokens)


def update_chunk(fig: Figure, chunk_tokens: int = 512, history_tokens: int = 7680) -> bool:
    """Redraw a ``draw_chunk`` figure in place (the explorer's slider path)."""
    return _ChunkTime.redraw(fig, chunk_tokens, history_tokens, FITTED_COST, 16384)


# ---- token budget and shape buckets (section 8.2.4) ----------------------------------------
def budget_sweep_figure(ours: pd.DataFrame, published: pd.DataFrame | None = None) -> Figure:
    """Late arrivals' mean queueing and the longest gap against the token budget (ours; the chapter's as points)."""
    fig, (ax, bx) = new_figure(1, 2, width=8.5, height=3.2)
    budgets = ours.index.to_numpy()
    ax.plot(budgets, ours["late_queue_mean_s"] / ms, "o-", color=COLORS["queue"], mec="black",
            label="our simulator")
    bx.plot(budgets, ours["max_itl_s"] / ms, "o-", color=COLORS["decode"], label="our simulator")
    if published is not None:
        ax.plot(published.index, published["late_queue_s"] / ms, "s", color=COLORS["deadline"],
                label="chapter (measured)")
        bx.plot(published.index, published["max_itl_s"] / ms, "s", color=COLORS["deadline"],
                label="chapter (measured)")
    for a, label in ((ax, "late arrivals' queueing (ms)"), (bx, "longest output gap (ms)")):
        a.set_xscale("log", base=2)
        a.minorticks_off()
        a.set_xticks(budgets, [str(b) for b in budgets])
        a.set_xlabel("token budget per iteration")
        a.set_ylabel(label)
        a.set_ylim(0, None)
        a.legend()
    return legible(fig)


def padding_figure(buckets: Iterable[int], max_rows: int | None = None) -> Figure:
    """Rows computed against rows needed for a set of captured sizes; the gap is padding."""
    fig, ax = new_figure(width=7, height=3.2)
    _Padding(ax).set(buckets, max_rows)
    return fig


class _Padding(InPlace):
    """``padding_figure``'s artists, built once and redrawn in place by ``set``."""

    def __init__(self, ax) -> None:
        self.ax = ax
        self.computed, = ax.step([1, 2], [1, 2], where="mid", color=COLORS["prefill"], label="rows computed")
        self.needed, = ax.plot([1, 2], [1, 2], color="black", lw=0.8, ls=":", label="rows needed")
        self.padding = ax.fill_between([1, 2], [1, 2], [1, 2], step="mid", color=COLORS["unused"], label="padding")
        ax.set_xlabel("rows in the iteration")
        ax.set_ylabel("rows computed")
        ax.legend(loc="upper left")
        few_ticks(ax, x=5, y=4, integer=True)
        self.keep_on(ax.figure)

    def set(self, buckets: Iterable[int], max_rows: int | None = None) -> None:
        sizes = shapes.normalize(buckets)
        top = max_rows or sizes[-1] + max(4, sizes[-1] // 8)
        rows = np.arange(1, top + 1)
        padded = shapes.padded_rows_each(rows, sizes)
        waste = shapes.padding_fraction([int(r) for r in rows[rows <= sizes[-1]]], sizes)
        self.computed.set_data(rows, padded)
        self.needed.set_data(rows, rows)
        self.padding.set_data(rows, rows, padded)
        self.ax.relim()  # the lines span what the fill between them spans (relim leaves collections out)
        self.ax.autoscale_view()
        self.ax.set_title(f"{len(sizes)} captured sizes; padding {100 * waste:.1f} % of rows up to {sizes[-1]}")


def draw_padding(step: int = 16, largest: int = 64) -> Figure:
    """Widget callback: captured sizes 1, 2, 4 and every multiple of ``step`` up to ``largest``."""
    return padding_figure(*_padding_sizes(step, largest))


def update_padding(fig: Figure, step: int = 16, largest: int = 64) -> bool:
    """Redraw a ``draw_padding`` figure in place (the explorer's slider path)."""
    return _Padding.redraw(fig, *_padding_sizes(step, largest))


def _padding_sizes(step: int, largest: int) -> tuple[list[int], int]:
    return shapes.multiples(step, max(largest, step)), max(largest, step) + 8


def shared_xmax(schedules: Sequence[Schedule]) -> float:
    """A common time-axis end (seconds) for several Gantt charts."""
    return 1.02 * max(s.makespan_s for s in schedules)


@lru_cache(maxsize=64)
def _largest_pieces(cost: IterationCost, gap_limit_s: float, decode_contexts: tuple[int, ...],
                    max_history: int) -> tuple[np.ndarray, np.ndarray]:
    """History grid (tokens) and the largest piece within the limit at each point (read-only: cached per knobs)."""
    hs = np.linspace(0, max_history, 49).astype(int)
    tokens = np.array([chunking.max_chunk_tokens(cost, gap_limit_s, int(h), decode_contexts) for h in hs])
    hs.flags.writeable = tokens.flags.writeable = False
    return hs, tokens


class _BudgetRule(InPlace):
    """``budget_rule_figure``'s curve and marked history, redrawn in place by ``set``."""

    def __init__(self, ax) -> None:
        self.ax = ax
        self.curve, = ax.plot([], [], color=COLORS["prefill"])
        self.mark, = ax.plot([], [], "o", color=COLORS["deadline"])
        self.note = ax.annotate("", (0, 0), textcoords="offset points", xytext=(6, 6), fontsize=8)
        ax.set_xlabel("history of the prompt being prefilled (tokens)")
        ax.set_ylabel("new tokens per iteration")
        few_ticks(ax, x=4, y=4, integer=True)
        self.keep_on(ax.figure)

    def set(self, gap_limit_s: float, history_tokens: int, decodes: int, decode_context: int = 2048,
            cost: IterationCost = FITTED_COST, max_history: int = 32768) -> bool:
        contexts = (decode_context,) * decodes
        grid, pieces = _largest_pieces(cost, gap_limit_s, contexts, max(max_history, history_tokens))
        here = chunking.max_chunk_tokens(cost, gap_limit_s, history_tokens, contexts)
        at = int(np.searchsorted(grid, history_tokens))
        if at < grid.size and grid[at] == history_tokens:  # the curve runs through the marked point either way
            hs, tokens = grid, pieces
        else:
            hs, tokens = np.insert(grid, at, history_tokens), np.insert(pieces, at, here)
        self.curve.set_data(hs, tokens)
        self.curve.set_label(f"largest piece within {gap_limit_s / ms:.0f} ms")
        self.mark.set_data([history_tokens], [here])
        self.note.xy = (history_tokens, here)
        self.note.set_text(f"{here:,} tokens")
        self.ax.set_ylim(0, max(tokens.max(), 1) * 1.15)
        self.ax.set_title(f"iteration limit {gap_limit_s / ms:.0f} ms with {decodes} decodes at {decode_context:,} "
                          "tokens")
        rescale(self.ax)
        refresh_legend(self.ax, loc="upper right")
        return True


def budget_rule_figure(gap_limit_s: float = 0.050, history_tokens: int = 4096, decodes: int = 2,
                       decode_context: int = 2048, cost: IterationCost = FITTED_COST,
                       max_history: int = 32768) -> Figure:
    """The two-step rule: a gap limit bounds the iteration; the history then bounds the prompt piece (tokens)."""
    fig, ax = new_figure(width=7, height=3.2)
    _BudgetRule(ax).set(gap_limit_s, history_tokens, decodes, decode_context, cost, max_history)
    return fig


def draw_budget_rule(gap_limit_ms: float = 50.0, history_tokens: int = 4096, decodes: int = 2) -> Figure:
    """Widget callback: ``budget_rule_figure`` with the gap limit in milliseconds."""
    return budget_rule_figure(gap_limit_ms * ms, int(history_tokens), int(decodes))


def update_budget_rule(fig: Figure, gap_limit_ms: float = 50.0, history_tokens: int = 4096, decodes: int = 2) -> bool:
    """Redraw a ``draw_budget_rule`` figure in place (the explorer's path)."""
    return _BudgetRule.redraw(fig, gap_limit_ms * ms, int(history_tokens), int(decodes))


# ---- the section's explorers (notebooks display them; tests sweep every ``*_explorer``) ----
def example_explorer() -> "Explorer":
    """Section 8.2.2's four requests with controls for policy, max running, token budget and chunk size."""
    from .. import widgets as w

    return w.explore(
        draw_example, update_example,
        grid=dict(token_budget=(512, 2048, 4096, 16384), chunk_tokens=(128, 256, 512, 1024, 2048, 4096, 8192)),
        policy=w.choice("policy", ["fixed", "continuous", "chunked"], "chunked"),
        max_running=w.int_slider("max running", 1, 4, 2, 1, "requests"),
        token_budget=w.int_slider("token budget", 512, 16384, 4096, 512, "tokens"),
        chunk_tokens=w.int_slider("chunk size", 128, 8192, 2048, 128, "tokens"),
    )


def chunk_explorer() -> "Explorer":
    """Time of one prompt chunk against its history, with sliders for chunk size and history."""
    from .. import widgets as w

    return w.explore(
        draw_chunk, update_chunk,
        grid=dict(chunk_tokens=(64, 128, 256, 512, 1024, 2048, 4096),
                  history_tokens=(0, 1024, 2048, 4096, 7680, 8192, 16384, 32768)),
        chunk_tokens=w.int_slider("chunk size", 64, 4096, 512, 64, "tokens"),
        history_tokens=w.int_slider("history", 0, 32768, 7680, 256, "tokens"),
    )


def padding_explorer() -> "Explorer":
    """Padding to captured CUDA-graph sizes: 1, 2, 4 and every multiple of a step up to a largest size."""
    from .. import widgets as w

    return w.explore(
        draw_padding, update_padding,
        grid=dict(step=(1, 2, 4, 8, 16, 32, 64), largest=(8, 16, 32, 64, 128, 256, 512)),
        step=w.int_slider("captured every", 1, 64, 16, 1, "rows"),
        largest=w.int_slider("largest captured", 8, 512, 64, 8, "rows"),
    )


def budget_rule_explorer() -> "Explorer":
    """The two-step rule: gap limit -> iteration time -> new tokens, against the prompt's history."""
    from .. import widgets as w

    return w.explore(
        draw_budget_rule, update_budget_rule,
        grid=dict(gap_limit_ms=(30, 50, 75, 100, 150, 200, 300, 400),
                  history_tokens=(0, 1024, 2048, 4096, 8192, 16384, 32768), decodes=(0, 1, 2, 4, 8, 16, 32, 64)),
        gap_limit_ms=w.float_slider("gap limit", 30, 400, 50, 5, "ms"),
        history_tokens=w.int_slider("history", 0, 32768, 4096, 256, "tokens"),
        decodes=w.int_slider("running decodes", 0, 64, 2, 1, "requests"),
    )
