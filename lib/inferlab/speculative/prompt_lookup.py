"""Drafts without a draft model: look up the context's last n tokens earlier in the context and propose what followed.

Prompt lookup (n-gram drafting; vLLM's ``ngram`` method, transformers' ``prompt_lookup_num_tokens``)
tries the longest suffix first, from ``max_ngram`` down to ``min_ngram`` tokens, takes its most
recent earlier occurrence, and proposes up to k tokens that followed it. It costs a search, no
weights and no KV of its own; it proposes nothing when no suffix recurs (Chapter 8, section 8.5.3).
A draft model proposes from its own distribution instead; ``ModelDrafter`` wraps any model with
``next_probs`` and samples (or takes the argmax of) its distribution token by token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._validate import non_negative_int, positive_int

__all__ = ["lookup_draft", "PromptLookup", "ModelDrafter", "Drafter"]


def lookup_draft(tokens: Sequence[int] | np.ndarray, k: int, max_ngram: int = 3, min_ngram: int = 1) -> np.ndarray:
    """Up to ``k`` tokens that followed the most recent earlier occurrence of the longest matching suffix."""
    toks = np.asarray(tokens, dtype=np.int64)
    non_negative_int("k", k)
    hi, lo = positive_int("max_ngram", max_ngram), positive_int("min_ngram", min_ngram)
    if lo > hi:
        raise ValueError(f"min_ngram ({lo}) must not exceed max_ngram ({hi})")
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    for n in range(min(hi, toks.size - 1), lo - 1, -1):
        windows = sliding_window_view(toks[:-1], n)  # windows that end before the last token
        starts = np.flatnonzero(np.all(windows == toks[-n:], axis=1))
        if starts.size:
            begin = int(starts[-1]) + n
            return toks[begin:begin + k].copy()
    return np.zeros(0, dtype=np.int64)


class Drafter(Protocol):
    """Proposes draft tokens after ``tokens``; returns (draft ids, draft distributions [len, V] or None if fixed)."""

    def propose(self, tokens: np.ndarray, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray | None]: ...


@dataclass(frozen=True)
class PromptLookup:
    """Prompt-lookup drafter: ``k`` tokens after the longest recurring suffix of ``min_ngram`` .. ``max_ngram`` tokens."""

    k: int = 4
    max_ngram: int = 3
    min_ngram: int = 1

    def __post_init__(self) -> None:
        positive_int("k", self.k)
        if positive_int("min_ngram", self.min_ngram) > positive_int("max_ngram", self.max_ngram):
            raise ValueError(f"min_ngram ({self.min_ngram}) must not exceed max_ngram ({self.max_ngram})")

    def propose(self, tokens: np.ndarray, rng: np.random.Generator | None = None) -> tuple[np.ndarray, None]:
        """The looked-up draft; a fixed proposal (q is a point mass on each drafted token)."""
        return lookup_draft(tokens, self.k, self.max_ngram, self.min_ngram), None


class _NextProbs(Protocol):
    def next_probs(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelDrafter:
    """A draft model run serially: ``k`` tokens, each from its next-token distribution (argmax when greedy)."""

    model: _NextProbs
    k: int = 4

    def __post_init__(self) -> None:
        positive_int("k", self.k)

    def propose(self, tokens: np.ndarray, rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draft ids and the draft distributions q they were drawn from ([k, V])."""
        ctx = [int(t) for t in tokens]
        drafts, rows = [], []
        for _ in range(self.k):
            q = self.model.next_probs(ctx)
            x = int(np.argmax(q)) if rng is None else int(rng.choice(q.size, p=q))
            drafts.append(x), rows.append(q), ctx.append(x)
        return np.asarray(drafts, dtype=np.int64), np.stack(rows)
