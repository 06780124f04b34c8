"""The running example of the whole book: one instance, two request classes, one deadline."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ._validate import non_negative_int, positive_int
from .hardware import ACCELERATORS, Accelerator
from .models import MODELS, ModelSpec
from .units import GiB


@dataclass(frozen=True)
class RequestClass:
    """A kind of request: prompt and output lengths, and how much of the prompt all such requests share."""

    name: str
    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0

    def __post_init__(self) -> None:
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
