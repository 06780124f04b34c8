"""Speculative decoding (section 8.5): draft cheaply, verify in one target pass, keep the target's output.

- ``verify``: greedy verification and speculative (rejection) sampling;
- ``cost``: what a round costs and yields (expected tokens, time per token, break-even, draft length);
- ``symbolic``: the same in sympy, with the proof that speculative sampling is exact;
- ``decoder``: a real speculative decoder over the paged KV cache, rolled back on rejection;
- ``policy``: speculative decoding inside the iteration-level scheduler;
- draft sources: ``ngram`` (a small character model, also the decoder's target) and ``prompt_lookup``; ``sources``:
  what each source (lookup, serial or parallel draft network) costs per round;
- ``goodness_of_fit``: the chi-square test that shows the sampled tokens follow the target.
"""

from .cost import DraftLengthChoice, best_draft_length, expected_tokens, tokens_distribution
from .decoder import DecodeResult, speculative_decode
from .policy import simulate_speculative, speculative_batch_sweep, speculative_plan
from .sources import DRAFT_SOURCES, SourceRound, source_round, tie_forward_overhead
from .verify import (Verdict, acceptance_probability, acceptance_rate, emission_distribution, greedy_verify, residual,
                     sample_position, two_symbol_paths, verify_sample)

__all__ = [
    "expected_tokens", "tokens_distribution", "DecodeResult", "speculative_decode", "simulate_speculative",
    "speculative_plan", "DRAFT_SOURCES", "SourceRound", "source_round", "tie_forward_overhead", "Verdict", "acceptance_probability",
    "acceptance_rate", "emission_distribution", "greedy_verify", "residual", "sample_position", "two_symbol_paths",
    "verify_sample", "DraftLengthChoice", "best_draft_length", "speculative_batch_sweep",
]
