"""Scheduler benchmark: simulate a 10,000-request trace per policy and print requests simulated per second.

Run: `.venv/bin/python benchmarks/scheduler_bench.py [--requests N] [--seed S]`. The trace is
synthetic and seeded: Poisson arrivals at 8 requests/s, prompts uniform in 256..4096 tokens,
outputs uniform in 16..256 tokens; up to 64 running requests, the fitted cost of section 8.2.2,
a 8192-token budget with 2048-token chunks for 'chunked'. The simulator's cost is linear in the
work simulated (iterations x running requests), so the rate should not fall as the trace grows.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from inferlab.scheduler import Request, simulate


def trace(n: int, seed: int, rate_per_s: float = 8.0) -> list[Request]:
    """A seeded synthetic trace of ``n`` requests."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate_per_s, n))
    prompts = rng.integers(256, 4097, n)
    outputs = rng.integers(16, 257, n)
    return [Request(f"q{i}", float(a), int(p), int(g)) for i, (a, p, g) in enumerate(zip(arrivals, prompts, outputs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    requests = trace(args.requests, args.seed)
    work_tokens = sum(r.output_tokens for r in requests)
    print(f"trace: {len(requests):,} requests, {work_tokens:,} output tokens, seed {args.seed}")
    for policy, kwargs in [("fixed", {}), ("continuous", {}),
                           ("chunked", {"token_budget": 8192, "chunk_tokens": 2048})]:
        t0 = time.perf_counter()
        s = simulate(requests, policy, max_running=64, **kwargs)
        wall = time.perf_counter() - t0
        print(f"{policy:>10}: {len(requests) / wall:9,.0f} requests/s simulated "
              f"({wall:5.2f} s wall, {len(s.iterations):,} iterations, "
              f"simulated makespan {s.makespan_s:,.0f} s, max ITL {s.max_itl_s * 1e3:,.0f} ms)")


if __name__ == "__main__":
    main()
