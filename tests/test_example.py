"""The running example is defined once, as the chapter states it."""

import pytest

from inferlab import example
from inferlab.units import GiB


def test_running_example() -> None:
    assert example.MODEL.name == "qwen3-8b" and example.ACCELERATOR.name == "rtx-pro-6000"
    assert example.KV_BUDGET_BYTES == 12 * GiB and example.INSTANCE_BYTES == 32 * GiB
    assert (example.SHORT.prompt_tokens, example.SHORT.output_tokens, example.SHORT.shared_prefix_tokens) == (2048, 256, 0)
    assert (example.LONG.prompt_tokens, example.LONG.output_tokens, example.LONG.shared_prefix_tokens) == (8192, 256, 6144)
    assert example.DEADLINE_S == 7.0
    split = example.memory_split()["GiB"]
    assert round(split["weights (BF16)"], 1) == 15.3
    assert round(split["activations, graph replay, workspace"], 1) == 4.7
    assert example.request_classes().loc["prompt tokens"].tolist() == [2048, 8192]


def test_request_class_validates() -> None:
    with pytest.raises(ValueError, match="shared_prefix_tokens"):
        example.RequestClass("x", 10, 5, shared_prefix_tokens=11)
    with pytest.raises(ValueError, match="output_tokens"):
        example.RequestClass("x", 10, 0)


def test_decode_step_breakdown_reproduces_the_published_reads_and_efficiencies() -> None:
    from inferlab.datasets import published

    table = example.decode_step_breakdown()
    sweep = published("batch_sweep_8_1").set_index("batch")
    assert table.index.tolist() == [1, 4, 16, 64]
    assert table["read (GB)"].round(2).tolist() == sweep["step_read_gb"].tolist()
    assert table["read floor (ms)"].round(2).tolist() == [8.62, 9.12, 11.14, 19.23]
    mbu = table["read floor (ms)"] / table["measured step (ms)"]
    assert mbu.round(2).tolist() == sweep["decode_mbu"].tolist()
    assert round(table.loc[1, "rest (ms)"], 1) == 17.6
    assert table["rest (ms)"].is_monotonic_decreasing  # the fixed cost hides more of the reads as b grows
    assert (table["compute floor (ms)"] < 0.15 * table["read floor (ms)"]).all()  # memory side of the roofline
    assert not table.isna().any().any()


def test_read_floor_batch_is_where_the_extrapolated_step_meets_its_reads() -> None:
    from inferlab.calibration import measured_decode_step
    from inferlab.roofline import step_read_bytes

    D_w, k, beta = example.MODEL.matrix_weight_bytes(), example.MODEL.kv_bytes_per_token(), example.ACCELERATOR.hbm_bandwidth
    for L in (2048, 8192):
        b, crossing = example.read_floor_batch(L)
        at, before = step_read_bytes(b, L, D_w, k), step_read_bytes(b - 1, L, D_w, k)
        assert at / beta >= measured_decode_step(at) and before / beta < measured_decode_step(before)
        assert abs(crossing / beta - measured_decode_step(crossing)) < 1e-9
    assert example.read_floor_batch(2048)[0] == 149
    with pytest.raises(ValueError, match="context_tokens"):
        example.read_floor_batch(0)


def test_step_breakdown_figure_draws_one_bar_pair_per_batch() -> None:
    from matplotlib.figure import Figure

    from inferlab.book.plot import timeline as tplot

    fig = tplot.step_breakdown(example.decode_step_breakdown(), "test")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.patches) == 8 and [t.get_text() for t in ax.get_xticklabels()] == ["b = 1", "b = 4", "b = 16", "b = 64"]


def test_kv_capacity_table_is_the_chapter_table() -> None:
    table = example.kv_capacity_table()
    assert table.index.tolist() == ["short chat", "long context"]
    assert table["tokens held"].tolist() == [2303, 8447]
    assert table["after prefill (MiB)"].tolist() == [288, 1152]
    assert table["at completion (MiB)"].tolist() == [324, 1188]
    assert table["fit in 12 GiB"].tolist() == [37, 10]
    smaller = example.kv_capacity_table(kv_budget_bytes=6 * GiB, block_size=512)
    assert smaller["at completion (MiB)"].tolist() == [360, 1224]  # 2303 -> 2560 tokens, 8447 -> 8704
    assert smaller["fit in 6 GiB"].tolist() == [6144 // 360, 6144 // 1224]
    with pytest.raises(ValueError, match="block_size"):
        example.kv_capacity_table(block_size=0)


def test_short_request_in_batch_adds_the_measured_step_growth_to_every_gap() -> None:
    from inferlab.datasets import published

    step = published("batch_sweep_8_1").set_index("batch")["decode_step_s"]
    alone = example.short_request_in_batch(1)
    assert alone.request_time_s == pytest.approx(example.single_short_request().request_time_s)
    assert alone.ttft_s == pytest.approx(0.196) and round(alone.request_time_s, 2) == 6.95
    for b in (4, 16, 64):  # measured batches: the gap grows by exactly the measured step's growth
        r = example.short_request_in_batch(b)
        assert r.ttft_s == pytest.approx(alone.ttft_s)
        assert r.itls_s == pytest.approx(example.SINGLE_ITL_S + step[b] - step[1], abs=1e-5)  # steps interpolated in bytes
    times = [example.short_request_in_batch(b).request_time_s for b in (1, 2, 4, 16, 64)]
    assert times == sorted(times) and times[0] < example.DEADLINE_S < times[2]
    with pytest.raises(ValueError, match="batch"):
        example.short_request_in_batch(0)


def test_hidden_read_share_of_the_batch_4_step() -> None:
    """Section 8.3.3: the batch-4 step read 0.9 GB more and took 0.36 ms longer, 0.50 ms at peak: 28 % hidden,
    53 % at 65 % MBU; a card twice as fast hides less of the same time."""
    from inferlab.calibration import DECODE_MBU_LARGE_BATCH, hidden_read_share
    from inferlab.hardware import ACCELERATORS

    card = example.ACCELERATOR
    assert round(100 * hidden_read_share(card)) == 28
    assert round(100 * hidden_read_share(card, DECODE_MBU_LARGE_BATCH)) == 53
    assert hidden_read_share(ACCELERATORS["h200"]) < hidden_read_share(card)
    for bad, name in ((("card",), "accelerator"), ((card, 0.0), "mbu"), ((card, 1.5), "mbu"), ((card, 5e-324), "mbu")):
        with pytest.raises(ValueError, match=name):
            hidden_read_share(*bad)


def test_the_measured_decode_steps_are_read_once_and_no_caller_can_change_them() -> None:
    from inferlab.calibration import decode_step_table, measured_decode_step

    xs, ys = decode_step_table()
    assert list(xs) == sorted(xs) and len(xs) == 4
    assert [measured_decode_step(x) for x in xs] == list(ys)  # the measured points themselves
    xs[:], ys[:] = 1.0, 0.0  # a caller's copy, changed
    again_xs, again_ys = decode_step_table()
    assert list(again_xs) == sorted(again_xs) and measured_decode_step(again_xs[2]) == again_ys[2] > 0
