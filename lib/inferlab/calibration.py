"""Measured efficiencies of the running example (experiment 8-1, RTX PRO 6000, Qwen3-8B, BF16).

Section 8.6.3 turns the batch sweep into MBU (decode) and MFU (prefill); every other section
estimates times as spec x efficiency with these numbers. The published table is stored in
``data/published/efficiency_8_6_3.csv``; the constants below are the unrounded values the
chapter's worked examples use.
"""

from __future__ import annotations

import functools

import numpy as np

from ._validate import finite_result, instance, non_negative_int, positive
from .datasets import published
from .hardware import Accelerator
from .models import ModelSpec
from .roofline import efficiency
from .units import GB

#: MFU of a batch-1 prefill; the chapter prints "62 %", its examples use 62.2 % (307.9 ms, 94.7 ms).
PREFILL_MFU_BATCH1 = 0.622
#: MFU of config B's prefill (8K prompts, 6K cached, batch 16): 2.04 s for 32,768 new tokens.
PREFILL_MFU_SHARED_BATCH16 = 0.5777
#: MBU of decode when memory-bound reads are the limit (8.4.2: 65 % of 1792 GB/s).
DECODE_MBU_LARGE_BATCH = 0.65


def prefill_time(
    model: ModelSpec,
    accelerator: Accelerator,
    new_tokens: int,
    cached_tokens: int = 0,
    mfu: float = PREFILL_MFU_BATCH1,
    logits: int = 1,
) -> float:
    """Seconds to prefill ``new_tokens`` after ``cached_tokens`` at ``mfu`` x peak BF16 FLOP/s."""
    instance("model", model, ModelSpec), instance("accelerator", accelerator, Accelerator)
    n, rows = non_negative_int("new_tokens", new_tokens), non_negative_int("logits", logits)
    flops = model.flops(n, cached_tokens, logits=min(rows, n))
    # Accelerator.compute_time's arithmetic, with its overflow blamed on this function's arguments
    return finite_result(flops / (accelerator.peak_bf16_flops * efficiency("mfu", mfu)), "new_tokens", "mfu")


def decode_step_table() -> tuple[np.ndarray, np.ndarray]:
    """(bytes read per step, measured decode-only step seconds) of experiment 8-1, sorted by bytes."""
    xs, ys = _decode_steps()
    return xs.copy(), ys.copy()


@functools.cache
def _decode_steps() -> tuple[np.ndarray, np.ndarray]:
    # read once: a generation interpolates one step per token (4,096 in 8.3.3), and building the table from the
    # published CSV each time was 0.6 ms of pandas per step. Read-only, so no caller can change it for the next.
    sweep = published("batch_sweep_8_1").sort_values("step_read_gb")
    xs, ys = sweep["step_read_gb"].to_numpy() * GB, sweep["decode_step_s"].to_numpy(dtype=float, copy=True)
    xs.flags.writeable = ys.flags.writeable = False
    return xs, ys


def hidden_read_share(accelerator: Accelerator, mbu: float = 1.0) -> float:
    """Share of the extra bytes from experiment 8-1's batch-1 to its batch-4 step that the measured step did not
    add as time, if those bytes were read at ``mbu`` x ``accelerator``'s peak bandwidth (section 8.3.3: 0.9 GB more
    took 0.36 ms, against 0.50 ms at the RTX PRO 6000's peak: 28 % hidden; 53 % at 65 % MBU). Negative when the step
    grew by more than the reads would take."""
    instance("accelerator", accelerator, Accelerator)
    xs, ys = _decode_steps()
    read_s = finite_result(float(xs[1] - xs[0]) / (accelerator.hbm_bandwidth * efficiency("mbu", mbu)), "mbu")
    return 1 - float(ys[1] - ys[0]) / read_s


def measured_decode_step(read_bytes: float) -> float:
    """Decode step time (s) interpolated linearly in bytes read between experiment 8-1's measured steps.

    Section 8.6.3 estimates config C this way (25.40 GB -> about 28.26 ms). Outside the measured range
    the step is extrapolated along the nearest segment, never below zero.
    """
    x = positive("read_bytes", read_bytes)
    xs, ys = _decode_steps()
    i = int(np.clip(np.searchsorted(xs, x) - 1, 0, len(xs) - 2))
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
    return max(float(ys[i] + slope * (x - xs[i])), 0.0)
