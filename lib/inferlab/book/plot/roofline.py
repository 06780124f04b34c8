"""Drawings of section 8.2.1: bytes per output token against batch (Figure 8-3), a separate weight store (Figure 8-4), the step roofline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from inferlab import roofline as R
from inferlab._validate import one_of, positive
from inferlab.hardware import ACCELERATORS, Accelerator
from inferlab.models import MODELS, ModelSpec
from inferlab.units import GiB, ms

from . import COLORS, InPlace, caption, new_figure, refresh_legend
from .legibility import legible, min_font_pt
from .ticks import decade_ticks

if TYPE_CHECKING:
    from ..widgets import Explorer

__all__ = ["bytes_per_token_figure", "fast_store_figure", "step_time_figure", "per_token_time_figure",
           "draw_weight_reuse", "update_weight_reuse", "weight_reuse_explorer"]

#: The chapter's Figure 8-3 colours: blue for 2K, green for 8K contexts.
CONTEXT_COLORS = {2048: COLORS["prefill"], 8192: COLORS["decode"]}


def _plain_log_axes(ax) -> None:
    """Log axes without minor ticks and with plain tick labels (mathtext labels make a redraw several times slower)."""
    ax.minorticks_off()
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)


def _batches(max_batch: int) -> np.ndarray:
    return 2 ** np.arange(0, int(np.log2(max_batch)) + 1)


def bytes_per_token_figure(model: ModelSpec, contexts: Sequence[int] = (2048, 8192), max_batch: int = 256,
                           mark_batch: int | None = None, figure_caption: str | None = None) -> Figure:
    """Log-log bytes read per output token against batch: D_w/b + L*k per context, KV floors, shared weights."""
    fig, ax = new_figure(width=7, height=3.8)
    _BytesPanel(ax, model, len(contexts), max_batch).set(contexts, mark_batch)
    if figure_caption:
        caption(fig, figure_caption)
    return fig


class _BytesPanel:
    """Figure 8-3 on ``ax``: per context D_w/b + L*k against b, its KV floor L*k, b_KV and a marked batch;
    the shared weights D_w/b. Built once; ``set`` redraws it in place for new contexts and batch."""

    def __init__(self, ax, model: ModelSpec, n_contexts: int, max_batch: int, small: float = 8) -> None:
        self.ax, self.small = ax, small
        self.dw, self.k = model.matrix_weight_bytes(), model.kv_bytes_per_token()
        self.b = _batches(max_batch)
        self.contexts = []
        for _ in range(n_contexts):  # the artists of one context, in drawing order
            curve, = ax.plot([], [], "o-", ms=4)
            floor = ax.axhline(1.0, ls=":", lw=1.2)
            mark, = ax.plot([], [], "o", ms=9, mfc="none", mec=COLORS["deadline"], mew=1.5)
            mark_text = ax.annotate("", (1, 1), textcoords="offset points", xytext=(-10, -16), fontsize=small,
                                    color=COLORS["deadline"])
            knee, = ax.plot([], [], "D", ms=6, mec="black")
            knee_text = ax.annotate("", (1, 1), textcoords="offset points", xytext=(6, 6), fontsize=small)
            self.contexts.append((curve, floor, mark, mark_text, knee, knee_text))
        ax.plot(self.b, self.dw / self.b / GiB, "--", color=COLORS["weights"], label="shared weights D_w / b")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log_axes(ax)
        ax.set_xticks(self.b[::2], [str(int(x)) for x in self.b[::2]])  # every other power of two: fewer labels
        decade_ticks(ax)
        ax.set_xlabel("batch b (requests decoding together)")
        ax.set_ylabel("bytes read per output token (GiB)")

    def set(self, contexts: Sequence[int], mark_batch: int | None) -> None:
        if len(contexts) != len(self.contexts):
            raise ValueError(f"contexts must hold {len(self.contexts)} values, got {len(contexts)}")
        dw, k, b = self.dw, self.k, self.b
        palette = [COLORS["prefill"], COLORS["decode"], COLORS["kv"], COLORS["highlight"]]
        for i, (L, (curve, floor, mark, mark_text, knee, knee_text)) in enumerate(zip(contexts, self.contexts)):
            color = CONTEXT_COLORS.get(L, palette[i % len(palette)])
            d = np.array([R.bytes_per_output_token(int(x), L, dw, k) for x in b]) / GiB
            curve.set(data=(b, d), color=color, label=f"L = {L:,}: weights/b + KV")
            floor.set(ydata=[L * k / GiB] * 2, color=color, label=f"L = {L:,}: KV only")
            y = R.bytes_per_output_token(mark_batch, L, dw, k) / GiB if mark_batch else None
            mark.set(data=([mark_batch], [y]) if mark_batch else ([], []), visible=bool(mark_batch))
            mark_text.set(text=f"{y:.2f} GiB" if mark_batch else "", visible=bool(mark_batch))
            mark_text.xy = (mark_batch, y) if mark_batch else (1, 1)
            bk = R.b_kv(dw, L, k)
            shown = bk <= b[-1]
            yk = R.bytes_per_output_token(bk, L, dw, k) / GiB
            knee.set(data=([bk], [yk]) if shown else ([], []), color=color, visible=shown)
            knee_text.set(text=f"b_KV = {bk}", color=color, visible=shown)
            knee_text.xy = (bk, yk)
        self.ax.relim()
        self.ax.autoscale_view()
        refresh_legend(self.ax, loc="upper right", fontsize=self.small)


def fast_store_figure(model: ModelSpec, context_tokens: int = 8192, max_batch: int = 256,
                      figure_caption: str | None = None) -> Figure:
    """HBM bytes per output token at one context: D_w/b + Lk (weights in HBM) against Lk (weights in a separate fast store)."""
    w, kv = model.matrix_weight_bytes(), context_tokens * model.kv_bytes_per_token()
    b = _batches(max_batch)
    conv = np.array([R.hbm_bytes_per_output_token(int(x), w, kv) for x in b]) / GiB
    fast = np.array([R.hbm_bytes_per_output_token(int(x), w, kv, separate_weight_store=True) for x in b]) / GiB
    fig, ax = new_figure(width=7, height=3.4)
    ax.plot(b, conv, "o-", color=COLORS["weights"], ms=4, label="weights in HBM: $D_w/b + Lk$")
    ax.plot(b, fast, "o-", color=COLORS["kv"], ms=4, label="separate fast weight store: $Lk$")
    ax.fill_between(b, fast, conv, color=COLORS["unused"], alpha=0.6,
                    label="weights' share $D_w/b$, removed by the store")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_axes(ax)
    ax.set_xticks(b, [str(int(x)) for x in b])
    ax.set_xlabel("batch $b$")
    ax.set_ylabel("HBM bytes per output token (GiB)")
    ax.legend(loc="upper right", title=f"{model.name}, context {context_tokens:,} tokens", title_fontsize=9)
    if figure_caption:
        caption(fig, figure_caption)
    return fig


def per_token_time_figure(model: ModelSpec, accelerator: Accelerator, context_tokens: int = 8192,
                          overhead_s: float = 0.0, max_batch: int = 256,
                          figure_caption: str | None = None) -> Figure:
    """Decode time per output token (ms) and compute utilization against batch: weights in HBM vs a separate store.

    Both curves carry the same fixed per-step cost ``overhead_s``; their gap is the weight read D_w/(beta*b).
    """
    b = _batches(max_batch)
    fig, (ax, bx) = new_figure(1, 2, width=8.5, height=3.4)
    for separate, color, label in ((False, COLORS["weights"], "weights in HBM"),
                                   (True, COLORS["kv"], "separate weight store")):
        t = np.array([R.decode_time_per_token(model, accelerator, int(x), context_tokens, overhead_s, separate)
                      for x in b]) / ms
        u = np.array([R.decode_mfu(model, accelerator, int(x), context_tokens, overhead_s, separate) for x in b])
        ax.plot(b, t, "o-", color=color, ms=4, label=label)
        bx.plot(b, 100 * u, "o-", color=color, ms=4, label=label)
    floor = context_tokens * model.kv_bytes_per_token() / accelerator.hbm_bandwidth / ms
    ax.axhline(floor, color=COLORS["kv"], ls=":", lw=1.2, label=r"KV read alone, $Lk/\beta$")
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        _plain_log_axes(a)
        a.set_xticks(b[::2], [str(int(x)) for x in b[::2]])
        a.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        a.set_xlabel("batch b")
    ax.set_ylabel("ms per output token")
    bx.set_ylabel("compute utilization (% of peak)")
    ax.set_title(f"L = {context_tokens:,}, fixed cost {overhead_s / ms:.1f} ms per step", fontsize=10)
    bx.set_title("share of peak FLOP/s", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    bx.legend(loc="upper left", fontsize=8)
    legible(fig)
    if figure_caption:
        caption(fig, figure_caption)
    return fig


def step_time_figure(model: ModelSpec, accelerator: Accelerator, context_tokens: int = 2048, max_batch: int = 256,
                     mark_batch: int | None = None, mfu: float = 1.0, mbu: float = 1.0,
                     separate_weight_store: bool = False) -> Figure:
    """Roofline of one decode step against batch: compute b*F/P, reads (D_w + b*L*k)/beta, and their max (ms)."""
    fig, ax = new_figure(width=7, height=3.4)
    _StepPanel(ax, max_batch).set(model, accelerator, context_tokens, mark_batch, mfu, mbu, separate_weight_store)
    return fig


class _StepPanel:
    """One decode step's roofline on ``ax`` against b (log-log, ms): compute b*F/P, reads (D_w + b*L*k)/beta,
    their max, the crossover and a marked batch. Built once; ``set`` redraws it in place."""

    def __init__(self, ax, max_batch: int, small: float = 8) -> None:
        self.ax, self.small = ax, small
        self.b = np.unique(np.geomspace(1, max_batch, 80).astype(int))
        self.compute, = ax.plot([], [], color=COLORS["prefill"], label="compute b*F/P")
        self.memory, = ax.plot([], [], color=COLORS["kv"])
        self.step, = ax.plot([], [], color="black", lw=2, alpha=0.35, label="step time (max)")
        self.cross = ax.axvline(1.0, color=COLORS["deadline"], ls="--", lw=1)
        self.mark, = ax.plot([], [], "o", color=COLORS["deadline"])
        self.mark_text = ax.annotate("", (1, 1), textcoords="offset points", xytext=(6, -12), fontsize=small)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log_axes(ax)
        ticks = _batches(max_batch)[::2]
        ax.set_xticks(ticks, [str(int(x)) for x in ticks])
        decade_ticks(ax)
        ax.set_xlabel("batch b")
        ax.set_ylabel("time per step (ms)")
        fig = ax.figure  # room for a two-line title
        fig.subplots_adjust(top=min(fig.subplotpars.top, 1 - 0.6 / fig.get_figheight()))

    def set(self, model: ModelSpec, accelerator: Accelerator, context_tokens: int, mark_batch: int | None,
            mfu: float, mbu: float, separate_weight_store: bool) -> None:
        dw, k, b = model.matrix_weight_bytes(), model.kv_bytes_per_token(), self.b
        f = R.decode_flops_per_request(model, context_tokens)
        p, beta = accelerator.peak_bf16_flops * mfu, accelerator.hbm_bandwidth * mbu
        compute = b * f / p / ms
        weights = 0.0 if separate_weight_store else dw
        memory = (weights + b * context_tokens * k) / beta / ms
        cross = np.inf
        if separate_weight_store:
            # both terms are linear in b: no crossover in batch; the context decides which one is larger
            l_star = R.decode_context_crossover(model, accelerator, mfu, mbu)
            bound = "compute-bound" if compute[0] > memory[0] else "memory-bound"
            where = "never" if not np.isfinite(l_star) else f"L* = {l_star:,.0f}"
            title = f"separate weight store, L = {context_tokens:,}:\n{bound} at every b ({where})"
        else:
            cross = R.compute_memory_crossover(f, context_tokens, weights, k, accelerator.peak_bf16_flops,
                                               accelerator.hbm_bandwidth, mfu, mbu)
            bound = "never compute-bound" if not np.isfinite(cross) else f"compute-bound above b = {cross:.0f}"
            title = f"{accelerator.name}, L = {context_tokens:,}:\n{bound}"
        t = (R.step_time(mark_batch, f, context_tokens, weights, k, accelerator.peak_bf16_flops,
                         accelerator.hbm_bandwidth, mfu, mbu) / ms if mark_batch else None)
        self.compute.set_data(b, compute)
        self.memory.set(data=(b, memory), label="reads b*L*k/beta (weights from a separate store)"
                        if separate_weight_store else "reads (D_w + b*L*k)/beta")
        self.step.set_data(b, np.maximum(compute, memory))
        shown = bool(np.isfinite(cross) and cross <= b[-1])
        self.cross.set(xdata=[cross if shown else 1.0] * 2, visible=shown,
                       label=f"crossover b = {cross:.0f}" if shown else "_crossover")
        self.mark.set(data=([mark_batch], [t]) if mark_batch else ([], []), visible=bool(mark_batch))
        self.mark_text.set(text=f"{t:.2f} ms" if mark_batch else "", visible=bool(mark_batch))
        self.mark_text.xy = (mark_batch, t) if mark_batch else (1, 1)
        self.ax.set_title(title)
        self.ax.relim(visible_only=True)  # a hidden crossover line leaves the limits alone
        self.ax.autoscale_view()
        refresh_legend(self.ax, loc="upper left", fontsize=self.small)


def draw_weight_reuse(batch: int = 16, context_tokens: int = 2048, bandwidth_scale: float = 1.0,
                      accelerator: str = "rtx-pro-6000") -> Figure:
    """Widget callback: bytes per output token at one context with ``batch`` marked, beside the step roofline.

    ``bandwidth_scale`` multiplies the chosen accelerator's own HBM bandwidth (1 = the datasheet value).
    """
    width = 8.5
    fig, (ax, bx) = new_figure(1, 2, width=width, height=3.8)
    _WeightReuse(ax, bx, min_font_pt(width)).set(batch, context_tokens, bandwidth_scale, accelerator)
    return fig


def update_weight_reuse(fig: Figure, batch: int = 16, context_tokens: int = 2048, bandwidth_scale: float = 1.0,
                        accelerator: str = "rtx-pro-6000") -> bool:
    """Redraw a ``draw_weight_reuse`` figure in place for new knob values (the explorer's slider path)."""
    return _WeightReuse.redraw(fig, batch, context_tokens, bandwidth_scale, accelerator)


class _WeightReuse(InPlace):
    """The explorer's two panels for Qwen3-8B: bytes per output token, and the step roofline."""

    def __init__(self, ax, bx, small: float) -> None:  # small: legible once scaled to the page
        for a in (ax, bx):
            a.tick_params(labelsize=small)
        self.model = MODELS["qwen3-8b"]
        self.bytes, self.step = _BytesPanel(ax, self.model, 1, 256, small), _StepPanel(bx, 256, small)
        self.keep_on(ax.figure)

    def set(self, batch: int, context_tokens: int, bandwidth_scale: float, accelerator: str) -> None:
        card = ACCELERATORS[one_of("accelerator", accelerator, ACCELERATORS)]
        acc = replace(card, hbm_bandwidth=card.hbm_bandwidth * positive("bandwidth_scale", bandwidth_scale))
        self.bytes.set((int(context_tokens),), int(batch))
        self.step.set(self.model, acc, int(context_tokens), int(batch), 1.0, 1.0, False)


# ---- the section's explorers (notebooks display them; tests sweep every ``*_explorer``) ----
def weight_reuse_explorer() -> "Explorer":
    """Bytes per output token and the step roofline with sliders for batch, context, bandwidth and accelerator."""
    from .. import widgets as w

    BATCHES = (1, 4, 8, 16, 32, 64, 128, 256)

    return w.explore(
        draw_weight_reuse, update_weight_reuse,
        grid=dict(batch=BATCHES, context_tokens=(512, 2048, 8192, 32768), bandwidth_scale=(0.25, 0.5, 1, 2, 4)),
        # the "Try it" of 8.2.1: every batch at a 32K context and half the bandwidth
        extra_states=[dict(batch=b, context_tokens=32768, bandwidth_scale=0.5) for b in BATCHES],
        batch=w.int_slider("batch", 1, 256, 16, 1, "requests"),
        context_tokens=w.int_slider("context", 128, 32768, 2048, 128, "tokens"),
        bandwidth_scale=w.float_slider("memory bandwidth", 0.25, 4.0, 1.0, 0.25, "x the card's"),
        accelerator=w.choice("accelerator (FLOP/s)", list(ACCELERATORS), "rtx-pro-6000"),
    )
