"""Section 8.2.1: the bytes one batched decode step of the tiny decoder reads, counted on its arrays."""

import numpy as np
import pytest

from inferlab.kernels import TinyConfig, TinyQwen3
from inferlab.kernels.traffic import StepTraffic, decode_traffic


def _decoded(model, lengths, seed=0):
    rng = np.random.default_rng(seed)
    cache = model.new_cache(num_blocks=64, block_size=4)
    prompts = {f"s{i}": rng.integers(0, model.config.vocab_size, n).tolist() for i, n in enumerate(lengths)}
    nxt = [int(np.argmax(model.prefill(cache, s, p))) for s, p in prompts.items()]
    logits = model.decode(cache, list(prompts), nxt)
    return cache, prompts, nxt, logits


def test_weights_once_and_kv_per_sequence_match_the_model_spec():
    model = TinyQwen3(seed=3)
    spec = model.config.spec
    cache, prompts, _, _ = _decoded(model, (5, 9, 14))
    step = decode_traffic(model, cache, list(prompts))
    assert step.weight_bytes == spec.matrix_weight_bytes(4)
    k = spec.kv_bytes_per_token(4)
    assert step.kv_bytes == {s: (len(p) + 1) * k for s, p in prompts.items()}
    assert step.total_bytes == step.weight_bytes + sum(step.kv_bytes.values())
    assert step.batch == 3 and step.bytes_per_output_token == step.total_bytes / 3


def test_the_weight_count_does_not_depend_on_the_batch():
    model = TinyQwen3(seed=3)
    one = decode_traffic(model, *_decoded(model, (7,))[:1], ["s0"])
    many = decode_traffic(model, *_decoded(model, (7, 7, 7, 7))[:1], ["s0", "s1", "s2", "s3"])
    assert one.weight_bytes == many.weight_bytes
    assert sum(many.kv_bytes.values()) == 4 * sum(one.kv_bytes.values())
    assert many.bytes_per_output_token < one.bytes_per_output_token


def test_rows_of_a_batched_step_equal_each_sequence_alone():
    model = TinyQwen3(seed=5)
    _, prompts, nxt, logits = _decoded(model, (3, 8, 11))
    for row, (p, t) in zip(logits, zip(prompts.values(), nxt)):
        np.testing.assert_allclose(row, model.forward(p + [t])[-1], rtol=2e-4, atol=2e-4)


def test_bad_arguments_are_refused():
    model = TinyQwen3(seed=3)
    cache, prompts, _, _ = _decoded(model, (5, 6))
    with pytest.raises(ValueError, match="seq_ids"):
        decode_traffic(model, cache, ["nope"])
    with pytest.raises(ValueError, match="seq_ids"):
        decode_traffic(model, cache, ["s0", "s0"])
    with pytest.raises(ValueError, match="seq_ids"):
        decode_traffic(model, cache, [])
    with pytest.raises(ValueError, match="model"):
        decode_traffic("model", cache, ["s0"])
    with pytest.raises(ValueError, match="cache"):
        decode_traffic(model, TinyQwen3(TinyConfig(n_layers=1)).new_cache(8), ["s0"])
    assert isinstance(decode_traffic(model, cache, ("s1",)), StepTraffic)
