"""Host-to-device copies (section 8.4.3): link bandwidth, pinned and pageable, and a prefetch pipeline.

``prefetch_forward`` runs a stack of layers whose weights live in host memory: each layer's
weights are copied into one of ``buffers`` device buffers on a copy stream while the compute
stream works on the previous layer. Three rules order it (``PipelineSync``): the copies start
only after the work already on the compute stream (a buffer handed out by the caching allocator
may still be read by the previous pass); compute reads a buffer only after its copy completed;
a copy overwrites a buffer only after the compute that read it completed. With one buffer,
copy and compute alternate; with two, they overlap and a pass takes about max(copies, computes)
instead of their sum.

The overlap is visible only if a layer's compute takes about as long as its copy: a 288 MiB
layer copies in about 5 ms over PCIe Gen5, while one token's product with it takes about 70 us.
``host_copy`` therefore measures the copy of one layer first and chooses the rows of the
activation (``match_rows``) so that one layer's product takes about as long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tqdm.auto import tqdm

from .._validate import positive, positive_int
from ..units import MiB
from .device import DeviceInfo, device_info
from .settings import Settings
from .timing import median_time


@dataclass(frozen=True)
class CopySizes:
    """Points of ``host_copy``: copy sizes; the prefetch stack (``layers`` of ``width`` x ``width``; ``rows`` None: matched)."""

    sizes: tuple[int, ...] = (16 * MiB, 256 * MiB)
    layers: int = 9
    width: int = 12288
    rows: int | None = None  # activation rows; None: as many as make a layer's compute take its copy's time
    max_rows: int = 65536


COPY_PRESETS = {
    "full": CopySizes((1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB), 9, 12288),
    "quick": CopySizes((16 * MiB, 256 * MiB), 9, 12288),
    "tiny": CopySizes((64 * 1024,), 4, 64, max_rows=4096),
}
COPY_COLUMNS = ("part", "kind", "buffers", "bytes", "rows", "time_s", "bandwidth_Bps", "copy_layer_s",
                "compute_layer_s", "predicted_s")
#: Bytes copied per timed repeat at least: small copies are repeated within one event pair.
COPY_BYTES_PER_TIMING = 64 * MiB


class PipelineSync:
    """The stream ordering of ``prefetch_forward`` (CUDA streams and events); every method is a no-op on the CPU."""

    def __init__(self, device: str, buffers: int, copy_stream: object | None = None) -> None:
        self.cuda = device == "cuda"
        if self.cuda:
            import torch

            self.compute = torch.cuda.current_stream()
            self.copy_stream = copy_stream or torch.cuda.Stream()
            self.ready = [torch.cuda.Event() for _ in range(buffers)]
            self.done = [torch.cuda.Event() for _ in range(buffers)]

    def begin(self) -> None:
        """Copies wait for all work already queued on the compute stream (earlier readers of reused memory)."""
        if self.cuda:
            self.copy_stream.wait_stream(self.compute)

    def copy(self, b: int, dst: "object", src: "object", reuse: bool) -> None:
        """Copy ``src`` into buffer ``b`` on the copy stream; when ``reuse``, after the compute that read it."""
        if not self.cuda:
            dst.copy_(src)
            return
        import torch

        with torch.cuda.stream(self.copy_stream):
            if reuse:
                self.copy_stream.wait_event(self.done[b])
            dst.copy_(src, non_blocking=True)
            self.ready[b].record(self.copy_stream)

    def before_compute(self, b: int) -> None:
        """The compute stream waits for buffer ``b``'s copy."""
        if self.cuda:
            self.compute.wait_event(self.ready[b])

    def after_compute(self, b: int) -> None:
        """Mark the compute that read buffer ``b`` (a later copy into ``b`` waits for it)."""
        if self.cuda:
            self.done[b].record(self.compute)

    def end(self) -> None:
        """The compute stream waits for every copy (nothing of this pass is left in flight on the copy stream)."""
        if self.cuda:
            self.compute.wait_stream(self.copy_stream)


def prefetch_forward(x: "torch.Tensor", host_weights: "list[torch.Tensor]", buffers: int = 2,  # noqa: F821
                     sync: PipelineSync | None = None) -> "torch.Tensor":  # noqa: F821
    """x @ W_0 @ W_1 ... with every W_i copied from the host into one of ``buffers`` device buffers just in time."""
    import torch

    positive_int("buffers", buffers)
    if not host_weights:
        raise ValueError("host_weights must hold at least one layer")
    n = min(buffers, len(host_weights))
    sync = sync or PipelineSync(x.device.type, n)
    bufs = [torch.empty_like(host_weights[0], device=x.device) for _ in range(n)]
    sync.begin()
    for i in range(n):
        sync.copy(i, bufs[i], host_weights[i], reuse=False)
    for i in range(len(host_weights)):
        b = i % n
        sync.before_compute(b)
        x = x @ bufs[b]
        sync.after_compute(b)
        if i + n < len(host_weights):
            sync.copy(b, bufs[b], host_weights[i + n], reuse=True)
    sync.end()
    return x


def match_rows(copy_s: float, compute_s: Callable[[int], float], start: int = 256, max_rows: int = 65536,
               multiple: int = 16) -> tuple[int, float]:
    """Rows whose compute takes about ``copy_s`` (``compute_s(rows)`` seconds), and that compute time.

    Two proportional steps from ``start`` rows (compute grows about linearly with rows once the
    product is compute-bound), rounded to ``multiple`` and kept in [multiple, max_rows].
    """
    positive("copy_s", copy_s)
    positive_int("max_rows", max_rows)
    rows, t = start, compute_s(start)
    for _ in range(2):
        want = rows * copy_s / max(t, 1e-12)
        new = int(min(max(round(want / multiple) * multiple, multiple), max_rows))
        if new == rows:
            break
        rows, t = new, compute_s(new)
    return rows, t


def host_buffer(size: int, pinned: bool, seed: int = 0) -> "torch.Tensor":  # noqa: F821
    """``size`` bytes of host memory (pinned or pageable), every page written with random bytes (no shared zero page).

    A ``torch.empty`` never written maps the kernel's zero page and copies faster than real data.
    One MiB of random bytes is drawn and tiled (drawing a GiB byte by byte takes seconds).
    """
    import torch

    positive_int("size", size)
    buf = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
    tile = torch.randint(0, 256, (min(size, MiB),), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    for start in range(0, size, tile.numel()):
        n = min(tile.numel(), size - start)
        buf[start:start + n].copy_(tile[:n])
    return buf


def host_copy(s: Settings, z: CopySizes = CopySizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Host-to-device copy time (s) and bandwidth, pinned and pageable; then a pass over ``z.layers`` host-resident
    ``width`` x ``width`` layers (288 MiB each in BF16 at 12288, one Qwen3-8B FFN) with 1 and 2 prefetch buffers,
    the activation sized so that a layer's compute takes about its copy's time."""
    import torch

    info = info or device_info(s.device, s.card)
    link = info.accelerator.host_link_bandwidth if info.accelerator else None
    kinds = ("pinned", "pageable") if s.device == "cuda" else ("pageable",)  # pinning needs a CUDA context
    dt = getattr(torch, s.dtype)
    for size, kind in tqdm([(n, k) for n in z.sizes for k in kinds], desc="host_copy", disable=not s.progress):
        src = host_buffer(size, kind == "pinned", s.seed)
        dst = torch.empty(size, dtype=torch.uint8, device=s.device)
        calls = max(1, min(16, COPY_BYTES_PER_TIMING // size))
        t = median_time(lambda: dst.copy_(src, non_blocking=kind == "pinned"), s.device, s.warmup, s.repeats,
                        calls=calls)
        yield dict(part="copy", kind=kind, buffers=0, bytes=size, time_s=t, bandwidth_Bps=size / t,
                   predicted_s=size / link if link else None, backend="copy")
        del src, dst
    g = torch.Generator(device=s.device).manual_seed(s.seed)
    pin = s.device == "cuda"
    resident = [torch.randn(z.width, z.width, device=s.device, dtype=dt, generator=g) / z.width**0.5
                for _ in range(z.layers)]
    host = [torch.empty(w.shape, dtype=dt, pin_memory=pin).copy_(w) for w in resident]
    layer_bytes = host[0].numel() * host[0].element_size()
    copy_layer_s = median_time(lambda: resident[0].copy_(host[0], non_blocking=pin), s.device, s.warmup, s.repeats)

    def chain(x: "torch.Tensor", weights: "list[torch.Tensor]") -> "torch.Tensor":  # noqa: F821
        for w in weights:
            x = x @ w
        return x

    def one_layer(rows: int) -> float:
        xr = torch.randn(rows, z.width, device=s.device, dtype=dt, generator=g)
        return median_time(lambda: xr @ resident[0], s.device, s.warmup, s.repeats)

    # activation and product of each layer, three alive at most in a pass: a tenth of the free memory
    fit = int(info.free_bytes * 0.1 // (3 * z.width * host[0].element_size()))
    max_rows = max(16, min(z.max_rows, fit))
    rows, compute_layer_s = ((z.rows, one_layer(z.rows)) if z.rows
                             else match_rows(copy_layer_s, one_layer, max_rows=max_rows))
    x = torch.randn(rows, z.width, device=s.device, dtype=dt, generator=g)
    fields = dict(part="prefetch", rows=rows, copy_layer_s=copy_layer_s, compute_layer_s=compute_layer_s,
                  backend="matmul")
    t_comp = median_time(lambda: chain(x, resident), s.device, s.warmup, s.repeats)
    yield dict(fields, kind="resident", buffers=0, bytes=0, time_s=t_comp)
    del resident
    copy_s = z.layers * layer_bytes / link if link else None
    copy_stream = PipelineSync(s.device, 1).copy_stream if pin else None  # one copy stream for every pass
    for buffers in tqdm((1, 2), desc="prefetch", disable=not s.progress):
        sync = PipelineSync(s.device, buffers, copy_stream)
        t = median_time(lambda: prefetch_forward(x, host, buffers, sync), s.device, s.warmup, s.repeats)
        pred = None if copy_s is None else (copy_s + t_comp if buffers == 1 else max(copy_s, t_comp))
        yield dict(fields, kind=f"{buffers} buffer{'s' if buffers > 1 else ''}", buffers=buffers,
                   bytes=z.layers * layer_bytes, time_s=t, bandwidth_Bps=z.layers * layer_bytes / t, predicted_s=pred)
