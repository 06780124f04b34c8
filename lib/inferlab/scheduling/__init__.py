"""Scheduling (section 8.2): who runs in each iteration, and what the iteration costs.

- ``request``: a request as the schedulers see it; ``admission``: who may start beyond the slot limit;
- ``limits``: what one iteration may hold (running requests, tokens, a prompt piece);
- ``iteration``: one iteration's work and its cost (the fitted linear model, a roofline model);
- ``chunking``: chunked-prefill arithmetic; ``shapes``: CUDA-graph shape buckets;
- ``simulator``: ``simulate`` with the three policies, run by one of two engines: ``events`` (event-driven,
  for costs that depend only on the work's totals) or ``plans`` (explicit work items, any cost or plan);
  ``log``: the compact iteration log both engines write.
"""

from .admission import Admission, KVBlockLimit, NoLimit
from .chunking import PIECE_SIZES, piece_size_sweep
from .iteration import FITTED_COST, CostFn, IterationCost, RooflineCost, TotalsCost, Work
from .limits import Limits
from .log import Iteration, IterationLog
from .plans import POLICIES, Engine, Live, Plan, PlanFn
from .request import Request
from .simulator import (EXAMPLE_CHUNK_TOKENS, EXAMPLE_MAX_RUNNING, EXAMPLE_TOKEN_BUDGET, REPLAY_INTERVAL_S,
                        REPLAY_OUTPUT_TOKENS, REPLAY_PROMPT_TOKENS, SWEEP_CHUNK_TOKENS, SWEEP_TOKEN_BUDGET, Schedule,
                        Served, batch_requests, budget_sweep, budget_within_gap, example_requests,
                        quickest_admission_budget, replay_batch_sweep, replay_requests, run_example, simulate)

__all__ = [
    "Admission", "KVBlockLimit", "NoLimit", "FITTED_COST", "CostFn", "IterationCost", "RooflineCost", "TotalsCost",
    "Work", "Limits", "Iteration", "IterationLog", "POLICIES", "Engine", "Live", "Plan", "PlanFn", "Request",
    "Schedule", "Served",
    "simulate", "run_example", "example_requests", "replay_requests", "batch_requests", "budget_sweep",
    "budget_within_gap", "quickest_admission_budget", "piece_size_sweep", "PIECE_SIZES", "EXAMPLE_CHUNK_TOKENS",
    "EXAMPLE_MAX_RUNNING",
    "EXAMPLE_TOKEN_BUDGET", "REPLAY_INTERVAL_S", "REPLAY_OUTPUT_TOKENS", "REPLAY_PROMPT_TOKENS",
    "replay_batch_sweep", "SWEEP_TOKEN_BUDGET", "SWEEP_CHUNK_TOKENS",
]
