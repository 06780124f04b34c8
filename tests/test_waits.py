"""Section 8.2.2: the two waits of the linear iteration cost, in closed form and against the simulator."""

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.scheduling import FITTED_COST, IterationCost, Request, run_example, simulate
from inferlab.scheduling import waits as W
from inferlab.units import ms


def test_the_closed_forms_are_the_sums():
    assert sp.expand(W.IDLE_SLOT_SUM.doit() - W.IDLE_SLOT) == 0
    assert sp.expand(W.STALL_DIFFERENCE - W.STALL) == 0


def test_idle_slot_is_the_time_between_the_group_members_last_tokens():
    fixed = run_example("fixed").served
    idle = fixed["r0"].finish_s - fixed["r1"].finish_s
    assert W.idle_slot_s(FITTED_COST, 2048, 2, 8) == pytest.approx(idle, abs=1e-12)
    assert round(idle / ms) == 158  # r1 done at 190 ms, r0 at 347 ms
    assert W.idle_slot_s(FITTED_COST, 2048, 5, 5) == 0


def test_idle_slot_is_the_sum_of_lone_decodes():
    by_step = sum(FITTED_COST.decode(1, 1000 + j - 1) for j in range(3, 40))
    assert W.idle_slot_s(FITTED_COST, 1000, 3, 40) == pytest.approx(by_step, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(prompt=st.integers(1, 4096), fewest=st.integers(1, 20), extra=st.integers(0, 40))
def test_idle_slot_matches_the_simulator(prompt, fewest, extra):
    group = [Request("long", 0.0, prompt, fewest + extra), Request("short", 0.0, prompt, fewest)]
    s = simulate(group, "fixed", FITTED_COST, max_running=2).served
    idle = s["long"].finish_s - s["short"].finish_s
    assert W.idle_slot_s(FITTED_COST, prompt, fewest, fewest + extra) == pytest.approx(idle, abs=1e-9)


def test_stall_is_what_a_whole_prompt_adds_to_the_running_decode():
    cont = run_example("continuous")
    it = cont.iterations[2]
    decode, prompt = it.work
    assert (decode.request.name, prompt.request.name, prompt.new_tokens) == ("r0", "r2", 8192)
    plain = FITTED_COST.decode(1, decode.cached_tokens)
    assert plain + W.stall_s(FITTED_COST, 8192) == pytest.approx(it.duration_s, abs=1e-12)
    assert round(it.duration_s / ms) == 376


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 8192), h=st.integers(0, 8192))
def test_stall_grows_with_the_pieces_tokens_and_pairs(c, h):
    cost = IterationCost(0.02, 3e-5, 3e-9)
    assert W.stall_s(cost, c, h) == pytest.approx(cost.of(c, h) - cost.fixed_s, rel=1e-12)
    assert W.stall_s(cost, c, h + 1) > W.stall_s(cost, c, h)


@pytest.mark.parametrize("call", [
    lambda: W.idle_slot_s("cost", 16, 1, 2),
    lambda: W.idle_slot_s(FITTED_COST, 0, 1, 2),
    lambda: W.idle_slot_s(FITTED_COST, 16, 3, 2),
    lambda: W.idle_slot_s(FITTED_COST, 16, 1.5, 2),
    lambda: W.stall_s(FITTED_COST, 0),
    lambda: W.stall_s(FITTED_COST, 16, -1),
    lambda: W.stall_s(None, 16),
])
def test_bad_arguments_are_refused(call):
    with pytest.raises(ValueError):
        call()
