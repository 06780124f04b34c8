"""Request timeline and metrics of sections 8.1.1 and 8.1.3."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.calibration import prefill_time
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.timeline import (RequestTimes, decode_throughput, itls_by_request, request_time, single_request,
                               summarize)


def test_single_request_of_the_chapter() -> None:
    r = single_request(queue_s=0.1, prefill_s=0.096, itl_s=0.0265, output_tokens=256)
    assert round(r.ttft_s, 3) == 0.196
    assert len(r.itls_s) == 255
    assert round(r.itls_s.sum(), 2) == 6.76
    assert round(r.request_time_s, 2) == 6.95
    assert r.meets(7.0)


def test_one_inserted_prefill_breaks_the_deadline() -> None:
    r = single_request(0.1, 0.096, 0.0265, 256, stalls_s={128: 0.096})
    assert round(r.request_time_s, 2) == 7.05
    assert r.max_itl_s == pytest.approx(0.123, abs=0.0006)  # "about 123 ms"
    assert not r.meets(7.0)


def test_throughput_of_a_batch() -> None:
    assert round(decode_throughput(16, 0.02744)) == 583
    assert round(decode_throughput(1, 0.02626)) == 38


def test_prefill_times_at_measured_efficiency() -> None:
    qwen, rtx = MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"]
    assert round(prefill_time(qwen, rtx, 6144) * 1000, 1) == 307.9
    assert round(prefill_time(qwen, rtx, 2048) * 1000, 1) == 94.7


@given(
    st.floats(0, 10), st.floats(0, 10), st.floats(0, 1), st.integers(1, 2000), st.floats(0, 100)
)
def test_request_time_identity(queue: float, prefill: float, itl: float, g: int, arrival: float) -> None:
    r = single_request(queue, prefill, itl, g, arrival_s=arrival)
    assert r.request_time_s == pytest.approx(r.ttft_s + r.itls_s.sum(), abs=1e-9)
    assert r.request_time_s == pytest.approx(queue + prefill + (g - 1) * itl, abs=1e-6)
    assert request_time(queue, prefill, itl + 0.001, g) >= request_time(queue, prefill, itl, g)


def test_summary_of_several_requests() -> None:
    a = RequestTimes(0.0, (0.1, 0.2, 0.3))
    b = RequestTimes(0.05, (0.25, 0.45))
    s = summarize([a, b])
    assert s["makespan_s"] == pytest.approx(0.45)
    assert s["max_itl_s"] == pytest.approx(0.2)
    assert s["throughput_tok_s"] == pytest.approx(5 / 0.45)
    assert np.isclose(s["mean_ttft_s"], (0.1 + 0.2) / 2)


def test_timeline_validation() -> None:
    with pytest.raises(ValueError, match="token_times_s"):
        RequestTimes(0.0, ())
    with pytest.raises(ValueError, match="arrival_s"):
        RequestTimes(1.0, (0.5,))
    with pytest.raises(ValueError, match="output_tokens"):
        single_request(0, 0, 0.01, 0)
    with pytest.raises(ValueError, match="stalls_s"):
        single_request(0, 0, 0.01, 3, stalls_s={3: 0.1})
    with pytest.raises(ValueError, match="batch"):
        decode_throughput(0, 0.01)


def test_stall_keys_must_be_integer_gaps() -> None:
    with pytest.raises(ValueError, match="stalls_s"):
        single_request(0, 0, 0.01, 5, stalls_s={1.5: 0.1})


def test_arguments_of_the_wrong_kind_are_refused_by_name() -> None:
    """bool/complex/str times were accepted; overflows, 2**63 tokens and a list of stalls raised numpy or Python errors."""
    for bad in (np.array([True, True]), np.array([0.1, 0.2], complex), np.array(["0.1"]), "ab",
                np.array([0.1, 0.2], object)):
        with pytest.raises(ValueError, match="^token_times_s must"):
            RequestTimes(0.0, bad)
    with pytest.raises(ValueError, match="^token_times_s must start at or after arrival_s"):
        RequestTimes(0.0, (-1.0, 0.2))
    with pytest.raises(ValueError, match="^token_times_s must start at or after arrival_s"):
        RequestTimes(1e300, (0.1, 0.2))
    with pytest.raises(ValueError, match="itl_s"):
        single_request(0, 0, np.finfo(float).max, 4)  # the times overflow
    with pytest.raises(ValueError, match="^output_tokens must be an integer in"):
        single_request(0, 0, 0.01, 2**63)
    for bad in ("1", [1], None, 10**400):
        with pytest.raises(ValueError, match="^arrival_s must"):
            single_request(0, 0, 0.01, 4, arrival_s=bad)
    for bad in ([(1, 0.1)], "ab"):
        with pytest.raises(ValueError, match="^stalls_s must"):
            single_request(0, 0, 0.01, 4, stalls_s=bad)
    with pytest.raises(ValueError, match="step_s"):
        decode_throughput(4, 5e-324)  # 4 / 5e-324 overflows
    one = RequestTimes(0.0, (0.1, 0.2))
    for fn in (itls_by_request, summarize):
        for bad in (1.5, "ab", [[one]], None):
            with pytest.raises(ValueError, match="^requests must"):
                fn(bad)
        assert fn((one,)) is not None  # any sequence, not only a list


def test_running_example_single_request() -> None:
    from inferlab import example

    r = example.single_short_request()
    assert round(r.request_time_s, 2) == 6.95 and r.output_tokens == example.SHORT.output_tokens
    assert round(example.single_short_request({100: example.SINGLE_PREFILL_S}).request_time_s, 2) == 7.05


# ---- storage and vectorized metrics: RequestTimes cheap to build, ITLs computed when asked ----
def test_token_times_are_a_read_only_array() -> None:
    r = RequestTimes(0.0, (0.1, 0.2, 0.4))
    assert isinstance(r.token_times_s, np.ndarray) and r.token_times_s.dtype == np.float64
    with pytest.raises(ValueError):
        r.token_times_s[0] = 0.0
    source = np.array([0.1, 0.3])
    copy = RequestTimes(0.0, source)
    source[0] = 0.2  # the caller's array is copied, not aliased
    assert copy.token_times_s[0] == 0.1
    assert r == RequestTimes(0.0, [0.1, 0.2, 0.4]) and r != RequestTimes(0.0, (0.1, 0.2, 0.5))
    assert r != RequestTimes(0.05, (0.1, 0.2, 0.4)) and r != "r"
    with pytest.raises(TypeError):
        hash(r)
    assert r.ttft_s == 0.1 and type(r.ttft_s) is float and r.request_time_s == 0.4
    assert r.itls_s.tolist() == [0.2 - 0.1, 0.4 - 0.2]


def test_trusted_build_skips_checks_but_keeps_the_array() -> None:
    times = np.array([1.0, 1.5, 2.5])
    times.flags.writeable = False
    r = RequestTimes._trusted(0.5, times[1:])
    assert r.token_times_s.base is times and r.ttft_s == 1.0 and r.max_itl_s == 1.0
    assert r == RequestTimes(0.5, (1.5, 2.5))


timelines = st.lists(
    st.tuples(st.floats(0, 10), st.lists(st.floats(0, 5), min_size=1, max_size=6)), min_size=1, max_size=12
).map(lambda rows: [RequestTimes(a, tuple(a + np.cumsum(gaps))) for a, gaps in rows])


@given(timelines)
def test_vectorized_metrics_equal_the_per_request_ones(requests) -> None:
    longest, mean = itls_by_request(requests)
    np.testing.assert_array_equal(longest, [r.max_itl_s for r in requests])  # NaN (no gap) matches NaN
    np.testing.assert_allclose(mean, [r.mean_itl_s for r in requests], rtol=1e-12, atol=1e-15)
    s = summarize(requests)
    # bit for bit the formulas summarize used before it was vectorized, over the gaps that exist
    itls = np.concatenate([r.itls_s for r in requests])
    span = max(r.token_times_s[-1] for r in requests) - min(r.arrival_s for r in requests)
    assert s["mean_ttft_s"] == float(np.mean([r.ttft_s for r in requests]))
    assert (s["mean_itl_s"] == float(itls.mean())) if itls.size else math.isnan(s["mean_itl_s"])
    assert (s["max_itl_s"] == float(itls.max())) if itls.size else math.isnan(s["max_itl_s"])
    assert s["makespan_s"] == span



# ---- one output token: no inter-token gap, so no ITL (NaN), and no zero gap in any summary ----
def test_a_single_token_has_no_inter_token_latency() -> None:
    one = RequestTimes(0.0, (0.3,))
    assert one.itls_s.size == 0 and one.ttft_s == 0.3 and one.request_time_s == 0.3
    assert math.isnan(one.max_itl_s) and math.isnan(one.mean_itl_s)
    assert math.isnan(single_request(0.1, 0.1, 0.02, 1).max_itl_s)


def test_requests_without_a_gap_are_skipped_not_counted_as_zero() -> None:
    one, two = RequestTimes(0.0, (0.3,)), RequestTimes(0.0, (0.1, 0.5))
    longest, mean = itls_by_request([one, two, one])
    assert np.isnan(longest[[0, 2]]).all() and np.isnan(mean[[0, 2]]).all()
    assert longest[1] == pytest.approx(0.4) and mean[1] == pytest.approx(0.4)
    assert np.nanmin(longest) == pytest.approx(0.4)  # a zero would have been the minimum
    s = summarize([one, two])
    assert s["mean_itl_s"] == pytest.approx(0.4) and s["max_itl_s"] == pytest.approx(0.4)
    assert s["mean_ttft_s"] == pytest.approx(0.2) and s["throughput_tok_s"] == pytest.approx(3 / 0.5)
    alone = summarize([one, RequestTimes(0.1, (0.2,))])  # no request has a gap: no ITL at all
    assert math.isnan(alone["mean_itl_s"]) and math.isnan(alone["max_itl_s"])
    assert alone["makespan_s"] == pytest.approx(0.3) and alone["throughput_tok_s"] == pytest.approx(2 / 0.3)

def test_vectorized_metrics_need_requests() -> None:
    with pytest.raises(ValueError, match="requests"):
        itls_by_request([])
    with pytest.raises(ValueError, match="requests"):
        summarize([])


# ---- plot parts: the figures of 8.1 show the numbers they are given ----
def test_capacity_bars_are_one_collection_coloured_by_fit() -> None:
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    from inferlab.book.plot import COLORS
    from inferlab.book.plot import timeline as tplot

    fig = tplot.draw_capacity("qwen3-8b", 12, 8192, 256)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    heights = np.array([p.vertices[:, 1].max() for p in bars.get_paths()])
    fits = [tuple(c) == to_rgba(COLORS["kv"], 0.8) for c in bars.get_facecolors()]
    budget = ax.lines[0].get_ydata()[0]
    assert fits == (heights <= budget).tolist() and sum(fits) == 11  # n = 0 ... 10: "10 requests ... fit"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "KV budget 12,288 MiB", "qwen3-8b: 1,188.0 MiB per request: fits", "does not fit"]


def test_request_timeline_bars_span_queue_prefill_and_decode() -> None:
    from inferlab.book.plot import timeline as tplot

    fig = tplot.draw_single_request(0.5, 96, 26.5, 256)
    r = single_request(0.5, 0.096, 0.0265, 256)
    queue, prefill, decode = fig.axes[0].patches[:3]
    assert queue.get_width() == pytest.approx(0.5) and queue.get_x() == pytest.approx(0.0)
    assert prefill.get_x() + prefill.get_width() == pytest.approx(r.token_times_s[0])
    assert decode.get_x() + decode.get_width() == pytest.approx(r.token_times_s[-1])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:3] == ["queue", "prefill", "decode (255 gaps)"] and labels[3] == "deadline 7 s"
