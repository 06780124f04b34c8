"""Validation of token-id lists, shared by the paged allocator and the radix prefix cache.

A token id is a Python or numpy integer (not a bool) in ``[0, limit)``; ``limit`` defaults to
2**63, the largest id an int64 KV index or kernel argument holds. Whole lists are checked at
once (one pass over the element types, ``min`` and ``max``), never token by token in Python.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

TOKEN_ID_LIMIT = 2**63  # ids are stored as int64 by kernels and block tables


def token_ids(tokens: Iterable[int], name: str = "tokens", limit: int = TOKEN_ID_LIMIT,
              allow_empty: bool = True) -> list[int]:
    """``tokens`` as a new list of Python ints in [0, ``limit``); ValueError naming ``name`` otherwise."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 1-D array of integer token ids, got dtype {tokens.dtype} "
                             f"and shape {tokens.shape}")
        out = tokens.tolist()
    elif isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise ValueError(f"{name} must be a sequence of integer token ids, got {type(tokens).__name__}")
    else:
        out = list(tokens)
        kinds = set(map(type, out))
        if kinds != {int} and out:
            bad = [k for k in kinds if issubclass(k, bool) or not issubclass(k, (int, np.integer))]
            if bad:
                example = next(t for t in out if type(t) in bad)
                raise ValueError(f"{name} must hold integer token ids (not bool, float or str), got {example!r}")
            out = [int(t) for t in out]
    if not out:
        if not allow_empty:
            raise ValueError(f"{name} must hold at least one token id")
        return out
    lo, hi = min(out), max(out)
    if lo < 0 or hi >= limit:
        raise ValueError(f"{name} must lie in [0, {limit}), got {lo if lo < 0 else hi}")
    return out
