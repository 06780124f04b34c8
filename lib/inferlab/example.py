"""The running example of the whole book: one instance, two request classes, one deadline."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ._validate import instance, mapping, non_negative, non_negative_int, positive_int
from .calibration import decode_step_table, measured_decode_step
from .datasets import published
from .hardware import ACCELERATORS, Accelerator
from .memory import kv_tokens, max_concurrent_requests, request_kv_bytes
from .models import MODELS, ModelSpec
from .roofline import decode_flops_per_request, step_read_bytes
from .timeline import RequestTimes, single_request
from .units import GB, GiB, MiB


@dataclass(frozen=True)
class RequestClass:
    """A kind of request: prompt and output lengths, and how much of the prompt all such requests share."""

    name: str
    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0

    def __post_init__(self) -> None:
        instance("name", self.name, str)
        positive_int("prompt_tokens", self.prompt_tokens)
        positive_int("output_tokens", self.output_tokens)
        non_negative_int("shared_prefix_tokens", self.shared_prefix_tokens)
        if self.shared_prefix_tokens > self.prompt_tokens:
            raise ValueError("shared_prefix_tokens must not exceed prompt_tokens")


MODEL: ModelSpec = MODELS["qwen3-8b"]
ACCELERATOR: Accelerator = ACCELERATORS["rtx-pro-6000"]
INSTANCE_BYTES = 32 * GiB  # the instance's share of the card
KV_BUDGET_BYTES = 12 * GiB  # KV cache and auxiliary buffers
DEADLINE_S = 7.0  # arrival to complete answer
SHORT = RequestClass("short chat", 2048, 256)
LONG = RequestClass("long context", 8192, 256, shared_prefix_tokens=6144)


# Experiment 8-1, one short request alone on the card (section 8.1.1): prefill with the first
# token took about 0.096 s, then a token every 26.5 ms (client side); the 0.1 s queue is assumed.
SINGLE_QUEUE_S = 0.1
SINGLE_PREFILL_S = 0.096
SINGLE_ITL_S = 0.0265


def single_short_request(stalls_s: dict[int, float] | None = None) -> RequestTimes:
    """Timeline of section 8.1.1's short request (0.1 s queue, 0.096 s prefill, 255 gaps of 26.5 ms)."""
    if stalls_s is not None:
        mapping("stalls_s", stalls_s)
    return single_request(SINGLE_QUEUE_S, SINGLE_PREFILL_S, SINGLE_ITL_S, SHORT.output_tokens, stalls_s=stalls_s)


def request_classes() -> pd.DataFrame:
    """The two request classes and the deadline as a table (one column per class)."""
    rows = {c.name: {"prompt tokens": c.prompt_tokens, "output tokens": c.output_tokens,
                     "shared prefix tokens": c.shared_prefix_tokens, "deadline (s)": f"{DEADLINE_S:g}"}
            for c in (SHORT, LONG)}
    return pd.DataFrame(rows)


def memory_split() -> pd.DataFrame:
    """How the instance's 32 GiB divide: weights, KV budget, and the rest for activations and buffers (GiB)."""
    weights = MODEL.weight_bytes()
    rest = INSTANCE_BYTES - weights - KV_BUDGET_BYTES
    return pd.DataFrame(
        {"GiB": [weights / GiB, KV_BUDGET_BYTES / GiB, rest / GiB, INSTANCE_BYTES / GiB]},
        index=["weights (BF16)", "KV cache and auxiliary buffers", "activations, graph replay, workspace",
               "instance total"],
    ).round(2)


def kv_capacity_table(kv_budget_bytes: float = KV_BUDGET_BYTES, block_size: int = 16) -> pd.DataFrame:
    """Per request class: tokens held at completion, KV after prefill and at completion (MiB), and how many fit."""
    non_negative("kv_budget_bytes", kv_budget_bytes)
    rows = {c.name: {"tokens held": kv_tokens(c.prompt_tokens, c.output_tokens),
                     "after prefill (MiB)": request_kv_bytes(MODEL, c.prompt_tokens, 1, block_size) / MiB,
                     "at completion (MiB)": request_kv_bytes(MODEL, c.prompt_tokens, c.output_tokens,
                                                             block_size) / MiB,
                     f"fit in {kv_budget_bytes / GiB:g} GiB": max_concurrent_requests(
                         kv_budget_bytes, MODEL, c.prompt_tokens, c.output_tokens, block_size)}
            for c in (SHORT, LONG)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("request")


def decode_step_breakdown(context_tokens: int = 2048) -> pd.DataFrame:
    """Experiment 8-1's measured decode steps beside their compute and read floors at peak, by batch.

    Columns: bytes read per step D(b, L) (GB), b*F/P and D/beta (ms, the compute and read floors),
    the measured step (ms), and the rest of the step that neither floor explains (ms).
    """
    L = positive_int("context_tokens", context_tokens)
    sweep = published("batch_sweep_8_1").set_index("batch")
    batch = sweep.index.to_numpy()
    per_request_flops = decode_flops_per_request(MODEL, L)
    read = pd.Series([step_read_bytes(int(n), L, MODEL.matrix_weight_bytes(), MODEL.kv_bytes_per_token())
                      for n in batch], index=sweep.index, dtype=float)
    read_s = read / ACCELERATOR.hbm_bandwidth
    step_s = sweep["decode_step_s"]
    return pd.DataFrame({
        "read (GB)": read / GB,
        "compute floor (ms)": batch * per_request_flops / ACCELERATOR.peak_bf16_flops * 1e3,
        "read floor (ms)": read_s * 1e3,
        "measured step (ms)": step_s * 1e3,
        "rest (ms)": (step_s - read_s) * 1e3,
    }).rename_axis("batch")


def read_floor_batch(context_tokens: int = 2048) -> tuple[int, float]:
    """Smallest batch whose read floor D(b, L)/beta reaches the measured decode step, and the bytes read there.

    Beyond batch 64 the measured step is extrapolated along its last segment (bytes read against
    seconds, as ``calibration.measured_decode_step`` does); returns (batch, bytes per step).
    """
    L = positive_int("context_tokens", context_tokens)
    xs, ys = decode_step_table()
    beta = ACCELERATOR.hbm_bandwidth
    if (xs / beta >= ys).any():
        raise ValueError("a measured step is already at its read floor; nothing to extrapolate")
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    if slope >= 1 / beta:
        raise ValueError("the measured step grows at least as fast as its read floor: they never meet")
    crossing = (ys[-1] - slope * xs[-1]) / (1 / beta - slope)  # bytes where x / beta = the extrapolated step
    batch = math.ceil((crossing - MODEL.matrix_weight_bytes()) / (L * MODEL.kv_bytes_per_token()))
    return batch, float(crossing)


def short_request_in_batch(batch: int) -> RequestTimes:
    """Section 8.1.1's short request when ``batch`` requests of its shape share every decode step.

    Each gap is the request's 26.5 ms alone plus what experiment 8-1's decode step gains from batch 1 to
    ``batch`` (interpolated in bytes read, as ``calibration.measured_decode_step``). The queue and the prefill
    stay as when alone: other requests' prefills are left out, so this is the best a batch allows the request.
    """
    b = positive_int("batch", batch)
    D_w, k, L = MODEL.matrix_weight_bytes(), MODEL.kv_bytes_per_token(), SHORT.prompt_tokens
    step = [measured_decode_step(step_read_bytes(n, L, D_w, k)) for n in (1, b)]
    return single_request(SINGLE_QUEUE_S, SINGLE_PREFILL_S, SINGLE_ITL_S + step[1] - step[0], SHORT.output_tokens)
