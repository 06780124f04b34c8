"""The scheduler's iteration log, kept compact: arrays of start and duration, each iteration's work built when read.

A simulation of 10^6 requests runs ~10^8 decode items; the log stores only what it cannot
recompute (iteration times and, for the event-driven engine, the prompt pieces and each
request's decode range) and builds an ``Iteration`` with its ``Work`` tuple on access.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import numpy as np

from .._validate import function, instance, non_negative, non_negative_int, positive, real_array
from .iteration import Work

if TYPE_CHECKING:
    from .request import Request

__all__ = ["Iteration", "IterationLog", "EventWork"]


@dataclass(frozen=True)
class Iteration:
    """One iteration of the log: when it started, how long it took, which work of which request it ran."""

    index: int
    start_s: float
    duration_s: float
    work: tuple[Work, ...]

    def __post_init__(self) -> None:
        # the log builds iterations from its own arrays: one check; anything else the full one
        if not (type(self.index) is int and type(self.start_s) is float and type(self.duration_s) is float
                and 0 <= self.index and 0.0 <= self.start_s < math.inf and 0.0 < self.duration_s < math.inf
                and type(self.work) is tuple and all(type(w) is Work for w in self.work)):
            non_negative_int("index", self.index)
            non_negative("start_s", self.start_s)
            positive("duration_s", self.duration_s)
            instance("work", self.work, tuple, "a tuple of Work items")
            for w in self.work:
                instance("work", w, Work, "a tuple of Work items")

    @property
    def end_s(self) -> float:
        """Time the iteration ends and its tokens are emitted."""
        return self.start_s + self.duration_s

    @property
    def new_tokens(self) -> int:
        """Tokens the iteration runs (prompt pieces and decodes)."""
        return sum(w.new_tokens for w in self.work)


def _frozen(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` as a read-only float64 copy if they are a 1-D sequence of finite real numbers."""
    out = real_array(name, values)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} must be a 1-D sequence of finite seconds, got {values!r:.80}")
    out.flags.writeable = False
    return out


class IterationLog(Sequence[Iteration]):
    """Every iteration of a run, in order: ``start_s``, ``duration_s``, ``end_s`` arrays; ``Iteration`` objects on access."""

    def __init__(self, start_s: Sequence[float] | np.ndarray, duration_s: Sequence[float] | np.ndarray,
                 work_of: Callable[[int], tuple[Work, ...]]) -> None:
        self.start_s = _frozen("start_s", start_s)
        self.duration_s = _frozen("duration_s", duration_s)
        if self.start_s.shape != self.duration_s.shape:
            raise ValueError("start_s and duration_s must have the same length")
        self.end_s = _frozen("end_s", self.start_s + self.duration_s)
        self._work_of = function("work_of", work_of)

    def __len__(self) -> int:
        return self.start_s.size

    @overload
    def __getitem__(self, k: int) -> Iteration: ...
    @overload
    def __getitem__(self, k: slice) -> tuple[Iteration, ...]: ...

    def __getitem__(self, k: int | slice) -> Iteration | tuple[Iteration, ...]:
        if isinstance(k, slice):
            return tuple(self[i] for i in range(*k.indices(len(self))))
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"iteration {k} out of range for a log of {n}")
        k = int(k) % n
        return Iteration(k, float(self.start_s[k]), float(self.duration_s[k]), self._work_of(k))

    def __iter__(self) -> Iterator[Iteration]:
        return (self[k] for k in range(len(self)))

    def __repr__(self) -> str:
        return f"IterationLog({len(self)} iterations)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IterationLog):
            return NotImplemented
        return (np.array_equal(self.start_s, other.start_s) and np.array_equal(self.duration_s, other.duration_s)
                and all(self._work_of(k) == other._work_of(k) for k in range(len(self))))

    __hash__ = None  # type: ignore[assignment]


class EventWork:
    """Rebuilds an iteration's ``Work`` tuple from the event-driven engine's compact record.

    A decoding request runs in every iteration from the one after its prompt completes to the
    one that emits its last token, so its decodes are a range; prompt pieces are stored one per row
    (iteration, request, tokens, cached, emits), in iteration order. Order within an iteration is the
    engine's plan: decodes in admission order, then pieces in admission order. Memory is O(requests).
    """

    def __init__(self, requests: Sequence["Request"], first_token_iter: np.ndarray, pieces: np.ndarray) -> None:
        self._requests = requests
        self._prompt = np.fromiter((r.prompt_tokens for r in requests), dtype=np.int64, count=len(requests))
        output = np.fromiter((r.output_tokens for r in requests), dtype=np.int64, count=len(requests))
        self._first = first_token_iter
        self._last = first_token_iter + output - 1  # iteration of the last token
        self._by_first = np.argsort(first_token_iter, kind="stable")
        self._first_sorted = first_token_iter[self._by_first]
        self._longest = int(output.max())
        self._pieces = pieces.reshape(-1, 5)

    def _decoding(self, k: int) -> np.ndarray:
        """Requests (arrival-order indices, ascending) that decode in iteration ``k``: first < k <= last."""
        lo, hi = np.searchsorted(self._first_sorted, [k - self._longest + 1, k])
        candidates = self._by_first[lo:hi]
        return np.sort(candidates[self._last[candidates] >= k])

    def __call__(self, k: int) -> tuple[Work, ...]:
        reqs, prompt, first = self._requests, self._prompt, self._first
        work = [Work(reqs[i], "decode", 1, int(prompt[i] + k - first[i] - 1), 1) for i in self._decoding(k).tolist()]
        lo, hi = np.searchsorted(self._pieces[:, 0], [k, k + 1])
        work += [Work(reqs[i], "prefill", c, h, e) for _, i, c, h, e in self._pieces[lo:hi].tolist()]
        return tuple(work)
