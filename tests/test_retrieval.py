"""The retrieval attention experiment (storage format vs query precision) and retry accounting (8.4.4)."""

import math

import numpy as np
import pytest

from inferlab.compression import retrieval as R
from inferlab.compression import retry
from inferlab.datasets import published

FORMATS = ["fp32", "bf16", "fp8_e4m3", "q8_0", "q4_0"]


@pytest.fixture(scope="module")
def grid():
    return R.run_grid(R.chapter_like_documents(0), 4, FORMATS, ["bf16", "fp8_e4m3"])


def test_documents_like_the_chapter() -> None:
    docs = R.chapter_like_documents(0)
    assert [d.name for d in docs] == [f"n128-r{i}" for i in range(4)] + [f"n512-r{i}" for i in range(4)]
    assert [d.keys.shape[0] for d in docs] == [128] * 4 + [512] * 4
    again = R.chapter_like_documents(0)
    assert all(np.array_equal(a.keys, b.keys) and a.target == b.target for a, b in zip(docs, again))


def test_attention_is_a_convex_mix() -> None:
    doc = R.make_document(64, seed=1)
    q = R.questions(doc, 1, seed=2)[0].query
    p, o = R.attend(q, doc.keys, doc.values)
    assert p.min() >= 0 and math.isclose(float(p.sum()), 1.0, rel_tol=1e-5)
    assert np.allclose(o, p @ doc.values)


def test_grid_shape_and_reference(grid) -> None:
    assert len(grid) == 8 * 4 * len(FORMATS) * 2
    s = R.summary(grid)
    # float32 K/V with a BF16 query is the reference: errors tiny
    assert s.loc[("fp32", "bf16"), "max_err"] < 0.01
    # output error grows as the format gets coarser
    err = {f: s.loc[(f, "bf16"), "mean_err"] for f in FORMATS}
    assert err["fp32"] < err["bf16"] < err["q8_0"] < err["fp8_e4m3"] < err["q4_0"]


def test_storage_and_query_precision_change_different_tasks(grid) -> None:
    s = R.summary(grid)["correct"]
    base = s[("bf16", "bf16")]
    assert base == 28
    assert s[("q4_0", "bf16")] < base and s[("fp8_e4m3", "bf16")] < base
    # changing only the query precision changes a result too
    assert s[("bf16", "fp8_e4m3")] != base
    g = grid.assign(config=grid.kv + "/" + grid.q)
    moved = retry.changed_tasks(g, "bf16/bf16", "q4_0/bf16")
    moved_q = retry.changed_tasks(g, "bf16/bf16", "bf16/fp8_e4m3")
    assert len(moved) and len(moved_q) and set(moved.task) != set(moved_q.task)


def test_chapter_grids() -> None:
    grid = published("quality_grid_8_4_4")
    by = grid.groupby("config")["correct"].sum()
    assert by["BF16 KV"] == 28 and by["FP8 KV + BF16 Q"] == 28
    changed = retry.changed_tasks(grid, "BF16 KV", "FP8 KV + BF16 Q")
    assert changed.to_dict("list") == {"task": [5, 6], "a": [0, 4], "b": [4, 0]}
    summary = published("quality_8_4_4").set_index("config")
    assert summary.loc["FP8 (original implementation)", "correct"] == 26


def test_retry_accounting() -> None:
    assert retry.time_to_correct([True], 6.0, 0.5) == 6.5
    assert retry.time_to_correct([False, True], [6.0, 5.0], 0.5) == 12.0
    assert retry.time_to_correct([False, False], 6.0, 0.5) == math.inf
    assert retry.expected_time_to_correct(0.5, 6.0, 0.5) == 13.0
    # faster but less accurate can be slower to a correct answer
    assert retry.expected_time_to_correct(0.75, 5.0, 0.5) > retry.expected_time_to_correct(0.95, 5.5, 0.5)
    with pytest.raises(ValueError, match="p_correct"):
        retry.expected_time_to_correct(0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="outcomes"):
        retry.time_to_correct([], 1.0, 0.0)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="d must be a multiple of 32"):
        R.DocumentShape(d=40)
    with pytest.raises(ValueError, match="similarity"):
        R.DocumentShape(similarity=(0.9, 1.0))
    with pytest.raises(ValueError, match="near_duplicates"):
        R.make_document(6, seed=0)  # six near-duplicates need at least seven records
    with pytest.raises(ValueError, match="kv_formats"):
        R.run_grid(R.chapter_like_documents(0)[:1], 1, ["q2_K"], ["bf16"])
    with pytest.raises(ValueError, match="q_formats"):
        R.run_grid(R.chapter_like_documents(0)[:1], 1, ["bf16"], ["q4_0"])
