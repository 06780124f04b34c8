"""Accelerators: datasheet peaks used by every model in the book (SI units)."""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import finite_result, instance, non_negative, positive
from .units import GB, TFLOP


@dataclass(frozen=True)
class Accelerator:
    """One accelerator's datasheet numbers; bandwidths in bytes/s, compute in FLOP/s."""

    name: str
    memory_bytes: float
    hbm_bandwidth: float
    peak_bf16_flops: float
    power_w: float
    host_link_bandwidth: float
    host_link: str
    source: str

    def __post_init__(self) -> None:
        for field in ("name", "host_link", "source"):
            instance(field, getattr(self, field), str)
        for field in ("memory_bytes", "hbm_bandwidth", "peak_bf16_flops", "power_w", "host_link_bandwidth"):
            positive(field, getattr(self, field))

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte at which compute time equals memory time (the roofline's ridge point)."""
        return self.peak_bf16_flops / self.hbm_bandwidth

    def memory_time(self, n_bytes: float, efficiency: float = 1.0) -> float:
        """Seconds to read ``n_bytes`` from device memory at ``efficiency`` x peak bandwidth (MBU)."""
        non_negative("n_bytes", n_bytes)
        seconds = n_bytes / (self.hbm_bandwidth * positive("efficiency", efficiency))
        return finite_result(seconds, "n_bytes", "efficiency")

    def compute_time(self, flops: float, efficiency: float = 1.0) -> float:
        """Seconds to do ``flops`` dense BF16 FLOP at ``efficiency`` x peak (MFU)."""
        non_negative("flops", flops)
        seconds = flops / (self.peak_bf16_flops * positive("efficiency", efficiency))
        return finite_result(seconds, "flops", "efficiency")

    def transfer_time(self, n_bytes: float, link_bandwidth: float | None = None) -> float:
        """Seconds to move ``n_bytes`` over the host link (one direction), or over ``link_bandwidth``."""
        non_negative("n_bytes", n_bytes)
        bw = self.host_link_bandwidth if link_bandwidth is None else positive("link_bandwidth", link_bandwidth)
        return finite_result(n_bytes / bw, "n_bytes", "link_bandwidth")


PCIE_GEN4_X16 = 32 * GB  # per direction
PCIE_GEN5_X16 = 64 * GB  # per direction
NVLINK_C2C = 450 * GB  # per direction (900 GB/s total)

ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in [
        Accelerator(
            "rtx-pro-6000", 96 * GB, 1792 * GB, 503.8 * TFLOP, 600, PCIE_GEN5_X16, "PCIe Gen5 x16",
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (dense BF16, FP32 accumulate)",
        ),
        Accelerator(
            "h100-sxm", 80 * GB, 3350 * GB, 989.4 * TFLOP, 700, PCIE_GEN5_X16, "PCIe Gen5 x16",
            "NVIDIA H100 Tensor Core GPU datasheet, SXM5 (dense BF16)",
        ),
        Accelerator(
            "h200", 141 * GB, 4800 * GB, 989.4 * TFLOP, 700, PCIE_GEN5_X16, "PCIe Gen5 x16",
            "NVIDIA H200 Tensor Core GPU datasheet, SXM (dense BF16)",
        ),
        Accelerator(
            "a100-80gb", 80 * GB, 2039 * GB, 312 * TFLOP, 400, PCIE_GEN4_X16, "PCIe Gen4 x16",
            "NVIDIA A100 80GB datasheet, SXM4 (dense BF16; PCIe 4.0 64 GB/s both directions)",
        ),
        Accelerator(
            "gh200", 96 * GB, 4000 * GB, 989.4 * TFLOP, 1000, NVLINK_C2C, "NVLink-C2C",
            "NVIDIA GH200 Grace Hopper Superchip datasheet, 96 GB HBM3 (NVLink-C2C 900 GB/s total)",
        ),
        Accelerator(
            "m2-max", 96 * GB, 400 * GB, 13.6 * TFLOP, 79, 400 * GB, "unified memory",
            "Apple M2 Max (38-core GPU) specifications; unified memory, so the host link is the memory itself",
        ),
    ]
}
