"""A real production trace beside the seeded Poisson ones (section 8.6): Azure's conversation service, 2023.

19,366 requests over 3,502 s (5.5 requests/s), prompts of 2 to 14,050 tokens (median 1,020), outputs of 7 to
1,000 (median 129); provenance and citation in data/README.md. Arrivals come in bursts: per-second counts vary
1.4 times as much as a Poisson process of the same rate would make them. ``poisson_twin`` keeps the requests
and their lengths and spreads the arrivals as a Poisson process of the same mean rate, so a comparison of the two
isolates what the bursts do; giving it fixed lengths isolates what the spread of lengths does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._validate import MAX_COUNT, generator, instance, items, non_negative, positive, positive_int
from ..datasets import trace
from ..scheduling import Request

__all__ = ["AZURE_CONV", "azure_conv", "trace_window", "poisson_twin", "mean_rate", "dispersion", "trace_comparison"]

#: The trace's name under data/traces/.
AZURE_CONV = "azure_conv_2023"
#: A deadline no request of the comparison meets or misses by design (``serve`` needs one; TTFT is what is compared).
_NO_DEADLINE_S = 3600.0


def azure_conv() -> pd.DataFrame:
    """The whole trace: ``arrived_at`` (s from the first request), ``num_prefill_tokens``, ``num_decode_tokens``."""
    return trace(AZURE_CONV)


def trace_window(table: pd.DataFrame, start_s: float = 0.0, duration_s: float | None = None,
                 speedup: float = 1.0) -> list[Request]:
    """The requests of ``table`` arriving in [start_s, start_s + duration_s), from 0 s, ``speedup`` times as fast.

    ``speedup`` divides every gap, so the mean rate is multiplied by it and the shape of the bursts is kept.
    Requests are named ``a<row>`` after their row in the table.
    """
    for column in ("arrived_at", "num_prefill_tokens", "num_decode_tokens"):
        if column not in getattr(table, "columns", ()):
            raise ValueError(f"table must have the column {column!r} (a trace such as azure_conv())")
    non_negative("start_s", start_s)
    positive("speedup", speedup)
    end = math.inf if duration_s is None else start_s + positive("duration_s", duration_s)
    rows = table[(table["arrived_at"] >= start_s) & (table["arrived_at"] < end)]
    if rows.empty:
        raise ValueError(f"start_s and duration_s must cover an arrival: no request of the trace arrives in "
                         f"[{start_s}, {end}) s")
    arrivals = (rows["arrived_at"].to_numpy(float) - start_s) / speedup
    if not np.isfinite(arrivals).all():
        raise ValueError(f"speedup must be large enough for finite arrival times, got {speedup!r}")
    return [Request(f"a{i}", float(t), int(p), int(g)) for i, t, p, g in
            zip(rows.index, arrivals, rows["num_prefill_tokens"], rows["num_decode_tokens"])]


def _requests(requests: Sequence[Request]) -> list[Request]:
    out = items("requests", requests)
    for r in out:
        instance("requests", r, Request, "a sequence of Request")
    return out


def mean_rate(requests: Sequence[Request]) -> float:
    """Arrivals per second: the requests after the first over the time from the first arrival to the last."""
    times = sorted(r.arrival_s for r in _requests(requests))
    if len(times) < 2 or times[-1] == times[0]:
        raise ValueError("requests must hold at least two distinct arrival times")
    return (len(times) - 1) / (times[-1] - times[0])


def poisson_twin(requests: Sequence[Request], seed: int | np.random.Generator = 0,
                 prompt_tokens: int | None = None, output_tokens: int | None = None) -> list[Request]:
    """The same requests, in the same order, arriving as a Poisson process of the same mean rate from the same start.

    Given ``prompt_tokens`` and ``output_tokens``, every request takes those lengths instead of its own.
    """
    rate = mean_rate(requests)
    ordered = sorted(_requests(requests), key=lambda r: r.arrival_s)
    rng = generator("seed", seed)
    gaps = rng.exponential(1.0 / rate, len(ordered) - 1)
    arrivals = ordered[0].arrival_s + np.concatenate([[0.0], np.cumsum(gaps)])
    p = None if prompt_tokens is None else positive_int("prompt_tokens", prompt_tokens)
    g = None if output_tokens is None else positive_int("output_tokens", output_tokens)
    return [Request(r.name, float(t), p or r.prompt_tokens, g or r.output_tokens)
            for r, t in zip(ordered, arrivals.tolist())]


def dispersion(requests: Sequence[Request], window_s: float = 1.0) -> float:
    """Variance over mean of the arrivals counted per ``window_s``: about 1 for a Poisson process, more for bursts."""
    positive("window_s", window_s)
    times = np.array(sorted(r.arrival_s for r in _requests(requests)))
    if times.size < 2:
        raise ValueError("requests must hold at least two requests")
    if (times[-1] - times[0]) / window_s > MAX_COUNT:
        raise ValueError(f"window_s must leave at most {MAX_COUNT} windows in the requests' span, got {window_s!r}")
    counts = np.histogram(times, bins=np.arange(times[0], times[-1] + window_s, window_s))[0]
    if counts.size < 2:
        raise ValueError(f"window_s ({window_s}) must leave at least two windows in the requests' span")
    return float(counts.var() / counts.mean())


def trace_comparison(table: pd.DataFrame, start_s: float = 0.0, duration_s: float = 600.0,
                     speedups: Sequence[float] = (1.0, 1.2), seeds: Sequence[int] = (1, 2, 3),
                     policy: str = "chunked", kv_budget_bytes: float | None = None) -> pd.DataFrame:
    """Queueing of a window of the trace against its Poisson twins, at each speed-up; one row per (speed-up, arrivals).

    Arrivals: ``real`` (the trace), ``Poisson`` (the same requests, Poisson arrivals at the same mean rate; medians
    over ``seeds``) and ``Poisson, mean lengths`` (the same, every request at the window's mean prompt and output
    length). Columns: requests, rate (1/s), dispersion (per second), TTFT p50, p95 and p99 (s), mean in system.
    Requests run through ``serve`` with ``policy`` and ``kv_budget_bytes``; the deadline plays no part here.
    """
    from .load import EngineSetup, serve
    from .metrics import summarize_served

    positive("duration_s", duration_s)
    speedups = [positive(f"speedups[{i}]", x) for i, x in enumerate(items("speedups", speedups))]
    seeds = [generator(f"seeds[{i}]", x) and x for i, x in enumerate(items("seeds", seeds))]
    if not speedups or not seeds:
        raise ValueError("speedups and seeds must each hold at least one value")
    for i, speedup in enumerate(speedups):  # each sped-up window spans at least two of dispersion's one-second windows
        if duration_s / speedup < 2.0:
            raise ValueError(f"duration_s / speedups[{i}] must be at least 2 s (the sped-up window's length), got "
                             f"{duration_s!r} / {speedup!r}")
    engine = EngineSetup(policy, kv_budget_bytes=kv_budget_bytes)
    rows = []
    for speedup in speedups:
        real = trace_window(table, start_s, duration_s, speedup)
        prompt = round(float(np.mean([r.prompt_tokens for r in real])))
        output = round(float(np.mean([r.output_tokens for r in real])))
        kinds = {"real": [real], "Poisson": [poisson_twin(real, s) for s in seeds],
                 "Poisson, mean lengths": [poisson_twin(real, s, prompt, output) for s in seeds]}
        for kind, runs in kinds.items():
            stats = []
            for requests in runs:
                served = serve(requests, engine, deadline_s=_NO_DEADLINE_S)
                ttft = served["ttft_s"].to_numpy()
                p50, p95, p99 = np.percentile(ttft, [50, 95, 99])
                stats.append({"requests": len(requests), "rate": mean_rate(requests),
                              "dispersion": dispersion(requests), "ttft_p50_s": p50, "ttft_p95_s": p95,
                              "ttft_p99_s": p99, "mean_in_system": summarize_served(served)["mean_in_system"]})
            row = pd.DataFrame(stats).median()
            rows.append({"speedup": float(speedup), "arrivals": kind, **row.to_dict()})
    return pd.DataFrame(rows).set_index(["speedup", "arrivals"])
