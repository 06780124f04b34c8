"""The device under test: what it is, how much fits on it, how to time it, where its records go.

torch is imported only inside the functions that need it, so this module (and the sizing and
record helpers in it) work without torch. Timing on CUDA uses CUDA events after warm-up and
reports the median of the repeats; on the CPU it uses ``time.perf_counter`` (CPU runs prove
the code, their times mean nothing for the chapter).
"""

from __future__ import annotations

import datetime as _dt
import glob
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from .._validate import one_of, positive, positive_int
from ..datasets import DATA_DIR
from ..hardware import ACCELERATORS, Accelerator
from ..models import ModelSpec

MEASURED_DIR = DATA_DIR / "measured"

# Substrings of torch.cuda.get_device_name() -> key of inferlab.hardware.ACCELERATORS (first match wins).
CARD_NAMES: list[tuple[str, str]] = [
    ("GH200", "gh200"), ("H200", "h200"), ("H100", "h100-sxm"), ("A100", "a100-80gb"),
    ("RTX PRO 6000", "rtx-pro-6000"),
]


def torch_available() -> bool:
    """Whether torch can be imported here (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def nvidia_driver_present() -> bool:
    """Whether this machine may have an NVIDIA device, checked without importing torch (seconds saved).

    On Linux the driver creates ``/dev/nvidia*`` (``/dev/dxg`` under WSL); macOS has no CUDA.
    Elsewhere we cannot tell cheaply and answer True.
    """
    if sys.platform == "darwin":
        return False
    if sys.platform.startswith("linux"):
        return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/dxg")
    return True


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device (torch is imported only when a driver is present)."""
    if not torch_available() or not nvidia_driver_present():
        return False
    import torch

    return bool(torch.cuda.is_available())


def card_key(device_name: str) -> str | None:
    """The ``inferlab.hardware`` key of a CUDA device name ('NVIDIA H200' -> 'h200'), None if unknown."""
    for pattern, key in CARD_NAMES:
        if pattern.lower() in device_name.lower():
            return key
    return None


def slug(device_name: str) -> str:
    """Folder name for a device's records: its hardware key, else its name in lower-case-dashes."""
    return card_key(device_name) or re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class DeviceInfo:
    """The device a measurement ran on, and the datasheet peaks its efficiencies are taken against."""

    device: str  # torch device type: "cuda" or "cpu"
    name: str
    driver: str
    torch_version: str
    date: str  # ISO 8601, UTC
    free_bytes: int
    accelerator: Accelerator | None

    @property
    def slug(self) -> str:
        """Folder of this device's records under data/measured/."""
        return slug(self.name)

    def metadata(self) -> dict[str, object]:
        """The columns every record carries: device, driver, torch, date and the card's peaks (empty if unknown)."""
        a = self.accelerator
        return {
            "gpu": self.name, "driver": self.driver, "torch": self.torch_version, "date": self.date,
            "card": a.name if a else "",
            "peak_hbm_bandwidth_Bps": a.hbm_bandwidth if a else None,
            "peak_bf16_flops": a.peak_bf16_flops if a else None,
            "host_link_Bps": a.host_link_bandwidth if a else None,
        }


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def device_info(device: str = "cuda", card: str | None = None) -> DeviceInfo:
    """Describe ``device`` ('cuda' or 'cpu'); ``card`` names its ACCELERATORS entry when the name is not recognized."""
    import torch

    one_of("device", device, ["cuda", "cpu"])
    if card is not None:
        one_of("card", card, ACCELERATORS)
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device must be 'cpu' here: torch sees no CUDA device")
        name = torch.cuda.get_device_name()
        free, _ = torch.cuda.mem_get_info()
        key = card or card_key(name)
        return DeviceInfo("cuda", name, _driver_version(), torch.__version__, now, int(free),
                          ACCELERATORS[key] if key else None)
    import psutil

    return DeviceInfo("cpu", "cpu", "none", torch.__version__, now, int(psutil.virtual_memory().available),
                      ACCELERATORS[card] if card else None)


def median_time(fn: Callable[[], object], device: str = "cuda", warmup: int = 3, repeats: int = 10) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs (CUDA events on 'cuda')."""
    positive_int("repeats", repeats)
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    import torch

    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


# ---- sizing ---------------------------------------------------------------------------------------
def layer_bytes(spec: ModelSpec, dtype_bytes: float = 2) -> float:
    """Bytes of one decoder layer's weights (attention, FFN, norms)."""
    norms = 2 * spec.hidden_size + (2 * spec.head_dim if spec.qk_norm else 0)
    return (spec.attention_params + spec.ffn_params + norms) * positive("dtype_bytes", dtype_bytes)


def layers_that_fit(spec: ModelSpec, budget_bytes: float, dtype_bytes: float = 2) -> int:
    """Most layers (at most ``spec.n_layers``) whose weights, with embedding, lm_head and final norm, fit ``budget_bytes``."""
    fixed = (spec.embedding_params + spec.lm_head_params + spec.hidden_size) * dtype_bytes
    n = int((budget_bytes - fixed) // layer_bytes(spec, dtype_bytes))
    if n < 1:
        raise ValueError(f"budget_bytes ({budget_bytes:.3g}) must hold embedding, lm_head and one layer of "
                         f"{spec.name} ({fixed + layer_bytes(spec, dtype_bytes):.3g} B)")
    return min(n, spec.n_layers)


def scaled(spec: ModelSpec, n_layers: int) -> ModelSpec:
    """``spec`` with ``n_layers`` layers (the shape measured when the whole model does not fit)."""
    positive_int("n_layers", n_layers)
    return spec if n_layers == spec.n_layers else replace(spec, name=f"{spec.name}[{n_layers}L]", n_layers=n_layers)


# ---- records --------------------------------------------------------------------------------------
def record_path(experiment: str, device_slug: str, out_dir: Path | None = None) -> Path:
    """data/measured/<device>/<experiment>.csv (or under ``out_dir``)."""
    return Path(out_dir or MEASURED_DIR) / device_slug / f"{experiment}.csv"


def write_record(rows: pd.DataFrame, experiment: str, info: DeviceInfo, out_dir: Path | None = None) -> Path:
    """Write ``rows`` with the device's metadata columns to data/measured/<device>/<experiment>.csv."""
    if rows.empty:
        raise ValueError(f"rows must hold at least one measurement of {experiment!r}")
    meta = pd.DataFrame([info.metadata()] * len(rows), index=rows.index)
    path = record_path(experiment, info.slug, out_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.concat([rows, meta], axis=1).assign(experiment=experiment).to_csv(path, index=False)
    return path


def recorded(experiment: str, measured_dir: Path | None = None) -> tuple[pd.DataFrame, Path] | None:
    """The newest record of ``experiment`` under data/measured/ (any device), or None if there is none."""
    paths = sorted(Path(measured_dir or MEASURED_DIR).glob(f"*/{experiment}.csv"))
    if not paths:
        return None
    frames = [(pd.read_csv(p), p) for p in paths]
    return max(frames, key=lambda fp: str(fp[0]["date"].iloc[0]) if "date" in fp[0] else "")


def graphed(fn: Callable[[], object], device: str = "cuda") -> Callable[[], object]:
    """``fn`` captured in a CUDA graph (replayed by the returned callable); ``fn`` itself on the CPU."""
    if device != "cuda":
        return fn
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm up allocator and kernels outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay
