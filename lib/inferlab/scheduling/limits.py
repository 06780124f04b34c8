"""The limits of one iteration: running requests, tokens, one prompt piece, and the whole-piece rule."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import flag, positive_int

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """What one iteration may hold: ``max_running`` requests, ``token_budget`` tokens, ``chunk_tokens`` per piece.

    ``None`` means no limit. The budget holds at least ``max_running`` tokens, so a running decode
    never misses an iteration. ``whole_chunks``: a piece runs only if it fits whole in the budget
    left (our modelling choice; it reproduces the chapter's examples); False cuts it to what is left, as vLLM does.
    """

    max_running: int = 1
    token_budget: int | None = None
    chunk_tokens: int | None = None
    whole_chunks: bool = True

    def __post_init__(self) -> None:
        positive_int("max_running", self.max_running)
        if self.token_budget is not None:
            positive_int("token_budget", self.token_budget)
            if self.token_budget < self.max_running:
                raise ValueError(f"token_budget ({self.token_budget}) must be at least max_running "
                                 f"({self.max_running}) so that every running decode fits in one iteration")
        if self.chunk_tokens is not None:
            positive_int("chunk_tokens", self.chunk_tokens)
        flag("whole_chunks", self.whole_chunks)

    @property
    def budget(self) -> float:
        """Tokens one iteration may run (inf: no limit)."""
        return math.inf if self.token_budget is None else self.token_budget

    @property
    def chunk(self) -> float:
        """Tokens one prompt piece may hold: ``chunk_tokens``, at most the budget (inf: no limit)."""
        return min(self.budget, math.inf if self.chunk_tokens is None else self.chunk_tokens)
