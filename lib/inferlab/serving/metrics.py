"""What a stream of served requests achieved: throughput, goodput, latency percentiles, cost per good result.

Goodput counts only answers that are correct (Q_i = 1) and on time (D_i = 1):
``R_good = sum_i Q_i D_i / T_obs``; completion throughput counts every completed answer. Little's
law ``n = lambda * T`` links arrivals, time in system and the requests the server must hold. Windows of served
requests are counted one by one (``window_counts``; ``sweep.served_windows`` rebuilds the windows behind
``sweep.goodput_at``'s medians), their medians set beside the chapter's printed ones (``window_medians``,
``beside_published``), and a request's time read on the engine's clock and on the user's (``clock_comparison``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import example
from .._validate import (MAX_COUNT, finite, finite_result, fraction, instance, items, mapping, non_negative, one_of,
                         positive, positive_int)
from ..hardware import Accelerator

__all__ = ["little_n", "time_average_in_system", "in_system_curve", "observation_window", "mean_in_system", "completion_and_goodput", "summarize_served",
           "request_outcomes", "amdahl_speedup", "amdahl_derivation", "task_time",
           "window_counts", "window_medians", "beside_published", "clock_comparison",
           "CHAPTER_POLICY_NAMES"]

_REQUIRED = ("arrival_s", "status", "finish_s", "ttft_s", "latency_s", "max_itl_s", "good", "correct", "on_time")


def little_n(arrival_rate_per_s: float, mean_time_s: float) -> float:
    """Little's law: mean number of requests in the system, n = lambda * T."""
    n = non_negative("arrival_rate_per_s", arrival_rate_per_s) * non_negative("mean_time_s", mean_time_s)
    return finite_result(n, "arrival_rate_per_s", "mean_time_s")


def _check(records: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(records, pd.DataFrame) or any(c not in records.columns for c in _REQUIRED):
        raise ValueError(f"records must be a DataFrame from serving.serve with columns {list(_REQUIRED)}")
    if records.empty:
        raise ValueError("records must hold at least one request")
    return records


def observation_window(records: pd.DataFrame) -> tuple[float, float]:
    """(start, end) of observation: first scheduled arrival to the last finish (or last arrival if none finished)."""
    r = _check(records)
    arrivals = r["arrival_s"].to_numpy(float)
    finishes = _served_spans(r)[1]
    start = float(arrivals.min())
    end = max(float(finishes.max()) if len(finishes) else start, float(arrivals.max()))
    return start, end


def _served_spans(r: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(arrival, finish) of every served request (numpy masks: a slider redraw calls this several times)."""
    arrivals, finishes = r["arrival_s"].to_numpy(float), r["finish_s"].to_numpy(float)
    served = ~np.isnan(finishes)
    return arrivals[served], finishes[served]


def time_average_in_system(records: pd.DataFrame, start_s: float, end_s: float) -> float:
    """Time-average number of served requests in the system (arrival to finish) over [start_s, end_s]."""
    r = _check(records)
    if not finite("end_s", end_s) > finite("start_s", start_s):
        raise ValueError(f"end_s ({end_s}) must be greater than start_s ({start_s})")
    arrivals, finishes = _served_spans(r)
    lo = np.clip(arrivals, start_s, end_s)
    hi = np.clip(finishes, start_s, end_s)
    return float((hi - lo).sum() / (end_s - start_s))


def _pct(values: pd.Series, q: float) -> float:
    v = values.dropna()
    return float(np.percentile(v, q)) if len(v) else math.nan


def mean_in_system(records: pd.DataFrame) -> float:
    """Time-average requests in the system over the observation window (NaN if the window is empty)."""
    start, end = observation_window(records)
    return time_average_in_system(records, start, end) if end > start else math.nan


def completion_and_goodput(records: pd.DataFrame) -> tuple[float, float]:
    """(completion throughput, goodput) in requests per second over the observation window (inf if it is empty)."""
    r = _check(records)
    start, end = observation_window(r)
    t_obs = end - start
    if t_obs <= 0:
        return math.inf, math.inf
    return float((r["status"] == "done").sum()) / t_obs, float(r["good"].sum()) / t_obs


def summarize_served(records: pd.DataFrame, accelerator: Accelerator = example.ACCELERATOR) -> dict[str, float]:
    """Completion throughput, goodput, Little's-law check, latency percentiles, GPU-s and energy per good result.

    The GPU is counted busy over the whole observation window (arrival of the first request to the
    last finish); energy is at the card's power limit, so it is an upper bound. Percentiles are over
    completed requests (max-ITL percentiles over those with at least two output tokens, NaN if there are
    none); ``*_per_good`` is infinite when no answer was good.
    """
    r = _check(records)
    instance("accelerator", accelerator, Accelerator)
    start, end = observation_window(r)
    t_obs = end - start
    done = r[r["status"] == "done"]
    good = int(r["good"].sum())
    out = {
        "requests": float(len(r)), "completed": float(len(done)), "correct": float(r["correct"].sum()),
        "on_time": float(r["on_time"].sum()), "good": float(good), "t_obs_s": t_obs,
        "mean_in_system": mean_in_system(r),
        "arrival_rps": (len(r) - 1) / (r["arrival_s"].max() - start) if len(r) > 1 and r["arrival_s"].max() > start
        else math.nan,
        "mean_latency_s": float(done["latency_s"].mean()) if len(done) else math.nan,
    }
    out["completion_rps"], out["goodput_rps"] = completion_and_goodput(r)
    for col, name in (("ttft_s", "ttft"), ("latency_s", "latency"), ("max_itl_s", "max_itl")):
        out[f"{name}_p50_s"] = _pct(done[col], 50)
        out[f"{name}_p95_s"] = _pct(done[col], 95)
    out["gpu_s_per_good"] = t_obs / good if good else math.inf
    out["energy_j_per_good"] = accelerator.power_w * out["gpu_s_per_good"]
    return out


def request_outcomes(records: pd.DataFrame) -> pd.DataFrame:
    """What became of each request: its status and, for a finished one, its time in the system and whether it met
    the deadline.

    One row per request, in the order of ``records``: status (done / cancelled / rejected / redirected), latency_s
    and on_time. A request that did not finish (turned away, or cancelled) has no time in the system and no verdict
    on the deadline: latency_s is NaN and on_time None there (on_time holds True, False and None).
    """
    r = _check(records)
    done = r["status"] == "done"
    return pd.DataFrame({"status": r["status"], "latency_s": r["latency_s"].astype(float).where(done),
                         "on_time": r["on_time"].astype(bool).astype(object).where(done, None)})


def amdahl_speedup(fraction_accelerated: float, stage_speedup: float) -> float:
    """Amdahl's law: whole-task speed-up 1 / ((1 - f) + f / s) when a share f of the time runs s times faster."""
    f = non_negative("fraction_accelerated", fraction_accelerated)
    if f > 1:
        raise ValueError(f"fraction_accelerated must lie in [0, 1], got {f!r}")
    return 1.0 / ((1 - f) + f / positive("stage_speedup", stage_speedup))


def amdahl_derivation() -> tuple[object, object]:
    """Amdahl's law derived with sympy: (new task time over the old, S_task), in the symbols f and sigma."""
    import sympy as sp

    f, sigma, t = sp.symbols("f sigma T", positive=True)
    ratio = sp.expand(((1 - f) * t + f * t / sigma) / t)  # T cancels: 1 - f + f / sigma
    return ratio, 1 / ratio


def task_time(stages_s: dict[str, float], speedups: dict[str, float] | None = None,
              added_s: float = 0.0) -> float:
    """Seconds of a whole task: each stage divided by its speed-up (default 1), plus added work (e.g. draft set-up)."""
    if not mapping("stages_s", stages_s):
        raise ValueError("stages_s must name at least one stage")
    speedups = mapping("speedups", speedups or {})
    unknown = set(speedups) - set(stages_s)
    if unknown:
        raise ValueError(f"speedups must name stages of stages_s, got unknown stages {sorted(map(repr, unknown))[:5]}")
    total = sum(non_negative(f"stages_s[{k!r}]", v) / positive(f"speedups[{k!r}]", speedups.get(k, 1.0))
                for k, v in stages_s.items())
    return total + non_negative("added_s", added_s)


def in_system_curve(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(instants, requests in the system just after each instant): a step function from arrivals and finishes."""
    arrivals, finishes = _served_spans(_check(records))
    if not len(finishes):
        raise ValueError("records must hold at least one served request")
    events = np.concatenate([arrivals, finishes])
    steps = np.concatenate([np.ones(len(finishes)), -np.ones(len(finishes))])
    order = np.lexsort((steps, events))  # at equal instants, departures (-1) before arrivals
    return events[order], np.cumsum(steps[order])


#: What ``window_counts`` reports of each window: counts of requests, then seconds, then rates per second.
_WINDOW_COUNTS = ("requests", "completed", "correct", "on_time", "good", "t_obs_s", "completion_rps", "goodput_rps")
#: The chapter's name for each of our serving policies where they differ (its "continuous" engine also chunks
#: prefills, which our scheduler calls ``chunked``).
CHAPTER_POLICY_NAMES: dict[str, str] = {"chunked": "continuous"}


def window_counts(windows: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per window of served requests (each a ``serve`` result): how many requests it held, completed,
    answered correctly, finished on time and both (ints), its observation time t_obs_s, and its completion
    throughput and goodput over that time (``summarize_served``; infinite when the window lasts no time).

    Rows are named by the mapping's keys, or numbered 1, 2, ... when ``windows`` is a sequence.
    """
    named = (list(mapping("windows", windows).items()) if isinstance(windows, Mapping)
             else list(enumerate(items("windows", windows), start=1)))
    if not named:
        raise ValueError("windows must hold at least one window of served requests")
    rows = {}
    for key, records in named:
        try:
            s = summarize_served(records)
        except ValueError as err:
            raise ValueError(f"windows[{key!r}]: {err}") from None
        rows[key] = {k: s[k] for k in _WINDOW_COUNTS}
    out = pd.DataFrame.from_dict(rows, orient="index")[list(_WINDOW_COUNTS)]
    counts = list(_WINDOW_COUNTS[:5])
    out[counts] = out[counts].astype(int)
    return out.rename_axis("window")


_WINDOW_LEVELS = ("arrival_rate_per_s", "policy")


def window_medians(windows: pd.DataFrame) -> pd.DataFrame:
    """Median of every column per (arrival_rate_per_s, policy) over the windows of ``serving.goodput_windows``:
    the bars of Figures 8-33 and 8-34 beside its per-window dots.

    Rows keep the order in which rates and policies first appear; ``gpu_s_per_good`` stays infinite where most
    windows of a condition returned no good answer, and the ``window`` column (if any) is dropped.
    """
    frame = instance("windows", windows, pd.DataFrame, "a DataFrame from serving.goodput_windows")
    if any(level not in (frame.index.names or ()) for level in _WINDOW_LEVELS) or frame.empty:
        raise ValueError(f"windows must be a non-empty DataFrame indexed by {list(_WINDOW_LEVELS)} "
                         f"(serving.goodput_windows), got index levels {list(frame.index.names)}")
    values = frame.drop(columns="window", errors="ignore")
    if not all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in values.dtypes):
        raise ValueError("windows must hold only numeric columns (serving.goodput_windows)")
    return values.groupby(level=list(_WINDOW_LEVELS), sort=False).median()


def beside_published(medians: pd.DataFrame, published: pd.DataFrame,
                     columns: Sequence[str] = ("completion_rps", "goodput_rps")) -> pd.DataFrame:
    """Our medians (``window_medians``) with the chapter's printed values beside them, row by row.

    ``published`` is indexed by (arrival_rate_per_s, policy) with the chapter's policy names (its
    ``goodput_8_6_2`` table); ours are renamed to them (``CHAPTER_POLICY_NAMES``). For each name in ``columns``
    the result holds ours and ``<name>_chapter``, with NaN where the chapter printed no value for that row.
    """
    ours = instance("medians", medians, pd.DataFrame, "a DataFrame from serving.window_medians")
    theirs = instance("published", published, pd.DataFrame, "a DataFrame indexed by (arrival_rate_per_s, policy)")
    names = [instance("columns", c, str, "a sequence of column names") for c in items("columns", columns)]
    if not names:
        raise ValueError("columns must name at least one column")
    for param, frame in (("medians", ours), ("published", theirs)):
        if list(frame.index.names) != list(_WINDOW_LEVELS) or any(c not in frame.columns for c in names):
            raise ValueError(f"{param} must be indexed by {list(_WINDOW_LEVELS)} and hold the columns {names}, "
                             f"got index {list(frame.index.names)} and columns {list(frame.columns)[:8]}")
    if not theirs.index.is_unique:
        raise ValueError("published must have one row per (arrival_rate_per_s, policy)")
    mine = ours[names].rename(index=CHAPTER_POLICY_NAMES, level="policy")
    return mine.join(theirs[names].rename(columns=lambda c: f"{c}_chapter"))


def clock_comparison(records: pd.DataFrame, deadline_s: float = 3.0) -> pd.DataFrame:
    """A window's completed requests timed on two clocks: the engine's, started when it takes a request in
    (``start_s``), and the user's, started at the scheduled arrival (``arrival_s``); both stop at the last token.

    Rows ``engine`` and ``user``; columns mean_s (mean time, NaN when no request completed) and within_deadline
    (how many finished within ``deadline_s`` on that clock). When requests wait outside the engine (admitted one
    at a time), the engine's clock misses that wait.
    """
    r = _check(records)
    if "start_s" not in r.columns:
        raise ValueError("records must have a start_s column (serving.serve)")
    positive("deadline_s", deadline_s)
    done = r[r["status"] == "done"]
    spans = {"engine": done["finish_s"] - done["start_s"], "user": done["finish_s"] - done["arrival_s"]}
    return pd.DataFrame({"mean_s": {k: float(v.mean()) if len(v) else math.nan for k, v in spans.items()},
                         "within_deadline": {k: int((v <= deadline_s).sum()) for k, v in spans.items()}}
                        ).rename_axis("clock")
