"""An iteration-level scheduler simulator: fixed batches, continuous batching, chunked prefill.

Time moves in whole iterations. At each iteration boundary the policy admits waiting requests
first-come-first-served (limited by ``max_running`` and a pluggable ``Admission``, e.g. a
KV-block limit) and picks the work of the iteration: prompt pieces and decodes. The iteration
costs ``cost(work)`` seconds (any ``iteration.CostFn``). The iteration that completes a prompt
emits the first output token; each decode emits one more; a request frees its slot at the end
of the iteration that emits its last token (Chapter 8, section 8.2.2; SPEC "scheduling rules").

Policies:
- ``fixed``: admit a group only when the previous group is done; prefill the group in one iteration.
- ``continuous``: admit whenever a slot is free; the newcomer's whole prompt runs in the next iteration.
- ``chunked``: decodes first, then prompt pieces in arrival order, at most one per request per
  iteration, each at most ``chunk_tokens``, within ``token_budget`` tokens per iteration.
  Under the whole-piece rule a running prompt whose next piece does not fit is skipped and a
  later prompt may go first; a waiting request at the head of the queue that does not fit
  blocks admission behind it (first come, first served). By
  default (SPEC) a piece runs only if it fits whole in what is left of the budget
  (``whole_chunks=True``); ``whole_chunks=False`` cuts it to the budget left, as vLLM does.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ._validate import non_negative, one_of, positive, positive_int
from .iteration import FITTED_COST, CostFn, IterationCost, RooflineCost, Work
from .memory import blocks_for, kv_tokens
from .timeline import RequestTimes, summarize

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Request", "Work", "IterationCost", "RooflineCost", "FITTED_COST", "Admission", "NoLimit", "KVBlockLimit",
    "Iteration", "Served", "Schedule", "simulate", "POLICIES",
    "example_requests", "EXAMPLE_MAX_RUNNING", "EXAMPLE_TOKEN_BUDGET", "EXAMPLE_CHUNK_TOKENS", "run_example",
    "replay_requests", "budget_sweep", "budget_within_gap", "quickest_admission_budget", "batch_requests", "REPLAY_PROMPT_TOKENS", "REPLAY_OUTPUT_TOKENS", "REPLAY_INTERVAL_S",
]


@dataclass(frozen=True)
class Request:
    """A request: arrives at ``arrival_s`` with ``prompt_tokens`` and wants ``output_tokens`` outputs."""

    name: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        non_negative("arrival_s", self.arrival_s)
        positive_int("prompt_tokens", self.prompt_tokens)
        positive_int("output_tokens", self.output_tokens)


# ---- admission: a check-then-act pair on top of the slot limit -------------------------------
class Admission(Protocol):
    """Decides whether a request may start now (beyond the ``max_running`` slots) and tracks what it holds."""

    def fits(self, request: Request) -> bool: ...
    def can_admit(self, request: Request) -> bool: ...
    def admit(self, request: Request) -> None: ...
    def release(self, request: Request) -> None: ...


class NoLimit:
    """Admission that never refuses (only ``max_running`` limits the batch)."""

    def fits(self, request: Request) -> bool:
        """Every request fits."""
        return True

    def can_admit(self, request: Request) -> bool:
        """Every request may start."""
        return True

    def admit(self, request: Request) -> None:
        """Nothing to reserve."""

    def release(self, request: Request) -> None:
        """Nothing to free."""


@dataclass
class KVBlockLimit:
    """Admission that reserves a request's KV blocks to completion (prompt + output - 1 tokens) at admission."""

    total_blocks: int
    block_size: int = 16
    used_blocks: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        positive_int("total_blocks", self.total_blocks)
        positive_int("block_size", self.block_size)

    def blocks_needed(self, request: Request) -> int:
        """Blocks ``request`` holds once it has emitted all its outputs."""
        return blocks_for(kv_tokens(request.prompt_tokens, request.output_tokens), self.block_size)

    @property
    def free_blocks(self) -> int:
        """Blocks not reserved by any running request."""
        return self.total_blocks - self.used_blocks

    def fits(self, request: Request) -> bool:
        """Whether ``request`` could ever be admitted (its blocks fit in an empty cache)."""
        return self.blocks_needed(request) <= self.total_blocks

    def can_admit(self, request: Request) -> bool:
        """Whether ``request``'s blocks fit in the free blocks now."""
        return self.blocks_needed(request) <= self.free_blocks

    def admit(self, request: Request) -> None:
        """Reserve ``request``'s blocks (call ``can_admit`` first)."""
        if not self.can_admit(request):
            raise ValueError(f"request {request.name!r} needs {self.blocks_needed(request)} blocks, "
                             f"{self.free_blocks} are free")
        self.used_blocks += self.blocks_needed(request)

    def release(self, request: Request) -> None:
        """Free ``request``'s blocks."""
        self.used_blocks -= self.blocks_needed(request)
        if self.used_blocks < 0:
            raise ValueError(f"released more blocks than were reserved (request {request.name!r})")


# ---- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Iteration:
    """One iteration of the log: when it started, how long it took, which work of which request it ran."""

    index: int
    start_s: float
    duration_s: float
    work: tuple[Work, ...]

    @property
    def end_s(self) -> float:
        """Time the iteration ends and its tokens are emitted."""
        return self.start_s + self.duration_s

    @property
    def new_tokens(self) -> int:
        """Tokens the iteration runs (prompt pieces and decodes)."""
        return sum(w.new_tokens for w in self.work)


@dataclass(frozen=True)
class Served:
    """What happened to one request: when its first work started and its output-token times."""

    request: Request
    first_work_s: float
    times: RequestTimes

    @property
    def queue_s(self) -> float:
        """Seconds from arrival to the start of the first iteration that runs any of its work."""
        return self.first_work_s - self.request.arrival_s

    @property
    def finish_s(self) -> float:
        """Emission time of the last output token."""
        return self.times.token_times_s[-1]


@dataclass(frozen=True)
class Schedule:
    """A simulated run: each request's record (by name, input order), the iteration log and the makespan."""

    policy: str
    served: dict[str, Served]
    iterations: tuple[Iteration, ...]
    makespan_s: float

    @property
    def times(self) -> dict[str, RequestTimes]:
        """Each request's ``timeline.RequestTimes`` (TTFT, every ITL), by name."""
        return {name: s.times for name, s in self.served.items()}

    @property
    def max_itl_s(self) -> float:
        """Longest gap between consecutive output tokens of any request."""
        return max(s.times.max_itl_s for s in self.served.values())

    def summary(self) -> dict[str, float]:
        """Batch metrics of ``timeline.summarize`` plus the makespan from time 0 and the iteration count."""
        out = summarize(list(self.times.values()))
        out["makespan_s"] = self.makespan_s
        out["iterations"] = len(self.iterations)
        return out

    def table(self) -> "pd.DataFrame":
        """One row per request: arrival, queueing, TTFT, max and mean ITL, finish (seconds)."""
        import pandas as pd

        rows = [
            {"request": name, "arrival_s": s.request.arrival_s, "prompt_tokens": s.request.prompt_tokens,
             "output_tokens": s.request.output_tokens, "queue_s": s.queue_s, "ttft_s": s.times.ttft_s,
             "max_itl_s": s.times.max_itl_s, "mean_itl_s": s.times.mean_itl_s, "finish_s": s.finish_s}
            for name, s in self.served.items()
        ]
        return pd.DataFrame(rows).set_index("request")


# ---- the engine state the policies act on -----------------------------------------------------
@dataclass(eq=False, slots=True)
class _Live:
    request: Request
    prefilled: int = 0
    times: list[float] = field(default_factory=list)
    first_work_s: float = -1.0

    @property
    def decoding(self) -> bool:
        return self.prefilled == self.request.prompt_tokens


class _Engine:
    """Queues and limits shared by the policies; every operation is O(1) or O(running)."""

    def __init__(self, requests: Sequence[Request], max_running: int, admission: Admission,
                 token_budget: int | None, chunk_tokens: int | None, whole_chunks: bool) -> None:
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


Plan = list[tuple[_Live, Work]]


def _prefill(live: _Live, tokens: int) -> tuple[_Live, Work]:
    done = live.prefilled + tokens == live.request.prompt_tokens
    return live, Work(live.request, "prefill", tokens, live.prefilled, 1 if done else 0)


def _decodes(engine: _Engine, budget: float) -> tuple[Plan, float]:
    """One decode per running request past its prompt, in admission order, while the budget lasts."""
    plan: Plan = []
    for live in engine.running:
        if live.decoding and budget >= 1:
            cached = live.request.prompt_tokens + len(live.times) - 1
            plan.append((live, Work(live.request, "decode", 1, cached, 1)))
            budget -= 1
    return plan, budget


def _admit_whole_prompts(engine: _Engine, plan: Plan, budget: float) -> Plan:
    while engine.can_admit() and engine.waiting[0].prompt_tokens <= budget:
        live = engine.admit()
        plan.append(_prefill(live, live.request.prompt_tokens))
        budget -= live.request.prompt_tokens
    return plan


def _plan_fixed(engine: _Engine) -> Plan:
    if engine.running:
        return _decodes(engine, math.inf)[0]
    return _admit_whole_prompts(engine, [], engine.budget)


def _plan_continuous(engine: _Engine) -> Plan:
    plan, budget = _decodes(engine, engine.budget)
    return _admit_whole_prompts(engine, plan, budget)


def _plan_chunked(engine: _Engine) -> Plan:
    plan, budget = _decodes(engine, engine.budget)

    def piece(live: _Live) -> int:
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


POLICIES: dict[str, Callable[[_Engine], Plan]] = {
    "fixed": _plan_fixed,
    "continuous": _plan_continuous,
    "chunked": _plan_chunked,
}


# ---- the loop ----------------------------------------------------------------------------------
def simulate(
    requests: Iterable[Request],
    policy: str,
    cost: CostFn = FITTED_COST,
    max_running: int = 1,
    token_budget: int | None = None,
    chunk_tokens: int | None = None,
    admission: Admission | None = None,
    whole_chunks: bool = True,
    record_iterations: bool = True,
) -> Schedule:
    """Run ``requests`` under ``policy`` ('fixed' | 'continuous' | 'chunked'); times in seconds.

    ``token_budget`` caps the tokens of one iteration (required for 'chunked'); ``chunk_tokens``
    caps one prompt piece (default and at most: the budget). With ``whole_chunks`` (the default, the
    chapter's rule) a piece that does not fit whole in the budget left waits for a later iteration;
    with ``whole_chunks=False`` it is cut to what is left, as vLLM's chunked prefill does (needed when
    the chunk equals the budget, or prefill would wait until no decode runs). ``admission`` (default: no limit) adds a memory
    check such as ``KVBlockLimit``. Cost is O(total work): no scan over finished requests.
    """
    requests = list(requests)
    if not requests:
        raise ValueError("requests must not be empty")
    if len({r.name for r in requests}) != len(requests):
        raise ValueError("requests must have unique names")
    one_of("policy", policy, POLICIES)
    positive_int("max_running", max_running)
    if token_budget is not None:
        positive_int("token_budget", token_budget)
        if token_budget < max_running:
            raise ValueError(f"token_budget ({token_budget}) must be at least max_running ({max_running}) "
                             "so that every running decode fits in one iteration")
    if policy == "chunked" and token_budget is None:
        raise ValueError("token_budget is required for policy 'chunked'")
    if chunk_tokens is not None:
        positive_int("chunk_tokens", chunk_tokens)
        if policy != "chunked":
            raise ValueError("chunk_tokens applies to policy 'chunked' only")
    admission = NoLimit() if admission is None else admission
    for r in requests:
        if policy != "chunked" and token_budget is not None and r.prompt_tokens > token_budget:
            raise ValueError(f"request {r.name!r}: prompt_tokens ({r.prompt_tokens}) exceed token_budget "
                             f"({token_budget}) and policy {policy!r} cannot split a prompt")
        if not admission.fits(r):
            raise ValueError(f"request {r.name!r} can never be admitted by {admission!r}")

    engine = _Engine(requests, max_running, admission, token_budget, chunk_tokens, whole_chunks)
    plan_of = POLICIES[policy]
    finished: dict[str, _Live] = {}
    log: list[Iteration] = []
    now = 0.0
    index = 0
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
        if not (math.isfinite(duration) and duration > 0):
            raise ValueError(f"cost returned {duration!r} seconds; it must be finite and > 0")
        start, now = now, now + duration
        for live, item in plan:
            if live.first_work_s < 0:
                live.first_work_s = start
            if item.kind == "prefill":
                live.prefilled += item.new_tokens
            live.times.extend([now] * item.emits)
        if record_iterations:
            log.append(Iteration(index, start, duration, work))
        index += 1
        still = []
        for live in engine.running:
            if len(live.times) >= live.request.output_tokens:
                engine.admission.release(live.request)
                finished[live.request.name] = live
            else:
                still.append(live)
        engine.running = still

    served = {}
    for r in requests:
        live = finished[r.name]
        served[r.name] = Served(r, live.first_work_s, RequestTimes(r.arrival_s, tuple(live.times)))
    start = min(r.arrival_s for r in requests)
    makespan = max(s.finish_s for s in served.values()) - start
    return Schedule(policy, served, tuple(log), makespan)


# ---- the chapter's examples --------------------------------------------------------------------
EXAMPLE_MAX_RUNNING = 2
EXAMPLE_TOKEN_BUDGET = 4096
EXAMPLE_CHUNK_TOKENS = 2048


def example_requests() -> tuple[Request, ...]:
    """The four requests of section 8.2.2: r0, r1 (2048 in; 8 and 2 out) at 0; r2 (8192 in, 2 out) at 20 ms; r3 (2048 in, 4 out) at 30 ms."""
    return (
        Request("r0", 0.0, 2048, 8),
        Request("r1", 0.0, 2048, 2),
        Request("r2", 0.020, 8192, 2),
        Request("r3", 0.030, 2048, 4),
    )


def run_example(policy: str, cost: CostFn = FITTED_COST, max_running: int = EXAMPLE_MAX_RUNNING,
                token_budget: int = EXAMPLE_TOKEN_BUDGET, chunk_tokens: int = EXAMPLE_CHUNK_TOKENS,
                whole_chunks: bool = True) -> Schedule:
    """Section 8.2.2's example under ``policy``, with the chapter's limits (and whole-chunk rule) unless overridden."""
    chunked = policy == "chunked"
    return simulate(example_requests(), policy, cost, max_running,
                    token_budget=token_budget if chunked else None,
                    chunk_tokens=chunk_tokens if chunked else None, whole_chunks=whole_chunks)


#: Our choice for the six-request replay of section 8.2.4 (the chapter's trace is not public).
REPLAY_PROMPT_TOKENS = (2048, 4096, 1024, 3072, 2048, 4096)
REPLAY_OUTPUT_TOKENS = 64
REPLAY_INTERVAL_S = 0.080


def replay_requests(prompt_tokens: Sequence[int] = REPLAY_PROMPT_TOKENS,
                    output_tokens: int = REPLAY_OUTPUT_TOKENS,
                    interval_s: float = REPLAY_INTERVAL_S) -> tuple[Request, ...]:
    """Requests arriving every ``interval_s`` seconds (0, 80 ms, ...), one per prompt length."""
    non_negative("interval_s", interval_s)
    if not prompt_tokens:
        raise ValueError("prompt_tokens must name at least one request")
    return tuple(Request(f"q{i}", i * interval_s, p, output_tokens) for i, p in enumerate(prompt_tokens))


def budget_sweep(requests: Sequence[Request], budgets: Iterable[int], cost: CostFn = FITTED_COST,
                 max_running: int = 8, first_late: int = 1, whole_chunks: bool = False) -> "pd.DataFrame":
    """Chunked runs of ``requests`` per token budget (chunk = budget): late arrivals' queueing, worst gap, makespan (s).

    "Late" requests are those from index ``first_late`` on in arrival order (default: all but the first).
    With the chunk equal to the budget a whole chunk never fits beside a running decode, so pieces
    are cut to the budget left (``whole_chunks=False``, as vLLM does) unless asked otherwise.
    """
    import pandas as pd

    ordered = sorted(requests, key=lambda r: r.arrival_s)
    if not 0 <= first_late < len(ordered):
        raise ValueError(f"first_late must lie in [0, {len(ordered) - 1}], got {first_late!r}")
    late = [r.name for r in ordered[first_late:]]
    rows = []
    for budget in budgets:
        s = simulate(ordered, "chunked", cost, max_running, token_budget=budget, whole_chunks=whole_chunks)
        queues = [s.served[n].queue_s for n in late]
        rows.append({"token_budget": budget, "late_queue_mean_s": sum(queues) / len(queues),
                     "late_queue_max_s": max(queues), "max_itl_s": s.max_itl_s, "makespan_s": s.makespan_s,
                     "iterations": len(s.iterations)})
    if not rows:
        raise ValueError("budgets must name at least one token budget")
    return pd.DataFrame(rows).set_index("token_budget")


def budget_within_gap(sweep: "pd.DataFrame", gap_limit_s: float) -> int | None:
    """Largest token budget of a ``budget_sweep`` table whose longest gap stays under ``gap_limit_s``; None if none."""
    positive("gap_limit_s", gap_limit_s)
    ok = [int(b) for b, gap in sweep["max_itl_s"].items() if gap < gap_limit_s]
    return max(ok) if ok else None


def quickest_admission_budget(sweep: "pd.DataFrame") -> int:
    """Smallest token budget of a ``budget_sweep`` table at which the late arrivals' mean queueing is lowest."""
    if len(sweep) == 0:
        raise ValueError("sweep must hold at least one budget")
    best = sweep["late_queue_mean_s"].min()
    return int(min(b for b, q in sweep["late_queue_mean_s"].items() if q == best))


def batch_requests(n: int, prompt_tokens: int, output_tokens: int, arrival_s: float = 0.0) -> tuple[Request, ...]:
    """``n`` alike requests submitted together (as in experiment 8-1's batch sweep)."""
    return tuple(Request(f"q{i}", arrival_s, prompt_tokens, output_tokens) for i in range(positive_int("n", n)))
