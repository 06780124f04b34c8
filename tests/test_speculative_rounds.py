"""A simulated request read round by round (8.5.2) and the serial/parallel drafting trade (8.5.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab.book.plot import speculative as splot
from inferlab.book.plot import to_png
from inferlab.scheduling import FITTED_COST, Request, simulate
from inferlab.speculative import cost, simulate_speculative
from inferlab.speculative.rounds import round_log
from inferlab.speculative.tradeoff import drafted_per_token_s, tie_derivation, tokens_to_tie
from inferlab.units import ms

REQUEST = [Request("r", 0.0, 2048, 256)]


def test_plain_decoding_is_one_token_per_round() -> None:
    rounds = round_log(simulate(REQUEST, "continuous", FITTED_COST), "r")
    assert len(rounds) == 255 and (rounds["tokens"] == 1).all()
    assert list(rounds.index[:3]) == [1, 2, 3]
    assert rounds["round_s"].iloc[0] == pytest.approx(FITTED_COST.of(1, 2048))


def test_speculative_rounds_add_up_to_the_request() -> None:
    run = simulate_speculative(REQUEST, [0.5] * 4, FITTED_COST, seed=1)
    rounds = round_log(run, "r")
    assert rounds["tokens"].sum() == 255 and rounds["tokens"].between(1, 5).all()
    assert len(rounds) == len(run.iterations) - 1  # every iteration but the prefill
    first = run.times["r"].ttft_s
    assert first + rounds["round_s"].sum() == pytest.approx(run.makespan_s)
    assert rounds["round_s"].iloc[0] == pytest.approx(FITTED_COST.of(5, 2048))  # five rows verified
    # the mean of the rounds' own rates overweights the one-token rounds
    assert cost.mean_of_round_rates(rounds["round_s"], rounds["tokens"]) > cost.time_per_token(
        rounds["round_s"], rounds["tokens"])


def test_round_log_reads_one_request_among_several() -> None:
    two = [Request("a", 0.0, 64, 6), Request("b", 0.0, 32, 3)]
    run = simulate(two, "continuous", FITTED_COST, max_running=2)
    assert len(round_log(run, "a")) == 5 and len(round_log(run, "b")) == 2


def test_round_log_refuses_unknown_or_silent_requests() -> None:
    run = simulate([Request("r", 0.0, 16, 1)], "continuous", FITTED_COST)
    with pytest.raises(ValueError, match="name"):
        round_log(run, "nobody")
    with pytest.raises(ValueError, match="name"):
        round_log(run, "r")  # one output token: no decode round
    with pytest.raises(ValueError, match="schedule"):
        round_log("not a schedule", "r")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        round_log(run, 3)  # type: ignore[arg-type]


def test_the_round_figure_draws_the_distribution_and_both_runs() -> None:
    plain = round_log(simulate(REQUEST, "continuous", FITTED_COST), "r")
    spec = round_log(simulate_speculative(REQUEST, [0.5] * 4, FITTED_COST, seed=1), "r")
    fig = splot.round_tokens_figure(spec, plain, [0.5] * 4)
    to_png(fig)
    left, right = fig.axes[:2]
    assert sum(p.get_height() for p in left.patches) == pytest.approx(1.0)
    assert len(right.get_lines()) == 2


def test_the_chapters_serial_and_parallel_example() -> None:
    fwd, verify = 3.57 * ms, 26.26 * ms
    assert round(drafted_per_token_s(4, fwd, verify, 3.0) / ms, 1) == 13.5
    assert round(drafted_per_token_s(4, fwd, verify, 3.0, parallel=True) / ms, 1) == 9.9
    assert round(drafted_per_token_s(4, fwd, verify, 2.0, parallel=True) / ms, 1) == 14.9
    need = tokens_to_tie(3.0, 4, fwd, verify)
    assert 2.0 < need < 3.0 and round(need, 2) == 2.21
    assert drafted_per_token_s(4, fwd, verify, need, parallel=True) == pytest.approx(
        drafted_per_token_s(4, fwd, verify, 3.0))


def test_the_tie_in_sympy_is_the_tie_in_numbers() -> None:
    tie, n_par = tie_derivation()
    values = {"N_{\\mathrm{ser}}": 3.0, "m": 4, "T_{\\mathrm{fwd}}": 0.004, "T_{\\mathrm{verify}}": 0.026}
    assert float(n_par.subs({x: values[x.name] for x in n_par.free_symbols})) == pytest.approx(
        tokens_to_tie(3.0, 4, 0.004, 0.026))
    assert {x.name for x in tie.free_symbols} == set(values) | {"N_{\\mathrm{par}}"}


@pytest.mark.parametrize("m", [1, 2, 8])
def test_free_forwards_or_one_draft_need_the_same_tokens(m: int) -> None:
    assert tokens_to_tie(2.5, m, 0.0, 0.026) == pytest.approx(2.5)  # drafting costs nothing: no trade
    assert tokens_to_tie(2.5, 1, 0.01, 0.026) == pytest.approx(2.5)  # one draft: serial is parallel


@pytest.mark.parametrize("bad", [dict(serial_tokens=0.5), dict(serial_tokens=math.nan), dict(drafts=0),
                                 dict(forward_s=-1.0), dict(verify_s=0.0), dict(drafts=2.5)])
def test_tokens_to_tie_refuses_bad_input(bad: dict) -> None:
    args = dict(serial_tokens=3.0, drafts=4, forward_s=0.004, verify_s=0.026) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        tokens_to_tie(**args)


def test_drafted_per_token_s_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="tokens_per_round"):
        drafted_per_token_s(4, 0.004, 0.026, 0.9)
    with pytest.raises(ValueError, match="parallel"):
        drafted_per_token_s(4, 0.004, 0.026, 2.0, parallel=np.bool_(True))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="drafts"):
        drafted_per_token_s(0, 0.004, 0.026, 2.0)
