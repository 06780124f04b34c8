"""Prefix reuse in hybrid attention/recurrent models: restore from the nearest state snapshot (8.3.3).

Full attention keeps per-token KV, so any matched prefix length can be resumed. A recurrent
layer keeps only its current state, so the engine can resume only where it saved a snapshot:
the latest snapshot at or before the matched length, and it recomputes the tokens after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import non_negative_int, positive, positive_int
from ..units import MiB

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


def restore(matched_tokens: int, snapshots: "list[int] | np.ndarray") -> Restore:
    """Resume a text match of ``matched_tokens`` from the latest snapshot at or before it (0: from scratch)."""
    non_negative_int("matched_tokens", matched_tokens)
    pos = np.asarray(snapshots)
    if pos.size and (pos.dtype.kind not in "iu" or pos.min() < 0):
        raise ValueError(f"snapshots must be non-negative integer token positions, got {pos[:5].tolist()}...")
    earlier = pos[pos <= matched_tokens]
    start = int(earlier.max()) if earlier.size else 0
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


# ---- DeepSeek V4.1: restoring encoder state after a prefix hit (8.3.3, Figure 8-21) -----------
#: Where the chapter's DeepSeek V4.1 discussion keeps each kind of state.
DEEPSEEK_V41_STATE_HOME = {
    "global KV": "long-lived prefix cache (about a quarter of V4-Flash's size in V4.1-Flash)",
    "encoder SWA": "host DRAM pool, kept a short while (not in the long-lived tier)",
    "decoder SWA": "accelerator, working state of this turn's generation only",
}


#: DeepSeek V4.1-Flash's 40 layers: a causal encoder of 20 followed by a decoder of 20 (its model card).
DEEPSEEK_V41_ENCODER_LAYERS = 20
DEEPSEEK_V41_DECODER_LAYERS = 20


def window_chain_reach(layers: int, window: int) -> int:
    """How many tokens back a stack of ``layers`` sliding-window layers can carry influence to its last position.

    A position reads the ``window - 1`` positions before it in the layer below, so a chain through
    ``layers`` layers reaches ``layers * (window - 1)`` tokens back. A replay of the last ``window``
    tokens reaches only ``window - 1`` back and cuts every longer chain: its state is approximate.
    """
    return positive_int("layers", layers) * (positive_int("window", window) - 1)


@dataclass(frozen=True)
class HybridRestore:
    """One restore path of a CED model: encoder tokens replayed, recomputed and new, then the decoder window replay."""

    path: str
    global_hit: bool
    encoder_swa_hit: bool
    encoder_replayed: int  # cached-prefix tokens run again through the encoder to rebuild its SWA
    encoder_recomputed: int  # prefix tokens recomputed because their global KV is missing
    encoder_new: int  # the uncached suffix
    decoder_window: int  # last tokens of the full prompt whose encoder outputs go through the decoder
    decoder_layers: int

    @property
    def encoder_tokens(self) -> int:
        """Tokens the encoder processes in this prefill."""
        return self.encoder_replayed + self.encoder_recomputed + self.encoder_new


def hybrid_restore_paths(global_hit: bool, encoder_swa_hit: bool, prefix_tokens: int, suffix_tokens: int,
                         window: int = 128, decoder_layers: int = 20) -> HybridRestore:
    """The restore path for a cached ``prefix_tokens`` plus ``suffix_tokens`` new ones, given which states hit.

    Both hit: the encoder runs only the suffix. Only the global KV hits: it also replays the
    last ``window`` tokens of the prefix to rebuild its SWA (an approximate state). The global
    KV misses: the prefix is recomputed (a kept encoder SWA is useless without it). Every path
    ends with the same step: the encoder outputs of the prompt's last ``window`` tokens go
    through the ``decoder_layers`` decoder layers to rebuild the decoder SWA.
    """
    p = non_negative_int("prefix_tokens", prefix_tokens)
    s = non_negative_int("suffix_tokens", suffix_tokens)
    w = positive_int("window", window)
    positive_int("decoder_layers", decoder_layers)
    if p + s == 0:
        raise ValueError("prefix_tokens + suffix_tokens must be positive")
    if global_hit and encoder_swa_hit:
        path, replayed, recomputed = "global KV + encoder SWA hit", 0, 0
    elif global_hit:
        path, replayed, recomputed = "only global KV hits", min(w, p), 0
    else:
        path, replayed, recomputed = "global KV misses", 0, p
    return HybridRestore(path, bool(global_hit), bool(encoder_swa_hit), replayed, recomputed, s, min(w, p + s),
                         decoder_layers)


def hybrid_restore_table(prefix_tokens: int, suffix_tokens: int, window: int = 128,
                         decoder_layers: int = 20) -> list[HybridRestore]:
    """The chapter's three restore paths (both hit, only global KV hits, miss) for the same prompt."""
    return [hybrid_restore_paths(g, e, prefix_tokens, suffix_tokens, window, decoder_layers)
            for g, e in ((True, True), (True, False), (False, False))]
