"""numpy attention kernels: the reference against a loop over heads, paged against reference on random layouts."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from inferlab import kernels
from inferlab.kvcache import BlockManager


def naive_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True) -> np.ndarray:
    """One query, one head at a time, straight from the definition (float64)."""
    n_new, n_heads, d = q.shape
    n_ctx, n_kv, _ = k.shape
    out = np.zeros(q.shape)
    for i in range(n_new):
        last = n_ctx - n_new + i if causal else n_ctx - 1
        for h in range(n_heads):
            kv = h // (n_heads // n_kv)
            s = np.array([q[i, h] @ k[j, kv] for j in range(last + 1)], dtype=np.float64) / np.sqrt(d)
            p = np.exp(s - s.max())
            p /= p.sum()
            out[i, h] = p @ v[: last + 1, kv]
    return out


def test_attention_matches_definition_gqa_and_causal() -> None:
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(5, 8, 16)), rng.normal(size=(9, 2, 16)), rng.normal(size=(9, 2, 16))
    for causal in (True, False):
        got = kernels.attention(q, k, v, causal=causal)
        assert got.dtype == np.float32 and got.shape == (5, 8, 16)
        np.testing.assert_allclose(got, naive_attention(q, k, v, causal), rtol=1e-5, atol=1e-5)


def test_gqa_equals_multi_head_with_repeated_kv() -> None:
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 6, 8)), rng.normal(size=(7, 3, 8)), rng.normal(size=(7, 3, 8))
    mha = kernels.attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    np.testing.assert_allclose(kernels.attention(q, k, v), mha, rtol=1e-6, atol=1e-6)


def test_first_token_attends_only_to_itself() -> None:
    rng = np.random.default_rng(2)
    k, v = rng.normal(size=(3, 1, 4)), rng.normal(size=(3, 1, 4))
    out = kernels.attention(rng.normal(size=(3, 2, 4)), k, v)
    np.testing.assert_allclose(out[0], np.repeat(v[0], 2, axis=0), rtol=1e-6)


def test_softmax_is_stable_for_large_scores() -> None:
    q = np.full((1, 1, 4), 1e4, np.float32)
    k = np.full((2, 1, 4), 1e4, np.float32)
    v = np.array([[[1.0, 0, 0, 0]], [[0, 1.0, 0, 0]]], np.float32)
    out = kernels.attention(q, k, v)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0, 0], [0.5, 0.5, 0, 0], atol=1e-6)


def _fill_pool(rng: np.random.Generator, lengths: list[int], block_size: int, n_kv: int, d: int,
               spare: int = 3) -> tuple[BlockManager, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Admit ragged sequences into a shuffled pool and write their K/V through their block tables."""
    need = sum(-(-n // block_size) for n in lengths) + spare
    bm = BlockManager(need, block_size, prefix_caching=False, free_order=rng.permutation(need).tolist())
    kc = rng.normal(size=(need, block_size, n_kv, d)).astype(np.float32)  # garbage in unused slots
    vc = rng.normal(size=(need, block_size, n_kv, d)).astype(np.float32)
    ks, vs = [], []
    for s, n in enumerate(lengths):
        bm.allocate(s, list(range(n)))
        k, v = rng.normal(size=(2, n, n_kv, d)).astype(np.float32)
        kernels.write_kv(kc, vc, bm.block_table(s), 0, k, v)
        ks.append(k)
        vs.append(v)
    return bm, kc, vc, ks, vs


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 70), min_size=1, max_size=6),
    block_size=st.sampled_from([1, 2, 3, 4, 8, 16, 32]),
    n_kv=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2, 4]),
    d=st.sampled_from([4, 8, 16]),
    seed=st.integers(0, 2**32 - 1),
)
def test_paged_attention_equals_reference(lengths: list[int], block_size: int, n_kv: int, group: int, d: int,
                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    bm, kc, vc, ks, vs = _fill_pool(rng, lengths, block_size, n_kv, d)
    tables, lens = kernels.tables_from_manager(bm, range(len(lengths)))
    assert lens.tolist() == lengths
    q = rng.normal(size=(len(lengths), n_kv * group, d)).astype(np.float32)
    got = kernels.paged_attention(q, kc, vc, tables, lens)
    want = np.stack([kernels.attention(q[b: b + 1], ks[b], vs[b])[0] for b in range(len(lengths))])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    for b, n in enumerate(lengths):  # the gathered context is the written one, in order
        np.testing.assert_array_equal(kernels.gather_kv(kc, bm.block_table(b), n), ks[b])


@settings(max_examples=30, deadline=None)
@given(n_ctx=st.integers(1, 60), data=st.data(), block_size=st.sampled_from([1, 4, 16]), seed=st.integers(0, 2**32 - 1))
def test_paged_prefill_chunk_equals_reference(n_ctx: int, data: st.DataObject, block_size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_new = data.draw(st.integers(1, n_ctx))
    bm, kc, vc, ks, vs = _fill_pool(rng, [n_ctx], block_size, 2, 8)
    q = rng.normal(size=(n_new, 4, 8)).astype(np.float32)
    got = kernels.paged_prefill_attention(q, kc, vc, bm.block_table(0), n_ctx)
    np.testing.assert_allclose(got, kernels.attention(q, ks[0], vs[0]), rtol=2e-5, atol=2e-5)


def test_padding_entries_are_ignored() -> None:
    rng = np.random.default_rng(3)
    kc, vc = rng.normal(size=(2, 6, 4, 1, 4))
    q = rng.normal(size=(1, 1, 4))
    a = kernels.paged_attention(q, kc, vc, np.array([[5, -1, -1]]), np.array([3]))
    b = kernels.paged_attention(q, kc, vc, np.array([[5, 0, 2]]), np.array([3]))
    np.testing.assert_array_equal(a, b)


def test_slot_mapping_follows_the_table() -> None:
    assert kernels.slot_mapping([7, 2], 2, 4, 3).tolist() == [23, 6, 7, 8]


@pytest.mark.parametrize("call, match", [
    (lambda: kernels.attention(np.zeros((3, 2, 4)), np.zeros((2, 1, 4)), np.zeros((2, 1, 4))), "n_new"),
    (lambda: kernels.attention(np.zeros((1, 3, 4)), np.zeros((2, 2, 4)), np.zeros((2, 2, 4))), "multiple"),
    (lambda: kernels.attention(np.zeros((1, 2, 4)), np.zeros((2, 1, 8)), np.zeros((2, 1, 8))), "head_dim"),
    (lambda: kernels.attention(np.zeros((1, 2)), np.zeros((2, 1, 4)), np.zeros((2, 1, 4))), "q must have 3"),
    (lambda: kernels.attention(np.zeros((1, 2, 4)), np.zeros((2, 1, 4)), np.zeros((3, 1, 4))), "same shape"),
    (lambda: kernels.paged_attention(np.zeros((1, 2, 4)), np.zeros((2, 4, 1, 4)), np.zeros((2, 4, 1, 4)),
                                     np.array([[0]]), np.array([5])), "context_lens"),
    (lambda: kernels.paged_attention(np.zeros((1, 2, 4)), np.zeros((2, 4, 1, 4)), np.zeros((2, 4, 1, 4)),
                                     np.array([[2]]), np.array([3])), "num_blocks"),
    (lambda: kernels.paged_attention(np.zeros((1, 2, 4)), np.zeros((2, 4, 1, 4)), np.zeros((2, 4, 1, 4)),
                                     np.array([[0.0]]), np.array([3])), "integers"),
    (lambda: kernels.paged_attention(np.zeros((2, 2, 4)), np.zeros((2, 4, 1, 4)), np.zeros((2, 4, 1, 4)),
                                     np.array([[0]]), np.array([3])), "one row per query"),
    (lambda: kernels.slot_mapping([0], 0, 5, 4), "fit"),
    (lambda: kernels.write_kv(np.zeros((1, 4, 1, 2)), np.zeros((1, 4, 1, 2)), [0], 0,
                              np.zeros((2, 2, 2)), np.zeros((2, 2, 2))), "shape"),
])
def test_bad_input_names_the_parameter(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
