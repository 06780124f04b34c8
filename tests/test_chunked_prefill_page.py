"""Section 8.2.3's piece-size trade-off table: ``chunking.piece_size_sweep`` against the page's numbers."""

import pandas as pd
import pytest

from inferlab import scheduling
from inferlab.scheduling import FITTED_COST, IterationCost
from inferlab.scheduling import chunking as C
from inferlab.units import ms

#: The table the page's loop printed before it became a call (the fitted cost; values in ms, exact floats).
BEFORE = {
    256: (258, 1188.7523840000001, 2102.810636, 35.317300999999965),
    512: (514, 769.2323839999998, 1394.870636, 44.574636),
    1024: (1026, 559.472384, 1027.7906360000002, 68.39774899999995),
    2048: (2050, 454.592384, 870.4706359999999, 132.55902600000002),
    4096: (4098, 402.152384, 791.8106359999999, 226.27856899999998),
    8192: (8194, 375.93238399999996, 765.590636, 375.968934),
}
COLUMNS = ["budget", "8K alone (ms)", "all done (ms)", "longest gap (ms)"]


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return C.piece_size_sweep()


def test_the_sweep_reproduces_the_pages_table_exactly(sweep):
    assert list(sweep.columns) == COLUMNS and sweep.index.name == "piece c"
    assert list(sweep.index) == list(C.PIECE_SIZES) == list(BEFORE)
    for chunk, row in BEFORE.items():
        assert tuple(sweep.loc[chunk]) == row  # exact, not approximate
    assert sweep["budget"].dtype.kind == "i"
    assert scheduling.piece_size_sweep is C.piece_size_sweep


def test_the_rounded_numbers_the_page_states(sweep):
    t = sweep.round(0).loc[256]
    assert (t["longest gap (ms)"], t["8K alone (ms)"], t["all done (ms)"]) == (35, 1189, 2103)
    assert round(sweep.loc[2048, "longest gap (ms)"]) == 133 and round(sweep.loc[2048, "all done (ms)"]) == 870


def test_one_piece_is_continuous_batching(sweep):
    continuous = scheduling.run_example("continuous")
    assert sweep.loc[8192, "all done (ms)"] == continuous.makespan_s / ms
    assert sweep.loc[8192, "longest gap (ms)"] >= continuous.max_itl_s / ms


def test_smaller_pieces_shorten_the_gap_and_lengthen_everything_else(sweep):
    assert sweep["longest gap (ms)"].is_monotonic_increasing
    assert sweep["all done (ms)"].is_monotonic_decreasing
    assert sweep["8K alone (ms)"].is_monotonic_decreasing


def test_alone_the_cut_changes_only_the_count_of_fixed_parts(sweep):
    # tokens and causal pairs of the whole prompt do not depend on the cut: the fitted cost differs by fixed parts
    for chunk in C.PIECE_SIZES:
        extra = len(C.chunks(8192, chunk)) - 1
        assert sweep.loc[chunk, "8K alone (ms)"] - sweep.loc[8192, "8K alone (ms)"] == pytest.approx(
            extra * FITTED_COST.fixed_s / ms, abs=1e-9)


def test_order_and_cost_are_followed():
    rows = C.piece_size_sweep([4096, 512])
    assert list(rows.index) == [4096, 512] and list(rows["budget"]) == [4098, 514]
    free = IterationCost(fixed_s=0.0, per_token_s=FITTED_COST.per_token_s, per_pair_s=FITTED_COST.per_pair_s)
    cheap = C.piece_size_sweep([512], cost=free)
    # without a fixed part the prompt alone costs the same however it is cut
    whole = C.piece_size_sweep([8192], cost=free)
    assert cheap.loc[512, "8K alone (ms)"] == pytest.approx(whole.loc[8192, "8K alone (ms)"])
    assert cheap.loc[512, "8K alone (ms)"] < rows.loc[512, "8K alone (ms)"]


@pytest.mark.parametrize("bad", [[], [0], [-256], [256, 256], [1.5], "256", 256])
def test_bad_piece_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="chunk_sizes"):
        C.piece_size_sweep(bad)
