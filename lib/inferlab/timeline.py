"""A request's timeline and the metrics read off it: TTFT, ITL, TPOT, request time, throughput.

Symbols as in ``notation.md``: t_a is the arrival time and t_1 ... t_G the times the G output
tokens reach the user; TTFT = t_1 - t_a, ITL_j = t_{j+1} - t_j, TPOT = (t_G - t_1)/(G - 1),
T_request = TTFT + sum_j ITL_j = t_G - t_a (seconds); R_out = b / T_step (tokens/s).

A request with one output token (G = 1) has no inter-token gap: its ITL, TPOT and longest gap are
undefined and reported as NaN, never as 0. Batch metrics pool the gaps that exist, so such a
request adds no zero gap to a mean, maximum or percentile; they are NaN when no request has a gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from ._validate import (MAX_COUNT, finite_result, instance, items, mapping, non_negative, positive, positive_int,
                        real_array)


@dataclass(frozen=True, eq=False)
class RequestTimes:
    """Arrival time and output-token emission times of one request (seconds).

    ``token_times_s`` (a 1-D sequence of real numbers) is kept as a read-only float64 array (a
    simulator may hand in a slice of its array of iteration end times); gaps are computed when asked for.
    """

    arrival_s: float
    token_times_s: np.ndarray

    def __post_init__(self) -> None:
        non_negative("arrival_s", self.arrival_s)
        times = real_array("token_times_s", self.token_times_s)  # a new array: the caller's is not aliased
        if times.size == 0:
            raise ValueError("token_times_s must hold at least one output token time")
        if not np.all(np.isfinite(times)) or np.any(np.diff(times) < 0):
            raise ValueError("token_times_s must be finite and non-decreasing")
        if times[0] < self.arrival_s:
            raise ValueError(f"token_times_s must start at or after arrival_s ({self.arrival_s}), "
                             f"got a first token at {times[0]}")
        times.flags.writeable = False
        object.__setattr__(self, "token_times_s", times)

    @classmethod
    def _trusted(cls, arrival_s: float, token_times_s: np.ndarray) -> "RequestTimes":
        """Build without checks, for a simulator whose times are valid by construction (a read-only float64 array).

        Private: it is the simulators' fast path, not part of the checked interface.
        """
        obj = object.__new__(cls)
        object.__setattr__(obj, "arrival_s", arrival_s)
        object.__setattr__(obj, "token_times_s", token_times_s)
        return obj

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestTimes):
            return NotImplemented
        return self.arrival_s == other.arrival_s and np.array_equal(self.token_times_s, other.token_times_s)

    __hash__ = None  # type: ignore[assignment]

    @property
    def output_tokens(self) -> int:
        """G, the number of output tokens."""
        return len(self.token_times_s)

    @property
    def ttft_s(self) -> float:
        """Time to first token, t_1 - t_a."""
        return float(self.token_times_s[0]) - self.arrival_s

    @property
    def itls_s(self) -> np.ndarray:
        """The G - 1 inter-token latencies t_{j+1} - t_j."""
        return np.diff(self.token_times_s)

    @property
    def max_itl_s(self) -> float:
        """Longest gap between consecutive output tokens (seconds; NaN for a single token: it has no gap)."""
        itls = self.itls_s
        return float(itls.max()) if itls.size else math.nan

    @property
    def mean_itl_s(self) -> float:
        """Mean inter-token latency, the TPOT (t_G - t_1)/(G - 1) in seconds (NaN for a single token: it has no gap)."""
        itls = self.itls_s
        return float(itls.mean()) if itls.size else math.nan

    @property
    def request_time_s(self) -> float:
        """End-to-end time, TTFT + sum of ITLs = t_G - t_a."""
        return float(self.token_times_s[-1]) - self.arrival_s

    def meets(self, deadline_s: float) -> bool:
        """Whether the whole answer arrives within ``deadline_s`` of arrival."""
        return self.request_time_s <= positive("deadline_s", deadline_s)


def single_request(
    queue_s: float,
    prefill_s: float,
    itl_s: float,
    output_tokens: int,
    arrival_s: float = 0.0,
    stalls_s: Mapping[int, float] | None = None,
) -> RequestTimes:
    """Timeline of a request that queues, prefills (emitting token 1), then decodes one token per ``itl_s``.

    ``stalls_s`` maps a gap index j (1-based: the gap before token j + 1) to extra seconds,
    e.g. ``{100: 0.096}`` for another request's prefill inserted into the 100th gap.
    """
    non_negative("queue_s", queue_s)
    non_negative("prefill_s", prefill_s)
    non_negative("itl_s", itl_s)
    g = positive_int("output_tokens", output_tokens, MAX_COUNT)
    arrival_s = non_negative("arrival_s", arrival_s)
    gaps = np.full(g - 1, float(itl_s))
    for j, extra in ({} if stalls_s is None else mapping("stalls_s", stalls_s)).items():
        if isinstance(j, bool) or not isinstance(j, Integral) or not 1 <= j <= g - 1:
            raise ValueError(f"stalls_s key {j!r} must be an integer gap index in 1..{g - 1}")
        gaps[j - 1] += non_negative("stalls_s value", extra)
    first = arrival_s + queue_s + prefill_s
    with np.errstate(over="ignore"):  # an overflow is refused just below, naming the arguments
        times = first + np.concatenate([[0.0], np.cumsum(gaps)])
    finite_result(times[-1], "arrival_s", "queue_s", "prefill_s", "itl_s", "output_tokens", "stalls_s")  # the latest
    return RequestTimes(arrival_s, times)


def request_time(queue_s: float, prefill_s: float, itl_s: float, output_tokens: int) -> float:
    """Seconds from arrival to the last token: queue + prefill + (G - 1) x ITL."""
    return single_request(queue_s, prefill_s, itl_s, output_tokens).request_time_s


def decode_throughput(batch: int, step_s: float) -> float:
    """Output throughput R_out = b / T_step (tokens/s) when each decode step emits one token per request."""
    return finite_result(positive_int("batch", batch) / positive("step_s", step_s), "batch", "step_s")


def _timelines(requests: Sequence[RequestTimes]) -> list[RequestTimes]:
    """``requests`` as a new non-empty list of ``RequestTimes``, else ValueError naming ``requests``."""
    requests = items("requests", requests)
    if not requests:
        raise ValueError("requests must not be empty")
    stranger = next((r for r in requests if not isinstance(r, RequestTimes)), None)
    if stranger is not None:
        instance("requests", stranger, RequestTimes, "a sequence of timeline.RequestTimes")
    return requests


def _flat(requests: Sequence[RequestTimes]) -> tuple[np.ndarray, np.ndarray]:
    """All token times end to end, and each request's count of tokens."""
    counts = np.fromiter((r.token_times_s.size for r in requests), dtype=np.int64, count=len(requests))
    return np.concatenate([r.token_times_s for r in requests]), counts


def itls_by_request(requests: Sequence[RequestTimes]) -> tuple[np.ndarray, np.ndarray]:
    """Each request's longest and mean inter-token latency, vectorized (seconds; NaN for a single token).

    Aggregate them with NaN-skipping reductions (``np.nanmax``, ``np.fmax.reduce``, pandas): a
    request without a gap has no ITL, and a plain ``max`` would return NaN.
    """
    requests = _timelines(requests)
    flat, counts = _flat(requests)
    gaps = np.append(np.diff(flat), -np.inf)
    starts = np.cumsum(counts) - counts
    gaps[starts[1:] - 1] = -np.inf  # the step from one request's last token to the next one's first
    longest = np.maximum.reduceat(gaps, starts)
    gaps[np.isneginf(gaps)] = 0.0
    n_gaps = counts - 1
    mean = np.divide(np.add.reduceat(gaps, starts), n_gaps, out=np.full(len(counts), np.nan), where=n_gaps > 0)
    return np.where(n_gaps > 0, longest, np.nan), mean


def summarize(requests: Sequence[RequestTimes]) -> dict[str, float]:
    """Batch-level metrics: mean TTFT, mean and max ITL, makespan from the first arrival, output throughput (tokens/s).

    The ITLs are every gap of every request, pooled: a request with one output token adds none
    (not a zero), and both ITL metrics are NaN when no request has a gap.
    """
    requests = _timelines(requests)
    flat, counts = _flat(requests)
    ends = np.cumsum(counts)
    arrivals = np.fromiter((r.arrival_s for r in requests), dtype=float, count=len(requests))
    keep = np.ones(flat.size - 1, dtype=bool)
    keep[ends[:-1] - 1] = False
    itls = np.diff(flat)[keep]
    start = float(arrivals.min())
    span = float(flat[ends - 1].max()) - start
    tokens = int(counts.sum())
    return {
        "mean_ttft_s": float(np.mean(flat[ends - counts] - arrivals)),
        "mean_itl_s": float(itls.mean()) if itls.size else math.nan,
        "max_itl_s": float(itls.max()) if itls.size else math.nan,
        "makespan_s": span,
        "throughput_tok_s": tokens / span if span > 0 else float("inf"),
    }
