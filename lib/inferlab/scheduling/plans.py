"""The scheduler's general path: each iteration a policy plans explicit ``Work`` items and any ``CostFn`` prices them.

This is the reference form of the rules (``simulator``'s docstring); ``events`` is its fast
twin for costs of the work's totals. A policy is a function ``Engine -> Plan`` (``PlanFn``): the three
built-in ones are in ``POLICIES``, and ``simulate`` takes any other as its ``policy`` argument; a plan
may emit several tokens per item (``Work.emits``, e.g. speculative decoding).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .._validate import finite, instance, items, non_negative, non_negative_int
from .admission import Admission
from .events import EngineRun, checked_seconds, clock_stalled
from .iteration import CostFn, Work
from .limits import Limits
from .log import IterationLog
from .request import Request

__all__ = ["Live", "Engine", "Plan", "PlanFn", "POLICIES", "run_plans"]


@dataclass(eq=False, slots=True)
class Live:
    """A running request: its position in arrival order, prompt tokens prefilled, output-token times so far."""

    request: "Request"
    index: int
    prefilled: int = 0
    times: list[float] = field(default_factory=list)
    first_work_s: float = -1.0

    def __post_init__(self) -> None:
        # the engine admits with (request, index) only: one check; anything else the full one
        if not (type(self.request) is Request and type(self.index) is int and self.index >= 0 and self.prefilled == 0
                and type(self.prefilled) is int and type(self.times) is list and not self.times
                and self.first_work_s == -1.0):
            instance("request", self.request, Request)
            non_negative_int("index", self.index)
            if non_negative_int("prefilled", self.prefilled) > self.request.prompt_tokens:
                raise ValueError(f"prefilled must be at most the request's prompt_tokens "
                                 f"({self.request.prompt_tokens})")
            instance("times", self.times, list, "a list of output-token times")
            for t in self.times:
                non_negative("times", t)
            if self.first_work_s != -1.0 or type(self.first_work_s) is not float:
                non_negative("first_work_s (-1.0: not started)", self.first_work_s)

    @property
    def decoding(self) -> bool:
        """Whether its whole prompt is in the KV cache (it decodes from now on)."""
        return self.prefilled == self.request.prompt_tokens


class Engine:
    """Queues and limits the policies act on: pending (not arrived), waiting (FCFS) and running requests."""

    def __init__(self, requests: Sequence["Request"], limits: Limits, admission: "Admission") -> None:
        requests = items("requests", requests)
        for r in requests:
            instance("requests", r, Request, "a sequence of Request")
        instance("limits", limits, Limits)
        instance("admission", admission, Admission, "an Admission (NoLimit, KVBlockLimit, ...)")
        self.pending: deque[Request] = deque(requests)
        self.waiting: deque[Request] = deque()
        self.running: list[Live] = []
        self.admitted = 0  # admission is first come, first served: the n-th admitted is n-th in arrival order
        self.max_running = limits.max_running
        self.admission = admission
        self.budget = limits.budget
        self.chunk = limits.chunk
        self.whole_chunks = limits.whole_chunks

    def arrive(self, now: float) -> None:
        """Move every request that has arrived by ``now`` from pending to waiting."""
        if type(now) is not float or not -math.inf < now < math.inf:
            finite("now", now)
        while self.pending and self.pending[0].arrival_s <= now:
            self.waiting.append(self.pending.popleft())

    def can_admit(self) -> bool:
        """Whether the head of the waiting queue may start now (a free slot and the admission agrees)."""
        return (len(self.running) < self.max_running and bool(self.waiting)
                and self.admission.can_admit(self.waiting[0]))

    def admit(self) -> Live:
        """Start the head of the waiting queue (call ``can_admit`` first)."""
        request = self.waiting.popleft()
        self.admission.admit(request)
        live = Live(request, self.admitted)
        self.admitted += 1
        self.running.append(live)
        return live


Plan = list[tuple[Live, Work]]


def _prefill(live: Live, tokens: int) -> tuple[Live, Work]:
    done = live.prefilled + tokens == live.request.prompt_tokens
    return live, Work(live.request, "prefill", tokens, live.prefilled, 1 if done else 0)


def _decodes(engine: Engine, budget: float) -> tuple[Plan, float]:
    """One decode per running request past its prompt, in admission order, while the budget lasts."""
    plan: Plan = []
    for live in engine.running:
        if live.decoding and budget >= 1:
            cached = live.request.prompt_tokens + len(live.times) - 1
            plan.append((live, Work(live.request, "decode", 1, cached, 1)))
            budget -= 1
    return plan, budget


def _admit_whole_prompts(engine: Engine, plan: Plan, budget: float) -> Plan:
    while engine.can_admit() and engine.waiting[0].prompt_tokens <= budget:
        live = engine.admit()
        plan.append(_prefill(live, live.request.prompt_tokens))
        budget -= live.request.prompt_tokens
    return plan


def plan_fixed(engine: Engine) -> Plan:
    """Decode the running group; once it is done, admit and prefill the next group in one iteration."""
    if engine.running:
        return _decodes(engine, math.inf)[0]
    return _admit_whole_prompts(engine, [], engine.budget)


def plan_continuous(engine: Engine) -> Plan:
    """Decode every running request, then admit whole prompts into free slots while the budget lasts."""
    plan, budget = _decodes(engine, engine.budget)
    return _admit_whole_prompts(engine, plan, budget)


def plan_chunked(engine: Engine) -> Plan:
    """Decodes first, then one prompt piece per prefilling request, then admissions (head-of-line)."""
    plan, budget = _decodes(engine, engine.budget)

    def piece(live: Live) -> int:
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


#: A policy: each iteration, the work it runs (``simulate`` takes one of these or a built-in's name).
PlanFn = Callable[[Engine], Plan]

#: The built-in policies by name (read-only); the event-driven engine replaces exactly these.
POLICIES: Mapping[str, PlanFn] = MappingProxyType({
    "fixed": plan_fixed, "continuous": plan_continuous, "chunked": plan_chunked,
})


def run_plans(requests: Sequence["Request"], plan_of: PlanFn, cost: CostFn, limits: Limits, admission: "Admission",
              record_iterations: bool = True) -> EngineRun:
    """Simulate ``requests`` (sorted by arrival) under the policy ``plan_of`` with any ``cost``; arguments validated."""
    engine = Engine(requests, limits, admission)
    policy = getattr(plan_of, "__name__", repr(plan_of))
    finished: list[Live | None] = [None] * len(requests)
    starts: list[float] = []
    durations: list[float] = []
    works: list[tuple[Work, ...]] = []
    now = 0.0
    while engine.pending or engine.waiting or engine.running:
        engine.arrive(now)
        if not engine.running and not engine.waiting:
            now = engine.pending[0].arrival_s
            continue
        plan = plan_of(engine)
        if not plan:
            raise RuntimeError(f"policy {policy!r} planned no work with {len(engine.running)} running "
                               f"and {len(engine.waiting)} waiting")
        work = tuple(w for _, w in plan)
        duration = cost(work)
        if type(duration) is not float or not 0.0 < duration < math.inf:
            duration = checked_seconds(duration)
        start, now = now, now + duration
        if now <= start:
            raise clock_stalled(start, duration)
        done = []
        for live, item in plan:
            if live.first_work_s < 0:
                live.first_work_s = start
            if item.kind == "prefill":
                live.prefilled += item.new_tokens
            if item.emits:
                live.times.extend([now] * item.emits)
                if len(live.times) >= live.request.output_tokens:
                    done.append(live)
        starts.append(start)
        durations.append(duration)
        if record_iterations:
            works.append(work)
        if done:
            done.sort(key=lambda live: live.index)
            for live in done:
                engine.admission.release(live.request)
                finished[live.index] = live
            engine.running = [live for live in engine.running if finished[live.index] is None]

    lives = [live for live in finished if live is not None]
    first_work = np.array([live.first_work_s for live in lives])
    token_times = [np.array(live.times) for live in lives]
    for times in token_times:
        times.flags.writeable = False
    makespan = max(float(t[-1]) for t in token_times) - min(r.arrival_s for r in requests)
    log = IterationLog(starts, durations, works.__getitem__) if record_iterations else IterationLog([], [], lambda k: ())
    return EngineRun(first_work, token_times, log, makespan)
