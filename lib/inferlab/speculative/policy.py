"""Speculative decoding inside the iteration-level scheduler: each decode verifies m + 1 positions and emits N tokens.

The plan is continuous batching (``scheduling.plans.plan_continuous``) with every decode item replaced by a
verification item: ``new_tokens`` = m + 1 rows after the same cached tokens, ``emits`` = N drawn
from the round distribution P(N = n) of ``cost.tokens_distribution`` (rounds
independent, seeded), capped at the tokens the request still needs. Any ``CostFn`` prices the
iteration, so a roofline cost shows the extra rows turning into time once a batch is compute-bound
(Chapter 8, section 8.5.4). Drafting time is not modelled here (a lookup's 0.1 ms is negligible).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .._validate import generator, instance
from ..scheduling.iteration import CostFn, Work
from ..scheduling.plans import Engine, Plan, PlanFn, plan_continuous
from ..scheduling.simulator import Request, Schedule, simulate
from .cost import tokens_distribution

__all__ = ["speculative_plan", "simulate_speculative"]


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
