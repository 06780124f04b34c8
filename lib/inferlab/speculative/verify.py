"""Draft and verify: greedy verification and speculative (rejection) sampling, the rules that keep the target's output.

A round proposes k draft tokens d_1..d_k; one target pass scores k + 1 positions (after the last
committed token and after each draft). Greedy verification keeps the longest prefix of drafts that
equals the target's own choices, then emits the target's token at the first mismatch (the
correction) or, when every draft matched, the token after the last one (the bonus) (Chapter 8,
section 8.5.1, Figure 8-29). Speculative sampling accepts a draft x drawn from the draft
distribution q with probability min(1, p(x)/q(x)) and, on rejection, draws from the normalized
positive part [p - q]+, so every emitted token is distributed exactly as p (Leviathan et al. 2023;
Chen et al. 2023). The round arithmetic (expected tokens per round) lives in ``cost``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .._validate import positive_int

__all__ = ["Verdict", "greedy_verify", "acceptance_probability", "acceptance_rate", "residual",
           "emission_distribution", "sample_position", "verify_sample", "two_symbol_paths"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one round: how many drafts were kept and the tokens the round emits."""

    draft: tuple[Hashable, ...]
    accepted: int
    emitted: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.accepted <= len(self.draft):
            raise ValueError(f"accepted must lie in [0, {len(self.draft)}], got {self.accepted}")
        if len(self.emitted) != self.accepted + 1 or tuple(self.emitted[:self.accepted]) != self.draft[:self.accepted]:
            raise ValueError("emitted must be the accepted drafts followed by exactly one target token")

    @property
    def rejected(self) -> tuple[Hashable, ...]:
        """Drafts discarded: the first mismatch and everything drafted after it."""
        return self.draft[self.accepted:]

    @property
    def bonus(self) -> bool:
        """Whether every draft was accepted, so the last emitted token is the bonus token."""
        return self.accepted == len(self.draft)

    @property
    def last(self) -> Hashable:
        """The target's own token that closes the round (the correction or the bonus)."""
        return self.emitted[-1]


def greedy_verify(draft: Sequence[Hashable], target: Sequence[Hashable]) -> Verdict:
    """Greedy verification: ``target`` holds the target's argmax at each of the len(draft) + 1 positions."""
    k = len(draft)
    if len(target) != k + 1:
        raise ValueError(f"target must hold len(draft) + 1 = {k + 1} choices (one per verified position), "
                         f"got {len(target)}")
    d, t = np.asarray(list(draft), dtype=object), np.asarray(list(target), dtype=object)
    mismatch = np.flatnonzero(d != t[:k])
    n = int(mismatch[0]) if mismatch.size else k
    return Verdict(tuple(draft), n, (*draft[:n], target[n]))


def _dist(name: str, p: np.ndarray | Sequence[float]) -> np.ndarray:
    """``p`` as a float64 probability vector (non-negative, sums to 1 within 1e-9), else ValueError."""
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1) > 1e-9:
        raise ValueError(f"{name} must be finite, >= 0 and sum to 1, got sum {arr.sum()!r}")
    return arr


def _pair(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    p, q = _dist("p", p), _dist("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must cover the same vocabulary, got sizes {p.size} and {q.size}")
    return p, q


def acceptance_probability(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """alpha(x) = min(1, p(x)/q(x)) for every token x (1 where q(x) = 0: such a token is never drafted)."""
    p, q = _pair(p, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1.0)), 1.0)


def acceptance_rate(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> float:
    """Probability that a draft drawn from q is accepted: sum_x min(p(x), q(x)) = 1 - total variation."""
    p, q = _pair(p, q)
    return float(np.minimum(p, q).sum())


def residual(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """The rejection distribution [p - q]+ / sum [p - q]+ (p itself when p == q: then nothing is ever rejected)."""
    p, q = _pair(p, q)
    r = np.maximum(p - q, 0.0)
    total = r.sum()
    return p.copy() if total <= 0 else r / total


def emission_distribution(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """Distribution of the emitted token: min(p, q) accepted directly plus (1 - sum min(p, q)) x residual."""
    p, q = _pair(p, q)
    accepted = np.minimum(p, q)
    return accepted + (1.0 - accepted.sum()) * residual(p, q)


def sample_position(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float], n: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` independent single-position rounds: (emitted tokens, whether each draft was accepted)."""
    p, q = _pair(p, q)
    positive_int("n", n)
    vocab = p.size
    drafts = rng.choice(vocab, size=n, p=q)
    accepted = rng.random(n) < acceptance_probability(p, q)[drafts]
    fallback = rng.choice(vocab, size=n, p=residual(p, q))
    return np.where(accepted, drafts, fallback), accepted


def verify_sample(p_rows: np.ndarray, q_rows: np.ndarray | None, draft: Sequence[int],
                  rng: np.random.Generator) -> Verdict:
    """Speculative sampling of one round: ``p_rows`` [k+1, V] target, ``q_rows`` [k, V] draft (None: drafts are fixed).

    A fixed draft (prompt lookup) is a point mass q = 1 at the drafted token, so it is accepted with
    probability p(x) and a rejection draws from p with x removed, renormalized.
    """
    k = len(draft)
    p_rows = np.asarray(p_rows, dtype=np.float64)
    if p_rows.ndim != 2 or p_rows.shape[0] != k + 1:
        raise ValueError(f"p_rows must have shape [len(draft) + 1, V] = [{k + 1}, V], got {p_rows.shape}")
    vocab = p_rows.shape[1]
    if q_rows is None:
        q_rows = np.zeros((k, vocab))
        q_rows[np.arange(k), np.asarray(draft, dtype=np.int64)] = 1.0
    q_rows = np.asarray(q_rows, dtype=np.float64)
    if q_rows.shape != (k, vocab):
        raise ValueError(f"q_rows must have shape [len(draft), V] = [{k}, {vocab}], got {q_rows.shape}")
    tokens = np.asarray(draft, dtype=np.int64)
    if np.any((tokens < 0) | (tokens >= vocab)):
        raise ValueError(f"draft tokens must lie in [0, {vocab}), got {list(draft)}")
    rows = np.arange(k)
    px, qx = p_rows[rows, tokens], q_rows[rows, tokens]
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(qx > 0, np.minimum(1.0, px / np.where(qx > 0, qx, 1.0)), 0.0)
    rejected = np.flatnonzero(rng.random(k) >= alpha)
    kept = tuple(int(t) for t in tokens)
    if rejected.size:
        i = int(rejected[0])
        fix = int(rng.choice(vocab, p=residual(p_rows[i], q_rows[i])))
        return Verdict(kept, i, (*kept[:i], fix))
    bonus = int(rng.choice(vocab, p=_dist("p_rows[k]", p_rows[k])))
    return Verdict(kept, k, (*kept, bonus))


def two_symbol_paths(p_first: float = 0.25, drafted: int = 0) -> dict[str, float]:
    """Figures 8-30/8-31: target p = (p_first, 1 - p_first) over {A, B}, the draft always proposes ``drafted``.

    Returns the probability of each path (accept the draft, reject it and emit the other symbol)
    and the resulting probability of emitting A and B.
    """
    p = _dist("p", [p_first, 1 - p_first])
    if drafted not in (0, 1):
        raise ValueError(f"drafted must be 0 (A) or 1 (B), got {drafted!r}")
    q = np.eye(2)[drafted]
    accept = float(acceptance_probability(p, q)[drafted])
    emitted = emission_distribution(p, q)
    return {"accept": accept, "reject": 1 - accept, "emit A": float(emitted[0]), "emit B": float(emitted[1])}
