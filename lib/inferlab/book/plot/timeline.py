"""Drawings of section 8.1: iteration slots (Figure 8-1), a request's timeline (Figure 8-2),
KV capacity against a budget, a block pool filling under two admission rules, the batch sweep, and a
decode step against its read floor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from inferlab._validate import one_of
from inferlab.timeline import RequestTimes

if TYPE_CHECKING:
    from inferlab.kvcache.capacity import ReservationRun

    from ..widgets import Explorer
from . import (COLORS, REQUEST_COLORS, InPlace, add_boxes, box_corners, caption, deadline_line, new_figure,
               refresh_legend, rescale)
from .legibility import min_font_pt
from .ticks import few_ticks


def iteration_slots(iterations: Sequence[Sequence[str]], title: str = "") -> Figure:
    """Grid of scheduling iterations (columns) by execution slots (rows), each cell naming its request."""
    n_slots = max(len(it) for it in iterations)
    names = sorted({r for it in iterations for r in it})
    palette = dict(zip(names, REQUEST_COLORS * (len(names) // len(REQUEST_COLORS) + 1)))
    fig, ax = new_figure(width=5.5, height=0.9 + 0.55 * n_slots)
    for i, it in enumerate(iterations):
        for slot, name in enumerate(it):
            ax.add_patch(_box(i, n_slots - 1 - slot, palette[name]))
            ax.text(i + 0.5, n_slots - 1 - slot + 0.5, name, ha="center", va="center", color="white",
                    fontsize=12, fontweight="bold")
    ax.set_xlim(0, len(iterations))
    ax.set_ylim(0, n_slots)
    ax.set_xticks(np.arange(len(iterations)) + 0.5, [f"iteration {i + 1}" for i in range(len(iterations))])
    ax.set_yticks(np.arange(n_slots) + 0.5, [f"slot {n_slots - s}" for s in range(n_slots)])
    ax.grid(False)
    if title:
        caption(fig, title)
    return fig


def _box(x: float, y: float, color: str):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((x + 0.06, y + 0.08), 0.88, 0.84, boxstyle="round,pad=0.0,rounding_size=0.08",
                          fc=color, ec="white")


def request_timeline(
    r: RequestTimes, queue_s: float, deadline_s: float | None = None, title: str = ""
) -> Figure:
    """One request on a true time axis: queue (grey), prefill (blue), decode gaps (green), first/last token dots."""
    width = 7.5
    fig, ax = new_figure(width=width, height=2.2)
    _RequestTimeline(ax, min_font_pt(width)).set(r, queue_s, deadline_s, title)
    return fig


class _RequestTimeline(InPlace):
    """``request_timeline``'s bars, stalled gaps, token dots, notes and deadline, redrawn in place by ``set``."""

    def __init__(self, ax, small: float) -> None:
        self.ax, self.small = ax, small  # small: the smallest text legible on the page
        self.bars = ax.barh(np.zeros(3), [1, 1, 1], height=0.5, color=[COLORS["queue"], COLORS["prefill"],
                                                                        COLORS["decode"]], label=["queue", "prefill", "decode"])
        self.stalls = ax.broken_barh([], (-0.25, 0.5), color=COLORS["deadline"], label="_stalled gap")
        self.dots, = ax.plot([], [], "o", color="black", ms=5, zorder=5)
        self.first = ax.annotate("", (0, -0.25), (0, -0.75), ha="left", fontsize=9)
        self.last = ax.annotate("", (0, -0.25), (0, -0.65), ha="right", fontsize=9)
        self.deadline = deadline_line(ax, 0)
        ax.set_yticks([])
        ax.set_ylim(-1, 1.3)
        ax.set_xlabel("time since arrival (s)")
        ax.grid(axis="y", visible=False)
        few_ticks(ax, x=6, y=None)
        self.keep_on(ax.figure)

    def set(self, r: RequestTimes, queue_s: float, deadline_s: float | None = None, title: str = "") -> None:
        ax, t0 = self.ax, r.arrival_s
        first, last = r.token_times_s[0], r.token_times_s[-1]
        gaps = r.itls_s
        for bar, left, width in zip(self.bars, (t0, t0 + queue_s, first), (queue_s, first - t0 - queue_s, last - first)):
            bar.set_x(left)
            bar.set_width(width)
            bar.sticky_edges.x[:] = [left]  # as barh marks a new bar's base
        self.bars[2].set_label(f"decode ({len(gaps)} gaps)")
        stalled = np.flatnonzero(gaps > 1.5 * np.median(gaps)) if gaps.size else np.array([], int)
        starts = np.asarray(r.token_times_s)[stalled]
        self.stalls.set_verts(box_corners(starts, -0.25, starts + gaps[stalled], 0.25))  # as broken_barh: x0 + width
        self.stalls.set_label(f"stalled gap ({gaps.max() * 1e3:.0f} ms)" if stalled.size else "_stalled gap")
        self.dots.set_data([first, last], [0, 0])
        for note, at, y, text in ((self.first, first, -0.75, f"first token {first - t0:.3f} s"),
                                  (self.last, last, -0.65, f"last token {last - t0:.2f} s")):
            note.xy = (at, -0.25)
            note.set_position((at, y))
            note.set_text(text)
        self.deadline.set_visible(deadline_s is not None)
        if deadline_s is not None:
            self.deadline.set_xdata([t0 + deadline_s] * 2)
        self.deadline.set_label(f"deadline {deadline_s:g} s" if deadline_s is not None else "_deadline")
        rescale(ax, self.deadline)
        refresh_legend(ax, loc="upper left", ncol=3, fontsize=self.small)
        if title:
            caption(ax.figure, title)


class _KVCapacity(InPlace):
    """``kv_capacity``'s totals (bars, or lines past 80 counts), budget and fit mark, redrawn in place by ``set``."""

    FIT, MISS = to_rgba(COLORS["kv"], 0.8), to_rgba(COLORS["unused"])

    def __init__(self, ax, as_bars: bool) -> None:
        self.ax, self.as_bars = ax, as_bars
        if as_bars:  # one collection of bars, not a patch per bar; the legend shows a patch per colour
            self.boxes = add_boxes(ax, [], 0.0, [], [], facecolors=[], linewidths=0)
            self.keys = [Patch(color=self.FIT), Patch(color=self.MISS, label="does not fit")]
        else:
            self.fit, = ax.plot([], [], color=COLORS["kv"], lw=2)
            self.miss, = ax.plot([], [], color=COLORS["unused"], lw=2, label="does not fit")
            self.keys = []
        self.budget = deadline_line(ax, 0.0, "", vertical=False)
        self.fits = ax.axvline(0, color="black", lw=0.8, ls=":")
        self.note = ax.text(0, 0, "", ha="left", va="bottom")
        ax.set_xlabel("concurrent requests")
        few_ticks(ax, x=5, y=5, integer=True)
        self.keep_on(ax.figure)

    def set(self, counts: np.ndarray, kv_bytes: np.ndarray, budget_bytes: float, fits: int, label: str,
            unit_bytes: float, unit: str, title: str = "") -> bool:
        if (len(counts) <= 80) != self.as_bars:
            return False  # bars and lines are figures of their own
        y, ok, budget = kv_bytes / unit_bytes, kv_bytes <= budget_bytes, budget_bytes / unit_bytes
        if self.as_bars:
            self.boxes.set_verts(box_corners(counts - 0.425, 0.0, counts + 0.425, y))
            self.boxes.set_facecolor(np.where(ok[:, None], self.FIT, self.MISS))
            self.keys[0].set_label(f"{label}: fits")
        else:
            self.fit.set_data(counts[ok], y[ok])
            self.fit.set_label(f"{label}: fits")
            self.miss.set_data(counts[~ok], y[~ok])
        self.budget.set_ydata([budget, budget])
        self.budget.set_label(f"KV budget {budget:,.0f} {unit}")
        self.fits.set_xdata([fits, fits])
        self.note.set_position((fits, budget * 1.03))
        self.note.set_text(f" {fits:,} fit")
        self.ax.set_ylabel(f"KV allocated ({unit})")
        self.ax.set_xlim(0, counts.max() + (0.5 if self.as_bars else 0))  # the last bar whole
        self.ax.set_ylim(0, max(y.max(), budget) * 1.15)
        refresh_legend(self.ax, self.ax.get_legend_handles_labels()[0] + self.keys, loc="upper left")
        if title:
            caption(self.ax.figure, title)
        return True


def kv_capacity(counts: np.ndarray, kv_bytes: np.ndarray, budget_bytes: float, fits: int,
                label: str, unit_bytes: float, unit: str, title: str = "") -> Figure:
    """KV bytes of n concurrent requests against the KV budget, with the largest n that fits marked."""
    fig, ax = new_figure(width=6.5, height=3.0)
    _KVCapacity(ax, len(counts) <= 80).set(counts, kv_bytes, budget_bytes, fits, label, unit_bytes, unit, title)
    return fig


def batch_sweep(sweep: pd.DataFrame, batch: int, step_s: float, title: str = "") -> Figure:
    """Published batch sweep (throughput; decode step and client ITL) with the chosen batch's b / T_step marked."""
    width = 8.0
    fig, (tput, step) = new_figure(1, 2, width=width, height=3.0)
    _BatchSweep(tput, step, sweep, min_font_pt(width)).set(batch, step_s, title)
    return fig


class _BatchSweep(InPlace):
    """``batch_sweep``'s artists: the published sweep drawn once, the marked batch redrawn in place by ``set``."""

    def __init__(self, tput, step, sweep: pd.DataFrame, small: float) -> None:
        self.tput, self.step, self.small = tput, step, small  # small: the smallest text legible on the page
        for ax, col, ylabel, scale in ((tput, "throughput_tok_s", "output throughput (tok/s)", 1.0),
                                       (step, "decode_step_s", "decode step / ITL (ms)", 1e3)):
            x, y = sweep["batch"].to_numpy(), sweep[col].to_numpy() * scale
            have = ~np.isnan(y)  # a column the experiment did not print for every batch: points, no line
            ax.plot(x[have], y[have], "o-" if have.all() else "o", color=COLORS["prefill"],
                    label="published (exp. 8-1)")
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
            ax.set_xticks([1, 4, 16, 64], ["1", "4", "16", "64"])
            ax.set_xlabel("batch")
            ax.set_ylabel(ylabel)
            ax.tick_params(labelsize=small)
            few_ticks(ax, x=None, y=5)
        itl = sweep["mean_itl_s"].to_numpy() * 1e3
        step.plot(sweep["batch"].to_numpy()[~np.isnan(itl)], itl[~np.isnan(itl)], "s", color=COLORS["kv"],
                  label="client mean ITL")
        self.tput_mark, = tput.plot([], [], "D", color=COLORS["deadline"])
        self.step_mark, = step.plot([], [], "D", color=COLORS["deadline"])
        self.keep_on(tput.figure)

    def set(self, batch: int, step_s: float, title: str = "") -> None:
        self.tput_mark.set(data=([batch], [batch / step_s]), label=f"b / T_step at b = {batch}")
        self.step_mark.set_data([batch], [step_s * 1e3])
        for ax in (self.tput, self.step):
            ax.relim()
            ax.autoscale_view()
        handles = self.tput.get_legend_handles_labels()[0] + self.step.get_legend_handles_labels()[0][1:]
        refresh_legend(self.tput, handles, loc="upper left", fontsize=self.small)
        if title:
            caption(self.tput.figure, title)


def step_breakdown(table: pd.DataFrame, title: str = "") -> Figure:
    """Measured decode steps split into the read floor D/beta (blue) and the rest (grey), one bar per batch.

    ``table`` is ``example.decode_step_breakdown()``; a black tick marks the compute floor b*F/P, and
    the share of the step the read floor explains (MBU) is written above each bar.
    """
    fig, ax = new_figure(width=6.5, height=3.0)
    x = np.arange(len(table))
    read, rest = table["read floor (ms)"].to_numpy(), table["rest (ms)"].to_numpy()
    ax.bar(x, read, 0.6, color=COLORS["prefill"], label="reads at peak bandwidth, D/β")
    ax.bar(x, rest, 0.6, bottom=read, color=COLORS["queue"], label="rest of the measured step")
    ax.hlines(table["compute floor (ms)"], x - 0.3, x + 0.3, color="black", lw=2, label="compute at peak, bF/P")
    for xi, r, total in zip(x, read, table["measured step (ms)"]):
        ax.text(xi, total + 0.4, f"{r / total:.0%} reads", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(x, [f"b = {b}" for b in table.index])
    ax.set_ylabel("decode step (ms)")
    ax.set_ylim(0, table["measured step (ms)"].max() * 1.3)
    ax.legend(loc="upper left", ncol=2, fontsize=8)
    ax.grid(axis="x", visible=False)
    if title:
        caption(fig, title)
    return fig


def pool_fill(runs: Sequence["ReservationRun"], title: str = "") -> Figure:
    """KV blocks in use as alike requests decode together, one line per admission rule (section 8.1.2).

    ``runs`` come from ``kvcache.capacity.admit_and_decode`` on one pool. The dashed red line is the pool;
    a dotted line marks what whole-answer admission set aside; a run that found the pool empty ends in a
    cross at the token where its requests stopped.
    """
    if not runs:
        raise ValueError("runs must hold at least one ReservationRun")
    pool = runs[0].num_blocks
    if any(r.num_blocks != pool for r in runs):
        raise ValueError("runs must share one pool (the same num_blocks)")
    width = 7.0
    fig, ax = new_figure(width=width, height=3.0)
    small = min_font_pt(width)
    colors = {"answer": COLORS["prefill"], "prompt": COLORS["kv"]}
    names = {"answer": "reserve the whole answer", "prompt": "reserve the prompt only"}
    for run in runs:
        steps = np.arange(len(run.used_blocks))
        color = colors[run.reserve]
        ax.plot(steps, run.used_blocks, color=color, lw=2, drawstyle="steps-post",
                label=f"{names[run.reserve]}: {run.admitted} requests")
        if run.reserve == "answer" and run.reserved_blocks > run.used_blocks[0]:
            ax.axhline(run.reserved_blocks, color=color, ls=":", lw=1.2,
                       label=f"set aside at admission: {run.reserved_blocks:,} blocks")
        if run.ran_dry_at is not None:
            ax.plot([steps[-1]], [run.used_blocks[-1]], "X", color=COLORS["deadline"], ms=9, zorder=5)
            ax.text(steps[-1] + 6, run.used_blocks[-1], f"pool empty after {run.ran_dry_at} tokens: "
                    f"{run.stuck} of {run.admitted} requests stuck", fontsize=small, va="top", ha="left")
    deadline_line(ax, pool, f"pool: {pool:,} blocks", vertical=False)
    lowest = min(min(r.used_blocks) for r in runs)
    ax.set_ylim(max(0.0, lowest - 0.2 * (pool - lowest)) if lowest < pool else 0.0, pool + 0.08 * (pool - lowest + 1))
    ax.set_xlim(0, max(1, max(len(r.used_blocks) for r in runs) - 1))
    ax.set_xlabel("output tokens each request has received")
    ax.set_ylabel("KV blocks in use")
    few_ticks(ax, x=6, y=4, integer=True)
    ax.legend(loc="lower right", fontsize=small)
    if title:
        caption(fig, title)
    return fig


# ---- draw functions for the widgets (scalar knobs in, Figure out) -------------------------

def draw_single_request(queue_s: float, prefill_ms: float, itl_ms: float, output_tokens: int,
                        inserted_prefills: int = 0, deadline_s: float = 7.0) -> Figure:
    """Figure 8-2 for any knobs: ``inserted_prefills`` other prefills of ``prefill_ms`` each stall evenly spaced gaps."""
    return request_timeline(*_single_request(queue_s, prefill_ms, itl_ms, output_tokens, inserted_prefills, deadline_s))


def update_single_request(fig: Figure, queue_s: float, prefill_ms: float, itl_ms: float, output_tokens: int,
                          inserted_prefills: int = 0, deadline_s: float = 7.0) -> bool:
    """Redraw a ``draw_single_request`` figure in place (the explorer's path)."""
    return _RequestTimeline.redraw(fig, *_single_request(queue_s, prefill_ms, itl_ms, output_tokens,
                                                         inserted_prefills, deadline_s))


def _single_request(queue_s: float, prefill_ms: float, itl_ms: float, output_tokens: int, inserted_prefills: int,
                    deadline_s: float) -> tuple[RequestTimes, float, float, str]:
    """The request ``draw_single_request`` shows, its queueing delay, deadline and title."""
    from inferlab.timeline import single_request

    gaps = output_tokens - 1
    stalls = {}
    if inserted_prefills and gaps:
        for j in np.linspace(1, gaps, inserted_prefills + 2)[1:-1].round().astype(int):
            stalls[int(j)] = stalls.get(int(j), 0.0) + prefill_ms / 1e3
    r = single_request(queue_s, prefill_ms / 1e3, itl_ms / 1e3, output_tokens, stalls_s=stalls)
    verdict = "meets" if r.meets(deadline_s) else "misses"
    return r, queue_s, deadline_s, (f"TTFT {r.ttft_s:.3f} s, request time {r.request_time_s:.2f} s: {verdict} "
                                    f"the {deadline_s:g} s deadline")


def draw_capacity(model: str, kv_budget_gib: float, prompt_tokens: int, output_tokens: int,
                  block_size: int = 16, dtype_bytes: float = 2, shared_prefix_tokens: int = 0) -> Figure:
    """KV of 0..n alike requests against a budget, for any model and request shape."""
    return kv_capacity(*_capacity(model, kv_budget_gib, prompt_tokens, output_tokens, block_size, dtype_bytes,
                                  shared_prefix_tokens))


def update_capacity(fig: Figure, model: str, kv_budget_gib: float, prompt_tokens: int, output_tokens: int,
                    block_size: int = 16, dtype_bytes: float = 2, shared_prefix_tokens: int = 0) -> bool:
    """Redraw a ``draw_capacity`` figure in place (the explorer's path)."""
    return _KVCapacity.redraw(fig, *_capacity(model, kv_budget_gib, prompt_tokens, output_tokens, block_size,
                                              dtype_bytes, shared_prefix_tokens))


def _capacity(model: str, kv_budget_gib: float, prompt_tokens: int, output_tokens: int, block_size: int,
              dtype_bytes: float, shared_prefix_tokens: int) -> tuple:
    """``kv_capacity``'s arguments for ``draw_capacity``."""
    from inferlab.memory import batch_kv_bytes, max_concurrent_requests, request_kv_bytes
    from inferlab.models import MODELS
    from inferlab.units import GiB, MiB

    spec = MODELS[one_of("model", model, MODELS)]
    budget = kv_budget_gib * GiB
    prefix = min(shared_prefix_tokens, prompt_tokens - 1)  # the last prompt token is always computed
    fits = max_concurrent_requests(budget, spec, prompt_tokens, output_tokens, block_size, prefix, dtype_bytes)
    top = max(int(fits * 1.4) + 2, 8)
    counts = np.unique(np.linspace(0, top, min(top + 1, 400)).round().astype(int))
    kv = np.array([batch_kv_bytes(int(n), spec, prompt_tokens, output_tokens, block_size, prefix, dtype_bytes)
                   for n in counts])
    per = request_kv_bytes(spec, prompt_tokens, output_tokens, block_size, dtype_bytes)
    return (counts, kv, budget, fits, f"{model}: {per / MiB:,.1f} MiB per request", MiB, "MiB",
            f"{fits:,} requests of {prompt_tokens:,} in / {output_tokens:,} out fit in {kv_budget_gib:g} GiB")


def draw_batch(batch: int, context_tokens: int = 2048) -> Figure:
    """The published sweep with b / T_step at ``batch``, T_step interpolated from the measured steps by bytes read."""
    from inferlab.datasets import published

    return batch_sweep(published("batch_sweep_8_1"), batch, *_batch_step(batch, context_tokens))


def update_batch(fig: Figure, batch: int, context_tokens: int = 2048) -> bool:
    """Redraw a ``draw_batch`` figure in place for a new batch (the explorer's slider path)."""
    return _BatchSweep.redraw(fig, batch, *_batch_step(batch, context_tokens))


def _batch_step(batch: int, context_tokens: int) -> tuple[float, str]:
    """T_step at ``batch`` (interpolated from the measured steps by bytes read) and the figure's caption."""
    from inferlab.calibration import measured_decode_step
    from inferlab.example import MODEL as spec
    from inferlab.roofline import step_read_bytes

    read = step_read_bytes(batch, context_tokens, spec.matrix_weight_bytes(), spec.kv_bytes_per_token())
    step = measured_decode_step(read)
    return step, (f"Batch {batch}: step about {step * 1e3:.2f} ms, {batch / step:,.0f} tok/s in total, "
                  f"{1 / step:.0f} tok/s per request")


# ---- the section's explorers (notebooks display them; tests sweep every ``*_explorer``) ----

def request_explorer() -> "Explorer":
    """Figure 8-2 with sliders for queueing, prefill, ITL, output length, inserted prefills and deadline."""
    from .. import widgets as w

    return w.explore(
        draw_single_request, update_single_request,
        grid=dict(queue_s=(0, 0.05, 0.1, 0.5, 2), prefill_ms=(10, 96, 1000), itl_ms=(5, 26.5, 60),
                  output_tokens=(1, 256, 1024), inserted_prefills=(0, 1, 2, 5, 20), deadline_s=(1, 7, 20)),
        queue_s=w.float_slider("queueing delay", 0.0, 2.0, 0.1, 0.05, "s"),
        prefill_ms=w.float_slider("prefill time", 10, 1000, 96, 2, "ms"),
        itl_ms=w.float_slider("inter-token latency", 5, 60, 26.5, 0.5, "ms"),
        output_tokens=w.int_slider("output tokens", 1, 1024, 256, 1),
        inserted_prefills=w.int_slider("inserted prefills", 0, 20, 0, 1),
        deadline_s=w.float_slider("deadline", 1, 20, 7, 0.5, "s"),
    )


def capacity_explorer() -> "Explorer":
    """KV capacity with controls for model, budget, request shape, block size, element size and shared prefix."""
    from inferlab.models import MODELS

    from .. import widgets as w

    return w.explore(
        draw_capacity, update_capacity,
        grid=dict(kv_budget_gib=(1, 12, 48, 80), prompt_tokens=(512, 8192, 32768), output_tokens=(1, 256, 4096),
                  shared_prefix_tokens=(0, 2048, 6144, 32768)),
        model=w.choice("model", list(MODELS), "qwen3-8b"),
        kv_budget_gib=w.float_slider("KV budget", 1, 80, 12, 1, "GiB"),
        prompt_tokens=w.int_slider("prompt", 16, 32768, 8192, 16, "tokens"),
        output_tokens=w.int_slider("output", 1, 4096, 256, 1, "tokens"),
        block_size=w.choice("block size (tokens)", [1, 8, 16, 32, 64, 128], 16),
        dtype_bytes=w.choice("bytes per element", [0.5, 1, 2, 4], 2),
        shared_prefix_tokens=w.int_slider("shared prefix", 0, 32768, 0, 16, "tokens"),
    )


def batch_explorer() -> "Explorer":
    """The published batch sweep with a batch slider."""
    from .. import widgets as w

    return w.explore(draw_batch, update_batch, grid=dict(batch=(1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)), batch=w.int_slider("batch", 1, 128, 16, 1, "requests"))
