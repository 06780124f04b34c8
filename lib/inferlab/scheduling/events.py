"""The scheduler's fast path: an event-driven engine for the three built-in policies and a cost of the work's totals.

It follows the same rules as the general path (``plans``) without building a ``Work``
per running request per iteration:
- a running decode never misses an iteration (every budget holds ``max_running`` tokens), so the
  decodes of an iteration are summed as a count D and a pair total S = sum(P + g) (a decode after
  P + g - 1 cached tokens has P + g causal pairs); S grows by D per iteration;
- a request's last token is known when its prompt completes (iteration k, G outputs: iteration
  k + G - 1), so finishers are taken from a calendar of finishing iterations, not a rescan;
- a request's token times are ``end_s[k : k + G]``, a slice of the array of iteration end times.
Cost per iteration is O(1) plus the prompts being prefilled (at most ``max_running``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING

import numpy as np

from .iteration import TotalsCost
from .log import EventWork, IterationLog

if TYPE_CHECKING:
    from .admission import Admission
    from .limits import Limits
    from .request import Request

__all__ = ["EngineRun", "run_events", "checked_seconds"]

_INF = math.inf


def checked_seconds(value: object) -> float:
    """``value`` as seconds if it is a finite real number > 0, else ValueError naming the cost."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"cost must return a number of seconds, got {value!r} ({type(value).__name__})")
    seconds = float(value)
    if not 0.0 < seconds < _INF:
        raise ValueError(f"cost returned {value!r} seconds; it must be finite and > 0")
    return seconds


def clock_stalled(start_s: float, duration_s: float) -> ValueError:
    """The error for an iteration that does not move the clock (float resolution at ``start_s``)."""
    return ValueError(f"an iteration of {duration_s!r} s starting at {start_s!r} s does not advance the clock "
                      "(float resolution); arrival_s values must be small enough for iteration times to be resolved")


@dataclass(frozen=True)
class EngineRun:
    """What the engine produced, per request in arrival order: start of its first work and its token times."""

    first_work_s: np.ndarray
    token_times_s: list[np.ndarray]
    iterations: IterationLog
    makespan_s: float


def run_events(requests: Sequence["Request"], policy: str, cost: TotalsCost, limits: "Limits",
               admission: "Admission | None", record_iterations: bool = True) -> EngineRun:
    """Simulate ``requests`` (sorted by arrival) under a built-in ``policy``; arguments already validated.

    Each iteration: arrivals join the queue; the running decodes and any prompt pieces
    (``_Batch.plan_prompts``) are priced by their totals and move the clock; completed prompts start
    decoding and finishers leave. The counts and totals that change every iteration stay local here,
    so an iteration without prompt work makes no call but the cost's (this loop is the engine's speed).
    """
    batch = _Batch(requests, policy, limits, admission)
    of_totals, arrival, n = cost.of_totals, batch.arrival, len(requests)
    budget, max_running, fixed = limits.budget, limits.max_running, policy == "fixed"
    prompt, output, first_token_at = batch.prompt, batch.output, batch.first_token_at
    prefilling, done, finishing = batch.prefilling, batch.done, batch.finishing
    starts: list[float] = []
    durations: list[float] = []
    now, k, arrived, admitted, running = 0.0, 0, 0, 0, 0  # requests [0, admitted) were admitted (FCFS)
    decoders = decode_pairs = 0  # D running decodes with S causal pairs in all
    while admitted < n or running:
        while arrived < n and arrival[arrived] <= now:
            arrived += 1
        if not running and admitted == arrived:
            now = arrival[arrived]  # idle: the clock jumps to the next arrival
            continue
        tokens = logits = decoders  # every running decode, one token each
        pairs = kv = decode_pairs
        if ((admitted < arrived and running < max_running or prefilling)
                and not (fixed and running)):  # a fixed batch takes new prompts once all of it is done
            t, p, v, g, admitted, running = batch.plan_prompts(k, admitted, arrived, running, budget - decoders)
            tokens, pairs, kv, logits = tokens + t, pairs + p, kv + v, logits + g
        if not tokens:
            raise RuntimeError(f"policy {policy!r} planned no work with {running} running "
                               f"and {arrived - admitted} waiting")
        duration = of_totals(tokens, pairs, kv, logits)
        if type(duration) is not float or not 0.0 < duration < _INF:
            duration = checked_seconds(duration)
        end = now + duration
        if end <= now:
            raise clock_stalled(now, duration)
        starts.append(now)
        durations.append(duration)
        now = end
        # the iteration emitted its tokens: completed prompts start decoding, finishers free their slots
        decode_pairs += decoders  # every decode's context grew by one token
        finished = finishing.pop(k, None)
        for i in done:
            first_token_at[i] = k
            g = output[i]
            if g == 1:
                finished = [i] if finished is None else finished + [i]
            else:
                decoders += 1
                decode_pairs += prompt[i] + 1
                finishing.setdefault(k + g - 1, []).append(i)
        done.clear()
        if finished is not None:
            finished.sort()
            running -= len(finished)
            for i in finished:
                if admission is not None:
                    admission.release(requests[i])
                if output[i] > 1:
                    decoders -= 1
                    decode_pairs -= prompt[i] + output[i]
        k += 1
    return batch.result(starts, durations, record_iterations)


class _Batch:
    """What ``run_events`` keeps between iterations besides its counts: the requests' sizes, the prompts being
    prefilled, the calendar of finishers; the prompt planning; the record the results are built from."""

    __slots__ = ("requests", "arrival", "prompt", "output", "admission", "max_running", "chunk", "whole_chunks",
                 "prefilling", "finishing", "done", "admitted_at", "first_token_at", "pieces")

    def __init__(self, requests: Sequence["Request"], policy: str, limits: "Limits",
                 admission: "Admission | None") -> None:
        n = len(requests)
        self.requests = requests
        self.arrival = [r.arrival_s for r in requests]
        self.prompt = [r.prompt_tokens for r in requests]
        self.output = [r.output_tokens for r in requests]
        self.admission = admission
        self.max_running, self.chunk = limits.max_running, limits.chunk
        self.whole_chunks = limits.whole_chunks or policy != "chunked"  # only 'chunked' splits a prompt
        self.prefilling: list[list[int]] = []  # [request, tokens prefilled] of admitted prompts not yet done
        self.finishing: dict[int, list[int]] = {}  # iteration -> requests emitting their last token in it
        self.done: list[int] = []  # requests whose prompt completes in the iteration being planned
        self.admitted_at = [0] * n  # iteration of each request's first work
        self.first_token_at = [0] * n  # iteration of each request's first token
        self.pieces: list[tuple[int, int, int, int, int]] = []  # (iteration, request, tokens, cached, emits)

    # ---- the prompts of one iteration ------------------------------------------------------------
    def plan_prompts(self, k: int, admitted: int, arrived: int, running: int,
                     budget: float) -> tuple[int, int, int, int, int, int]:
        """Prompt work of iteration ``k`` within ``budget`` tokens, (tokens, pairs, kv tokens, logits), and the
        counts of requests admitted and running after it.

        First one more piece of each admitted prompt (chunked), then waiting requests in arrival order
        while a slot is free, the admission agrees and a first piece fits (the whole prompt under fixed
        and continuous); a head of the queue whose piece does not fit blocks those behind it.
        """
        tokens = pairs = kv = logits = 0
        if self.prefilling:
            tokens, pairs, kv, logits, budget = self._continue_prefills(k, budget)
        i, admission = admitted, self.admission
        while (budget >= 1 and i < arrived and running < self.max_running
               and (admission is None or admission.can_admit(self.requests[i]))):
            p = self.prompt[i]
            c = self._fitting(p, budget)
            if not c:
                break
            if admission is not None:
                admission.admit(self.requests[i])
            running += 1
            self.admitted_at[i] = k
            tokens += c
            pairs += c * (c + 1) // 2
            kv += c
            budget -= c
            if c == p:
                logits += 1
                self.done.append(i)
                self.pieces.append((k, i, c, 0, 1))
            else:
                self.prefilling.append([i, c])
                self.pieces.append((k, i, c, 0, 0))
            i += 1
        return tokens, pairs, kv, logits, i, running

    def _continue_prefills(self, k: int, budget: float) -> tuple[int, int, int, int, float]:
        """One more piece of each admitted prompt, in admission order, where one fits: their totals (as
        ``plan_prompts``) and the budget left."""
        tokens = pairs = kv = logits = 0
        prompt, still = self.prompt, []
        for entry in self.prefilling:
            i, pre = entry
            c = self._fitting(prompt[i] - pre, budget)
            if c:
                tokens += c
                pairs += c * pre + c * (c + 1) // 2
                kv += pre + c
                budget -= c
                if pre + c == prompt[i]:
                    logits += 1
                    self.done.append(i)
                    self.pieces.append((k, i, c, pre, 1))
                    continue
                self.pieces.append((k, i, c, pre, 0))
                entry[1] = pre + c
            still.append(entry)
        self.prefilling[:] = still
        return tokens, pairs, kv, logits, budget

    def _fitting(self, left: int, budget: float) -> int:
        """The piece of a prompt with ``left`` tokens to go that runs now within ``budget`` (0: none fits).

        At most a chunk (chunked) or the whole prompt; a piece over the budget waits under ``whole_chunks``
        (always, unless chunked), else is cut to it.
        """
        if budget < 1:
            return 0
        c = left if left < self.chunk else self.chunk
        if c > budget:
            return 0 if self.whole_chunks else int(budget)
        return c

    # ---- the result ------------------------------------------------------------------------------
    def result(self, starts: list[float], durations: list[float], record_iterations: bool) -> EngineRun:
        """Each request's first work and token times (slices of the iteration end times), the log, the makespan."""
        start_arr = np.array(starts)
        ends = start_arr + np.array(durations)
        ends.flags.writeable = False
        first_tok = np.array(self.first_token_at, dtype=np.int64)
        out = np.array(self.output, dtype=np.int64)
        token_times = [ends[a:b] for a, b in zip(self.first_token_at, (first_tok + out).tolist())]
        makespan = float(ends[first_tok + out - 1].max()) - min(self.arrival)
        first_work = start_arr[np.array(self.admitted_at, dtype=np.int64)]
        if record_iterations:
            work = EventWork(self.requests, first_tok, np.array(self.pieces, dtype=np.int64).reshape(-1, 5))
            log = IterationLog(start_arr, durations, work)
        else:
            log = IterationLog([], [], lambda k: ())
        return EngineRun(first_work, token_times, log, makespan)
