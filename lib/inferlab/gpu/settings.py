"""A GPU run's settings: one frozen ``Settings`` passed to every experiment, and the three presets.

``Settings`` holds what every experiment of a run shares (device, preset, model, dtype, block
size, warm-up and repeats, memory fraction, the decode attention, whether to compile); each
experiment module holds its own sizes at each preset (``DECODE_PRESETS`` ...), also frozen
dataclasses. ``settings_for(preset, device)`` gives a preset's settings:

- ``full``: the command's default, minutes on a large GPU; the only runs recorded in data/measured/;
- ``quick``: a notebook cell, under a minute per experiment;
- ``tiny``: seconds; on the CPU it proves the code (its times mean nothing), on CUDA
  (``--device cuda --tiny``) it is a one-minute smoke run through every CUDA branch (CUDA graphs,
  pinned memory, streams, torch.compile, the pinned attention backend) at small sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._validate import fraction, one_of, positive, positive_int
from ..hardware import ACCELERATORS
from ..kernels.tiny_model import TinyConfig
from ..models import MODELS, ModelSpec

PRESETS = ("full", "quick", "tiny")
DEVICES = ("cuda", "cpu")

#: The model of the tiny preset: two layers of a Qwen3-shaped decoder (GQA 4:2, head_dim 16).
TINY = TinyConfig(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, hidden_size=32, intermediate_size=64,
                  vocab_size=128).spec


@dataclass(frozen=True)
class Settings:
    """How one GPU run runs: the same for every experiment in it (each experiment's sizes come from its preset)."""

    device: str = "cuda"
    preset: str = "quick"
    model: str | ModelSpec = "qwen3-8b"
    dtype: str = "bfloat16"
    block_size: int = 16
    card: str | None = None  # inferlab.hardware key, for a card that is not recognized by name and memory
    warmup: int = 3
    repeats: int = 10
    memory_fraction: float = 0.8  # of the free memory, for weights and KV pool
    n_layers: int | None = None  # None: as many as fit
    attention: str = "gather"  # decode attention (inferlab.gpu.attention.DECODE_ATTENTION)
    compile: bool | None = None  # torch.compile rows; None: on CUDA only (Inductor on the CPU takes minutes)
    flush_l2: bool = True  # overwrite the L2 cache before every timed repeat (CUDA)
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        one_of("device", self.device, DEVICES)
        one_of("preset", self.preset, PRESETS)
        if not isinstance(self.model, ModelSpec):
            one_of("model", self.model, MODELS)
        if self.card is not None:
            one_of("card", self.card, ACCELERATORS)
        positive_int("block_size", self.block_size)
        positive_int("repeats", self.repeats)
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {self.warmup!r}")
        fraction("memory_fraction", positive("memory_fraction", self.memory_fraction))
        if self.n_layers is not None:
            positive_int("n_layers", self.n_layers)

    @property
    def spec(self) -> ModelSpec:
        """The model's shape."""
        return self.model if isinstance(self.model, ModelSpec) else MODELS[self.model]

    @property
    def graphs(self) -> bool:
        """Whether CUDA graphs exist here (they do on CUDA only)."""
        return self.device == "cuda"

    @property
    def compiles(self) -> bool:
        """Whether the run adds torch.compile rows."""
        return self.device == "cuda" if self.compile is None else bool(self.compile)


PRESET_SETTINGS: dict[str, dict[str, object]] = {
    "full": dict(repeats=10),
    "quick": dict(repeats=5),
    "tiny": dict(repeats=2, warmup=1, model=TINY, block_size=4),
}


def settings_for(preset: str = "quick", device: str = "cuda", **changes: object) -> Settings:
    """The settings of ``preset`` on ``device``, with ``changes`` (any ``Settings`` field) applied."""
    one_of("preset", preset, PRESETS)
    unknown = set(changes) - set(Settings.__dataclass_fields__)
    if unknown:
        raise ValueError(f"changes must be Settings fields, got {sorted(unknown)}")
    return Settings(device=device, preset=preset, **{**PRESET_SETTINGS[preset], **changes})


def with_sizes(sizes: object, changes: dict[str, object]) -> object:
    """``sizes`` (an experiment's frozen sizes) with ``changes``; a name it does not have is refused."""
    unknown = set(changes) - set(type(sizes).__dataclass_fields__)
    if unknown:
        raise ValueError(f"overrides must be fields of Settings or {type(sizes).__name__}, got {sorted(unknown)}")
    return replace(sizes, **changes)
