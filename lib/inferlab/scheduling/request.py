"""A request as the schedulers see it: when it arrives, how long its prompt is, how many tokens it wants."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

from .._validate import non_negative, positive_int

__all__ = ["Request"]


@dataclass(frozen=True)
class Request:
    """A request: arrives at ``arrival_s`` with ``prompt_tokens`` and wants ``output_tokens`` outputs.

    ``name`` keys the results (``Schedule.served``, the serving tables), so it must be a str or an
    int (numpy ints too; not a bool, which equals 0 or 1). Other numbers are stored as float and int.
    """

    name: str | int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        # plain strs, floats and ints pass a quick check (traces hold 10^6 requests); anything else the full one
        if type(self.name) is not str:
            if isinstance(self.name, bool) or not isinstance(self.name, (str, Integral)):
                raise ValueError(f"name must be a str or an int (a hashable key; not a bool), got {self.name!r}")
            if not isinstance(self.name, str):
                object.__setattr__(self, "name", int(self.name))
        if type(self.arrival_s) is not float or not 0.0 <= self.arrival_s < math.inf:
            object.__setattr__(self, "arrival_s", non_negative("arrival_s", self.arrival_s))
        if type(self.prompt_tokens) is not int or self.prompt_tokens < 1:
            object.__setattr__(self, "prompt_tokens", positive_int("prompt_tokens", self.prompt_tokens))
        if type(self.output_tokens) is not int or self.output_tokens < 1:
            object.__setattr__(self, "output_tokens", positive_int("output_tokens", self.output_tokens))
