"""Section 8.6.1's tables: streams of growing length (``serving.stream_length_table``), what became of each
request (``serving.request_outcomes``) and the page's table formatter (``book.formatted_table``).

The pinned values are what the page printed before its loop and its ``readable`` helper moved into the library.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from inferlab import book, example
from inferlab import serving as sv


@pytest.fixture(scope="module")
def longer() -> pd.DataFrame:
    return sv.stream_length_table(rates=(4, 16), lengths=(40, 80, 160), policy="chunked")


@pytest.fixture(scope="module")
def six() -> tuple[pd.DataFrame, pd.DataFrame]:
    reqs = sv.trace_requests([0.0] * 6, example.SHORT.prompt_tokens, example.SHORT.output_tokens)
    return sv.serve(reqs, "one-at-a-time"), sv.serve(reqs, "one-at-a-time", admission_control="reject")


# --- stream_length_table -------------------------------------------------------------------------------------


def test_stream_length_table_pins_the_pages_values(longer: pd.DataFrame) -> None:
    assert list(longer.index) == [(4, 40), (4, 80), (4, 160), (16, 40), (16, 80), (16, 160)]
    assert longer.index.names == ["arrival_rate_per_s", "n_requests"]
    assert list(longer.columns) == ["mean_latency_s", "latency_p95_s", "mean_in_system", "on_time_share"]
    assert list(longer["mean_latency_s"].round(6)) == [2.433803, 2.415647, 2.346377, 3.85103, 5.82414, 7.875095]
    assert list(longer["mean_in_system"].round(6)) == [8.987804, 9.268515, 8.400587, 27.829675, 49.470184,
                                                       73.320693]
    assert list(longer["on_time_share"]) == [1, 1, 1, 1, 1, 0.225]


def test_stream_length_table_is_the_pages_old_loop(longer: pd.DataFrame) -> None:
    """Bit for bit what the page's loop computed: each stream served and summarized on its own."""
    for rate in (4, 16):
        for n in (40, 80, 160):
            s = sv.summarize_served(sv.serve(sv.poisson_requests(rate, n, 2048, 64, seed=7), "chunked"))
            row = longer.loc[(rate, n)]
            assert row["mean_latency_s"] == s["mean_latency_s"] and row["mean_in_system"] == s["mean_in_system"]
            assert row["latency_p95_s"] == s["latency_p95_s"] and row["on_time_share"] == s["on_time"] / n


def test_stream_length_table_shows_overload_growing(longer: pd.DataFrame) -> None:
    """Above the capacity (about 9.3 per second) the time in the system keeps growing with the stream; below it, not."""
    assert longer.loc[16, "mean_latency_s"].is_monotonic_increasing
    assert longer.loc[16, "mean_in_system"].is_monotonic_increasing
    assert longer.loc[4, "mean_latency_s"].max() - longer.loc[4, "mean_latency_s"].min() < 0.1


def test_stream_length_table_matches_load_table_at_one_length() -> None:
    one = sv.stream_length_table(rates=(1, 4), lengths=(12,), policy="one-at-a-time")
    table = sv.load_table(rates=(1, 4), policies=("one-at-a-time",), n_requests=12)
    assert np.array_equal(one.to_numpy(), table.to_numpy())


def test_load_table_keeps_the_pages_values() -> None:
    table = sv.load_table(rates=(0.25, 1, 32))
    assert round(table.loc[(0.25, "one-at-a-time"), "mean_latency_s"], 2) == 2.17
    assert round(table.loc[(1, "one-at-a-time"), "latency_p95_s"], 2) == 33.42
    assert round(table.loc[(32, "chunked"), "mean_latency_s"], 2) == 4.43
    assert round(table.loc[(32, "chunked"), "mean_in_system"], 1) == 32.0
    assert round(table.loc[(1, "one-at-a-time"), "on_time_share"], 3) == 0.225


@pytest.mark.parametrize("kwargs, name", [
    (dict(lengths=()), "lengths"), (dict(lengths=(0,)), "lengths"), (dict(lengths=(2.5,)), "lengths"),
    (dict(lengths=40), "lengths"), (dict(rates=()), "rates"), (dict(rates=(-1,)), "rates"),
    (dict(policy="fastest"), "policy"), (dict(seed=np.random.default_rng(0)), "seed"), (dict(seed=-1), "seed"),
    (dict(deadline_s=0), "deadline_s"),
])
def test_stream_length_table_refuses_bad_input(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        sv.stream_length_table(**{"rates": (4,), "lengths": (4,), **kwargs})


# --- request_outcomes ----------------------------------------------------------------------------------------


def test_request_outcomes_of_the_six_requests(six: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    plain, gated = (sv.request_outcomes(r) for r in six)
    assert list(plain.columns) == ["status", "latency_s", "on_time"] and list(plain.index) == list(six[0].index)
    assert list(plain["status"]) == ["done"] * 6 and list(plain["on_time"]) == [True] + [False] * 5
    assert list(plain["latency_s"].round(2)) == [6.79, 13.58, 20.37, 27.16, 33.95, 40.74]
    assert list(gated["status"]) == ["done"] + ["rejected"] * 5
    assert gated["latency_s"].iloc[0] == plain["latency_s"].iloc[0] and gated["latency_s"].iloc[1:].isna().all()
    assert list(gated["on_time"]) == [True] + [None] * 5


def test_request_outcomes_of_a_cancelled_request() -> None:
    cut = sv.serve(sv.trace_requests([0.0, 0.0], 1024, 200), "one-at-a-time", cancel_at={"r0": 1.0})
    out = sv.request_outcomes(cut)
    assert out.loc["r0", "status"] == "cancelled" and math.isnan(out.loc["r0", "latency_s"])
    assert out.loc["r0", "on_time"] is None and out.loc["r1", "on_time"] in (True, False)


@pytest.mark.parametrize("records", [None, pd.DataFrame(), pd.DataFrame({"status": ["done"]})])
def test_request_outcomes_refuses_bad_input(records: object) -> None:
    with pytest.raises(ValueError, match="records"):
        sv.request_outcomes(records)


# --- formatted_table -----------------------------------------------------------------------------------------


def _readable(served: pd.DataFrame) -> pd.DataFrame:
    """The helper the page defined in a cell before (capitalised status, yes / no, a dash for what never ran)."""
    ran = served["status"] == "done"
    return pd.DataFrame({"status": served["status"].str.capitalize(),
                         "time (s)": served["latency_s"].map("{:.2f}".format).where(ran, "–"),
                         "on time": served["on_time"].map({True: "yes", False: "no"}).where(ran, "–")})


def test_formatted_table_reproduces_the_pages_outcome_table(six: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    spec, names = {"status": "", "latency_s": ".2f", "on_time": ""}, {"latency_s": "time (s)", "on_time": "on time"}
    for served in six:
        shown = book.formatted_table(sv.request_outcomes(served), spec, names)
        pd.testing.assert_frame_equal(shown, _readable(served))
    gated = book.formatted_table(sv.request_outcomes(six[1]), spec, names)
    assert list(gated.iloc[1]) == ["Rejected", "–", "–"] and list(gated.iloc[0]) == ["Done", "6.79", "yes"]


def test_formatted_table_writes_specs_renames_and_keeps_order() -> None:
    df = pd.DataFrame({"a_s": [2.345, float("nan")], "share": [1.0, 0.225], "skip": [1, 2]},
                      index=pd.MultiIndex.from_tuples([(4.0, "x"), (0.25, "y")], names=["rate", "p"]))
    out = book.formatted_table(df, {"share": ".0%", "a_s": ".1f"}, {"a_s": "a (s)", "rate": "rate (1/s)"})
    assert list(out.columns) == ["share", "a (s)"] and list(out.index.names) == ["rate (1/s)", "p"]
    assert list(out.index) == [("4", "x"), ("0.25", "y")]
    assert list(out["share"]) == ["100%", "22%"] and list(out["a (s)"]) == ["2.3", "–"]
    assert list(df.columns) == ["a_s", "share", "skip"]  # the argument is left as it was


@pytest.mark.parametrize("args, name", [
    ((None, {"a": ""}), "df"), ((pd.DataFrame({"a": [1.0]}), {}), "formats"),
    ((pd.DataFrame({"a": [1.0]}), {"b": ""}), "formats"), ((pd.DataFrame({"a": [1.0]}), {"a": 2}), "formats"),
    ((pd.DataFrame({"a": [1.0]}), {"a": "zz"}), "formats"), ((pd.DataFrame({"a": [1.0]}), ["a"]), "formats"),
    ((pd.DataFrame({"a": [1.0]}), {"a": ""}, ["a"]), "names"),
    ((pd.DataFrame({"a": [1.0]}), {"a": ""}, {"a": 1}), "names"),
])
def test_formatted_table_refuses_bad_input(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        book.formatted_table(*args)


def test_formatted_table_reads_numpy_bools_as_yes_and_no() -> None:
    df = pd.DataFrame({"ok": np.array([True, False])})
    assert list(book.formatted_table(df, {"ok": ""})["ok"]) == ["yes", "no"]
