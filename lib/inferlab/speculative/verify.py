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

from .._validate import MAX_COUNT, fraction, non_negative_int, positive_int

__all__ = ["Verdict", "greedy_verify", "acceptance_probability", "acceptance_rate", "residual",
           "emission_distribution", "sample_position", "verify_sample", "two_symbol_paths"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one round: how many drafts were kept and the tokens the round emits."""

    draft: tuple[Hashable, ...]
    accepted: int
    emitted: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        draft, emitted = _symbols("draft", self.draft), _symbols("emitted", self.emitted)
        non_negative_int("accepted", self.accepted)
        if not 0 <= self.accepted <= len(draft):
            raise ValueError(f"accepted must lie in [0, len(draft)] = [0, {len(draft)}], got {self.accepted}")
        if len(emitted) != self.accepted + 1 or emitted[:self.accepted] != draft[:self.accepted]:
            raise ValueError(f"emitted must be the accepted drafts draft[:{self.accepted}] followed by exactly one "
                             f"target token, got draft {draft!r:.80} and emitted {emitted!r:.80}")
        object.__setattr__(self, "draft", draft)
        object.__setattr__(self, "emitted", emitted)

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


# ---- input checks (one place, so every function refuses the same inputs) -------------------------
#: Largest |sum - 1| accepted for a probability vector (float64 rounding over a 10^5-token row is ~1e-11).
SUM_TOLERANCE = 1e-9


def _symbols(name: str, tokens: Sequence[Hashable]) -> tuple[Hashable, ...]:
    """``tokens`` as a tuple of hashable, non-bool tokens, else ValueError naming ``name``."""
    try:
        items = tuple(tokens)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of tokens, got {tokens!r}") from None
    for i, tok in enumerate(items):
        try:
            hash(tok)
        except TypeError:
            raise ValueError(f"{name}[{i}] must be a hashable token, got {tok!r}") from None
        if isinstance(tok, (bool, np.bool_)):
            raise ValueError(f"{name}[{i}] must be a token, not a bool, got {tok!r}")
    return items


def _token_ids(name: str, tokens: Sequence[int] | np.ndarray, vocab: int) -> np.ndarray:
    """``tokens`` as an int64 array of ids in [0, vocab): ints or numpy integers, not bools or floats."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 1-D array of integer token ids, got {tokens.dtype} {tokens.shape}")
        items = tokens
    else:
        try:
            items = list(tokens)
        except TypeError:
            raise ValueError(f"{name} must be a sequence of integer token ids, got {tokens!r}") from None
        for i, tok in enumerate(items):
            if isinstance(tok, bool) or not isinstance(tok, (int, np.integer)):
                raise ValueError(f"{name}[{i}] must be an integer token id, got {tok!r}")
    out_of_range = [i for i, tok in enumerate(items) if not 0 <= tok < vocab]
    if out_of_range:
        i = out_of_range[0]
        raise ValueError(f"{name}[{i}] must lie in [0, {vocab}), got {items[i]!r}")
    return np.asarray(items, dtype=np.int64).reshape(-1)


def _probs(name: str, p: np.ndarray | Sequence[float], ndim: int = 1) -> np.ndarray:
    """``p`` as float64 probability vectors along its last axis (``ndim`` 1: one vector, 2: rows), else ValueError.

    Each vector must be non-empty, hold ints or floats (not bools), be finite and >= 0, and sum to 1
    within ``SUM_TOLERANCE``.
    """
    try:
        raw = np.asarray(p)
    except ValueError:  # a ragged nesting
        raise ValueError(f"{name} must be a rectangular array of probabilities (rows of equal length)") from None
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold int or float probabilities, got dtype {raw.dtype}")
    what = "1-D probability vector" if ndim == 1 else "2-D array of probability rows [n, V]"
    if raw.ndim != ndim or raw.shape[-1] == 0:
        raise ValueError(f"{name} must be a non-empty {what}, got shape {raw.shape}")
    arr = raw.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {float(arr[~np.isfinite(arr)][0])!r}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {float(arr[arr < 0][0])!r}")
    sums = arr.sum(axis=-1)
    off = np.flatnonzero(np.abs(sums - 1.0) > SUM_TOLERANCE)
    if off.size:
        where = "" if ndim == 1 else f" row {off[0]}"
        raise ValueError(f"{name}{where} must sum to 1 (within {SUM_TOLERANCE:g}), got {float(sums.flat[off[0]])!r}")
    return arr


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    """``rng`` itself, or a fresh Generator seeded with it when it is an int seed >= 0."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise ValueError(f"rng must be a numpy.random.Generator or an int seed >= 0, got {rng!r}")


def _pair(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    p, q = _probs("p", p), _probs("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must cover the same vocabulary, got sizes {p.size} and {q.size}")
    return p, q


def _alpha(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """min(1, p/q) elementwise, 1 where q = 0 (checked inputs)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1.0)), 1.0)


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[p - q]+ normalized, p itself when p == q (checked inputs)."""
    r = np.maximum(p - q, 0.0)
    total = r.sum()
    return p.copy() if total <= 0 else r / total


# ---- the rules -----------------------------------------------------------------------------------
def greedy_verify(draft: Sequence[Hashable], target: Sequence[Hashable]) -> Verdict:
    """Greedy verification: ``target`` holds the target's argmax at each of the len(draft) + 1 positions.

    Tokens are any hashable symbols (ids or letters) compared whole with ``==``; bools are refused.
    """
    d, t = _symbols("draft", draft), _symbols("target", target)
    k = len(d)
    if len(t) != k + 1:
        raise ValueError(f"target must hold len(draft) + 1 = {k + 1} choices (one per verified position), "
                         f"got {len(t)}")
    n = next((i for i in range(k) if d[i] != t[i]), k)
    return Verdict(d, n, (*d[:n], t[n]))


def acceptance_probability(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """alpha(x) = min(1, p(x)/q(x)) for every token x (1 where q(x) = 0: such a token is never drafted)."""
    return _alpha(*_pair(p, q))


def acceptance_rate(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> float:
    """Probability that a draft drawn from q is accepted: sum_x min(p(x), q(x)) = 1 - total variation."""
    p, q = _pair(p, q)
    return float(np.minimum(p, q).sum())


def residual(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """The rejection distribution [p - q]+ / sum [p - q]+ (p itself when p == q: then nothing is ever rejected)."""
    return _residual(*_pair(p, q))


def emission_distribution(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float]) -> np.ndarray:
    """Distribution of the emitted token: min(p, q) accepted directly plus (1 - sum min(p, q)) x residual."""
    p, q = _pair(p, q)
    accepted = np.minimum(p, q)
    return accepted + (1.0 - accepted.sum()) * _residual(p, q)


def sample_position(p: np.ndarray | Sequence[float], q: np.ndarray | Sequence[float], n: int,
                    rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` independent single-position rounds: (emitted tokens, whether each draft was accepted).

    ``rng``: a numpy Generator, or an int seed for a fresh one (the same seed draws the same rounds).
    """
    p, q = _pair(p, q)
    positive_int("n", n, MAX_COUNT)
    gen = _generator(rng)
    vocab = p.size
    drafts = gen.choice(vocab, size=n, p=q)
    accepted = gen.random(n) < _alpha(p, q)[drafts]
    fallback = gen.choice(vocab, size=n, p=_residual(p, q))
    return np.where(accepted, drafts, fallback), accepted


def verify_sample(p_rows: np.ndarray | Sequence[Sequence[float]],
                  q_rows: np.ndarray | Sequence[Sequence[float]] | None, draft: Sequence[int] | np.ndarray, rng: np.random.Generator | int) -> Verdict:
    """Speculative sampling of one round: ``p_rows`` [k+1, V] target, ``q_rows`` [k, V] draft (None: drafts are fixed).

    A fixed draft (prompt lookup) is a point mass q = 1 at the drafted token, so it is accepted with
    probability p(x) and a rejection draws from p with x removed, renormalized. Every row and every
    draft token (an int id in [0, V) with q(x) > 0) is checked before any draw, whichever path the draws
    take. ``rng``: a numpy Generator, or an int seed for a fresh one (the same seed gives the same round).
    """
    p_rows = _probs("p_rows", p_rows, ndim=2)
    vocab = p_rows.shape[1]
    tokens = _token_ids("draft", draft, vocab)
    k = tokens.size
    if p_rows.shape[0] != k + 1:
        raise ValueError(f"p_rows must have shape [len(draft) + 1, V] = [{k + 1}, V], got {p_rows.shape}")
    rows = np.arange(k)
    if q_rows is None:
        q_rows = np.zeros((k, vocab))
        q_rows[rows, tokens] = 1.0
    else:
        q_rows = _probs("q_rows", q_rows, ndim=2)
        if q_rows.shape != (k, vocab):
            raise ValueError(f"q_rows must have shape [len(draft), V] = [{k}, {vocab}], got {q_rows.shape}")
    px, qx = p_rows[rows, tokens], q_rows[rows, tokens]
    if np.any(qx <= 0):
        i = int(np.flatnonzero(qx <= 0)[0])
        raise ValueError(f"draft[{i}] = {int(tokens[i])} has probability 0 under q_rows[{i}]: "
                         "a draft must be drawn from its q row")
    gen = _generator(rng)
    rejected = np.flatnonzero(gen.random(k) >= np.minimum(1.0, px / qx))
    kept = tuple(int(t) for t in tokens)
    if rejected.size:
        i = int(rejected[0])
        fix = int(gen.choice(vocab, p=_residual(p_rows[i], q_rows[i])))
        return Verdict(kept, i, (*kept[:i], fix))
    bonus = int(gen.choice(vocab, p=p_rows[k]))
    return Verdict(kept, k, (*kept, bonus))


def two_symbol_paths(p_first: float = 0.25, drafted: int = 0) -> dict[str, float]:
    """Figures 8-30/8-31: target p = (p_first, 1 - p_first) over {A, B}, the draft always proposes ``drafted``.

    Returns the probability of each path (accept the draft, reject it and emit the other symbol)
    and the resulting probability of emitting A and B.
    """
    p_first = fraction("p_first", p_first)
    if isinstance(drafted, bool) or not isinstance(drafted, (int, np.integer)) or drafted not in (0, 1):
        raise ValueError(f"drafted must be the int 0 (A) or 1 (B), got {drafted!r}")
    p, q = np.array([p_first, 1 - p_first]), np.eye(2)[drafted]
    accept = float(_alpha(p, q)[drafted])
    emitted = emission_distribution(p, q)
    return {"accept": accept, "reject": 1 - accept, "emit A": float(emitted[0]), "emit B": float(emitted[1])}
