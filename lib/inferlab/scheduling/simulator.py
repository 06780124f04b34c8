"""An iteration-level scheduler simulator: fixed batches, continuous batching, chunked prefill.

Time moves in whole iterations. At each iteration boundary the policy admits waiting requests
first-come-first-served (limited by ``max_running`` and a pluggable ``Admission``, e.g. a
KV-block limit) and picks the work of the iteration: prompt pieces and decodes. The iteration
costs ``cost(work)`` seconds (any ``iteration.CostFn``). The iteration that completes a prompt
emits the first output token; each decode emits one more; a request frees its slot at the end
of the iteration that emits its last token (Chapter 8, section 8.2.2).

Policies:
- ``fixed``: admit a group only when the previous group is done; prefill the group in one iteration.
- ``continuous``: admit whenever a slot is free; the newcomer's whole prompt runs in the next iteration.
- ``chunked``: decodes first, then prompt pieces in arrival order, at most one per request per
  iteration, each at most ``chunk_tokens``, within ``token_budget`` tokens per iteration.
  Under the whole-piece rule a running prompt whose next piece does not fit is skipped and a
  later prompt may go first; a waiting request at the head of the queue that does not fit
  blocks admission behind it (first come, first served). By
  default a piece runs only if it fits whole in what is left of the budget
  (``whole_chunks=True``); ``whole_chunks=False`` cuts it to the budget left, as vLLM does.

Two engines run these rules: an event-driven one (``events``) when the cost depends on the
work only through its totals (``IterationCost``, ``RooflineCost``: anything with ``of_totals``),
and the general per-item one (``plans``) for any other ``CostFn`` or a plan function of the caller's. They give bit-identical times; tests hold both to the pre-rewrite loop.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from .._validate import (MAX_COUNT, finite_result, flag, instance, items, mapping, member, non_negative,
                         non_negative_int, one_of, positive, positive_int)
from ..timeline import RequestTimes, itls_by_request, summarize
from .admission import Admission, KVBlockLimit, NoLimit
from .events import run_events
from .iteration import FITTED_COST, CostFn, TotalsCost
from .limits import Limits
from .log import Iteration, IterationLog
from .plans import POLICIES, PlanFn, run_plans
from .request import Request

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Served", "Schedule", "simulate", "example_requests", "EXAMPLE_MAX_RUNNING", "EXAMPLE_TOKEN_BUDGET",
    "EXAMPLE_CHUNK_TOKENS", "run_example", "replay_requests", "budget_sweep", "budget_within_gap",
    "quickest_admission_budget", "batch_requests", "REPLAY_PROMPT_TOKENS", "REPLAY_OUTPUT_TOKENS", "REPLAY_INTERVAL_S",
    "replay_batch_sweep", "SWEEP_TOKEN_BUDGET", "SWEEP_CHUNK_TOKENS",
]


# ---- results -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Served:
    """What happened to one request: when its first work started and its output-token times."""

    request: Request
    first_work_s: float
    times: RequestTimes

    def __post_init__(self) -> None:
        # ``simulate`` builds one per request: plain types pass one check, anything else the full one
        if not (type(self.request) is Request and type(self.times) is RequestTimes
                and type(self.first_work_s) is float and 0.0 <= self.first_work_s < math.inf):
            instance("request", self.request, Request)
            non_negative("first_work_s", self.first_work_s)
            instance("times", self.times, RequestTimes)

    @property
    def queue_s(self) -> float:
        """Seconds from arrival to the start of the first iteration that runs any of its work."""
        return self.first_work_s - self.request.arrival_s

    @property
    def finish_s(self) -> float:
        """Emission time of the last output token."""
        return float(self.times.token_times_s[-1])


@dataclass(frozen=True)
class Schedule:
    """A simulated run: each request's record (by name, input order), the iteration log and the makespan.

    ``makespan_s`` runs from the first arrival to the last token (the chapter's example starts at 0).
    """

    policy: str
    served: dict[str, Served]
    iterations: IterationLog
    makespan_s: float

    def __post_init__(self) -> None:
        instance("policy", self.policy, str)
        for name, served in mapping("served", self.served).items():
            instance("served", served, Served, "a dict of Served records by request name")
        instance("iterations", self.iterations, IterationLog)
        non_negative("makespan_s", self.makespan_s)

    @property
    def times(self) -> dict[str, RequestTimes]:
        """Each request's ``timeline.RequestTimes`` (TTFT, every ITL), by name."""
        return {name: s.times for name, s in self.served.items()}

    @cached_property
    def _itls(self) -> tuple[np.ndarray, np.ndarray]:
        return itls_by_request([s.times for s in self.served.values()])

    @property
    def max_itl_s(self) -> float:
        """Longest gap between consecutive output tokens of any request; NaN when no request has two tokens."""
        return float(np.fmax.reduce(self._itls[0]))  # fmax skips the NaN of one-token requests

    def iterations_queued(self, name: str) -> int:
        """Iterations that start while request ``name`` waits: after its arrival, before its first work.

        The iteration already running when it arrives is not counted; its remainder is part of ``queue_s`` too.
        """
        served = self.served[one_of("name", name, self.served)]
        starts = self.iterations.start_s
        return int(np.count_nonzero((starts >= served.request.arrival_s) & (starts < served.first_work_s)))

    def summary(self) -> dict[str, float]:
        """Batch metrics of ``timeline.summarize`` (makespan from the first arrival) plus the iteration count."""
        out = summarize([s.times for s in self.served.values()])
        out["makespan_s"] = self.makespan_s
        out["iterations"] = len(self.iterations)
        return out

    def table(self) -> "pd.DataFrame":
        """One row per request: arrival, queueing, TTFT, max and mean ITL, finish (seconds).

        ``max_itl_s`` and ``mean_itl_s`` are NaN for a request with one output token: it has no gap.
        """
        import pandas as pd

        served = list(self.served.values())
        count = len(served)
        arrival = np.fromiter((s.request.arrival_s for s in served), dtype=float, count=count)
        first_work = np.fromiter((s.first_work_s for s in served), dtype=float, count=count)
        first = np.fromiter((s.times.token_times_s[0] for s in served), dtype=float, count=count)
        finish = np.fromiter((s.times.token_times_s[-1] for s in served), dtype=float, count=count)
        longest, mean = self._itls
        return pd.DataFrame({
            "request": list(self.served),
            "arrival_s": arrival,
            "prompt_tokens": np.fromiter((s.request.prompt_tokens for s in served), dtype=np.int64, count=count),
            "output_tokens": np.fromiter((s.request.output_tokens for s in served), dtype=np.int64, count=count),
            "queue_s": first_work - arrival, "ttft_s": first - arrival, "max_itl_s": longest,
            "mean_itl_s": mean, "finish_s": finish,
        }).set_index("request")


# ---- the loop ----------------------------------------------------------------------------------
def simulate(
    requests: Iterable[Request],
    policy: str | PlanFn,
    cost: CostFn = FITTED_COST,
    max_running: int = 1,
    token_budget: int | None = None,
    chunk_tokens: int | None = None,
    admission: Admission | None = None,
    whole_chunks: bool = True,
    record_iterations: bool = True,
) -> Schedule:
    """Run ``requests`` under ``policy`` ('fixed' | 'continuous' | 'chunked', or a plan function); seconds.

    ``token_budget`` caps the tokens of one iteration (required for 'chunked'; at least ``max_running``,
    so a running decode never misses an iteration). Under 'fixed' and 'continuous' it limits the
    prompts admitted together: admission stops at the first waiting prompt that does not fit whole
    in what is left, which then waits for the next group (fixed) or iteration (continuous), so a
    group may be smaller than ``max_running``; a single prompt above the budget is a ValueError.
    ``chunk_tokens`` caps one prompt piece (default and at most: the budget). With ``whole_chunks``
    (the default, the chapter's rule) a piece that does not fit whole in the budget left waits for a
    later iteration; with ``whole_chunks=False`` it is cut to what is left, as vLLM's chunked prefill
    does. Chunked admission is head-of-line: when the first piece of the waiting request at the head
    does not fit, nobody behind it is admitted in that iteration, e.g. with budget 4096, chunk 4096
    and one decode running, an 8192-token prompt at the head waits and so does a 16-token prompt
    behind it. ``admission`` (default: no limit) adds a memory check such as ``KVBlockLimit``.
    ``makespan_s`` runs from the first arrival to the last token. A cost with ``of_totals`` takes the
    event-driven engine (O(1) per iteration plus its prompt pieces), any other ``CostFn`` the
    per-item one; ``record_iterations=False`` drops the iteration log.
    """
    requests = items("requests", requests)
    builtin, plan, name = _checked_policy(policy)
    _check_requests(requests)
    limits = Limits(max_running, token_budget, chunk_tokens, whole_chunks)
    _check_policy_limits(requests, builtin, limits)
    if not callable(cost):
        raise ValueError(f"cost must be a callable on a sequence of Work (a CostFn), got {cost!r}")
    flag("record_iterations", record_iterations)
    admission = _checked_admission(requests, admission)

    ordered = sorted(requests, key=lambda r: r.arrival_s)
    with _gc_paused():
        if isinstance(cost, TotalsCost) and builtin is not None:
            run = run_events(ordered, builtin, cost, limits, admission, record_iterations)
        else:
            run = run_plans(ordered, plan, cost, limits, NoLimit() if admission is None else admission,
                            record_iterations)
        trusted = RequestTimes._trusted
        by_name = {r.name: Served(r, first, trusted(r.arrival_s, times))
                   for r, first, times in zip(ordered, run.first_work_s.tolist(), run.token_times_s)}
        served = {r.name: by_name[r.name] for r in requests}
    return Schedule(name, served, run.iterations, run.makespan_s)


def _checked_policy(policy: str | PlanFn) -> tuple[str | None, PlanFn, str]:
    """(the built-in policy's name or None, its plan function, the name the schedule records)."""
    if callable(policy):  # a plan of the caller's own (``plans.PlanFn``): the general engine runs it
        return None, policy, getattr(policy, "__name__", "custom plan")
    one_of("policy", policy, POLICIES)
    return policy, POLICIES[policy], policy


def _check_requests(requests: list[Request]) -> None:
    """Refuse an empty list, anything but ``Request``s, repeated names and counts beyond ``MAX_COUNT``."""
    if not requests:
        raise ValueError("requests must not be empty")
    stranger = next((r for r in requests if not isinstance(r, Request)), None)
    if stranger is not None:
        raise ValueError(f"requests must be scheduling.Request objects, got {type(stranger).__name__}: {stranger!r}")
    if len({r.name for r in requests}) != len(requests):
        raise ValueError("requests must have unique names")
    huge = next((r for r in requests if r.prompt_tokens > MAX_COUNT or r.output_tokens > MAX_COUNT), None)
    if huge is not None:
        raise ValueError(f"requests must have prompt_tokens and output_tokens of at most {MAX_COUNT} (the iterations "
                         f"to simulate), got request {huge.name!r}")


def _check_policy_limits(requests: list[Request], builtin: str | None, limits: Limits) -> None:
    """Refuse limits the built-in policy cannot run under (ValueError naming the argument)."""
    if builtin == "chunked" and limits.token_budget is None:
        raise ValueError("token_budget is required for policy 'chunked'")
    if builtin in ("fixed", "continuous"):
        if limits.chunk_tokens is not None:
            raise ValueError("chunk_tokens applies to policy 'chunked' only")
        budget = limits.token_budget
        too_long = None if budget is None else next((r for r in requests if r.prompt_tokens > budget), None)
        if too_long is not None:
            raise ValueError(f"request {too_long.name!r}: prompt_tokens ({too_long.prompt_tokens}) exceed "
                             f"token_budget ({budget}) and policy {builtin!r} cannot split a prompt")


def _checked_admission(requests: list[Request], admission: Admission | None) -> Admission | None:
    """``admission``, or None when it limits nothing (the engines then skip its calls); refuses one no request passes."""
    if type(admission) is NoLimit:
        return None
    if admission is not None and not isinstance(admission, Admission):
        raise ValueError(f"admission must be an Admission (NoLimit, KVBlockLimit, ...) or None, got {admission!r}")
    if admission is not None:
        for r in requests:
            if not admission.fits(r):
                raise ValueError(f"request {r.name!r} can never be admitted by {admission!r}")
    return admission


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a run allocates millions of objects, none in a cycle (~20 % faster)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    """Section 8.2.2's example under ``policy``, with the chapter's limits and whole pieces (our choice) unless overridden.

    ``token_budget`` and ``chunk_tokens`` apply to 'chunked' only (they are checked whatever the policy).
    """
    positive_int("token_budget", token_budget), positive_int("chunk_tokens", chunk_tokens)
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
    prompt_tokens = items("prompt_tokens", prompt_tokens)
    if not prompt_tokens:
        raise ValueError("prompt_tokens must name at least one request")
    finite_result((len(prompt_tokens) - 1) * interval_s, "interval_s")  # the last arrival
    return tuple(Request(f"q{i}", i * interval_s, p, output_tokens) for i, p in enumerate(prompt_tokens))


def budget_sweep(requests: Sequence[Request], budgets: Iterable[int], cost: CostFn = FITTED_COST,
                 max_running: int = 8, first_late: int = 1, whole_chunks: bool = False) -> "pd.DataFrame":
    """Chunked runs of ``requests`` per token budget (chunk = budget): late arrivals' queueing, worst gap, makespan (s).

    ``late_queue_iterations_mean`` is the late arrivals' mean count of iterations that start while they wait
    (``Schedule.iterations_queued``).

    "Late" requests are those from index ``first_late`` on in arrival order (default: all but the first).
    With the chunk equal to the budget a whole chunk never fits beside a running decode, so pieces
    are cut to the budget left (``whole_chunks=False``, as vLLM does) unless asked otherwise.
    """
    import pandas as pd

    requests = items("requests", requests)
    if not requests:
        raise ValueError("requests must not be empty")
    for r in requests:
        instance("requests", r, Request, "a sequence of Request")
    ordered = sorted(requests, key=lambda r: r.arrival_s)
    if not non_negative_int("first_late", first_late) < len(ordered):
        raise ValueError(f"first_late must lie in [0, {len(ordered) - 1}], got {first_late!r}")
    late = [r.name for r in ordered[first_late:]]
    rows = []
    for budget in items("budgets", budgets):
        positive_int("budgets", budget)
        s = simulate(ordered, "chunked", cost, max_running, token_budget=budget, whole_chunks=whole_chunks)
        queues = [s.served[n].queue_s for n in late]
        waited = [s.iterations_queued(n) for n in late]
        rows.append({"token_budget": budget, "late_queue_mean_s": sum(queues) / len(queues),
                     "late_queue_max_s": max(queues), "late_queue_iterations_mean": sum(waited) / len(waited),
                     "max_itl_s": s.max_itl_s, "makespan_s": s.makespan_s, "iterations": len(s.iterations)})
    if not rows:
        raise ValueError("budgets must name at least one token budget")
    return pd.DataFrame(rows).set_index("token_budget")


def budget_within_gap(sweep: "pd.DataFrame", gap_limit_s: float) -> int | None:
    """Largest token budget of a ``budget_sweep`` table whose longest gap stays under ``gap_limit_s``; None if none.

    A budget at which no request has a gap (every request emitted one token: ``max_itl_s`` NaN) exceeds no limit.
    """
    _sweep_table(sweep, "max_itl_s")
    positive("gap_limit_s", gap_limit_s)
    ok = [int(b) for b, gap in sweep["max_itl_s"].items() if np.isnan(gap) or gap < gap_limit_s]
    return max(ok) if ok else None


def quickest_admission_budget(sweep: "pd.DataFrame") -> int:
    """Smallest token budget of a ``budget_sweep`` table at which the late arrivals' mean queueing is lowest."""
    _sweep_table(sweep, "late_queue_mean_s")
    if len(sweep) == 0:
        raise ValueError("sweep must hold at least one budget")
    best = sweep["late_queue_mean_s"].min()
    return int(min(b for b, q in sweep["late_queue_mean_s"].items() if q == best))


def _sweep_table(sweep: "pd.DataFrame", column: str) -> None:
    """Refuse anything but a ``budget_sweep`` table (a DataFrame with ``column``)."""
    import pandas as pd

    instance("sweep", sweep, pd.DataFrame, "a budget_sweep table (a DataFrame)")
    if column not in sweep.columns:
        raise ValueError(f"sweep must be a budget_sweep table with the column {column!r}")


def batch_requests(n: int, prompt_tokens: int, output_tokens: int, arrival_s: float = 0.0) -> tuple[Request, ...]:
    """``n`` alike requests submitted together (as in experiment 8-1's batch sweep)."""
    n = positive_int("n", n, at_most=MAX_COUNT)
    return tuple(Request(f"q{i}", arrival_s, prompt_tokens, output_tokens) for i in range(n))


#: Experiment 8-1's engine limits as our simulator replays them: 4096 tokens per iteration, prompt pieces of 2048.
SWEEP_TOKEN_BUDGET = 4096
SWEEP_CHUNK_TOKENS = 2048


def replay_batch_sweep(batches: Iterable[int] = (1, 64), cost: CostFn = FITTED_COST,
                       whole_chunks: bool = True) -> "pd.DataFrame":
    """Experiment 8-1's measured batches beside our simulator's replay of them, per batch (seconds, tokens/s).

    Each batch of ``batches`` (those the experiment measured end to end: 1 and 64) is replayed as
    that many alike requests submitted together (the running example's short requests: 2048 prompt
    tokens, 256 output tokens) under the 'chunked' policy with as many slots as requests,
    ``SWEEP_TOKEN_BUDGET`` tokens per iteration and prompt pieces of ``SWEEP_CHUNK_TOKENS``
    (``whole_chunks=False`` cuts a piece to the budget left, as vLLM does), each iteration priced
    by ``cost`` (default: the cost fitted to batch-1 iterations). Rows are indexed by
    (batch, source), source 'measured' (the published medians of three runs) or 'simulated';
    columns as in the published sweep: ``throughput_tok_s``, ``ttft_s`` (the median over the
    batch's requests) and ``mean_itl_s``.
    """
    import pandas as pd

    from .. import example
    from ..datasets import published

    sweep = published("batch_sweep_8_1").set_index("batch")
    columns = ["throughput_tok_s", "ttft_s", "mean_itl_s"]
    measured_ends = sweep.dropna(subset=columns)
    measured_batches = [int(b) for b in measured_ends.index]
    what = f"a batch experiment 8-1 measured end to end ({', '.join(map(str, measured_batches))})"
    chosen = [member("batches", positive_int("batches", b), measured_batches, what) for b in items("batches", batches)]
    if not chosen:
        raise ValueError("batches must name at least one batch")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"batches must not repeat a batch, got {chosen!r:.80}")
    flag("whole_chunks", whole_chunks)
    rows = {}
    for n in sorted(chosen):
        s = simulate(batch_requests(n, example.SHORT.prompt_tokens, example.SHORT.output_tokens), "chunked", cost,
                     max_running=n, token_budget=SWEEP_TOKEN_BUDGET, chunk_tokens=SWEEP_CHUNK_TOKENS,
                     whole_chunks=whole_chunks)
        summary = s.summary()
        rows[(n, "measured")] = {c: float(measured_ends.loc[n, c]) for c in columns}
        rows[(n, "simulated")] = {"throughput_tok_s": summary["throughput_tok_s"],
                                  "ttft_s": float(s.table().ttft_s.median()), "mean_itl_s": summary["mean_itl_s"]}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["batch", "source"])
    return out
