"""GPU measurements of the chapter's claims, on the card at hand; torch is imported only when one runs.

Six experiments (``EXPERIMENTS``), each a function returning one row per point and a command
``python -m inferlab.gpu EXPERIMENT [--quick]`` that writes ``data/measured/<gpu>/<experiment>.csv``
with the GPU name, driver, torch version, date and the card's peaks:

==================== ======= ===========================================================================
experiment           section what is measured
==================== ======= ===========================================================================
decode_step          8.1.3   decode step time vs batch and context, eager and CUDA graphs; bandwidth, MBU
prefill_chunks       8.2.3   one prefill chunk after 0 ... 8K cached tokens (first vs last chunk); MFU
paged_vs_contiguous  8.3.1   decode attention over shuffled blocks of 8-64 tokens vs contiguous K/V
kv_formats           8.4.2   attention over BF16, FP8, q8_0 KV incl. dequantization; where it pays
host_copy            8.4.3   host-to-device bandwidth (pinned, pageable); 1- vs 2-buffer prefetch
verify_cost          8.5.2   verifying k draft positions vs one decode step
==================== ======= ===========================================================================

Model-sized runs use Qwen3-8B's shape with random BF16 weights and as many layers as fit the
free memory (the ``layers`` column). ``preset`` picks the size: ``full`` (the command's default,
minutes on a large GPU), ``quick`` (a notebook cell, under a minute) and ``tiny`` (CPU-sized,
used by the tests to prove the code; its times mean nothing).

GPU cells in the notebooks (``inferlab.book.plot.gpu.gpu_cell``): measure when CUDA is present,
otherwise say so in one line and show the recorded CSV (ours, else the chapter's numbers)::

    8.1.3  gpu_cell("decode_step")            step time vs batch beside the roofline
    8.2.1  gpu_cell("decode_step", "mbu")     bandwidth utilization vs batch, eager vs CUDA graphs
    8.2.3  gpu_cell("prefill_chunks")         first vs last chunk of an 8K prompt, MFU
    8.3.1  gpu_cell("paged_vs_contiguous")    block size vs attention time
    8.4.2  gpu_cell("kv_formats")             BF16 / FP8 / q8_0 attention time vs context
    8.4.3  gpu_cell("host_copy")              link bandwidth and the prefetch pipeline
    8.5.2  gpu_cell("verify_cost")            verify k positions / one decode step
    8.6.3  gpu_cell("efficiency")             measured MBU and MFU next to the chapter's table
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd

from .._validate import one_of
from .device import cuda_available, device_info, recorded, torch_available, write_record

# experiment -> (module, function, presets attribute)
EXPERIMENTS: dict[str, tuple[str, str, str]] = {
    "decode_step": ("model_runs", "decode_step", "DECODE_PRESETS"),
    "prefill_chunks": ("model_runs", "prefill_chunks", "PREFILL_PRESETS"),
    "paged_vs_contiguous": ("kernel_runs", "paged_vs_contiguous", "PAGED_PRESETS"),
    "kv_formats": ("kernel_runs", "kv_formats", "KV_PRESETS"),
    "host_copy": ("transfer", "host_copy", "COPY_PRESETS"),
    "verify_cost": ("model_runs", "verify_cost", "VERIFY_PRESETS"),
}
PRESETS = ("full", "quick", "tiny")


def experiment(name: str):
    """The function that runs experiment ``name`` and its presets."""
    module, func, presets = EXPERIMENTS[one_of("name", name, EXPERIMENTS)]
    mod = importlib.import_module(f"{__name__}.{module}")
    return getattr(mod, func), getattr(mod, presets)


def run(name: str, preset: str = "quick", device: str | None = None, card: str | None = None,
        out_dir: Path | None = None, write: bool = True, progress: bool = True,
        **overrides: object) -> tuple[pd.DataFrame, Path | None]:
    """Run experiment ``name`` at ``preset`` size on ``device`` (CUDA when present); write its record unless ``write`` is False."""
    one_of("preset", preset, PRESETS)
    if not torch_available():
        raise ValueError("torch must be installed to run a measurement (pip install -r requirements-gpu.txt)")
    fn, presets = experiment(name)
    dev = device or ("cuda" if cuda_available() else "cpu")
    kwargs = {**presets[preset], **overrides}
    rows = fn(device=dev, card=card, progress=progress, **kwargs)
    path = write_record(rows, name, device_info(dev, card), out_dir) if write else None
    return rows, path


__all__ = ["EXPERIMENTS", "PRESETS", "cuda_available", "experiment", "recorded", "run", "torch_available"]
