"""Serving under load: a stream of requests through the iteration-level scheduler, one record per request.

Time is measured from each request's *scheduled* arrival, so waiting outside the engine counts
(one-at-a-time admission keeps the others in the application's queue). On top of
``inferlab.scheduling.simulate`` this adds what a server decides around the engine:

* admission: one request at a time, or continuous batching up to ``max_running``, optionally
  limited by KV memory (``kv_budget_bytes``: admission waits for free blocks);
* deadline-aware admission control: at arrival, predict the request's finish by simulating the
  requests already accepted plus this one (no later arrivals known), and reject or redirect it if
  the prediction misses the deadline;
* cancellation at a given time: the engine finishes the iteration in flight, emits nothing more
  for the request and frees its slot (a request cancelled before it started is dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from .. import example
from .._validate import (MAX_COUNT, finite_result, flag, fraction, function, generator, instance, items, mapping,
                         non_negative, one_of, positive, positive_int, real_array)
from ..models import ModelSpec
from ..scheduling import (EXAMPLE_CHUNK_TOKENS, EXAMPLE_TOKEN_BUDGET, FITTED_COST, CostFn, KVBlockLimit, NoLimit,
                          POLICIES, Request, Schedule, simulate)

__all__ = ["ServingPolicy", "SERVING_POLICIES", "EngineSetup", "poisson_requests", "trace_requests", "serve"]


@dataclass(frozen=True)
class ServingPolicy:
    """How a server runs its engine: the scheduler's policy, and whether it admits one request at a time."""

    scheduler_policy: str
    one_at_a_time: bool = False

    def __post_init__(self) -> None:
        one_of("scheduler_policy", instance("scheduler_policy", self.scheduler_policy, str), POLICIES)
        flag("one_at_a_time", self.one_at_a_time)


#: The policies ``serve`` takes, by name.
SERVING_POLICIES: Mapping[str, ServingPolicy] = {
    "one-at-a-time": ServingPolicy("continuous", one_at_a_time=True),
    "continuous": ServingPolicy("continuous"),
    "chunked": ServingPolicy("chunked"),
}


def poisson_requests(rate_per_s: float, n_requests: int, prompt_tokens: int, output_tokens: int,
                     seed: int | np.random.Generator = 0, start_s: float = 0.0) -> list[Request]:
    """``n_requests`` alike requests with exponential gaps of mean 1/rate (a Poisson process), seeded."""
    mean_gap = finite_result(1.0 / positive("rate_per_s", rate_per_s), "rate_per_s")
    positive_int("n_requests", n_requests, at_most=MAX_COUNT)
    rng = generator("seed", seed)
    arrivals = non_negative("start_s", start_s) + np.cumsum(rng.exponential(mean_gap, n_requests))
    arrivals -= arrivals[0] - start_s  # the first request arrives at start_s
    return trace_requests(arrivals, prompt_tokens, output_tokens)


def trace_requests(arrivals_s: Sequence[float] | np.ndarray, prompt_tokens: int,
                   output_tokens: int) -> list[Request]:
    """Alike requests arriving at the given times (a fixed trace), named r0, r1, ... in arrival order."""
    times = np.sort(real_array("arrivals_s", arrivals_s))
    if times.size and not (np.isfinite(times).all() and times[0] >= 0):
        raise ValueError(f"arrivals_s must be finite times >= 0, got {arrivals_s!r:.80}")
    if times.size == 0:
        raise ValueError("arrivals_s must hold at least one arrival time")
    return [Request(f"r{i}", float(t), prompt_tokens, output_tokens) for i, t in enumerate(times)]


#: Runs of at most this many requests are remembered (``EngineSetup.run``): an explorer's slider that only
#: changes the deadline or the answers' accuracy, or admission control re-predicting the same accepted
#: prefix, then reuses the simulation. Bounded so that long traces never sit in memory.
_REMEMBER_REQUESTS = 256


@dataclass(frozen=True)
class EngineSetup:
    """The engine a server runs: its policy, iteration cost, slot limit, KV budget (bytes) and chunking limits."""

    policy: str = "continuous"
    cost: CostFn = FITTED_COST
    max_running: int = 64
    kv_budget_bytes: float | None = None
    model: ModelSpec = example.MODEL
    token_budget: int | None = None
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        one_of("policy", self.policy, SERVING_POLICIES)
        function("cost", self.cost)
        positive_int("max_running", self.max_running)
        if self.kv_budget_bytes is not None:
            positive("kv_budget_bytes", self.kv_budget_bytes)
        instance("model", self.model, ModelSpec)
        if self.kv_budget_bytes is not None and self.kv_budget_bytes < 16 * self.model.kv_bytes_per_token():
            raise ValueError(f"kv_budget_bytes must hold at least one 16-token block of KV "
                             f"({16 * self.model.kv_bytes_per_token():.0f} bytes), got {self.kv_budget_bytes!r}")
        for name in ("token_budget", "chunk_tokens"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))

    def run(self, requests: list[Request]) -> Schedule:
        """The engine's schedule of ``requests`` (read-only: a remembered run is shared by later calls)."""
        requests = items("requests", requests)
        if len(requests) <= _REMEMBER_REQUESTS:
            try:
                return _remembered_run(tuple(requests), self)
            except TypeError:  # an unhashable cost function or model: simulate every time
                pass
        return self._simulate(requests)

    def _simulate(self, requests: list[Request]) -> Schedule:
        serving = SERVING_POLICIES[self.policy]
        token_budget, chunk_tokens = self.token_budget, self.chunk_tokens
        if serving.scheduler_policy == "chunked":  # the chapter's 8.2.2 settings unless given
            token_budget = EXAMPLE_TOKEN_BUDGET if token_budget is None else token_budget
            chunk_tokens = EXAMPLE_CHUNK_TOKENS if chunk_tokens is None else chunk_tokens
        admission = NoLimit() if self.kv_budget_bytes is None else KVBlockLimit(
            int(self.kv_budget_bytes // (16 * self.model.kv_bytes_per_token())), 16)
        return simulate(requests, serving.scheduler_policy, self.cost,
                        max_running=1 if serving.one_at_a_time else self.max_running, admission=admission,
                        token_budget=token_budget, chunk_tokens=chunk_tokens)


@lru_cache(maxsize=128)
def _remembered_run(requests: tuple[Request, ...], setup: EngineSetup) -> Schedule:
    return setup._simulate(list(requests))


def _accept(requests: list[Request], deadline_s: float, run) -> tuple[list[Request], set[str]]:
    accepted: list[Request] = []
    refused: set[str] = set()
    for r in requests:
        trial = run(accepted + [r])
        if trial.served[r.name].times.token_times_s[-1] - r.arrival_s <= deadline_s:
            accepted.append(r)
        else:
            refused.add(r.name)
    return accepted, refused


def _cancel(requests: list[Request], cancel_at: Mapping[str, float], run,
            max_rounds: int = 20) -> tuple[list[Request], Schedule | None, set[str]]:
    """Truncate cancelled requests to the tokens emitted up to the iteration in flight at their cancel time."""
    current = list(requests)
    dropped: set[str] = set()
    for _ in range(max_rounds):
        sched = run(current) if current else None
        changed, nxt = False, []
        for r in current:
            if r.name not in cancel_at or sched is None:
                nxt.append(r)
                continue
            served = sched.served[r.name]
            t = served.times.token_times_s
            c = cancel_at[r.name]
            if served.first_work_s >= c:  # not started when cancelled: dropped
                dropped.add(r.name)
                changed = True
                continue
            keep = min(int(np.searchsorted(t, c, side="right")) + 1, len(t))  # + the iteration in flight
            if keep < r.output_tokens:
                nxt.append(Request(r.name, r.arrival_s, r.prompt_tokens, keep))
                changed = True
            else:
                nxt.append(r)
        current = nxt
        if not changed:
            return current, sched, dropped
    raise RuntimeError("cancellation did not settle; report this trace")  # pragma: no cover


def serve(requests: Sequence[Request], engine: str | EngineSetup = "continuous", *,
          deadline_s: float = example.DEADLINE_S, admission_control: str | None = None,
          correct: float | Mapping[str, bool] = 1.0, seed: int = 0,
          cancel_at: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Serve ``requests``; one row per request: times from scheduled arrival, status, correctness, deadline.

    ``engine``: an ``EngineSetup`` (policy, iteration cost, slots, KV budget, chunking), or a policy's name
    (``one-at-a-time``, ``continuous`` or ``chunked``) with the setup's defaults. ``admission_control``: None,
    ``reject`` or ``redirect`` (a request predicted to miss ``deadline_s`` is turned away at arrival).
    ``correct``: the probability an answer is correct (drawn per request with ``seed``) or a mapping
    name -> bool. Columns: arrival_s, status (done / cancelled / rejected / redirected), start_s,
    first_token_s, finish_s, ttft_s, latency_s, max_itl_s, output_tokens, correct, on_time, good.
    Times of a request that never ran (rejected, redirected, cancelled while queued) are NaN: they did not happen;
    so is ``max_itl_s`` of a request that emitted one token (it has no gap).
    """
    if not isinstance(engine, EngineSetup):
        engine = EngineSetup(one_of("engine", engine, SERVING_POLICIES))  # a policy name, or an EngineSetup
    run = engine.run
    positive("deadline_s", deadline_s)
    if admission_control is not None:
        one_of("admission_control", admission_control, ("reject", "redirect"))
    reqs = items("requests", requests)
    for r in reqs:
        instance("requests", r, Request, "a sequence of Request")
    reqs.sort(key=lambda r: (r.arrival_s, isinstance(r.name, str), r.name))  # names: int or str
    if not reqs:
        raise ValueError("requests must not be empty")
    names = [r.name for r in reqs]
    if len(set(names)) != len(names):
        raise ValueError("requests must have distinct names")
    cancel_at = dict(mapping("cancel_at", cancel_at or {}))
    unknown = set(cancel_at) - set(names)
    if unknown:
        raise ValueError(f"cancel_at must name requests that exist, got unknown names {sorted(map(repr, unknown))[:5]}")
    for name, t in cancel_at.items():
        non_negative(f"cancel_at[{name!r}]", t)

    accepted, refused = (_accept(reqs, deadline_s, run) if admission_control else (reqs, set()))
    _, sched, dropped = _cancel(accepted, cancel_at, run) if cancel_at else (
        accepted, run(accepted) if accepted else None, set())
    flags = _correctness(names, correct, seed)
    rows = []
    for r in reqs:
        row: dict[str, object] = {"name": r.name, "arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens}
        if r.name in refused or r.name in dropped or sched is None:
            status = f"{admission_control}ed" if r.name in refused else "cancelled"
            row.update(status=status, start_s=math.nan, first_token_s=math.nan, finish_s=math.nan,
                       ttft_s=math.nan, latency_s=math.nan, max_itl_s=math.nan, output_tokens=0)
        else:
            s = sched.served[r.name]
            t = s.times.token_times_s
            cut = r.name in cancel_at and len(t) < r.output_tokens
            row.update(status="cancelled" if cut else "done", start_s=s.first_work_s, first_token_s=float(t[0]),
                       finish_s=float(t[-1]), ttft_s=float(t[0]) - r.arrival_s,
                       latency_s=float(t[-1]) - r.arrival_s,
                       max_itl_s=s.times.max_itl_s, output_tokens=len(t))
        done = row["status"] == "done"
        row["correct"] = bool(flags[r.name]) and done
        row["on_time"] = done and row["latency_s"] <= deadline_s
        row["good"] = row["correct"] and row["on_time"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("name")


def _correctness(names: list[str], correct: float | Mapping[str, bool], seed: int) -> dict[str, bool]:
    if isinstance(correct, Mapping):
        missing = set(names) - set(correct)
        if missing:
            raise ValueError(f"correct must have an entry for every request, missing {sorted(map(repr, missing))[:5]}")
        return {n: flag(f"correct[{n!r}]", correct[n]) for n in names}
    p = fraction("correct", correct)
    draws = generator("seed", seed).random(len(names)) < p
    return dict(zip(names, draws.tolist()))
