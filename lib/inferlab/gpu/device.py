"""The device under test: what it is, which datasheet its peaks come from, how much memory is free.

torch is imported only inside the functions that need it, so this module works without torch.
A card is matched to an ``inferlab.hardware.ACCELERATORS`` entry by its name and its memory
together (``CARDS``): an H100 PCIe or NVL, an H200 NVL, a GH200 with 144 GB or an A100 PCIe
has another datasheet than the entry its name resembles, so it is recorded as ``unknown``
(no peaks, no efficiencies) rather than against a wrong one. Free memory is read after
releasing what earlier experiments left in PyTorch's cache (``release``).
"""

from __future__ import annotations

import datetime as _dt
import gc
import glob
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace

from .._validate import one_of, positive, positive_int
from ..hardware import ACCELERATORS, Accelerator
from ..models import ModelSpec


@dataclass(frozen=True)
class CardName:
    """How a CUDA device name and memory size identify one ACCELERATORS entry."""

    key: str  # inferlab.hardware key
    contains: str  # substring of torch.cuda.get_device_name() (case-insensitive)
    excludes: tuple[str, ...] = ()  # substrings of variants with other peaks (PCIe, NVL, Max-Q ...)


#: First match wins; a name matches only if its memory also matches the entry's (``MEMORY_RATIO``).
CARDS: tuple[CardName, ...] = (
    CardName("gh200", "GH200"),
    CardName("h200", "H200", ("GH200", "NVL")),  # H200 NVL: same memory, lower compute and power
    CardName("h100-sxm", "H100", ("PCIe", "NVL")),  # H100 PCIe: 2.0 TB/s; NVL: 94 GB, 3.9 TB/s
    CardName("a100-80gb", "A100", ("PCIe",)),  # A100 80GB PCIe: 1.9 TB/s
    CardName("rtx-pro-6000", "RTX PRO 6000", ("Max-Q", "Server")),  # Max-Q: 300 W, lower clocks
)
#: Reported total memory / datasheet memory of a matching card. Datasheets' "80 GB", "141 GB" are
#: about the GiB the driver reports (an H200 reports 139.8 GiB = 150.1e9 B against 141e9), so a
#: card's ratio is about 1.07; another memory size (GH200 144 GB, H100 NVL 94 GB, A100 40GB) is far off.
MEMORY_RATIO = (0.95, 1.12)


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


def card_key(device_name: str, total_bytes: float) -> str | None:
    """The ``inferlab.hardware`` key of a CUDA device of this name and total memory, None if no entry matches both."""
    positive("total_bytes", total_bytes)
    name = device_name.lower()
    for card in CARDS:
        if card.contains.lower() in name and not any(x.lower() in name for x in card.excludes):
            ratio = total_bytes / ACCELERATORS[card.key].memory_bytes
            return card.key if MEMORY_RATIO[0] <= ratio <= MEMORY_RATIO[1] else None
    return None


def slug(device_name: str) -> str:
    """A device name in lower-case-dashes ('NVIDIA H100 PCIe' -> 'nvidia-h100-pcie')."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class DeviceInfo:
    """The device a measurement ran on, and the datasheet peaks its efficiencies are taken against."""

    device: str  # torch device type: "cuda" or "cpu"
    name: str
    driver: str
    torch_version: str
    date: str  # ISO 8601, UTC
    free_bytes: int
    total_bytes: int
    accelerator: Accelerator | None
    card_match: str  # "name and memory", "--card (user)", or "unknown" (no peaks)

    @property
    def slug(self) -> str:
        """Folder of this device's records: the matched card's key, else its name in lower-case-dashes."""
        if self.accelerator is not None and self.card_match == "name and memory":
            return self.accelerator.name
        return slug(self.name)

    def metadata(self) -> dict[str, object]:
        """The columns every record carries: device, driver, torch, date and the peaks used (empty if unknown)."""
        a = self.accelerator
        return {
            "device": self.device, "gpu": self.name, "driver": self.driver, "torch": self.torch_version,
            "date": self.date, "card": a.name if a else "unknown", "card_match": self.card_match,
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


def release(device: str = "cuda", compiled: bool = False) -> int:
    """On CUDA: free what Python no longer references, hand PyTorch's cached blocks back to the driver; bytes still held.

    ``compiled`` also drops torch.compile's caches (their graphs may hold the tensors they ran on).
    Nothing on the CPU, where memory goes back to the allocator at once (and a full collection
    with torch loaded costs a fifth of a second).
    """
    if device != "cuda":
        return 0
    import torch

    if compiled and "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return int(torch.cuda.memory_allocated())


def device_info(device: str = "cuda", card: str | None = None) -> DeviceInfo:
    """Describe ``device`` ('cuda' or 'cpu'), its free memory read after ``release``; ``card`` forces an ACCELERATORS entry."""
    import torch

    one_of("device", device, ["cuda", "cpu"])
    if card is not None:
        one_of("card", card, ACCELERATORS)
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device must be 'cpu' here: torch sees no CUDA device")
        release("cuda")  # earlier experiments' blocks still sit in the caching allocator
        name = torch.cuda.get_device_name()
        free, total = torch.cuda.mem_get_info()
        key = card or card_key(name, total)
        how = "--card (user)" if card else "name and memory" if key else "unknown"
        return DeviceInfo("cuda", name, _driver_version(), torch.__version__, now, int(free), int(total),
                          ACCELERATORS[key] if key else None, how)
    import psutil

    mem = psutil.virtual_memory()
    return DeviceInfo("cpu", "cpu", "none", torch.__version__, now, int(mem.available), int(mem.total),
                      ACCELERATORS[card] if card else None, "--card (user)" if card else "unknown")


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


def recorded(experiment: str, measured_dir: "os.PathLike | None" = None):
    """``inferlab.gpu.records.recorded`` (the newest full CUDA measurement of ``experiment``), also importable here."""
    from .records import recorded as newest

    return newest(experiment, measured_dir)
