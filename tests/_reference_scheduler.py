"""Differential oracle: the scheduler loop as it was before the event-driven rewrite (commit 2b79a19), frozen.

A plain per-iteration loop that rebuilds every running request's ``Work`` each iteration and
rescans the running list for finishers. It is slow and obviously faithful to the rules in ``inferlab.scheduling.simulator``'s docstring;
the new engines must give bit-identical token times, iteration starts/durations and work.
Do not optimise this file.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inferlab.scheduling import CostFn, NoLimit, Request, Work


@dataclass(eq=False)
class _Live:
    request: Request
    prefilled: int = 0
    times: list[float] = field(default_factory=list)
    first_work_s: float = -1.0

    @property
    def decoding(self) -> bool:
        return self.prefilled == self.request.prompt_tokens


class _Engine:
    def __init__(self, requests, max_running, admission, token_budget, chunk_tokens, whole_chunks) -> None:
        self.pending: deque[Request] = deque(sorted(requests, key=lambda r: r.arrival_s))
        self.waiting: deque[Request] = deque()
        self.running: list[_Live] = []
        self.max_running = max_running
        self.admission = admission
        self.budget = math.inf if token_budget is None else token_budget
        self.chunk = min(self.budget, math.inf if chunk_tokens is None else chunk_tokens)
        self.whole_chunks = whole_chunks

    def arrive(self, now: float) -> None:
        while self.pending and self.pending[0].arrival_s <= now:
            self.waiting.append(self.pending.popleft())

    def can_admit(self) -> bool:
        return (len(self.running) < self.max_running and bool(self.waiting)
                and self.admission.can_admit(self.waiting[0]))

    def admit(self) -> _Live:
        request = self.waiting.popleft()
        self.admission.admit(request)
        live = _Live(request)
        self.running.append(live)
        return live


def _prefill(live, tokens):
    done = live.prefilled + tokens == live.request.prompt_tokens
    return live, Work(live.request, "prefill", tokens, live.prefilled, 1 if done else 0)


def _decodes(engine, budget):
    plan = []
    for live in engine.running:
        if live.decoding and budget >= 1:
            cached = live.request.prompt_tokens + len(live.times) - 1
            plan.append((live, Work(live.request, "decode", 1, cached, 1)))
            budget -= 1
    return plan, budget


def _admit_whole_prompts(engine, plan, budget):
    while engine.can_admit() and engine.waiting[0].prompt_tokens <= budget:
        live = engine.admit()
        plan.append(_prefill(live, live.request.prompt_tokens))
        budget -= live.request.prompt_tokens
    return plan


def _plan_fixed(engine):
    if engine.running:
        return _decodes(engine, math.inf)[0]
    return _admit_whole_prompts(engine, [], engine.budget)


def _plan_continuous(engine):
    plan, budget = _decodes(engine, engine.budget)
    return _admit_whole_prompts(engine, plan, budget)


def _plan_chunked(engine):
    plan, budget = _decodes(engine, engine.budget)

    def piece(live):
        want = min(live.request.prompt_tokens - live.prefilled, engine.chunk)
        return int(want) if want <= budget or engine.whole_chunks else int(budget)

    for live in engine.running:
        if not live.decoding and budget >= 1 and piece(live) <= budget:
            tokens = piece(live)
            plan.append(_prefill(live, tokens))
            budget -= tokens
    while budget >= 1 and engine.can_admit():
        head = engine.waiting[0]
        tokens = int(min(head.prompt_tokens, engine.chunk, budget))
        if engine.whole_chunks and tokens < min(head.prompt_tokens, engine.chunk):
            break
        plan.append(_prefill(engine.admit(), tokens))
        budget -= tokens
    return plan


POLICIES: dict[str, Callable] = {"fixed": _plan_fixed, "continuous": _plan_continuous, "chunked": _plan_chunked}


@dataclass
class ReferenceRun:
    """What the old loop produced: per request (first work start, token times), the log and the makespan."""

    first_work_s: dict[str, float]
    token_times_s: dict[str, tuple[float, ...]]
    log: list[tuple[float, float, tuple[Work, ...]]]
    makespan_s: float


def simulate_reference(requests: Sequence[Request], policy: str, cost: CostFn, max_running: int = 1,
                       token_budget: int | None = None, chunk_tokens: int | None = None, admission=None,
                       whole_chunks: bool = True) -> ReferenceRun:
    """The pre-rewrite loop, verbatim in its rules (argument validation left to the caller)."""
    requests = list(requests)
    admission = NoLimit() if admission is None else admission
    engine = _Engine(requests, max_running, admission, token_budget, chunk_tokens, whole_chunks)
    plan_of = POLICIES[policy]
    finished: dict[str, _Live] = {}
    log = []
    now = 0.0
    while engine.pending or engine.waiting or engine.running:
        engine.arrive(now)
        if not engine.running and not engine.waiting:
            now = engine.pending[0].arrival_s
            continue
        plan = plan_of(engine)
        if not plan:
            raise RuntimeError("planned no work")
        work = tuple(w for _, w in plan)
        duration = cost(work)
        start, now = now, now + duration
        for live, item in plan:
            if live.first_work_s < 0:
                live.first_work_s = start
            if item.kind == "prefill":
                live.prefilled += item.new_tokens
            live.times.extend([now] * item.emits)
        log.append((start, duration, work))
        still = []
        for live in engine.running:
            if len(live.times) >= live.request.output_tokens:
                engine.admission.release(live.request)
                finished[live.request.name] = live
            else:
                still.append(live)
        engine.running = still
    first = {r.name: finished[r.name].first_work_s for r in requests}
    times = {r.name: tuple(finished[r.name].times) for r in requests}
    makespan = max(t[-1] for t in times.values()) - min(r.arrival_s for r in requests)
    return ReferenceRun(first, times, log, makespan)
