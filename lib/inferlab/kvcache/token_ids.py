"""Validation of token-id lists, shared by the paged allocator and the radix prefix cache (and the traces).

A token id is a Python or numpy integer (not a bool) in ``[0, limit)``; ``limit`` defaults to
2**63, the largest id an int64 KV index or kernel argument holds. Whole lists are checked at
once (one pass over the element types, ``min`` and ``max``), never token by token in Python.
The check lives in ``inferlab._validate`` with the other argument checks, below every layer that needs it.
"""

from .._validate import TOKEN_ID_LIMIT, token_ids

__all__ = ["TOKEN_ID_LIMIT", "token_ids"]
