"""Section 8.2.2/8.2.4: the iteration-level scheduler reproduces the chapter's example and keeps its invariants."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inferlab.hardware import ACCELERATORS
from inferlab.iteration import FITTED_COST, IterationCost, RooflineCost, Work
from inferlab.models import MODELS
from inferlab.scheduler import (
    KVBlockLimit,
    Request,
    budget_sweep,
    budget_within_gap,
    example_requests,
    quickest_admission_budget,
    replay_requests,
    run_example,
    simulate,
)
from inferlab.timeline import RequestTimes
from inferlab.units import ms, ns, us

R0 = Request("r", 0.0, 2048, 2)


# ---- the fitted cost ---------------------------------------------------------------------
def test_fitted_cost_reproduces_2k_decode_and_prefill():
    assert round(FITTED_COST.of(1, 2048) / ms, 2) == 26.26
    assert round(FITTED_COST([Work(R0, "decode", 1, 2048, 1)]) / ms, 2) == 26.26
    assert round(FITTED_COST.of(2048) / ms, 1) == 94.8
    assert FITTED_COST == IterationCost(26.22 * ms, 30.4 * us, 3 * ns)


def test_fitted_cost_is_linear_in_tokens_and_pairs():
    items = [Work(R0, "prefill", 512, 0, 0), Work(R0, "decode", 1, 100, 1)]
    pairs = 512 * 513 // 2 + 101
    assert FITTED_COST(items) == pytest.approx(26.22e-3 + 513 * 30.4e-6 + pairs * 3e-9)


# ---- the chapter's example (section 8.2.2) ------------------------------------------------
def test_fixed_batching_870_ms_max_gap_26_ms():
    s = run_example("fixed")
    assert round(s.makespan_s / ms) == 870
    assert round(s.max_itl_s / ms) == 26


def test_continuous_batching_766_ms_max_gap_376_ms():
    s = run_example("continuous")
    assert round(s.makespan_s / ms) == 766
    assert round(s.max_itl_s / ms) == 376
    # the stall is r0's wait behind r2's 8K prefill
    assert s.times["r0"].max_itl_s == s.max_itl_s


def test_chunked_prefill_844_ms_max_gap_133_ms():
    s = run_example("chunked")
    assert round(s.makespan_s / ms) == 844
    assert round(s.max_itl_s / ms) == 133
    # the SPEC rule (a piece runs only if it fits whole) is the default
    whole = simulate(example_requests(), "chunked", FITTED_COST, 2, token_budget=4096, chunk_tokens=2048)
    assert whole.makespan_s == s.makespan_s and whole.max_itl_s == s.max_itl_s
    # cutting pieces to the budget left (vLLM) gives the same schedule here: 2048 + 1 decode fit in 4096
    cut = simulate(example_requests(), "chunked", FITTED_COST, 2, token_budget=4096, chunk_tokens=2048,
                   whole_chunks=False)
    assert cut.makespan_s == s.makespan_s and cut.max_itl_s == s.max_itl_s


def test_whole_chunks_default_waits_cut_option_cuts():
    # chunk = budget: beside one running decode a whole chunk never fits, so under the SPEC rule r2 waits
    # for r0 to finish, while cutting runs a 4095-token piece beside r0's decode
    whole = run_example("chunked", token_budget=4096, chunk_tokens=4096)
    cut = run_example("chunked", token_budget=4096, chunk_tokens=4096, whole_chunks=False)
    pieces = lambda s: [w.new_tokens for it in s.iterations for w in it.work  # noqa: E731
                        if w.request.name == "r2" and w.kind == "prefill"]
    assert pieces(whole) == [4096, 4096]
    assert pieces(cut)[0] == 4095 and sum(pieces(cut)) == 8192
    r2_start = whole.served["r2"].first_work_s
    assert r2_start >= whole.served["r0"].finish_s
    assert cut.served["r2"].first_work_s < cut.served["r0"].finish_s


def test_saving_12_percent_against_14x_longer_gap():
    fixed, cont = run_example("fixed"), run_example("continuous")
    assert round(100 * (1 - cont.makespan_s / fixed.makespan_s)) == 12
    assert round(cont.max_itl_s / fixed.max_itl_s) == 14


def test_exercise_8_2_hand_computation():
    s = run_example("continuous")
    first, second, admit_r2 = s.iterations[:3]
    # r0 and r1 prefill together, then one decode each, then r0's decode with r2's whole prompt
    assert [w.kind for w in first.work] == ["prefill", "prefill"]
    assert round(first.duration_s / ms, 2) == 163.33
    assert round(second.duration_s / ms, 2) == 26.29
    assert {w.request.name: w.kind for w in admit_r2.work} == {"r0": "decode", "r2": "prefill"}
    assert round(admit_r2.duration_s / ms, 2) == 375.97


def test_iteration_log_and_request_times():
    s = run_example("chunked")
    assert all(isinstance(t, RequestTimes) for t in s.times.values())
    assert [t.output_tokens for t in s.times.values()] == [8, 2, 2, 4]
    assert s.iterations[0].start_s == 0.0
    for a, b in zip(s.iterations, s.iterations[1:]):
        assert b.start_s == pytest.approx(a.end_s)
    r2_pieces = [w for it in s.iterations for w in it.work if w.request.name == "r2" and w.kind == "prefill"]
    assert [(w.new_tokens, w.cached_tokens) for w in r2_pieces] == [(2048, 0), (2048, 2048), (2048, 4096), (2048, 6144)]
    assert [w.emits for w in r2_pieces] == [0, 0, 0, 1]
    table = s.table()
    assert list(table.index) == ["r0", "r1", "r2", "r3"]
    assert table.loc["r1", "queue_s"] == 0.0
    assert s.summary()["makespan_s"] == s.makespan_s


def test_gaps_of_the_chunked_example():
    s = run_example("chunked")
    gaps = s.times["r0"].itls_s / ms
    assert [round(g, 1) for g in gaps[:5]] == [26.3, 94.8, 107.4, 120.0, 132.6]


# ---- 8.2.4: token budget sweep --------------------------------------------------------------
def test_budget_sweep_trades_queueing_for_gaps():
    df = budget_sweep(replay_requests(), [512, 1024, 2048, 4096, 8192], whole_chunks=False)
    assert df.equals(budget_sweep(replay_requests(), [512, 1024, 2048, 4096, 8192]))  # cutting is its default
    assert list(df.index) == [512, 1024, 2048, 4096, 8192]
    assert df["late_queue_mean_s"].iloc[0] > 5 * df["late_queue_mean_s"].iloc[-1]
    assert df["max_itl_s"].is_monotonic_increasing
    assert df["late_queue_mean_s"].iloc[:4].is_monotonic_decreasing
    requests = replay_requests()
    assert [r.arrival_s for r in requests] == pytest.approx([0, 0.08, 0.16, 0.24, 0.32, 0.40])


def test_budget_sweep_whole_chunks_starves_prefill_behind_decodes():
    # with chunk = budget and the SPEC rule a piece never fits beside a running decode: late arrivals wait longer
    budgets = [1024, 4096]
    cut = budget_sweep(replay_requests(), budgets, whole_chunks=False)
    whole = budget_sweep(replay_requests(), budgets, whole_chunks=True)
    assert (whole["late_queue_mean_s"] > cut["late_queue_mean_s"]).all()


def test_picking_a_budget_from_the_sweep():
    df = budget_sweep(replay_requests(), [512, 1024, 2048, 4096, 8192])
    limit = 0.100
    picked = budget_within_gap(df, limit)
    assert df.loc[picked, "max_itl_s"] < limit
    assert all(df.loc[b, "max_itl_s"] >= limit for b in df.index if b > picked)
    assert budget_within_gap(df, 1e-6) is None
    assert budget_within_gap(df, 10.0) == 8192
    quickest = quickest_admission_budget(df)
    assert df.loc[quickest, "late_queue_mean_s"] == df["late_queue_mean_s"].min()
    assert all(df.loc[b, "late_queue_mean_s"] > df["late_queue_mean_s"].min() for b in df.index if b < quickest)
    with pytest.raises(ValueError):
        budget_within_gap(df, 0)
    with pytest.raises(ValueError):
        quickest_admission_budget(df.iloc[:0])


# ---- admission and other costs --------------------------------------------------------------
def test_kv_block_limit_makes_admission_wait_for_memory():
    reqs = [Request(f"r{i}", 0.0, 1000, 9) for i in range(4)]  # 1008 tokens = 63 blocks each
    limit = KVBlockLimit(total_blocks=130)
    s = simulate(reqs, "continuous", FITTED_COST, max_running=4, admission=limit)
    starts = [s.served[f"r{i}"].first_work_s for i in range(4)]
    assert starts[0] == starts[1] == 0.0
    assert starts[2] == pytest.approx(s.served["r0"].finish_s)
    assert limit.used_blocks == 0
    free = simulate(reqs, "continuous", FITTED_COST, max_running=4)
    assert free.makespan_s < s.makespan_s


def test_kv_block_limit_check_then_act():
    limit = KVBlockLimit(total_blocks=63)
    r = Request("a", 0.0, 1000, 9)
    assert limit.blocks_needed(r) == 63 and limit.can_admit(r)
    limit.admit(r)
    assert not limit.can_admit(r)
    with pytest.raises(ValueError, match="blocks"):
        limit.admit(r)
    limit.release(r)
    assert limit.free_blocks == 63
    with pytest.raises(ValueError, match="never be admitted"):
        simulate([Request("big", 0.0, 5000, 2)], "continuous", max_running=1, admission=KVBlockLimit(10))


def test_roofline_cost_plugs_in():
    cost = RooflineCost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], mfu=0.622, mbu=0.65)
    s = simulate(example_requests(), "continuous", cost, max_running=2)
    assert s.makespan_s > 0
    decode = cost([Work(R0, "decode", 1, 2048, 1)])
    assert decode == pytest.approx((MODELS["qwen3-8b"].matrix_weight_bytes() + 2049 * 147456) / (1792e9 * 0.65))
    with pytest.raises(ValueError, match="mfu"):
        RooflineCost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], mfu=2)


def test_any_callable_is_a_cost():
    s = simulate(example_requests(), "fixed", lambda work: 0.01, max_running=2)
    assert s.makespan_s == pytest.approx(0.01 * len(s.iterations))
    with pytest.raises(ValueError, match="cost"):
        simulate(example_requests(), "fixed", lambda work: 0.0, max_running=2)


def test_idle_engine_waits_for_the_next_arrival():
    s = simulate([Request("late", 5.0, 100, 3)], "continuous", FITTED_COST, max_running=1)
    assert s.served["late"].first_work_s == 5.0
    assert s.makespan_s == pytest.approx(FITTED_COST.of(100) + FITTED_COST.of(1, 100) + FITTED_COST.of(1, 101))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"policy": "lazy"}, "policy"),
        ({"policy": "chunked"}, "token_budget"),
        ({"policy": "continuous", "chunk_tokens": 64}, "chunk_tokens"),
        ({"policy": "continuous", "max_running": 0}, "max_running"),
        ({"policy": "continuous", "token_budget": 1000}, "token_budget"),
        ({"policy": "chunked", "token_budget": 1, "max_running": 2}, "token_budget"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = {"max_running": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        simulate(example_requests(), args.pop("policy"), FITTED_COST, **args)


def test_bad_requests_raise():
    with pytest.raises(ValueError, match="prompt_tokens"):
        Request("x", 0.0, 0, 1)
    with pytest.raises(ValueError, match="arrival_s"):
        Request("x", -1.0, 1, 1)
    with pytest.raises(ValueError, match="unique"):
        simulate([R0, R0], "fixed")
    with pytest.raises(ValueError, match="empty"):
        simulate([], "fixed")


# ---- properties -----------------------------------------------------------------------------
@st.composite
def workloads(draw):
    n = draw(st.integers(1, 10))
    reqs = [
        Request(f"q{i}", draw(st.floats(0, 0.5, allow_nan=False)), draw(st.integers(1, 5000)), draw(st.integers(1, 12)))
        for i in range(n)
    ]
    policy = draw(st.sampled_from(["fixed", "continuous", "chunked"]))
    max_running = draw(st.integers(1, 5))
    kwargs = {}
    if policy == "chunked":
        kwargs["token_budget"] = draw(st.integers(max_running, 4096))
        kwargs["chunk_tokens"] = draw(st.one_of(st.none(), st.integers(1, 2048)))
        kwargs["whole_chunks"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["admission"] = KVBlockLimit(total_blocks=draw(st.integers(320, 1200)))
    return reqs, policy, max_running, kwargs


def _invariants(reqs, policy, max_running, kwargs):
    admission = kwargs.get("admission")
    total_blocks = admission.total_blocks if admission else None
    s = simulate(reqs, policy, FITTED_COST, max_running, **kwargs)
    served = s.served
    # tokens conserved
    for r in reqs:
        items = [w for it in s.iterations for w in it.work if w.request.name == r.name]
        assert sum(w.new_tokens for w in items if w.kind == "prefill") == r.prompt_tokens
        assert sum(1 for w in items if w.kind == "decode") == r.output_tokens - 1
        assert sum(w.emits for w in items) == r.output_tokens == served[r.name].times.output_tokens
        # nothing starts before it arrives
        assert served[r.name].first_work_s >= r.arrival_s
    prefill_done = {}
    for it in s.iterations:
        names = [w.request.name for w in it.work]
        assert len(names) == len(set(names))  # at most one item per request per iteration
        assert it.duration_s == pytest.approx(FITTED_COST(it.work))
        running = [r for r in reqs if served[r.name].first_work_s <= it.start_s < served[r.name].finish_s]
        assert len(running) <= max_running
        if total_blocks is not None:
            assert sum(admission.blocks_needed(r) for r in running) <= total_blocks
        for w in it.work:
            assert it.start_s >= w.request.arrival_s
        if policy == "chunked":
            assert it.new_tokens <= kwargs["token_budget"]
            if kwargs["chunk_tokens"]:
                assert all(w.new_tokens <= kwargs["chunk_tokens"] for w in it.work if w.kind == "prefill")
            # decode-first: a prefill piece never runs while a decoding request sits out the iteration
            if any(w.kind == "prefill" for w in it.work):
                decoding = {r.name for r in running if prefill_done.get(r.name, math.inf) <= it.start_s}
                assert decoding <= {w.request.name for w in it.work if w.kind == "decode"}
        for w in it.work:
            if w.kind == "prefill" and w.emits:
                prefill_done[w.request.name] = it.end_s
    # first-come-first-served: first work in arrival order
    order = sorted(reqs, key=lambda r: r.arrival_s)
    firsts = [served[r.name].first_work_s for r in order]
    assert firsts == sorted(firsts)
    assert s.makespan_s == pytest.approx(max(v.finish_s for v in served.values()) - min(r.arrival_s for r in reqs))


@settings(max_examples=120, deadline=None)
@given(workloads())
def test_scheduler_invariants(case):
    _invariants(*case)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=8), st.integers(1, 8))
def test_fixed_and_continuous_run_the_same_work(prompts, max_running):
    reqs = [Request(f"q{i}", 0.0, p, 1 + (i * 7) % 11) for i, p in enumerate(prompts)]
    fixed = simulate(reqs, "fixed", FITTED_COST, max_running)
    cont = simulate(reqs, "continuous", FITTED_COST, max_running)
    # same tokens either way; the policies differ only in when a freed slot is refilled
    assert sum(it.new_tokens for it in fixed.iterations) == sum(it.new_tokens for it in cont.iterations)
    assert cont.times[reqs[0].name].ttft_s == pytest.approx(fixed.times[reqs[0].name].ttft_s)
    assert cont.makespan_s <= sum(FITTED_COST.of(r.prompt_tokens) + sum(
        FITTED_COST.of(1, r.prompt_tokens + g - 1) for g in range(1, r.output_tokens)) for r in reqs) + 1e-12


# ---- the KV-block admission as a state machine ------------------------------------------------
class KVBlockMachine(RuleBasedStateMachine):
    """Admit and release requests at random; reserved blocks always equal the sum held and never exceed the total."""

    def __init__(self) -> None:
        super().__init__()
        self.limit = KVBlockLimit(total_blocks=200, block_size=16)
        self.held: list[Request] = []
        self.count = 0

    @rule(prompt=st.integers(1, 2000), output=st.integers(1, 300))
    def try_admit(self, prompt, output):
        r = Request(f"r{self.count}", 0.0, prompt, output)
        self.count += 1
        if self.limit.can_admit(r):
            self.limit.admit(r)
            self.held.append(r)
        else:
            with pytest.raises(ValueError):
                self.limit.admit(r)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 10**6))
    def release(self, index):
        r = self.held.pop(index % len(self.held))
        self.limit.release(r)

    @invariant()
    def accounting(self):
        assert self.limit.used_blocks == sum(self.limit.blocks_needed(r) for r in self.held)
        assert 0 <= self.limit.used_blocks <= self.limit.total_blocks


TestKVBlockMachine = KVBlockMachine.TestCase
TestKVBlockMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_pure_decode_iteration_of_the_fitted_cost():
    r = Request("r", 0.0, 2048, 2)
    assert FITTED_COST.decode(1, 2048) == pytest.approx(FITTED_COST([Work(r, "decode", 1, 2048, 1)]))
    assert round(FITTED_COST.decode(1, 2048) / ms, 2) == 26.26
    assert round(FITTED_COST.decode(64, 2048) / ms, 2) == 28.56
    with pytest.raises(ValueError, match="batch"):
        FITTED_COST.decode(0, 2048)
