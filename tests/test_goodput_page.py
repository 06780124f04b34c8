"""Section 8.6.2's page calls the library only: the window counts, the explorer's windows, the medians beside the
chapter's, and the two clocks. Each function must give exactly what the page's cells computed before they moved."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from inferlab import serving as sv
from inferlab.datasets import published


def _exact(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=0.0)


@pytest.fixture(scope="module")
def two_windows() -> dict[str, pd.DataFrame]:
    windows = {f"{r:g} per second": sv.retrieval_window(r, seed=0) for r in (2.0, 8.0)}
    return {k: sv.serve(reqs, "chunked", deadline_s=3.0, correct=ok) for k, (reqs, ok) in windows.items()}


@pytest.fixture(scope="module")
def per_window() -> pd.DataFrame:
    return sv.goodput_windows(rates=(1, 4, 16))


@pytest.fixture(scope="module")
def chapter() -> pd.DataFrame:
    return published("goodput_8_6_2").set_index(["arrival_rate_per_s", "policy"])


def test_window_counts_are_the_pages_two_windows(two_windows) -> None:
    counts = sv.window_counts(two_windows)
    assert list(counts.index) == ["2 per second", "8 per second"]
    assert list(counts.columns) == ["requests", "completed", "correct", "on_time", "good", "t_obs_s",
                                    "completion_rps", "goodput_rps"]
    # the values the page printed before (summarize_served per window, in the cell)
    assert counts.loc["2 per second", ["requests", "completed", "correct", "on_time", "good"]].tolist() == [
        16, 16, 14, 16, 14]
    assert counts.loc["8 per second", ["requests", "completed", "correct", "on_time", "good"]].tolist() == [
        16, 16, 14, 5, 4]
    assert counts.loc["2 per second", "completion_rps"] == _exact(1.308047157589151)
    assert counts.loc["2 per second", "goodput_rps"] == _exact(1.1445412628905072)
    assert counts.loc["8 per second", "completion_rps"] == _exact(2.6058471666467407)
    assert counts.loc["8 per second", "goodput_rps"] == _exact(0.6514617916616852)
    assert counts["t_obs_s"].round(2).tolist() == [12.23, 6.14]
    for key, records in two_windows.items():  # the same numbers summarize_served gives, counts as ints
        s = sv.summarize_served(records)
        assert all(counts.loc[key, c] == s[c] for c in counts.columns)
    assert all(counts[c].dtype.kind == "i" for c in ("requests", "completed", "correct", "on_time", "good"))


def test_window_counts_number_a_sequence_and_refuse_bad_windows(two_windows) -> None:
    counts = sv.window_counts(list(two_windows.values()))
    assert list(counts.index) == [1, 2]
    for bad in ([], {}, "windows", [pd.DataFrame()], [two_windows["2 per second"].drop(columns="good")], 3):
        with pytest.raises(ValueError, match="windows"):
            sv.window_counts(bad)


def test_served_windows_are_the_explorers_windows() -> None:
    windows = sv.served_windows(4.0, "chunked", deadline_s=3.0, accuracy=0.5)
    counts = sv.window_counts(windows)
    # goodput_at (the explorer) takes its medians over exactly these windows
    at = sv.goodput_at(4.0, 3.0, 0.5, policies=("chunked",)).loc["chunked"]
    assert np.median(counts["completion_rps"]) == at["completion_rps"]
    assert np.median(counts["goodput_rps"]) == at["goodput_rps"]
    # the values the page's loop found before: correct answers per window, and late ones at 6 s one at a time
    assert counts["correct"].tolist() == [6, 8, 9] and (counts["requests"] == 16).all()
    single6 = sv.window_counts(sv.served_windows(4.0, "one-at-a-time", deadline_s=6.0, accuracy=7 / 8))
    assert single6["on_time"].tolist() == [16, 13, 12]
    relaxed = sv.window_counts(sv.served_windows(4.0, "chunked", deadline_s=6.0, accuracy=7 / 8))
    assert (relaxed["on_time"] == 16).all() and relaxed["correct"].tolist() != [14] * 3
    assert len(sv.served_windows(4.0, "chunked", windows=1)) == 1


@pytest.mark.parametrize("kwargs, name", [(dict(rate_per_s=0.0), "rate_per_s"), (dict(policy="fifo"), "policy"),
                                          (dict(deadline_s=-1.0), "deadline_s"), (dict(accuracy=1.5), "accuracy"),
                                          (dict(windows=0), "windows")])
def test_served_windows_refuse_bad_input(kwargs, name) -> None:
    args = dict(rate_per_s=4.0, policy="chunked") | kwargs
    with pytest.raises(ValueError, match=name):
        sv.served_windows(**args)


def test_window_medians_are_the_bars_of_figures_8_33_and_8_34(per_window) -> None:
    ours = sv.window_medians(per_window)
    assert list(ours.index) == [(r, p) for r in (1.0, 4.0, 16.0) for p in ("one-at-a-time", "chunked")]
    assert "window" not in ours.columns
    # the values the page glued before (groupby in the cell)
    assert ours.loc[(1.0, "chunked"), "goodput_rps"] == _exact(0.9031144351269819)
    assert ours.loc[(4.0, "chunked"), "completion_rps"] == _exact(2.19001361167899)
    assert ours.loc[(4.0, "chunked"), "goodput_rps"] == _exact(0.7906916289742911)
    assert ours.loc[(16.0, "chunked"), "completion_rps"] == _exact(2.6170227226400025)
    assert ours.loc[(16.0, "chunked"), "goodput_rps"] == _exact(0.6542556806600006)
    assert ours.loc[(1.0, "one-at-a-time"), "goodput_rps"] == _exact(0.858120162463841)
    assert ours.loc[(4.0, "one-at-a-time"), "goodput_rps"] == _exact(0.4474562121498579)
    assert ours.loc[(4.0, "one-at-a-time"), "completion_rps"] == _exact(1.4318598788795454)
    # a median lies among its windows, and the sweep's medians are these
    for (rate, policy), frame in per_window.groupby(level=[0, 1]):
        assert frame["goodput_rps"].min() <= ours.loc[(rate, policy), "goodput_rps"] <= frame["goodput_rps"].max()
    sweep = sv.goodput_sweep(rates=(4,), policies=("chunked",))
    assert sweep.loc[(4.0, "chunked"), "goodput_rps"] == ours.loc[(4.0, "chunked"), "goodput_rps"]


def test_window_medians_refuse_what_is_not_a_sweep(per_window) -> None:
    for bad in (per_window.reset_index(), per_window.iloc[:0], per_window.assign(policy_name="x"), [1, 2]):
        with pytest.raises(ValueError, match="windows"):
            sv.window_medians(bad)


def test_beside_published_is_the_pages_table(per_window, chapter) -> None:
    side = sv.beside_published(sv.window_medians(per_window), chapter)
    assert list(side.columns) == ["completion_rps", "goodput_rps", "completion_rps_chapter", "goodput_rps_chapter"]
    assert [p for _, p in side.index] == ["one-at-a-time", "continuous"] * 3
    # the chapter's printed medians, and a dash (NaN) where it printed none
    assert side.loc[(4.0, "one-at-a-time"), ["completion_rps_chapter", "goodput_rps_chapter"]].tolist() == [1.22, 0.31]
    assert side.loc[(16.0, "continuous"), ["completion_rps_chapter", "goodput_rps_chapter"]].tolist() == [2.38, 0.60]
    assert math.isnan(side.loc[(1.0, "continuous"), "completion_rps_chapter"])
    assert side.loc[(16.0, "one-at-a-time")].iloc[2:].isna().all()
    assert side.loc[(4.0, "continuous"), "goodput_rps"] == _exact(0.7906916289742911)
    with pytest.raises(ValueError, match="published"):
        sv.beside_published(sv.window_medians(per_window), chapter.reset_index())
    with pytest.raises(ValueError, match="columns"):
        sv.beside_published(sv.window_medians(per_window), chapter, columns=("energy",))
    with pytest.raises(ValueError, match="medians"):
        sv.beside_published(per_window, chapter)


def test_clock_comparison_is_the_pages_one_at_a_time_window() -> None:
    reqs, correct = sv.retrieval_window(4.0, seed=0)
    single4 = sv.serve(reqs, "one-at-a-time", deadline_s=3.0, correct=correct)
    clocks = sv.clock_comparison(single4, deadline_s=3.0)
    # the values the page computed in the cell before: engine log against the scheduled arrival
    assert clocks.loc["engine", "mean_s"] == _exact(0.6983923600000002)
    assert clocks.loc["user", "mean_s"] == _exact(3.201722985538294)
    assert clocks["within_deadline"].tolist() == [16, 6]
    assert clocks.loc["user", "within_deadline"] == int(single4["on_time"].sum())


def test_the_users_clock_never_runs_shorter_than_the_engines() -> None:
    for policy in ("one-at-a-time", "chunked"):
        for seed in range(3):
            reqs, _ = sv.retrieval_window(8.0, seed=seed)
            clocks = sv.clock_comparison(sv.serve(reqs, policy, deadline_s=3.0), deadline_s=3.0)
            assert clocks.loc["user", "mean_s"] >= clocks.loc["engine", "mean_s"] > 0
            assert clocks.loc["user", "within_deadline"] <= clocks.loc["engine", "within_deadline"]


def test_clock_comparison_refuses_bad_input() -> None:
    reqs, _ = sv.retrieval_window(4.0, n_requests=4)
    records = sv.serve(reqs, "chunked")
    with pytest.raises(ValueError, match="deadline_s"):
        sv.clock_comparison(records, deadline_s=0.0)
    with pytest.raises(ValueError, match="start_s"):
        sv.clock_comparison(records.drop(columns="start_s"))
    with pytest.raises(ValueError, match="records"):
        sv.clock_comparison(records.iloc[:0])
