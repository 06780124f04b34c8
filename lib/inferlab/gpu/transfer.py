"""Host-to-device copies (section 8.4.3): link bandwidth, pinned and pageable, and a prefetch pipeline.

``prefetch_forward`` runs a stack of layers whose weights live in host memory: each layer's
weights are copied into one of ``buffers`` device buffers on a copy stream while the compute
stream works on the previous layer. Two rules order it (as the chapter states them): compute
reads a buffer only after its copy completed; a copy overwrites a buffer only after the
compute that read it completed. With one buffer, copy and compute alternate; with two, they
overlap and a pass takes about max(copies, computes) instead of their sum.
"""

from __future__ import annotations

import pandas as pd
from tqdm.auto import tqdm

from .._validate import positive_int
from ..units import MiB
from .device import device_info, median_time

COPY_PRESETS = {
    "full": dict(sizes=(1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB), layers=9, width=12288, rows=1, repeats=10),
    "quick": dict(sizes=(16 * MiB, 256 * MiB), layers=9, width=12288, rows=1, repeats=5),
    "tiny": dict(sizes=(64 * 1024,), layers=4, width=64, rows=3, repeats=1, dtype="float32"),
}


def prefetch_forward(x: "torch.Tensor", host_weights: "list[torch.Tensor]", buffers: int = 2) -> "torch.Tensor":  # noqa: F821
    """x @ W_0 @ W_1 ... with every W_i copied from the host into one of ``buffers`` device buffers just in time."""
    import torch

    positive_int("buffers", buffers)
    if not host_weights:
        raise ValueError("host_weights must hold at least one layer")
    cuda = x.device.type == "cuda"
    copy_stream = torch.cuda.Stream() if cuda else None
    compute = torch.cuda.current_stream() if cuda else None
    n = min(buffers, len(host_weights))
    bufs = [torch.empty_like(host_weights[0], device=x.device) for _ in range(n)]
    ready = [torch.cuda.Event() if cuda else None for _ in range(n)]
    done = [torch.cuda.Event() if cuda else None for _ in range(n)]

    def issue(i: int) -> None:
        b = i % n
        if cuda:
            with torch.cuda.stream(copy_stream):
                if i >= n:
                    copy_stream.wait_event(done[b])  # the compute that read this buffer has finished
                bufs[b].copy_(host_weights[i], non_blocking=True)
                ready[b].record(copy_stream)
        else:
            bufs[b].copy_(host_weights[i])

    for i in range(n):
        issue(i)
    for i in range(len(host_weights)):
        b = i % n
        if cuda:
            compute.wait_event(ready[b])  # the copy into this buffer has finished
        x = x @ bufs[b]
        if cuda:
            done[b].record(compute)
        if i + n < len(host_weights):
            issue(i + n)
    return x


def host_copy(sizes: tuple[int, ...] = (16 * MiB, 256 * MiB), layers: int = 9, width: int = 12288, rows: int = 1,
              device: str = "cuda", card: str | None = None, dtype: str = "bfloat16", warmup: int = 2,
              repeats: int = 5, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Host-to-device copy time (s) and bandwidth, pinned and pageable; then a pass over ``layers`` host-resident
    ``width`` x ``width`` layers (288 MiB each in BF16 at 12288, one Qwen3-8B FFN) with 1 and 2 prefetch buffers."""
    import torch

    info = device_info(device, card)
    link = info.accelerator.host_link_bandwidth if info.accelerator else None
    kinds = ("pinned", "pageable") if device == "cuda" else ("pageable",)  # pinning needs a CUDA context
    dt = getattr(torch, dtype)
    out = []
    for size, kind in tqdm([(s, k) for s in sizes for k in kinds], desc="host_copy", disable=not progress):
        src = torch.empty(size, dtype=torch.uint8, pin_memory=kind == "pinned")
        dst = torch.empty(size, dtype=torch.uint8, device=device)
        t = median_time(lambda: dst.copy_(src, non_blocking=kind == "pinned"), device, warmup, repeats)
        out.append(dict(part="copy", kind=kind, buffers=0, bytes=size, time_s=t, bandwidth_Bps=size / t,
                        predicted_s=size / link if link else None))
        del src, dst
    g = torch.Generator().manual_seed(seed)
    pin = device == "cuda"
    host = [(torch.randn(width, width, generator=g) / width**0.5).to(dt).pin_memory() if pin else
            (torch.randn(width, width, generator=g) / width**0.5).to(dt) for _ in range(layers)]
    x = torch.randn(rows, width, generator=g).to(device, dt)
    resident = [w.to(device) for w in host]
    layer_bytes = host[0].numel() * host[0].element_size()
    t_comp = median_time(lambda: [x @ w for w in resident], device, warmup, repeats)
    out.append(dict(part="prefetch", kind="resident", buffers=0, bytes=0, time_s=t_comp, bandwidth_Bps=None,
                    predicted_s=None))
    copy_s = layers * layer_bytes / link if link else None
    for buffers in tqdm((1, 2), desc="prefetch", disable=not progress):
        t = median_time(lambda: prefetch_forward(x, host, buffers), device, warmup, repeats)
        pred = None if copy_s is None else (copy_s + t_comp if buffers == 1 else max(copy_s, t_comp))
        out.append(dict(part="prefetch", kind=f"{buffers} buffer{'s' if buffers > 1 else ''}", buffers=buffers,
                        bytes=layers * layer_bytes, time_s=t, bandwidth_Bps=layers * layer_bytes / t, predicted_s=pred))
    return pd.DataFrame(out)
