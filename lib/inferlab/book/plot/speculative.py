"""Figures and explorers of section 8.5 (speculative decoding); every number comes from a tested library function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from inferlab.calibration import PREFILL_MFU_SHARED_BATCH16
from inferlab.datasets import published
from inferlab.example import ACCELERATOR, MODEL
from inferlab.scheduling.shapes import multiples
from inferlab.speculative import cost as C
from inferlab.speculative import verify as S
from inferlab.speculative.decoder import DecodeResult
from inferlab.speculative.sources import DFLASH_WEIGHT_BYTES, DRAFT_SOURCES, source_round
from inferlab.units import GB, ms

from ..widgets import Explorer, choice, explore, float_slider, int_slider
from . import COLORS, InPlace, caption, new_figure, refresh_legend
from .ticks import few_ticks

#: Plain batch-1 2K decode step on the RTX PRO 6000 (experiment 8-1), the verification time of 8.5.2.
PLAIN_STEP_S = 26.26 * ms
#: Per-step time beyond the roofline read bound at batch 1 (T_ovh): launches, host scheduling, sync.
OVERHEAD_S = PLAIN_STEP_S - C.verify_step_s(MODEL, ACCELERATOR, 1, 2048, 0)

_ACCEPT, _REJECT, _DISCARD = COLORS["decode"], COLORS["deadline"], COLORS["unused"]


# ---- 8.5.1 ---------------------------------------------------------------------------------------
def verification_trace_figure(verdict: S.Verdict, target: Sequence[str]) -> Figure:
    """Figure 8-29: draft row, the target's choice at each position, and what the round emits."""
    k = len(verdict.draft)
    fig, ax = new_figure(width=7.0, height=2.6)
    rows = [("draft", list(verdict.draft)), ("target picks", list(target)), ("emitted", list(verdict.emitted))]
    for r, (label, toks) in enumerate(rows):
        y = len(rows) - 1 - r
        ax.text(-0.2, y + 0.4, label, ha="right", va="center", fontsize=10)
        for i, tok in enumerate(toks):
            if r == 0:
                color = _ACCEPT if i < verdict.accepted else (_REJECT if i == verdict.accepted else _DISCARD)
            elif r == 1:
                color = COLORS["free"] if i > verdict.accepted else COLORS["highlight"]
            else:
                color = _ACCEPT if i < verdict.accepted else COLORS["highlight"]
            ax.add_patch(Rectangle((i, y), 0.9, 0.8, facecolor=color, edgecolor="#444444", alpha=0.85))
            ax.text(i + 0.45, y + 0.4, str(tok), ha="center", va="center", fontsize=12, family="monospace")
    ax.set_xlim(-1.6, k + 1.2), ax.set_ylim(-0.3, len(rows) + 0.1)
    ax.set_xticks(np.arange(k + 1) + 0.45, [f"pos {i + 1}" for i in range(k + 1)])
    ax.set_yticks([]), ax.grid(False), ax.spines[["left", "bottom"]].set_visible(False)
    return caption(fig, f"Figure 8-29: greedy verification. Drafts 1-{verdict.accepted} match (green), draft "
                        f"{verdict.accepted + 1} does not (red) and later drafts are discarded (grey); the round emits "
                        f"{len(verdict.emitted)} tokens, the last one the target's own (purple).")


def two_symbol_figure(p_first: float = 0.25) -> Figure:
    """Figures 8-30 and 8-31: the two paths (accept, reject) for a draft that always proposes A, or always B."""
    fig, axes = new_figure(1, 2, width=7.0, height=2.9)
    for ax, drafted, number in zip(axes, (0, 1), ("8-30", "8-31")):
        paths = S.two_symbol_paths(p_first, drafted)
        other = 1 - drafted
        bottom = np.zeros(2)
        for share, sym, color, label in ((paths["accept"], drafted, _ACCEPT, "draft accepted"),
                                         (paths["reject"], other, _REJECT, "rejected, resampled")):
            height = np.zeros(2)
            height[sym] = share
            ax.bar(["A", "B"], height, bottom=bottom, color=color, label=label)
            bottom += height
        ax.scatter(["A", "B"], [p_first, 1 - p_first], marker="_", s=900, color="k", label="target p", zorder=3)
        ax.set_title(f"Figure {number}: draft {'A' if drafted == 0 else 'B'} "
                                        f"(accept {paths['accept']:.2f})")
        ax.set_ylabel("probability of the emitted symbol")
    axes[0].legend(loc="upper left", fontsize=8, bbox_to_anchor=(0.0, 0.98))
    for ax in axes:
        ax.set_ylim(0, 1.15)
    return caption(fig, "Figures 8-30 and 8-31: each bar stacks the two ways a symbol comes out, as the kept draft "
                        "(green) or as the replacement after a refusal (red). For either lookup the stacks reach the "
                        f"target's marks, p(A) = {p_first:g} and p(B) = {1 - p_first:g}; only the green share differs.")


def sampling_histogram_figure(p: np.ndarray, q: np.ndarray, tokens: np.ndarray) -> Figure:
    """Empirical frequency of speculative samples beside p and q."""
    v = p.size
    freq = np.bincount(tokens, minlength=v) / tokens.size
    x = np.arange(v)
    fig, ax = new_figure(width=7.0, height=3.0)
    ax.bar(x - 0.27, q, 0.27, color=COLORS["unused"], label="draft q")
    ax.bar(x, p, 0.27, color=COLORS["prefill"], label="target p")
    ax.bar(x + 0.27, freq, 0.27, color=COLORS["decode"], label=f"emitted ({tokens.size:,} rounds)")
    ax.set_xticks(x), ax.set_xlabel("token"), ax.set_ylabel("probability"), ax.legend(ncols=3, loc="upper right")
    return caption(fig, "Speculative sampling from q reproduces p: the green bars (what was emitted) match the blue "
                        "bars, not the grey ones.")


class _Acceptance(InPlace):
    """``acceptance_view``'s bars (per-position acceptance, round lengths) and E[N] marker, redrawn in place."""

    MAX_DRAFTS = 16

    def __init__(self, fig: Figure, axes) -> None:
        self.left, self.right = axes
        positions = np.arange(1, self.MAX_DRAFTS + 1)
        self.accept = self.left.bar(positions - 0.2, np.zeros(self.MAX_DRAFTS), 0.4, color=COLORS["unused"],
                                    label="a_j: draft j accepted, given 1..j-1 were")
        self.reach = self.left.bar(positions + 0.2, np.zeros(self.MAX_DRAFTS), 0.4, color=COLORS["decode"],
                                   label="P(N > j): drafts 1..j all accepted")
        self.left.set_xlim(0.4, self.MAX_DRAFTS + 0.6), self.left.set_ylim(0, 1.18)
        self.left.set_xlabel("draft position j"), self.left.set_ylabel("probability")
        self.left.legend(fontsize=8, loc="upper right")
        self.lengths = self.right.bar(np.arange(1, self.MAX_DRAFTS + 2), np.zeros(self.MAX_DRAFTS + 1), 0.8,
                                      color=COLORS["prefill"])
        self.mean = self.right.axvline(1.0, color=COLORS["highlight"], ls="--")
        self.right.set_xlim(0.4, self.MAX_DRAFTS + 1.6), self.right.set_ylim(0, 1.05)
        self.right.set_xlabel("tokens N a round emits"), self.right.set_ylabel("P(N = n)")
        for ax in axes:
            few_ticks(ax, x=5, y=4)
        self.keep_on(fig)

    def set(self, accept: float, decay: float, drafts: int) -> None:
        a = C.geometric_profile(accept, drafts, decay)
        reach, pmf = np.cumprod(a), C.tokens_distribution(a)
        for j in range(self.MAX_DRAFTS):
            shown = j < drafts
            for bars, values in ((self.accept, a), (self.reach, reach)):
                bars[j].set_height(values[j] if shown else 0.0)
                bars[j].set_visible(shown)
        for n in range(self.MAX_DRAFTS + 1):
            self.lengths[n].set_height(pmf[n] if n <= drafts else 0.0)
            self.lengths[n].set_visible(n <= drafts)
        mean = C.expected_tokens(a)
        self.mean.set_xdata([mean, mean])
        self.left.set_xlim(0.4, drafts + 0.6), self.right.set_xlim(0.4, drafts + 1.6)
        self.right.set_title(f"E[N] = {mean:.2f} tokens per round (at most {drafts + 1})", fontsize=10)
        self.left.set_title(f"m = {drafts} drafts, a_1 = {accept:.2f}, decay {decay:.2f}", fontsize=10)


def acceptance_view(accept: float, decay: float, drafts: int) -> Figure:
    """Per-position acceptance of an m-draft round and the distribution of the tokens it emits (8.5.1's explorer)."""
    fig, axes = new_figure(1, 2, width=7.0, height=3.0)
    _Acceptance(fig, axes).set(accept, decay, drafts)
    return fig


def update_acceptance(fig: Figure, accept: float, decay: float, drafts: int) -> bool:
    """Redraw an ``acceptance_view`` figure in place (the explorer's slider path)."""
    return _Acceptance.redraw(fig, accept, decay, drafts)


def acceptance_explorer() -> Explorer:
    """Acceptance of the first draft, its decay along the round and the draft length against E[N] (8.5.1)."""
    return explore(acceptance_view, update_acceptance,
                   grid=dict(accept=(0.05, 0.25, 0.5, 0.6, 0.75, 0.8, 0.9, 1.0), decay=(0.5, 0.7, 0.8, 0.9, 1.0),
                             drafts=(1, 2, 4, 6, 8, 12, 16)),
                   # the "Try it" of 8.5.1: a1 = 0.9 with m = 8, then with a decay of 0.8
                   extra_states=[dict(accept=0.9, drafts=8, decay=0.8)],
                   accept=float_slider("acceptance a1", 0.05, 1.0, 0.75, 0.05),
                   decay=float_slider("decay per position", 0.5, 1.0, 1.0, 0.05),
                   drafts=int_slider("draft length m", 1, _Acceptance.MAX_DRAFTS, 4))


# ---- 8.5.2 ---------------------------------------------------------------------------------------
def round_tokens_figure(spec_rounds: pd.DataFrame, plain_rounds: pd.DataFrame,
                        accept_probs: Sequence[float]) -> Figure:
    """A simulated request round by round: how many tokens its rounds emitted (left, beside P(N = n)) and the
    tokens delivered over time, speculative against plain (right). The frames are ``speculative.rounds.round_log``'s.
    """
    pmf = C.tokens_distribution(accept_probs)
    n = np.arange(1, pmf.size + 1)
    tokens = spec_rounds["tokens"].to_numpy()
    share = np.bincount(tokens, minlength=pmf.size + 1)[1:pmf.size + 1] / tokens.size
    fig, (left, right) = new_figure(1, 2, width=7.0, height=3.0)
    fig.subplots_adjust(wspace=0.35)
    left.bar(n, share, color=COLORS["decode"], label=f"simulated ({tokens.size} rounds)")
    left.scatter(n, pmf, marker="_", s=400, color="k", zorder=3, label="P(N = n)")
    left.set_xticks(n), left.set_xlabel("tokens emitted by a round"), left.set_ylabel("share of rounds")
    left.legend(fontsize=8, loc="upper right")
    for frame, label, color in ((plain_rounds, "plain decode", COLORS["deadline"]),
                                (spec_rounds, "speculative", COLORS["decode"])):
        t = np.concatenate(([0.0], np.cumsum(frame["round_s"].to_numpy())))
        emitted = np.concatenate(([0], np.cumsum(frame["tokens"].to_numpy())))
        right.step(t, emitted, where="post", color=color, label=label)
    right.set_xlabel("time after the first token (s)"), right.set_ylabel("tokens after the first")
    right.set_xlim(left=0), right.set_ylim(bottom=0), right.legend(fontsize=8, loc="lower right")
    few_ticks(right, x=5, y=5)
    profile = (f"a = {accept_probs[0]:.2f}" if len(set(np.round(accept_probs, 12))) == 1
               else f"a_1 = {accept_probs[0]:.2f}")
    ratio = spec_rounds["round_s"].mean() / plain_rounds["round_s"].mean()
    return caption(fig, f"One request, {int(spec_rounds['tokens'].sum())} tokens after the first, decoded plainly in "
                        f"{len(plain_rounds)} steps and speculatively ({len(accept_probs)} drafts, {profile}) in "
                        f"{tokens.size} rounds: a round took {ratio:.3f} plain steps and emitted {tokens.mean():.2f} "
                        "tokens on average.")


def round_cost_figure(accept: float = 0.75, drafts: int = 4, lookup_ms: float = 0.1,
                      verify_ms: float = PLAIN_STEP_S / ms) -> Figure:
    """Figure 8-32: time per output token against the draft query time, for AAAA, BBBB and a chosen profile."""
    fig, ax = new_figure(width=7.0, height=3.4)
    _RoundCost(ax).set(accept, drafts, lookup_ms, verify_ms)
    return fig


class _RoundCost(InPlace):
    """Figure 8-32's artists: AAAA and BBBB drawn once, the reader's profile redrawn in place by ``set``."""

    QUERY_MS = np.linspace(0, 70, 281)

    def __init__(self, ax) -> None:
        self.ax, plain, query = ax, PLAIN_STEP_S, self.QUERY_MS * ms
        breaks, self.lookups = [], []
        for label, a, color in (("AAAA (a = 1/4)", [0.25] * 4, COLORS["kv"]),
                                ("BBBB (a = 3/4)", [0.75] * 4, COLORS["prefill"])):
            ax.plot(self.QUERY_MS, (plain + query) / C.expected_tokens(a) / ms, color=color, label=label, ls="-")
            be = C.break_even_draft_s(a, plain)
            breaks.append((be / ms, plain / ms, color))
            ax.annotate(f"{be / ms:.1f} ms", (be / ms, plain / ms), textcoords="offset points", xytext=(4, -14),
                        fontsize=9, color=color)
            self.lookups.append((0.1, C.spec_time_per_token(a, plain, 0.1 * ms) / ms))  # a 0.1 ms lookup
        self.yours, = ax.plot(self.QUERY_MS, self.QUERY_MS, color=COLORS["highlight"], ls="--")
        # where the reader's profile crosses plain decode, with its query time written beside it
        self.your_break, = ax.plot([], [], "o", color=COLORS["highlight"], ms=6, zorder=3)
        self.your_text = ax.annotate("", (0, plain / ms), textcoords="offset points", xytext=(4, 6), fontsize=10,
                                     color=COLORS["highlight"])
        x, y, colors = zip(*breaks)  # where each profile breaks even with plain decode: circles
        ax.scatter(x, y, s=np.square([6, 6]), c=colors, marker="o", zorder=2.5)
        self.squares = ax.scatter([0, 0, 0], [0, 0, 0], s=np.square([5, 5, 6]), marker="s", zorder=2.5,
                                  c=[COLORS["kv"], COLORS["prefill"], COLORS["highlight"]])
        ax.axhline(plain / ms, color=COLORS["deadline"], ls=":", label="plain decode 26.26 ms/token")
        ax.set_xlabel("draft query time per round (ms)"), ax.set_ylabel("time per output token (ms)")
        ax.set_xlim(0, 70), ax.set_ylim(0, 80)
        few_ticks(ax, x=5, y=4)
        (be_a, _, _), (be_b, _, _) = breaks
        caption(ax.figure, "Figure 8-32: how long a lookup may take. Each line is a four-token lookup's time per "
                           "output token as its query time grows; it stays under the dotted plain-decode line up to "
                           f"its circle ({be_a:.1f} ms for AAAA, {be_b:.1f} ms for BBBB). The squares sit at a "
                           "0.1 ms query.")
        self.keep_on(ax.figure)

    def set(self, accept: float, drafts: int, lookup_ms: float, verify_ms: float) -> None:
        verify, tokens = verify_ms * ms, C.expected_tokens([accept] * drafts)
        self.yours.set(ydata=(verify + self.QUERY_MS * ms) / tokens / ms,
                       label=f"yours (a = {accept:.2f}, m = {drafts})")
        self.squares.set_offsets([*self.lookups, (lookup_ms, (verify + lookup_ms * ms) / tokens / ms)])
        crossing = (PLAIN_STEP_S * tokens - verify) / ms  # (verify + q) / E[N] = plain step
        shown = 0 <= crossing <= self.QUERY_MS[-1]
        self.your_break.set_data([crossing] if shown else [], [PLAIN_STEP_S / ms] if shown else [])
        self.your_text.set_text(f"yours: {crossing:.1f} ms" if shown else
                                ("yours: never faster" if crossing < 0 else "yours: beyond 70 ms"))
        self.your_text.xy = (min(max(crossing, 0), 52), PLAIN_STEP_S / ms)
        refresh_legend(self.ax, loc="upper left", fontsize=8)


def update_round_cost(fig: Figure, accept: float, drafts: int, lookup_ms: float, verify_ms: float) -> bool:
    """Redraw a ``round_cost_view`` figure in place (the explorer's slider path)."""
    return _RoundCost.redraw(fig, accept, drafts, lookup_ms, verify_ms)


def round_cost_view(accept: float, drafts: int, lookup_ms: float, verify_ms: float) -> Figure:
    """The explorer's figure (all four knobs)."""
    return round_cost_figure(accept, drafts, lookup_ms, verify_ms)


def round_cost_explorer() -> Explorer:
    """Acceptance, draft length, query time and verification time against time per token (8.5.2)."""
    return explore(round_cost_view, update_round_cost,
                   grid=dict(accept=(0, 0.25, 0.5, 0.75, 0.9, 1), drafts=(1, 2, 4, 8, 16),
                             lookup_ms=(0, 0.1, 1, 5, 10, 20, 40, 60), verify_ms=(5, 10, 15, 20, 26.26, 40, 60)),
                   accept=float_slider("acceptance a", 0.0, 1.0, 0.5, 0.05),
                   drafts=int_slider("draft length m", 1, 16, 4),
                   lookup_ms=float_slider("query time", 0.0, 60.0, 0.1, 0.1, unit="ms"),
                   verify_ms=float_slider("verification time", 5.0, 60.0, 26.26, 0.01, unit="ms"))


# ---- 8.5.3 ---------------------------------------------------------------------------------------
def draft_sources_figure(stages: pd.DataFrame) -> Figure:
    """Stacked stage times per round (draft, prepare, verify, accept) of each draft source, and time per token."""
    fig, axes = new_figure(1, 2, width=7.0, height=3.4)
    fig.subplots_adjust(left=1.75 / 7.0, right=0.97, wspace=0.12, bottom=0.55 / 3.4, top=1 - 0.6 / 3.4)
    left = np.zeros(len(stages))
    colors = {"draft (ms)": COLORS["highlight"], "prepare (ms)": COLORS["accent"], "verify (ms)": COLORS["prefill"],
              "accept (ms)": COLORS["decode"]}
    y = np.arange(len(stages))
    for col, color in colors.items():
        axes[0].barh(y, stages[col], left=left, color=color, label=col.replace(" (ms)", ""))
        left += stages[col].to_numpy()
    labels = [name.replace(", ", "\n") for name in stages.index]
    axes[0].set_yticks(y, labels), axes[0].invert_yaxis(), axes[0].set_xlabel("ms per round")
    axes[0].legend(fontsize=8, ncols=4, loc="lower left", bbox_to_anchor=(0.0, 1.0))
    axes[1].barh(y, stages["ms per token"], color=COLORS["decode"])
    axes[1].axvline(PLAIN_STEP_S / ms, color=COLORS["deadline"], ls=":")
    axes[1].set_yticks(y, [""] * len(y)), axes[1].invert_yaxis(), axes[1].set_xlabel("ms per output token")
    for i, v in enumerate(stages["ms per token"]):
        axes[1].text(v + 0.3, i, f"{v:.1f}", va="center", fontsize=9)
    return caption(fig, "Draft sources stage by stage (left; preparing the verification and accepting, tiny "
                        "beside the pass, are drawn at zero) and per output token (right; dotted: plain "
                        "decode, 26.26 ms).")


#: The bytes a batch-1 2K decode step reads (experiment 8-1, as published).
STEP_READ_BYTES = published("batch_sweep_8_1").set_index("batch").loc[1, "step_read_gb"] * GB


class _DraftSource(InPlace):
    """``draft_source_view``'s two stacked bars (drafting and verifying, per output token), redrawn in place."""

    def __init__(self, ax) -> None:
        self.ax = ax
        y = [1, 0]  # plain decode on top, the chosen source below
        self.verify = ax.barh(y, [0, 0], 0.55, color=COLORS["prefill"], label="verify (the target's pass)")
        self.draft = ax.barh(y, [0, 0], 0.55, color=COLORS["highlight"], label="draft")
        self.labels = [ax.text(0, yy, "", va="center", fontsize=9) for yy in y]
        ax.set_yticks(y, ["plain decode", "speculative"]), ax.set_ylim(-0.6, 1.9)
        ax.set_xlabel("ms per output token")
        ax.legend(fontsize=8, ncols=2, loc="upper right")
        self.keep_on(ax.figure)

    def set(self, source: str, weights_gb: float, overhead_ms: float, accept: float, drafts: int) -> None:
        bandwidth = C.effective_bandwidth(STEP_READ_BYTES, PLAIN_STEP_S)  # what a plain step achieves, per byte
        r = source_round(source, drafts, accept, PLAIN_STEP_S, weights_gb * GB, bandwidth, overhead_ms * ms)
        verify = [PLAIN_STEP_S / ms, r.verify_s / r.tokens / ms]
        draft = [0.0, r.draft_s / r.tokens / ms]
        for i in range(2):
            self.verify[i].set_width(verify[i])
            self.draft[i].set_x(verify[i])
            self.draft[i].set_width(draft[i])
            self.labels[i].set_position((verify[i] + draft[i] + 0.6, 1 - i))
            self.labels[i].set_text(f"{verify[i] + draft[i]:.1f}")
        self.ax.set_xlim(0, 1.25 * max(verify[0], verify[1] + draft[1]))
        memory = "none" if not r.extra_bytes else f"{r.extra_bytes / GB:.2f} GB of draft weights"
        spec = verify[1] + draft[1]
        verdict = "faster than" if spec < verify[0] else "as fast as" if spec == verify[0] else "slower than"
        self.ax.set_title(f"{source}: E[N] = {r.tokens:.2f}, drafting {r.draft_s / ms:.2f} ms a round, "
                          f"{verdict} plain decode\ndevice memory: {memory}", fontsize=9)


def draft_source_view(source: str, weights_gb: float, overhead_ms: float, accept: float, drafts: int) -> Figure:
    """Time per output token of a draft source (drafting + verification over E[N]) against plain decode (8.5.3)."""
    fig, ax = new_figure(width=7.0, height=2.6)
    fig.subplots_adjust(left=1.25 / 7.0)
    _DraftSource(ax).set(source, weights_gb, overhead_ms, accept, drafts)
    return fig


def update_draft_source(fig: Figure, source: str, weights_gb: float, overhead_ms: float, accept: float,
                        drafts: int) -> bool:
    """Redraw a ``draft_source_view`` figure in place (the explorer's slider path)."""
    return _DraftSource.redraw(fig, source, weights_gb, overhead_ms, accept, drafts)


def draft_source_explorer() -> Explorer:
    """Draft source, its weights and per-forward overhead, acceptance and draft length against plain decode (8.5.3)."""
    return explore(draft_source_view, update_draft_source,
                   grid=dict(weights_gb=(0.1, 2.1, 8), accept=(0.5, 0.75, 1), drafts=(1, 4, 16),
                             overhead_ms=(0, 2, 4, 8, 9.5, 10, 17.5, 30, 50, 50.5, 60)),
                   source=choice("draft source", list(DRAFT_SOURCES),
                                                                          "draft model, serial"),
                   weights_gb=float_slider("draft weights", 0.1, 8.0, 2.1, 0.1, unit="GB"),
                   overhead_ms=float_slider("fixed cost per forward", 0.0, 60.0, 0.0, 0.5, unit="ms"),
                   accept=float_slider("acceptance a", 0.05, 1.0, 0.75, 0.05),
                   drafts=int_slider("draft length m", 1, 16, 4))


def decoder_rounds_figure(result: DecodeResult, title: str) -> Figure:
    """Tokens emitted by each verification round of the real decoder (top) and the running acceptance rate (bottom)."""
    emitted = np.array([len(r.emitted) for r in result.rounds])
    drafted = np.array([r.drafted for r in result.rounds])
    accepted = np.array([r.accepted for r in result.rounds])
    fig, (top, bottom) = new_figure(2, 1, width=7.0, height=3.8)
    x = np.arange(1, emitted.size + 1)
    top.bar(x, emitted, color=COLORS["decode"], width=1.0, label="tokens emitted")
    top.step(x, drafted + 1, where="mid", color="#444444", lw=0.8, label="drafted + 1 (most possible)")
    top.set_ylabel("tokens"), top.set_ylim(0, drafted.max(initial=0) + 2.5)
    top.legend(fontsize=8, ncols=2, loc="upper right")
    bottom.plot(x, np.cumsum(accepted) / np.maximum(np.cumsum(drafted), 1), color=COLORS["highlight"])
    bottom.set_ylim(0, 1.05), bottom.set_ylabel("acceptance\nso far"), bottom.set_xlabel("verification round")
    return caption(fig, f"{title}: {result.accepted} of {result.drafted} drafts accepted "
                        f"({result.acceptance_rate:.0%}), {result.tokens_per_round:.2f} tokens per round.")


# ---- 8.5.4 ---------------------------------------------------------------------------------------
#: The largest iteration vLLM captures a graph for by default (tokens); a larger one runs eagerly, unpadded.
LARGEST_CAPTURED = 512
#: The explorer's context (tokens): short enough that 256 requests' KV fits on the card beside the weights.
DRAFT_LENGTH_CONTEXT = 512


def draft_length_round(accept: float, decay: float, per_draft_ms: float, group: int, batch: int,
                       context_tokens: int = DRAFT_LENGTH_CONTEXT, max_drafts: int = 16
                       ) -> tuple[np.ndarray, Callable[[int], float]]:
    """The explorer's model: the acceptance profile a_1 .. a_max_drafts and the seconds of a round with m drafts at
    ``batch`` (m = 0: a plain step). Each step pays the batch-1 overhead ``OVERHEAD_S``; the iteration's
    batch x (m + 1) rows are padded to captured sizes 1, 2, 4 and multiples of ``group`` up to ``LARGEST_CAPTURED``
    (larger iterations run unpadded); m serial drafts cost ``per_draft_ms`` each. ``C.best_draft_length`` takes both."""
    captured = multiples(group, LARGEST_CAPTURED)
    return C.geometric_profile(accept, max_drafts, decay), partial(
        C.padded_round_time_s, model=MODEL, accelerator=ACCELERATOR, batch=batch, context_tokens=context_tokens,
        per_draft_s=per_draft_ms * ms, overhead_s=OVERHEAD_S, mfu=PREFILL_MFU_SHARED_BATCH16, captured=captured)


def draft_length_frame(accept: float, decay: float, per_draft_ms: float, group: int, batch: int,
                       context_tokens: int = DRAFT_LENGTH_CONTEXT, max_drafts: int = 16) -> pd.DataFrame:
    """Time per token against draft length m at ``batch``, under ``draft_length_round``'s model."""
    a, round_s = draft_length_round(accept, decay, per_draft_ms, group, batch, context_tokens, max_drafts)
    times = [round_s(m) for m in range(max_drafts + 1)]
    frame = pd.DataFrame({"m": range(1, max_drafts + 1), "E[N]": 1.0 + np.cumsum(np.cumprod(a)),
                          "round (ms)": np.asarray(times[1:]) / ms}).set_index("m")
    frame["ms per token"] = frame["round (ms)"] / frame["E[N]"]
    frame["plain ms per token"] = times[0] / ms
    return frame


def draft_length_view(accept: float, decay: float, per_draft_ms: float, group: int, batch: int) -> Figure:
    """The explorer's figure: time per token against draft length, best length marked."""
    fig, ax = new_figure(width=7.0, height=3.2)
    _DraftLength(ax).set(draft_length_frame(accept, decay, per_draft_ms, group, batch), group, batch)
    return fig


def update_draft_length(fig: Figure, accept: float, decay: float, per_draft_ms: float, group: int, batch: int) -> bool:
    """Redraw a ``draft_length_view`` figure in place (the explorer's path)."""
    return _DraftLength.redraw(fig, draft_length_frame(accept, decay, per_draft_ms, group, batch), group, batch)


class _DraftLength(InPlace):
    """``draft_length_view``'s curve, plain-decode line and best-length star, redrawn in place by ``set``."""

    def __init__(self, ax) -> None:
        self.ax = ax
        self.curve, = ax.plot([], [], "o-", color=COLORS["decode"], ms=4, label="speculative")
        self.plain = ax.axhline(0, color=COLORS["deadline"], ls=":", label="plain decode")
        self.best, = ax.plot([], [], "*", ms=14, color=COLORS["highlight"])
        ax.set_xlabel("draft length m"), ax.set_ylabel("ms per output token (each request)")
        few_ticks(ax, x=None, y=5)
        self.keep_on(ax.figure)

    def set(self, frame: pd.DataFrame, group: int, batch: int) -> None:
        ax, per_token, plain = self.ax, frame["ms per token"], frame["plain ms per token"].iloc[0]
        self.curve.set_data(frame.index, per_token)
        self.plain.set_ydata([plain, plain])
        best = int(per_token.idxmin())
        self.best.set_data([best], [per_token.loc[best]])
        self.best.set_label(f"best m = {best}")
        ax.relim()
        ax.autoscale_view()
        # headroom for a one-row legend at a fixed place (searching for the 'best' place costs a redraw ~10 ms)
        ax.set_xticks([1, *frame.index[3::4]]), ax.set_ylim(0, 1.3 * max(per_token.max(), plain))
        refresh_legend(ax, fontsize=8, loc="upper center", ncols=3)
        ax.set_title(f"batch {batch}, {DRAFT_LENGTH_CONTEXT}-token context; the step's rows padded to multiples of "
                     f"{group} (up to {LARGEST_CAPTURED})", fontsize=9)


def draft_length_explorer() -> Explorer:
    """Acceptance profile, per-draft cost, bucket size and batch against the best draft length (8.5.4)."""
    return explore(draft_length_view, update_draft_length,
                   grid=dict(accept=(0.4, 0.6, 0.8, 0.85, 0.9, 1.0), decay=(0.5, 0.7, 0.8, 0.9, 1.0),
                             per_draft_ms=(0, 0.5, 1, 2, 4, 8)),
                   accept=float_slider("acceptance a1", 0.05, 1.0, 0.8, 0.05),
                   decay=float_slider("decay per position", 0.5, 1.0, 1.0, 0.05),
                   per_draft_ms=float_slider("cost per draft", 0.0, 8.0, 1.0, 0.1, unit="ms"),
                   group=choice("bucket size (rows)", [1, 4, 8, 16], 8),
                   batch=choice("batch", [1, 4, 16, 64, 128, 256], 1))


def concurrency_figure(accept_probs: Sequence[float], contexts: Sequence[int] = (512, 2048)) -> Figure:
    """Speed-up of speculative decoding over plain decode against batch (roofline steps + T_ovh)."""
    batches = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    fig, ax = new_figure(width=7.0, height=3.0)
    for L, color in zip(contexts, (COLORS["decode"], COLORS["prefill"])):
        gain = [C.batch_speedup(MODEL, ACCELERATOR, int(b), L, accept_probs, PREFILL_MFU_SHARED_BATCH16, 1.0,
                                fixed_s=OVERHEAD_S) for b in batches]
        ax.plot(batches, gain, "o-", color=color, ms=4, label=f"context {L} tokens")
    ax.axhline(1, color=COLORS["deadline"], ls=":")
    ax.set_xscale("log", base=2), ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch (requests decoding together)"), ax.set_ylabel("speed-up over plain decode")
    ax.set_ylim(bottom=0), ax.legend(fontsize=8)
    return caption(fig, f"{len(accept_probs)} drafts at a = {accept_probs[0]:.2f}, drafting free: once the "
                        "verification step turns compute-bound, extra rows cost time and the gain shrinks.")
