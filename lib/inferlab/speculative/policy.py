"""Speculative decoding inside the iteration-level scheduler: each decode verifies m + 1 positions and emits N tokens.

The plan is continuous batching (``scheduling.plans.plan_continuous``) with every decode item replaced by a
verification item: ``new_tokens`` = m + 1 rows after the same cached tokens, ``emits`` = N drawn
from the round distribution P(N = n) of ``cost.tokens_distribution`` (rounds
independent, seeded), capped at the tokens the request still needs. Any ``CostFn`` prices the
iteration, so a roofline cost shows the extra rows turning into time once a batch is compute-bound
(Chapter 8, section 8.5.4). Drafting time is not modelled here (a lookup's 0.1 ms is negligible).
``speculative_batch_sweep`` runs plain and speculative decoding side by side at several batch sizes (8.5.4's table).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from .._validate import generator, instance, items, positive_int
from ..scheduling.iteration import CostFn, Work
from ..scheduling.plans import Engine, Plan, PlanFn, plan_continuous
from ..scheduling.simulator import Request, Schedule, batch_requests, simulate
from .cost import tokens_distribution

__all__ = ["speculative_plan", "simulate_speculative", "speculative_batch_sweep", "MAX_SWEEP_BATCH"]

#: Largest batch ``speculative_batch_sweep`` simulates: each batch is a whole event-by-event simulation, twice.
MAX_SWEEP_BATCH = 4096


def speculative_plan(accept_probs: Sequence[float], rng: np.random.Generator) -> PlanFn:
    """A continuous-batching plan whose decodes verify len(accept_probs) + 1 rows and emit N ~ P(N) tokens."""
    pmf = tokens_distribution(accept_probs)
    instance("rng", rng, np.random.Generator, "a numpy.random.Generator")
    rows = pmf.size  # m + 1 verified positions
    # rng.choice(rows, p=pmf) draws exactly this (one uniform, searched in the normalized CDF) without
    # validating p on every call, which made the draws most of a speculative simulation's time
    cdf = pmf.cumsum()
    cdf /= cdf[-1]

    def speculative(engine: Engine) -> Plan:
        out: Plan = []
        for live, work in plan_continuous(engine):
            if work.kind == "decode":
                left = live.request.output_tokens - len(live.times)
                emits = min(int(cdf.searchsorted(rng.random(), side="right")) + 1, left)
                work = Work(work.request, "decode", rows, work.cached_tokens, emits)
            out.append((live, work))
        return out

    return speculative


def simulate_speculative(requests: Iterable[Request], accept_probs: Sequence[float], cost: CostFn,
                         max_running: int = 1, seed: int = 0) -> Schedule:
    """``scheduling.simulate`` under continuous batching with speculative decodes (rounds drawn with ``seed``)."""
    return simulate(requests, speculative_plan(accept_probs, generator("seed", seed)), cost, max_running)


def speculative_batch_sweep(batches: Sequence[int], prompt_tokens: int, output_tokens: int,
                            accept_probs: Sequence[float], cost: CostFn, seed: int = 0) -> pd.DataFrame:
    """Plain against speculative decoding at each batch size, both under continuous batching priced by ``cost``.

    For each b in ``batches`` (distinct, 1 .. ``MAX_SWEEP_BATCH``), b alike requests (``batch_requests``) arrive
    together and run with ``max_running`` = b, once with plain decodes (``scheduling.simulate``) and once with
    speculative rounds of len(accept_probs) drafts (``simulate_speculative``, rounds drawn with ``seed``).
    One row per batch, in the given order, index ``batch``: ``plain (s)`` and ``speculative (s)``, the makespans
    from the arrival to the last token (prefill included), and ``speed-up``, plain over speculative (the ratio
    of the two throughputs too: both emit the same tokens).
    """
    listed = items("batches", batches)
    sizes = [positive_int("batches", b, at_most=MAX_SWEEP_BATCH) for b in listed]
    if not sizes or len(set(sizes)) != len(sizes):
        raise ValueError(f"batches must be distinct batch sizes (at least one), got {listed!r:.80}")
    tokens_distribution(accept_probs)  # refuses a bad profile before any simulation
    rows = []
    for b in sizes:
        requests = batch_requests(b, prompt_tokens, output_tokens)
        plain_s = simulate(requests, "continuous", cost, max_running=b).makespan_s
        spec_s = simulate_speculative(requests, accept_probs, cost, max_running=b, seed=seed).makespan_s
        rows.append({"batch": b, "plain (s)": plain_s, "speculative (s)": spec_s, "speed-up": plain_s / spec_s})
    return pd.DataFrame(rows).set_index("batch")
