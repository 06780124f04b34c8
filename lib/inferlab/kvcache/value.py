"""Is a cached prefix worth keeping? Expected net saving V_h = p_h (T_rec - T_fetch) - T_maint (section 8.3.4).

T_rec: time to recompute the prefix (model FLOP at the prefill efficiency, ``calibration``);
T_fetch: time to fetch its KV back and have it ready (the host link, ``Accelerator.transfer_time``);
T_maint: time spent maintaining it (the chapter takes one write-back over the same link);
p_h: probability that the prefix is used again before it would be evicted.

``session_gaps`` measures the "before it would be evicted": the KV that competes with a session between its turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._validate import (finite, finite_result, fraction, instance, items, non_negative, non_negative_int, positive,
                         positive_int)
from ..calibration import PREFILL_MFU_BATCH1, measured_decode_step, prefill_time
from ..hardware import Accelerator
from ..models import ModelSpec
from ..roofline import efficiency, step_read_bytes
from ..workloads import TraceRequest


def expected_saving(p_hit: float, recompute_s: float, fetch_s: float, maintain_s: float) -> float:
    """V_h = p_h (T_rec - T_fetch) - T_maint, in seconds (negative: keeping the prefix costs time)."""
    fraction("p_hit", p_hit)
    return p_hit * (non_negative("recompute_s", recompute_s) - non_negative("fetch_s", fetch_s)) \
        - non_negative("maintain_s", maintain_s)


def break_even_hit_probability(recompute_s: float, fetch_s: float, maintain_s: float) -> float:
    """Smallest p_h with V_h > 0: T_maint / (T_rec - T_fetch); above 1 means the prefix never pays off."""
    gain = non_negative("recompute_s", recompute_s) - non_negative("fetch_s", fetch_s)
    if gain <= 0:
        raise ValueError(f"recompute_s ({recompute_s}) must exceed fetch_s ({fetch_s}) for a hit to save time")
    return finite_result(non_negative("maintain_s", maintain_s) / gain, "recompute_s", "fetch_s", "maintain_s")


@dataclass(frozen=True)
class PrefixCost:
    """Size and times of one cached prefix: bytes, T_rec, T_fetch, T_maint in seconds."""

    tokens: int
    kv_bytes: float
    recompute_s: float
    fetch_s: float
    maintain_s: float

    def __post_init__(self) -> None:
        positive_int("tokens", self.tokens)
        for name in ("kv_bytes", "recompute_s", "fetch_s", "maintain_s"):
            non_negative(name, getattr(self, name))

    @property
    def saving_per_hit_s(self) -> float:
        """T_rec - T_fetch: seconds one hit saves."""
        return self.recompute_s - self.fetch_s

    def value(self, p_hit: float) -> float:
        """Expected net saving V_h at hit probability ``p_hit``, in seconds."""
        return expected_saving(p_hit, self.recompute_s, self.fetch_s, self.maintain_s)

    def value_per_byte(self, p_hit: float) -> float:
        """V_h per byte of KV kept (s/B); multiply by MiB for ms-per-MiB style numbers."""
        if self.kv_bytes <= 0:
            raise ValueError("kv_bytes must be positive to compute a value per byte")
        return self.value(p_hit) / self.kv_bytes

    def break_even(self) -> float:
        """Hit probability above which keeping the prefix saves time."""
        return break_even_hit_probability(self.recompute_s, self.fetch_s, self.maintain_s)

    def break_even_maintenance(self, p_hit: float) -> float:
        """T_maint (s) at which keeping stops paying at ``p_hit``: p_h (T_rec - T_fetch)."""
        return expected_saving(p_hit, self.recompute_s, self.fetch_s, 0.0)

    def hit_probability_for(self, target_s: float) -> float:
        """Hit probability at which V_h equals ``target_s`` (e.g. the saving of what else fits in the space).

        ValueError if a hit saves nothing (T_rec <= T_fetch) or if no probability in [0, 1] reaches ``target_s``.
        """
        if self.saving_per_hit_s <= 0:
            raise ValueError(f"recompute_s ({self.recompute_s}) must exceed fetch_s ({self.fetch_s}) "
                             "for the hit probability to matter")
        p = (finite("target_s", target_s) + self.maintain_s) / self.saving_per_hit_s
        if not 0 <= p <= 1:
            raise ValueError(f"target_s ({target_s}) is out of reach: it needs a hit probability of {p:.3g}")
        return p


def prefix_cost(
    model: ModelSpec,
    accelerator: Accelerator,
    tokens: int,
    cached_tokens: int = 0,
    link_bandwidth: float | None = None,
    mfu: float = PREFILL_MFU_BATCH1,
    maintain_s: float | None = None,
) -> PrefixCost:
    """Cost of keeping ``tokens`` (after ``cached_tokens`` already cached) swapped out over the host link.

    T_rec is the prefill of those tokens at ``mfu``; T_fetch moves their KV over ``link_bandwidth``
    (the accelerator's own host link if None); T_maint defaults to one write-back, equal to T_fetch.
    """
    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    positive_int("tokens", tokens)
    non_negative_int("cached_tokens", cached_tokens)
    efficiency("mfu", mfu)
    kv = tokens * model.kv_bytes_per_token()
    fetch = accelerator.transfer_time(kv, link_bandwidth)
    recompute = prefill_time(model, accelerator, tokens, cached_tokens, mfu)
    return PrefixCost(tokens, kv, recompute, fetch, fetch if maintain_s is None else non_negative("maintain_s", maintain_s))


def best_use_of_space(candidates: list[tuple[PrefixCost, float]], capacity_bytes: float) -> tuple[list[int], float]:
    """Which candidates (cost, p_hit) to keep in ``capacity_bytes`` for the largest total V_h (exact, small n).

    Returns (indices kept, total expected saving in s). Candidates with V_h <= 0 are never kept.
    """
    positive("capacity_bytes", capacity_bytes)
    candidates = items("candidates", candidates)
    for c in candidates:
        if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], PrefixCost)):
            raise ValueError(f"candidates must be (PrefixCost, p_hit) pairs, got {c!r:.80}")
        fraction("candidates' p_hit", c[1])
    if len(candidates) > 20:
        raise ValueError("candidates must be at most 20 (exhaustive search)")
    best: tuple[list[int], float] = ([], 0.0)
    n = len(candidates)
    for mask in range(1 << n):
        keep = [i for i in range(n) if mask >> i & 1]
        size = sum(candidates[i][0].kv_bytes for i in keep)
        if size > capacity_bytes * (1 + 1e-12):
            continue
        values = [candidates[i][0].value(candidates[i][1]) for i in keep]
        if any(v <= 0 for v in values):
            continue
        if sum(values) > best[1]:
            best = (keep, sum(values))
    return best


def keep_ratio_threshold(p_hit: float, maintain_per_fetch: float = 1.0) -> float:
    """T_rec / T_fetch above which keeping a prefix beats dropping it, with T_maint = mu T_fetch (mu = ``maintain_per_fetch``).

    V_h = p_h (T_rec - T_fetch) - mu T_fetch > 0  <=>  T_rec / T_fetch > (p_h + mu) / p_h; p_hit = 0 never pays (ValueError).
    """
    if fraction("p_hit", p_hit) == 0:
        raise ValueError("p_hit must be positive: a prefix that is never used again never pays for its transfers")
    return finite_result((p_hit + non_negative("maintain_per_fetch", maintain_per_fetch)) / p_hit, "p_hit",
                         "maintain_per_fetch")


def recompute_to_fetch_ratio(
    model: ModelSpec,
    accelerator: Accelerator,
    tokens: Sequence[int],
    link_bandwidth: float | None = None,
    mfu: float = PREFILL_MFU_BATCH1,
) -> np.ndarray:
    """T_rec / T_fetch of prefixes of each length in ``tokens``: prefill time over the time to fetch their KV."""
    lengths = [positive_int("tokens", n) for n in items("tokens", tokens)]
    if not lengths:
        raise ValueError("tokens must hold at least one prefix length")
    costs = [prefix_cost(model, accelerator, n, link_bandwidth=link_bandwidth, mfu=mfu) for n in lengths]
    return np.array([c.recompute_s / c.fetch_s for c in costs])


def slowest_paying_link(
    model: ModelSpec,
    accelerator: Accelerator,
    tokens: int,
    p_hit: float,
    maintain_per_fetch: float = 1.0,
    mfu: float = PREFILL_MFU_BATCH1,
) -> float:
    """Link bandwidth (B/s, one direction) below which dropping and recomputing the prefix beats keeping it.

    With T_fetch = M / beta_link and T_maint = mu T_fetch, V_h = 0 at beta_link = M (p_h + mu) / (p_h T_rec).
    """
    ratio = keep_ratio_threshold(p_hit, maintain_per_fetch)
    cost = prefix_cost(model, accelerator, tokens, mfu=mfu)
    return finite_result(ratio * cost.kv_bytes / cost.recompute_s, "tokens", "p_hit", "maintain_per_fetch", "mfu")


@dataclass(frozen=True)
class ContextUpdate:
    """One way to move a context to its next turn, in tokens (8.3.3, Figure 8-20)."""

    name: str
    reused_tokens: int  # cached prefix kept
    processed_tokens: int  # input that must be prefilled again
    generated_tokens: int  # extra output the update itself needs (a summary)
    context_after: int  # tokens every later step attends to
    read_cached_tokens: int = 0  # cached history the update reads as a hit before it rebuilds (the summary step)

    def __post_init__(self) -> None:
        instance("name", self.name, str)
        for name in ("reused_tokens", "processed_tokens", "generated_tokens", "context_after", "read_cached_tokens"):
            non_negative_int(name, getattr(self, name))


def context_update_options(history_tokens: int = 8192, appended_tokens: int = 1024,
                           summary_tokens: int = 2048) -> list[ContextUpdate]:
    """Append to the history, rewrite its front, or summarize it and append: what each reuses and costs."""
    h = positive_int("history_tokens", history_tokens)
    a = non_negative_int("appended_tokens", appended_tokens)
    s = positive_int("summary_tokens", summary_tokens)
    if s >= h:
        raise ValueError(f"summary_tokens ({s}) must be shorter than history_tokens ({h})")
    return [
        ContextUpdate("append", h, a, 0, h + a),
        ContextUpdate("rewrite the front", 0, h + a, 0, h + a),
        ContextUpdate("summarize, then append", 0, s + a, s, s + a, read_cached_tokens=h),
    ]


def generation_time(update: ContextUpdate, model: ModelSpec) -> float:
    """Seconds to generate ``update``'s own tokens (a summary) at batch 1, on the running example's card.

    The first generated token comes out of the update's prefill; each later one takes a decode step, priced as
    experiment 8-1's measured step for the bytes it reads (weights plus the KV of everything before it).
    """
    if not isinstance(update, ContextUpdate):
        raise ValueError(f"update must be a ContextUpdate (context_update_options), got {update!r:.80}")
    instance("model", model, ModelSpec)
    d_w, k = model.matrix_weight_bytes(), model.kv_bytes_per_token()
    return sum(measured_decode_step(step_read_bytes(1, update.read_cached_tokens + j, d_w, k))
               for j in range(1, update.generated_tokens))


@dataclass(frozen=True)
class SessionGap:
    """One gap between two turns of a session, in bytes of KV: what competes with the session for the pool.

    ``competing_bytes``: the input and output KV of the requests that run in the gap (while the tool runs);
    ``session_bytes``: the input and output KV of the session turn that opened the gap.
    """

    competing_bytes: float
    session_bytes: float

    def __post_init__(self) -> None:
        non_negative("competing_bytes", self.competing_bytes)
        non_negative("session_bytes", self.session_bytes)

    @property
    def need_bytes(self) -> float:
        """Pool bytes an LRU cache needs to hold the session through this gap: the competing KV and the session's."""
        return finite_result(self.competing_bytes + self.session_bytes, "competing_bytes", "session_bytes")


def session_gaps(requests: Sequence[TraceRequest], bytes_per_token: float) -> list[SessionGap]:
    """The gaps between consecutive session turns of ``requests`` (a trace such as ``workloads.agent_workload``).

    For each pair of consecutive session turns, the KV of the requests between them (competing traffic) and the KV
    of the earlier turn, each counted as input plus output tokens times ``bytes_per_token``. Requests before the
    first session turn or after the last lie in no gap. Under LRU every competing request of a gap is newer than
    the session's last turn, so the session survives the gap only if the pool holds ``need_bytes``.
    ValueError if the trace holds fewer than two session turns (no gap).
    """
    trace = items("requests", requests)
    for r in trace:
        instance("requests", r, TraceRequest, "a list of TraceRequest")
    positive("bytes_per_token", bytes_per_token)
    turns = [i for i, r in enumerate(trace) if r.session]
    if len(turns) < 2:
        raise ValueError(f"requests must hold at least two session turns (a gap lies between two), got {len(turns)}")

    def kv_bytes(reqs: list[TraceRequest]) -> float:
        tokens = sum(len(r.input_ids) + len(r.output_ids) for r in reqs)
        return finite_result(tokens * bytes_per_token, "bytes_per_token")

    return [SessionGap(kv_bytes(trace[i + 1:j]), kv_bytes([trace[i]])) for i, j in zip(turns, turns[1:])]
