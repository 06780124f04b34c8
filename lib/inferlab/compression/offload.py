"""Weight offloading (section 8.4.3): memory freed, bytes copied per step, the prefetch pipeline, compressed copies.

Offloaded FFN weights live in host memory and are copied into one of ``n_buffers`` device buffers
before their layer runs. Two ordering rules govern the pipeline: compute reads a buffer only after
its copy has completed, and a copy overwrites a buffer only after compute is done with its previous
contents. The link carries one copy at a time, in layer order, as early as these rules allow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import sympy as sp

from .._validate import fraction, non_negative, non_negative_int, positive, positive_int
from ..symbolic import solve_linear

# ---- capacity -------------------------------------------------------------------------------


def offloaded_layers(n_layers: int, every: int) -> list[int]:
    """Layer indices offloaded when one layer in every ``every`` is: every-1, 2*every-1, ... (9 of 36 for 4)."""
    positive_int("n_layers", n_layers)
    positive_int("every", every)
    return list(range(every - 1, n_layers, every))


@dataclass(frozen=True)
class OffloadPlan:
    """Offload ``n_offloaded`` copies of ``layer_bytes`` each, prefetching through ``n_buffers`` buffers (bytes)."""

    layer_bytes: float
    n_offloaded: int
    n_buffers: int

    def __post_init__(self) -> None:
        positive("layer_bytes", self.layer_bytes)
        non_negative_int("n_offloaded", self.n_offloaded)
        non_negative_int("n_buffers", self.n_buffers)
        if self.n_offloaded and not self.n_buffers:
            raise ValueError("n_buffers must be >= 1 when layers are offloaded")

    @property
    def freed_bytes(self) -> float:
        """Device memory the offloaded weights used to occupy (2592 MiB for 9 x 288 MiB)."""
        return self.n_offloaded * self.layer_bytes

    @property
    def buffer_bytes(self) -> float:
        """Device memory the prefetch buffers keep (one layer's weights each)."""
        return self.n_buffers * self.layer_bytes

    @property
    def net_bytes(self) -> float:
        """Freed minus buffers: what KV can use (2304 MiB with one buffer, 2016 MiB with two)."""
        return self.freed_bytes - self.buffer_bytes

    @property
    def copy_bytes_per_step(self) -> float:
        """Bytes the link carries per forward pass: every offloaded layer, every step."""
        return self.freed_bytes

    def extra_requests(self, kv_bytes_per_request: float) -> int:
        """Whole requests of ``kv_bytes_per_request`` that fit in the net space."""
        return max(int(self.net_bytes // positive("kv_bytes_per_request", kv_bytes_per_request)), 0)


# ---- copy time ------------------------------------------------------------------------------


def copy_time(n_bytes: float, link_bandwidth: float) -> float:
    """Lower bound on the time to move ``n_bytes`` over a link of ``link_bandwidth`` B/s (one direction), s."""
    return non_negative("n_bytes", n_bytes) / positive("link_bandwidth", link_bandwidth)


def throughput_ceiling(batch: int, step_s: float) -> float:
    """Output tokens/s when every step takes at least ``step_s`` and emits ``batch`` tokens."""
    return positive_int("batch", batch) / positive("step_s", step_s)


def min_link_bandwidth(bytes_per_step: float, steps: int, time_s: float) -> float:
    """Lowest one-direction bandwidth that moves ``steps`` x ``bytes_per_step`` within ``time_s``, B/s."""
    return non_negative("bytes_per_step", bytes_per_step) * positive_int("steps", steps) / positive("time_s", time_s)


# ---- compressed transfer ------------------------------------------------------------------


def compressed_transfer_time(n_bytes: float, ratio: float, link_bandwidth: float, decompress_rate: float) -> float:
    """Copy r x S bytes, then decompress S bytes at ``decompress_rate`` (output B/s): rS/B + S/R, seconds."""
    fraction("ratio", ratio)
    return copy_time(ratio * n_bytes, link_bandwidth) + non_negative("n_bytes", n_bytes) / positive(
        "decompress_rate", decompress_rate)


def decompress_threshold(ratio: float, link_bandwidth: float) -> float:
    """Decompression rate above which compressing first is faster: B_link / (1 - r), B/s."""
    if fraction("ratio", ratio) >= 1:
        raise ValueError("ratio must be < 1 (r = 1 means nothing is compressed)")
    return positive("link_bandwidth", link_bandwidth) / (1 - ratio)


def decompress_threshold_symbolic() -> tuple[sp.Expr, sp.Expr]:
    """(rho D/beta_link + D/R_dec < D/beta_link, the threshold R_dec = beta_link/(1 - rho) solved by sympy)."""
    D, r, B, R = sp.symbols(r"D \rho \beta_{\mathrm{link}} R_{\mathrm{dec}}", positive=True)
    ineq = sp.Lt(r * D / B + D / R, D / B)
    inv_R = sp.Dummy("inv_R", positive=True)  # the equation is linear in 1/R: one root
    solved = 1 / solve_linear(sp.Eq(ineq.lhs, ineq.rhs).subs(R, 1 / inv_R), inv_R)
    threshold = B / (1 - r)
    if sp.cancel(solved - threshold) != 0:  # pragma: no cover - guards the closed form below
        raise ArithmeticError("sympy's threshold differs from beta_link / (1 - rho)")
    return ineq, threshold


# ---- the prefetch pipeline ----------------------------------------------------------------


@dataclass(frozen=True)
class PipelineResult:
    """Timeline of a prefetch pipeline: one row per copy and per layer computed (seconds)."""

    events: pd.DataFrame
    n_steps: int
    compute_s: float

    @property
    def total_s(self) -> float:
        """End of the last layer's compute."""
        return float(self.events["end_s"].max())

    @property
    def step_s(self) -> float:
        """Time of one forward pass once the pipeline runs steadily (last step's duration)."""
        comp = self.events[self.events.kind == "compute"]
        ends = comp.groupby("step")["end_s"].max().to_numpy()
        return float(ends[-1] - (ends[-2] if len(ends) > 1 else 0.0))

    @property
    def stall_s(self) -> float:
        """Total time compute waited for copies."""
        return self.total_s - self.n_steps * self.compute_s


def simulate_prefetch(layer_compute_s: "float | np.ndarray", n_layers: int, offloaded: list[int], copy_s: float,
                      n_buffers: int, n_steps: int = 2) -> PipelineResult:
    """Schedule copy and compute per layer over ``n_steps`` forward passes with ``n_buffers`` buffers.

    Compute runs the layers in order. Offloaded layer k (counting across steps) uses buffer
    k mod n_buffers; its copy starts when the link is free and the buffer's previous layer has
    finished computing, and its compute starts when the copy has ended and the previous layer is done.
    """
    positive_int("n_layers", n_layers)
    positive_int("n_steps", n_steps)
    positive_int("n_buffers", n_buffers)
    positive("copy_s", copy_s)
    comp = np.broadcast_to(np.asarray(layer_compute_s, dtype=float), (n_layers,))
    if (comp <= 0).any() or not np.isfinite(comp).all():
        raise ValueError("layer_compute_s must be finite and > 0")
    off = set(offloaded)
    if any(not 0 <= i < n_layers for i in off):
        raise ValueError(f"offloaded must hold layer indices in [0, {n_layers})")

    rows: list[tuple] = []
    buffer_free = [0.0] * n_buffers
    link_free = 0.0
    t = 0.0
    k = 0
    for step in range(n_steps):
        for layer in range(n_layers):
            start = t
            if layer in off:
                buf = k % n_buffers
                c0 = max(link_free, buffer_free[buf])
                link_free = c0 + copy_s
                rows.append(("copy", step, layer, buf, c0, link_free))
                start = max(t, link_free)
            t = start + comp[layer]
            if layer in off:
                buffer_free[buf] = t
                k += 1
            rows.append(("compute", step, layer, buf if layer in off else -1, start, t))
    events = pd.DataFrame(rows, columns=["kind", "step", "layer", "buffer", "start_s", "end_s"])
    return PipelineResult(events, n_steps, float(comp.sum()))


def steady_step_time(layer_compute_s: float, n_layers: int, offloaded: list[int], copy_s: float,
                     n_buffers: int) -> float:
    """Per-step time of the prefetch pipeline after it settles (simulated over a few steps), s."""
    return simulate_prefetch(layer_compute_s, n_layers, offloaded, copy_s, n_buffers, n_steps=4).step_s
