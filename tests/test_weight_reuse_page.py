"""Section 8.2.1's two tables as library functions: the roofline crossover per context, and experiment 8-1's replay.

The pinned values are the ones the page printed before its cells became calls into the library.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from inferlab import roofline
from inferlab.datasets import published
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.scheduling import (FITTED_COST, SWEEP_CHUNK_TOKENS, SWEEP_TOKEN_BUDGET, batch_requests,
                                 replay_batch_sweep, simulate)

QWEN, CARD = MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"]
CONTEXTS = (128, 512, 2048, 8192)


# ---- the crossover table ---------------------------------------------------------------------
def test_crossover_table_reproduces_the_page():
    t = roofline.decode_crossover_table(QWEN, CARD, CONTEXTS)
    assert list(t.index) == list(CONTEXTS) and t.index.name == "context_tokens"
    assert list(t.columns) == ["compute_per_request_s", "read_per_request_s", "crossover_batch"]
    assert list((t.compute_per_request_s * 1e6).round(1)) == [30.2, 30.6, 32.4, 39.6]
    assert list((t.read_per_request_s * 1e6).round(1)) == [10.5, 42.1, 168.5, 674.1]
    assert round(t.crossover_batch[128]) == 430 and round(t.crossover_batch[128], 6) == 429.593235
    assert t.crossover_batch[[512, 2048, 8192]].tolist() == [math.inf] * 3
    assert round(t.read_per_request_s[2048] / t.compute_per_request_s[2048]) == 5


def test_crossover_table_matches_the_closed_forms():
    t = roofline.decode_crossover_table(QWEN, CARD, CONTEXTS, mfu=0.5, mbu=0.8)
    D_w, k = QWEN.matrix_weight_bytes(), QWEN.kv_bytes_per_token()
    for L in CONTEXTS:
        f = roofline.decode_flops_per_request(QWEN, L)
        assert t.compute_per_request_s[L] == f / (CARD.peak_bf16_flops * 0.5)
        assert t.read_per_request_s[L] == L * k / (CARD.hbm_bandwidth * 0.8)
        assert t.crossover_batch[L] == roofline.compute_memory_crossover(
            f, L, D_w, k, CARD.peak_bf16_flops, CARD.hbm_bandwidth, 0.5, 0.8)


def test_crossover_exists_exactly_below_the_context_crossover():
    # a finite b* only where one request adds more arithmetic than reads: below L*
    L_star = roofline.decode_context_crossover(QWEN, CARD)
    t = roofline.decode_crossover_table(QWEN, CARD, range(300, 450, 10))
    for L, row in t.iterrows():
        assert (row.crossover_batch < math.inf) == (L < L_star)
        assert (row.compute_per_request_s > row.read_per_request_s) == (L < L_star)
    assert t.crossover_batch[t.crossover_batch < math.inf].is_monotonic_increasing  # nearer L*, a larger batch


@pytest.mark.parametrize("kwargs, name", [
    (dict(contexts=()), "contexts"), (dict(contexts=(128, 128)), "contexts"), (dict(contexts=(-1,)), "contexts"),
    (dict(contexts=(1.5,)), "contexts"), (dict(contexts=128), "contexts"), (dict(contexts="128"), "contexts"),
    (dict(model="qwen3-8b"), "model"), (dict(accelerator="rtx-pro-6000"), "accelerator"),
    (dict(mfu=0), "mfu"), (dict(mbu=1.5), "mbu"), (dict(dtype_bytes=0), "dtype_bytes"),
])
def test_crossover_table_refuses_bad_input(kwargs, name):
    args = dict(model=QWEN, accelerator=CARD, contexts=CONTEXTS) | kwargs
    with pytest.raises(ValueError, match=name):
        roofline.decode_crossover_table(**args)


# ---- experiment 8-1's replay -----------------------------------------------------------------
def test_replay_reproduces_the_page():
    r = replay_batch_sweep()
    assert list(r.index) == [(1, "measured"), (1, "simulated"), (64, "measured"), (64, "simulated")]
    assert r.index.names == ["batch", "source"] and list(r.columns) == ["throughput_tok_s", "ttft_s", "mean_itl_s"]
    sim = r.xs("simulated", level="source")
    assert [round(x) for x in sim.throughput_tok_s] == [38, 1229]
    assert list(sim.ttft_s.round(3)) == [0.095, 3.073]
    assert list((sim.mean_itl_s * 1e3).round(1)) == [26.3, 36.9]
    assert round(sim.throughput_tok_s[64], 6) == 1229.285855 and round(sim.ttft_s[64], 9) == 3.072617209
    assert not r.isna().any().any()


def test_replay_measured_rows_are_the_published_sweep():
    sweep = published("batch_sweep_8_1").set_index("batch")
    measured = replay_batch_sweep().xs("measured", level="source")
    cols = ["throughput_tok_s", "ttft_s", "mean_itl_s"]
    pd.testing.assert_frame_equal(measured, sweep.loc[[1, 64], cols].astype(float), check_names=False)
    assert measured.loc[64].tolist() == [1165.0, 3.29, 0.040]


def test_replay_cut_pieces_and_one_batch():
    cut = replay_batch_sweep((64,), whole_chunks=False)
    assert list(cut.index) == [(64, "measured"), (64, "simulated")]
    assert (round(cut.loc[(64, "simulated"), "throughput_tok_s"]),
            round(cut.loc[(64, "simulated"), "ttft_s"], 2)) == (1306, 2.78)
    # the same run by hand: the function adds nothing of its own to the simulator
    s = simulate(batch_requests(64, 2048, 256), "chunked", FITTED_COST, max_running=64,
                 token_budget=SWEEP_TOKEN_BUDGET, chunk_tokens=SWEEP_CHUNK_TOKENS, whole_chunks=False)
    assert cut.loc[(64, "simulated"), "throughput_tok_s"] == s.summary()["throughput_tok_s"]
    assert cut.loc[(64, "simulated"), "ttft_s"] == s.table().ttft_s.median()
    # rows come in batch order whatever the order asked
    assert list(replay_batch_sweep((64, 1)).index) == list(replay_batch_sweep((1, 64)).index)


@pytest.mark.parametrize("kwargs, name", [
    (dict(batches=()), "batches"), (dict(batches=(4,)), "batches"), (dict(batches=(16, 64)), "batches"),
    (dict(batches=(1, 1)), "batches"), (dict(batches=(0,)), "batches"), (dict(batches=(1.5,)), "batches"),
    (dict(batches=64), "batches"), (dict(whole_chunks=1), "whole_chunks"),
])
def test_replay_refuses_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        replay_batch_sweep(**kwargs)
