"""The Azure conversation trace: read as the provenance says, windows and speed-ups, and its Poisson twin."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.scheduling import FITTED_COST, Request, simulate
from inferlab.serving import traces as T


@pytest.fixture(scope="module")
def table():
    return T.azure_conv()


def test_the_trace_is_what_its_readme_says(table) -> None:
    assert len(table) == 19_366 and round(table["arrived_at"].iloc[-1]) == 3_502
    assert table["arrived_at"].iloc[0] == 0.0 and bool(np.all(np.diff(table["arrived_at"]) >= 0))
    assert int(table["num_prefill_tokens"].median()) == 1_020 and table["num_prefill_tokens"].max() == 14_050
    assert int(table["num_decode_tokens"].median()) == 129 and table["num_decode_tokens"].max() == 1_000
    assert round(T.mean_rate(T.trace_window(table)), 1) == 5.5


def test_a_window_starts_at_zero_and_a_speedup_divides_every_gap(table) -> None:
    window = T.trace_window(table, start_s=100.0, duration_s=60.0)
    fast = T.trace_window(table, start_s=100.0, duration_s=60.0, speedup=2.0)
    assert [r.name for r in window] == [r.name for r in fast] and window[0].arrival_s >= 0.0
    assert all(r.arrival_s < 60.0 for r in window)
    assert [2 * f.arrival_s for f in fast] == pytest.approx([w.arrival_s for w in window])
    assert T.mean_rate(fast) == pytest.approx(2 * T.mean_rate(window))
    assert [(r.prompt_tokens, r.output_tokens) for r in fast] == [(r.prompt_tokens, r.output_tokens) for r in window]


def test_the_real_arrivals_are_burstier_than_their_poisson_twin(table) -> None:
    real = T.trace_window(table)
    twin = T.poisson_twin(real, seed=3)
    assert T.mean_rate(twin) == pytest.approx(T.mean_rate(real), rel=0.03)
    assert round(T.dispersion(real), 2) == 1.39
    assert abs(T.dispersion(twin) - 1.0) < 0.1
    assert [(r.name, r.prompt_tokens) for r in twin] == [(r.name, r.prompt_tokens) for r in real]
    alike = T.poisson_twin(real[:100], seed=3, prompt_tokens=2048, output_tokens=256)
    assert {(r.prompt_tokens, r.output_tokens) for r in alike} == {(2048, 256)}


def test_the_whole_trace_runs_through_every_policy(table) -> None:
    reqs = T.trace_window(table)
    for policy, kw in (("fixed", {}), ("continuous", {}), ("chunked", {"token_budget": 8192, "chunk_tokens": 2048})):
        s = simulate(reqs, policy, FITTED_COST, max_running=64, record_iterations=False, **kw)
        assert len(s.served) == len(reqs) and np.isfinite(s.makespan_s)


@pytest.mark.parametrize("call, match", [
    (lambda t: T.trace_window(t, start_s=-1.0), "start_s"),
    (lambda t: T.trace_window(t, speedup=0.0), "speedup"),
    (lambda t: T.trace_window(t, duration_s=float("nan")), "duration_s"),
    (lambda t: T.trace_window(t, start_s=10_000.0), "no request of the trace"),
    (lambda t: T.trace_window(t.drop(columns="num_decode_tokens")), "table must have the column"),
    (lambda t: T.mean_rate([Request("a", 0.0, 10, 2)]), "two distinct arrival times"),
    (lambda t: T.dispersion(T.trace_window(t, duration_s=30.0), window_s=-1.0), "window_s"),
    (lambda t: T.poisson_twin(T.trace_window(t, duration_s=30.0), prompt_tokens=0), "prompt_tokens"),
])
def test_bad_input_names_the_parameter(table, call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call(table)
