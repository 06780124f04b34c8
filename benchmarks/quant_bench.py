"""Quantization benchmark: our q8_0/q4_0/q2_K encode and decode against the ``gguf`` package's numpy code.

Run: `.venv/bin/python benchmarks/quant_bench.py [--rows R] [--cols C] [--repeats N]`. Both sides get
the same float32 matrix (default 1024 x 4096, weights ~ N(0, 0.02), seed 0) and the same encoded
bytes; each timing is the best of N runs, reported in millions of values per second, with the ratio
ours / gguf. The outputs are checked to be identical before anything is timed (gguf has no q2_K
encoder, so that row has no ratio). Run it on an idle machine; a shared one lowers both sides.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from inferlab.compression import formats


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import gguf
    from gguf import GGMLQuantizationType as T

    x = (np.random.default_rng(0).standard_normal((args.rows, args.cols)) * 0.02).astype(np.float32)
    n = x.size
    types = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q2_K": T.Q2_K}
    print(f"{n:,} values ({args.rows} x {args.cols} float32), best of {args.repeats}, M values/s")
    print(f"{'format':6s} {'direction':10s} {'ours':>9s} {'gguf':>9s} {'ratio':>7s}")
    for fmt, t in types.items():
        ours_bytes = formats.quantize(x, fmt)
        has_encoder = fmt != "q2_K"
        if has_encoder:
            assert np.array_equal(ours_bytes, gguf.quantize(x, t)), fmt
        assert np.array_equal(formats.dequantize(ours_bytes, fmt), gguf.dequantize(ours_bytes, t)), fmt
        rows = [("encode", lambda: formats.quantize(x, fmt), (lambda: gguf.quantize(x, t)) if has_encoder else None),
                ("decode", lambda: formats.dequantize(ours_bytes, fmt), lambda: gguf.dequantize(ours_bytes, t))]
        for direction, ours, theirs in rows:
            r_ours = n / best_of(ours, args.repeats) / 1e6
            if theirs is None:
                print(f"{fmt:6s} {direction:10s} {r_ours:9.1f} {'n/a':>9s} {'n/a':>7s}", flush=True)
                continue
            r_theirs = n / best_of(theirs, args.repeats) / 1e6
            print(f"{fmt:6s} {direction:10s} {r_ours:9.1f} {r_theirs:9.1f} {r_ours / r_theirs:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
