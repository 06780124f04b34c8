"""The tiny Qwen3-style model over the paged cache: every cached path reproduces the cache-free forward."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from inferlab import memory
from inferlab.kernels import PagedKVCache
from inferlab.kernels.tiny_model import TinyConfig, TinyQwen3, rms_norm, rope
from inferlab.kvcache import OutOfBlocks

TOL = dict(rtol=2e-4, atol=2e-4)


@pytest.fixture(scope="module")
def model() -> TinyQwen3:
    return TinyQwen3(TinyConfig(), seed=7)


def _prompt(seed: int, n: int, vocab: int = 128) -> list[int]:
    return np.random.default_rng(seed).integers(0, vocab, n).tolist()


def test_weights_are_seeded_and_shaped() -> None:
    a, b = TinyQwen3(seed=1), TinyQwen3(seed=1)
    assert all(np.array_equal(a.w[k], b.w[k]) for k in a.w)
    assert not np.array_equal(a.w["wq"], TinyQwen3(seed=2).w["wq"])
    c = TinyConfig()
    n_params = sum(w.size for w in a.w.values())
    assert n_params == c.spec.n_params  # the weights are exactly the ModelSpec's parameters
    assert a.w["wk"].shape == (c.n_layers, c.hidden_size, c.n_kv_heads * c.head_dim)


def test_rope_rotates_pairs_and_keeps_norms() -> None:
    x = np.random.default_rng(0).normal(size=(5, 2, 8)).astype(np.float32)
    y = rope(x, np.arange(5), 10_000.0)
    np.testing.assert_allclose(y[0], x[0], rtol=1e-6)  # position 0: no rotation
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    # relative positions: <rope(q, m), rope(k, n)> depends on m - n only
    q, k = x[0, 0], x[1, 0]
    dot = lambda m, n: rope(q[None, None], np.array([m]), 1e4)[0, 0] @ rope(k[None, None], np.array([n]), 1e4)[0, 0]
    assert dot(7, 3) == pytest.approx(dot(14, 10), rel=1e-4)


def test_rms_norm_gives_unit_rms() -> None:
    x = np.random.default_rng(0).normal(size=(3, 16)) * 5
    np.testing.assert_allclose(np.sqrt(np.mean(rms_norm(x, np.ones(16), 1e-12) ** 2, axis=-1)), 1, rtol=1e-6)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 40), chunk=st.integers(1, 17), block_size=st.sampled_from([1, 4, 16]), seed=st.integers(0, 999))
def test_chunked_prefill_equals_whole_and_reference(model: TinyQwen3, n: int, chunk: int, block_size: int,
                                                    seed: int) -> None:
    prompt = _prompt(seed, n)
    whole, chunked = model.new_cache(48, block_size), model.new_cache(48, block_size)
    a = model.prefill(whole, "s", prompt)
    b = model.prefill(chunked, "s", prompt, chunk_tokens=chunk)
    np.testing.assert_allclose(a, b, **TOL)
    np.testing.assert_allclose(a, model.forward(prompt)[-1], **TOL)
    for layer in range(model.config.n_layers):
        np.testing.assert_allclose(whole.read(layer, "s")[0], chunked.read(layer, "s")[0], **TOL)


def test_batched_decode_equals_one_by_one(model: TinyQwen3) -> None:
    prompts = [_prompt(s, n) for s, n in [(1, 5), (2, 17), (3, 9), (4, 30)]]
    batched, single = model.new_cache(64, 4), model.new_cache(64, 4)
    nxt = [int(np.argmax(model.prefill(batched, i, p))) for i, p in enumerate(prompts)]
    for i, p in enumerate(prompts):
        model.prefill(single, i, p)
    for _ in range(6):
        lb = model.decode(batched, list(range(4)), nxt)
        ls = np.stack([model.decode(single, [i], [t])[0] for i, t in enumerate(nxt)])
        np.testing.assert_allclose(lb, ls, **TOL)
        nxt = np.argmax(lb, axis=-1).tolist()
    for i, p in enumerate(prompts):  # both caches hold the prompt and the six fed tokens
        assert batched.length(i) == single.length(i) == len(p) + 6
        np.testing.assert_allclose(batched.read(1, i)[1], single.read(1, i)[1], **TOL)


@settings(max_examples=10, deadline=None)
@given(lengths=st.lists(st.integers(1, 25), min_size=1, max_size=5), block_size=st.sampled_from([1, 3, 8]),
       steps=st.integers(1, 4), seed=st.integers(0, 999))
def test_batched_decode_equals_reference_on_random_batches(model: TinyQwen3, lengths: list[int], block_size: int,
                                                           steps: int, seed: int) -> None:
    prompts = [_prompt(seed + i, n) for i, n in enumerate(lengths)]
    cache = model.new_cache(sum(-(-(n + steps) // block_size) for n in lengths) + 1, block_size)
    seqs = [list(p) for p in prompts]
    nxt = [int(np.argmax(model.prefill(cache, i, p))) for i, p in enumerate(prompts)]
    for _ in range(steps):
        logits = model.decode(cache, list(range(len(prompts))), nxt)
        for i, t in enumerate(nxt):
            seqs[i].append(t)
            np.testing.assert_allclose(logits[i], model.forward(seqs[i])[-1], **TOL)
        nxt = np.argmax(logits, axis=-1).tolist()


def test_decode_reproduces_reference_greedy(model: TinyQwen3) -> None:
    prompt = _prompt(11, 13)
    out = model.generate(model.new_cache(16, 4), "s", prompt, 8)
    ref = list(prompt)
    for _ in range(8):
        ref.append(int(np.argmax(model.forward(ref)[-1])))
    assert out == ref[len(prompt):]


@pytest.mark.parametrize("prompt_tokens, outputs, block_size", [(13, 8, 4), (16, 1, 16), (33, 16, 16), (7, 2, 1)])
def test_cache_bytes_equal_memory_formula(prompt_tokens: int, outputs: int, block_size: int) -> None:
    model = TinyQwen3(TinyConfig(n_layers=3, n_heads=4, n_kv_heads=1, head_dim=8, hidden_size=16), seed=0)
    cache = model.new_cache(64, block_size)
    model.generate(cache, "s", _prompt(0, prompt_tokens), outputs)
    assert cache.length("s") == memory.kv_tokens(prompt_tokens, outputs)
    assert cache.bytes_in_use == memory.request_kv_bytes(model.config.spec, prompt_tokens, outputs, block_size,
                                                         dtype_bytes=4)


def test_shared_prefix_is_computed_once_and_read_by_every_sequence(model: TinyQwen3) -> None:
    block, prefix_len, n_seq = 4, 18, 4
    prefix = _prompt(99, prefix_len)
    prompts = [prefix + _prompt(s, 6) for s in range(n_seq)]
    cache = model.new_cache(64, block)
    model.computed_tokens = 0
    logits = [model.prefill(cache, s, p) for s, p in enumerate(prompts)]
    shared = prefix_len // block
    assert model.computed_tokens == len(prompts[0]) + (n_seq - 1) * (len(prompts[0]) - shared * block)
    tables = [cache.block_table(s) for s in range(n_seq)]
    assert all(t[:shared] == tables[0][:shared] for t in tables)  # one physical copy of the prefix
    assert len({b for t in tables for b in t}) == shared + n_seq * (len(tables[0]) - shared)
    for p, lg in zip(prompts, logits):  # reading the shared blocks gives exactly the uncached result
        np.testing.assert_allclose(lg, model.forward(p)[-1], **TOL)
    assert cache.bytes_in_use == memory.batch_kv_bytes(n_seq, model.config.spec, len(prompts[0]), 1, block,
                                                       shared_prefix_tokens=prefix_len, dtype_bytes=4)


def test_prefix_kv_survives_free_and_is_reused(model: TinyQwen3) -> None:
    prompt = _prompt(5, 20)
    cache = model.new_cache(16, 4)
    model.prefill(cache, "a", prompt)
    cache.free("a")
    model.computed_tokens = 0
    lg = model.prefill(cache, "b", prompt)
    assert model.computed_tokens == 4  # a whole-prompt hit recomputes the last block only
    np.testing.assert_allclose(lg, model.forward(prompt)[-1], **TOL)


def test_copy_on_write_after_fork_keeps_both_sequences_right(model: TinyQwen3) -> None:
    prompt = _prompt(8, 10)  # the last block is partly filled and shared after the fork
    cache = model.new_cache(16, 4)
    first = int(np.argmax(model.prefill(cache, "a", prompt)))
    cache.manager.fork("a", "b")
    la = model.decode(cache, ["a", "b"], [first, (first + 1) % 128])
    np.testing.assert_allclose(la[0], model.forward(prompt + [first])[-1], **TOL)
    np.testing.assert_allclose(la[1], model.forward(prompt + [(first + 1) % 128])[-1], **TOL)
    assert cache.block_table("a")[-1] != cache.block_table("b")[-1]


@pytest.mark.parametrize("draft_from_target", [0, 2, 4])
def test_greedy_speculative_decoding_equals_plain_greedy(model: TinyQwen3, draft_from_target: int) -> None:
    prompt = _prompt(21, 11)
    plain = model.generate(model.new_cache(32, 4), "s", prompt, 20)
    cache = model.new_cache(32, 4)
    out = [int(np.argmax(model.prefill(cache, "s", prompt)))]
    rounds = 0
    while len(out) < 20:
        # a draft whose first tokens are right (copied from the plain run) and the rest wrong
        good = plain[len(out): len(out) + draft_from_target]
        draft = good + [(t + 1) % 128 for t in plain[len(out) + len(good): len(out) + 4]]
        out += model.verify(cache, "s", out[-1], draft)
        rounds += 1
        assert cache.length("s") == len(prompt) + len(out) - 1  # rejected K/V rolled back
    assert out[:20] == plain
    assert rounds <= -(-19 // (draft_from_target + 1))  # each round emits accepted + 1 tokens


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        TinyConfig(head_dim=7)
    with pytest.raises(ValueError, match="multiple"):
        TinyConfig(n_heads=3, n_kv_heads=2)
    model = TinyQwen3()
    with pytest.raises(ValueError, match="tokens must lie"):
        model.forward([0, 128])
    with pytest.raises(ValueError, match="chunk_tokens"):
        model.prefill(model.new_cache(4, 4), "s", [1, 2], chunk_tokens=0)
    cache = model.new_cache(1, 4)
    model.prefill(cache, "s", [1, 2, 3, 4])
    with pytest.raises(ValueError, match="cannot grow"):
        model.decode(cache, ["s"], [5])
    with pytest.raises(OutOfBlocks):
        cache.admit("t", [9, 9])
    with pytest.raises(ValueError, match="dtype"):
        PagedKVCache(1, 1, 4, 2, dtype="int8")
