"""Prefix reuse in hybrid attention/recurrent models: restore from the nearest state snapshot (8.3.3).

Full attention keeps per-token KV, so any matched prefix length can be resumed. A recurrent
layer keeps only its current state, so the engine can resume only where it saved a snapshot:
the latest snapshot at or before the matched length, and it recomputes the tokens after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import non_negative_int, positive, positive_int
from .units import MiB

#: Chapter 2's KDA example, tensors split over eight cards (TP=8): one snapshot per card.
#: The chapter prints 53.6 MiB, 107 MiB for 2 and 1714 MiB for 32; 1714 / 32 = 53.5625 MiB.
KDA_SNAPSHOT_BYTES_TP8 = 53.5625 * MiB


def snapshot_positions(context_tokens: int, interval: int) -> list[int]:
    """Token positions (counted from the start) at which a snapshot is saved every ``interval`` tokens."""
    non_negative_int("context_tokens", context_tokens)
    positive_int("interval", interval)
    return list(range(interval, context_tokens + 1, interval))


@dataclass(frozen=True)
class Restore:
    """Where a matched prefix resumes: the snapshot used and the tokens recomputed after it."""

    matched_tokens: int
    restored_from: int
    recomputed_tokens: int


def restore(matched_tokens: int, snapshots: list[int]) -> Restore:
    """Resume a text match of ``matched_tokens`` from the latest snapshot at or before it (0: from scratch)."""
    non_negative_int("matched_tokens", matched_tokens)
    for s in snapshots:
        non_negative_int("snapshots[i]", s)
    start = max((s for s in snapshots if s <= matched_tokens), default=0)
    return Restore(matched_tokens, start, matched_tokens - start)


def snapshot_storage(n_snapshots: int, bytes_per_snapshot: float = KDA_SNAPSHOT_BYTES_TP8) -> float:
    """Bytes (per card) to keep ``n_snapshots`` snapshots."""
    return non_negative_int("n_snapshots", n_snapshots) * positive("bytes_per_snapshot", bytes_per_snapshot)


def spacing_tradeoff(context_tokens: int, interval: int,
                     bytes_per_snapshot: float = KDA_SNAPSHOT_BYTES_TP8) -> tuple[int, float, int, float]:
    """(snapshots kept, their bytes, worst-case and mean tokens recomputed over uniform match points)."""
    n = len(snapshot_positions(context_tokens, interval))
    worst = min(interval - 1, context_tokens)
    mean = float((np.arange(context_tokens + 1) % interval).mean())
    return n, snapshot_storage(n, bytes_per_snapshot), worst, mean
