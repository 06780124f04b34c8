"""A small deterministic language model over characters: a smoothed n-gram plus a copy (cache) component.

The target of the book's real speculative decoder, fast on a CPU. The next-character distribution
after a context is

    p(x | ctx) = (1 - lam) * p_base(x | last n-1 chars) + lam * p_copy(x | ctx),

where p_base is an add-k smoothed n-gram estimated from a training text and p_copy counts which
character followed earlier occurrences of the last c-1 characters *in the context itself* (a cache
language model, Kuhn and De Mori 1990). The copy part makes the model reuse phrases from its
prompt, as large models do when they quote or edit their input, which is what prompt-lookup
drafting exploits. The model is stateless: every distribution is computed from the tokens it is
given, so a decoder that feeds it the tokens stored in the paged KV cache sees any rollback error.
Counts are integers, so scoring k + 1 positions in one call gives bit-identical rows to scoring
them one at a time (greedy argmax ties break to the lowest id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._validate import fraction, positive, positive_int

__all__ = ["VOCAB", "NgramLM", "TRAINING_TEXT"]

#: Lower-case letters, digits, space, newline and a little punctuation (47 symbols).
VOCAB: str = " \nabcdefghijklmnopqrstuvwxyz0123456789.,:;=_()/'-"

#: Our own training text (English prose about serving language models); any text of VOCAB characters works.
TRAINING_TEXT = """\
a language model writes its answer one token at a time. every new token needs a full pass over the
weights, and the pass reads the cache of keys and values that the earlier tokens left behind. when
the batch is small, the pass spends most of its time reading weights, not computing. the same read
could check several tokens at once, if only we knew which tokens to check. a draft proposes them.
the draft may come from a small model, from extra heads of the large model, or simply from the text
the model has already seen. the target model then scores every proposed position in one pass. it
keeps the longest prefix it agrees with, adds one token of its own, and throws the rest away. the
cache is cut back to the kept tokens, the sampler and the grammar state are restored, and the next
round starts from the corrected text. when the draft is good, one pass yields several tokens. when
the draft is poor, the pass still yields one token, so the answer is never worse, only the time
spent on drafting is lost. the rule that keeps sampled answers exact accepts a drafted token with
probability min(1, p/q) and otherwise draws from the part of the target that the draft left out.
a request that repeats its input, such as an edit of a document or a summary that quotes its
source, gives long drafts for free: look up the last few characters in the context and propose
what followed them there.
"""


def _encode(text: str) -> np.ndarray:
    lookup = {ch: i for i, ch in enumerate(VOCAB)}
    bad = sorted({ch for ch in text.lower() if ch not in lookup})
    if bad:
        raise ValueError(f"text must use only the characters of VOCAB, found {bad!r}")
    return np.fromiter((lookup[ch] for ch in text.lower()), dtype=np.int64, count=len(text))


def _context_ids(tokens: np.ndarray, width: int, vocab: int) -> np.ndarray:
    """Integer id of each window of ``width`` tokens: ids[i] encodes tokens[i : i + width]."""
    if width == 0:
        return np.zeros(tokens.size + 1, dtype=np.int64)
    if tokens.size < width:
        return np.zeros(0, dtype=np.int64)
    powers = vocab ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return sliding_window_view(tokens, width) @ powers


@dataclass(frozen=True, eq=False)
class NgramLM:
    """Base n-gram table [V**(order-1), V] plus a copy component over contexts of ``copy_order - 1`` tokens."""

    order: int
    copy_order: int
    copy_weight: float
    base: np.ndarray

    def __post_init__(self) -> None:
        positive_int("order", self.order), positive_int("copy_order", self.copy_order)
        fraction("copy_weight", self.copy_weight)
        v = len(VOCAB)
        if self.copy_order < 2:
            raise ValueError(f"copy_order must be >= 2, got {self.copy_order}")
        if self.base.shape != (v ** (self.order - 1), v):
            raise ValueError(f"base must have shape [V**(order-1), V] = [{v ** (self.order - 1)}, {v}]")
        if not np.allclose(self.base.sum(axis=1), 1.0) or np.any(self.base <= 0):
            raise ValueError("base rows must be positive distributions")

    @classmethod
    def fit(cls, text: str = TRAINING_TEXT, order: int = 3, smoothing: float = 0.002, copy_order: int = 4,
            copy_weight: float = 0.85) -> NgramLM:
        """Estimate the base n-gram from ``text`` with add-``smoothing`` counts."""
        positive_int("order", order)
        positive("smoothing", smoothing)
        v = len(VOCAB)
        ids = _encode(text)
        if ids.size < order:
            raise ValueError(f"text must hold at least order = {order} characters")
        ctx = _context_ids(ids[:-1], order - 1, v)[: ids.size - order + 1]
        counts = np.zeros((v ** (order - 1), v))
        np.add.at(counts, (ctx, ids[order - 1:]), 1.0)
        counts += smoothing
        return cls(order, copy_order, copy_weight, counts / counts.sum(axis=1, keepdims=True))

    # ---- text <-> token ids -----------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of token ids (characters of VOCAB)."""
        return len(VOCAB)

    @staticmethod
    def encode(text: str) -> np.ndarray:
        """Token ids of ``text`` (lower-cased)."""
        return _encode(text)

    @staticmethod
    def decode(ids: Sequence[int] | np.ndarray) -> str:
        """Text of token ids."""
        return "".join(VOCAB[int(i)] for i in ids)

    # ---- scoring ----------------------------------------------------------------------
    def probs_at(self, tokens: Sequence[int] | np.ndarray, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """Next-token distributions [len(positions), V]: row r is p(. | tokens[:positions[r]])."""
        toks = np.asarray(tokens, dtype=np.int64)
        pos = np.asarray(positions, dtype=np.int64)
        v = self.vocab_size
        if toks.ndim != 1 or np.any((toks < 0) | (toks >= v)):
            raise ValueError(f"tokens must be a 1-D sequence of ids in [0, {v})")
        if pos.ndim != 1 or np.any((pos < 1) | (pos > toks.size)):
            raise ValueError(f"positions must lie in [1, len(tokens)] = [1, {toks.size}]")
        padded = np.concatenate((np.zeros(self.order - 1, dtype=np.int64), toks))  # left-pad with spaces
        base_ctx = _context_ids(padded, self.order - 1, v)[pos]
        probs = self.base[base_ctx]
        w = self.copy_order - 1
        if self.copy_weight == 0 or toks.size <= w:
            return probs
        ctx = _context_ids(toks, w, v)  # ctx[i] = id of toks[i : i + w], followed by toks[i + w]
        follow = toks[w:]
        starts = ctx[: follow.size]
        query = np.where(pos >= w, ctx[np.maximum(pos - w, 0)], -1)
        # occurrence i counts for position P when its context matches and its follower lies before P
        hit = (starts[None, :] == query[:, None]) & (np.arange(follow.size)[None, :] + w < pos[:, None])
        counts = hit.astype(np.int64) @ np.eye(v, dtype=np.int64)[follow]
        totals = counts.sum(axis=1, keepdims=True)
        copy = counts / np.maximum(totals, 1)
        mixed = (1 - self.copy_weight) * probs + self.copy_weight * copy
        return np.where(totals > 0, mixed, probs)

    def next_probs(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """p(. | tokens): the distribution of the token after all of ``tokens``."""
        return self.probs_at(tokens, [len(tokens)])[0]

    # ---- plain decoding (the reference the speculative decoder must reproduce) ----------
    def generate(self, prompt: Sequence[int] | np.ndarray, n_tokens: int,
                 rng: np.random.Generator | None = None) -> np.ndarray:
        """``n_tokens`` tokens after ``prompt``, one model call each: greedy if ``rng`` is None, else sampled."""
        positive_int("n_tokens", n_tokens)
        toks = [int(t) for t in prompt]
        for _ in range(n_tokens):
            p = self.next_probs(toks)
            toks.append(int(np.argmax(p)) if rng is None else int(rng.choice(p.size, p=p)))
        return np.asarray(toks[len(toks) - n_tokens:], dtype=np.int64)

    def continuations(self, prompt: Sequence[int] | np.ndarray, length: int, min_prob: float) -> dict[tuple[int, ...], float]:
        """Exact probabilities of every ``length``-token continuation whose probability is >= ``min_prob``.

        A prefix is less likely than none of its extensions, so pruning prefixes below ``min_prob``
        loses no qualifying sequence. The plain-sampling reference for the decoder's exactness test.
        """
        positive_int("length", length)
        positive("min_prob", min_prob)
        base = [int(t) for t in prompt]
        frontier: dict[tuple[int, ...], float] = {(): 1.0}
        for _ in range(length):
            nxt: dict[tuple[int, ...], float] = {}
            for prefix, prob in frontier.items():
                joint = prob * self.next_probs(base + list(prefix))
                for x in np.flatnonzero(joint >= min_prob):
                    nxt[(*prefix, int(x))] = float(joint[x])
            frontier = nxt
        return frontier
