"""Section 8.2.4: CUDA-graph shape buckets and padding."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.scheduling import shapes as S


def test_chapter_example_16_and_32_row_graphs():
    b = (16, 32)
    assert S.padded_rows(18, b) == 32
    assert S.padded_rows(17, b) == 32  # one row fewer saves nothing
    assert S.padded_rows(16, b) == 16  # only now the smaller graph runs
    assert S.padding_rows(17, b) == 15
    assert S.padding_rows(17, (16, 17, 32)) == 0  # a 17-row graph saves the 15 padded rows


def test_rows_past_the_largest_bucket_run_unpadded():
    assert S.bucket_for(40, (16, 32)) is None
    assert S.padded_rows(40, (16, 32)) == 40


def test_padding_fraction_and_bucket_costs():
    assert S.padding_fraction([17, 32], (16, 32)) == pytest.approx(1 - 49 / 64)
    few = S.bucket_costs((16, 32), capture_s_per_graph=0.5, buffer_bytes_per_row=1000, overhead_bytes_per_graph=10)
    many = S.bucket_costs(range(1, 33), capture_s_per_graph=0.5, buffer_bytes_per_row=1000, overhead_bytes_per_graph=10)
    assert few == {"graphs": 2, "largest": 32, "capture_s": 1.0, "pool_bytes": 32_000, "overhead_bytes": 20,
                   "memory_bytes": 32_020}
    # the smaller graphs reuse the largest graph's pool: 16x the graphs cost 16x the capture time, not 16x the memory
    assert many["graphs"] == 32 and many["capture_s"] == 16.0
    assert many["pool_bytes"] == few["pool_bytes"] and many["memory_bytes"] == 32_000 + 320
    assert S.padding_fraction(list(range(1, 33)), range(1, 33)) == 0


def test_bucket_set_helpers():
    assert S.powers_of_two(32) == (1, 2, 4, 8, 16, 32)
    assert S.powers_of_two(40) == (1, 2, 4, 8, 16, 32)
    assert S.powers_of_two(1) == (1,)
    # exact for huge sizes (a float log2 would round 2**53 - 1 up to 2**53)
    assert S.powers_of_two(2**53 - 1)[-1] == 2**52 and S.powers_of_two(2**53)[-1] == 2**53
    assert S.powers_of_two(2**64 + 1)[-1] == 2**64
    assert S.multiples(8, 32) == (1, 2, 4, 8, 16, 24, 32)
    assert S.normalize([32, 16, 16]) == (16, 32)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 600), buckets=st.lists(st.integers(1, 512), min_size=1, max_size=12))
def test_padding_properties(n, buckets):
    padded = S.padded_rows(n, buckets)
    assert padded >= n
    size = S.bucket_for(n, buckets)
    if size is not None:
        assert size in buckets and not any(n <= b < size for b in buckets)
    # adding a bucket never increases padding
    assert S.padded_rows(n, [*buckets, n]) == n


@pytest.mark.parametrize("call", [lambda: S.bucket_for(0, (16,)), lambda: S.normalize([]),
                                  lambda: S.normalize([0, 16]), lambda: S.padding_fraction([], (16,)),
                                  lambda: S.bucket_costs((16,), 1.0, 1.0, overhead_bytes_per_graph=-1),
                                  lambda: S.powers_of_two(0)])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.integers(1, 600), max_size=40), buckets=st.lists(st.integers(1, 512), min_size=1, max_size=12))
def test_padded_rows_each_is_padded_rows_of_each(rows, buckets):
    assert S.padded_rows_each(rows, buckets).tolist() == [S.padded_rows(n, buckets) for n in rows]


@pytest.mark.parametrize("rows", [[0, 3], [2.5], [[1, 2]], ["a"]])
def test_padded_rows_each_refuses_bad_rows(rows):
    with pytest.raises(ValueError, match="rows"):
        S.padded_rows_each(rows, (16,))
