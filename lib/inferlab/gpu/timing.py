"""Timing on the device: CUDA events around CUDA-graph replays (or N calls), the L2 cache flushed between repeats.

A microbenchmark that brackets one eager call with an event pair times the host: one layer's
decode attention at batch 16 and 1K context reads its KV in about 16 us, while launching its
kernels from Python takes 20-40 us, so the GPU waits for the CPU inside the timed window.
``median_time`` therefore times either a CUDA graph holding ``calls`` calls (one launch, issued
while the flush before it still runs) or ``calls`` eager calls per event pair, and before every
repeat overwrites the L2 cache (``L2Flush``: a buffer of twice its size is written, then read,
so no line of the last repeat's data is left and no dirty line of the flush is written back
inside the timed window). On the CPU it uses ``time.perf_counter`` around the same ``calls``
calls (CPU runs prove the code; their times mean nothing for the chapter).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from .._validate import positive_int

#: Flush buffer when the device does not report its L2 size (H100 and H200: 50 MB).
DEFAULT_L2_BYTES = 50 * 2**20


class L2Flush:
    """Callable that evicts the device's L2 cache: writes, then reads, a buffer of twice its size (no-op on the CPU)."""

    def __init__(self, device: str = "cuda") -> None:
        self.device = device
        self.buffer = None
        if device == "cuda":
            import torch

            l2 = int(getattr(torch.cuda.get_device_properties(), "L2_cache_size", 0) or DEFAULT_L2_BYTES)
            self.buffer = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    @property
    def nbytes(self) -> int:
        """Bytes written and read per flush (0 on the CPU)."""
        return 0 if self.buffer is None else self.buffer.numel()

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.fill_(1)  # every line of L2 now holds the buffer, dirty ...
            self.buffer.max()  # ... and after reading it again, clean: nothing to write back later


def repeated(fn: Callable[[], object], calls: int) -> Callable[[], object]:
    """``fn`` called ``calls`` times (results dropped as they come); ``fn`` itself for one call."""
    positive_int("calls", calls)
    if calls == 1:
        return fn

    def run() -> None:
        for _ in range(calls):
            fn()

    return run


def graphed(fn: Callable[[], object], device: str = "cuda", calls: int = 1) -> Callable[[], object]:
    """``calls`` calls of ``fn`` captured in one CUDA graph (replayed by the returned callable); on the CPU, the calls."""
    positive_int("calls", calls)
    if device != "cuda":
        return repeated(fn, calls)
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm up allocator and kernels outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def median_time(fn: Callable[[], object], device: str = "cuda", warmup: int = 3, repeats: int = 10, *,
                calls: int = 1, graph: bool = False, flush: L2Flush | bool = False) -> float:
    """Median seconds of one ``fn()`` over ``repeats`` timed runs of ``calls`` calls each, after ``warmup`` calls.

    On CUDA: ``graph`` times replays of a CUDA graph holding the ``calls`` calls (no host time
    inside); otherwise the ``calls`` calls are launched eagerly between one event pair. ``flush``
    (True, or an ``L2Flush`` to reuse its buffer) evicts L2 before each repeat, outside the
    timed window. On the CPU: ``time.perf_counter`` around the calls; ``graph`` and ``flush`` do nothing.
    """
    positive_int("repeats", repeats)
    positive_int("calls", calls)
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    for _ in range(warmup):
        fn()
    if device != "cuda":
        run = repeated(fn, calls)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) / calls)
        return float(statistics.median(times))
    import torch

    run = graphed(fn, device, calls) if graph else repeated(fn, calls)
    flusher = (L2Flush(device) if flush is True else flush) or None
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    torch.cuda.synchronize()
    for start, end in events:  # no sync between repeats: the host stays ahead of the GPU
        if flusher is not None:
            flusher()
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return float(statistics.median(start.elapsed_time(end) / 1e3 / calls for start, end in events))
