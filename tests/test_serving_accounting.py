"""What a good result costs and the deadline's floor on tokens per round (8.6.3)."""

from __future__ import annotations

import math

import pytest

from inferlab import example
from inferlab import serving as sv
from inferlab.serving.accounting import (MEASURED_SHARED_REQUEST_S, PREFILL_MFU_CACHED_6K, deadline_derivation,
                                         energy_bound_j, per_good, tokens_per_round_bound)


def test_config_d_costs_what_the_chapter_prints() -> None:
    table = sv.evaluate_configs()
    total, good = table.loc["D", "total_s"], int(table.loc["D", "good"])
    assert round(per_good(total, good), 3) == 0.285
    assert round(per_good(energy_bound_j(total, example.ACCELERATOR.power_w), good)) == 171
    assert per_good(total, good) == table.loc["D", "gpu_s_per_good"]
    assert per_good(table.loc["B", "total_s"], int(table.loc["B", "good"])) == math.inf  # late: no good result


def test_the_measurements_printed_beside_the_estimates() -> None:
    assert PREFILL_MFU_CACHED_6K == (0.52, 0.58) and MEASURED_SHARED_REQUEST_S == 9.02
    rates = sv.shared_batch_rates()
    assert PREFILL_MFU_CACHED_6K[0] <= round(rates["prefill_mfu"], 2) <= PREFILL_MFU_CACHED_6K[1]
    assert abs(sv.evaluate_configs().loc["B", "total_s"] - MEASURED_SHARED_REQUEST_S) < 0.02


def test_the_floor_agrees_with_whole_rounds_and_with_sympy() -> None:
    table = sv.evaluate_configs()
    d = table.loc["D"]
    floor = tokens_per_round_bound(256, d["prefill_s"], d["round_s"], 7.0)
    whole = sv.tokens_per_round_needed(sv.CHAPTER_CONFIGS["D"])
    assert round(floor, 2) == 1.46 and floor <= whole < floor * 1.01
    finish, bar = deadline_derivation()
    values = {"T_{\\mathrm{prefill}}": d["prefill_s"], "T_{\\mathrm{step}}": d["round_s"], "T_{\\mathrm{SLO}}": 7.0,
              "G": 256}
    assert float(bar.subs({x: values[x.name] for x in bar.free_symbols})) == pytest.approx(floor)
    at_floor = {**values, "\\mathbb{E}[N]": floor}
    assert float(finish.lhs.subs({x: at_floor[x.name] for x in finish.lhs.free_symbols})) == pytest.approx(7.0)


def test_the_floor_is_one_token_or_infinite_at_the_ends() -> None:
    assert tokens_per_round_bound(2, 0.1, 0.01, 7.0) == 1.0  # one plain round is plenty
    assert tokens_per_round_bound(256, 7.0, 0.02, 7.0) == math.inf  # the prefill uses up the deadline
    assert tokens_per_round_bound(256, 8.0, 0.02, 7.0) == math.inf


@pytest.mark.parametrize("call, name", [
    (lambda: per_good(-1.0, 3), "total"), (lambda: per_good(math.nan, 3), "total"),
    (lambda: per_good(1.0, -1), "n_good"), (lambda: per_good(1.0, 2.5), "n_good"),
    (lambda: energy_bound_j(-1.0, 600), "gpu_s"), (lambda: energy_bound_j(1.0, 0.0), "power_w"),
    (lambda: tokens_per_round_bound(0, 1.0, 0.02, 7.0), "output_tokens"),
    (lambda: tokens_per_round_bound(256, -1.0, 0.02, 7.0), "prefill_s"),
    (lambda: tokens_per_round_bound(256, 1.0, 0.0, 7.0), "step_s"),
    (lambda: tokens_per_round_bound(256, 1.0, 0.02, math.inf), "deadline_s"),
])
def test_bad_input_names_its_parameter(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
