"""KV-cache capacity: blocks, per-request and per-batch KV bytes, and how many requests fit.

A request's KV holds every token the model has run: the prompt plus all output tokens but
the last (the last one is emitted and never fed back). Space is handed out in whole blocks
of ``block_size`` tokens; a prefix shared by several requests is stored once, in whole blocks.
"""

from __future__ import annotations

from ._validate import finite_result, instance, items, non_negative, non_negative_int, positive_int
from .models import ModelSpec


def blocks_for(tokens: int, block_size: int = 16) -> int:
    """Blocks of ``block_size`` tokens needed to hold ``tokens`` tokens: ceil(tokens / block_size)."""
    non_negative_int("tokens", tokens)
    positive_int("block_size", block_size)
    return -(-tokens // block_size)


def tail_waste(tokens: int, block_size: int = 16) -> int:
    """Unused token slots in the last block: p*ceil(L/p) - L (at most p - 1)."""
    return blocks_for(tokens, block_size) * block_size - tokens


def kv_tokens(prompt_tokens: int, output_tokens: int) -> int:
    """Tokens whose KV a request holds once it has emitted ``output_tokens``: prompt + output - 1.

    ``output_tokens`` 0 and 1 both give the prompt alone: before and right after prefill the
    cache holds exactly the prompt (the first output token is emitted, not yet fed back).
    """
    non_negative_int("prompt_tokens", prompt_tokens)
    non_negative_int("output_tokens", output_tokens)
    if prompt_tokens == 0 and output_tokens == 0:
        return 0
    return prompt_tokens + max(output_tokens - 1, 0)


def request_kv_bytes(
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    block_size: int = 16,
    dtype_bytes: float = 2,
) -> float:
    """KV bytes allocated to one request after ``output_tokens`` outputs, in whole blocks.

    ``output_tokens=1`` gives the state right after prefill (the prompt's KV only).
    """
    instance("model", model, ModelSpec)
    tokens = kv_tokens(prompt_tokens, output_tokens)
    return blocks_for(tokens, block_size) * block_size * model.kv_bytes_per_token(dtype_bytes)


def shared_and_private_bytes(
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    block_size: int = 16,
    shared_prefix_tokens: int = 0,
    dtype_bytes: float = 2,
) -> tuple[float, float]:
    """(bytes stored once for the shared prefix, bytes each request allocates for itself).

    Only whole blocks can be shared: floor(prefix / block) blocks are stored once and each
    request allocates blocks for the rest of its tokens.
    """
    instance("model", model, ModelSpec)
    total = kv_tokens(prompt_tokens, output_tokens)
    non_negative_int("shared_prefix_tokens", shared_prefix_tokens)
    positive_int("block_size", block_size)
    if shared_prefix_tokens > prompt_tokens:
        raise ValueError(
            f"shared_prefix_tokens ({shared_prefix_tokens}) must not exceed prompt_tokens ({prompt_tokens})"
        )
    shared_blocks = shared_prefix_tokens // block_size
    private_blocks = blocks_for(total - shared_blocks * block_size, block_size)
    per_block = block_size * model.kv_bytes_per_token(dtype_bytes)
    return shared_blocks * per_block, private_blocks * per_block


def batch_kv_bytes(
    n_requests: int,
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    block_size: int = 16,
    shared_prefix_tokens: int = 0,
    dtype_bytes: float = 2,
) -> float:
    """KV bytes of ``n_requests`` alike requests sharing their first ``shared_prefix_tokens``: M_KV = shared + n x private."""
    n = non_negative_int("n_requests", n_requests)
    shared, private = shared_and_private_bytes(
        model, prompt_tokens, output_tokens, block_size, shared_prefix_tokens, dtype_bytes
    )
    return shared + n * private if n else 0.0


def max_concurrent_requests(
    kv_budget_bytes: float,
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    block_size: int = 16,
    shared_prefix_tokens: int = 0,
    dtype_bytes: float = 2,
) -> int:
    """Largest number of alike requests whose KV (reserved to completion) fits in ``kv_budget_bytes``."""
    non_negative("kv_budget_bytes", kv_budget_bytes)
    shared, private = shared_and_private_bytes(
        model, prompt_tokens, output_tokens, block_size, shared_prefix_tokens, dtype_bytes
    )
    if private == 0:
        raise ValueError("requests hold no private KV: prompt_tokens + output_tokens must exceed the shared prefix")
    if kv_budget_bytes < shared + private:
        return 0
    return int(finite_result((kv_budget_bytes - shared) // private, "kv_budget_bytes", "dtype_bytes"))


# ---- paged vs whole-request reservation (section 8.3.1) ---------------------------------
def _lengths(lengths: "list[int] | tuple[int, ...]") -> list[int]:
    ls = items("lengths", lengths)
    if not ls:
        raise ValueError("lengths must name at least one sequence")
    return [non_negative_int("lengths[i]", n) for n in ls]


def reserved_slots(lengths: "list[int] | tuple[int, ...]", max_tokens: int) -> int:
    """Token slots reserved when every sequence gets ``max_tokens`` contiguous slots up front."""
    ls = _lengths(lengths)
    positive_int("max_tokens", max_tokens)
    if max(ls) > max_tokens:
        raise ValueError(f"lengths must not exceed max_tokens ({max_tokens}), got a length of {max(ls)}")
    return len(ls) * max_tokens


def paged_slots(lengths: "list[int] | tuple[int, ...]", block_size: int) -> int:
    """Token slots allocated when each sequence gets whole blocks of ``block_size`` on demand."""
    return sum(blocks_for(n, block_size) * block_size for n in _lengths(lengths))


def paged_waste(lengths: "list[int] | tuple[int, ...]", block_size: int) -> list[int]:
    """Unused slots in each sequence's last block (each at most block_size - 1)."""
    return [tail_waste(n, block_size) for n in _lengths(lengths)]


def block_table_entries(lengths: "list[int] | tuple[int, ...]", block_size: int) -> int:
    """Block-table entries (one per logical block) of all sequences together."""
    return sum(blocks_for(n, block_size) for n in _lengths(lengths))


def shared_prefix_slots(lengths: "list[int] | tuple[int, ...]", block_size: int, shared_tokens: int,
                        sharers: int) -> int:
    """Paged slots when the first ``sharers`` sequences share their first ``shared_tokens`` (whole blocks only)."""
    ls = _lengths(lengths)
    non_negative_int("shared_tokens", shared_tokens)
    k = non_negative_int("sharers", sharers)
    if k > len(ls) or any(n < shared_tokens for n in ls[:k]):
        raise ValueError("sharers must not exceed the number of sequences, each at least shared_tokens long")
    return paged_slots(ls, block_size) - max(k - 1, 0) * (shared_tokens // block_size) * block_size


def branch_blocks(branches: int, shared_blocks: int, private_blocks: int) -> tuple[int, int, float]:
    """(block-table references, physical blocks, fraction saved) for branches sharing a prefix: 4 x (95 + 9) = 416 vs 131."""
    b = positive_int("branches", branches)
    s = non_negative_int("shared_blocks", shared_blocks)
    q = non_negative_int("private_blocks", private_blocks)
    refs = b * (s + q)
    if refs == 0:
        raise ValueError("shared_blocks + private_blocks must be >= 1")
    physical = s + b * q
    return refs, physical, 1 - physical / refs


def blocks_saved_by_sharing(n_requests: int, shared_blocks: int) -> int:
    """Physical blocks saved when ``n_requests`` store ``shared_blocks`` once instead of each: (n - 1) x s."""
    return (positive_int("n_requests", n_requests) - 1) * non_negative_int("shared_blocks", shared_blocks)
