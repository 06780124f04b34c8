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


# ---- a sequence's result does not depend on its batch --------------------------------------------------------

def test_nan_in_an_unreferenced_block_does_not_reach_a_shorter_sequence() -> None:
    kc = np.ones((3, 4, 1, 2), np.float32)
    vc = np.ones_like(kc)
    vc[0] = np.nan  # block 0 belongs to no sequence
    q = np.ones((2, 1, 2), np.float32)
    out = kernels.paged_attention(q, kc, vc, np.array([[1, kernels.PAD], [1, 2]]), np.array([2, 8]))
    np.testing.assert_array_equal(out, np.ones((2, 1, 2), np.float32))


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    block_size=st.sampled_from([1, 2, 3, 4, 8, 16]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_sequence_in_a_batch_equals_itself_alone(lengths: list[int], block_size: int, seed: int) -> None:
    """NaN/inf fill every block and slot no context references; tables past the context hold PAD or any block."""
    rng = np.random.default_rng(seed)
    needed = [-(-n // block_size) for n in lengths]
    num_blocks, n_kv, d = sum(needed) + 3, 2, 4
    kc, vc = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), size=(2, num_blocks, block_size, n_kv, d))
    tables = np.full((len(lengths), max(needed) + int(rng.integers(0, 3))), kernels.PAD)
    order = rng.permutation(num_blocks)
    for b, (n, nb) in enumerate(zip(lengths, needed)):
        tables[b, :nb], order = order[:nb], order[nb:]
        past = tables.shape[1] - nb
        tables[b, nb:] = np.where(rng.random(past) < 0.5, kernels.PAD, rng.integers(0, num_blocks, past))
        kernels.write_kv(kc, vc, tables[b], 0, *rng.normal(size=(2, n, n_kv, d)))
    q = rng.normal(size=(len(lengths), 2 * n_kv, d)).astype(np.float32)
    lens = np.array(lengths)
    batch = kernels.paged_attention(q, kc, vc, tables, lens)
    assert np.isfinite(batch).all()
    for b, (n, nb) in enumerate(zip(lengths, needed)):
        alone = kernels.paged_attention(q[b: b + 1], kc, vc, tables[b: b + 1, :nb], lens[b: b + 1])
        np.testing.assert_allclose(batch[b: b + 1], alone, rtol=1e-6, atol=1e-6)
        prefill = kernels.paged_prefill_attention(q[b: b + 1], kc, vc, tables[b], n)
        np.testing.assert_allclose(prefill, alone, rtol=1e-5, atol=1e-6)


# ---- one rule for block-table entries -----------------------------------------------------------------------

def _table_calls(table: list[int], n: int) -> dict:
    """Every public function that reads a block table, over a pool of 3 blocks of 4 tokens, context of n tokens."""
    kc, vc = np.zeros((2, 3, 4, 1, 2), np.float32)
    kv = np.zeros((n, 1, 2), np.float32)
    return {
        "paged_attention": lambda: kernels.paged_attention(kv[:1], kc, vc, np.array([table]), np.array([n])),
        "paged_prefill_attention": lambda: kernels.paged_prefill_attention(kv[:1], kc, vc, table, n),
        "gather_kv": lambda: kernels.gather_kv(kc, table, n),
        "write_kv": lambda: kernels.write_kv(kc, vc, table, 0, kv, kv),
        "slot_mapping": lambda: kernels.slot_mapping(table, 0, n, 4, num_blocks=3),
        "slot_mapping without num_blocks": lambda: kernels.slot_mapping(table, 0, n, 4),
    }


@pytest.mark.parametrize("table, n", [
    ([0, kernels.PAD], 5),  # PAD where the context needs a block
    ([kernels.PAD], 1),
    ([1, -2], 5),  # negative, not PAD
    ([0, -2], 4),  # ... even past the context
])
@pytest.mark.parametrize("function", list(_table_calls([0], 1)))
def test_negative_table_entries_other_than_trailing_pad_are_refused(function: str, table: list[int], n: int) -> None:
    with pytest.raises(ValueError, match=r"^block_tables? entry"):
        _table_calls(table, n)[function]()


@pytest.mark.parametrize("table, n", [([0, 3], 5), ([0, 7], 4), ([3], 0)])
@pytest.mark.parametrize("function", [f for f in _table_calls([0], 1) if f != "slot_mapping without num_blocks"])
def test_table_entries_beyond_the_pool_are_refused(function: str, table: list[int], n: int) -> None:
    if function == "paged_attention" and n == 0:
        return  # context_lens must be >= 1 there
    with pytest.raises(ValueError, match=r"^block_tables? entry .*num_blocks = 3"):
        _table_calls(table, n)[function]()


@pytest.mark.parametrize("table, n", [([0, kernels.PAD], 4), ([2, 1, kernels.PAD], 5), ([0, 2], 4), ([1, 0, 2], 12)])
@pytest.mark.parametrize("function", list(_table_calls([0], 1)))
def test_pad_past_the_context_is_accepted_everywhere(function: str, table: list[int], n: int) -> None:
    _table_calls(table, n)[function]()


# ---- dtypes and flags ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int32])
def test_indices_of_any_integer_dtype_work(dtype: type) -> None:
    rng = np.random.default_rng(4)
    kc, vc = rng.normal(size=(2, 4, 4, 1, 2)).astype(np.float32)
    q = rng.normal(size=(2, 2, 2)).astype(np.float32)
    tables, lens = np.array([[2, 0], [1, 3]]), np.array([6, 3])
    want = kernels.paged_attention(q, kc, vc, tables, lens)
    np.testing.assert_array_equal(kernels.paged_attention(q, kc, vc, tables.astype(dtype), lens.astype(dtype)), want)
    table, n = tables[0].astype(dtype), dtype(6)
    np.testing.assert_array_equal(kernels.gather_kv(kc, table, n), kernels.gather_kv(kc, tables[0], 6))
    np.testing.assert_array_equal(kernels.paged_prefill_attention(q[:1], kc, vc, table, n),
                                  kernels.paged_prefill_attention(q[:1], kc, vc, tables[0], 6))
    assert kernels.slot_mapping(table, dtype(1), dtype(5), dtype(4)).tolist() == [9, 10, 11, 0, 1]


def test_causal_must_be_a_bool() -> None:
    q, k = np.zeros((1, 1, 2)), np.zeros((2, 1, 2))
    for bad in ("no", None, 0, 1):
        with pytest.raises(ValueError, match="^causal must be a bool"):
            kernels.attention(q, k, k, causal=bad)
    np.testing.assert_array_equal(kernels.attention(q, k, k, causal=np.bool_(False)), kernels.attention(q, k, k, False))


def _array_arguments() -> list[tuple[str, str, dict, object]]:
    """(function, parameter, good keyword arguments, call) for every array argument of every public function."""
    kc, vc = np.zeros((2, 3, 4, 1, 2), np.float32)
    q, kv, table = np.zeros((2, 2, 2), np.float32), np.zeros((3, 1, 2), np.float32), np.array([0, 1])
    calls = {
        "attention": (kernels.attention, dict(q=q, k=kv, v=kv)),
        "paged_attention": (kernels.paged_attention, dict(q=q[:1], k_cache=kc, v_cache=vc, block_tables=table[None],
                                                          context_lens=np.array([5]))),
        "paged_prefill_attention": (kernels.paged_prefill_attention, dict(q=q, k_cache=kc, v_cache=vc,
                                                                          block_table=table, context_len=5)),
        "gather_kv": (kernels.gather_kv, dict(cache=kc, block_table=table, n_tokens=5)),
        "write_kv": (kernels.write_kv, dict(k_cache=kc, v_cache=vc, block_table=table, start=2, k=kv, v=kv)),
        "slot_mapping": (kernels.slot_mapping, dict(block_table=table, start=0, n_tokens=5, block_size=4)),
    }
    return [(name, p, args, f) for name, (f, args) in calls.items()
            for p, a in args.items() if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("bad", [bool, object, complex])
@pytest.mark.parametrize("function, param, args, call", _array_arguments(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_bool_object_and_complex_arrays_are_refused(function: str, param: str, args: dict, call, bad: type) -> None:
    call(**args)  # the good arguments work
    with pytest.raises((ValueError, TypeError), match=rf"^{param}\b"):
        call(**{**args, param: args[param].astype(bad)})


# ---- finite in, finite out ----------------------------------------------------------------------------------

def test_scores_beyond_float32_still_give_the_limit() -> None:
    q = np.full((1, 1, 4), 1e20, np.float32)
    k = np.array([[[1e20] * 4], [[-1e20] * 4], [[1e20, -1e20] * 2]], np.float32)  # q.k: +inf, -inf, 0 - 0 in float32
    v = np.array([[[1.0, 0, 0, 0]], [[0, 1.0, 0, 0]], [[0, 0, 1.0, 0]]], np.float32)
    np.testing.assert_array_equal(kernels.attention(q, k, v, causal=False)[0, 0], [1, 0, 0, 0])
    np.testing.assert_array_equal(kernels.attention(q, k[1:], v[1:], causal=False)[0, 0], [0, 0, 1, 0])
    kc, vc = k[None], v[None]  # one block of 3 slots
    np.testing.assert_array_equal(kernels.paged_attention(q, kc, vc, [[0]], [3])[0, 0], [1, 0, 0, 0])
    top = np.finfo(np.float32).max  # two equal scores of +inf in float32, averaging two rows at float32's limit
    np.testing.assert_array_equal(kernels.attention(q, k[[0, 0]], np.full((2, 1, 4), top), causal=False), top)


def test_values_beyond_the_compute_or_storage_dtype_are_refused() -> None:
    ok, huge = np.zeros((1, 1, 2)), np.full((1, 1, 2), 1e39)
    for name in ("q", "k", "v"):
        with pytest.raises(ValueError, match=rf"^{name} must fit float32"):
            kernels.attention(**{"q": ok, "k": ok, "v": ok, name: huge})
    with pytest.raises(ValueError, match="^v_cache must fit float32"):
        kernels.paged_attention(ok, ok[None], huge[None], [[0]], [1])
    kc = np.zeros((1, 4, 1, 2), np.float16)
    with pytest.raises(ValueError, match="^k must fit float16"):
        kernels.write_kv(kc, kc.copy(), [0], 0, np.full((1, 1, 2), 1e5), ok)
    with pytest.raises(ValueError, match="^k_cache .* floating"):
        kernels.write_kv(kc.astype(np.int32), kc.astype(np.int32), [0], 0, ok, ok)
