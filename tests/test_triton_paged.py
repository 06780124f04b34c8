"""The Triton paged-attention kernel against the numpy reference, on the CPU through the Triton interpreter.

Every block and slot a sequence does not use holds NaN, so any read past a context (a -1 table entry, the
tail of the last block, a block of another sequence) would show in the result; the reference is given the
caches with NaN set to 0, so only the kernel is held to this. The interpreter computes bfloat16 tl.dot
wrongly, so these tests use float32 and float16; bfloat16 is checked on a GPU.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run in numpy on the CPU

import hypothesis.strategies as st  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from inferlab import kernels  # noqa: E402
from inferlab.kernels.triton_paged import paged_attention_triton  # noqa: E402

TOL = {"float32": 1e-5, "float16": 3e-3}


def paged_layout(rng: np.random.Generator, lens: list[int], block_size: int, n_kv: int, d: int, spare: int = 2):
    """Caches of NaN but for the used slots, each sequence's blocks shuffled over the pool, tables padded with -1."""
    need = [-(-n // block_size) for n in lens]
    num_blocks = sum(need) + spare
    k_cache = np.full((num_blocks, block_size, n_kv, d), np.nan, np.float32)
    v_cache = k_cache.copy()
    tables = np.full((len(lens), max(need) + 1), kernels.PAD, np.int32)  # at least one -1 column
    free = list(1 + rng.permutation(num_blocks - 1))  # block 0, where a masked position's address falls, stays NaN
    for b, n in enumerate(lens):
        tables[b, : need[b]] = [free.pop() for _ in range(need[b])]
        kernels.write_kv(k_cache, v_cache, tables[b], 0, rng.normal(size=(n, n_kv, d)), rng.normal(size=(n, n_kv, d)))
    return k_cache, v_cache, tables, np.array(lens)


def check(seed: int, lens: list[int], block_size: int, n_heads: int, n_kv: int, d: int, dtype: str) -> None:
    rng = np.random.default_rng(seed)
    k_cache, v_cache, tables, context_lens = paged_layout(rng, lens, block_size, n_kv, d)
    q = rng.normal(size=(len(lens), n_heads, d)).astype(dtype)
    k_cache, v_cache = k_cache.astype(dtype), v_cache.astype(dtype)
    got = paged_attention_triton(*(torch.from_numpy(x) for x in (q, k_cache, v_cache, tables, context_lens)))
    assert got.dtype == getattr(torch, dtype) and got.shape == q.shape
    want = kernels.paged_attention(q, np.nan_to_num(k_cache), np.nan_to_num(v_cache), tables, context_lens)
    np.testing.assert_allclose(got.float().numpy(), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("lens, block_size, n_heads, n_kv, d", [
    ([1, 5, 3], 1, 4, 4, 8),  # one token per block, no GQA, head_dim below tl.dot's 16
    ([1, 8, 13], 4, 8, 2, 16),  # length 1, a context ending on a block boundary, a ragged tail
    ([16, 33, 70], 16, 6, 1, 24),  # six query heads on one KV head, several tiles of 32 positions
    ([9, 10], 3, 4, 2, 32),  # a block size that is not a power of two
])
def test_matches_the_reference(lens, block_size, n_heads, n_kv, d, dtype) -> None:
    check(0, lens, block_size, n_heads, n_kv, d, dtype)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lens=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       block_size=st.sampled_from([1, 2, 4, 8, 16, 32]), n_kv=st.sampled_from([1, 2]),
       group=st.sampled_from([1, 2, 4, 8]), d=st.sampled_from([8, 16, 64]), dtype=st.sampled_from(list(TOL)))
def test_matches_the_reference_on_random_layouts(seed, lens, block_size, n_kv, group, d, dtype) -> None:
    check(seed, lens, block_size, group * n_kv, n_kv, d, dtype)


def test_reads_caches_with_any_strides() -> None:
    """A pool stored [num_blocks, n_kv, block_size, d] and viewed in the kernel's order is read in place."""
    rng = np.random.default_rng(1)
    k_cache, v_cache, tables, lens = paged_layout(rng, [7, 12], 4, 2, 16)
    q = rng.normal(size=(2, 4, 16)).astype(np.float32)
    kt, vt = (torch.from_numpy(c).transpose(1, 2).contiguous().transpose(1, 2) for c in (k_cache, v_cache))
    assert not kt.is_contiguous()
    got = paged_attention_triton(torch.from_numpy(q), kt, vt, torch.from_numpy(tables), torch.from_numpy(lens))
    want = kernels.paged_attention(q, np.nan_to_num(k_cache), np.nan_to_num(v_cache), tables, lens)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_bad_input_names_the_parameter() -> None:
    q = torch.zeros(2, 4, 16)
    cache = torch.zeros(5, 4, 2, 16)
    tables = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    lens = torch.tensor([8, 3])
    good = dict(q=q, k_cache=cache, v_cache=cache, block_tables=tables, context_lens=lens)
    for kw, name in [(dict(q=q[0]), "q"), (dict(v_cache=cache.half()), "v_cache"), (dict(q=q.double()), "q"),
                     (dict(block_tables=tables.float()), "block_tables"), (dict(context_lens=lens[:1]), "context_lens"),
                     (dict(context_lens=torch.tensor([8, 0])), "context_lens"),
                     (dict(context_lens=torch.tensor([9, 3])), "context_lens"),
                     (dict(block_tables=torch.tensor([[0, 5], [2, -1]])), "block_tables"),
                     (dict(q=torch.zeros(2, 3, 16)), "n_heads"), (dict(q=torch.zeros(2, 4, 8)), "head_dim"),
                     (dict(k_cache=cache[:, :0], v_cache=cache[:, :0]), "block_size")]:
        with pytest.raises(ValueError, match=name):
            paged_attention_triton(**{**good, **kw})
    empty = paged_attention_triton(q[:0], cache, cache, tables[:0], lens[:0])
    assert empty.shape == (0, 4, 16)
