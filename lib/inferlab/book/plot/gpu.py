"""GPU cells: one call per section that measures on a CUDA device, or shows what was recorded.

``gpu_cell(experiment, view)`` runs ``inferlab.gpu``'s experiment (``quick`` size) when torch
sees a CUDA device and draws it beside the model's prediction. Without torch or without a
device it prints one line saying so and shows, in this order of preference, our recorded CSV
under ``data/measured/``, else the chapter's published numbers from ``data/published/``, else
the prediction alone. It never imports torch itself and never fails for lack of a GPU.

Calls per section (also in ``inferlab.gpu``'s docstring): 8.1.3 ``gpu_cell("decode_step")``;
8.2.1 ``gpu_cell("decode_step", "mbu")``; 8.2.3 ``gpu_cell("prefill_chunks")``; 8.3.1
``gpu_cell("paged_vs_contiguous")``; 8.4.2 ``gpu_cell("kv_formats")``; 8.4.3
``gpu_cell("host_copy")``; 8.5.2 ``gpu_cell("verify_cost")``; 8.6.3 ``gpu_cell("efficiency")``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from inferlab import roofline
from inferlab._validate import one_of
from inferlab.datasets import published
from inferlab.gpu import EXPERIMENTS, cuda_available, run, torch_available
from inferlab.gpu.device import recorded
from inferlab.gpu.kernel_runs import crossover
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.units import GB, MiB

from ..prose import number_table, readable_name

from . import COLORS, caption, new_figure

CELLS: dict[str, tuple[str, ...]] = {  # cell -> experiments it measures
    **{name: (name,) for name in EXPERIMENTS},
    "efficiency": ("decode_step", "prefill_chunks"),
}
VIEWS = {"decode_step": ("time", "mbu")}
PUBLISHED = {  # experiment -> the chapter's table in data/published/
    "decode_step": "batch_sweep_8_1", "prefill_chunks": "chunk_times_8_2_3",
    "kv_formats": "kv_formats_fit_8_4_2", "verify_cost": "verify_cost_8_5_2",
}
TOPICS = {  # experiment -> what its numbers time, for a cell that shows several experiments
    "decode_step": "the decode steps", "prefill_chunks": "the prefill pieces",
}
CHAPTER_CARD = ACCELERATORS["rtx-pro-6000"]
QWEN = MODELS["qwen3-8b"]


@dataclass(frozen=True)
class CellData:
    """What a GPU cell shows: rows, where they come from ('measured' | 'recorded' | 'published' | 'prediction')."""

    experiment: str
    source: str
    rows: pd.DataFrame
    where: str  # a path, a table name, or a short explanation

    def describe(self) -> str:
        """Where this experiment's numbers come from, as a phrase (``gpu_cell`` makes the sentence)."""
        if self.source == "prediction":
            return f"the model's prediction alone (nothing is recorded, and {self.where})"
        what = {"measured": "a measurement made just now", "recorded": "our recorded measurement",
                "published": "the chapter's published numbers"}[self.source]
        gpu = f" ({self.rows['gpu'].iloc[0]}, {self.rows['date'].iloc[0]})" if self.source != "published" else ""
        return f"{what}{gpu}, from {self.where}"

    def source_phrase(self) -> str:
        """What kind of numbers these are and from which device, without the file ('our recorded measurement (...)')."""
        return self.describe().rsplit(", from ", 1)[0]


def describe_all(data: list[CellData]) -> str:
    """One phrase for a cell's experiments: one source named once, each experiment's topic with its file."""
    if len(data) == 1:
        return data[0].describe()
    named = [(d, TOPICS.get(d.experiment, d.experiment.replace("_", " "))) for d in data]
    phrases = {d.source_phrase() for d in data}
    if len(phrases) == 1 and "prediction" not in {d.source for d in data}:
        return f"{data[0].source_phrase()} " + " and ".join(f"for {t} ({d.where})" for d, t in named)
    return "; and ".join(f"for {t}, {d.describe()}" for d, t in named)


def no_gpu_reason() -> str | None:
    """Why this machine cannot measure ('torch is not installed', 'torch sees no CUDA device'), or None if it can."""
    if not torch_available():
        return "torch is not installed"
    if not cuda_available():
        return "torch sees no CUDA device"
    return None


def cell_data(experiment: str, measure: bool = False, preset: str = "quick",
              measured_dir: Path | None = None) -> CellData:
    """Rows for one experiment: measured now if ``measure``, else ours recorded, else the chapter's, else empty."""
    one_of("experiment", experiment, EXPERIMENTS)
    if measure:
        rows, path = run(experiment, preset)
        return CellData(experiment, "measured", rows, str(path))
    rec = recorded(experiment, measured_dir)
    if rec is not None:
        return CellData(experiment, "recorded", rec[0], str(rec[1]))
    if experiment in PUBLISHED:
        name = PUBLISHED[experiment]
        return CellData(experiment, "published", published(name), f"data/published/{name}.csv")
    return CellData(experiment, "prediction", pd.DataFrame(), "the chapter prints no measurement of it")


def gpu_cell(cell: str, view: str | None = None, measure: bool | None = None, preset: str = "quick",
             measured_dir: Path | None = None, show_table: bool = True) -> Figure:
    """Measure (CUDA present) or show the recorded numbers of ``cell``, beside the model's prediction; one line says which."""
    one_of("cell", cell, CELLS)
    if view is not None:
        one_of("view", view, VIEWS.get(cell, ()))
    reason = no_gpu_reason()
    can = reason is None if measure is None else bool(measure)
    if can and reason is not None:
        raise ValueError(f"measure must be False or None here ({reason})")
    data = [cell_data(e, can, preset, measured_dir) for e in CELLS[cell]]
    lead = "This cell shows" if can else f"No GPU here ({reason}), so this cell shows"
    print(f"{lead} {describe_all(data)}.")
    if show_table:
        _show(data)
    draw = _DRAW[cell]
    return draw(*data, view=view) if cell == "decode_step" else draw(*data)


def _show(data: list[CellData]) -> None:
    from IPython.display import display

    for d in data:
        if not d.rows.empty:
            meta = ["gpu", "driver", "torch", "date", "card", "peak_hbm_bandwidth_Bps", "peak_bf16_flops",
                    "host_link_Bps", "experiment"]
            rows = number_table(d.rows.drop(columns=[c for c in meta if c in d.rows]))
            display(rows.rename(columns=readable_name).style.hide(axis="index"))


# ---- drawings ---------------------------------------------------------------------------------------
def _label(d: CellData) -> str:
    return {"measured": "measured", "recorded": "recorded", "published": "chapter (RTX PRO 6000)"}.get(d.source, "")


def _decode_prediction(batches: np.ndarray, context: int = 2048) -> np.ndarray:
    """Roofline step time of Qwen3-8B on the chapter's card (s): reads at full bandwidth."""
    return np.array([roofline.step_read_bytes(int(b), context, QWEN.matrix_weight_bytes(), QWEN.kv_bytes_per_token())
                     / CHAPTER_CARD.hbm_bandwidth for b in batches])


#: How each decode path is drawn and named (``inferlab.gpu.model_runs.DECODE_PATHS``).
PATH_STYLE = {"eager": "s--", "graph": "o-", "compiled": "^--", "graph+compiled": "D-"}
PATH_LABEL = {"eager": "eager", "graph": "CUDA graphs", "compiled": "compiled",
              "graph+compiled": "compiled + CUDA graphs"}


def decode_paths(rows: pd.DataFrame) -> pd.Series:
    """Each decode_step row's path: its ``path`` column, else read from ``cuda_graphs`` and ``compiled``."""
    if "path" in rows and rows["path"].notna().all():
        return rows["path"].astype(str)
    g = rows["cuda_graphs"].astype(bool) if "cuda_graphs" in rows else pd.Series(False, index=rows.index)
    c = rows["compiled"].astype(bool) if "compiled" in rows else pd.Series(False, index=rows.index)
    return pd.Series(np.where(c, np.where(g, "graph+compiled", "compiled"), np.where(g, "graph", "eager")),
                     index=rows.index)


def draw_decode(d: CellData, view: str | None = None) -> Figure:
    """Decode step time (or MBU) against batch: measured/recorded lines per context and graphs, chapter's points."""
    fig, ax = new_figure(width=7, height=3.4)
    col = "mbu" if view == "mbu" else "time"
    if d.source == "published":
        y = d.rows["decode_mbu"] if col == "mbu" else d.rows["decode_step_s"] * 1e3
        ax.plot(d.rows["batch"], y, "o-", color=COLORS["decode"], label=_label(d))
        if col == "time":
            b = np.geomspace(1, 64, 20)
            ax.plot(b, _decode_prediction(b) * 1e3, "--", color=COLORS["weights"], label="roofline (reads at peak)")
    elif not d.rows.empty:
        rows = d.rows.assign(path=decode_paths(d.rows))
        for (ctx, path), grp in rows.groupby(["context", "path"], sort=False):
            y = grp["mbu"] if col == "mbu" else grp["step_s"] * 1e3
            ax.plot(grp["batch"], y, PATH_STYLE.get(path, "x"), label=f"L={ctx}, {PATH_LABEL.get(path, path)}")
            if col == "time" and grp["predicted_s"].notna().all() and path == "graph":
                ax.plot(grp["batch"], grp["predicted_s"] * 1e3, ":", color=COLORS["weights"], label=f"roofline L={ctx}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (requests per decode step)")
    ax.set_ylabel("MBU (fraction of peak bandwidth)" if col == "mbu" else "decode step (ms)")
    if col == "mbu":
        ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    return caption(fig, "Decode step of a Qwen3-8B-shaped model: " + ("memory bandwidth utilization" if col == "mbu"
                                                                     else "time per step") + " against batch.")


def draw_prefill(d: CellData) -> Figure:
    """Chunk time against cached tokens (first vs last chunk) beside FLOP at peak."""
    fig, ax = new_figure(width=7, height=3.2)
    if d.source == "published":
        ax.bar(d.rows["chunk"], d.rows["median_time_s"] * 1e3, color=COLORS["prefill"], label=_label(d))
        pred = [QWEN.flops(int(n), int(h)) / CHAPTER_CARD.peak_bf16_flops * 1e3
                for n, h in zip(d.rows["new_tokens"], d.rows["cached_tokens"])]
        ax.plot(d.rows["chunk"], pred, "D", color=COLORS["weights"], label="FLOP at peak")
        ax.set_ylabel("512-token chunk (ms)")
    elif not d.rows.empty:
        for c, grp in d.rows.groupby("chunk"):
            ax.plot(grp["cached"], grp["time_s"] * 1e3, "o-", label=f"chunk {c}")
            if grp["predicted_s"].notna().all():
                ax.plot(grp["cached"], grp["predicted_s"] * 1e3, ":", color=COLORS["weights"])
        ax.set_xlabel("tokens already cached")
        ax.set_ylabel("chunk time (ms)")
    ax.legend(fontsize=8)
    return caption(fig, "Prefill chunk time grows with the history it attends to (grey: the same FLOP at peak).")


def draw_paged(d: CellData) -> Figure:
    """Attention time against block size: each attention over paged K/V (the in-place kernel first), contiguous as a line.

    One colour per context: the in-place Triton kernel (``paged``) solid, the gather + SDPA path
    (``gather``, if recorded) dotted, contiguous K/V dashed across; the prediction is the same
    bytes at peak bandwidth (any block size).
    """
    fig, ax = new_figure(width=7, height=3.2)
    if d.rows.empty:
        kv = 32 * 4096 * QWEN.kv_bytes_per_token() / QWEN.n_layers  # batch 32, 4K context, one layer
        ax.axhline(kv / CHAPTER_CARD.hbm_bandwidth * 1e3, color=COLORS["weights"], ls="--",
                   label="one layer's KV at peak bandwidth (any block size)")
        ax.set_xlim(4, 128)
    else:
        rows = d.rows
        if "attention_ran" not in rows:
            rows = rows.assign(attention_ran=np.where(rows["layout"] == "contiguous", "contiguous", "paged"))
        styles = {"paged": ("o-", "paged, in place (Triton)"), "gather": ("s:", "gather + SDPA")}
        for ctx, grp in rows.groupby("context"):
            color = None
            for name in [*styles, *sorted(set(grp["attention_ran"]) - {*styles, "contiguous"})]:
                run = grp[(grp["layout"] == "paged") & (grp["attention_ran"] == name)].sort_values("block_size")
                if run.empty:
                    continue
                style, label = styles.get(name, ("x-", name))
                line = ax.plot(run["block_size"], run["time_s"] * 1e3, style, color=color, label=f"{label}, L={ctx}")[0]
                color = line.get_color()
            contiguous = grp.loc[grp["layout"] == "contiguous", "time_s"]
            if not contiguous.empty:
                ax.axhline(float(contiguous.iloc[0]) * 1e3, color=color, ls="--", lw=1, label=f"contiguous, L={ctx}")
            if grp["predicted_s"].notna().any():
                ax.axhline(float(grp["predicted_s"].dropna().iloc[0]) * 1e3, color=COLORS["weights"], ls=":", lw=1,
                           label=f"KV at peak bandwidth, L={ctx}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size (tokens)")
    ax.set_ylabel("attention time (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return caption(fig, "Decode attention reading K/V in place from shuffled blocks, against contiguous K/V.")


def draw_kv_formats(d: CellData) -> Figure:
    """Attention time against context per KV format, with the crossover where compression starts to pay."""
    fig, ax = new_figure(width=7, height=3.2)
    if d.source == "published":
        ctx = np.linspace(0, 16384, 50)
        for _, r in d.rows.iterrows():
            ax.plot(ctx, (r["fixed_s"] + r["per_token_s"] * ctx) * 1e3, label=f"{r['format']} (H100 fit, chapter)")
        fits = d.rows.set_index("format")
        x = (fits.loc["fp8", "fixed_s"] - fits.loc["bf16", "fixed_s"]) / (
            fits.loc["bf16", "per_token_s"] - fits.loc["fp8", "per_token_s"])
        ax.axvline(x, color=COLORS["deadline"], ls="--", lw=1, label=f"crossover {x:,.0f} tokens")
        ax.set_ylabel("time per output token (ms)")
    elif not d.rows.empty:
        rows = d.rows if "attention_ran" in d.rows else d.rows.assign(attention_ran="sdpa")
        fit = "paged" if (rows["attention_ran"] == "paged").any() else "sdpa"
        colors = {}
        for (f, a), grp in rows.groupby(["format", "attention_ran"]):
            label = f"{f}, in-kernel conversion" if a == "paged" else f"{f}, dequantized copy + SDPA"
            line = ax.plot(grp["context"], grp["time_s"] * 1e3, "o-" if a == "paged" else "s:", label=label,
                           color=colors.get(f))[0]
            colors[f] = line.get_color()
            if a == fit and grp["predicted_s"].notna().all():
                ax.plot(grp["context"], grp["predicted_s"] * 1e3, ":", color=line.get_color(), lw=1)
        x = crossover(rows, attention=fit).set_index("format")["crossover_tokens"]
        how = "in-kernel conversion" if fit == "paged" else "dequantized copy"
        ax.set_title(f"crossover vs bf16 ({how}): " + ", ".join(f"{f} {v:,.0f}" if np.isfinite(v) else f"{f} never"
                                                                for f, v in x.items() if f != "bf16"), fontsize=9)
        ax.set_ylabel("one layer's attention (ms)")
    ax.set_xlabel("context tokens")
    ax.legend(fontsize=8)
    if d.source == "published":
        return caption(fig, "Compressed KV reads fewer bytes but pays a conversion: it wins only past a context length.")
    return caption(fig, "One layer's attention over KV stored compressed: converted inside the kernel (solid) or "
                        "into a full copy first (dotted). Weights are not read here: not the whole step's crossover.")


def draw_host_copy(d: CellData) -> Figure:
    """Copy bandwidth against size (pinned, pageable) and a prefetch pass with 1 and 2 buffers."""
    fig, (ax, bx) = new_figure(1, 2, width=8, height=3.2)
    link = CHAPTER_CARD.host_link_bandwidth
    if d.rows.empty:
        sizes = np.geomspace(MiB, 1024 * MiB, 5)
        ax.plot(sizes / MiB, np.full(5, link / GB), "--", color=COLORS["weights"], label="PCIe Gen5 x16 nominal")
        t = 2592 * MiB / link * 1e3
        bx.bar(["PCIe Gen5", "NVLink-C2C"], [t, 2592 * MiB / ACCELERATORS["gh200"].host_link_bandwidth * 1e3],
               color=COLORS["kv"])
        bx.set_ylabel("copy 9 FFNs (ms), nominal")
    else:
        cp = d.rows[d.rows["part"] == "copy"]
        for k, grp in cp.groupby("kind"):
            ax.plot(grp["bytes"] / MiB, grp["bandwidth_Bps"] / GB, "o-", label=k)
        if cp["predicted_s"].notna().all():
            ax.axhline((cp["bytes"] / cp["predicted_s"]).iloc[0] / GB, ls="--", color=COLORS["weights"], label="link nominal")
        pf = d.rows[d.rows["part"] == "prefetch"]
        bx.bar(pf["kind"], pf["time_s"] * 1e3, color=COLORS["kv"], label="measured")
        if pf["predicted_s"].notna().any():
            bx.plot(pf["kind"], pf["predicted_s"] * 1e3, "D", color=COLORS["weights"], label="predicted")
        bx.set_ylabel("one pass (ms)")
        bx.legend(fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("copy size (MiB)")
    ax.set_ylabel("host-to-device (GB/s)")
    ax.legend(fontsize=8)
    return caption(fig, "Host-to-device copies: bandwidth by size, and a layer pass whose weights come from the host.")


def draw_verify(d: CellData) -> Figure:
    """Verify time over decode time against positions verified, beside the roofline's ratio."""
    fig, ax = new_figure(width=7, height=3.2)
    k = np.arange(1, 17)
    pred = [roofline.step_time(1, QWEN.flops(int(n), 2048, logits=int(n)), 2048, QWEN.matrix_weight_bytes(),
                               QWEN.kv_bytes_per_token(), CHAPTER_CARD.peak_bf16_flops, CHAPTER_CARD.hbm_bandwidth)
            for n in k]
    ax.plot(k, np.array(pred) / pred[0], ":", color=COLORS["weights"], label="roofline (RTX PRO 6000)")
    if not d.rows.empty:
        ratio = d.rows["time_s"] / d.rows["decode_s"]
        ax.plot(d.rows["positions"], ratio, "o-" if d.source != "published" else "D", color=COLORS["decode"],
                label=_label(d))
    ax.axhline(1, color=COLORS["queue"], lw=1)
    ax.set_ylim(0, 1.15 * ax.dataLim.y1)  # from zero: "about one decode step" reads as it is, not as a 10 % zoom
    ax.set_xlabel("positions verified in one step")
    ax.set_ylabel("time / one decode step")
    ax.legend(fontsize=8)
    return caption(fig, "Verifying several draft positions costs about one decode step: the weights are read once.")


def draw_efficiency(dec: CellData, pre: CellData) -> Figure:
    """Decode MBU by batch and prefill MFU: ours (or the chapter's) as bars."""
    fig, (ax, bx) = new_figure(1, 2, width=8, height=3.2)
    if dec.source == "published":
        ax.bar(dec.rows["batch"].astype(str), dec.rows["decode_mbu"], color=COLORS["decode"], label=_label(dec))
        bx.bar(dec.rows["batch"].astype(str), dec.rows["prefill_mfu"], color=COLORS["prefill"], label=_label(dec))
    else:
        rows = dec.rows.assign(path=decode_paths(dec.rows))
        best = rows.groupby(["batch", "path"])["mbu"].max().unstack()
        best = best[[p for p in PATH_STYLE if p in best.columns]]
        width = 0.8 / max(len(best.columns), 1)
        for i, p in enumerate(best.columns):
            ax.bar(np.arange(len(best)) + width * i, best[p], width, label=PATH_LABEL[p])
        ax.set_xticks(np.arange(len(best)) + width * (len(best.columns) - 1) / 2, best.index.astype(str))
        if not pre.rows.empty and "mfu" in pre.rows:
            mfu = pre.rows.groupby("chunk")["mfu"].max()
            bx.bar(mfu.index.astype(str), mfu, color=COLORS["prefill"], label=_label(pre))
    ax.set_xlabel("decode batch")
    ax.set_ylabel("MBU")
    bx.set_xlabel("batch" if dec.source == "published" else "prefill chunk (tokens)")
    bx.set_ylabel("MFU")
    for a in (ax, bx):
        a.set_ylim(0, 1)
        a.legend(fontsize=8)
    return caption(fig, "Achieved fraction of the card's peaks: decode bandwidth (MBU) and prefill compute (MFU).")


_DRAW = {
    "decode_step": draw_decode, "prefill_chunks": draw_prefill, "paged_vs_contiguous": draw_paged,
    "kv_formats": draw_kv_formats, "host_copy": draw_host_copy, "verify_cost": draw_verify,
    "efficiency": draw_efficiency,
}
