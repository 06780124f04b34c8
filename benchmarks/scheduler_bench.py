"""Scheduler benchmark: requests simulated per second per policy, the time for 10^6 requests, old vs new.

Run: `.venv/bin/python benchmarks/scheduler_bench.py [--requests N] [--million N] [--seed S] [--no-reference]`.
The trace is synthetic and seeded: Poisson arrivals at 8 requests/s, prompts uniform in
256..4096 tokens, outputs uniform in 16..256 tokens; up to 64 running requests, the fitted
cost of section 8.2.2, a 8192-token budget with 2048-token chunks for 'chunked'. Times are
wall-clock and CPU time of this process, best of 3, each including one ``RequestTimes`` per request;
on a shared machine wall times vary from run to run, CPU times less. "old" is the pre-rewrite loop kept in tests/_reference_scheduler.py
(one run per policy); "any CostFn" is the general per-item engine (the same cost as a plain callable). The
whole Azure conversation trace (19,366 real requests, ``inferlab.serving.azure_conv``) runs under every policy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from inferlab.scheduling import FITTED_COST, Request, simulate
from inferlab.serving import azure_conv, trace_window

ROOT = Path(__file__).resolve().parents[1]
POLICIES = [("fixed", {}), ("continuous", {}), ("chunked", {"token_budget": 8192, "chunk_tokens": 2048})]
MAX_RUNNING = 64


def trace(n: int, seed: int, rate_per_s: float = 8.0) -> list[Request]:
    """A seeded synthetic trace of ``n`` requests."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate_per_s, n)).tolist()
    prompts = rng.integers(256, 4097, n).tolist()
    outputs = rng.integers(16, 257, n).tolist()
    return [Request(f"q{i}", a, p, g) for i, (a, p, g) in enumerate(zip(arrivals, prompts, outputs))]


def best_of(repeats: int, fn):  # noqa: ANN001, ANN201
    """Smallest wall time and smallest CPU time (this process) of ``repeats`` calls of ``fn``, and the last result."""
    wall = cpu = float("inf")
    out = None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--million", type=int, default=1_000_000, help="requests of the long run (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-reference", action="store_true", help="skip the old-vs-new comparison")
    args = parser.parse_args()
    requests = trace(args.requests, args.seed)
    print(f"trace: {len(requests):,} requests, {sum(r.output_tokens for r in requests):,} output tokens, "
          f"seed {args.seed}; shared machine, best of 3")
    news = {}
    for policy, kwargs in POLICIES:
        wall, cpu, s = best_of(3, lambda: simulate(requests, policy, FITTED_COST, MAX_RUNNING, **kwargs))  # noqa: B023
        news[policy] = cpu
        print(f"{policy:>10}: {len(requests) / wall:9,.0f} requests/s simulated ({wall:5.2f} s wall, {cpu:5.2f} s CPU, "
              f"{len(s.iterations):,} iterations, simulated makespan {s.makespan_s:,.0f} s, "
              f"max ITL {s.max_itl_s * 1e3:,.0f} ms)", flush=True)

    if not args.no_reference:
        sys.path.insert(0, str(ROOT / "tests"))
        from _reference_scheduler import simulate_reference

        print("old (the pre-rewrite loop, one run) against new (best of 3), same trace, CPU seconds of this process:")
        for policy, kwargs in POLICIES:
            _, old, ref = best_of(1, lambda: simulate_reference(requests, policy, FITTED_COST, MAX_RUNNING,  # noqa: B023
                                                                **kwargs))
            s = simulate(requests, policy, FITTED_COST, MAX_RUNNING, **kwargs)
            same = all(s.times[n].token_times_s.tolist() == list(t) for n, t in ref.token_times_s.items())
            print(f"{policy:>10}: old {old:5.2f} s, new {news[policy]:5.2f} s: {old / news[policy]:5.1f}x faster; "
                  f"bit-identical token times: {same}", flush=True)
        wall, cpu, s = best_of(1, lambda: simulate(requests, "continuous", lambda w: FITTED_COST(w), MAX_RUNNING))
        print(f"general engine (any CostFn; the fitted cost as a plain callable), continuous: {wall:5.2f} s wall, "
              f"{cpu:5.2f} s CPU ({len(requests) / wall:,.0f} requests/s)", flush=True)

    azure = trace_window(azure_conv())
    print(f"the Azure conversation trace (2023): {len(azure):,} requests over {azure[-1].arrival_s:,.0f} s, "
          "every policy, best of 3:")
    for policy, kwargs in POLICIES:
        wall, cpu, s = best_of(3, lambda: simulate(azure, policy, FITTED_COST, MAX_RUNNING, **kwargs))  # noqa: B023
        print(f"{policy:>10}: {len(azure) / wall:9,.0f} requests/s simulated ({wall:5.2f} s wall, {cpu:5.2f} s CPU, "
              f"{len(s.iterations):,} iterations, max ITL {s.max_itl_s * 1e3:,.0f} ms)", flush=True)

    if args.million:
        t0 = time.perf_counter()
        big = trace(args.million, args.seed)
        built = time.perf_counter() - t0
        wall, cpu, s = best_of(1, lambda: simulate(big, "continuous", FITTED_COST, MAX_RUNNING))
        print(f"{args.million:,} requests, continuous: {wall:5.1f} s wall, {cpu:5.1f} s CPU "
              f"({args.million / wall:,.0f} requests/s, {len(s.iterations):,} iterations; "
              f"building the trace took {built:.1f} s)")


if __name__ == "__main__":
    main()
