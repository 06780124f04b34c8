"""Our stand-in for experiment 8-9: retrieval questions arriving at a fixed rate, served two ways.

The chapter's serving experiment asked Qwen3-8B eight fixed retrieval questions (documents of 128 or
512 six-digit records), 16 requests per window, with a 3 s deadline, and found every wrong answer
on one question. Its traces are not public, so this module builds a workload of the same shape:
eight tasks (four short documents, four long), Poisson arrivals, one task always answered wrongly
(294 of 336 answers were correct: exactly 7/8). Lengths are our assumption and are stated with it.
"Continuous" in the chapter's engine (vLLM) means continuous batching with chunked prefill, so the
sweep compares ``one-at-a-time`` with the scheduler's ``chunked`` policy (4096-token budget).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .._validate import MAX_COUNT, finite_result, fraction, generator, items, one_of, positive, positive_int
from ..scheduling.simulator import Request
from .load import SERVING_POLICIES, EngineSetup, poisson_requests, serve
from .metrics import completion_and_goodput, summarize_served

__all__ = ["TASK_PROMPT_TOKENS", "ANSWER_TOKENS", "WRONG_TASK", "retrieval_window", "goodput_windows", "goodput_sweep",
           "load_table", "stream_length_table", "goodput_at"]

#: Prompt tokens of the eight tasks: four documents of 128 records, four of 512 (about 20 tokens a record).
TASK_PROMPT_TOKENS: tuple[int, ...] = (2560,) * 4 + (10_240,) * 4
#: Output tokens of an answer (a six-digit record and a short sentence).
ANSWER_TOKENS = 16
#: The task whose answer is always wrong (the chapter's 42 wrong answers all came from one question).
WRONG_TASK = 5


def _rates(rates: Iterable[float]) -> list[float]:
    out = [positive("rates", r) for r in items("rates", rates)]
    if not out:
        raise ValueError("rates must name at least one arrival rate")
    return out


def _policies(policies: Iterable[str]) -> list[str]:
    out = [one_of("policies", p, SERVING_POLICIES) for p in items("policies", policies)]
    if not out:
        raise ValueError("policies must name at least one serving policy")
    return out


def retrieval_window(rate_per_s: float, n_requests: int = 16, seed: int = 0,
                     answer_tokens: int = ANSWER_TOKENS) -> tuple[list[Request], dict[str, bool]]:
    """One window: ``n_requests`` Poisson arrivals cycling through the eight tasks, and which answers are correct."""
    mean_gap = finite_result(1.0 / positive("rate_per_s", rate_per_s), "rate_per_s")
    positive_int("n_requests", n_requests, at_most=MAX_COUNT)
    positive_int("answer_tokens", answer_tokens, at_most=MAX_COUNT)
    rng = generator("seed", seed)
    gaps = rng.exponential(mean_gap, n_requests)
    arrivals = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    tasks = [i % len(TASK_PROMPT_TOKENS) for i in range(n_requests)]
    reqs = [Request(f"q{i}-task{t + 1}", float(a), TASK_PROMPT_TOKENS[t], answer_tokens)
            for i, (a, t) in enumerate(zip(arrivals, tasks))]
    return reqs, {r.name: t + 1 != WRONG_TASK for r, t in zip(reqs, tasks)}


def goodput_windows(rates: Iterable[float] = (1, 4, 16), policies: Iterable[str] = ("one-at-a-time", "chunked"),
                    windows: int = 3, deadline_s: float = 3.0, seed: int = 0, max_running: int = 64,
                    answer_tokens: int = ANSWER_TOKENS) -> pd.DataFrame:
    """Every window of the sweep on its own, the dots of Figures 8-33 and 8-34: one row per (rate, policy, window).

    Window w at every rate and policy uses seed ``seed + w``. Columns: completion_rps, goodput_rps,
    latency_p95_s and gpu_s_per_good (infinite where no answer was good).
    """
    rates, policies = _rates(rates), _policies(policies)
    positive_int("windows", windows, at_most=MAX_COUNT)
    generator("seed", seed), positive_int("max_running", max_running)
    positive_int("answer_tokens", answer_tokens, at_most=MAX_COUNT)
    rows = []
    for rate in rates:
        for policy in policies:
            for w in range(windows):
                reqs, correct = retrieval_window(rate, seed=seed + w, answer_tokens=answer_tokens)
                engine = EngineSetup(policy, max_running=max_running)
                s = summarize_served(serve(reqs, engine, deadline_s=deadline_s, correct=correct))
                rows.append({"arrival_rate_per_s": rate, "policy": policy, "window": w + 1,
                             **{k: float(s[k]) for k in ("completion_rps", "goodput_rps", "latency_p95_s",
                                                         "gpu_s_per_good")}})
    return pd.DataFrame(rows).set_index(["arrival_rate_per_s", "policy", "window"])


def goodput_sweep(rates: Iterable[float] = (1, 4, 16), policies: Iterable[str] = ("one-at-a-time", "chunked"),
                  windows: int = 3, deadline_s: float = 3.0, seed: int = 0, max_running: int = 64,
                  answer_tokens: int = ANSWER_TOKENS) -> pd.DataFrame:
    """Median completion throughput and goodput over ``windows`` windows per (rate, policy), plus the window values
    (``goodput_windows`` gives every window on its own).

    ``gpu_s_per_good`` is infinite where no answer was good (a deadline nothing meets).
    """
    per = goodput_windows(rates, policies, windows, deadline_s, seed, max_running, answer_tokens)
    rows = []
    for (rate, policy), frame in per.groupby(level=["arrival_rate_per_s", "policy"], sort=False):
        rows.append({"arrival_rate_per_s": rate, "policy": policy,
                     "completion_rps": float(frame["completion_rps"].median()),
                     "goodput_rps": float(frame["goodput_rps"].median()),
                     "latency_p95_s": float(frame["latency_p95_s"].median()),
                     "gpu_s_per_good": float(frame["gpu_s_per_good"].median()),
                     "window_goodput_rps": tuple(frame["goodput_rps"].round(3))})
    return pd.DataFrame(rows).set_index(["arrival_rate_per_s", "policy"])


def load_table(rates: Iterable[float] = (1, 2, 4, 8, 16), policies: Iterable[str] = ("one-at-a-time", "chunked"),
               n_requests: int = 40, prompt_tokens: int = 2048, output_tokens: int = 64, seed: int = 7,
               deadline_s: float = 7.0) -> pd.DataFrame:
    """Mean and p95 time in system, mean requests in system and share on time, per arrival rate and policy."""
    rates, policies = _rates(rates), _policies(policies)
    rows = []
    for rate in rates:
        reqs = poisson_requests(rate, n_requests, prompt_tokens, output_tokens, seed=seed)
        for policy in policies:
            rows.append({"arrival_rate_per_s": rate, "policy": policy, **_load_row(reqs, policy, deadline_s)})
    return pd.DataFrame(rows).set_index(["arrival_rate_per_s", "policy"])


def _load_row(requests: list[Request], policy: str, deadline_s: float) -> dict[str, float]:
    """``load_table``'s columns for one stream served by one policy."""
    s = summarize_served(serve(requests, policy, deadline_s=deadline_s))
    return {"mean_latency_s": s["mean_latency_s"], "latency_p95_s": s["latency_p95_s"],
            "mean_in_system": s["mean_in_system"], "on_time_share": s["on_time"] / s["requests"]}


def stream_length_table(rates: Iterable[float] = (4, 16), lengths: Iterable[int] = (40, 80, 160),
                        policy: str = "chunked", prompt_tokens: int = 2048, output_tokens: int = 64, seed: int = 7,
                        deadline_s: float = 7.0) -> pd.DataFrame:
    """``load_table``'s columns for one policy, per arrival rate and stream length (the number of requests).

    Does the time in the system settle or keep growing as the same rate lasts longer? Each stream is
    ``poisson_requests(rate, length, prompt_tokens, output_tokens, seed=seed)``, so every stream starts from the
    same ``seed`` (an int). Index: (arrival_rate_per_s, n_requests), rates outer, in the order given.
    """
    rates, policy = _rates(rates), one_of("policy", policy, SERVING_POLICIES)
    lengths = [positive_int("lengths", n, at_most=MAX_COUNT) for n in items("lengths", lengths)]
    if not lengths:
        raise ValueError("lengths must name at least one stream length")
    if isinstance(seed, np.random.Generator):
        raise ValueError("seed must be an int (every stream starts from it), got a numpy Generator")
    generator("seed", seed), positive("deadline_s", deadline_s)
    rows = []
    for rate in rates:
        for n in lengths:
            reqs = poisson_requests(rate, n, prompt_tokens, output_tokens, seed=seed)
            rows.append({"arrival_rate_per_s": rate, "n_requests": n, **_load_row(reqs, policy, deadline_s)})
    return pd.DataFrame(rows).set_index(["arrival_rate_per_s", "n_requests"])


def goodput_at(rate_per_s: float, deadline_s: float = 3.0, accuracy: float = 7 / 8, windows: int = 3,
               policies: Iterable[str] = ("one-at-a-time", "chunked")) -> pd.DataFrame:
    """Median completion throughput and goodput per policy at one rate, with answers correct at ``accuracy``
    (over the windows of ``served_windows``)."""
    policies = _policies(policies)
    rows = {}
    for policy in policies:
        per = [completion_and_goodput(w) for w in served_windows(rate_per_s, policy, deadline_s, accuracy, windows)]
        rows[policy] = pd.Series(np.median(per, axis=0), index=["completion_rps", "goodput_rps"])
    return pd.DataFrame(rows).T.rename_axis("policy")


def served_windows(rate_per_s: float, policy: str, deadline_s: float = 3.0, accuracy: float = 7 / 8,
                   windows: int = 3) -> list[pd.DataFrame]:
    """The windows ``goodput_at`` takes its medians over, request by request (each a ``serve`` result).

    Window w (0, 1, ...) is ``retrieval_window(rate_per_s, seed=w)`` served by ``policy`` with ``deadline_s``, each
    answer drawn correct with probability ``accuracy`` (seed w): the explorer of section 8.6.2 shows the medians of
    these windows, so ``window_counts`` of them says what its bars are made of.
    """
    positive("rate_per_s", rate_per_s), one_of("policy", policy, SERVING_POLICIES)
    positive("deadline_s", deadline_s), fraction("accuracy", accuracy)
    positive_int("windows", windows, at_most=MAX_COUNT)
    return [serve(retrieval_window(rate_per_s, seed=w)[0], policy, deadline_s=deadline_s, correct=accuracy, seed=w)
            for w in range(windows)]

