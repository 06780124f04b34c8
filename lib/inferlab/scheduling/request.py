"""A request as the schedulers see it: when it arrives, how long its prompt is, how many tokens it wants."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import non_negative, positive_int

__all__ = ["Request"]


@dataclass(frozen=True)
class Request:
    """A request: arrives at ``arrival_s`` with ``prompt_tokens`` and wants ``output_tokens`` outputs."""

    name: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        # plain floats and ints pass a quick check (traces hold 10^6 requests); anything else the full one
        if type(self.arrival_s) is not float or not 0.0 <= self.arrival_s < math.inf:
            non_negative("arrival_s", self.arrival_s)
        if type(self.prompt_tokens) is not int or self.prompt_tokens < 1:
            positive_int("prompt_tokens", self.prompt_tokens)
        if type(self.output_tokens) is not int or self.output_tokens < 1:
            positive_int("output_tokens", self.output_tokens)
