"""Section 8.2.2/8.2.4: the iteration-level scheduler reproduces the chapter's example and keeps its invariants."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inferlab import scheduling as sched
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.scheduling import (IterationLog, KVBlockLimit, Request, budget_sweep, budget_within_gap,
                                 example_requests, quickest_admission_budget, replay_requests, run_example, simulate)
from inferlab.scheduling.iteration import FITTED_COST, IterationCost, RooflineCost, TotalsCost, Work, totals
from inferlab.timeline import RequestTimes
from inferlab.units import ms, ns, us

from _reference_scheduler import simulate_reference

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
    # the whole-piece rule (a piece runs only if it fits whole) is the default
    whole = simulate(example_requests(), "chunked", FITTED_COST, 2, token_budget=4096, chunk_tokens=2048)
    assert whole.makespan_s == s.makespan_s and whole.max_itl_s == s.max_itl_s
    # cutting pieces to the budget left (vLLM) gives the same schedule here: 2048 + 1 decode fit in 4096
    cut = simulate(example_requests(), "chunked", FITTED_COST, 2, token_budget=4096, chunk_tokens=2048,
                   whole_chunks=False)
    assert cut.makespan_s == s.makespan_s and cut.max_itl_s == s.max_itl_s


def test_whole_chunks_default_waits_cut_option_cuts():
    # chunk = budget: beside one running decode a whole chunk never fits, so under the whole-piece rule r2 waits
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
    assert table.loc["r1", "queue_s"] == 0.0 and s.iterations_queued("r1") == 0
    for name, served in s.served.items():  # every iteration counted starts inside the request's wait
        n = s.iterations_queued(name)
        assert n == sum(served.request.arrival_s <= it.start_s < served.first_work_s for it in s.iterations)
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
    # a larger budget leaves fewer iterations to sit through: 3 on average at 1024, 0.6 at 2048
    assert df.loc[1024, "late_queue_iterations_mean"] == 3.0 and df.loc[2048, "late_queue_iterations_mean"] == 0.6
    requests = replay_requests()
    assert [r.arrival_s for r in requests] == pytest.approx([0, 0.08, 0.16, 0.24, 0.32, 0.40])


def test_budget_sweep_whole_chunks_starves_prefill_behind_decodes():
    # with chunk = budget and the whole-piece rule a piece never fits beside a running decode: late arrivals wait longer
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
        ({"policy": "chunked", "token_budget": 4096, "whole_chunks": "no"}, "whole_chunks"),
        ({"policy": "fixed", "record_iterations": None}, "record_iterations"),
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


# ---- differential: both engines against the pre-rewrite loop (tests/_reference_scheduler.py) ------


class RecordingLimit(KVBlockLimit):
    """A KV-block limit that also records the order of admissions and releases."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.events: list[tuple[str, str]] = []

    def admit(self, request):
        super().admit(request)
        self.events.append(("admit", request.name))

    def release(self, request):
        super().release(request)
        self.events.append(("release", request.name))


def _general(cost):
    """The same cost as a plain callable: no ``of_totals``, so simulate takes the per-item engine."""
    return lambda work: cost(work)


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 12))
    # arrivals from a small grid give ties and idle gaps; prompts and outputs cross chunk and budget sizes
    arrival = st.one_of(st.sampled_from([0.0, 0.0, 0.01, 0.05, 0.2, 1.5]), st.floats(0, 0.6, allow_nan=False))
    reqs = [Request(f"q{i}", draw(arrival), draw(st.integers(1, 5000)), draw(st.integers(1, 40))) for i in range(n)]
    policy = draw(st.sampled_from(["fixed", "continuous", "chunked"]))
    max_running = draw(st.integers(1, 6))
    kwargs = {}
    if policy == "chunked":
        kwargs["token_budget"] = draw(st.integers(max_running, 4096))
        kwargs["chunk_tokens"] = draw(st.one_of(st.none(), st.integers(1, 4096)))
        kwargs["whole_chunks"] = draw(st.booleans())
    elif draw(st.booleans()):
        kwargs["token_budget"] = draw(st.integers(max(max_running, max(r.prompt_tokens for r in reqs)), 12000))
    blocks = None
    if draw(st.booleans()):
        need = max(KVBlockLimit(1).blocks_needed(r) for r in reqs)
        blocks = draw(st.integers(need, 3 * need + 40))
    return reqs, policy, max_running, kwargs, blocks


def _assert_same_as_reference(reqs, policy, max_running, kwargs, blocks, cost=FITTED_COST, general=False):
    ref_limit = RecordingLimit(blocks) if blocks else None
    new_limit = RecordingLimit(blocks) if blocks else None
    ref = simulate_reference(reqs, policy, cost, max_running, admission=ref_limit, **kwargs)
    new = simulate(reqs, policy, _general(cost) if general else cost, max_running, admission=new_limit, **kwargs)
    for r in reqs:
        # bit-identical token times: the same floats, not merely close ones
        assert new.times[r.name].token_times_s.tolist() == list(ref.token_times_s[r.name])
        assert new.served[r.name].first_work_s == ref.first_work_s[r.name]
    assert new.makespan_s == ref.makespan_s
    assert len(new.iterations) == len(ref.log)
    assert new.iterations.start_s.tolist() == [start for start, _, _ in ref.log]
    assert new.iterations.duration_s.tolist() == [d for _, d, _ in ref.log]
    assert [it.work for it in new.iterations] == [work for _, _, work in ref.log]
    if blocks:
        assert new_limit.events == ref_limit.events and new_limit.used_blocks == 0


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_event_engine_matches_the_reference_bit_for_bit(case):
    _assert_same_as_reference(*case)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_general_engine_matches_the_reference_bit_for_bit(case):
    _assert_same_as_reference(*case, general=True)


def _poisson(n, seed, rate_per_s=8.0, prompts=(256, 4097), outputs=(16, 257)):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate_per_s, n))
    p, g = rng.integers(*prompts, n), rng.integers(*outputs, n)
    return [Request(f"q{i}", float(a), int(x), int(y)) for i, (a, x, y) in enumerate(zip(arrivals, p, g))]


@pytest.mark.parametrize(("policy", "kwargs"), [
    ("fixed", {}), ("continuous", {"token_budget": 6000}),
    ("chunked", {"token_budget": 8192, "chunk_tokens": 2048}),
    ("chunked", {"token_budget": 2048, "whole_chunks": False}),
])
def test_long_poisson_trace_matches_the_reference(policy, kwargs):
    # hundreds of requests, dozens running: many finishers per iteration, long decode runs, queues that build up
    reqs = _poisson(300, seed=7, rate_per_s=20.0, outputs=(1, 120))
    _assert_same_as_reference(reqs, policy, 24, kwargs, blocks=None)
    _assert_same_as_reference(reqs[:120], policy, 24, kwargs, blocks=2000)


def test_roofline_cost_takes_the_fast_path_with_the_same_bits_as_the_general_one():
    cost = RooflineCost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], mfu=0.622, mbu=0.65, overhead_s=0.004)
    assert isinstance(cost, TotalsCost) and isinstance(FITTED_COST, TotalsCost)
    assert not isinstance(_general(cost), TotalsCost)
    reqs = _poisson(60, seed=3)
    for policy, kwargs in [("continuous", {}), ("chunked", {"token_budget": 4096, "chunk_tokens": 1024})]:
        fast = simulate(reqs, policy, cost, 8, **kwargs)
        slow = simulate(reqs, policy, _general(cost), 8, **kwargs)
        assert all(fast.times[n] == slow.times[n] for n in fast.served)
        # against the pre-rewrite loop (which summed per-item float FLOP): equal to rounding
        ref = simulate_reference(reqs, policy, cost, 8, **kwargs)
        assert fast.makespan_s == pytest.approx(ref.makespan_s, rel=1e-12)


def test_roofline_totals_equal_the_sum_of_per_item_flops():
    model, card = MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"]
    cost = RooflineCost(model, card, mfu=0.5, mbu=1.0)
    r = Request("r", 0.0, 9000, 4)
    work = [Work(r, "prefill", 6144, 0, 0), Work(r, "prefill", 2048, 6144, 1)] + [
        Work(r, "decode", 1, 2048 + g, 1) for g in range(64)]
    flops = sum(model.flops(w.new_tokens, w.cached_tokens, logits=min(w.emits, w.new_tokens)) for w in work)
    assert totals(work) == (6144 + 2048 + 64, sum(w.pairs for w in work), sum(w.cached_tokens + w.new_tokens
                                                                               for w in work), 65)
    assert cost(work) == pytest.approx(card.compute_time(flops, 0.5), rel=1e-15)
    assert round(model.flops(6144) / 1e12, 1) == 96.5  # the chapter's 6144-token prefill


def test_a_verification_computes_logits_at_every_row_it_runs() -> None:
    r = Request("r", 0.0, 100, 8)
    verify = Work(r, "decode", 5, 100, 2)  # four drafts and the pending token; two tokens emitted
    assert totals([verify])[3] == 5
    assert totals([Work(r, "prefill", 64, 0, 1)])[3] == 1 and totals([Work(r, "prefill", 64, 0, 0)])[3] == 0


# ---- pluggable: policies, several tokens per iteration, the log ------------------------------------
def _double_decode(engine: sched.Engine) -> sched.Plan:
    """Continuous batching whose decodes emit two tokens (capped at what is left), as a speculative round might."""
    plan = []
    for live in engine.running:
        if live.decoding:
            emits = min(2, live.request.output_tokens - len(live.times))
            cached = live.request.prompt_tokens + len(live.times) - 1
            plan.append((live, Work(live.request, "decode", emits, cached, emits)))
    while engine.can_admit():
        live = engine.admit()
        plan.append((live, Work(live.request, "prefill", live.request.prompt_tokens, 0, 1)))
    return plan


def test_a_plan_function_emits_several_tokens_per_iteration():
    s = simulate([Request("a", 0.0, 100, 6)], _double_decode, FITTED_COST, max_running=1)
    assert s.policy == "_double_decode"
    ends = s.iterations.end_s
    assert len(s.iterations) == 4  # prefill (token 1), then tokens 2-3, 4-5, 6
    assert s.times["a"].token_times_s.tolist() == [ends[0], ends[1], ends[1], ends[2], ends[2], ends[3]]
    assert [it.work[0].emits for it in s.iterations] == [1, 2, 2, 1]
    assert s.iterations[1].duration_s == FITTED_COST([Work(s.served["a"].request, "decode", 2, 100, 2)])


def test_a_plan_function_takes_the_general_engine_with_a_totals_cost():
    s = simulate([Request("a", 0.0, 100, 5)], _double_decode, FITTED_COST, max_running=1)
    assert len(s.iterations) == 3 and s.times["a"].output_tokens == 5


def test_the_builtin_policies_cannot_be_replaced():
    with pytest.raises(TypeError):
        sched.POLICIES["continuous"] = _double_decode  # type: ignore[index]


def test_iteration_log_is_compact_and_built_on_access():
    s = simulate(_poisson(200, seed=1), "continuous", FITTED_COST, max_running=16)
    log = s.iterations
    assert isinstance(log, IterationLog) and repr(log) == f"IterationLog({len(log)} iterations)"
    assert log.end_s.tolist() == [a + b for a, b in zip(log.start_s.tolist(), log.duration_s.tolist())]
    assert log[-1] == log[len(log) - 1] and log[-1].index == len(log) - 1
    assert [it.index for it in log[3:6]] == [3, 4, 5]
    with pytest.raises(IndexError):
        log[len(log)]
    with pytest.raises(ValueError):
        log.start_s[0] = 1.0  # read-only
    assert sum(it.new_tokens for it in log) == sum(r.prompt_tokens + r.output_tokens - 1 for r in _poisson(200, 1))
    for cost in (FITTED_COST, _general(FITTED_COST)):
        bare = simulate(_poisson(200, seed=1), "continuous", cost, max_running=16, record_iterations=False)
        assert len(bare.iterations) == 0 and bare.makespan_s == s.makespan_s and bare.served == s.served


# ---- what a schedule reports: makespan, gaps, first work ------------------------------------------------
def test_makespan_runs_from_the_first_arrival():
    reqs = [Request("a", 5.0, 100, 3), Request("b", 5.1, 200, 2)]
    s = simulate(reqs, "continuous", FITTED_COST, max_running=2)
    last = max(s.served[n].finish_s for n in ("a", "b"))
    assert s.makespan_s == last - 5.0 and s.summary()["makespan_s"] == s.makespan_s
    assert s.summary()["throughput_tok_s"] == pytest.approx(5 / (last - 5.0))
    assert run_example("fixed").makespan_s == max(v.finish_s for v in run_example("fixed").served.values())


def test_chunked_admission_is_head_of_line():
    # one decode running: the 8192-token prompt's first 4096-token piece does not fit in the 4095 left,
    # and the 16-token prompt behind it waits too (first come, first served), until the decode is done
    reqs = [Request("running", 0.0, 100, 30), Request("long", 0.001, 8192, 2), Request("short", 0.002, 16, 2)]
    s = simulate(reqs, "chunked", FITTED_COST, max_running=3, token_budget=4096, chunk_tokens=4096)
    done = s.served["running"].finish_s
    assert s.served["long"].first_work_s == done and s.served["short"].first_work_s > done
    # without the long prompt ahead of it, the short one starts at the next iteration boundary beside the decode
    alone = simulate([reqs[0], reqs[2]], "chunked", FITTED_COST, max_running=3, token_budget=4096, chunk_tokens=4096)
    assert alone.served["short"].first_work_s == alone.iterations[1].start_s < done
    # cutting pieces (vLLM) lets the long prompt start beside the decode; the short one still queues behind it
    cut = simulate(reqs, "chunked", FITTED_COST, max_running=3, token_budget=4096, chunk_tokens=4096,
                   whole_chunks=False)
    assert cut.served["long"].first_work_s < cut.served["running"].finish_s
    assert cut.served["short"].first_work_s > cut.served["long"].first_work_s


def test_fixed_and_continuous_groups_shrink_to_the_token_budget():
    reqs = [Request(f"q{i}", 0.0, 3000, 3) for i in range(4)]
    fixed = simulate(reqs, "fixed", FITTED_COST, max_running=4, token_budget=8192)
    first = fixed.iterations[0]
    assert [w.request.name for w in first.work] == ["q0", "q1"]  # 9000 tokens would not fit in 8192
    assert fixed.served["q2"].first_work_s == fixed.served["q3"].first_work_s == fixed.served["q1"].finish_s
    cont = simulate(reqs, "continuous", FITTED_COST, max_running=4, token_budget=8192)
    assert [(w.request.name, w.kind) for w in cont.iterations[1].work] == [
        ("q0", "decode"), ("q1", "decode"), ("q2", "prefill"), ("q3", "prefill")]  # 2 + 6000 <= 8192
    # head-of-line here too: a prompt that does not fit holds back a smaller one behind it
    mixed = [Request("a", 0.0, 3000, 2), Request("big", 0.0, 6000, 2), Request("small", 0.0, 10, 2)]
    s = simulate(mixed, "continuous", FITTED_COST, max_running=3, token_budget=8192)
    assert [w.request.name for w in s.iterations[0].work] == ["a"]
    with pytest.raises(ValueError, match="cannot split a prompt"):
        simulate([Request("x", 0.0, 9000, 2)], "fixed", FITTED_COST, token_budget=8192)


class _BadTotals:
    """A totals cost returning ``value`` (the fast path's validation)."""

    def __init__(self, value):
        self.value = value

    def __call__(self, work):
        return self.value

    def of_totals(self, new_tokens, pairs, kv_tokens, logits):
        return self.value


@pytest.mark.parametrize("value", [None, "0.1", float("nan"), -1.0, 0.0, float("inf"), True, [0.1]])
@pytest.mark.parametrize("fast", [True, False])
def test_a_cost_that_is_not_a_positive_number_of_seconds_raises(value, fast):
    cost = _BadTotals(value) if fast else (lambda work: value)
    with pytest.raises(ValueError, match="cost"):
        simulate(example_requests(), "continuous", cost, max_running=2)


def test_numpy_and_integer_costs_are_seconds():
    s = simulate(example_requests(), "fixed", lambda work: np.float32(0.25), max_running=2)
    assert s.makespan_s == 0.25 * len(s.iterations)
    from fractions import Fraction

    assert simulate(example_requests(), "fixed", lambda work: Fraction(1, 4), max_running=2).served == s.served
    assert simulate(example_requests(), "fixed", _BadTotals(1), max_running=2).makespan_s == len(s.iterations)
    with pytest.raises(ValueError, match="cost"):
        simulate(example_requests(), "fixed", 0.1, max_running=2)


@pytest.mark.parametrize("cost", [FITTED_COST, _general(FITTED_COST)])
def test_an_arrival_beyond_float_resolution_raises(cost):
    with pytest.raises(ValueError, match="does not advance the clock"):
        simulate([Request("late", 1e300, 100, 3)], "continuous", cost)
    # far but resolvable: a year in, the times still move
    s = simulate([Request("year", 3.15e7, 100, 3)], "continuous", cost)
    assert s.makespan_s > 0.07


def test_finishers_of_one_iteration_are_released_in_admission_order():
    # iteration 1: r1 (admitted second) emits its last decode while r0's last piece emits its only token
    reqs = [Request("r0", 0.0, 4096, 1), Request("r1", 0.0, 100, 2)]
    for general in (False, True):
        limit = RecordingLimit(1000)
        s = simulate(reqs, "chunked", _general(FITTED_COST) if general else FITTED_COST, max_running=2,
                     token_budget=4096, chunk_tokens=2048, admission=limit)
        assert s.served["r0"].finish_s == s.served["r1"].finish_s == s.iterations[1].end_s
        assert limit.events == [("admit", "r0"), ("admit", "r1"), ("release", "r0"), ("release", "r1")]
    _assert_same_as_reference(reqs, "chunked", 2, {"token_budget": 4096, "chunk_tokens": 2048}, blocks=1000)


def test_schedules_compare_by_value_whichever_engine_ran_them():
    fast = run_example("chunked")
    general = simulate(example_requests(), "chunked", _general(FITTED_COST), 2, token_budget=4096, chunk_tokens=2048)
    assert fast.iterations == general.iterations and fast.served == general.served
    assert fast.iterations != run_example("continuous").iterations and fast.iterations != list(fast.iterations)


def test_an_explicit_no_limit_is_no_admission_check():
    reqs = _poisson(40, seed=5)
    plain = simulate(reqs, "continuous", FITTED_COST, max_running=8)
    assert simulate(reqs, "continuous", FITTED_COST, max_running=8, admission=sched.NoLimit()).served == plain.served


_ROOFLINE = RooflineCost(MODELS["qwen3-8b"], ACCELERATORS["rtx-pro-6000"], mfu=0.622, mbu=0.65, overhead_s=0.002)


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_both_engines_agree_bit_for_bit_under_the_roofline_cost(case):
    reqs, policy, max_running, kwargs, blocks = case
    fast = simulate(reqs, policy, _ROOFLINE, max_running, admission=KVBlockLimit(blocks) if blocks else None, **kwargs)
    slow = simulate(reqs, policy, _general(_ROOFLINE), max_running,
                    admission=KVBlockLimit(blocks) if blocks else None, **kwargs)
    assert fast.served == slow.served and fast.iterations == slow.iterations and fast.makespan_s == slow.makespan_s


@pytest.mark.parametrize("bad", [("r", 0.0, 10, 2), {"name": "r", "arrival_s": 0.0, "prompt_tokens": 10,
                                                     "output_tokens": 2}, "r"])
def test_simulate_refuses_what_is_not_a_request(bad) -> None:
    with pytest.raises(ValueError, match="requests must be scheduling.Request objects"):
        simulate([Request("a", 0.0, 10, 2), bad], "continuous", FITTED_COST)


def test_simulate_refuses_an_admission_that_is_not_one() -> None:
    with pytest.raises(ValueError, match="admission must be an Admission"):
        simulate([Request("a", 0.0, 10, 2)], "continuous", FITTED_COST, admission="x")


@pytest.mark.parametrize("bad, match", [
    (dict(max_running=0), "max_running"), (dict(max_running=2.5), "max_running"),
    (dict(max_running=4, token_budget=3), "token_budget .3. must be at least max_running"),
    (dict(token_budget=-1), "token_budget"), (dict(chunk_tokens=0), "chunk_tokens"),
    (dict(whole_chunks="yes"), "whole_chunks"), (dict(token_budget=float("nan")), "token_budget"),
])
def test_limits_refuse_what_no_engine_could_run(bad: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sched.Limits(**bad)


def test_limits_budget_and_chunk_are_infinite_when_unset_and_the_chunk_never_exceeds_the_budget() -> None:
    assert sched.Limits().budget == math.inf and sched.Limits().chunk == math.inf
    assert sched.Limits(max_running=2, token_budget=512, chunk_tokens=2048).chunk == 512


def test_kv_block_limit_refuses_what_does_not_fit_and_what_it_never_admitted() -> None:
    """Blocks reserved to completion, ceil((prompt + output - 1) / block); one count per request, however often asked."""
    limit = KVBlockLimit(total_blocks=4, block_size=16)
    a, b = Request("a", 0.0, 30, 3), Request("b", 0.0, 40, 10)  # 32 tokens -> 2 blocks; 49 -> 4 blocks
    assert limit.blocks_needed(a) == 2 and limit.blocks_needed(b) == 4 and limit.fits(b)
    limit.admit(a)
    assert limit.free_blocks == 2 and not limit.can_admit(b)
    with pytest.raises(ValueError, match="'b' needs 4 blocks, 2 are free"):
        limit.admit(b)
    with pytest.raises(ValueError, match="'b' must have been admitted"):
        limit.release(b)
    assert not limit.fits(Request("c", 0.0, 64, 2))  # 65 tokens -> 5 blocks
    with pytest.raises(ValueError, match="request"):
        limit.blocks_needed((30, 3))
    limit.release(a)
    assert limit.used_blocks == 0 and limit.can_admit(b)
