"""Measured-rate accounting: processing rates from measurements, and the GPU-seconds a request occupies.

Prefill is counted in new input tokens per second (r_P) and decode in decode calls per second
(r_D; a batch of b requests completes b calls in one step). A request with L new input tokens and
G outputs then occupies ``t_GPU = L / r_P + (G - 1) / r_D`` GPU-seconds (section 8.6.3).
"""

from __future__ import annotations

import pandas as pd

from .. import calibration, example
from .._validate import finite_result, instance, non_negative_int, positive, positive_int
from ..datasets import published
from ..hardware import Accelerator
from ..models import ModelSpec
from ..roofline import step_read_bytes
from ..units import GB, ms
from .configs import CHAPTER_WORKLOAD, MEASURED_SHARED_PREFILL_S, MEASURED_SHARED_STEP_S

__all__ = ["prefill_rate", "decode_rate", "gpu_seconds", "efficiency_table", "shared_batch_rates"]


def prefill_rate(new_tokens: int, seconds: float) -> float:
    """r_P: new input tokens processed per second of prefill."""
    return finite_result(positive_int("new_tokens", new_tokens) / positive("seconds", seconds), "new_tokens", "seconds")


def decode_rate(batch: int, step_s: float) -> float:
    """r_D: decode calls completed per second (a step of ``batch`` requests completes ``batch`` calls)."""
    return finite_result(positive_int("batch", batch) / positive("step_s", step_s), "batch", "step_s")


def gpu_seconds(new_tokens: int, output_tokens: int, r_p: float, r_d: float) -> float:
    """t_GPU = L / r_P + (G - 1) / r_D: GPU-seconds one request occupies."""
    non_negative_int("new_tokens", new_tokens)
    positive_int("output_tokens", output_tokens)
    return finite_result(new_tokens / positive("r_p", r_p) + (output_tokens - 1) / positive("r_d", r_d),
                         "new_tokens", "output_tokens", "r_p", "r_d")


def efficiency_table(model: ModelSpec = example.MODEL, accelerator: Accelerator = example.ACCELERATOR,
                     context_tokens: int = example.SHORT.prompt_tokens) -> pd.DataFrame:
    """Experiment 8-1's efficiency table: bytes read per step, time at peak bandwidth, measured step, MBU, MFU.

    Bytes and the time at peak are computed (weights read once per step plus each request's KV);
    the measured step and the prefill MFU are the published measurements.
    """
    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    non_negative_int("context_tokens", context_tokens)
    sweep = published("batch_sweep_8_1").set_index("batch")
    rows = {}
    for batch, row in sweep.iterrows():
        read = step_read_bytes(int(batch), context_tokens, model.matrix_weight_bytes(), model.kv_bytes_per_token())
        at_peak = accelerator.memory_time(read)
        rows[int(batch)] = {"read_gb": read / GB, "at_peak_ms": at_peak / ms,
                            "measured_ms": row["decode_step_s"] / ms, "mbu": at_peak / row["decode_step_s"],
                            "prefill_mfu": row["prefill_mfu"]}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("batch")


def shared_batch_rates(output_tokens: int = CHAPTER_WORKLOAD.output_tokens,
                       model: ModelSpec = example.MODEL,
                       accelerator: Accelerator = example.ACCELERATOR) -> dict[str, float]:
    """r_P, r_D, the MFU they imply, and GPU-seconds per request and per batch for config B's measurement."""
    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    wl = CHAPTER_WORKLOAD
    new = wl.prompt_tokens - wl.shared_prefix_tokens
    r_p = prefill_rate(wl.n_requests * new, MEASURED_SHARED_PREFILL_S)
    r_d = decode_rate(wl.n_requests, MEASURED_SHARED_STEP_S)
    flops = wl.n_requests * model.flops(new, wl.shared_prefix_tokens, logits=1)
    per_request = gpu_seconds(new, output_tokens, r_p, r_d)
    return {"r_p": r_p, "r_d": r_d, "prefill_mfu": flops / (accelerator.peak_bf16_flops * MEASURED_SHARED_PREFILL_S),
            "gpu_s_per_request": per_request, "gpu_s_per_batch": wl.n_requests * per_request,
            "estimated_prefill_s": wl.n_requests * calibration.prefill_time(
                model, accelerator, new, wl.shared_prefix_tokens, mfu=calibration.PREFILL_MFU_SHARED_BATCH16)}
