"""One scheduler iteration's work and what it costs: the fitted linear model and a roofline model.

An iteration runs a list of ``Work`` items, one per request that takes part: a prompt piece
(``new_tokens`` of its prompt after ``cached_tokens`` already in the KV) or a decode (one new
token after the prompt and the earlier outputs). A cost function maps that list to seconds;
any callable with the signature of ``CostFn`` plugs into ``scheduler.simulate``.

A cost that depends on the work only through its totals (new tokens, causal pairs, KV tokens
read, logits) also offers ``of_totals``; the scheduler then takes its event-driven fast path,
which never builds the per-request ``Work`` items. ``__call__`` of such a cost is
``of_totals(*totals(work))``, so both paths give the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol, runtime_checkable

from .._validate import instance, items, non_negative, non_negative_int, positive, positive_int
from ..hardware import Accelerator
from ..models import ModelSpec, causal_pairs
from ..roofline import efficiency
from ..units import ms, ns, us
from .request import Request

Kind = Literal["prefill", "decode"]


@dataclass(frozen=True, slots=True)
class Work:
    """One request's share of an iteration: ``new_tokens`` run after ``cached_tokens``, emitting ``emits`` tokens."""

    request: "Request"
    kind: Kind
    new_tokens: int
    cached_tokens: int
    emits: int

    def __post_init__(self) -> None:
        if self.kind not in ("prefill", "decode"):
            raise ValueError(f"kind must be 'prefill' or 'decode', got {self.kind!r}")
        # fast path for plain ints (the simulator builds millions of items); full checks otherwise
        if not (type(self.new_tokens) is int and type(self.cached_tokens) is int and type(self.emits) is int
                and self.new_tokens >= 1 and self.cached_tokens >= 0 and self.emits >= 0
                and type(self.request) is Request):
            instance("request", self.request, Request)
            positive_int("new_tokens", self.new_tokens)
            non_negative_int("cached_tokens", self.cached_tokens)
            non_negative_int("emits", self.emits)

    @property
    def pairs(self) -> int:
        """Causal query-key pairs of this item: c*h + c(c+1)/2."""
        return causal_pairs(self.new_tokens, self.cached_tokens)


class CostFn(Protocol):
    """Seconds one iteration takes to run ``work`` (a non-empty sequence of items)."""

    def __call__(self, work: Sequence[Work]) -> float: ...


@runtime_checkable
class TotalsCost(Protocol):
    """A ``CostFn`` that depends on the work only through its totals (the scheduler's fast path)."""

    def __call__(self, work: Sequence[Work]) -> float: ...

    def of_totals(self, new_tokens: int, pairs: int, kv_tokens: int, logits: int) -> float: ...


def totals(work: Sequence[Work]) -> tuple[int, int, int, int]:
    """Exact integer totals of ``work``: new tokens, causal pairs, KV tokens read (cached + new), logits rows.

    A prompt piece needs logits only for the token it emits (its last, if the prompt ends there); a
    decode item computes logits at every row it runs (a speculative verification of m + 1 rows needs
    all of them to decide acceptance, whatever it emits in the end).
    """
    tokens = pairs = kv = logits = 0
    for item in work if type(work) in (list, tuple) else items("work", work):
        if type(item) is not Work:
            instance("work", item, Work, "a sequence of Work items")
        c = item.new_tokens
        tokens += c
        pairs += item.cached_tokens * c + c * (c + 1) // 2
        kv += item.cached_tokens + c
        logits += c if item.kind == "decode" else min(item.emits, c)
    return tokens, pairs, kv, logits


def _check_totals(new_tokens: int, pairs: int, kv_tokens: int, logits: int) -> None:
    """Refuse totals that are not integers >= 0 (the costs call this only when the quick check fails)."""
    for name, value in (("new_tokens", new_tokens), ("pairs", pairs), ("kv_tokens", kv_tokens), ("logits", logits)):
        non_negative_int(name, value)


@dataclass(frozen=True)
class IterationCost:
    """Linear iteration cost: fixed_s + per_token_s x new tokens + per_pair_s x causal pairs (seconds)."""

    fixed_s: float
    per_token_s: float
    per_pair_s: float

    def __post_init__(self) -> None:
        non_negative("fixed_s", self.fixed_s)
        non_negative("per_token_s", self.per_token_s)
        non_negative("per_pair_s", self.per_pair_s)

    def __call__(self, work: Sequence[Work]) -> float:
        """Seconds of one iteration running ``work``."""
        return self.of_totals(*totals(work))

    def of_totals(self, new_tokens: int, pairs: int, kv_tokens: int = 0, logits: int = 0) -> float:
        """Seconds of an iteration with these totals (KV tokens and logits do not enter this model)."""
        # plain ints >= 0, as the engines pass them once per iteration, pass without a call
        if not (type(new_tokens) is type(pairs) is type(kv_tokens) is type(logits) is int
                and new_tokens >= 0 and pairs >= 0 and kv_tokens >= 0 and logits >= 0):
            _check_totals(new_tokens, pairs, kv_tokens, logits)
        return self.fixed_s + self.per_token_s * new_tokens + self.per_pair_s * pairs

    def of(self, new_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds of an iteration holding one piece of ``new_tokens`` after ``cached_tokens``."""
        positive_int("new_tokens", new_tokens)
        pairs = causal_pairs(new_tokens, cached_tokens)
        return self.fixed_s + self.per_token_s * new_tokens + self.per_pair_s * pairs

    def decode(self, batch: int, context_tokens: int) -> float:
        """Seconds of a pure decode iteration: ``batch`` decodes, each after ``context_tokens`` cached tokens."""
        b = positive_int("batch", batch)
        h = non_negative_int("context_tokens", context_tokens)
        return self.fixed_s + self.per_token_s * b + self.per_pair_s * b * causal_pairs(1, h)


#: Fitted to experiment 8-1's batch-1 iterations on the RTX PRO 6000 (Chapter 8, section 8.2.2):
#: 26.22 ms + 30.4 us per new token + 3 ns per causal pair.
FITTED_COST = IterationCost(26.22 * ms, 30.4 * us, 3 * ns)


@dataclass(frozen=True)
class RooflineCost:
    """Iteration time from a model and an accelerator: max(FLOP/(P*MFU), bytes/(beta*MBU)) + overhead_s.

    Bytes are the matrix weights once plus every item's KV reads (cached and new tokens);
    FLOP follow ``ModelSpec.flops`` with one lm_head row per emitted token, summed as exact integers.
    """

    model: ModelSpec
    accelerator: Accelerator
    mfu: float = 1.0
    mbu: float = 1.0
    overhead_s: float = 0.0
    dtype_bytes: float = 2

    def __post_init__(self) -> None:
        instance("model", self.model, ModelSpec), instance("accelerator", self.accelerator, Accelerator)
        efficiency("mfu", self.mfu), efficiency("mbu", self.mbu)
        non_negative("overhead_s", self.overhead_s)
        positive("dtype_bytes", self.dtype_bytes)

    def __call__(self, work: Sequence[Work]) -> float:
        """Seconds of one iteration running ``work``."""
        return self.of_totals(*totals(work))

    def of_totals(self, new_tokens: int, pairs: int, kv_tokens: int, logits: int) -> float:
        """Seconds of an iteration with these totals (the sum of ``ModelSpec.flops`` over its items)."""
        if not (type(new_tokens) is type(pairs) is type(kv_tokens) is type(logits) is int
                and new_tokens >= 0 and pairs >= 0 and kv_tokens >= 0 and logits >= 0):
            _check_totals(new_tokens, pairs, kv_tokens, logits)
        per_token, per_logit, per_pair, weights, per_kv, flop_rate, byte_rate = self._coefficients
        flops = per_token * new_tokens + per_logit * logits + per_pair * pairs
        compute_s = flops / flop_rate
        memory_s = (weights + kv_tokens * per_kv) / byte_rate
        return max(compute_s, memory_s) + self.overhead_s

    @cached_property
    def _coefficients(self) -> tuple[int, int, int, float, float, float, float]:
        m, card = self.model, self.accelerator
        return (2 * m.active_linear_params, 2 * m.hidden_size * m.vocab_size, 4 * m.n_heads * m.head_dim * m.n_layers,
                m.matrix_weight_bytes(self.dtype_bytes), m.kv_bytes_per_token(self.dtype_bytes),
                card.peak_bf16_flops * self.mfu, card.hbm_bandwidth * self.mbu)
