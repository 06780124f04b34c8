"""Section 8.5.4's two computations as library functions: the best draft length and the scheduler's batch sweep.

The pinned values are what the page printed before its cells called these functions (``best``, the Try-it's
best lengths and gains, the seeded sweep's makespans).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from inferlab.book.plot import speculative as splot
from inferlab.calibration import PREFILL_MFU_SHARED_BATCH16
from inferlab.example import ACCELERATOR, MODEL
from inferlab.scheduling import FITTED_COST, RooflineCost, batch_requests, simulate
from inferlab.scheduling.shapes import multiples
from inferlab.speculative import (DraftLengthChoice, best_draft_length, simulate_speculative,
                                  speculative_batch_sweep)
from inferlab.speculative import cost
from inferlab.units import ms


def explorer_round_s(group: int, batch: int, per_draft_ms: float):
    """A round as the page's explorer prices it (``splot.draft_length_frame``)."""
    return partial(cost.padded_round_time_s, model=MODEL, accelerator=ACCELERATOR, batch=batch,
                   context_tokens=splot.DRAFT_LENGTH_CONTEXT, per_draft_s=per_draft_ms * ms,
                   overhead_s=splot.OVERHEAD_S, mfu=PREFILL_MFU_SHARED_BATCH16,
                   captured=multiples(group, splot.LARGEST_CAPTURED))


# ---- best_draft_length ---------------------------------------------------------------------------
#: The Try-it's settings (decay, bucket size, batch) at a = 0.85 and 1.0 ms per draft, and what the page printed.
TRY_IT = {"b1": ((1.0, 8, 1), 11, 4.024443835022719), "decay": ((0.8, 8, 1), 4, 2.497071949841468),
          "g16": ((1.0, 16, 1), 11, 4.024443835022719), "g1": ((1.0, 1, 1), 11, 4.024443835022719),
          "b64": ((1.0, 8, 64), 5, 2.7788770687634723), "b256": ((1.0, 8, 256), 2, 1.5710018232768808)}


@pytest.mark.parametrize("name", list(TRY_IT))
def test_the_try_it_answers_are_pinned(name: str) -> None:
    (decay, group, batch), length, gain = TRY_IT[name]
    choice = best_draft_length(cost.geometric_profile(0.85, 16, decay), explorer_round_s(group, batch, 1.0))
    assert choice.length == length
    assert choice.speedup == pytest.approx(gain, rel=1e-12)  # the page divided in ms, the library in s: an ulp
    assert choice.plain_s_per_token / choice.s_per_token == choice.speedup


def test_the_marginal_table_best_is_pinned() -> None:
    a = [0.7] * 8
    round_s = partial(cost.linear_round_s, verify_s=26.3 * ms, per_draft_s=3.6 * ms)
    choice = best_draft_length(a, round_s)
    assert (choice.length, choice.s_per_token, choice.plain_s_per_token) == (3, 0.014646664034741415, 26.3 * ms)
    assert choice.tokens_per_round == pytest.approx(2.533, abs=1e-12)
    assert choice.length == cost.draft_length_table(a, round_s)["T/N (s)"].idxmin()


@pytest.mark.parametrize("accept", [0.4, 0.8, 0.85, 1.0])
@pytest.mark.parametrize("decay", [0.5, 0.8, 1.0])
@pytest.mark.parametrize("per_draft_ms, group, batch", [(0, 8, 1), (1, 8, 1), (1, 16, 64), (8, 1, 16), (2, 4, 256)])
def test_agrees_with_what_the_explorer_marks(accept: float, decay: float, per_draft_ms: float, group: int,
                                             batch: int) -> None:
    frame = splot.draft_length_frame(accept, decay, per_draft_ms, group, batch)
    choice = best_draft_length(cost.geometric_profile(accept, 16, decay), explorer_round_s(group, batch, per_draft_ms))
    assert choice.length == frame["ms per token"].idxmin()
    assert choice.speedup == pytest.approx(frame["plain ms per token"].iloc[0] / frame["ms per token"].min(), rel=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_the_best_rate_beats_every_other_length(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, rng.integers(1, 12))
    verify_s, per_draft_s, group = rng.uniform(0.005, 0.05), rng.uniform(0, 0.01), int(rng.integers(1, 5))
    round_s = partial(cost.linear_round_s, verify_s=verify_s, per_draft_s=per_draft_s, group=group)
    choice = best_draft_length(a, round_s)
    rates = [cost.expected_tokens(a[:m]) / round_s(m) for m in range(1, a.size + 1)]  # tokens per second
    assert 1 <= choice.length <= a.size
    assert all(1 / choice.s_per_token >= r * (1 - 1e-12) for r in rates)
    # on a tie the shorter draft wins: nothing shorter is as good
    assert all(r < 1 / choice.s_per_token * (1 - 1e-12) for r in rates[:choice.length - 1])


def test_free_drafts_that_always_pass_make_the_longest_draft_best() -> None:
    choice = best_draft_length([1.0] * 5, lambda m: 0.02)
    assert (choice.length, choice.tokens_per_round, choice.speedup) == (5, 6.0, 6.0)


def test_drafts_that_never_pass_tie_and_the_shortest_wins() -> None:
    choice = best_draft_length([0.0] * 4, lambda m: 0.02)
    assert (choice.length, choice.tokens_per_round, choice.speedup) == (1, 1.0, 1.0)


@pytest.mark.parametrize("accept_probs, round_s, match", [
    ([], lambda m: 0.02, "accept_probs"),
    ([0.8, 1.2], lambda m: 0.02, "accept_probs"),
    ([0.8, float("nan")], lambda m: 0.02, "accept_probs"),
    ([0.8], 0.02, "round_s"),
    ([0.8], lambda m: 0.0, "round_s"),
    ([0.8, 0.8], lambda m: float("inf") if m == 2 else 0.02, "round_s.*m = 2"),
    ([0.8], lambda m: "0.02", "round_s"),
])
def test_best_draft_length_refuses_bad_input(accept_probs, round_s, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        best_draft_length(accept_probs, round_s)


@pytest.mark.parametrize("fields, match", [
    (dict(length=0), "length"), (dict(length=1.5), "length"), (dict(tokens_per_round=0.5), "tokens_per_round"),
    (dict(s_per_token=0.0), "s_per_token"), (dict(plain_s_per_token=float("nan")), "plain_s_per_token"),
])
def test_draft_length_choice_refuses_bad_fields(fields: dict, match: str) -> None:
    valid = dict(length=2, tokens_per_round=2.4, s_per_token=0.01, plain_s_per_token=0.02)
    with pytest.raises(ValueError, match=match):
        DraftLengthChoice(**{**valid, **fields})


# ---- speculative_batch_sweep ---------------------------------------------------------------------
def test_the_page_sweep_is_pinned() -> None:
    roof = RooflineCost(MODEL, ACCELERATOR, mfu=0.58, overhead_s=splot.OVERHEAD_S)
    sweep = speculative_batch_sweep((1, 16, 64), 512, 256, [0.75] * 7, roof, seed=1)
    assert list(sweep.index) == [1, 16, 64] and sweep.index.name == "batch"
    assert list(sweep.columns) == ["plain (s)", "speculative (s)", "speed-up"]
    assert sweep["plain (s)"].tolist() == [6.709010839127312, 7.279597831751251, 9.105476208147861]
    assert sweep["speculative (s)"].tolist() == [1.8200747705558813, 2.5063183208941076, 5.03053548751988]
    assert sweep["speed-up"].tolist() == [3.6861182560528913, 2.9044985112482906, 1.8100411438777029]


def test_each_row_is_the_two_simulations() -> None:
    sweep = speculative_batch_sweep([3, 1], 32, 16, [0.8, 0.6], FITTED_COST, seed=4)
    assert list(sweep.index) == [3, 1]  # in the given order
    for b in (3, 1):
        reqs = batch_requests(b, 32, 16)
        plain = simulate(reqs, "continuous", FITTED_COST, max_running=b).makespan_s
        spec = simulate_speculative(reqs, [0.8, 0.6], FITTED_COST, max_running=b, seed=4).makespan_s
        assert sweep.loc[b].tolist() == [plain, spec, plain / spec]


def test_drafts_that_never_pass_only_cost() -> None:
    # a round that accepts nothing emits one token, as a plain step does, but verifies more rows
    sweep = speculative_batch_sweep([1, 8], 64, 32, [0.0, 0.0], FITTED_COST)
    assert (sweep["speed-up"] <= 1).all()


@pytest.mark.parametrize("batches, accept_probs, match", [
    ([], [0.8], "batches"), ([1, 1], [0.8], "batches"), ([0], [0.8], "batches"), ([1.5], [0.8], "batches"),
    ([8192], [0.8], "batches"), ("12", [0.8], "batches"), ([1], [1.5], "accept_probs"),
    ([1], [0.8, float("nan")], "accept_probs"),
])
def test_speculative_batch_sweep_refuses_bad_input(batches, accept_probs, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        speculative_batch_sweep(batches, 16, 4, accept_probs, FITTED_COST)


def test_no_drafts_is_plain_against_plain() -> None:
    sweep = speculative_batch_sweep([1, 4], 16, 8, [], FITTED_COST)
    assert sweep["speed-up"].tolist() == [1.0, 1.0]
