"""Section 8.1.2's count of requests that fit: the sympy forms and a run on a real block pool."""

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.kvcache.capacity import (B_blk, BATCH_BOUND, C_KV, KV_BUDGET, L_in, L_pre, M_pre, M_priv, MAX_BATCH,
                                       PREFIX_KV, PRIVATE_KV, ReservationRun, admit_and_decode, max_batch,
                                       pool_blocks)
from inferlab.memory import batch_kv_bytes, blocks_for, kv_tokens, max_concurrent_requests, shared_and_private_bytes
from inferlab.models import MODELS
from inferlab.symbolic import C, G, M_a, M_u, M_w, b_s, k_tok
from inferlab.units import GiB, MiB

QWEN = MODELS["qwen3-8b"]
BUDGET = 12 * GiB
K = int(QWEN.kv_bytes_per_token())  # 147,456 bytes


def test_forms() -> None:
    assert sp.simplify(BATCH_BOUND - (C_KV - M_pre) / M_priv) == 0
    assert MAX_BATCH == sp.floor(BATCH_BOUND)
    assert KV_BUDGET.subs({C: 32, M_w: 15, M_a: 3, M_u: 2}) == 12
    assert PRIVATE_KV.subs({L_in: 8192, G: 256, B_blk: 16, L_pre: 0, k_tok: K}) == 1188 * MiB
    assert PRIVATE_KV.subs({L_in: 8192, G: 256, B_blk: 16, L_pre: 6144, k_tok: K}) == 324 * MiB
    assert PREFIX_KV.subs({B_blk: 16, L_pre: 6144, k_tok: K}) == 864 * MiB
    assert PREFIX_KV.subs({B_blk: 16, L_pre: 6150, k_tok: K}) == 864 * MiB  # only whole blocks are shared


def test_max_batch_in_the_running_example() -> None:
    assert max_batch(BUDGET, K, 2048, 256) == 37
    assert max_batch(BUDGET, K, 8192, 256) == 10
    assert max_batch(BUDGET, K, 8192, 256, shared_prefix_tokens=6144) == 35
    assert max_batch(BUDGET, K, 2048, 1) == 42
    assert max_batch(BUDGET, K / 2, 8192, 256) == 20
    assert max_batch(100 * MiB, K, 8192, 256) == 0


@settings(max_examples=60, deadline=None)
@given(budget_mib=st.integers(0, 40_000), prompt=st.integers(1, 20_000), output=st.integers(1, 2000),
       block=st.sampled_from([1, 8, 16, 32]), prefix_share=st.floats(0, 1))
def test_max_batch_agrees_with_the_closed_form(budget_mib, prompt, output, block, prefix_share) -> None:
    prefix = int(prefix_share * prompt)
    shared, private = shared_and_private_bytes(QWEN, prompt, output, block, prefix)
    if private == 0:
        with pytest.raises(ValueError):
            max_batch(budget_mib * MiB, K, prompt, output, block, prefix)
        return
    assert max_batch(budget_mib * MiB, K, prompt, output, block, prefix) == max_concurrent_requests(
        budget_mib * MiB, QWEN, prompt, output, block, prefix)


@pytest.mark.parametrize("kwargs", [
    dict(kv_budget_bytes=-1.0), dict(kv_bytes_per_token=0), dict(prompt_tokens=0), dict(output_tokens=0),
    dict(block_size=0), dict(shared_prefix_tokens=9000),
])
def test_max_batch_refuses_bad_input(kwargs) -> None:
    args = dict(kv_budget_bytes=BUDGET, kv_bytes_per_token=K, prompt_tokens=8192, output_tokens=256)
    with pytest.raises(ValueError):
        max_batch(**{**args, **kwargs})


def test_pool_blocks() -> None:
    assert pool_blocks(BUDGET, QWEN) == 5461  # 12 GiB / (16 x 144 KiB) = 5461.3
    assert pool_blocks(BUDGET, QWEN, dtype_bytes=1) == 10922
    assert pool_blocks(0, QWEN) == 0
    with pytest.raises(ValueError):
        pool_blocks(BUDGET, QWEN, block_size=0)


def test_whole_answer_reservation_matches_the_closed_form() -> None:
    blocks = pool_blocks(BUDGET, QWEN)
    for prompt, prefix, fits in ((2048, 0, 37), (8192, 0, 10), (8192, 6144, 35)):
        run = admit_and_decode(blocks, prompt, 256, "answer", shared_prefix_tokens=prefix)
        assert isinstance(run, ReservationRun)
        assert run.admitted == fits == max_concurrent_requests(BUDGET, QWEN, prompt, 256,
                                                               shared_prefix_tokens=prefix)
        assert run.completed and run.ran_dry_at is None and run.stuck == 0
        assert len(run.used_blocks) == 256  # after admission and after each of the 255 KV writes
        final = batch_kv_bytes(fits, QWEN, prompt, 256, shared_prefix_tokens=prefix) / (16 * K)
        assert run.used_blocks[-1] == run.reserved_blocks == final <= blocks
        assert list(run.used_blocks) == sorted(run.used_blocks)


def test_prompt_only_admission_runs_dry_in_the_answers() -> None:
    blocks = pool_blocks(BUDGET, QWEN)
    run = admit_and_decode(blocks, 2048, 256, "prompt")
    assert run.admitted == 42 and run.reserved_blocks == run.used_blocks[0] == 42 * 128
    # 85 blocks are left: every request takes a block at its 1st and 17th write, the 33rd finds one block
    assert not run.completed and run.ran_dry_at == 33 and run.stuck == 41
    assert run.used_blocks[-1] == blocks and len(run.used_blocks) == 34
    assert kv_tokens(2048, 34) == 2081 and blocks_for(2081) == 131


def test_prompt_only_admission_that_happens_to_fit() -> None:
    run = admit_and_decode(pool_blocks(BUDGET, QWEN), 8192, 256, "prompt")
    assert run.admitted == 10 and run.completed and run.used_blocks[-1] == 10 * 528


def test_a_pool_too_small_for_one_request() -> None:
    run = admit_and_decode(100, 2048, 256, "answer")
    assert run.admitted == 0 and run.completed and run.used_blocks == (0,)


@pytest.mark.parametrize("kwargs", [
    dict(num_blocks=0), dict(prompt_tokens=0), dict(output_tokens=0), dict(reserve="none"), dict(block_size=0),
    dict(shared_prefix_tokens=2048), dict(shared_prefix_tokens=-1), dict(num_blocks=2**14 + 1),
    dict(output_tokens=2**20 + 1), dict(num_blocks=2**14, block_size=65), dict(num_blocks=True), dict(reserve=None),
])
def test_admit_and_decode_refuses_bad_input(kwargs) -> None:
    args = dict(num_blocks=1000, prompt_tokens=2048, output_tokens=16)
    with pytest.raises(ValueError):
        admit_and_decode(**{**args, **kwargs})


def test_symbols_print_as_in_the_notation() -> None:
    assert sp.latex(L_in) == r"L_{\mathrm{in}}" and sp.latex(C_KV) == r"C_{\mathrm{KV}}"
    assert sp.latex(M_priv) == r"M_{\mathrm{priv}}" and sp.latex(b_s) == "b"


def test_pool_fill_figure() -> None:
    from inferlab.book.plot import timeline as tplot
    from inferlab.book.plot.legibility import smallest_label_pt

    blocks = pool_blocks(BUDGET, QWEN)
    runs = [admit_and_decode(blocks, 2048, 256, rule) for rule in ("answer", "prompt")]
    fig = tplot.pool_fill(runs, title="Figure: two admission rules on one pool")
    ax = fig.axes[0]
    assert smallest_label_pt(fig) >= 8
    labels = [line.get_label() for line in ax.get_lines()]
    assert "reserve the whole answer: 37 requests" in labels and "reserve the prompt only: 42 requests" in labels
    assert "pool: 5,461 blocks" in labels and "set aside at admission: 5,328 blocks" in labels
    assert any("pool empty after 33 tokens" in t.get_text() for t in ax.texts)
    with pytest.raises(ValueError):
        tplot.pool_fill([])
    with pytest.raises(ValueError):
        tplot.pool_fill([runs[0], admit_and_decode(blocks + 1, 2048, 256)])
