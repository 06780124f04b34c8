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


def run_events(requests: Sequence["Request"], policy: str, cost: TotalsCost, max_running: int,
               token_budget: int | None, chunk_tokens: int | None, admission: "Admission | None",
               whole_chunks: bool, record_iterations: bool = True) -> EngineRun:
    """Simulate ``requests`` (sorted by arrival) under a built-in ``policy``; arguments already validated."""
    n = len(requests)
    arrival = [r.arrival_s for r in requests]
    prompt = [r.prompt_tokens for r in requests]
    output = [r.output_tokens for r in requests]
    budget_cap = _INF if token_budget is None else token_budget
    chunk = min(budget_cap, _INF if chunk_tokens is None else chunk_tokens)
    fixed, chunked = policy == "fixed", policy == "chunked"
    of_totals = cost.of_totals
    can_admit = admission.can_admit if admission is not None else None

    starts: list[float] = []
    durations: list[float] = []
    admitted_at = [0] * n
    first_token_at = [0] * n
    pieces: list[tuple[int, int, int, int, int]] = []  # (iteration, request, tokens, cached, emits)
    prefilling: list[list[int]] = []  # [request, tokens prefilled] of admitted prompts not yet done (chunked)
    finishing: dict[int, list[int]] = {}  # iteration -> requests emitting their last token in it
    add_start, add_duration, add_piece = starts.append, durations.append, pieces.append
    done: list[int] = []  # requests whose prompt completes in this iteration
    now = 0.0
    k = arrived = admitted = running = decoders = decode_pairs = 0
    while admitted < n or running:
        while arrived < n and arrival[arrived] <= now:
            arrived += 1
        if not running and admitted == arrived:
            now = arrival[arrived]
            continue
        tokens = logits = decoders  # every running decode, one token each
        pairs = kv = decode_pairs
        if not (fixed and running):  # a fixed batch only decodes until all of it is done
            budget = budget_cap - decoders
            if chunked:
                if prefilling:
                    still = []
                    for entry in prefilling:
                        i, pre = entry
                        if budget >= 1:
                            c = min(prompt[i] - pre, chunk)
                            if c > budget and not whole_chunks:
                                c = budget
                            if c <= budget:
                                tokens += c
                                pairs += c * pre + c * (c + 1) // 2
                                kv += pre + c
                                budget -= c
                                if pre + c == prompt[i]:
                                    logits += 1
                                    done.append(i)
                                    add_piece((k, i, c, pre, 1))
                                else:
                                    entry[1] = pre + c
                                    still.append(entry)
                                    add_piece((k, i, c, pre, 0))
                                continue
                        still.append(entry)
                    prefilling = still
                while (budget >= 1 and running < max_running and admitted < arrived
                       and (can_admit is None or can_admit(requests[admitted]))):
                    i = admitted
                    p = prompt[i]
                    want = p if p < chunk else chunk
                    c = want if want < budget else budget
                    if whole_chunks and c < want:
                        break  # head-of-line: nobody behind the head is admitted this iteration
                    if admission is not None:
                        admission.admit(requests[i])
                    admitted += 1
                    running += 1
                    admitted_at[i] = k
                    tokens += c
                    pairs += c * (c + 1) // 2
                    kv += c
                    budget -= c
                    if c == p:
                        logits += 1
                        done.append(i)
                        add_piece((k, i, c, 0, 1))
                    else:
                        prefilling.append([i, c])
                        add_piece((k, i, c, 0, 0))
            else:
                while (running < max_running and admitted < arrived
                       and (can_admit is None or can_admit(requests[admitted])) and prompt[admitted] <= budget):
                    i = admitted
                    c = prompt[i]
                    if admission is not None:
                        admission.admit(requests[i])
                    admitted += 1
                    running += 1
                    admitted_at[i] = k
                    tokens += c
                    pairs += c * (c + 1) // 2
                    kv += c
                    logits += 1
                    budget -= c
                    done.append(i)
                    add_piece((k, i, c, 0, 1))
        if not tokens:
            raise RuntimeError(f"policy {policy!r} planned no work with {running} running "
                               f"and {arrived - admitted} waiting")
        duration = of_totals(tokens, pairs, kv, logits)
        if type(duration) is not float or not 0.0 < duration < _INF:
            duration = checked_seconds(duration)
        end = now + duration
        if end <= now:
            raise clock_stalled(now, duration)
        add_start(now)
        add_duration(duration)
        now = end
        decode_pairs += decoders
        finished = finishing.pop(k, None)
        if done:
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
            for i in finished:
                running -= 1
                if admission is not None:
                    admission.release(requests[i])
                if output[i] > 1:
                    decoders -= 1
                    decode_pairs -= prompt[i] + output[i]
        k += 1

    start_arr = np.array(starts)
    ends = start_arr + np.array(durations)
    ends.flags.writeable = False
    first_tok = np.array(first_token_at, dtype=np.int64)
    out = np.array(output, dtype=np.int64)
    token_times = [ends[a:b] for a, b in zip(first_token_at, (first_tok + out).tolist())]
    makespan = float(ends[first_tok + out - 1].max()) - min(arrival)
    first_work = start_arr[np.array(admitted_at, dtype=np.int64)]
    if record_iterations:
        work = EventWork(requests, first_tok, np.array(pieces, dtype=np.int64).reshape(-1, 5))
        log = IterationLog(start_arr, durations, work)
    else:
        log = IterationLog([], [], lambda k: ())
    return EngineRun(first_work, token_times, log, makespan)
