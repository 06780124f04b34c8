"""GPU measurements of the chapter's claims, on the card at hand; torch is imported only when one runs.

Six experiments (``EXPERIMENTS``), each a function of the run's ``Settings`` and its sizes that
yields one row per point, and a command that runs them, each isolated, writing rows as they come::

    python -m inferlab.gpu all                      full size on CUDA -> data/measured/<card>/<experiment>.csv
    python -m inferlab.gpu all --quick              notebook size     -> a cache folder (records.scratch_dir)
    python -m inferlab.gpu all --device cuda --tiny one-minute smoke run through every CUDA branch -> cache
    python -m inferlab.gpu all --device cpu         tiny, on the CPU: proves the code, times mean nothing -> cache

==================== ======= ===========================================================================
experiment           section what is measured
==================== ======= ===========================================================================
decode_step          8.1.3   decode step vs batch and context: eager, graph, compiled, graph+compiled; MBU
prefill_chunks       8.2.3   one prefill chunk after 0 ... 8K cached tokens (first vs last chunk); MFU
paged_vs_contiguous  8.3.1   in-place paged kernel (and gather) over blocks of 8-64 vs contiguous
kv_formats           8.4.2   BF16, FP8, q8_0 KV: converted in the kernel vs a dequantized copy
host_copy            8.4.3   host-to-device bandwidth (pinned, pageable); 1- vs 2-buffer prefetch
verify_cost          8.5.2   verifying k draft positions vs one decode step
==================== ======= ===========================================================================

Every row carries the preset, dtype, decode attention, SDPA backend, GPU name, driver, torch
version, date, the card matched by name and memory and the peaks used (``unknown``, without
peaks, for a card not in ``inferlab.hardware``), and its status (ok, skipped, failed, with the
error). Model-sized runs use Qwen3-8B's shape with random BF16 weights and as many layers as
fit the free memory (the ``layers`` column). Only full CUDA runs are recorded in data/measured/.

GPU cells in the notebooks (``inferlab.book.plot.gpu.gpu_cell``): measure when CUDA is present,
otherwise say so in one line and show the recorded CSV (ours, else the chapter's numbers)::

    8.1.3  gpu_cell("decode_step")            step time vs batch beside the roofline
    8.2.1  gpu_cell("decode_step", "mbu")     bandwidth utilization vs batch, per path (eager ... graph+compiled)
    8.2.3  gpu_cell("prefill_chunks")         first vs last chunk of an 8K prompt, MFU
    8.3.1  gpu_cell("paged_vs_contiguous")    block size vs attention time
    8.4.2  gpu_cell("kv_formats")             BF16 / FP8 / q8_0 attention time vs context
    8.4.3  gpu_cell("host_copy")              link bandwidth and the prefetch pipeline
    8.5.2  gpu_cell("verify_cost")            verify k positions / one decode step
    8.6.3  gpu_cell("efficiency")             measured MBU and MFU next to the chapter's table
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .device import cuda_available, torch_available
from .records import recorded
from .runner import EXPERIMENTS, Outcome, experiment, run_all, run_experiment, summary
from .settings import PRESETS, Settings, settings_for


def run(name: str, preset: str = "quick", device: str | None = None, card: str | None = None,
        out_dir: Path | None = None, write: bool = True, progress: bool = True,
        **overrides: object) -> tuple[pd.DataFrame, Path | None]:
    """Run experiment ``name`` at ``preset`` size on ``device`` (default CUDA); its ok rows and where they went.

    ``overrides`` are ``Settings`` fields or the experiment's sizes. The record goes to
    data/measured/ only for a full CUDA run (``records.default_out_dir``); an exception is raised
    after the rows before it were written.
    """
    if not torch_available():
        raise ValueError("torch must be installed to run a measurement (pip install -r requirements-gpu.txt)")
    setting_names = set(Settings.__dataclass_fields__)
    s = settings_for(preset, device or "cuda", card=card, progress=progress,
                     **{k: v for k, v in overrides.items() if k in setting_names})
    sizes = {k: v for k, v in overrides.items() if k not in setting_names}
    out = run_experiment(name, s, out_dir, write, raise_errors=True, **sizes)
    return out.frame(), out.path


__all__ = ["EXPERIMENTS", "PRESETS", "Outcome", "Settings", "cuda_available", "experiment", "recorded", "run",
           "run_all", "run_experiment", "settings_for", "summary", "torch_available"]
