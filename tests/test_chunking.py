"""Section 8.2.3: causal pairs of a chunk, FLOP growth with history, weight re-reads, chunk size from a gap limit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.models import MODELS
from inferlab.scheduling import FITTED_COST
from inferlab.scheduling import chunking as C
from inferlab.units import MiB, ms

M = MODELS["qwen3-8b"]


def test_pairs_of_the_first_and_last_512_chunk_of_8k():
    assert C.causal_pairs(512, 0) == 131_328
    assert C.causal_pairs(512, 7680) == 4_063_488
    assert round(C.causal_pairs(512, 7680) / C.causal_pairs(512, 0)) == 31


def test_figures_8_8_and_8_9_grids():
    first = C.pair_grid(4, 0)
    assert (first == C.IN_CHUNK).sum() == 10 and (first == C.HISTORY).sum() == 0
    assert (first == C.FUTURE).sum() == 6
    later = C.pair_grid(4, 8)
    assert later.shape == (4, 12)
    assert (later == C.HISTORY).sum() == 32 and (later == C.IN_CHUNK).sum() == 10
    assert (later != C.FUTURE).sum() == C.causal_pairs(4, 8) == 42
    # row i attends to h + i + 1 keys
    assert list((later != C.FUTURE).sum(axis=1)) == [9, 10, 11, 12]


def test_last_8k_chunk_has_32_percent_more_backbone_flop():
    assert round(100 * C.flop_growth(M, 8192, 512)) == 32
    pieces = C.chunks(8192, 512)
    assert len(pieces) == 16 and pieces[0] == (512, 0) and pieces[-1] == (512, 7680)


def test_measured_chunk_times_grew_39_percent():
    first, last = 25.30, 35.07  # data/published/chunk_times_8_2_3.csv
    assert round(100 * (last / first - 1)) == 39
    assert (round(first, 1), round(last, 1)) == (25.3, 35.1)


def test_splitting_a_chunk_rereads_the_weights():
    ffn = M.ffn_layer_bytes()
    assert C.weight_reads(ffn, 256, 256) / MiB == 288
    assert C.weight_reads(ffn, 256, 128) / MiB == 576
    assert C.weight_reads(ffn, 257, 128) / MiB == 3 * 288


def test_smaller_chunks_cost_more_prefill_time():
    times = [C.chunked_prefill_time(FITTED_COST, 8192, c) for c in (512, 1024, 2048, 8192)]
    assert times == sorted(times, reverse=True)
    assert C.chunked_prefill_time(FITTED_COST, 2048, 2048) == pytest.approx(FITTED_COST.of(2048))
    # 16 chunks of 512 pay the fixed part 16 times; pairs add up to the same total
    assert times[0] - times[-1] == pytest.approx(15 * FITTED_COST.fixed_s)


def test_two_step_rule_gap_limit_to_chunk_size():
    limit = 50 * ms
    short = C.max_chunk_tokens(FITTED_COST, limit, cached_tokens=0)
    long = C.max_chunk_tokens(FITTED_COST, limit, cached_tokens=7680)
    assert long < short
    assert FITTED_COST.of(short, 0) <= limit < FITTED_COST.of(short + 1, 0)
    assert FITTED_COST.of(long, 7680) <= limit < FITTED_COST.of(long + 1, 7680)
    with_decodes = C.max_chunk_tokens(FITTED_COST, limit, 0, decode_contexts=(2048, 2048))
    assert with_decodes < short
    assert C.max_chunk_tokens(FITTED_COST, 20 * ms, 0) == 0  # below the fixed 26.22 ms nothing fits


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 64), h=st.integers(0, 64))
def test_grid_counts_equal_pair_formula(c, h):
    grid = C.pair_grid(c, h)
    assert (grid != C.FUTURE).sum() == C.causal_pairs(c, h)
    assert (grid == C.HISTORY).sum() == c * h


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 20000), c=st.integers(1, 4096))
def test_chunks_cover_the_prompt(p, c):
    pieces = C.chunks(p, c)
    assert sum(n for n, _ in pieces) == p
    assert all(n <= c for n, _ in pieces)
    assert [h for _, h in pieces] == list(np.cumsum([0] + [n for n, _ in pieces[:-1]]))


@pytest.mark.parametrize(
    "call",
    [lambda: C.pair_grid(0), lambda: C.chunks(100, 0), lambda: C.chunks(100, 10, 100),
     lambda: C.weight_reads(-1, 10, 1), lambda: C.max_chunk_tokens(FITTED_COST, 0, 0)],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_symbolic_pairs_and_largest_piece_match_the_library():
    import sympy as sp

    import inferlab.symbolic as Y
    from inferlab.scheduling import FITTED_COST

    assert sp.simplify(Y.CAUSAL_PAIRS_SUM.doit() - Y.CAUSAL_PAIRS) == 0
    for c, h, pairs in ((4, 0, 10), (4, 8, 42), (512, 0, 131_328), (512, 7680, 4_063_488)):
        assert Y.CAUSAL_PAIRS.subs({Y.c_new: c, Y.h_cached: h}) == C.causal_pairs(c, h) == pairs
    t = Y.iteration_time_for(FITTED_COST.fixed_s, FITTED_COST.per_token_s, FITTED_COST.per_pair_s)
    assert float(t.subs({Y.N_tok: 2048, Y.N_pair: C.causal_pairs(2048)})) == pytest.approx(FITTED_COST.of(2048))
    root = Y.largest_piece(FITTED_COST.fixed_s, FITTED_COST.per_token_s, FITTED_COST.per_pair_s)
    for h in (0, 2048, 7680, 16384):
        c = float(root.subs({Y.T_max: 0.050, Y.h_cached: h, Y.n_d: 2, Y.L_d: 2048}))
        assert int(c) == C.max_chunk_tokens(FITTED_COST, 0.050, h, (2048, 2048))
