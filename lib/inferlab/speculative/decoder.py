"""A real speculative decoder: draft, verify in one target pass, keep the agreed tokens, roll the paged KV back.

The target sees its context only through the paged KV cache (``BlockManager.read``), as attention
would. The cache holds every committed token except the newest one (its KV is written by the next
pass). A round appends that token and the k drafts (k + 1 KV slots), scores the k + 1 positions in
one call, keeps n drafts plus one token of the target's, and truncates the cache to the committed
tokens: the rejected drafts' KV slots are released and their blocks return to the pool when empty
(Chapter 8, section 8.5.1). Greedy mode emits exactly what plain greedy decoding emits; sampling
mode emits sequences with exactly the plain sampling distribution (``speculative.verify_sample``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._validate import MAX_COUNT, function, instance, positive_int, token_ids
from ..kvcache.block_manager import BlockManager, OutOfBlocks
from .prompt_lookup import Drafter
from .verify import Verdict, greedy_verify, verify_sample

__all__ = ["TargetModel", "RoundRecord", "DecodeResult", "speculative_decode"]


class TargetModel(Protocol):
    """What the decoder needs of a target: next-token distributions at chosen positions of a token sequence."""

    def probs_at(self, tokens: Sequence[int] | np.ndarray, positions: Sequence[int] | np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class RoundRecord:
    """One verification pass: drafts proposed and accepted, tokens emitted, and KV tokens before/written/kept."""

    drafted: int
    accepted: int
    emitted: tuple[int, ...]
    kv_before: int
    kv_written: int
    kv_after: int

    def __post_init__(self) -> None:
        if not 0 <= self.accepted <= self.drafted or len(self.emitted) < 1:
            raise ValueError("a round accepts 0..drafted drafts and emits at least one token")
        if self.kv_after != self.kv_before + 1 + self.accepted or self.kv_written != self.drafted + 1:
            raise ValueError("a round writes drafted + 1 KV slots and keeps accepted + 1 of them")


@dataclass(frozen=True)
class DecodeResult:
    """Output tokens (the first from prefill, the rest from verification rounds) and the round log."""

    tokens: np.ndarray
    rounds: tuple[RoundRecord, ...]

    def __post_init__(self) -> None:
        instance("tokens", self.tokens, np.ndarray, "an int64 array of token ids")
        token_ids(self.tokens, "tokens")
        for r in instance("rounds", self.rounds, tuple, "a tuple of RoundRecord"):
            instance("rounds", r, RoundRecord, "a tuple of RoundRecord")

    @property
    def drafted(self) -> int:
        """Draft tokens proposed over all rounds."""
        return sum(r.drafted for r in self.rounds)

    @property
    def accepted(self) -> int:
        """Draft tokens accepted over all rounds."""
        return sum(r.accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """Accepted over proposed draft tokens (0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_round(self) -> float:
        """Tokens emitted by verification rounds per round (plain decoding: 1)."""
        return (len(self.tokens) - 1) / len(self.rounds) if self.rounds else 1.0

    @property
    def target_passes(self) -> int:
        """Target forward passes: the prefill plus one per round (plain decoding: one per token)."""
        return 1 + len(self.rounds)


def _choose(p: np.ndarray, rng: np.random.Generator | None) -> int:
    return int(np.argmax(p)) if rng is None else int(rng.choice(p.size, p=p))


def speculative_decode(target: TargetModel, prompt: Sequence[int] | np.ndarray, n_tokens: int,
                       drafter: Drafter | None = None, rng: np.random.Generator | None = None,
                       manager: BlockManager | None = None, seq_id: object = "request",
                       after_round: Callable[[BlockManager, RoundRecord], None] | None = None) -> DecodeResult:
    """Emit ``n_tokens`` after ``prompt``: greedy if ``rng`` is None, else sampled; no drafter = plain decoding.

    ``manager`` holds the KV (a private 16-token-block pool sized for the request by default); the
    sequence is freed at the end. ``after_round`` sees the pool after each round's rollback.
    """
    if not callable(getattr(target, "probs_at", None)):
        raise ValueError(f"target must be a model with probs_at(tokens, positions) (a TargetModel), got {target!r:.80}")
    vocab = getattr(target, "vocab_size", None)  # a target that says its vocabulary has the prompt checked against it
    prompt = token_ids(prompt, "prompt", allow_empty=False, **({} if vocab is None else {"limit": vocab}))
    n = positive_int("n_tokens", n_tokens, at_most=MAX_COUNT)
    if drafter is not None and not callable(getattr(drafter, "propose", None)):
        raise ValueError(f"drafter must be a Drafter with propose(tokens, rng) or None, got {drafter!r:.80}")
    if rng is not None:
        instance("rng", rng, np.random.Generator, "a numpy.random.Generator or None")
    if manager is not None:
        instance("manager", manager, BlockManager, "a BlockManager or None")
    if after_round is not None:
        function("after_round", after_round)
    k_max = getattr(drafter, "k", 0) if drafter is not None else 0
    if manager is None:
        manager = BlockManager(-(-(len(prompt) + n + k_max + 1) // 16) + 1, 16)
    if not manager.can_allocate(prompt):
        raise OutOfBlocks(f"prompt needs {manager.blocks_needed(prompt)} blocks, {manager.num_free} free")
    manager.allocate(seq_id, prompt)
    try:
        first = _choose(target.probs_at(manager.read(seq_id), [len(prompt)])[0], rng)  # prefill's token
        out, rounds, pending = [first], [], first
        while len(out) < n:
            context = np.asarray([*manager.read(seq_id), pending], dtype=np.int64)
            draft, q = (np.zeros(0, dtype=np.int64), None) if drafter is None else drafter.propose(context, rng)
            room = n - len(out) - 1  # drafts beyond the last needed token would be thrown away
            draft, q = draft[:room], None if q is None else q[:room]
            before = manager.num_tokens(seq_id)
            written = [pending, *(int(t) for t in draft)]
            if not manager.can_append(seq_id, len(written)):
                raise OutOfBlocks(f"round needs {manager.append_blocks_needed(seq_id, len(written))} blocks, "
                                  f"{manager.num_free} free")
            manager.append(seq_id, written)
            kv = manager.read(seq_id)  # one target pass over the k + 1 new positions
            p_rows = target.probs_at(kv, np.arange(before + 1, before + len(written) + 1))
            verdict: Verdict = (greedy_verify(draft.tolist(), np.argmax(p_rows, axis=1).tolist()) if rng is None
                                else verify_sample(p_rows, q, draft, rng))
            manager.truncate(seq_id, before + 1 + verdict.accepted)  # roll back the rejected drafts' KV
            record = RoundRecord(len(draft), verdict.accepted, tuple(int(t) for t in verdict.emitted),
                                 before, len(written), manager.num_tokens(seq_id))
            rounds.append(record)
            if after_round is not None:
                after_round(manager, record)
            out.extend(record.emitted)
            pending = record.emitted[-1]
        return DecodeResult(np.asarray(out[:n], dtype=np.int64), tuple(rounds))
    finally:
        manager.free(seq_id)
