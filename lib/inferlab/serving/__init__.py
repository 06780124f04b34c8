"""Serving under load (section 8.6): arrivals and admission, goodput, and choosing a configuration.

- ``configs``: configurations as data, evaluated for memory, time and cost per good result (A-E);
- ``rates``: measured processing rates r_P, r_D and GPU-seconds per request; the efficiency table;
- ``load``: a stream of requests through the scheduler with admission control and cancellation;
- ``sweep``: our stand-in for the chapter's goodput experiment (retrieval questions, 3 s deadline);
- ``metrics``: completion throughput, goodput, Little's law, percentiles, Amdahl's law;
- ``traces``: a real production trace (Azure's conversation service, 2023) and its Poisson twin.
"""

from .configs import (CHAPTER_CONFIGS, CHAPTER_WORKLOAD, KV_FORMAT_RATIO, MEASURED_ON, STEP_SOURCES, RoundBreakdown,
                      ServingConfig, Workload, evaluate, evaluate_configs, feasible, prefix_fetch_time,
                      read_bound_rounds, round_breakdown, tokens_per_round_needed)
from .load import SERVING_POLICIES, EngineSetup, ServingPolicy, poisson_requests, serve, trace_requests
from .metrics import (CHAPTER_POLICY_NAMES, amdahl_derivation, amdahl_speedup, beside_published, clock_comparison,
                      completion_and_goodput, in_system_curve, little_n, mean_in_system, observation_window,
                      request_outcomes, summarize_served, task_time, time_average_in_system, window_counts,
                      window_medians)
from .rates import decode_rate, efficiency_table, gpu_seconds, prefill_rate, shared_batch_rates
from .sweep import (ANSWER_TOKENS, TASK_PROMPT_TOKENS, WRONG_TASK, goodput_at, goodput_sweep, goodput_windows, load_table,
                    retrieval_window, served_windows, stream_length_table)
from .traces import AZURE_CONV, azure_conv, dispersion, mean_rate, poisson_twin, trace_comparison, trace_window

__all__ = [
    "CHAPTER_CONFIGS", "CHAPTER_WORKLOAD", "KV_FORMAT_RATIO", "MEASURED_ON", "STEP_SOURCES", "ServingConfig", "Workload",
    "RoundBreakdown", "round_breakdown", "read_bound_rounds", "evaluate", "evaluate_configs", "feasible", "prefix_fetch_time",
    "tokens_per_round_needed",
    "SERVING_POLICIES", "EngineSetup", "ServingPolicy", "poisson_requests", "serve", "trace_requests",
    "amdahl_derivation", "amdahl_speedup", "completion_and_goodput", "in_system_curve", "little_n", "mean_in_system",
    "observation_window", "summarize_served", "task_time", "time_average_in_system",
    "CHAPTER_POLICY_NAMES", "beside_published", "clock_comparison", "request_outcomes", "window_counts", "window_medians",
    "decode_rate", "efficiency_table", "gpu_seconds", "prefill_rate", "shared_batch_rates",
    "ANSWER_TOKENS", "TASK_PROMPT_TOKENS", "WRONG_TASK", "goodput_at", "goodput_sweep", "goodput_windows", "load_table",
    "retrieval_window", "served_windows", "stream_length_table",
    "AZURE_CONV", "azure_conv", "dispersion", "mean_rate", "poisson_twin", "trace_comparison", "trace_window",
]
