"""What a stream of served requests achieved: throughput, goodput, latency percentiles, cost per good result.

Goodput counts only answers that are correct (Q_i = 1) and on time (D_i = 1):
``R_good = sum_i Q_i D_i / T_obs``; completion throughput counts every completed answer. Little's
law ``n = lambda * T`` links arrivals, time in system and the requests the server must hold.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import example
from .._validate import finite, finite_result, instance, mapping, non_negative, positive
from ..hardware import Accelerator

__all__ = ["little_n", "time_average_in_system", "in_system_curve", "observation_window", "mean_in_system", "completion_and_goodput", "summarize_served",
           "amdahl_speedup", "amdahl_derivation", "task_time"]

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
