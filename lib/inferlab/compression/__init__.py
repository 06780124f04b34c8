"""Compression and offloading (section 8.4): smaller KV and weights, and weights kept in host memory.

- ``formats``: GGML's q8_0, q4_0 and q2_K byte for byte, FP8 (E4M3) and BF16 rounding; ``group_bits``: the bits
  per value of any group format, in sympy;
- ``kv``: what a smaller KV format buys (contexts that fit, bytes read) and what converting costs;
  ``kv_break_even``: the context from which a format's saved reads pay for its conversion; exported here:
  ``marginal_decode_read`` (experiment 8-1's extra bytes over extra step time between two batches) and
  ``read_floor_share`` (the least share of a fitted ITL slope that reading the KV takes at a bandwidth);
- ``offload``: weights in host memory, copied per step through a prefetch pipeline; ``prefetch_bound``: that
  step's time in closed form;
- ``retrieval``: an attention task that separates the KV storage format from the query's precision;
- ``retry``: what a wrong first answer costs in time.
"""

from .formats import (FORMATS, FP8_E4M3_MAX, GGML_FORMATS, BlockFormat, block_format, dequantize, format_table,
                      fp8_e4m3_decode, fp8_e4m3_encode, fp8_e4m3_round_trip, fp8_e4m3_scale, q2_K_fields, quantize,
                      round_trip, to_bf16)
from .kv import marginal_decode_read
from .kv_break_even import read_floor_share

__all__ = [
    "FORMATS", "FP8_E4M3_MAX", "GGML_FORMATS", "BlockFormat", "block_format", "dequantize", "format_table",
    "fp8_e4m3_decode", "fp8_e4m3_encode", "fp8_e4m3_round_trip", "fp8_e4m3_scale", "q2_K_fields", "quantize",
    "round_trip", "to_bf16",
    "marginal_decode_read", "read_floor_share",
]
