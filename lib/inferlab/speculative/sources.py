"""What a draft source costs per round (section 8.5.3): a lookup in the context, or a draft network run serially or
in parallel, against the same verification pass.

A lookup searches the context (about 0.1 ms) and needs no device memory. A draft network is memory-bound at batch 1
like the target, so one forward takes a fixed cost (launches, host work) plus its weights over the bandwidth a
decode step achieves; serial drafting runs m forwards per round, parallel drafting (DFlash-like) one for all m.
Every source then pays one verification pass, and the round emits E[N] tokens (``cost.expected_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import MAX_COUNT, finite_result, fraction, non_negative, one_of, positive, positive_int
from ..units import GB, ms
from .cost import break_even_draft_s, draft_forward_s, drafting_s, expected_tokens

__all__ = ["DRAFT_SOURCES", "LOOKUP_S", "DFLASH_WEIGHT_BYTES", "SourceRound", "source_round", "tie_forward_overhead"]

#: The sources ``source_round`` models.
DRAFT_SOURCES = ("context lookup", "draft model, serial", "draft model, parallel")
#: Seconds to look the last tokens up in the context and copy what followed (section 8.5.2's 0.1 ms).
LOOKUP_S = 0.1 * ms
#: Most drafts per round a tie is worked out for (the profile is a list of that length).
MAX_DRAFTS = 2**16
#: Weights of experiment 8-5's DFlash draft network, as the chapter prints them: about 1.95 GiB (2.10 GB).
DFLASH_WEIGHT_BYTES = 2.10 * GB


@dataclass(frozen=True)
class SourceRound:
    """One round of a draft source: seconds drafting and verifying, expected tokens, device bytes it adds."""

    source: str
    draft_s: float
    verify_s: float
    tokens: float
    extra_bytes: float

    def __post_init__(self) -> None:
        one_of("source", self.source, DRAFT_SOURCES)
        for name in ("draft_s", "verify_s", "extra_bytes"):
            non_negative(name, getattr(self, name))
        if positive("tokens", self.tokens) < 1:
            raise ValueError(f"tokens must be at least 1 (a round emits one token or more), got {self.tokens!r}")

    @property
    def round_s(self) -> float:
        """Seconds per round: drafting, then the verification pass."""
        return self.draft_s + self.verify_s

    @property
    def per_token_s(self) -> float:
        """Seconds per output token: the round over the tokens it emits on average."""
        return self.round_s / self.tokens


def source_round(source: str, drafts: int, accept: float, verify_s: float, draft_weight_bytes: float,
                 bandwidth: float, forward_overhead_s: float = 0.0, lookup_s: float = LOOKUP_S) -> SourceRound:
    """A round of ``drafts`` drafts from ``source``, each accepted with probability ``accept`` (independently).

    ``draft_weight_bytes`` (bytes) and ``bandwidth`` (bytes/s) price one draft forward, plus ``forward_overhead_s``;
    a lookup costs ``lookup_s`` and adds no device memory. ``verify_s``: one target pass over drafts + 1 positions.
    """
    one_of("source", source, DRAFT_SOURCES)
    m = positive_int("drafts", drafts, at_most=MAX_COUNT)
    fraction("accept", accept)
    positive("verify_s", verify_s)
    forward = draft_forward_s(draft_weight_bytes, bandwidth) + non_negative("forward_overhead_s", forward_overhead_s)
    finite_result(m * forward, "drafts", "draft_weight_bytes", "bandwidth", "forward_overhead_s")  # serial drafting
    lookup = non_negative("lookup_s", lookup_s)
    if source == "context lookup":  # the network's arguments play no part (they are checked all the same)
        draft, extra = lookup, 0.0
    else:
        draft, extra = drafting_s(m, forward, parallel=source.endswith("parallel")), float(draft_weight_bytes)
    return SourceRound(source, draft, verify_s, expected_tokens([accept] * m), extra)


def tie_forward_overhead(source: str, drafts: int, accept: float, verify_s: float, draft_weight_bytes: float,
                         bandwidth: float) -> float:
    """Fixed cost per draft forward (s) at which a draft network ``source`` ties plain decode (one ``verify_s`` a token).

    The round may spend ``break_even_draft_s`` drafting; serial drafting pays the fixed cost once per draft, parallel
    drafting once per round. Negative when the network's reads alone already lose.
    """
    one_of("source", source, DRAFT_SOURCES[1:])
    m = positive_int("drafts", drafts, at_most=MAX_DRAFTS)
    budget = break_even_draft_s([fraction("accept", accept)] * m, positive("verify_s", verify_s))
    forwards = 1 if source.endswith("parallel") else m
    return finite_result(budget / forwards - draft_forward_s(draft_weight_bytes, bandwidth), "verify_s")
