"""Section 8.5.4: speculative decodes inside the iteration-level scheduler (Work.emits > 1)."""

import math

import pytest

from inferlab.book.plot.speculative import OVERHEAD_S
from inferlab.example import ACCELERATOR, MODEL
from inferlab.scheduling import FITTED_COST, Request, RooflineCost, batch_requests, simulate
from inferlab.speculative import simulate_speculative

ROOFLINE = RooflineCost(MODEL, ACCELERATOR, mfu=0.58, mbu=1.0, overhead_s=OVERHEAD_S)


def test_all_drafts_accepted_takes_one_iteration_per_m_plus_1_tokens():
    one = [Request("r", 0.0, 2048, 256)]
    schedule = simulate_speculative(one, [1.0] * 4, FITTED_COST)
    assert len(schedule.iterations) == 1 + math.ceil(255 / 5)  # prefill emits the first token
    assert len(schedule.served["r"].times.token_times_s) == 256  # the last round is capped, never overshoots
    assert schedule.policy == "speculative"


def test_no_draft_accepted_gives_plain_iteration_count():
    reqs = batch_requests(3, 512, 40)
    spec = simulate_speculative(reqs, [0.0] * 4, FITTED_COST, max_running=3)
    plain = simulate(reqs, "continuous", FITTED_COST, max_running=3)
    assert len(spec.iterations) == len(plain.iterations)
    assert spec.makespan_s > plain.makespan_s  # same iterations, four extra rows each


def test_the_gain_shrinks_with_the_batch_in_the_scheduler():
    gains = []
    for b in (1, 64):
        reqs = batch_requests(b, 512, 128)
        plain = simulate(reqs, "continuous", ROOFLINE, max_running=b)
        spec = simulate_speculative(reqs, [0.75] * 7, ROOFLINE, max_running=b, seed=1)
        gains.append(plain.makespan_s / spec.makespan_s)
    assert gains[0] > 3 and gains[1] < 0.6 * gains[0]


def test_seeded_runs_repeat():
    reqs = batch_requests(4, 256, 64)
    a = simulate_speculative(reqs, [0.6] * 3, FITTED_COST, max_running=4, seed=9)
    b = simulate_speculative(reqs, [0.6] * 3, FITTED_COST, max_running=4, seed=9)
    assert a.makespan_s == b.makespan_s
    with pytest.raises(ValueError, match="accept_probs"):
        simulate_speculative(reqs, [1.5], FITTED_COST)
