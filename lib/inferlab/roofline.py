"""Why batching pays: weight reads shared by a batch, KV reads that are not, and the step-time roofline.

One decode step of b requests, each with L context tokens and k KV bytes per token, reads the
matrix weights once (D_w) and every request's own KV: D(b, L) = D_w + b*L*k bytes, so each
output token costs d(b, L) = D_w/b + L*k bytes (Chapter 8, section 8.2.1). The step takes at
least max(b*F/P, D(b, L)/beta): compute at P FLOP/s (times MFU) or reads at beta bytes/s
(times MBU), whichever is slower; a measured step adds a fixed per-step cost T_ovh on top.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from ._validate import (MAX_COUNT, finite_result, flag, instance, items, non_negative, non_negative_int, positive,
                        positive_int)
from .hardware import Accelerator
from .models import ModelSpec

if TYPE_CHECKING:
    import pandas as pd


def efficiency(name: str, value: float) -> float:
    """Return an efficiency (MFU or MBU, a fraction of a peak) if it lies in (0, 1]; else ValueError naming ``name``."""
    instance("name", name, str)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")
    return float(value)


# ---- bytes ---------------------------------------------------------------------------------
def weight_intensity(batch: int, weight_element_bytes: float = 2) -> float:
    """FLOP per byte of weight read when ``batch`` rows share each weight: 2b / s_w."""
    return finite_result(2 * positive_int("batch", batch) / positive("weight_element_bytes", weight_element_bytes),
                         "batch", "weight_element_bytes")


def step_read_bytes(batch: int, context_tokens: int, matrix_weight_bytes: float, kv_bytes_per_token: float) -> float:
    """Bytes one decode step reads: D(b, L) = D_w + b*L*k (weights once, KV per request)."""
    positive_int("batch", batch)
    non_negative_int("context_tokens", context_tokens)
    non_negative("matrix_weight_bytes", matrix_weight_bytes)
    non_negative("kv_bytes_per_token", kv_bytes_per_token)
    return finite_result(matrix_weight_bytes + batch * context_tokens * kv_bytes_per_token, "batch", "context_tokens",
                         "matrix_weight_bytes", "kv_bytes_per_token")


def bytes_per_output_token(
    batch: int, context_tokens: int, matrix_weight_bytes: float, kv_bytes_per_token: float
) -> float:
    """Bytes read per output token: d(b, L) = D_w/b + L*k."""
    return step_read_bytes(batch, context_tokens, matrix_weight_bytes, kv_bytes_per_token) / batch


def hbm_bytes_per_output_token(
    batch: int, weight_bytes: float, kv_bytes: float, separate_weight_store: bool = False
) -> float:
    """HBM bytes per output token: W/B + K, or only K when weights come from a separate fast store."""
    positive_int("batch", batch)
    non_negative("weight_bytes", weight_bytes)
    non_negative("kv_bytes", kv_bytes)
    return kv_bytes if flag("separate_weight_store", separate_weight_store) else finite_result(
        weight_bytes / batch + kv_bytes, "weight_bytes", "kv_bytes")


def b_kv(matrix_weight_bytes: float, context_tokens: int, kv_bytes_per_token: float) -> int:
    """Smallest batch whose KV reads reach the shared weight reads: ceil(D_w / (L*k))."""
    positive("matrix_weight_bytes", matrix_weight_bytes)
    positive_int("context_tokens", context_tokens)
    positive("kv_bytes_per_token", kv_bytes_per_token)
    ratio = finite_result(matrix_weight_bytes / (context_tokens * kv_bytes_per_token), "matrix_weight_bytes",
                          "context_tokens", "kv_bytes_per_token")
    return max(1, math.ceil(ratio))


def resident_bytes(batch: int, context_tokens: int, weight_bytes: float, kv_bytes_per_token: float) -> float:
    """Bytes held at once by the weights and ``batch`` requests' KV of ``context_tokens`` each."""
    positive_int("batch", batch)
    non_negative_int("context_tokens", context_tokens)
    return finite_result(non_negative("weight_bytes", weight_bytes) + batch * context_tokens * non_negative(
        "kv_bytes_per_token", kv_bytes_per_token), "batch", "context_tokens", "weight_bytes", "kv_bytes_per_token")


# ---- time ----------------------------------------------------------------------------------
def step_time(
    batch: int,
    flops_per_request: float,
    context_tokens: int,
    matrix_weight_bytes: float,
    kv_bytes_per_token: float,
    peak_flops: float,
    bandwidth: float,
    mfu: float = 1.0,
    mbu: float = 1.0,
    separate_weight_store: bool = False,
    overhead_s: float = 0.0,
) -> float:
    """Seconds per step: max(b*F/(P*MFU), (D_w + b*L*k)/(beta*MBU)) + overhead_s; D_w leaves HBM with a separate store."""
    positive_int("batch", batch)
    non_negative("overhead_s", overhead_s)
    non_negative("flops_per_request", flops_per_request)
    positive("peak_flops", peak_flops)
    positive("bandwidth", bandwidth)
    efficiency("mfu", mfu), efficiency("mbu", mbu)
    weights = 0.0 if flag("separate_weight_store", separate_weight_store) else matrix_weight_bytes
    read = step_read_bytes(batch, context_tokens, weights, kv_bytes_per_token)
    seconds = max(batch * flops_per_request / (peak_flops * mfu), read / (bandwidth * mbu)) + overhead_s
    return finite_result(seconds, "batch", "flops_per_request", "kv_bytes_per_token", "peak_flops", "bandwidth", "mfu",
                         "mbu", "overhead_s")


def fixed_step_cost(measured_step_s: float, batch: int, context_tokens: int, matrix_weight_bytes: float,
                    kv_bytes_per_token: float, bandwidth: float) -> float:
    """Seconds of a measured decode step not explained by its reads at peak bandwidth: T - D(b, L)/beta."""
    read_s = step_read_bytes(batch, context_tokens, matrix_weight_bytes, kv_bytes_per_token) / positive(
        "bandwidth", bandwidth)
    extra = positive("measured_step_s", measured_step_s) - read_s
    if extra < 0:
        raise ValueError(f"measured_step_s ({measured_step_s}) must be at least the read time at peak ({read_s}) that "
                         "batch, context_tokens, matrix_weight_bytes, kv_bytes_per_token and bandwidth give")
    return extra


def step_mfu(batch: int, flops_per_request: float, step_s: float, peak_flops: float) -> float:
    """Compute utilization of one step: b*F / (P*T), the share of peak FLOP/s the step achieves."""
    done = positive_int("batch", batch) * non_negative("flops_per_request", flops_per_request)
    peak = positive("peak_flops", peak_flops) * positive("step_s", step_s)  # may underflow to 0
    return finite_result(done / peak if peak else math.inf, "batch", "flops_per_request", "step_s", "peak_flops")


def compute_memory_crossover(
    flops_per_request: float,
    context_tokens: int,
    matrix_weight_bytes: float,
    kv_bytes_per_token: float,
    peak_flops: float,
    bandwidth: float,
    mfu: float = 1.0,
    mbu: float = 1.0,
) -> float:
    """Batch at which compute time catches up with read time: (D_w/beta) / (F/P - L*k/beta); inf if never.

    With no shared weight reads (``matrix_weight_bytes`` = 0, e.g. weights served from a separate
    store) both times grow linearly in b, so there is no crossover in batch: the result is inf and
    the crossover to look for is in context length (``context_crossover``).
    """
    positive("peak_flops", peak_flops)
    positive("bandwidth", bandwidth)
    efficiency("mfu", mfu), efficiency("mbu", mbu)
    per_request_compute = non_negative("flops_per_request", flops_per_request) / (peak_flops * mfu)
    per_request_read = non_negative_int("context_tokens", context_tokens) * non_negative(
        "kv_bytes_per_token", kv_bytes_per_token
    ) / (bandwidth * mbu)
    weights = non_negative("matrix_weight_bytes", matrix_weight_bytes) / (bandwidth * mbu)
    if weights == 0 or per_request_compute <= per_request_read:
        return math.inf
    return weights / (per_request_compute - per_request_read)


def context_crossover(
    flops_at_zero_context: float,
    flops_per_context_token: float,
    kv_bytes_per_token: float,
    peak_flops: float,
    bandwidth: float,
    mfu: float = 1.0,
    mbu: float = 1.0,
) -> float:
    """Context L* (tokens) where one request's compute F(L)/P equals its KV reads L*k/beta, F(L) = F_0 + F_1*L; inf if never.

    Below L* each added request adds more compute than reads; above it, more reads. With weights
    in a separate store this decides whether a decode step is compute- or memory-bound at any batch.
    """
    f0 = non_negative("flops_at_zero_context", flops_at_zero_context)
    slope = non_negative("flops_per_context_token", flops_per_context_token)
    k = positive("kv_bytes_per_token", kv_bytes_per_token)
    p = positive("peak_flops", peak_flops) * efficiency("mfu", mfu)
    beta = positive("bandwidth", bandwidth) * efficiency("mbu", mbu)
    net = k / beta - slope / p
    return math.inf if net <= 0 else (f0 / p) / net


def decode_context_crossover(model: ModelSpec, accelerator: Accelerator, mfu: float = 1.0, mbu: float = 1.0,
                             dtype_bytes: float = 2) -> float:
    """``context_crossover`` for one decode token of ``model`` on ``accelerator`` (tokens; inf if never)."""
    instance("accelerator", accelerator, Accelerator)
    f0 = decode_flops_per_request(model, 0)
    slope = decode_flops_per_request(model, 1) - f0
    return context_crossover(f0, slope, model.kv_bytes_per_token(dtype_bytes), accelerator.peak_bf16_flops,
                             accelerator.hbm_bandwidth, mfu, mbu)


def decode_crossover_table(model: ModelSpec, accelerator: Accelerator, contexts: Iterable[int], mfu: float = 1.0,
                           mbu: float = 1.0, dtype_bytes: float = 2) -> "pd.DataFrame":
    """Per context length: what one more decode request adds to a step, and the batch b* where compute overtakes reads.

    One row per entry of ``contexts`` (index ``context_tokens``, in the order given), columns in
    seconds: ``compute_per_request_s`` = F(L) / (P*mfu), the arithmetic one request brings;
    ``read_per_request_s`` = L*k / (beta*mbu), the KV it brings; ``crossover_batch`` =
    ``compute_memory_crossover`` with the model's matrix weights, inf where no batch makes the step
    compute-bound (the request's reads outgrow its arithmetic). P is the card's peak BF16 FLOP/s.
    """
    import pandas as pd

    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    lengths = [non_negative_int("contexts", L, at_most=MAX_COUNT) for L in items("contexts", contexts)]
    if not lengths:
        raise ValueError("contexts must name at least one context length")
    if len(set(lengths)) != len(lengths):
        raise ValueError(f"contexts must not repeat a context length, got {lengths!r:.80}")
    peak, bandwidth = accelerator.peak_bf16_flops, accelerator.hbm_bandwidth
    p, beta = peak * efficiency("mfu", mfu), bandwidth * efficiency("mbu", mbu)
    weights, k = model.matrix_weight_bytes(dtype_bytes), model.kv_bytes_per_token(dtype_bytes)
    rows = []
    for L in lengths:
        f = decode_flops_per_request(model, L)
        rows.append({"context_tokens": L, "compute_per_request_s": f / p, "read_per_request_s": L * k / beta,
                     "crossover_batch": compute_memory_crossover(f, L, weights, k, peak, bandwidth, mfu, mbu)})
    return pd.DataFrame(rows).set_index("context_tokens")


def decode_flops_per_request(model: ModelSpec, context_tokens: int) -> float:
    """FLOP of one decode token after ``context_tokens`` cached tokens, including its lm_head row (F)."""
    instance("model", model, ModelSpec)
    return model.flops(1, non_negative_int("context_tokens", context_tokens), logits=1)


def decode_step_time(
    model: ModelSpec,
    accelerator: Accelerator,
    batch: int,
    context_tokens: int,
    mfu: float = 1.0,
    mbu: float = 1.0,
    dtype_bytes: float = 2,
    separate_weight_store: bool = False,
    overhead_s: float = 0.0,
) -> float:
    """Roofline seconds of one decode step of ``batch`` requests at ``context_tokens`` on ``accelerator``, plus ``overhead_s``."""
    instance("accelerator", accelerator, Accelerator)
    return step_time(
        batch,
        decode_flops_per_request(model, context_tokens),
        context_tokens,
        model.matrix_weight_bytes(dtype_bytes),
        model.kv_bytes_per_token(dtype_bytes),
        accelerator.peak_bf16_flops,
        accelerator.hbm_bandwidth,
        mfu,
        mbu,
        separate_weight_store,
        overhead_s,
    )


def decode_time_per_token(model: ModelSpec, accelerator: Accelerator, batch: int, context_tokens: int,
                          overhead_s: float = 0.0, separate_weight_store: bool = False) -> float:
    """Seconds per output token of a decode step: (max(b*F/P, D/beta) + overhead_s) / b."""
    return decode_step_time(model, accelerator, batch, context_tokens, overhead_s=overhead_s,
                            separate_weight_store=separate_weight_store) / batch


def decode_mfu(model: ModelSpec, accelerator: Accelerator, batch: int, context_tokens: int,
               overhead_s: float = 0.0, separate_weight_store: bool = False) -> float:
    """Share of peak BF16 FLOP/s a decode step achieves under the roofline plus ``overhead_s``."""
    step = decode_step_time(model, accelerator, batch, context_tokens, overhead_s=overhead_s,
                            separate_weight_store=separate_weight_store)
    return step_mfu(batch, decode_flops_per_request(model, context_tokens), step, accelerator.peak_bf16_flops)


# ---- LoRA adapters -------------------------------------------------------------------------
_PROJECTIONS = ("q", "k", "v", "o")


def lora_adapter_bytes(
    model: ModelSpec, rank: int = 16, targets: Iterable[str] = ("q", "v"), dtype_bytes: float = 2
) -> float:
    """Bytes of one LoRA adapter: per layer and target projection, rank x (in + out) parameters."""
    instance("model", model, ModelSpec)
    r = positive_int("rank", rank)
    q_out = model.n_heads * model.head_dim
    kv_out = model.n_kv_heads * model.head_dim
    shapes = {"q": (model.hidden_size, q_out), "k": (model.hidden_size, kv_out),
              "v": (model.hidden_size, kv_out), "o": (q_out, model.hidden_size)}
    targets = tuple(items("targets", targets))
    if not targets:
        raise ValueError("targets must name at least one projection")
    for t in targets:
        if t not in _PROJECTIONS:
            raise ValueError(f"targets must be drawn from {list(_PROJECTIONS)}, got {t!r}")
    per_layer = sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)
    return finite_result(model.n_layers * per_layer * positive("dtype_bytes", dtype_bytes), "rank", "dtype_bytes")


def adapter_groups(adapters: Iterable[Hashable]) -> dict[Hashable, int]:
    """Rows per adapter group of a batch, given each request's adapter id (largest group first)."""
    try:
        counts = Counter(items("adapters", adapters))
    except TypeError:  # an unhashable id
        raise ValueError("adapters must hold hashable adapter ids (one per request)") from None
    if not counts:
        raise ValueError("adapters must hold at least one request's adapter id")
    return dict(counts.most_common())


def adapter_weight_intensity(adapters: Iterable[Hashable], weight_element_bytes: float = 2) -> float:
    """FLOP per byte of adapter weights read, averaged over groups: each group reuses its adapter 2*rows/s_w."""
    groups = adapter_groups(adapters)
    rows = sum(groups.values())
    return finite_result(2 * rows / (len(groups) * positive("weight_element_bytes", weight_element_bytes)),
                         "weight_element_bytes")
