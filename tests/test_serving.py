"""Section 8.6: the configuration chooser (A-E), measured rates, goodput, Little's law, admission and cancellation."""

import math

import numpy as np
import pytest

from inferlab import serving as sv
from inferlab.scheduling import Request
from inferlab.units import GiB, MiB


@pytest.fixture(scope="module")
def chapter():
    return sv.evaluate_configs()


def test_memory_of_a_to_e(chapter) -> None:
    mib = (chapter["kv_bytes"] / MiB).round(0)
    assert mib["A"] == 19_008 and mib["B"] == 6048 and mib["D"] == 9236 and mib["E"] == 6048
    assert round(chapter.loc["B", "kv_gib"], 2) == 5.91 and round(chapter.loc["C", "kv_gib"], 2) == 9.86
    assert round(chapter.loc["D", "kv_gib"], 2) == 9.02
    assert list(chapter["fits"]) == [False, True, True, True, True]


def test_times_of_a_to_e(chapter) -> None:
    assert round(chapter.loc["A", "prefill_s"], 2) == 7.34 == round(chapter.loc["C", "prefill_s"], 2)
    assert round(chapter.loc["B", "prefill_s"], 2) == 2.04 and round(chapter.loc["D", "prefill_s"], 2) == 2.23
    assert round(chapter.loc["C", "round_s"] * 1e3, 2) == 28.26
    assert round(chapter.loc["A", "round_s"] * 1e3, 2) == 29.63
    assert chapter.loc["D", "rounds"] == 85 and chapter.loc["E", "rounds"] == 128
    total = chapter["total_s"].round(2)
    assert total["B"] == 9.01 and total["C"] == 14.55 and total["D"] == 4.56
    assert list(chapter["on_time"]) == [False, False, False, True, True]


def test_only_d_of_the_chapters_four_is_feasible_and_its_cost(chapter) -> None:
    four = chapter.loc[["A", "B", "C", "D"]]
    assert sv.feasible(four) == ["D"]
    assert round(chapter.loc["D", "gpu_s_per_good"], 3) == 0.285
    assert chapter.loc["D", "energy_j_per_good"] <= 171.0 and round(chapter.loc["D", "energy_j_per_good"]) == 171
    assert math.isinf(chapter.loc["B", "gpu_s_per_good"])
    assert not chapter.drop(columns="description").isna().any().any()


def test_what_ifs() -> None:
    small = sv.evaluate_configs(kv_budget_bytes=6 * GiB).loc[["A", "B", "C", "D"]]
    assert sv.feasible(small) == []
    assert bool(small.loc["B", "fits"]) and not bool(small.loc["D", "fits"])
    short = sv.evaluate_configs(output_tokens=16)
    assert round(short.loc["B", "total_s"], 2) == 2.45 and round(short.loc["D", "total_s"], 2) == 2.37
    assert bool(short.loc["B", "on_time"]) and bool(short.loc["D", "on_time"])


def test_exercise_8_9_e_beats_b_and_survives_6_gib() -> None:
    table = sv.evaluate_configs(kv_budget_bytes=6 * GiB)
    assert sv.feasible(table) == ["E"]
    assert round(table.loc["E", "total_s"], 2) == round(2.040476 + 128 * 0.02745, 2)


def test_efficiency_table_matches_the_chapter() -> None:
    t = sv.efficiency_table()
    assert list(t["read_gb"].round(2)) == [15.44, 16.34, 19.97, 34.46]
    assert list(t["at_peak_ms"].round(2)) == [8.62, 9.12, 11.14, 19.23]
    assert list(t["measured_ms"].round(2)) == [26.26, 26.62, 27.44, 29.63]
    assert list((t["mbu"] * 100).round(0)) == [33, 34, 41, 65]
    assert list((t["prefill_mfu"] * 100).round(0)) == [62, 61, 61, 58]
    assert round((t.loc[1, "measured_ms"] - t.loc[1, "at_peak_ms"]), 1) == 17.6


def test_measured_rates() -> None:
    r = sv.shared_batch_rates()
    assert round(r["r_p"]) == 16_059 and round(r["r_d"]) == 585
    assert round(r["gpu_s_per_request"], 3) == 0.563 and round(r["gpu_s_per_batch"], 2) == 9.01
    assert round(r["prefill_mfu"] * 100) == 58
    assert abs(r["estimated_prefill_s"] - 2.04) < 0.005  # the model at 57.77 % MFU agrees with the measurement
    assert sv.gpu_seconds(2048, 1, 16_059, 585) == pytest.approx(2048 / 16_059)


def test_amdahl_and_task_time() -> None:
    assert round(sv.amdahl_speedup(0.5, 4), 2) == 1.6 and round(sv.amdahl_speedup(0.2, 4), 2) == 1.18
    assert sv.task_time({"decode": 50, "other": 50}, {"decode": 4}) == 62.5
    assert sv.task_time({"decode": 20, "other": 80}, {"decode": 4}) == 85
    assert sv.task_time({"a": 1.0}, added_s=8) == 9.0
    with pytest.raises(ValueError, match="fraction_accelerated"):
        sv.amdahl_speedup(1.5, 2)
    with pytest.raises(ValueError, match="speedups"):
        sv.task_time({"a": 1.0}, {"b": 2.0})
    ratio, speedup = sv.amdahl_derivation()  # the derived formula agrees with the numeric one
    f, sigma = sorted(ratio.free_symbols, key=str)
    for fv, sv_ in ((0.5, 4), (0.2, 4), (0.9, 10)):
        assert float(speedup.subs({f: fv, sigma: sv_})) == pytest.approx(sv.amdahl_speedup(fv, sv_))
        assert float(ratio.subs({f: fv, sigma: sv_})) == pytest.approx(1 / sv.amdahl_speedup(fv, sv_))


def test_littles_law_examples_and_simulation() -> None:
    assert sv.little_n(4, 0.5) == 2 and sv.little_n(4, 2) == 8
    reqs = sv.poisson_requests(2.0, 400, 512, 32, seed=3)
    df = sv.serve(reqs, sv.EngineSetup("continuous", max_running=64))
    s = sv.summarize_served(df)
    # over the whole window both sides count the same sojourns: n = lambda_obs * T exactly
    assert s["mean_in_system"] == pytest.approx(len(df) / s["t_obs_s"] * s["mean_latency_s"], rel=1e-9)
    # on an inner window the time average still matches lambda * T up to edge effects
    lo, hi = 20.0, 180.0
    inside = df[(df["arrival_s"] >= lo) & (df["arrival_s"] < hi)]
    n_bar = sv.time_average_in_system(df, lo, hi)
    assert n_bar == pytest.approx(len(inside) / (hi - lo) * inside["latency_s"].mean(), rel=0.05)


def test_waiting_outside_the_engine_counts() -> None:
    reqs = sv.trace_requests([0.0, 0.0, 0.0], 2048, 32)
    one = sv.serve(reqs, "one-at-a-time")
    cont = sv.serve(reqs, "continuous")
    assert one.loc["r2", "latency_s"] > 2 * one.loc["r0", "latency_s"]
    assert one.loc["r2", "start_s"] >= one.loc["r1", "finish_s"]
    assert cont["latency_s"].max() < one["latency_s"].max()


def test_goodput_counts_only_correct_and_on_time() -> None:
    reqs = sv.trace_requests(np.arange(8) * 0.05, 2048, 64)
    wrong = {r.name: r.name != "r3" for r in reqs}
    df = sv.serve(reqs, "one-at-a-time", deadline_s=3.0, correct=wrong)
    s = sv.summarize_served(df)
    assert s["completed"] == 8 and s["correct"] == 7
    assert s["good"] == int((df["correct"] & (df["latency_s"] <= 3.0)).sum()) < 7
    assert s["goodput_rps"] < s["completion_rps"]


def test_admission_control_turns_away_requests_that_would_be_late() -> None:
    reqs = sv.trace_requests(np.zeros(6), 2048, 256)
    plain = sv.serve(reqs, "one-at-a-time", deadline_s=7.0)
    gated = sv.serve(reqs, "one-at-a-time", deadline_s=7.0, admission_control="reject")
    assert (plain["on_time"]).sum() == 1
    assert (gated["status"] == "rejected").sum() == 5 and gated["on_time"].sum() == 1
    redirected = sv.serve(reqs, "one-at-a-time", deadline_s=7.0, admission_control="redirect")
    assert (redirected["status"] == "redirected").sum() == 5


def test_cancellation_frees_the_slot_after_the_iteration_in_flight() -> None:
    reqs = sv.trace_requests([0.0, 0.0], 1024, 200)
    plain = sv.serve(reqs, "one-at-a-time")
    cut = sv.serve(reqs, "one-at-a-time", cancel_at={"r0": 1.0})
    assert cut.loc["r0", "status"] == "cancelled" and 0 < cut.loc["r0", "output_tokens"] < 200
    assert cut.loc["r0", "finish_s"] >= 1.0  # the iteration in flight at 1.0 s completes
    assert cut.loc["r1", "finish_s"] < plain.loc["r1", "finish_s"]
    early = sv.serve(reqs, "one-at-a-time", cancel_at={"r1": 0.5})  # still queued: dropped
    assert early.loc["r1", "status"] == "cancelled" and early.loc["r1", "output_tokens"] == 0


@pytest.mark.parametrize("kwargs, name", [({"engine": "batchy"}, "engine"), ({"engine": 3}, "engine"),
                                          ({"deadline_s": 0}, "deadline_s"),
                                          ({"admission_control": "drop"}, "admission_control"),
                                          ({"correct": 1.5}, "correct"), ({"cancel_at": {"zz": 1.0}}, "cancel_at")])
def test_bad_input_names_the_parameter(kwargs, name) -> None:
    reqs = [Request("a", 0.0, 16, 4)]
    with pytest.raises(ValueError, match=name):
        sv.serve(reqs, **kwargs)


@pytest.mark.parametrize("kwargs, name", [({"policy": "batchy"}, "policy"),
                                          ({"kv_budget_bytes": -1}, "kv_budget_bytes"),
                                          ({"max_running": 0}, "max_running"), ({"token_budget": 0.5}, "token_budget"),
                                          ({"cost": 3}, "cost")])
def test_a_bad_engine_setup_names_the_parameter(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        sv.EngineSetup(**kwargs)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="kv_format"):
        sv.ServingConfig("X", "x", kv_format="int3")
    with pytest.raises(ValueError, match="tokens_per_round"):
        sv.ServingConfig("X", "x", tokens_per_round=0.5)
    with pytest.raises(ValueError, match="configs"):
        sv.evaluate_configs([])
    with pytest.raises(ValueError, match="rate_per_s"):
        sv.poisson_requests(0, 3, 16, 4)


def test_retrieval_window_one_task_is_always_wrong() -> None:
    reqs, correct = sv.retrieval_window(4.0, seed=1)
    assert len(reqs) == 16 and reqs[0].arrival_s == 0.0
    assert sum(correct.values()) == 14  # 7/8 of 16: task 5 appears twice
    assert all(not ok for name, ok in correct.items() if name.endswith(f"task{sv.WRONG_TASK}"))


def test_goodput_sweep_saturates_and_goodput_falls() -> None:
    t = sv.goodput_sweep(rates=(1, 4, 16))
    cont = t.xs("chunked", level="policy")
    one = t.xs("one-at-a-time", level="policy")
    assert (t["goodput_rps"] <= t["completion_rps"]).all()
    # batching raises completion throughput under load; goodput peaks and then falls as queues grow
    assert cont.loc[4, "completion_rps"] > 1.4 * one.loc[4, "completion_rps"]
    assert cont.loc[16, "completion_rps"] < 1.3 * cont.loc[4, "completion_rps"]
    assert cont.loc[16, "goodput_rps"] < cont["goodput_rps"].max()
    assert one.loc[4, "goodput_rps"] < one.loc[1, "goodput_rps"]


def test_goodput_windows_are_the_sweeps_windows_and_its_medians() -> None:
    w = sv.goodput_windows(rates=(4,), policies=("chunked", "one-at-a-time"), windows=3)
    assert list(w.index.names) == ["arrival_rate_per_s", "policy", "window"] and len(w) == 6
    assert list(w.loc[(4, "chunked")].index) == [1, 2, 3]
    t = sv.goodput_sweep(rates=(4,), policies=("chunked", "one-at-a-time"), windows=3)
    for policy in ("chunked", "one-at-a-time"):
        one = w.loc[(4, policy)]
        assert t.loc[(4, policy), "goodput_rps"] == one["goodput_rps"].median()
        assert t.loc[(4, policy), "completion_rps"] == one["completion_rps"].median()
        assert t.loc[(4, policy), "window_goodput_rps"] == tuple(one["goodput_rps"].round(3))
    assert (w["goodput_rps"] <= w["completion_rps"]).all()
    # window w is the same arrivals under both policies: seed + w
    reqs, correct = sv.retrieval_window(4, seed=1)
    s = sv.summarize_served(sv.serve(reqs, "chunked", deadline_s=3.0, correct=correct))
    assert w.loc[(4, "chunked", 2), "goodput_rps"] == pytest.approx(s["goodput_rps"])
    with pytest.raises(ValueError, match="windows"):
        sv.goodput_windows(windows=0)


def test_tokens_per_round_needed_for_d() -> None:
    d = sv.CHAPTER_CONFIGS["D"]
    m = sv.tokens_per_round_needed(d)
    assert 1.45 < m < 1.5  # 255 / 174 rounds
    ok = sv.ServingConfig(**{**d.__dict__, "tokens_per_round": m})
    late = sv.ServingConfig(**{**d.__dict__, "tokens_per_round": m * 0.98})
    assert sv.evaluate(ok)["on_time"] and not sv.evaluate(late)["on_time"]
    tight = sv.Workload(deadline_s=2.0)
    assert math.isinf(sv.tokens_per_round_needed(d, tight))


def test_read_bound_rounds_follow_the_growing_contexts() -> None:
    """B's rounds at peak bandwidth with no overhead: 255 of them, from its prompt's 19.23 ms upward, 19.40 ms
    on average (8.6.3: just under the 19.45 ms a round may last); D's three tokens a round grow them faster."""
    b, d = sv.CHAPTER_CONFIGS["B"], sv.CHAPTER_CONFIGS["D"]
    rounds = sv.read_bound_rounds(b)
    first = sv.configs.MEASURED_ON.memory_time(sv.round_breakdown(b).read_bytes)
    assert len(rounds) == sv.configs.decode_rounds(b) == 255 and rounds[0] > first
    assert np.all(np.diff(rounds) > 0) and round(first * 1e3, 2) == 19.23
    assert (round(np.mean(rounds) * 1e3, 2), round(rounds[-1] * 1e3, 2)) == (19.40, 19.57)
    growth = np.diff(sv.read_bound_rounds(d))
    assert len(growth) == sv.configs.decode_rounds(d) - 1 and growth[0] == pytest.approx(3 * np.diff(rounds)[0])
    with pytest.raises(ValueError, match="config"):
        sv.read_bound_rounds("B")


def test_another_card_keeps_the_overhead_and_reads_at_its_bandwidth() -> None:
    from inferlab.hardware import ACCELERATORS

    rtx = sv.evaluate_configs()
    h200 = sv.evaluate_configs(accelerator=ACCELERATORS["h200"])
    read = sv.configs.MEASURED_ON.memory_time(34.464e9)
    assert h200.loc["B", "round_s"] == pytest.approx(0.02735 - read + 34.464e9 / 4800e9, rel=1e-3)
    assert (h200["total_s"] < rtx["total_s"]).all()  # more bandwidth and FLOP/s: every configuration is faster
    assert h200.loc["B", "prefill_s"] < rtx.loc["B", "prefill_s"] * 503.8 / 989.4 * 1.01
    assert list(h200["kv_bytes"]) == list(rtx["kv_bytes"])  # memory does not depend on the card


def test_a_prefix_waiting_in_host_memory_is_copied_first() -> None:
    from inferlab.hardware import PCIE_GEN4_X16, PCIE_GEN5_X16

    on_device = sv.evaluate_configs()
    gen5 = sv.evaluate_configs(prefix_link_bandwidth=PCIE_GEN5_X16)
    gen4 = sv.evaluate_configs(prefix_link_bandwidth=PCIE_GEN4_X16)
    fetch5 = gen5["prefill_s"] - on_device["prefill_s"]
    assert round(fetch5["B"] * 1e3, 1) == 14.2  # 864 MiB at 64 GB/s, as section 8.3.4's fetch
    assert fetch5["A"] == 0 and fetch5["C"] == 0  # nothing is shared, nothing is fetched
    assert (gen4["prefill_s"] - on_device["prefill_s"])["B"] == pytest.approx(2 * fetch5["B"])
    with pytest.raises(ValueError, match="link_bandwidth"):
        sv.evaluate_configs(prefix_link_bandwidth=0.0)


def test_goodput_at_one_rate() -> None:
    t = sv.goodput_at(4.0, deadline_s=6.0, accuracy=0.5)
    assert list(t.index) == ["one-at-a-time", "chunked"]
    assert (t["goodput_rps"] <= 0.5 * t["completion_rps"] + 1e-12).all()
    assert t.loc["chunked", "completion_rps"] > t.loc["one-at-a-time", "completion_rps"]
    with pytest.raises(ValueError, match="windows"):
        sv.goodput_at(4.0, windows=0)


def test_completion_and_goodput_are_two_rates_of_the_served_summary() -> None:
    reqs = sv.poisson_requests(2.0, 120, 512, 32, seed=5)
    df = sv.serve(reqs, sv.EngineSetup("continuous", max_running=64), correct=0.5, seed=1)
    s = sv.summarize_served(df)
    assert sv.completion_and_goodput(df) == (s["completion_rps"], s["goodput_rps"])
    assert sv.mean_in_system(df) == s["mean_in_system"] > 0
    assert s["goodput_rps"] < s["completion_rps"]  # half the answers are wrong: the two rates differ


def test_a_repeated_run_is_remembered_short_traces_only_and_any_cost_works(monkeypatch) -> None:
    import pandas as pd

    from inferlab.scheduling import FITTED_COST
    from inferlab.serving import load

    calls = []
    real = load.simulate
    monkeypatch.setattr(load, "simulate", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k))
    load._remembered_run.cache_clear()
    reqs = sv.poisson_requests(4.0, 40, 1024, 64, seed=11)
    first = sv.serve(reqs, "chunked", deadline_s=7.0)
    again = sv.serve(reqs, "chunked", deadline_s=3.0, correct=0.5)  # same run, other deadline and answers
    assert calls == [40]
    pd.testing.assert_frame_equal(first.drop(columns=["correct", "on_time", "good"]),
                                  again.drop(columns=["correct", "on_time", "good"]))
    assert (again["on_time"] == (again["latency_s"] <= 3.0)).all()

    class Unhashable:  # a cost function with __eq__ and no __hash__
        __hash__ = None

        def __eq__(self, other):
            return isinstance(other, Unhashable)

        def __call__(self, work):
            return FITTED_COST(work)

    sv.serve(reqs, sv.EngineSetup("chunked", cost=Unhashable()))
    sv.serve(reqs, sv.EngineSetup("chunked", cost=Unhashable()))
    assert calls == [40, 40, 40]
    long = sv.poisson_requests(40.0, load._REMEMBER_REQUESTS + 1, 256, 8, seed=3)
    sv.serve(long, "continuous")
    sv.serve(long, "continuous")
    assert calls[-2:] == [len(long)] * 2


# ---- evaluate_configs: a workload given once, duplicate names, the measured step's shape, bad input ----------------

import pandas as pd  # noqa: E402  (this block's own import)


def test_a_workloads_output_length_and_deadline_are_used() -> None:
    long = sv.Workload(output_tokens=1024, deadline_s=30)
    table = sv.evaluate_configs(workload=long)
    assert round(table.loc["A", "total_s"], 2) == 37.66  # 7.34 s + 1023 rounds of 29.63 ms, not 256 outputs
    assert table.loc["A", "rounds"] == 1023
    assert table.loc["A", "total_s"] == sv.evaluate(sv.CHAPTER_CONFIGS["A"], long)["total_s"]
    assert list(table["on_time"]) == [t <= 30 for t in table["total_s"]]
    # the keywords alone build the workload; given with a workload they must agree with it
    pd.testing.assert_frame_equal(sv.evaluate_configs(output_tokens=1024, deadline_s=30), table)
    pd.testing.assert_frame_equal(sv.evaluate_configs(workload=long, output_tokens=1024, deadline_s=30.0), table)
    with pytest.raises(ValueError, match=r"output_tokens.*workload"):
        sv.evaluate_configs(workload=long, output_tokens=256)
    with pytest.raises(ValueError, match=r"deadline_s.*workload"):
        sv.evaluate_configs(workload=long, deadline_s=7.0)


def test_two_configurations_of_one_name_are_refused() -> None:
    a = sv.CHAPTER_CONFIGS["A"]
    with pytest.raises(ValueError, match=r"configs.*'A'"):
        sv.evaluate_configs([a, sv.CHAPTER_CONFIGS["B"], a])
    with pytest.raises(ValueError, match=r"configs.*'D'"):
        sv.evaluate_configs({"D": sv.CHAPTER_CONFIGS["D"], "D2": sv.CHAPTER_CONFIGS["D"]})


def test_the_measured_step_is_used_only_at_its_shape() -> None:
    from inferlab.hardware import ACCELERATORS

    step = sv.configs.round_time
    a, b = sv.CHAPTER_CONFIGS["A"], sv.CHAPTER_CONFIGS["B"]
    chapter = sv.evaluate_configs()
    assert list(chapter["step_source"]) == ["modelled", "measured", "modelled", "measured", "measured"]
    assert chapter.loc["B", "round_s"] == chapter.loc["D", "round_s"] == sv.configs.MEASURED_SHARED_STEP_S
    short = sv.evaluate_configs(output_tokens=16)  # a subset of the measured steps: still the measurement
    assert short.loc["B", "round_s"] == sv.configs.MEASURED_SHARED_STEP_S
    assert short.loc["B", "step_source"] == "measured"
    # elsewhere B's step is A's model for the same bytes read: it grows with the batch and the context
    wide = sv.Workload(n_requests=256)
    assert step(b, wide) == step(a, wide) and round(step(b, wide) * 1e3, 1) == 73.4
    assert sv.evaluate_configs(workload=wide).loc["B", "step_source"] == "modelled"
    by_batch = [sv.Workload(n_requests=n) for n in (32, 64, 128, 256)]
    by_context = [sv.Workload(n_requests=256, prompt_tokens=p) for p in (8192, 16_384, 32_768)]
    for shapes in (by_batch, by_context):
        times = [step(b, w) for w in shapes]
        assert times == [step(a, w) for w in shapes] and all(x < y for x, y in zip(times, times[1:]))
    longer = sv.Workload(output_tokens=1024)  # beyond the 256 measured outputs
    assert step(b, longer) == step(a, longer) and sv.evaluate(b, longer)["step_source"] == "modelled"
    wide_d = sv.evaluate_configs(workload=wide).loc["D"]  # 256 x 8 verified positions: compute decides the round
    assert wide_d["step_source"] == "compute-bound" and wide_d["round_s"] > step(b, wide)
    assert sv.evaluate_configs(accelerator=ACCELERATORS["h200"]).loc["B", "step_source"] == "transferred"


def test_evaluated_tables_hold_no_nan() -> None:
    for kwargs in ({}, {"output_tokens": 1}, {"workload": sv.Workload(n_requests=1, deadline_s=0.001)},
                   {"kv_budget_bytes": 1.0}):
        table = sv.evaluate_configs(**kwargs)
        assert not table.isna().any().any(), kwargs


_A = sv.CHAPTER_CONFIGS["A"]
_B = sv.CHAPTER_CONFIGS["B"]


@pytest.mark.parametrize("call, name", [
    (lambda: sv.evaluate_configs(kv_budget_bytes=float("nan")), "kv_budget_bytes"),
    (lambda: sv.evaluate_configs(kv_budget_bytes="12"), "kv_budget_bytes"),
    (lambda: sv.evaluate_configs(deadline_s=0), "deadline_s"),
    (lambda: sv.evaluate_configs(deadline_s=float("nan")), "deadline_s"),
    (lambda: sv.evaluate_configs(deadline_s="7"), "deadline_s"),
    (lambda: sv.evaluate_configs(output_tokens=2.5), "output_tokens"),
    (lambda: sv.evaluate_configs(output_tokens=-1), "output_tokens"),
    (lambda: sv.evaluate_configs(workload="chapter"), "workload"),
    (lambda: sv.evaluate_configs(accelerator="h200"), "accelerator"),
    (lambda: sv.evaluate_configs(prefix_link_bandwidth=float("nan")), "prefix_link_bandwidth"),
    (lambda: sv.evaluate_configs(prefix_link_bandwidth=-1.0), "prefix_link_bandwidth"),
    (lambda: sv.evaluate_configs([_A, "B"]), "configs"),
    (lambda: sv.evaluate_configs(_A), "configs"),
    (lambda: sv.evaluate_configs("AB"), "configs"),
    (lambda: sv.evaluate(_A, kv_budget_bytes=0), "kv_budget_bytes"),
    (lambda: sv.evaluate(_A, prefix_link_bandwidth=-1.0), "prefix_link_bandwidth"),
    (lambda: sv.evaluate("A"), "config"),
    (lambda: sv.evaluate(_A, workload=None), "workload"),
    (lambda: sv.evaluate(_A, model="qwen3-8b"), "model"),
    (lambda: sv.configs.kv_bytes(None), "config"),
    (lambda: sv.configs.kv_bytes(_A, workload={"n_requests": 16}), "workload"),
    (lambda: sv.configs.config_prefill_time(_A, mfu=0), "mfu"),
    (lambda: sv.configs.config_prefill_time(_A, mfu=1.5), "mfu"),
    (lambda: sv.configs.config_prefill_time(_A, mfu=float("nan")), "mfu"),
    (lambda: sv.configs.config_prefill_time(_A, accelerator=None), "accelerator"),
    (lambda: sv.configs.decode_rounds("A"), "config"),
    (lambda: sv.configs.round_time(_A, workload="x"), "workload"),
    (lambda: sv.tokens_per_round_needed(_A, accelerator="h200"), "accelerator"),
    (lambda: sv.prefix_fetch_time(_A, link_bandwidth=-1.0), "link_bandwidth"),
    (lambda: sv.prefix_fetch_time(_B, link_bandwidth="64e9"), "link_bandwidth"),
    (lambda: sv.feasible("table"), "table"),
    (lambda: sv.feasible(pd.DataFrame({"fits": [True]})), "table"),
    (lambda: sv.ServingConfig("X", "x", tokens_per_round="3"), "tokens_per_round"),
    (lambda: sv.ServingConfig("X", "x", tokens_per_round=float("nan")), "tokens_per_round"),
    (lambda: sv.ServingConfig("", "x"), "name"),
    (lambda: sv.ServingConfig(3, "x"), "name"),
    (lambda: sv.ServingConfig("X", None), "description"),
    (lambda: sv.ServingConfig("X", "x", shared_prefix="yes"), "shared_prefix"),
    (lambda: sv.ServingConfig("X", "x", kv_format=["bf16"]), "kv_format"),
    (lambda: sv.ServingConfig("X", "x", draft_bytes=float("nan")), "draft_bytes"),
    (lambda: sv.ServingConfig("X", "x", verify_positions=0), "verify_positions"),
    (lambda: sv.ServingConfig("X", "x", decode_step_s=-1.0), "decode_step_s"),
    (lambda: sv.ServingConfig("X", "x", prefill_s="2"), "prefill_s"),
    (lambda: sv.Workload(n_requests=0), "n_requests"),
    (lambda: sv.Workload(prompt_tokens=8192.0), "prompt_tokens"),
    (lambda: sv.Workload(deadline_s=float("inf")), "deadline_s"),
    (lambda: sv.Workload(shared_prefix_tokens=-1), "shared_prefix_tokens"),
])
def test_bad_configuration_input_names_the_parameter(call, name) -> None:
    with pytest.raises(ValueError, match=name):
        call()
