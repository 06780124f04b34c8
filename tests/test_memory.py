"""KV capacity of section 8.1.2 and the shared-prefix capacity of 8.3.2."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.memory import (batch_kv_bytes, blocks_for, kv_tokens, max_concurrent_requests, request_kv_bytes,
                             tail_waste)
from inferlab.models import MODELS
from inferlab.units import GiB, MiB

QWEN = MODELS["qwen3-8b"]
BUDGET = 12 * GiB


def test_kv_after_prefill_and_at_completion() -> None:
    assert request_kv_bytes(QWEN, 2048, 1) == 288 * MiB
    assert request_kv_bytes(QWEN, 8192, 1) == 1152 * MiB
    assert kv_tokens(2048, 256) == 2303 and kv_tokens(8192, 256) == 8447
    assert request_kv_bytes(QWEN, 2048, 256) == 324 * MiB
    assert request_kv_bytes(QWEN, 8192, 256) == 1188 * MiB


def test_capacity_table() -> None:
    assert max_concurrent_requests(BUDGET, QWEN, 2048, 256) == 37
    assert max_concurrent_requests(BUDGET, QWEN, 8192, 256) == 10
    counted_at_prefill = max_concurrent_requests(BUDGET, QWEN, 2048, 1)
    assert counted_at_prefill == 42
    assert batch_kv_bytes(counted_at_prefill, QWEN, 2048, 256) == 13_608 * MiB > BUDGET
    assert 16 * request_kv_bytes(QWEN, 8192, 1) == 18 * GiB


def test_shared_prefix_capacity() -> None:
    assert batch_kv_bytes(16, QWEN, 8192, 256, shared_prefix_tokens=6144) == 6048 * MiB
    assert batch_kv_bytes(16, QWEN, 8192, 256) == 19_008 * MiB
    assert round(6048 * MiB / GiB, 2) == 5.91
    assert max_concurrent_requests(BUDGET, QWEN, 8192, 256, shared_prefix_tokens=6144) == 35


def test_blocks_and_waste() -> None:
    assert [blocks_for(n, 4) for n in (9, 13, 5, 15)] == [3, 4, 2, 4]
    assert [tail_waste(n, 4) for n in (9, 13, 5, 15)] == [3, 3, 3, 1]
    assert blocks_for(0) == 0


@given(st.integers(0, 100_000), st.integers(1, 256))
def test_waste_is_below_one_block(tokens: int, block: int) -> None:
    assert 0 <= tail_waste(tokens, block) <= block - 1


@given(st.integers(1, 20_000), st.integers(1, 2_000), st.sampled_from([1, 8, 16, 32]), st.integers(0, 64))
def test_capacity_is_the_largest_fitting_batch(prompt: int, output: int, block: int, budget_blocks: int) -> None:
    budget = budget_blocks * 1000 * block * QWEN.kv_bytes_per_token()
    n = max_concurrent_requests(budget, QWEN, prompt, output, block)
    assert batch_kv_bytes(n, QWEN, prompt, output, block) <= budget
    assert batch_kv_bytes(n + 1, QWEN, prompt, output, block) > budget


@given(st.integers(1, 10_000), st.integers(1, 1000), st.integers(0, 10_000), st.integers(1, 64))
def test_sharing_never_costs_more(prompt: int, output: int, prefix: int, n: int) -> None:
    prefix = min(prefix, prompt)
    assert batch_kv_bytes(n, QWEN, prompt, output, shared_prefix_tokens=prefix) <= batch_kv_bytes(
        n, QWEN, prompt, output
    )


@given(st.integers(1, 10_000), st.integers(1, 1000))
def test_kv_grows_with_output(prompt: int, output: int) -> None:
    assert request_kv_bytes(QWEN, prompt, output + 1) >= request_kv_bytes(QWEN, prompt, output)


def test_memory_validation() -> None:
    with pytest.raises(ValueError, match="block_size"):
        blocks_for(10, 0)
    with pytest.raises(ValueError, match="shared_prefix_tokens"):
        batch_kv_bytes(2, QWEN, 100, 10, shared_prefix_tokens=101)
    with pytest.raises(ValueError, match="kv_budget_bytes"):
        max_concurrent_requests(-1, QWEN, 100, 10)
    with pytest.raises(ValueError, match="prompt_tokens"):
        request_kv_bytes(QWEN, -5, 10)
