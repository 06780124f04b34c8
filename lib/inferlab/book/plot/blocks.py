"""Drawings for section 8.3: block tables and the physical pool, sharing, freeing, prefix trees, cache value.

Every drawing takes the real state of the library's objects (``PoolState``, ``RadixCache``,
``PrefixCost``, ``ReplayResult``...) and returns a ``Figure``; nothing here computes a model.

This file is long because section 8.3 has the most figures of the chapter (18 drawings and the state
views its explorers redraw in place); the explorers themselves are in ``blocks_explorers``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import lru_cache

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from inferlab.example import ACCELERATOR, KV_BUDGET_BYTES, LONG, MODEL
from inferlab.kvcache.block_manager import PoolState
from inferlab.kvcache.contiguous import ArenaRun, arena_map
from inferlab.kvcache.radix import RadixCache, RadixNode, eviction_sweep, standard_policies
from inferlab.kvcache.scenarios import PoolEvent, PreemptionRun, copy_on_write_steps, fork_branches, refcount_steps
from inferlab.kvcache.snapshots import HybridRestore, Restore, restore, snapshot_positions, spacing_tradeoff
from inferlab.kvcache.value import (ContextUpdate, PrefixCost, keep_ratio_threshold, prefix_cost,
                                    recompute_to_fetch_ratio)
from inferlab.memory import (block_table_entries, max_concurrent_requests, paged_slots, paged_waste, request_kv_bytes,
                             shared_and_private_bytes)
from inferlab.units import GB, GiB, MiB, ms
from inferlab.workloads import agent_workload

from . import COLORS, InPlace, add_boxes, book_legend, caption, deadline_line, new_figure, refresh_legend, rescale
from .legibility import MIN_LABEL_PT, PAGE_WIDTH_IN, legible, smallest_label_pt  # noqa: F401 (re-exported)
from .ticks import InView, few_ticks, round_log_ticks

_EDGE = "#555555"


def _integer_ticks(ax, x: bool = False, y: bool = False) -> None:
    """About five whole-number ticks on the count axes asked for, all in view."""
    few_ticks(ax, 5 if x else None, 5 if y else None, integer=True)


class _Slots:
    """Token slots gathered row by row, then drawn as two collections (slots, block outlines), not one patch each."""

    def __init__(self) -> None:
        self.cells: list[tuple[np.ndarray, float, float, np.ndarray]] = []  # slot x, y, height, face colours
        self.blocks: list[tuple[float, float, float, float]] = []  # x, y, width, height
        self.labels: list[tuple[float, float, str]] = []

    def row(self, x0: float, y: float, used: int, size: int, color: str, h: float = 0.6,
            labels: Sequence[str] = ()) -> None:
        """One block of ``size`` slots at (x0, y), the first ``used`` in ``color``, labelled with ``labels``."""
        i = np.arange(size)
        self.cells.append((x0 + i, y, h, np.where(i < used, color, COLORS["unused"])))
        self.blocks.append((x0, y, size, h))
        self.labels += [(x0 + k + 0.5, y + h / 2, t) for k, t in enumerate(labels[:used]) if t]

    def draw(self, ax) -> None:
        """Add the slots (white gaps between them), the block outlines and the slot labels to ``ax``."""
        if self.blocks:
            x = np.concatenate([c[0] for c in self.cells]).astype(float)
            y = np.concatenate([np.full(len(c[0]), c[1], float) for c in self.cells])
            h = np.concatenate([np.full(len(c[0]), c[2], float) for c in self.cells])
            faces = np.concatenate([c[3] for c in self.cells])
            add_boxes(ax, x, y, x + 1, y + h, facecolors=list(faces), edgecolors="white", linewidths=0.8)
            bx, by, bw, bh = np.array(self.blocks, float).T
            add_boxes(ax, bx, by, bx + bw, by + bh, facecolors="none", edgecolors=_EDGE, linewidths=1.2)
        for x, y, t in self.labels:
            ax.text(x, y, t, ha="center", va="center", fontsize=8, color="white")



def _bare(ax) -> None:
    ax.set_axis_off()
    ax.set_aspect("equal")


# ---- 8.3.1 -----------------------------------------------------------------------------------
def draw_slots(lengths: Sequence[int], names: Sequence[str], max_tokens: int | None = None,
               block_size: int | None = None, title: str = "", figure: str = "") -> Figure:
    """Each sequence's token positions: whole-request reservation (``max_tokens``) or whole blocks of ``block_size``."""
    rows = len(lengths)
    width = max(max_tokens or 0, max(-(-n // (block_size or 1)) * (block_size or 1) for n in lengths))
    fig, ax = new_figure(width=7, height=0.55 * rows + 1.0)
    allocated = 0
    slots = _Slots()
    for r, (n, name) in enumerate(zip(lengths, names)):
        y = rows - 1 - r
        if block_size:
            blocks = -(-n // block_size)
            for b in range(blocks):
                slots.row(b * block_size + 0.15 * b, y, min(block_size, n - b * block_size), block_size,
                          COLORS["prefill"])
            allocated += blocks * block_size
        else:
            slots.row(0, y, n, max_tokens, COLORS["prefill"])
            allocated += max_tokens
        ax.text(-0.6, y + 0.3, f"{name} ({n})", ha="right", va="center", fontsize=9)
    slots.draw(ax)
    ax.set_xlim(-6, width + width * 0.15 / max(block_size or width, 1) + 1)
    ax.set_ylim(-0.6, rows)
    _bare(ax)
    used = sum(lengths)
    ax.set_title(title or f"{allocated} token positions allocated, {used} used, {allocated - used} unused", fontsize=10)
    return caption(fig, figure) if figure else fig


def draw_waste_vs_block_size(lengths: Sequence[int], block_sizes: Sequence[int], waste: Sequence[int],
                             entries: Sequence[int], current: int, figure: str = "") -> Figure:
    """Unused token positions and block-table entries of the same sequences against block size."""
    fig, ax = new_figure(width=6.5, height=3.2)
    fig.subplots_adjust(right=1 - 0.8 / 6.5)
    ax.plot(block_sizes, waste, "o-", color=COLORS["kv"], label="unused token positions")
    ax.plot(block_sizes, [len(lengths) * (p - 1) for p in block_sizes], ":", color=COLORS["kv"],
            label="bound: sequences x (B - 1)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size B (tokens)")
    ax.set_ylabel("token positions")
    ax2 = ax.twinx()
    ax2.plot(block_sizes, entries, "s--", color=COLORS["prefill"], label="block-table entries")
    ax2.set_ylabel("block-table entries", color=COLORS["prefill"])
    ax2.spines["top"].set_visible(False)
    ax.axvline(current, color=COLORS["highlight"], lw=1, alpha=0.6)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center")
    _integer_ticks(ax, y=True)
    _integer_ticks(ax2, y=True)
    return caption(fig, figure) if figure else fig


#: one colour per request of an arena map (the book's blue, orange, green, purple, cyan, brown, pink, olive)
_REQUEST_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22")
_ARENA_TITLES = {"reserve": "reserve the maximum", "grow": "grow in place, move when blocked", "paged": "paged"}


def draw_arena_maps(runs: Sequence[ArenaRun], names: Sequence[str], figure: str = "") -> Figure:
    """Where each allocator kept every request's KV, step by step: one panel per run, address up, time across.

    A colour is a request's stored tokens, grey positions allocated but unused, white free memory.
    All panels share the address axis, so a panel's height of colour and grey is the memory it needed.
    """
    if not runs:
        raise ValueError("runs must not be empty")
    n = max(max((max(lay, default=-1) for lay in r.layout), default=-1) for r in runs) + 1
    if len(names) < n or n > len(_REQUEST_COLORS):
        raise ValueError(f"names must name all {n} requests (at most {len(_REQUEST_COLORS)})")
    top = max(r.high_water for r in runs)
    cmap = ListedColormap(["white", COLORS["unused"], *_REQUEST_COLORS[:n]])
    fig, axes = new_figure(1, len(runs), width=PAGE_WIDTH_IN, height=3.3)
    axes = axes if isinstance(axes, list) else [axes]
    fig.subplots_adjust(left=0.75 / PAGE_WIDTH_IN, right=0.99, bottom=0.95 / 3.3, wspace=0.12)
    for k, (ax, run) in enumerate(zip(axes, runs)):
        img = arena_map(run, top) + 2  # -2 free -> 0, -1 unused -> 1, request i -> i + 2
        ax.imshow(img, cmap=cmap, vmin=0, vmax=n + 1, origin="lower", aspect="auto", interpolation="nearest",
                  extent=(-0.5, run.steps + 0.5, 0, top))
        ax.grid(False)
        ax.set_title(f"{_ARENA_TITLES.get(run.allocator, run.allocator)}\n{run.high_water:,} positions"
                     + (f", {run.copied_tokens:,} copied" if run.copied_tokens else ""), fontsize=9)
        ax.set_xlabel("decode step")
        _integer_ticks(ax, x=True, y=True)
        if k:
            ax.tick_params(labelleft=False)
        else:
            ax.set_ylabel("address (token positions)")
    handles = [Patch(color=_REQUEST_COLORS[i], label=names[i]) for i in range(n)]
    handles.append(Patch(facecolor=COLORS["unused"], label="allocated, unused"))
    book_legend(fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 8), fontsize=8,
                           handlelength=1.2, columnspacing=0.9, bbox_to_anchor=(0.5, 0.0)))
    return caption(fig, figure) if figure else fig


def _pool_extent(state: PoolState, seq_ids: Sequence[Hashable]) -> tuple[float, float, float, float]:
    p, gap = state.block_size, 0.6
    phys_w = state.num_blocks * (p + gap)
    x_hi = max(phys_w, max((len(state.tables[s]) for s in seq_ids), default=0) * (p + gap))
    return -0.8 - 0.7 * p - 8, x_hi, -1.3, 2.2 + 1.1 * len(seq_ids)


def _draw_pool_on(ax, state: PoolState, seq_ids: Sequence[Hashable], title: str, names: dict | None,
                  token_labels: dict[int, str] | None, fontsize: float = 10) -> None:
    tl = token_labels or {}

    def lab(tokens: Sequence[int]) -> list[str]:
        return [tl.get(t, "") for t in tokens]

    p, gap, n_phys = state.block_size, 0.6, state.num_blocks
    pos = {b: b * (p + gap) for b in range(n_phys)}

    def color(b: int) -> str:
        return COLORS["shared"] if state.ref_counts[b] > 1 else COLORS["private"]

    slots = _Slots()
    for b in range(n_phys):
        x = pos[b]
        if b in state.free:
            slots.row(x, 0, 0, p, COLORS["free"])
            label = "free"
        elif b in state.draining:
            slots.row(x, 0, len(state.contents[b]), p, COLORS["queue"], labels=lab(state.contents[b]))
            label = "draining"
        else:
            slots.row(x, 0, len(state.contents[b]), p, color(b), labels=lab(state.contents[b]))
            label = f"ref {state.ref_counts[b]}"
        ax.text(x + p / 2, -0.35, f"#{b}\n{label}", ha="center", va="top", fontsize=8)
    ax.text(-0.8, 0.3, "physical", ha="right", va="center", fontsize=9)
    for r, s in enumerate(seq_ids):
        y = 2.2 + 1.1 * (len(seq_ids) - 1 - r)
        table, n = state.tables[s], state.lengths[s]
        for i, b in enumerate(table):
            x = i * (p + gap)
            used = min(p, n - i * p)
            slots.row(x, y, used, p, color(b), labels=lab(state.contents[b][:used]))
            ax.annotate("", xy=(pos[b] + p / 2, 0.62), xytext=(x + p / 2, y - 0.02),
                        arrowprops=dict(arrowstyle="->", color="#888888", lw=0.7, alpha=0.8))
        ax.text(-0.8, y + 0.3, f"{(names or {}).get(s, s)}: {list(table)}", ha="right", va="center", fontsize=8)
    slots.draw(ax)
    x_lo, x_hi, y_lo, _ = _pool_extent(state, seq_ids)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, 2.2 + 1.1 * max(len(seq_ids), 1))
    _bare(ax)
    ax.set_title(title or f"{state.references} table references, {state.used_blocks} of {n_phys} blocks in use",
                 fontsize=fontsize)


def draw_pool(state: PoolState, seq_ids: Sequence[Hashable] | None = None, title: str = "",
              figure: str = "", names: dict | None = None, token_labels: dict[int, str] | None = None) -> Figure:
    """Block tables (top) pointing into the physical pool (bottom); shared blocks blue, private orange.

    ``token_labels`` maps token ids to short names written in their slots (e.g. a, b, c, x, y).
    """
    seq_ids = list(state.tables) if seq_ids is None else list(seq_ids)
    x_lo, x_hi, y_lo, y_hi = _pool_extent(state, seq_ids)
    width = min(PAGE_WIDTH_IN, 2 + 0.32 * max(state.num_blocks * (state.block_size + 0.6), 1))
    fig, ax = new_figure(width=width, height=0.9 + width * (y_hi - y_lo) / (x_hi - x_lo))
    _draw_pool_on(ax, state, seq_ids, title, names, token_labels)
    return caption(fig, figure) if figure else fig


def draw_pool_steps(steps: Sequence[tuple[str, PoolState]], ncols: int = 1,
                    token_labels: dict[int, str] | None = None, figure: str = "") -> Figure:
    """Several states of the pool, numbered in order, one per row at the page width (Figure 8-14's four states)."""
    if not steps:
        raise ValueError("steps must not be empty")
    nrows = -(-len(steps) // ncols)
    # every panel lists the sequences of the first state, so the rows stay in place as they disappear
    names = list(dict.fromkeys(s for _, st in steps for s in st.tables))
    fig, axes = new_figure(nrows, ncols, width=PAGE_WIDTH_IN, height=(1.1 + 0.3 * len(names)) * nrows + 0.3)
    fig.subplots_adjust(left=0.02, right=0.98, wspace=0.08, hspace=0.55)
    axes = axes if isinstance(axes, list) else [axes]
    for i, (ax, (label, state)) in enumerate(zip(axes, steps)):
        present = [s for s in names if s in state.tables]
        _draw_pool_on(ax, state, present, f"{i + 1}. {label}", None, token_labels, fontsize=10)
        ax.set_ylim(-1.3, 2.2 + 1.1 * len(names))
    for ax in axes[len(steps):]:
        ax.set_axis_off()
    return caption(fig, figure) if figure else fig


# ---- 8.3.2 -----------------------------------------------------------------------------------
def draw_branch_sharing(refs: int, physical: int, title: str = "", figure: str = "") -> Figure:
    """Block-table references against physical blocks (e.g. four branches: 416 vs 131)."""
    fig, ax = new_figure(width=6, height=2.4)
    fig.subplots_adjust(left=1.5 / 6, top=1 - 0.6 / 2.4)
    ax.barh([1, 0], [refs, physical], color=[COLORS["unused"], COLORS["shared"]])
    ax.set_yticks([1, 0], ["stored separately", "shared prefix"])
    for y, v in ((1, refs), (0, physical)):
        ax.text(v, y, f" {v}", va="center")
    ax.set_xlabel("physical blocks")
    _integer_ticks(ax, x=True)
    ax.set_title(title or f"{1 - physical / refs:.0%} fewer blocks", fontsize=10)
    return caption(fig, figure) if figure else fig


class _CapacityLines(InPlace):
    """``draw_capacity_vs_requests``'s two totals, fit marks and counts, redrawn in place by ``set``."""

    def __init__(self, ax, budget_bytes: float) -> None:
        self.ax, self.budget = ax, budget_bytes / GiB
        self.independent, = ax.plot([], [], color=COLORS["kv"], label="independent")
        self.shared, = ax.plot([], [], color=COLORS["shared"], label="shared prefix")
        deadline_line(ax, self.budget, f"KV budget {self.budget:.0f} GiB", vertical=False)
        self.fits = [(ax.axvline(0, color=c, ls=":", lw=1), ax.text(0, self.budget * (0.05 + 0.12 * i), "", color=c))
                     for i, c in enumerate((COLORS["kv"], COLORS["shared"]))]
        ax.set_xlabel("requests")
        ax.set_ylabel("KV to completion (GiB)")
        ax.set_ylim(0, max(self.budget * 1.6, 1))
        few_ticks(ax, 5, None, integer=True)
        few_ticks(ax, None, 4)
        ax.legend(loc="upper left")
        self.keep_on(ax.figure)

    def set(self, n_max: int, independent_bytes: float, shared_bytes: float, private_bytes: float,
            budget_bytes: float, fit_independent: int, fit_shared: int) -> bool:
        if budget_bytes / GiB != self.budget:
            return False  # another budget line and legend: a figure of its own
        ns = [1, n_max]  # both totals are linear in n: their two ends draw the lines
        self.independent.set_data(ns, [n * independent_bytes / GiB for n in ns])
        self.shared.set_data(ns, [(shared_bytes + n * private_bytes) / GiB for n in ns])
        for (line, note), n in zip(self.fits, (fit_independent, fit_shared)):
            line.set_xdata([n, n])
            note.set_x(n)
            note.set_text(f" {n} fit")
        self.ax.set_xlim(0, n_max)
        return True


def draw_capacity_vs_requests(n_max: int, independent_bytes: float, shared_bytes: float, private_bytes: float,
                              budget_bytes: float, fit_independent: int, fit_shared: int, figure: str = "") -> Figure:
    """KV of n requests stored independently vs sharing a prefix, against the KV budget, with the fit counts given."""
    fig, ax = new_figure(width=6.5, height=3.2)
    _CapacityLines(ax, budget_bytes).set(n_max, independent_bytes, shared_bytes, private_bytes, budget_bytes,
                                         fit_independent, fit_shared)
    return caption(fig, figure) if figure else fig


def draw_cancellation(events: Sequence[PoolEvent], blocks: int, figure: str = "") -> Figure:
    """Free and draining blocks over time after a cancel (Figure 8-16)."""
    fig, ax = new_figure(width=6.5, height=2.8)
    t = [e.time_s / ms for e in events]
    end = t[-1] * 1.15
    ax.step(t + [end], [e.free_blocks for e in events] + [events[-1].free_blocks], where="post",
            color=COLORS["decode"], label="free blocks")
    ax.step(t + [end], [e.draining_blocks for e in events] + [events[-1].draining_blocks], where="post",
            color=COLORS["queue"], label="draining (no reference, step still reading)")
    top = blocks + events[0].free_blocks
    for i, e in enumerate(events[1:]):
        ax.axvline(e.time_s / ms, color=COLORS["highlight"], ls=":", lw=1)
        ax.text(e.time_s / ms, top * (1.12 + 0.14 * i), f"{e.time_s / ms:g} ms: {e.label}", fontsize=8,
                ha="left" if i == 0 else "right", va="bottom")
    ax.set_ylim(0, top * 1.75)
    ax.set_xlabel("time since cancel (ms)")
    ax.set_ylabel("blocks")
    _integer_ticks(ax, y=True)
    ax.legend(loc="upper left", ncol=2, fontsize=8)
    return caption(fig, figure) if figure else fig


def draw_preemption(run: PreemptionRun, num_blocks: int, figure: str = "") -> Figure:
    """Blocks in use per decode step, with the steps where a sequence was preempted."""
    fig, ax = new_figure(width=6.5, height=2.8)
    ax.plot(range(1, len(run.used_blocks) + 1), run.used_blocks, color=COLORS["kv"], label="blocks in use")
    deadline_line(ax, num_blocks, "pool size", vertical=False)
    for step, seq, tokens in run.preemptions:
        ax.axvline(step, color=COLORS["highlight"], ls=":", lw=1)
        ax.text(step, num_blocks * 0.1, f" preempt {seq}\n ({tokens} tokens)", fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel("blocks")
    ax.set_ylim(0, num_blocks * 1.2)
    _integer_ticks(ax, x=True, y=True)
    count = len(run.preemptions)
    preempted = {0: "no preemptions", 1: "one preemption"}.get(count, f"{count} preemptions")
    ax.set_title(f"{preempted}, {run.recomputed_tokens} tokens recomputed", fontsize=10)
    return caption(fig, figure) if figure else fig


# ---- 8.3.3 -----------------------------------------------------------------------------------
def draw_prefix_tree(cache: RadixCache, leaf_labels: dict[tuple[int, ...], str] | None = None,
                     title: str = "", figure: str = "") -> Figure:
    """A radix tree laid out along token position: each edge a bar labelled with its token count where it fits."""
    lanes: list[tuple[RadixNode, int]] = []
    next_lane = [0]

    def place(node: RadixNode, lane: int) -> None:
        lanes.append((node, lane))
        children = sorted(node.children.values(), key=lambda c: -_subtree_tokens(c))
        for i, child in enumerate(children):
            if i:
                next_lane[0] += 1
            place(child, lane if i == 0 else next_lane[0])

    for i, child in enumerate(sorted(cache.root.children.values(), key=lambda c: -_subtree_tokens(c))):
        if i:
            next_lane[0] += 1
        place(child, next_lane[0])
    n_lanes = next_lane[0] + 1
    width = PAGE_WIDTH_IN
    fig, ax = new_figure(width=width, height=0.55 * n_lanes + 1.3)
    fig.subplots_adjust(left=0.25 / width)
    x_max = max((n.end for n, _ in lanes), default=1) * 1.3
    pt_per_token = width * (fig.subplotpars.right - fig.subplotpars.left) * 72 / x_max
    lane_of = {id(n): lane for n, lane in lanes}
    labels = leaf_labels or {}
    for node, lane in lanes:
        y = n_lanes - 1 - lane
        ax.barh(y, len(node.key), left=node.start, height=0.5, color=COLORS["shared"] if node.children
                else COLORS["private"], edgecolor="white")
        text = f"+{len(node.key):,}"
        if len(node.key) * pt_per_token > 0.62 * 8 * len(text) + 4:  # the count fits inside its bar at 8 pt
            ax.text(node.start + len(node.key) / 2, y, text, ha="center", va="center", fontsize=8, color="white")
        if node.parent is not cache.root and lane_of[id(node.parent)] != lane:
            py = n_lanes - 1 - lane_of[id(node.parent)]
            ax.plot([node.start, node.start], [py - 0.25, y + 0.25], color=_EDGE, lw=0.8)
        label = labels.get(cache.prefix_of(node), "")
        if node.is_leaf:
            ax.text(node.end, y, f" {label} ({node.end:,})" if label else f" ({node.end:,})", va="center", fontsize=8)
        elif label:
            ax.text(node.end, y + 0.27, label.replace("turn ", "t"), ha="center", va="bottom", fontsize=8,
                    color=_EDGE)
    ax.set_yticks([])
    ax.set_xlabel("token position")
    _integer_ticks(ax, x=True)
    ax.set_ylim(-0.7, n_lanes - 0.1)
    ax.set_xlim(0, x_max)
    ax.set_title(title or "blue: edges with descendants (shared context); orange: leaves (private suffix)",
                 fontsize=9)
    return caption(fig, figure) if figure else fig


def _subtree_tokens(node: RadixNode) -> int:
    return len(node.key) + sum(_subtree_tokens(c) for c in node.children.values())


def draw_turn_reuse(names: Sequence[str], inputs: Sequence[int], shared: Sequence[int], figure: str = "") -> Figure:
    """Per turn: the prefix identical to the previous turn (blue) and the rest (orange) (Figure 8-18)."""
    fig, ax = new_figure(width=7, height=0.28 * len(names) + 1.2)
    ys = list(range(len(names)))[::-1]
    ax.barh(ys, shared, color=COLORS["shared"], label="same as the previous turn")
    ax.barh(ys, [i - s for i, s in zip(inputs, shared)], left=shared, color=COLORS["private"], label="new or changed")
    ax.set_yticks(ys, names)
    ax.set_xlabel("input tokens")
    _integer_ticks(ax, x=True)
    ax.legend(loc="upper right")
    ax.set_title(f"{sum(shared):,} of {sum(inputs):,} input tokens repeat the previous turn", fontsize=10)
    return caption(fig, figure) if figure else fig


class _SnapshotRestore(InPlace):
    """``draw_snapshot_restore``'s bars, snapshots and match line, redrawn in place by ``set``."""

    def __init__(self, ax) -> None:
        self.ax = ax
        self.bars = [ax.barh(0, 0, color=color, height=0.5, label=label)
                     for color, label in ((COLORS["shared"], "restored from snapshot"), (COLORS["private"], "recomputed"),
                                          (COLORS["unused"], "not matched"))]
        self.snapshots, = ax.plot([], [], "v", color=COLORS["decode"], ms=7, label="snapshot")
        self.match = ax.axvline(0, color=COLORS["deadline"], ls="--", lw=1)
        self.note = ax.text(0, 0.55, "", color=COLORS["deadline"], fontsize=8, ha="center")
        ax.set_yticks([])
        ax.set_ylim(-0.5, 1.5)
        ax.set_xlabel("tokens from the start of the sequence")
        few_ticks(ax, 5, None, integer=True)
        self.keep_on(ax.figure)

    def set(self, r: Restore, snapshots: Sequence[int], context_tokens: int) -> bool:
        spans = ((0, r.restored_from), (r.restored_from, r.recomputed_tokens),
                 (r.matched_tokens, max(context_tokens - r.matched_tokens, 0)))
        for container, (left, width) in zip(self.bars, spans):
            bar, = container
            bar.set_x(left)
            bar.set_width(width)
            bar.sticky_edges.x[:] = [left]  # as barh marks a new bar's base
        self.bars[1].set_label(f"recomputed ({r.recomputed_tokens:,} tokens)")
        self.snapshots.set_data(list(snapshots), [0.42] * len(snapshots))
        self.match.set_xdata([r.matched_tokens] * 2)
        self.note.set_x(r.matched_tokens)
        self.note.set_text(f"match {r.matched_tokens:,}")
        rescale(self.ax, self.match)
        refresh_legend(self.ax, loc="upper left", ncol=2, fontsize=8)
        return True


def draw_snapshot_restore(r: Restore, snapshots: Sequence[int], context_tokens: int, figure: str = "") -> Figure:
    """Text match, saved recurrent snapshots, and the tokens recomputed after the nearest one (Figure 8-19)."""
    fig, ax = new_figure(width=7, height=2.4)
    fig.subplots_adjust(top=1 - 0.6 / 2.4)
    _SnapshotRestore(ax).set(r, snapshots, context_tokens)
    return caption(fig, figure) if figure else fig


def draw_context_updates(options: Sequence[ContextUpdate], figure: str = "") -> Figure:
    """Each way to update a context, in the order its work happens (Figure 8-20).

    An update that reads the cached history first (the summary) gets two rows: the summary
    step, a cache hit on the history plus the generated summary, then the rebuilt cache.
    """
    rows: list[tuple[str, float, float, float, str]] = []  # label, reused, processed, generated, reused label
    for o in options:
        if o.read_cached_tokens:
            rows.append((f"{o.name}:\n1. write the summary", o.read_cached_tokens, 0, o.generated_tokens, "hit"))
            rows.append(("2. rebuild the cache", 0, o.processed_tokens, 0, ""))
        else:
            rows.append((o.name, o.reused_tokens, o.processed_tokens, 0, ""))
    fig, ax = new_figure(width=7, height=0.5 * len(rows) + 1.2)
    fig.subplots_adjust(left=2.0 / 7)
    ys = list(range(len(rows)))[::-1]
    k = 1024
    ax.barh(ys, [r[1] / k for r in rows], color=COLORS["shared"], label="reused prefix (cache hit)")
    ax.barh(ys, [r[2] / k for r in rows], left=[r[1] / k for r in rows], color=COLORS["private"],
            label="processed again")
    ax.barh(ys, [r[3] / k for r in rows], left=[(r[1] + r[2]) / k for r in rows], color=COLORS["decode"],
            label="summary generated")
    for y, r in zip(ys, rows):
        if r[4]:
            ax.text(r[1] / k / 2, y, "history read from the cache", ha="center", va="center", fontsize=8,
                    color="white")
    ax.set_yticks(ys, [r[0] for r in rows], fontsize=8)
    ax.set_xlabel("K tokens")
    ax.set_xlim(0, max(r[1] + r[2] + r[3] for r in rows) / k * 1.45)
    ax.legend(loc="lower right", fontsize=8)
    return caption(fig, figure) if figure else fig


def draw_hybrid_restore(paths: Sequence[HybridRestore], figure: str = "") -> Figure:
    """Each encoder restore path as a flow of boxes, ending in the common decoder window replay (Figure 8-21)."""
    fig, ax = new_figure(width=PAGE_WIDTH_IN, height=1.05 * len(paths) + 0.6)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02)
    xs = [0.0, 1.95, 4.05, 6.15]
    widths = [1.65, 1.8, 1.8, 0.85]
    for r, path in enumerate(paths):
        y = len(paths) - 1 - r
        hits = ("global KV " + ("hit" if path.global_hit else "miss") + "\nencoder SWA "
                + ("hit" if path.encoder_swa_hit else "miss"))
        if path.encoder_recomputed:
            enc = f"encoder recomputes\n{path.encoder_recomputed:,} prefix\n+ {path.encoder_new:,} new tokens"
            enc_color = COLORS["private"]
        elif path.encoder_replayed:
            enc = f"encoder replays\nlast {path.encoder_replayed} prefix\n+ {path.encoder_new:,} new tokens"
            enc_color = COLORS["highlight"]
        else:
            enc = f"encoder runs\nonly the\n{path.encoder_new:,} new tokens"
            enc_color = COLORS["shared"]
        boxes = [(hits, COLORS["unused"], "black"), (enc, enc_color, "white"),
                 (f"decoder rebuilds\nSWA: last {path.decoder_window}\ntokens x {path.decoder_layers} layers",
                  COLORS["weights"], "white"), ("decode", COLORS["decode"], "white")]
        for i, ((text, color, tc), x, w) in enumerate(zip(boxes, xs, widths)):
            ax.add_patch(Rectangle((x, y + 0.06), w, 0.84, facecolor=color, edgecolor=_EDGE, lw=0.8))
            ax.text(x + w / 2, y + 0.48, text, ha="center", va="center", fontsize=8, color=tc)
            if i:
                ax.annotate("", xy=(x, y + 0.48), xytext=(xs[i - 1] + widths[i - 1], y + 0.48),
                            arrowprops=dict(arrowstyle="->", color=_EDGE, lw=1))
    ax.set_xlim(-0.05, 7.05)
    ax.set_ylim(0, len(paths))
    ax.set_axis_off()
    return caption(fig, figure) if figure else fig


# ---- 8.3.4 -----------------------------------------------------------------------------------
def draw_value_vs_hit_probability(costs: dict[str, PrefixCost], p_hit: float, figure: str = "") -> Figure:
    """V_h = p_h (T_rec - T_fetch) - T_maint against p_h, with each break-even point and the chosen p_h."""
    fig, ax = new_figure(width=6.5, height=3.2)
    _ValueLines(ax, list(costs)).set(list(costs.values()), p_hit)
    return caption(fig, figure) if figure else fig


class _ValueLines(InPlace):
    """``draw_value_vs_hit_probability``'s lines, break-even points and chosen p_h, redrawn in place by ``set``."""

    def __init__(self, ax, labels: list[str]) -> None:
        self.ax, self.marks = ax, []
        colors = [COLORS["prefill"], COLORS["kv"], COLORS["decode"], COLORS["accent"]]
        for i, (label, color) in enumerate(zip(labels, colors)):
            line, = ax.plot([], [], color=color, label=label)
            even, = ax.plot([], [], "o", color=color)
            note = ax.annotate("", (0, 0), textcoords="offset points", xytext=(6, -12 - 11 * i), fontsize=8,
                               color=color)
            chosen, = ax.plot([], [], "s", color=color)
            self.marks.append((line, even, note, chosen))
        self.zero = ax.axhline(0, color=_EDGE, lw=0.8)
        self.chosen = ax.axvline(0, color=COLORS["highlight"], ls=":", lw=1)
        ax.set_xlabel("hit probability $p_h$")
        ax.set_ylabel("$V_h$ (ms)")
        few_ticks(ax, 5, 5)
        self.keep_on(ax.figure)

    def set(self, costs: list[PrefixCost], p_hit: float) -> bool:
        if len(costs) != len(self.marks):
            return False  # another number of lines: a figure of its own
        ps = [0.0, 1.0]  # V_h is linear in p_h: its two ends draw the line
        for (line, even, note, chosen), c in zip(self.marks, costs):
            line.set_data(ps, [c.value(p) / ms for p in ps])
            p0 = c.break_even()
            for mark in (even, note):
                mark.set_visible(p0 <= 1)
            if p0 <= 1:
                even.set_data([p0], [0])
                note.xy = (p0, 0)
                note.set_text(f"{p0:.1%}")
            chosen.set_data([p_hit], [c.value(p_hit) / ms])
        self.chosen.set_xdata([p_hit, p_hit])
        rescale(self.ax, self.zero)
        refresh_legend(self.ax, loc="upper left")
        return True


def draw_cache_choice(a: PrefixCost, b: PrefixCost, n_b: int, p_a: float, p_b: float, figure: str = "") -> Figure:
    """Same space, two uses: one prefix A or ``n_b`` prefixes B; width = MiB, height = expected saving (Figure 8-22)."""
    fig, ax = new_figure(width=6.5, height=3.0)
    va, vb = a.value(p_a) / ms, b.value(p_b) / ms
    ax.add_patch(Rectangle((0, 1.2), a.kv_bytes / MiB, 0.8, color=COLORS["prefill"]))
    ax.text(a.kv_bytes / MiB / 2, 1.6, f"A: {a.tokens} tokens, {va:.1f} ms", ha="center", va="center", color="white")
    for i in range(n_b):
        ax.add_patch(Rectangle((i * b.kv_bytes / MiB, 0), b.kv_bytes / MiB, 0.8, color=COLORS["kv"], ec="white"))
        ax.text((i + 0.5) * b.kv_bytes / MiB, 0.4, f"B{i + 1}: {vb:.1f} ms", ha="center", va="center", color="white",
                fontsize=8)
    width = max(a.kv_bytes, n_b * b.kv_bytes) / MiB
    ax.text(width * 1.02, 1.6, f"{va:.1f} ms", va="center")
    ax.text(width * 1.02, 0.4, f"{n_b * vb:.1f} ms", va="center")
    ax.set_xlim(0, width * 1.2)
    ax.set_ylim(-0.2, 2.2)
    ax.set_yticks([0.4, 1.6], [f"{n_b} x B\n$p_h$ = {p_b:.2f}", f"1 x A\n$p_h$ = {p_a:.2f}"])
    ax.set_xlabel("cache space (MiB)")
    few_ticks(ax, 5, None)
    winner = "A" if va > n_b * vb else f"{n_b} x B" if n_b * vb > va else "a tie"
    ax.set_title(f"keep {winner}; per MiB: A {va / (a.kv_bytes / MiB):.3f} ms, B {vb / (b.kv_bytes / MiB):.3f} ms",
                 fontsize=10)
    return caption(fig, figure) if figure else fig


def draw_keep_or_recompute(lengths: Sequence[int], ratios: dict[str, Sequence[float]],
                           thresholds: dict[str, float], figure: str = "") -> Figure:
    """T_rec / T_fetch against prefix length per link, with the (p_h + mu) / p_h lines above which keeping pays."""
    fig, ax = new_figure(width=6.5, height=3.65)
    fig.subplots_adjust(right=1 - 1.55 / 6.5, bottom=0.85 / 3.65)
    _KeepOrRecompute(ax, lengths, len(ratios), len(thresholds)).set(ratios, thresholds)
    return caption(fig, figure) if figure else fig


class _KeepOrRecompute(InPlace):
    """``draw_keep_or_recompute``'s artists for a fixed number of links and keep lines, redrawn by ``set``."""

    COLORS = (COLORS["prefill"], COLORS["kv"], COLORS["decode"], COLORS["accent"])

    def __init__(self, ax, lengths: Sequence[int], n_links: int, n_lines: int) -> None:
        self.ax, self.lengths = ax, list(lengths)
        ones = np.ones(len(self.lengths))
        self.links = [ax.plot(self.lengths, ones, color=color, lw=2)[0] for color in self.COLORS[:n_links]]
        self.n_links = n_links
        self.lines = [(ax.axhline(1.0, color=COLORS["deadline"], ls="--", lw=1),
                       ax.text(self.lengths[-1] * 1.12, 1.0, "", va="center", fontsize=8, color=COLORS["deadline"],
                               clip_on=False)) for _ in range(n_lines)]
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = [n for n in self.lengths if (n.bit_length() - 1) % 2 == 0]
        ax.set_xticks(ticks, [f"{n // 1024}K" if n >= 1024 else str(n) for n in ticks])
        # labelled ticks only, about six (unlabelled minor ticks cost as much as labelled ones)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("prefix length (tokens)")
        ax.set_ylabel(r"$T_{\mathrm{rec}} / T_{\mathrm{fetch}}$")
        ax.set_xlim(self.lengths[0], self.lengths[-1])
        self.keep_on(ax.figure)

    def set(self, ratios: dict[str, Sequence[float]], thresholds: dict[str, float]) -> bool:
        """Show new ratios and keep lines; False (nothing changed) if their numbers differ from the figure's."""
        if len(ratios) != self.n_links or len(thresholds) != len(self.lines):
            return False
        for line, (label, r) in zip(self.links, ratios.items()):
            line.set(ydata=r, label=label)
        for (line, text), (label, t) in zip(self.lines, thresholds.items()):
            line.set_ydata([t, t])
            text.set(y=t, text=label)
        # the answer in words, for the last link (the chosen one) against the first keep line
        chosen, line = list(ratios.values())[-1], next(iter(thresholds.values()))
        pays = [n for n, r in zip(self.lengths, chosen) if r > line]
        where = ("at no length" if not pays else "at every length" if len(pays) == len(self.lengths)
                 else f"from {_tokens(min(pays))} tokens up" if pays == self.lengths[-len(pays):]
                 else "for " + ", ".join(_tokens(n) for n in pays) + " tokens")
        self.ax.set_title(f"at {list(ratios)[-1]}, keeping pays {where} (above the dashed line)", fontsize=10)
        ys = np.concatenate([np.ravel(r) for r in ratios.values()] + [np.ravel(list(thresholds.values()))])
        self.ax.yaxis.set_major_locator(InView(FixedLocator(round_log_ticks(ys[np.isfinite(ys) & (ys > 0)]))))
        self.ax.relim()
        self.ax.autoscale_view()
        # under the axes: the chosen link's line and the keep line can run anywhere inside and beside them
        refresh_legend(self.ax, on_figure=True, loc="lower center", ncols=3, fontsize=8, handlelength=1.5)
        return True


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 else str(n)


def draw_hits_vs_pool(pool_bytes: Sequence[float], hits: dict[str, Sequence[int]], total: int,
                      marker_bytes: float | None = None, figure: str = "") -> Figure:
    """Session input tokens found in the cache against pool size, one line per eviction policy."""
    fig, ax = new_figure(width=6.5, height=3.2)
    gib = [b / GiB for b in pool_bytes]
    for (label, h), color in zip(hits.items(), [COLORS["kv"], COLORS["prefill"], COLORS["decode"]]):
        ax.plot(gib, h, "o-", color=color, label=label)
    ax.axhline(total, color=_EDGE, ls="--", lw=1)
    ax.text(gib[0], total, f"all {total:,} session input tokens", va="bottom", fontsize=8)
    if marker_bytes is not None:
        _PoolMark(ax.axvline(marker_bytes / GiB, color=COLORS["highlight"], ls=":", lw=1))
    ax.set_xlabel("KV pool (GiB)")
    ax.set_ylabel("session tokens hit")
    few_ticks(ax, 5, 5, integer=True)
    ax.set_ylim(0, total * 1.12)
    ax.legend(loc="center right")
    return caption(fig, figure) if figure else fig


# ---- widget views: pure functions of the slider values ----------------------------------------
EXAMPLE_LENGTHS = (9, 13, 5, 15)  # requests A, B, C, D of section 8.3.1
COW_LABELS = {1: "a", 2: "b", 3: "c", 24: "x", 25: "y"}


def paged_allocation_view(block_size: int = 4) -> Figure:
    """The 9/13/5/15-token example paged with ``block_size``-token blocks: token positions, waste, table entries."""

    lengths = list(EXAMPLE_LENGTHS)
    waste = sum(paged_waste(lengths, block_size))
    title = (f"B = {block_size}: {paged_slots(lengths, block_size)} token positions for {sum(lengths)} tokens, {waste} unused "
             f"(at most 4 x {block_size - 1}),\n{block_table_entries(lengths, block_size)} block-table entries")
    return draw_slots(lengths, "ABCD", block_size=block_size, title=title)


def branch_sharing_view(branches: int = 4, prefix_tokens: int = 1520, block_size: int = 16,
                        private_tokens: int = 144) -> Figure:
    """Fork ``branches`` branches after a shared prefix in a real ``BlockManager``; references vs physical blocks."""
    if prefix_tokens + private_tokens < 1:
        raise ValueError("prefix_tokens + private_tokens must be at least 1: a branch holds at least one token")
    state = fork_branches(branches, prefix_tokens, private_tokens, block_size)
    title = (f"{branches} branches, {prefix_tokens}-token prefix, B = {block_size}:\n{state.references} references, "
             f"{state.used_blocks} physical blocks ({1 - state.used_blocks / state.references:.0%} fewer)")
    return draw_branch_sharing(state.references, state.used_blocks, title=title)


def shared_batch_view(prefix_tokens: int = 6144, block_size: int = 16) -> Figure:
    """Long requests (8192 in, 256 out) stored independently vs sharing ``prefix_tokens``, in a 12 GiB budget.

    The shared part is capped one token short of the prompt: its last token is always computed.
    """
    totals, title = _shared_batch(prefix_tokens, block_size)
    fig = draw_capacity_vs_requests(*totals)
    fig.axes[0].set_title(title, fontsize=10)
    return fig


def update_shared_batch(fig: Figure, prefix_tokens: int = 6144, block_size: int = 16) -> bool:
    """Redraw a ``shared_batch_view`` figure in place (the explorer's path)."""
    totals, title = _shared_batch(prefix_tokens, block_size)
    if not _CapacityLines.redraw(fig, *totals):
        return False
    fig.axes[0].set_title(title, fontsize=10)
    return True


def _shared_batch(prefix_tokens: int, block_size: int) -> tuple[tuple, str]:
    """``draw_capacity_vs_requests``'s arguments for ``shared_batch_view``, and its title."""
    model, budget, shape = MODEL, KV_BUDGET_BYTES, (LONG.prompt_tokens, LONG.output_tokens)
    prefix = min(prefix_tokens, LONG.prompt_tokens - 1)
    shared, private = shared_and_private_bytes(model, *shape, block_size, prefix)
    fit_i = max_concurrent_requests(budget, model, *shape, block_size)
    fit_s = max_concurrent_requests(budget, model, *shape, block_size, prefix)
    totals = (int(max(fit_i, fit_s) * 1.25) + 2, request_kv_bytes(model, *shape, block_size), shared, private,
              budget, fit_i, fit_s)
    return totals, f"{prefix:,}-token shared prefix, B = {block_size}: {fit_s} requests fit instead of {fit_i}"


def refcount_view(step: int = 0) -> Figure:
    """One state of the reference-count walk-through (Figure 8-14)."""

    steps = refcount_steps()
    if not 0 <= step < len(steps):
        raise ValueError(f"step must lie in [0, {len(steps) - 1}], got {step}")
    label, state = steps[step]
    return draw_pool(state, title=f"step {step}: {label}")


def copy_on_write_view(step: int = 0) -> Figure:
    """One state of the copy-on-write walk-through (Figure 8-15)."""

    steps = copy_on_write_steps()
    if not 0 <= step < len(steps):
        raise ValueError(f"step must lie in [0, {len(steps) - 1}], got {step}")
    label, state = steps[step]
    return draw_pool(state, title=f"step {step}: {label}", token_labels=COW_LABELS)


def snapshot_view(interval: int = 4096, matched_tokens: int = 10_752, context_tokens: int = 131_072) -> Figure:
    """Snapshots every ``interval`` tokens: what a match of ``matched_tokens`` recomputes and what they cost to keep."""
    drawn, title = _snapshot_inputs(interval, matched_tokens, context_tokens)
    fig = draw_snapshot_restore(*drawn)
    fig.axes[0].set_title(title, fontsize=9)
    return fig


def update_snapshot(fig: Figure, interval: int = 4096, matched_tokens: int = 10_752,
                    context_tokens: int = 131_072) -> bool:
    """Redraw a ``snapshot_view`` figure in place (the explorer's path)."""
    drawn, title = _snapshot_inputs(interval, matched_tokens, context_tokens)
    if not _SnapshotRestore.redraw(fig, *drawn):
        return False
    fig.axes[0].set_title(title, fontsize=9)
    return True


def _snapshot_inputs(interval: int, matched_tokens: int, context_tokens: int) -> tuple[tuple, str]:
    """``draw_snapshot_restore``'s arguments for ``snapshot_view``, and its title."""
    shown = matched_tokens + interval
    r = restore(matched_tokens, snapshot_positions(shown, interval))
    n, storage, worst, mean = spacing_tradeoff(context_tokens, interval)
    return (r, snapshot_positions(shown, interval), shown), (
        f"snapshot every {interval:,} tokens: recompute {r.recomputed_tokens:,} here;\nover a "
        f"{context_tokens // 1024}K context {n} snapshots = {storage / MiB:,.0f} MiB per card, mean recompute {mean:,.0f}")


def _link_costs(link_gb_per_s: float, maintain_per_fetch: float = 1.0) -> tuple[PrefixCost, PrefixCost]:
    model, acc = MODEL, ACCELERATOR
    costs = []
    for tokens in (6144, 2048):
        fetch = prefix_cost(model, acc, tokens, link_bandwidth=link_gb_per_s * GB)
        costs.append(prefix_cost(model, acc, tokens, link_bandwidth=link_gb_per_s * GB,
                                 maintain_s=maintain_per_fetch * fetch.fetch_s))
    return costs[0], costs[1]


def value_view(link_gb_per_s: float = 64, p_hit: float = 0.5, maintain_per_fetch: float = 1.0) -> Figure:
    """V_h of prefixes A (6144 tokens) and B (2048) over a host link; T_maint = ``maintain_per_fetch`` x T_fetch."""
    costs, p_hit, title = _value_inputs(link_gb_per_s, p_hit, maintain_per_fetch)
    fig = draw_value_vs_hit_probability(costs, p_hit)
    fig.axes[0].set_title(title, fontsize=10)
    return fig


def update_value(fig: Figure, link_gb_per_s: float = 64, p_hit: float = 0.5, maintain_per_fetch: float = 1.0) -> bool:
    """Redraw a ``value_view`` figure in place (the explorer's path)."""
    costs, p_hit, title = _value_inputs(link_gb_per_s, p_hit, maintain_per_fetch)
    if not _ValueLines.redraw(fig, list(costs.values()), p_hit):
        return False
    fig.axes[0].set_title(title, fontsize=10)
    return True


def _value_inputs(link_gb_per_s: float, p_hit: float, maintain_per_fetch: float) -> tuple[dict, float, str]:
    """The prefixes ``value_view`` draws, by label, the chosen p_h, and the title."""
    a, b = _link_costs(link_gb_per_s, maintain_per_fetch)
    edge = f"A breaks even at {a.break_even():.1%}" if a.break_even() <= 1 else "A never pays"
    return ({f"{name}: {c.tokens} tokens, {c.kv_bytes / MiB:.0f} MiB": c for name, c in (("A", a), ("B", b))}, p_hit,
            rf"{link_gb_per_s:g} GB/s, $T_{{\mathrm{{maint}}}}$ = {maintain_per_fetch:g} $T_{{\mathrm{{fetch}}}}$: {edge}, "
            f"$V_h$({p_hit:.2f}) = {a.value(p_hit) / ms:.1f} ms")


KEEP_LENGTHS = tuple(2 ** k for k in range(4, 16))  # 16 ... 32,768 tokens


def keep_or_recompute_view(link_gb_per_s: float = 64, p_hit: float = 0.5, maintain_per_fetch: float = 1.0) -> Figure:
    """T_rec / T_fetch against prefix length on PCIe Gen5, Gen4 and a chosen link, with the keep line at ``p_hit``."""
    return draw_keep_or_recompute(list(KEEP_LENGTHS), *_keep_inputs(link_gb_per_s, p_hit, maintain_per_fetch))


def update_keep_or_recompute(fig: Figure, link_gb_per_s: float = 64, p_hit: float = 0.5,
                             maintain_per_fetch: float = 1.0) -> bool:
    """Redraw a ``keep_or_recompute_view`` figure in place (the explorer's slider path)."""
    return _KeepOrRecompute.redraw(fig, *_keep_inputs(link_gb_per_s, p_hit, maintain_per_fetch))


def _keep_inputs(link_gb_per_s: float, p_hit: float,
                 maintain_per_fetch: float) -> tuple[dict[str, list[float]], dict[str, float]]:
    lengths = list(KEEP_LENGTHS)
    ratios = {f"{g:g} GB/s" + (f" ({name})" if name else ""): recompute_to_fetch_ratio(MODEL, ACCELERATOR, lengths,
                                                                                        g * GB)
              for g, name in ((64, "PCIe Gen5"), (32, "PCIe Gen4"), (link_gb_per_s, "chosen"))}
    line = keep_ratio_threshold(p_hit, maintain_per_fetch) if p_hit > 0 else float("inf")
    thresholds = ({f"$p_h$ = {p_hit:.2f},\n" + rf"$T_{{\mathrm{{maint}}}}$ = {maintain_per_fetch:g} $T_{{\mathrm{{fetch}}}}$": line}
                  if p_hit > 0 else {})
    return ratios, thresholds


def cache_choice_view(link_gb_per_s: float = 64, p_a: float = 0.5, p_b: float = 0.5) -> Figure:
    """One A against three B in 864 MiB, each with its own hit probability (Figure 8-22)."""
    a, b = _link_costs(link_gb_per_s)
    return draw_cache_choice(a, b, 3, p_a, p_b)


POOL_GRID_GIB = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 6.0, 8.0)  # dense where LRU's step is


POOL_SEED, POOL_OTHER_PER_GAP = 13, 8  # the replay of 8.3.4: seed-13 session, eight competing requests per gap


@lru_cache(maxsize=1)
def pool_sweep() -> tuple[dict[str, list[int]], int]:
    """``kvcache.eviction_sweep`` of the 8.3.4 workload over ``POOL_GRID_GIB`` (cached), and its session tokens."""
    trace = agent_workload(POOL_SEED, other_per_gap=POOL_OTHER_PER_GAP)
    hits = eviction_sweep(trace, [g * GiB for g in POOL_GRID_GIB], MODEL.kv_bytes_per_token(),
                          standard_policies(MODEL, ACCELERATOR))
    return hits, sum(len(r.input_ids) for r in trace if r.session)


def pool_view(pool_gib: float = 6.0) -> Figure:
    """Hit tokens of the synthetic agent session against pool size, per eviction policy; marks ``pool_gib``."""
    hits, total = pool_sweep()
    fig = draw_hits_vs_pool([g * GiB for g in POOL_GRID_GIB], hits, total, pool_gib * GiB)
    update_pool(fig, pool_gib)
    return fig


def update_pool(fig: Figure, pool_gib: float = 6.0) -> bool:
    """Move a ``pool_view`` figure's marker to ``pool_gib`` and retitle it (the explorer's slider path)."""
    hits, total = pool_sweep()
    i = min(range(len(POOL_GRID_GIB)), key=lambda j: abs(POOL_GRID_GIB[j] - pool_gib))
    return _PoolMark.redraw(fig, pool_gib, pool_title(POOL_GRID_GIB[i], {k: v[i] for k, v in hits.items()}, total))


def pool_title(pool_gib: float, hits: dict[str, int], total: int) -> str:
    """``pool_view``'s title: the pool size, then each policy's session tokens hit out of ``total``."""
    return (f"{pool_gib:g} GiB pool, session tokens hit of {total:,}:\n"
            + " \u00b7 ".join(f"{policy} {n:,}" for policy, n in hits.items()))


class _PoolMark(InPlace):
    """The marked pool size of ``draw_hits_vs_pool``, moved in place by ``set``."""

    def __init__(self, line: Line2D) -> None:
        self.line = line
        self.keep_on(line.figure)

    def set(self, pool_gib: float, title: str) -> None:
        self.line.set_xdata([pool_gib] * 2)  # inside the curves' range: the view stays as they set it
        self.line.axes.set_title(title, fontsize=9)
