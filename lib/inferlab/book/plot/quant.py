"""Drawings and explorers of section 8.4: block layouts, format error, KV sizes, offloading, prefetch, quality grids.

This file is long because it serves four pages (8.4.1-8.4.4), each with its figures and an explorer.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from inferlab import compression
from inferlab.compression import kv as kc
from inferlab.compression import offload as off
from inferlab.compression import retrieval
from inferlab.example import MODEL
from inferlab.hardware import ACCELERATORS, NVLINK_C2C, PCIE_GEN5_X16
from inferlab.models import MODELS
from inferlab.units import GB, GiB, MiB, ms

from ..widgets import Explorer, choice, explore, float_slider, int_slider
from . import COLORS, InPlace, box_corners, new_figure, refresh_legend, rescale
from .ticks import few_ticks

CODE_COLOR = COLORS["shared"]  # blue: codes
META_COLOR = COLORS["kv"]  # orange: scales and minimums (as the chapter's Figure 8-23)
NET_COLOR = COLORS["decode"]  # green: memory handed back
DECODE_STEP_S = 26.26e-3  # experiment 8-1, batch 1, 2K context
BUFFER_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
FORMAT_LABELS = {"bf16": "BF16", "fp8_e4m3": "FP8", "q8_0": "q8_0", "q4_0": "q4_0"}  # as the prose writes them


def weight_like(n: int, seed: int = 0, kind: str = "normal") -> np.ndarray:
    """``n`` seeded weight-like float32 values: ``normal``, ``heavy`` (Student t, 3 dof) or ``outliers`` (1 % x 20)."""
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "heavy":
        x = rng.standard_t(3, n)
    elif kind == "outliers":
        x = rng.standard_normal(n)
        x[rng.random(n) < 0.01] *= 20
    else:
        raise ValueError(f"kind must be one of ['heavy', 'normal', 'outliers'], got {kind!r}")
    return (0.02 * x).astype(np.float32)


# ---- 8.4.1 ------------------------------------------------------------------------------------


def q2_K_regions() -> pd.DataFrame:
    """The byte ranges of one q2_K block: scales|mins, 2-bit codes, d, dmin."""
    return pd.DataFrame({"field": ["scales and mins (4 + 4 bit x 16)", "2-bit codes (256 x 2 bit)", "d (fp16)",
                                   "dmin (fp16)"], "first byte": [0, 16, 80, 82], "bytes": [16, 64, 2, 2]})


def draw_q2_K_block(x: np.ndarray) -> Figure:
    """One real q2_K block: its 84 bytes as a strip by field, and the 256 values against their decoded copies."""
    blk = compression.quantize(np.asarray(x, np.float32)[:256], "q2_K")
    y = compression.dequantize(blk, "q2_K")
    fig, (top, bottom) = new_figure(2, 1, width=7.5, height=4.6)
    for _, r in q2_K_regions().iterrows():
        color = CODE_COLOR if "codes" in r.field else META_COLOR
        top.barh(0, r.bytes, left=r["first byte"], color=color, edgecolor="white", height=0.6)
        top.text(r["first byte"] + r.bytes / 2, 0, f"{r.bytes}", ha="center", va="center", color="white", fontsize=9)
    top.set_xlim(0, 84)
    top.set_yticks([])
    top.set_xlabel("byte of the 84-byte block (blue: codes, orange: metadata)")
    top.grid(False)
    idx = np.arange(256)
    bottom.plot(idx, x[:256], ".", ms=3, color="#888888", label="original")
    bottom.plot(idx, y, "_", ms=4, mew=1.5, color=CODE_COLOR, label="decoded (4 levels per sub-block)")
    for j in range(1, 16):
        bottom.axvline(16 * j - 0.5, color="#dddddd", lw=0.6)
    bottom.set_xlabel("value index (16 sub-blocks of 16)")
    bottom.set_ylabel("value")
    bottom.legend(loc="lower center", bbox_to_anchor=(0.5, 0.98), ncols=2)
    return fig


def format_errors(x: np.ndarray,
                  formats: tuple[str, ...] = ("bf16", "fp8_e4m3", "q8_0", "q4_0", "q2_K")) -> pd.DataFrame:
    """Bits per value and relative RMS error of ``x`` stored in each format."""
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
    rows = []
    for f in formats:
        y = compression.round_trip(x, f)
        fmt = compression.FORMATS[f]
        bits = fmt.bits_per_value + (0 if f != "fp8_e4m3" else 32 / x.size)  # one fp32 scale per tensor
        rows.append({"format": f, "bits per value": bits,
                     "relative RMS error": float(np.sqrt(np.mean((y.astype(np.float64) - x) ** 2))) / rms})
    return pd.DataFrame(rows).set_index("format")


def draw_error_vs_bits(n: int = 1 << 16, seed: int = 0) -> Figure:
    """Relative RMS error against bits per value, for three weight-like distributions."""
    fig, ax = new_figure(width=7.0, height=3.6)
    markers = {"normal": "o", "heavy": "s", "outliers": "^"}
    for kind, m in markers.items():
        t = format_errors(weight_like(n, seed, kind))
        ax.plot(t["bits per value"], t["relative RMS error"], m, ls="none", label=kind, ms=6, alpha=0.85)
        if kind == "normal":
            for f, r in t.iterrows():
                ax.annotate(f, (r["bits per value"], r["relative RMS error"]), textcoords="offset points",
                            xytext=(4, 6), fontsize=9)
    ax.set_yscale("log")
    ax.set_xlabel("stored bits per value (metadata included)")
    ax.set_ylabel("relative RMS error")
    ax.legend(title="weights", loc="upper right")
    return fig


class _WeightFit(InPlace):
    """``weight_fit_view``'s bars, verdicts and available line, redrawn in place by ``set``."""

    def __init__(self, ax, names: list[str], file_gib: np.ndarray) -> None:
        self.ax, self.file_gib = ax, file_gib
        ys = np.arange(len(names))
        ax.barh(ys, file_gib, color=COLORS["weights"], label="weight file")
        self.kv = ax.barh(ys, np.zeros_like(file_gib), left=file_gib, color=META_COLOR, alpha=0.8,
                          label="KV of one request")
        self.verdicts = [ax.text(0, i, "", va="center", fontsize=9) for i in ys]
        self.available = ax.axvline(0, color=COLORS["deadline"], ls="--", lw=1.2)
        ax.set_yticks(ys, names)
        few_ticks(ax, x=5, y=None)
        ax.set_xlabel("GiB")
        self.keep_on(ax.figure)

    def set(self, fits: list) -> bool:
        kv_gib = np.array([f.kv_bytes_per_request for f in fits]) / GiB
        for bar, verdict, fit, left, kv in zip(self.kv, self.verdicts, fits, self.file_gib, kv_gib):
            bar.set_width(kv)
            verdict.set_x(left + kv + 0.3)
            verdict.set_text(f"{'request fits' if fit.left_bytes >= fit.kv_bytes_per_request else 'no room'}\n"
                             f"{fit.left_bytes / GiB:+.2f} GiB left by the file")
        avail = fits[-1].available_bytes / GiB
        self.available.set_xdata([avail, avail])
        self.available.set_label(f"available {avail:.2f} GiB")
        self.ax.set_xlim(60, max(avail, self.file_gib.max()) + 18)
        refresh_legend(self.ax, loc="upper center", bbox_to_anchor=(0.45, -0.3), ncols=3)
        return True


def _weight_fits(context_tokens: int, reserved_gib: float) -> tuple[dict[str, float], list]:
    """Qwen3-235B-A22B's two GGUF files by name (bytes) and how each fits the M2 Max with one request."""
    files = kc.gguf_files()
    sizes = {"Q2_K": float(files.loc["Q2_K", "file_bytes"]),
             "UD-Q2_K_XL": float(files.loc["UD-Q2_K_XL", "printed_gib"]) * GiB}
    m2, big = ACCELERATORS["m2-max"], MODELS["qwen3-235b-a22b"]
    return sizes, [kc.weight_file_fit(size, m2.memory_bytes, reserved_gib * GiB, big, context_tokens)
                   for size in sizes.values()]


def weight_fit_view(context_tokens: int = 8192, reserved_gib: float = 8.0) -> Figure:
    """Qwen3-235B-A22B's two GGUF files on a 96 GB M2 Max: file, KV of one request, what is left."""
    sizes, fits = _weight_fits(context_tokens, reserved_gib)
    fig, ax = new_figure(width=7.0, height=2.8)
    fig.subplots_adjust(left=1.25 / 7.0, bottom=0.95 / 2.8)
    _WeightFit(ax, list(sizes), np.array(list(sizes.values())) / GiB).set(fits)
    return fig


def update_weight_fit(fig: Figure, context_tokens: int = 8192, reserved_gib: float = 8.0) -> bool:
    """Redraw a ``weight_fit_view`` figure in place (the explorer's path)."""
    return _WeightFit.redraw(fig, _weight_fits(context_tokens, reserved_gib)[1])


def weight_fit_explorer() -> Explorer:
    """Context length and system reserve against the two Qwen3-235B files on the M2 Max (8.4.1)."""
    return explore(weight_fit_view, update_weight_fit,
                   grid=dict(context_tokens=(1024, 2048, 4096, 6144, 7168, 8192, 9216, 10240, 12288, 16384, 24576,
                                             32768), reserved_gib=(0, 2, 4, 5, 5.5, 6, 6.5, 7, 8, 10, 12, 16)),
                   context_tokens=int_slider("context", 1024, 32768, 8192, step=1024, unit="tokens"),
                   reserved_gib=float_slider("reserved for system", 0, 16, 8, 0.5, unit="GiB"))


# ---- 8.4.2 ------------------------------------------------------------------------------------


def block_bytes(x32: np.ndarray) -> pd.DataFrame:
    """Bytes of 32 values in BF16, q8_0 and q4_0, counted from real encodings: (codes, scale) per format."""
    x32 = np.asarray(x32, np.float32)[:32]
    rows = [{"format": "BF16", "code bytes": x32.astype(np.float16).nbytes, "scale bytes": 0}]
    for f in ("q8_0", "q4_0"):
        n = compression.quantize(x32, f).nbytes
        rows.append({"format": f, "code bytes": n - 2, "scale bytes": 2})
    t = pd.DataFrame(rows).set_index("format")
    t["total bytes"] = t["code bytes"] + t["scale bytes"]
    return t


def draw_block_bytes(x32: np.ndarray) -> Figure:
    """Figure 8-23: bytes of one 32-value group in BF16, q8_0 and q4_0 (orange: the 2-byte scale)."""
    t = block_bytes(x32)
    fig, ax = new_figure(width=7.0, height=2.4)
    for i, (f, r) in enumerate(t.iloc[::-1].iterrows()):
        ax.barh(i, r["code bytes"], color=CODE_COLOR)
        if r["scale bytes"]:
            ax.barh(i, r["scale bytes"], left=r["code bytes"], color=META_COLOR)
        ax.text(r["total bytes"] + 0.8, i, f"{r['total bytes']} B", va="center", fontsize=9)
    ax.set_yticks(range(len(t)), list(t.index[::-1]))
    ax.set_xlim(0, 72)
    ax.set_xlabel("bytes for the same 32 values (blue: codes, orange: scale)")
    return fig


def kv_format_view(context_tokens: int = 8192, fmt: str = "q8_0", conversion_ms: float = 0.2) -> Figure:
    """KV of one context per format, and the time a step saves after paying ``conversion_ms`` for ``fmt``."""
    fig, (a, b) = new_figure(1, 2, width=7.5, height=3.0)
    _KVFormat(a, b).set(context_tokens, fmt, conversion_ms)
    return fig


def update_kv_format(fig: Figure, context_tokens: int = 8192, fmt: str = "q8_0", conversion_ms: float = 0.2) -> bool:
    """Redraw a ``kv_format_view`` figure in place (the explorer's slider path)."""
    return _KVFormat.redraw(fig, context_tokens, fmt, conversion_ms)


class _KVFormat(InPlace):
    """``kv_format_view``'s artists, built once and redrawn in place by ``set``."""

    FORMATS = ("bf16", "fp8_e4m3", "q8_0", "q4_0")

    def __init__(self, a, b) -> None:
        self.a, self.b = a, b
        self.bars = a.bar([FORMAT_LABELS[f] for f in self.FORMATS], [1.0] * 4)
        self.values = [a.text(i, 1.0, "", ha="center", va="bottom", fontsize=9) for i in range(4)]
        a.set_ylabel("KV of one context (MiB)")
        # the saving falls linearly with T_conv: its two ends draw the line
        self.saving, = b.plot([0.0, 1.0], [0.0, 0.0], color=CODE_COLOR)
        b.axhline(0, color="#555555", lw=0.8)
        self.here, = b.plot([0.0], [0.0], "o", color=COLORS["deadline"])
        self.here_text = b.annotate("", (0, 0), textcoords="offset points", xytext=(6, 6), fontsize=9)
        b.set_xlabel(r"conversion time $T_{\mathrm{conv}}$ (ms)")
        b.set_ylabel("net time saved (ms)")
        a.set_yticks([])  # every bar carries its value: a value axis would repeat them at five artists a tick
        b.set_xticks([0, 0.5, 1])
        few_ticks(b, x=None, y=4)
        self.keep_on(a.figure)

    def set(self, context_tokens: int, fmt: str, conversion_ms: float) -> None:
        beta = kc.decode_bandwidth_measured()
        sizes = [kc.kv_bytes_in_format(MODEL, context_tokens, 1, f) for f in self.FORMATS]
        bf16, target = sizes[0], kc.kv_bytes_in_format(MODEL, context_tokens, 1, fmt)
        conv = np.array([0.0, 1.0]) * ms
        saved = np.array([kc.read_saving(bf16 - target, beta, c) for c in conv])
        here = kc.read_saving(bf16 - target, beta, conversion_ms * ms)
        for bar, text, f, size in zip(self.bars, self.values, self.FORMATS, sizes):
            bar.set(height=size / MiB,
                    facecolor=COLORS["highlight"] if f == fmt else COLORS["weights"] if f == "bf16" else CODE_COLOR)
            text.set(y=size / MiB, text=f"{size / MiB:,.0f}")
        self.a.set_title(f"{context_tokens:,}-token context")
        self.saving.set_ydata(saved / ms)
        self.here.set_data([conversion_ms], [here / ms])
        self.here_text.set_text(f"{here / ms:+.3f} ms")
        self.here_text.xy = (conversion_ms, here / ms)
        self.b.set_title(f"BF16 \u2192 {FORMAT_LABELS[fmt]} at {beta / 1e12:.2f} TB/s")
        for ax in (self.a, self.b):
            ax.relim()
            ax.autoscale_view()


def kv_format_explorer() -> Explorer:
    """Context length, format and conversion time against KV size and net saving (8.4.2)."""
    conversions = (*(round(i * 0.05, 2) for i in range(11)), 0.6, 0.65, 0.7, 0.75, 0.8, 1.0)
    return explore(kv_format_view, update_kv_format,
                   grid=dict(context_tokens=(1024, 2048, 3072, 4096, 5120, 6144, 8192, 16384, 32768),
                             conversion_ms=conversions),
                   extra_states=[dict(context_tokens=4096, fmt="q4_0", conversion_ms=c) for c in conversions],
                   context_tokens=int_slider("context", 1024, 32768, 8192, step=1024, unit="tokens"),
                   fmt=choice("format", ["q8_0", "q4_0", "fp8_e4m3"], "q8_0"),
                   conversion_ms=float_slider("conversion time", 0, 1, 0.2, 0.05, unit="ms"))


def draw_itl_crossover(max_tokens: int = 20_000) -> Figure:
    """The fitted ITL lines of BF16 and FP8 KV (H100, Llama-3.1-8B) and where they cross."""
    L = np.linspace(0, max_tokens, 201)
    fig, ax = new_figure(width=7.0, height=3.2)
    for line, color in ((kc.ITL_BF16_H100, COLORS["weights"]), (kc.ITL_FP8_H100, CODE_COLOR)):
        ax.plot(L, [line.at(v) / ms for v in L], color=color, label=line.name)
    x = kc.itl_crossover(kc.ITL_BF16_H100, kc.ITL_FP8_H100)
    ax.plot([x], [kc.ITL_BF16_H100.at(x) / ms], "o", color=COLORS["deadline"])
    ax.annotate(f"crossover {x:,.0f} tokens", (x, kc.ITL_BF16_H100.at(x) / ms), textcoords="offset points",
                xytext=(8, -14), fontsize=9)
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel("inter-token latency (ms)")
    ax.legend(loc="upper left")
    return fig


# ---- 8.4.3 ------------------------------------------------------------------------------------


def draw_offload_memory(plans: list[off.OffloadPlan]) -> Figure:
    """Figure 8-24: memory freed by offloading, split into prefetch buffers (orange) and net space (green)."""
    fig, ax = new_figure(width=7.0, height=2.6)
    for i, p in enumerate(plans):
        ax.barh(i, p.net_bytes / MiB, color=NET_COLOR, label="net space for KV" if i == 0 else None)
        ax.barh(i, p.buffer_bytes / MiB, left=p.net_bytes / MiB, color=META_COLOR,
                label="prefetch buffers" if i == 0 else None)
        ax.text(p.net_bytes / MiB / 2, i, f"{p.net_bytes / MiB:,.0f} MiB", ha="center", va="center", color="white")
    ax.set_yticks(range(len(plans)), [f"{p.n_buffers} buffer{'s' if p.n_buffers > 1 else ''}" for p in plans])
    ax.set_xlabel(f"MiB of the {plans[0].freed_bytes / MiB:,.0f} MiB freed")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncols=2)
    fig.subplots_adjust(bottom=0.36)
    return fig


class _PipelineLanes(InPlace):
    """``draw_timeline``'s link and compute lanes, redrawn in place by ``set``."""

    LANES = ((1, "copy"), (0, "compute"))

    def __init__(self, ax: Axes) -> None:
        self.ax = ax  # each lane's bars are one collection; its y extent is the lane's from the start
        self.lanes = [ax.broken_barh([(0, 0)], (lane - 0.35, 0.7), edgecolor="white", linewidth=0.3)
                      for lane, _ in self.LANES]
        ax.set_yticks([0, 1], ["compute", "link"])
        ax.grid(False)

    def set(self, result: off.PipelineResult, title: str) -> bool:
        ev = result.events
        kind, buffer = ev["kind"].to_numpy(), ev["buffer"].to_numpy()
        start, end = ev["start_s"].to_numpy() / ms, ev["end_s"].to_numpy() / ms
        palette = np.array(BUFFER_COLORS + ["#d9d9d9"])  # the last: resident layers (buffer -1)
        colors = palette[np.where(buffer >= 0, buffer % len(BUFFER_COLORS), len(BUFFER_COLORS))]
        for bars, (lane, name) in zip(self.lanes, self.LANES):
            rows = kind == name
            y0 = lane - 0.35  # the corners as broken_barh computes them (x0 + width, y0 + height)
            bars.set_verts(box_corners(start[rows], y0, start[rows] + (end[rows] - start[rows]), y0 + 0.7))
            bars.set_facecolor(list(colors[rows]))
        self.ax.set_title(title, fontsize=10)
        self.ax.set_xlim(0, end.max() * 1.01)
        return True


def draw_timeline(ax: Axes, result: off.PipelineResult, title: str) -> None:
    """Draw one pipeline's link and compute lanes (ms); offloaded work coloured by buffer."""
    _PipelineLanes(ax).set(result, title)


def prefetch_timelines(link_bandwidth: float = PCIE_GEN5_X16, every: int = 4,
                       n_steps: int = 2) -> dict[int, off.PipelineResult]:
    """The running example's pipeline with one and two buffers: 36 layers of 26.26/36 ms, 288 MiB per copy."""
    layers = off.offloaded_layers(MODEL.n_layers, every)
    copy = off.copy_time(MODEL.ffn_layer_bytes(), link_bandwidth)
    return {nb: off.simulate_prefetch(DECODE_STEP_S / MODEL.n_layers, MODEL.n_layers, layers, copy, nb, n_steps)
            for nb in (1, 2)}


def draw_prefetch_timelines(link_bandwidth: float = PCIE_GEN5_X16, every: int = 4, n_steps: int = 2) -> Figure:
    """Two decode steps with one and with two prefetch buffers (grey: resident layers; colours: buffers)."""
    res = prefetch_timelines(link_bandwidth, every, n_steps)
    fig, axes = new_figure(2, 1, width=7.5, height=3.6)
    for ax, (nb, r) in zip(axes, res.items()):
        draw_timeline(ax, r, f"{nb} buffer{'s' if nb > 1 else ''}: {r.step_s / ms:.1f} ms per step "
                             f"(compute alone {r.compute_s / ms:.2f} ms)")
    axes[-1].set_xlabel("time (ms)")
    return fig


def draw_copy_vs_bandwidth(copy_bytes: float) -> Figure:
    """Figure 8-25: copy time per step against link bandwidth, with PCIe Gen5 x16 and NVLink-C2C marked."""
    bw = np.geomspace(16, 1000, 200) * GB
    fig, ax = new_figure(width=7.0, height=3.2)
    ax.plot(bw / GB, copy_bytes / bw / ms, color=CODE_COLOR, label="copy time per step")
    ax.axhline(DECODE_STEP_S / ms, color=COLORS["deadline"], ls="--", lw=1.2, label="one decode step (batch 1)")
    for name, b in (("PCIe Gen5 x16", PCIE_GEN5_X16), ("NVLink-C2C", NVLINK_C2C)):
        t = off.copy_time(copy_bytes, b)
        ax.plot([b / GB], [t / ms], "o", color="#222222")
        ax.annotate(f"{name}: {t / ms:.1f} ms", (b / GB, t / ms), textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [16, 32, 64, 128, 256, 450, 900]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_yticks([3, 10, 26.26, 100], ["3", "10", "26.26", "100"])
    ax.set_yticks([], minor=True)
    ax.set_xlabel("link bandwidth, one direction (GB/s)")
    ax.set_ylabel("ms per step")
    ax.legend(loc="lower left")
    return fig


def offload_view(link_gb_per_s: float = 64.0, every: int = 4, n_buffers: int = 1) -> Figure:
    """The prefetch pipeline of two decode steps for a link, an offload spacing and a buffer count."""
    fig, ax = new_figure(width=7.5, height=2.4)
    lanes = _PipelineLanes(ax)
    lanes.set(*_offload_pipeline(link_gb_per_s, every, n_buffers))
    lanes.keep_on(fig)
    ax.set_xlabel("time (ms)")
    few_ticks(ax, x=6, y=None)
    return fig


def update_offload(fig: Figure, link_gb_per_s: float = 64.0, every: int = 4, n_buffers: int = 1) -> bool:
    """Redraw an ``offload_view`` figure in place (the explorer's path)."""
    return _PipelineLanes.redraw(fig, *_offload_pipeline(link_gb_per_s, every, n_buffers))


def _offload_pipeline(link_gb_per_s: float, every: int, n_buffers: int) -> tuple[off.PipelineResult, str]:
    """Two decode steps of the running example's prefetch pipeline, and ``offload_view``'s title."""
    layers = off.offloaded_layers(MODEL.n_layers, every)
    copy = off.copy_time(MODEL.ffn_layer_bytes(), link_gb_per_s * GB)
    r = off.simulate_prefetch(DECODE_STEP_S / MODEL.n_layers, MODEL.n_layers, layers, copy, n_buffers, n_steps=2)
    plan = off.OffloadPlan(MODEL.ffn_layer_bytes(), len(layers), n_buffers)
    ffns = f"{len(layers)} FFN{'s' if len(layers) != 1 else ''}"
    buffers = f"{n_buffers} buffer{'s' if n_buffers != 1 else ''}"
    return r, (f"{ffns} offloaded, {buffers}: {r.step_s / ms:.1f} ms per step, "
               f"net {plan.net_bytes / MiB:,.0f} MiB freed")


def offload_explorer() -> Explorer:
    """Link bandwidth, layers offloaded and buffers against the step time and memory freed (8.4.3)."""
    links = (16, 32, 64, 96, 102, 104, 128, 136, 138, 160, 206, 208, 256, 512, 900)
    return explore(offload_view, update_offload,
                   grid=dict(link_gb_per_s=links, every=(1, 2, 3, 4, 6, 9, 12, 18, 36), n_buffers=(1, 2, 3, 4)),
                   extra_states=[dict(link_gb_per_s=gb, every=2, n_buffers=2) for gb in links],
                   link_gb_per_s=float_slider("link", 16, 900, 64, 2, unit="GB/s"),
                   every=int_slider("offload one layer in", 1, 36, 4, unit="layers"),
                   n_buffers=int_slider("prefetch buffers", 1, 4, 1))


class _CompressedCopy(InPlace):
    """``compression_view``'s direct and compressed copies, redrawn in place by ``set``."""

    def __init__(self, ax: Axes) -> None:
        self.ax = ax
        self.direct, = ax.barh(1, 0, color=COLORS["weights"])
        self.copy, = ax.barh(0, 0, color=CODE_COLOR, label="copy")
        self.decompress, = ax.barh(0, 0, color=META_COLOR, label="decompress")
        ax.set_xlabel("ms to move 96 MiB")
        few_ticks(ax, x=5, y=None)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncols=2)
        self.keep_on(ax.figure)

    def set(self, ratio: float, decompress_gb_per_s: float, link_gb_per_s: float) -> bool:
        s, link = 96 * MiB, link_gb_per_s * GB
        copied = off.copy_time(ratio * s, link)
        comp = off.compressed_transfer_time(s, ratio, link, decompress_gb_per_s * GB)
        for bar, left, width in ((self.direct, 0, off.copy_time(s, link)), (self.copy, 0, copied),
                                 (self.decompress, copied, comp - copied)):
            bar.set_x(left / ms)
            bar.set_width(width / ms)
            bar.sticky_edges.x[:] = [left / ms]  # as barh marks a new bar's base
        self.ax.set_yticks([0, 1], [f"compressed\n(ρ = {ratio:g})", "direct"])
        thr = off.decompress_threshold(ratio, link) / GB if ratio < 1 else float("inf")
        self.ax.set_title(f"compression pays above {thr:,.1f} GB/s of decompression", fontsize=10)
        rescale(self.ax)
        return True


def compression_view(ratio: float = 0.25, decompress_gb_per_s: float = 100.0, link_gb_per_s: float = 64.0) -> Figure:
    """Direct copy against compressed copy + decompression of 96 MiB, and the threshold rate."""
    fig, ax = new_figure(width=7.0, height=2.6)
    fig.subplots_adjust(left=1.3 / 7.0, bottom=1.0 / 2.6)
    _CompressedCopy(ax).set(ratio, decompress_gb_per_s, link_gb_per_s)
    return fig


def update_compression(fig: Figure, ratio: float = 0.25, decompress_gb_per_s: float = 100.0,
                       link_gb_per_s: float = 64.0) -> bool:
    """Redraw a ``compression_view`` figure in place (the explorer's path)."""
    return _CompressedCopy.redraw(fig, ratio, decompress_gb_per_s, link_gb_per_s)


def compression_explorer() -> Explorer:
    """Compression ratio, decompression throughput and link bandwidth for a compressed copy (8.4.3)."""
    return explore(compression_view, update_compression,
                   grid=dict(ratio=(0.05, 0.25, 0.5, 0.75, 0.95), decompress_gb_per_s=(10, 50, 100, 125, 130, 200, 300, 500),
                             link_gb_per_s=(16, 64, 128, 450, 900)),
                   ratio=float_slider("compressed / original", 0.05, 0.95, 0.25, 0.05),
                   decompress_gb_per_s=float_slider("decompression", 10, 500, 100, 5, unit="GB/s"),
                   link_gb_per_s=float_slider("link", 16, 900, 64, 2, unit="GB/s"))


# ---- 8.4.4 ------------------------------------------------------------------------------------


def draw_task_grids(grids: dict[str, pd.DataFrame], column: str = "run", panel_width: float = 2.5) -> Figure:
    """Per-task grids: rows are tasks 1-8, columns runs; green circle right, orange cross wrong."""
    fig, axes = new_figure(1, len(grids), width=panel_width * len(grids) + 0.6, height=3.6)
    _TaskGrids(axes if isinstance(axes, list) else [axes]).set(grids, column)
    return fig


class _TaskGrids(InPlace):
    """``draw_task_grids``' panels, each with one line of markers per outcome (not one artist per cell);
    ``set`` redraws them in place for grids of as many panels."""

    def __init__(self, axes: list[Axes]) -> None:
        self.axes, self.marks = axes, []
        for ax in axes:
            right, = ax.plot([], [], "o", ls="none", mfc="none", mec=NET_COLOR, ms=9, mew=1.8)
            wrong, = ax.plot([], [], "x", ls="none", color=META_COLOR, ms=9, mew=2)
            self.marks.append((right, wrong))
            ax.set_yticks(range(1, 9) if ax is axes[0] else [])  # the rows line up: task numbers once, on the left
            ax.set_ylim(8.6, 0.4)
            ax.grid(False)
        axes[0].set_ylabel("task")
        self.keep_on(axes[0].figure)

    def set(self, grids: dict[str, pd.DataFrame], column: str = "run") -> bool:
        if len(grids) != len(self.axes):
            return False  # another number of panels: a figure of its own
        for ax, (right_line, wrong_line), (title, g) in zip(self.axes, self.marks, grids.items()):
            cols = sorted(g[column].unique(), key=str)
            x = g[column].map({c: i for i, c in enumerate(cols)}).to_numpy()
            right = g.correct.to_numpy(bool)
            task = g.task.to_numpy()
            right_line.set_data(x[right], task[right])
            wrong_line.set_data(x[~right], task[~right])
            ax.set_xticks(range(len(cols)), [str(c) for c in cols], fontsize=8)
            ax.set_xlim(-0.6, len(cols) - 0.4)
            ax.set_title(f"{title}\n{int(g.correct.sum())}/{len(g)} correct", fontsize=9)
        return True


def chapter_grids() -> dict[str, pd.DataFrame]:
    """The chapter's per-task results that its text pins down (Figures 8-26 and 8-28)."""
    from inferlab.datasets import published

    g = published("quality_grid_8_4_4")
    g["run"] = "c" + g.concurrency.astype(str) + "-" + g.repeat.astype(str)
    return {c: g[g.config == c] for c in ("BF16 KV", "FP8 KV + BF16 Q")}


RETRIEVAL_KV = ("bf16", "fp8_e4m3", "q8_0", "q4_0")  # the explorer's choices
RETRIEVAL_Q = ("bf16", "fp8_e4m3")


@lru_cache(maxsize=8)
def _retrieval_grid(records: str, kv_formats: tuple[str, ...], q_formats: tuple[str, ...]) -> pd.DataFrame:
    """``retrieval.run_grid`` of the chapter-like documents (all, or those named ``records``...) under these formats."""
    docs = retrieval.chapter_like_documents(0)
    if records != "all":
        docs = [d for d in docs if d.name.startswith(records)]
    return retrieval.run_grid(docs, 4, list(kv_formats), list(q_formats))


def retrieval_view(kv: str = "q4_0", q: str = "bf16", records: str = "all") -> Figure:
    """Our retrieval grid for one KV format and query precision, beside BF16 KV with a BF16 query."""
    return draw_task_grids(_retrieval_pair(kv, q, records))


def update_retrieval(fig: Figure, kv: str = "q4_0", q: str = "bf16", records: str = "all") -> bool:
    """Redraw a ``retrieval_view`` figure in place (the explorer's path)."""
    return _TaskGrids.redraw(fig, _retrieval_pair(kv, q, records))


def _retrieval_pair(kv: str, q: str, records: str) -> dict[str, pd.DataFrame]:
    """BF16 KV with a BF16 query, and ``kv`` with ``q``: the two grids ``retrieval_view`` shows."""
    # run_grid answers each (kv, q) pair on its own: one grid of every explorer choice serves every slider move
    if kv in RETRIEVAL_KV and q in RETRIEVAL_Q:
        grid = _retrieval_grid(records, RETRIEVAL_KV, RETRIEVAL_Q)
    else:
        grid = _retrieval_grid(records, tuple(sorted({"bf16", kv})), tuple(sorted({"bf16", q})))
    base = grid[(grid.kv == "bf16") & (grid.q == "bf16")]
    this = grid[(grid.kv == kv) & (grid.q == q)]
    return {"BF16 KV, BF16 Q": base, f"{kv} KV, {q} Q": this}


def retrieval_explorer() -> Explorer:
    """KV storage format and query precision against our eight retrieval tasks (8.4.4)."""
    return explore(retrieval_view, update_retrieval, kv=choice("KV stored as", list(RETRIEVAL_KV), "q4_0"),
                   q=choice("query as", list(RETRIEVAL_Q), "bf16"),
                   records=choice("documents", ["all", "n128", "n512"], "all"))

