"""Drawings and explorers of section 8.6: queues under load, goodput, the configuration plane, Amdahl's law."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, LogLocator, NullLocator, ScalarFormatter

from inferlab import example, serving
from inferlab._validate import one_of
from inferlab.hardware import ACCELERATORS, NVLINK_C2C, PCIE_GEN4_X16, PCIE_GEN5_X16
from inferlab.units import GiB

from ..widgets import Explorer, choice, explore, float_slider, int_slider, log_slider
from . import COLORS, InPlace, caption, deadline_line, new_figure, refresh_legend
from .ticks import InView, few_ticks

#: Where the shared prefix's KV waits before the batch: on the device, or in host memory behind a link.
PREFIX_LINKS: dict[str, float | None] = {"on device": None, "host, PCIe Gen4 x16": PCIE_GEN4_X16,
                                         "host, PCIe Gen5 x16": PCIE_GEN5_X16, "host, NVLink-C2C": NVLINK_C2C}
POLICY_COLORS = {"one-at-a-time": COLORS["queue"], "continuous": COLORS["decode"], "chunked": COLORS["decode"]}
POLICY_LABELS = {"one-at-a-time": "one at a time", "continuous": "continuous (whole prompts)",
                 "chunked": "continuous batching"}


def load_view(records: pd.DataFrame, deadline_s: float, title: str) -> Figure:
    """Two panels: each request's time in the system against its arrival; requests in the system over time."""
    fig, (ax1, ax2) = new_figure(1, 2, width=8.0, height=3.2)
    served = bool(records["finish_s"].notna().any())
    _LoadView(ax1, ax2 if served else None).set(records, deadline_s, title)
    if not served:
        ax2.text(0.5, 0.5, "no request was served", ha="center", va="center", transform=ax2.transAxes)
    return fig


class _LoadView(InPlace):
    """``load_view``'s artists, built once and redrawn in place by ``set`` (a slider move keeps them).

    ``ax2`` is None when no request was served: the right panel then holds only a note.
    """

    def __init__(self, ax1, ax2) -> None:
        self.ax1, self.ax2, self.fig = ax1, ax2, ax1.figure
        # marker lines, not scatter: the same dots at a fifth of the drawing cost of a redraw
        self.on_time, = ax1.plot([], [], "o", ms=4.2, color=COLORS["decode"], label="on time")
        self.late, = ax1.plot([], [], "o", ms=4.2, color=COLORS["deadline"], label="late")
        self.turned, = ax1.plot([], [], "x", ms=4.5, mew=1.5, color="#444444")
        self.deadline = deadline_line(ax1, 1.0, vertical=False)
        ax1.set(xlabel="scheduled arrival (s)", ylabel="time in system (s)")
        few_ticks(ax1, x=5, y=5)
        if ax2 is not None:
            self.curve, = ax2.step([], [], where="post", color=COLORS["prefill"], lw=1.2)
            self.mean = ax2.axhline(0.0, color=COLORS["highlight"], ls=":", lw=1.5)
            ax2.set(xlabel="time (s)", ylabel="requests in system")
            few_ticks(ax2, x=6, y=None)
            few_ticks(ax2, x=None, y=5, integer=True)
        self.keep_on(self.fig)

    def set(self, records: pd.DataFrame, deadline_s: float, title: str) -> bool:
        """Show ``records``; False (nothing changed) where they need the other picture (someone served or not)."""
        status, arrival = records["status"].to_numpy(), records["arrival_s"].to_numpy(float)
        latency, served = records["latency_s"].to_numpy(float), records["finish_s"].notna().to_numpy()
        if served.any() != (self.ax2 is not None):
            return False
        late = latency > deadline_s
        self.on_time.set_data(arrival[served & ~late], latency[served & ~late])
        self.late.set_data(arrival[served & late], latency[served & late])
        turned = np.isin(status, ["rejected", "redirected"])
        self.turned.set(data=(arrival[turned], np.zeros(turned.sum())),
                        label="turned away" if turned.any() else "_turned away")
        self.deadline.set_ydata([deadline_s] * 2)
        self.ax1.relim()
        self.ax1.autoscale_view()
        refresh_legend(self.ax1, loc="upper left")
        if self.ax2 is not None:
            t, n = serving.in_system_curve(records)
            self.curve.set_data(t, n)
            mean_n = serving.mean_in_system(records)
            self.mean.set_ydata([mean_n] * 2)
            self.ax2.set_title(f"dotted: time average, {mean_n:.1f}", fontsize=9,
                               color=COLORS["highlight"])  # a legend costs more
            self.ax2.relim()
            self.ax2.autoscale_view()
        caption(self.fig, title)
        return True


def _arrivals(rate_per_s: float, kv_budget_gib: float, deadline_s: float, policy: str,
              admission_control: bool) -> tuple[pd.DataFrame, str]:
    reqs = serving.poisson_requests(rate_per_s, 40, example.SHORT.prompt_tokens, 64, seed=7)
    engine = serving.EngineSetup(policy, kv_budget_bytes=kv_budget_gib * GiB)
    records = serving.serve(reqs, engine, deadline_s=deadline_s,
                            admission_control="reject" if admission_control else None)
    # the numbers of the title, not the whole serving.summarize_served (percentiles the figure does not show)
    done = records.loc[records["status"] == "done", "latency_s"]
    each = f", {done.mean():.1f} s each" if len(done) else ""
    title = (f"{rate_per_s:g} requests/s, {POLICY_LABELS[policy]}: {int(records['on_time'].sum())} of 40 on time; "
             f"{serving.mean_in_system(records):.1f} in the system on average{each}")
    return records, title


def arrivals_view(rate_per_s: float = 4.0, kv_budget_gib: float = 12.0, deadline_s: float = 7.0,
                  policy: str = "chunked", admission_control: bool = False) -> Figure:
    """Forty short requests of the running example arriving as a Poisson stream, served by one policy."""
    records, title = _arrivals(rate_per_s, kv_budget_gib, deadline_s, policy, admission_control)
    return load_view(records, deadline_s, title)


def update_arrivals(fig: Figure, rate_per_s: float = 4.0, kv_budget_gib: float = 12.0, deadline_s: float = 7.0,
                    policy: str = "chunked", admission_control: bool = False) -> bool:
    """Redraw an ``arrivals_view`` figure in place for new knob values (the explorer's slider path)."""
    records, title = _arrivals(rate_per_s, kv_budget_gib, deadline_s, policy, admission_control)
    return _LoadView.redraw(fig, records, deadline_s, title)


def goodput_view(ours: pd.DataFrame, chapter: pd.DataFrame | None = None) -> Figure:
    """Figures 8-33/8-34 side by side: completion throughput and goodput per arrival rate and policy."""
    fig, axes = new_figure(1, 2, width=8.0, height=3.3, sharey=True)
    conditions = list(ours.index)
    x = np.arange(len(conditions))
    short = {"one-at-a-time": "single", "continuous": "batched", "chunked": "batched"}
    labels = [f"{rate:g}/s\n{short[p]}" for rate, p in conditions]
    for ax, col, name in zip(axes, ("completion_rps", "goodput_rps"), ("completion throughput", "goodput")):
        width = 0.38 if chapter is not None else 0.6
        ax.bar(x - (width / 2 if chapter is not None else 0), ours[col], width,
               color=[POLICY_COLORS[p] for _, p in conditions], edgecolor="#333333", lw=0.6, label="our simulation")
        if chapter is not None:
            theirs = [chapter.loc[(rate, "continuous" if p == "chunked" else p), col]
                      if (rate, "continuous" if p == "chunked" else p) in chapter.index else np.nan
                      for rate, p in conditions]
            ax.bar(x + width / 2, np.nan_to_num(theirs, nan=0.0), width, color="white", edgecolor="#333333",
                   hatch="//", lw=0.6, label="experiment 8-9 (median)")
            for xi, v in zip(x, theirs):
                if np.isnan(v):
                    ax.text(xi + width / 2, 0.03, "n/a", rotation=90, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_title(name)
    axes[0].set_ylabel("requests per second")
    axes[0].set_ylim(0, max(ours["completion_rps"].max(), 2.4) * 1.3)
    handles = [Patch(facecolor=POLICY_COLORS[p], edgecolor="#333333", label=f"ours, {short[p]}")
               for p in dict.fromkeys(p for _, p in conditions)]
    if chapter is not None:
        handles.append(Patch(facecolor="white", edgecolor="#333333", hatch="//", label="experiment 8-9 (median)"))
    axes[1].legend(handles=handles, loc="upper left")
    return caption(fig, "Figures 8-33 and 8-34: completed requests per second (left) and correct answers within "
                        "3 s per second (right), 16-request windows, timed from the scheduled arrival; single = "
                        "one at a time, batched = continuous batching; n/a = not printed")


def goodput_windows_view(windows: pd.DataFrame, chapter: pd.DataFrame | None = None) -> Figure:
    """Figures 8-33 and 8-34 as the chapter draws them: per condition a bar for the median over the windows and a dot
    for each window (``serving.goodput_windows``), completion throughput left and goodput right; the chapter's printed
    medians (``chapter``, indexed by rate and policy) as black dashes where it printed them."""
    fig, axes = new_figure(1, 2, width=8.0, height=3.4, sharey=True)
    groups = dict(list(windows.groupby(level=["arrival_rate_per_s", "policy"], sort=False)))
    medians = pd.DataFrame({k: g.median() for k, g in groups.items()}).T
    conditions = list(groups)
    x = np.arange(len(conditions))
    short = {"one-at-a-time": "one at\na time", "continuous": "batched", "chunked": "batched"}
    for ax, col, name in zip(axes, ("completion_rps", "goodput_rps"), ("completed requests", "correct within 3 s")):
        ax.bar(x, medians[col], 0.6, color=[POLICY_COLORS[p] for _, p in conditions], alpha=0.55,
               edgecolor="#333333", lw=0.6)
        for xi, (rate, policy) in zip(x, conditions):
            values = groups[(rate, policy)][col].to_numpy()
            offsets = np.linspace(-0.15, 0.15, len(values)) if len(values) > 1 else np.zeros(1)
            ax.plot(xi + offsets, values, "o", ms=4.5, color="#222222", mfc="white", mew=1.0, zorder=3)
            key = (rate, "continuous" if policy == "chunked" else policy)
            if chapter is not None and key in chapter.index and np.isfinite(chapter.loc[key, col]):
                ax.plot([xi], [chapter.loc[key, col]], "_", ms=22, mew=2.2, color="black", zorder=4)
        ax.set_xticks(x, [f"{rate:g}/s\n{short[p]}" for rate, p in conditions], fontsize=8)
        ax.set_title(name, fontsize=10)
    axes[0].set_ylabel("requests per second")
    top = max(windows[["completion_rps", "goodput_rps"]].max().max(),
              0.0 if chapter is None else np.nanmax(chapter[["completion_rps", "goodput_rps"]].to_numpy(float)))
    axes[0].set_ylim(0, 1.35 * top)
    handles = [Patch(facecolor=POLICY_COLORS[p], alpha=0.55, edgecolor="#333333", label=f"{POLICY_LABELS[p]}, median")
               for p in dict.fromkeys(p for _, p in conditions)]
    handles.append(Line2D([], [], ls="", marker="o", ms=4.5, color="#222222", mfc="white", label="one window (ours)"))
    if chapter is not None:
        handles.append(Line2D([], [], ls="", marker="_", ms=14, mew=2.2, color="black",
                              label="experiment 8-9, median"))
    axes[1].legend(handles=handles, loc="upper left", fontsize=8)
    return caption(fig, "Figures 8-33 and 8-34: completed requests per second (left) and correct answers within 3 s "
                        "per second (right) in our simulation, each dot one 16-request window, each bar their median, "
                        "timed from the scheduled arrival; black dashes: experiment 8-9's medians, where the "
                        "chapter printed one")


def goodput_explorer_view(rate_per_s: float = 4.0, deadline_s: float = 3.0, accuracy: float = 7 / 8) -> Figure:
    """Completion throughput and goodput of both policies at one arrival rate, deadline and accuracy."""
    table = serving.goodput_at(rate_per_s, deadline_s, accuracy)
    fig, ax = new_figure(width=6.0, height=3.0)
    _Goodput(ax, list(table.index)).set(table, rate_per_s, deadline_s, accuracy)
    return fig


def update_goodput(fig: Figure, rate_per_s: float = 4.0, deadline_s: float = 3.0, accuracy: float = 7 / 8) -> bool:
    """Redraw a ``goodput_explorer_view`` figure in place (the explorer's slider path)."""
    return _Goodput.redraw(fig, serving.goodput_at(rate_per_s, deadline_s, accuracy), rate_per_s, deadline_s, accuracy)


class _Goodput(InPlace):
    """``goodput_explorer_view``'s bars for a fixed set of policies, their heights set in place by ``set``."""

    def __init__(self, ax, policies: list[str]) -> None:
        self.ax, self.policies = ax, policies
        x, zeros = np.arange(len(policies)), np.zeros(len(policies))
        self.bars = (ax.bar(x - 0.2, zeros, 0.4, color=COLORS["queue"], label="completion throughput"),
                     ax.bar(x + 0.2, zeros, 0.4, color=COLORS["decode"], label="goodput"))
        ax.set_xticks(x, [POLICY_LABELS[p] for p in policies])
        ax.set_ylabel("requests per second")
        ax.legend(loc="upper left")
        few_ticks(ax, x=None, y=4)
        # each bar's height written on it, so that the numbers can be read as well as compared
        self.values = [[ax.annotate("", (bar.get_x() + bar.get_width() / 2, 0), xytext=(0, 2),
                                    textcoords="offset points", ha="center", va="bottom", fontsize=10)
                        for bar in container] for container in self.bars]
        self.keep_on(ax.figure)

    def set(self, table: pd.DataFrame, rate_per_s: float, deadline_s: float, accuracy: float) -> bool:
        """Show ``table``; False (nothing changed) if it holds other policies than the figure."""
        if list(table.index) != self.policies:
            return False
        for container, texts, col in zip(self.bars, self.values, ("completion_rps", "goodput_rps")):
            for bar, text, height in zip(container, texts, table[col]):
                bar.set_height(height)
                text.set_text(f"{height:.2f}")
                text.xy = (bar.get_x() + bar.get_width() / 2, height)
        self.ax.relim()
        self.ax.autoscale_view()
        caption(self.ax.figure, f"{rate_per_s:g} requests/s, deadline {deadline_s:g} s, accuracy {accuracy:.0%}: "
                                "medians of three 16-request windows")
        return True


def config_plane_view(table: pd.DataFrame, kv_budget_bytes: float, deadline_s: float, title: str) -> Figure:
    """Figure 8-35: each configuration at (KV bytes, total time), the feasible corner shaded."""
    fig, ax = new_figure(width=6.5, height=4.0)
    _ConfigPlane(ax, list(table.index)).set(table, kv_budget_bytes, deadline_s, title)
    return fig


class _ConfigPlane(InPlace):
    """``config_plane_view``'s artists for a fixed set of configurations, redrawn in place by ``set``."""

    def __init__(self, ax, names: list[str]) -> None:
        self.ax, self.names = ax, names
        self.corner = ax.fill_between([0, 1], 0, 1, color=COLORS["decode"], alpha=0.12, label="fits and on time")
        self.budget = deadline_line(ax, 1.0, label="KV budget")
        self.deadline = ax.axhline(1.0, color=COLORS["deadline"], ls=":", lw=1.2, label="deadline")
        self.points = ax.scatter(np.zeros(len(names)), np.zeros(len(names)), s=50, zorder=3)
        self.labels = [ax.annotate(name, (0, 0), xytext=(6, 4), textcoords="offset points", fontsize=10,
                                   fontweight="bold") for name in names]
        ax.set(xlabel="KV and auxiliary buffers (GiB)", ylabel="whole batch done (s)")
        ax.legend(loc="lower right", fontsize=8)
        few_ticks(ax, x=5, y=5)
        self.keep_on(ax.figure)

    def set(self, table: pd.DataFrame, kv_budget_bytes: float, deadline_s: float, title: str) -> bool:
        """Show ``table``; False (nothing changed) if it names other configurations than the figure."""
        if list(table.index) != self.names:
            return False
        gib, total = (table["kv_bytes"] / GiB).to_numpy(), table["total_s"].to_numpy()
        budget = kv_budget_bytes / GiB
        self.corner.set_data([0, budget], 0, deadline_s)
        self.budget.set_xdata([budget] * 2)
        self.deadline.set_ydata([deadline_s] * 2)
        ok = (table["fits"] & table["on_time"]).to_numpy()
        self.points.set(offsets=np.column_stack([gib, total]), color=np.where(ok, COLORS["decode"], "#555555"))
        for label, x, y in zip(self.labels, gib, total):
            label.xy = (x, y)
        self.ax.set(xlim=(0, max(gib.max(), budget) * 1.15), ylim=(0, max(total.max(), deadline_s) * 1.15))
        caption(self.ax.figure, title)
        return True


def config_view(kv_budget_gib: float = 12.0, deadline_s: float = 7.0, output_tokens: int = 256,
                tokens_per_round: float = 3.0, card: str = "rtx-pro-6000", prefix_link: str = "on device") -> Figure:
    """The chapter's configurations A-D for sixteen long requests, with D's tokens per round and the card as knobs.

    On a card other than the RTX PRO 6000 the times are transferred from its measurements (``serving.round_time``).
    ``prefix_link``: where the cached shared prefix waits ('on device', or a link it is copied over first).
    """
    table, title = _configs(kv_budget_gib, deadline_s, output_tokens, tokens_per_round, card, prefix_link)
    return config_plane_view(table, kv_budget_gib * GiB, deadline_s, title)


def update_config(fig: Figure, kv_budget_gib: float = 12.0, deadline_s: float = 7.0, output_tokens: int = 256,
                  tokens_per_round: float = 3.0, card: str = "rtx-pro-6000", prefix_link: str = "on device") -> bool:
    """Redraw a ``config_view`` figure in place (the explorer's slider path)."""
    table, title = _configs(kv_budget_gib, deadline_s, output_tokens, tokens_per_round, card, prefix_link)
    return _ConfigPlane.redraw(fig, table, kv_budget_gib * GiB, deadline_s, title)


def _configs(kv_budget_gib: float, deadline_s: float, output_tokens: int, tokens_per_round: float, card: str,
             prefix_link: str) -> tuple[pd.DataFrame, str]:
    """``config_view``'s table of configurations A-D and its caption."""
    one_of("prefix_link", prefix_link, PREFIX_LINKS)
    accelerator = ACCELERATORS[one_of("card", card, ACCELERATORS)]
    configs = {k: v for k, v in serving.CHAPTER_CONFIGS.items() if k in "ABCD"}  # E is exercise 8-9's
    configs["D"] = serving.ServingConfig(**{**configs["D"].__dict__, "tokens_per_round": tokens_per_round})
    table = serving.evaluate_configs(configs, kv_budget_bytes=kv_budget_gib * GiB, deadline_s=deadline_s,
                                     output_tokens=output_tokens, accelerator=accelerator,
                                     prefix_link_bandwidth=PREFIX_LINKS[prefix_link])
    ok = serving.feasible(table)
    best = f"cheapest feasible: {ok[0]} ({table.loc[ok[0], 'gpu_s_per_good']:.3f} GPU-s per good result)" if ok \
        else "no configuration fits and finishes on time"
    return table, (f"Figure 8-35: where each way of serving sixteen long requests ({output_tokens} outputs each) lands"
                   + ("" if accelerator == serving.MEASURED_ON else f", estimated for the {card}")
                   + ". Across, the memory its KV and auxiliary buffers take on top of the weights and the common "
                     "workspace; up, the seconds until its last answer. The shaded corner is inside both the KV budget "
                     "(dashed) and the deadline (dotted); a point past the dashed line cannot be admitted and sits at "
                     f"the time it would need; {best}.")


class _AmdahlCurves(InPlace):
    """``amdahl_view``'s curves and their limits, redrawn in place by ``set`` (for as many shares as it was built);
    the reader's share (``highlight``) drawn bold with its speed-up at the largest σ written beside it."""

    def __init__(self, ax, n: int) -> None:
        self.ax = ax
        colors = [COLORS["queue"], COLORS["prefill"], COLORS["decode"], COLORS["kv"]][:n]
        self.colors = colors
        self.curves = [ax.plot([], [], color=color, lw=2)[0] for color in colors]
        # the limits 1/(1-f) across the whole width, as one collection (an axhline each re-scales the axes each time)
        self.limits = LineCollection([], colors=colors, linestyles=":", linewidths=1, transform=ax.get_yaxis_transform())
        ax.add_collection(self.limits, autolim=False)
        self.mark = ax.plot([], [], "o", color=COLORS["highlight"], ms=6, zorder=5)[0]
        self.mark_text = ax.annotate("", (1, 1), xytext=(-6, 6), textcoords="offset points", ha="right",
                                     color=COLORS["highlight"], fontsize=10)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(InView(LogLocator(base=2)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_yscale("log")  # limits from 1.25x to 20x, all readable
        ax.yaxis.set_major_locator(FixedLocator([1, 2, 5, 10, 20]))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.set(xlabel="decode speed-up σ", ylabel="whole-task speed-up")
        self.keep_on(ax.figure)

    def set(self, fractions: tuple[float, ...], max_speedup: float, highlight: float | None = None) -> bool:
        if len(fractions) != len(self.curves):
            return False  # another number of curves: a figure of its own
        s = np.geomspace(1, max_speedup, 200)
        for line, f, color in zip(self.curves, fractions, self.colors):
            line.set_data(s, [serving.amdahl_speedup(f, x) for x in s])
            mine = highlight is not None and round(f, 2) == round(highlight, 2)
            line.set(label=f"your f = {f:.0%}" if mine else f"decode share {f:.0%}", lw=3.2 if mine else 1.6,
                     color=COLORS["highlight"] if mine else color, zorder=4 if mine else 2)
        limits = np.array([1 / (1 - f) if f < 1 else np.nan for f in fractions])
        self.limits.set_segments([[(0, y), (1, y)] for y in limits])
        self.limits.set_colors([line.get_color() for line in self.curves])
        if highlight is not None:
            top = serving.amdahl_speedup(highlight, max_speedup)
            self.mark.set_data([max_speedup], [top])
            self.mark_text.set_text(f"{top:.2f}x at σ = {max_speedup:g}")
            self.mark_text.xy = (max_speedup, top)
        self.mark.set_visible(highlight is not None)
        self.mark_text.set_visible(highlight is not None)
        self.ax.set_xlim(1, max_speedup)
        self.ax.set_ylim(0.9, 25)  # fixed: moving f or σ moves the curves, not the axis; the 95 % limit (20x) in view
        refresh_legend(self.ax, loc="upper left")
        return True


def amdahl_view(fractions: tuple[float, ...] = (0.2, 0.5, 0.8), max_speedup: float = 16.0,
                highlight: float | None = None) -> Figure:
    """Figure 8-36: whole-task speed-up against the speed-up of one stage, for several shares of the time."""
    fig, ax = new_figure(width=6.0, height=3.4)
    _AmdahlCurves(ax, len(fractions)).set(fractions, max_speedup, highlight)
    return caption(fig, "Figure 8-36: Amdahl's law; dotted lines are the limits 1/(1-f) as the stage becomes free")


def _explorer_shares(decode_share: float) -> tuple[float, ...]:
    """The chapter's three decode shares and the reader's, in order (once if it is one of them)."""
    return tuple(sorted({0.2, 0.5, 0.8, round(decode_share, 2)}))


def amdahl_explorer_view(decode_share: float = 0.5, max_speedup: float = 16.0) -> Figure:
    """Amdahl's curve for the reader's decode share, marked, beside the chapter's three."""
    return amdahl_view(_explorer_shares(decode_share), max_speedup, highlight=decode_share)


def update_amdahl(fig: Figure, decode_share: float = 0.5, max_speedup: float = 16.0) -> bool:
    """Redraw an ``amdahl_explorer_view`` figure in place (the explorer's path)."""
    return _AmdahlCurves.redraw(fig, _explorer_shares(decode_share), max_speedup, decode_share)


def arrivals_explorer() -> Explorer:
    """Arrival rate, KV budget, deadline and policy for a stream of short requests (8.6.1)."""
    return explore(arrivals_view, update_arrivals,
                   grid=dict(rate_per_s=(0.5, 1, 2, 4, 8, 16), kv_budget_gib=(0.5, 1, 2, 4, 8, 12),
                             deadline_s=(1, 3, 5, 7, 9, 12)),
                   rate_per_s=float_slider("arrival rate", 0.5, 16.0, 4.0, 0.5, unit="req/s"),
                   kv_budget_gib=float_slider("KV budget", 0.5, 12.0, 12.0, 0.5, unit="GiB"),
                   deadline_s=float_slider("deadline", 1.0, 12.0, 7.0, 0.5, unit="s"),
                   policy=choice("policy", [("one at a time", "one-at-a-time"),
                                            ("continuous batching", "chunked")], "chunked"),
                   admission_control=choice("admission control", [("off", False), ("reject if late", True)], False))


def goodput_explorer() -> Explorer:
    """Arrival rate, deadline and accuracy against completion throughput and goodput (8.6.2)."""
    return explore(goodput_explorer_view, update_goodput,
                   grid=dict(deadline_s=(0.5, 1, 2, 3, 4, 5, 6, 8, 10), accuracy=(0, 0.25, 0.5, 0.75, 0.875, 1)),
                   rate_per_s=log_slider("arrival rate", 0, 4, 4.0, base=2, step=0.5, unit="req/s"),
                   deadline_s=float_slider("deadline", 0.5, 10.0, 3.0, 0.5, unit="s"),
                   accuracy=float_slider("accuracy", 0.0, 1.0, 0.875, 0.025))


def config_explorer() -> Explorer:
    """KV budget, deadline, output length, D's tokens per round and the card on the configuration plane (8.6.3)."""
    return explore(config_view, update_config,
                   grid=dict(kv_budget_gib=(2, 4, 9, 9.5, 10, 12, 24), deadline_s=(1, 7, 20), output_tokens=(2, 256, 1024),
                             tokens_per_round=(1, 1.25, 1.5, 2, 3, 6)),
                   kv_budget_gib=float_slider("KV budget", 2.0, 24.0, 12.0, 0.5, unit="GiB"),
                   deadline_s=float_slider("deadline", 1.0, 20.0, 7.0, 0.5, unit="s"),
                   output_tokens=int_slider("output length", 2, 1024, 256, unit="tokens"),
                   tokens_per_round=float_slider("D: tokens per round", 1.0, 6.0, 3.0, 0.25),
                   card=choice("card", list(ACCELERATORS), "rtx-pro-6000"),
                   prefix_link=choice("cached prefix", list(PREFIX_LINKS), "on device"))


def amdahl_explorer() -> Explorer:
    """Share of the task in decode and the largest decode speed-up (8.6.3)."""
    return explore(amdahl_explorer_view, update_amdahl,
                   grid=dict(decode_share=tuple(round(i * 0.05, 2) for i in range(21)),
                             max_speedup=(2, 4, 8, 16, 32, 64)),
                   decode_share=float_slider("decode share f", 0.0, 1.0, 0.5, 0.05),
                   max_speedup=float_slider("largest speed-up", 2.0, 64.0, 16.0, 1.0))
