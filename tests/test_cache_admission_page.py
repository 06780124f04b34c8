"""Section 8.3.4's gap analysis of the agent session: ``kvcache.session_gaps``.

The expected values are what the page's notebook cell computed before the analysis moved into the library
(the synthetic session of seed 13 with eight competing requests per gap, Qwen3-8B's 144 KiB per token).
"""

from __future__ import annotations

import pytest

from inferlab import example
from inferlab.book.plot.blocks import POOL_OTHER_PER_GAP, POOL_SEED
from inferlab.kvcache import SessionGap, session_gaps
from inferlab.units import GiB
from inferlab.workloads import TraceRequest, agent_session, agent_workload

PER_TOKEN = example.MODEL.kv_bytes_per_token()
#: (competing KV, session KV) in GiB for each of the 11 gaps, as the page's old cell printed them.
PAGE_GAPS_GIB = [
    (1.7403717041015625, 0.05218505859375), (2.098114013671875, 0.12249755859375),
    (2.7049713134765625, 0.152435302734375), (2.292022705078125, 0.1834716796875),
    (2.695770263671875, 0.2094268798828125), (2.4759063720703125, 0.258453369140625),
    (2.2962799072265625, 0.2698516845703125), (1.9831695556640625, 0.28399658203125),
    (2.2693634033203125, 0.3055572509765625), (2.580963134765625, 0.3239593505859375),
    (2.78997802734375, 0.34332275390625),
]
#: Tokens (input + output) of the competing requests in each gap, and of the session turn opening it.
COMPETING_TOKENS = [12673, 15278, 19697, 16690, 19630, 18029, 16721, 14441, 16525, 18794, 20316]
SESSION_TOKENS = [380, 892, 1110, 1336, 1525, 1882, 1965, 2068, 2225, 2359, 2500]


@pytest.fixture(scope="module")
def trace() -> list[TraceRequest]:
    return agent_workload(seed=POOL_SEED, other_per_gap=POOL_OTHER_PER_GAP)


def test_reproduces_the_page(trace):
    gaps = session_gaps(trace, PER_TOKEN)
    assert [(g.competing_bytes / GiB, g.session_bytes / GiB) for g in gaps] == PAGE_GAPS_GIB  # bit for bit
    assert [g.competing_bytes for g in gaps] == [n * PER_TOKEN for n in COMPETING_TOKENS]
    assert [g.session_bytes for g in gaps] == [n * PER_TOKEN for n in SESSION_TOKENS]
    heaviest = max(gaps, key=lambda g: g.need_bytes)
    assert heaviest is gaps[-1] and round(heaviest.need_bytes / GiB, 1) == 3.1
    assert min(g.competing_bytes for g in gaps) == gaps[0].competing_bytes  # the first gap is the lightest


def test_gap_counts_what_lies_between_turns(trace):
    gaps = session_gaps(trace, 1.0)
    turns = [i for i, r in enumerate(trace) if r.session]
    assert len(gaps) == len(turns) - 1
    # every token of the trace but the last turn's lies in exactly one gap
    last = trace[turns[-1]]
    assert sum(g.need_bytes for g in gaps) == sum(len(r.input_ids) + len(r.output_ids) for r in trace) \
        - len(last.input_ids) - len(last.output_ids)


def test_no_competing_traffic_and_outside_requests():
    session = agent_session(seed=3, turns=3)
    other = TraceRequest("x", (1, 2, 3), (4,))
    gaps = session_gaps([other, *session, other], 2.0)  # before the first turn and after the last: no gap
    assert [g.competing_bytes for g in gaps] == [0.0, 0.0]
    assert [g.session_bytes for g in gaps] == [2.0 * (len(t.input_ids) + len(t.output_ids)) for t in session[:2]]


def test_bad_input():
    session = agent_session(seed=3, turns=3)
    with pytest.raises(ValueError, match="requests"):
        session_gaps(session[:1], 1.0)  # one turn: no gap
    with pytest.raises(ValueError, match="requests"):
        session_gaps([*session, "not a request"], 1.0)
    with pytest.raises(ValueError, match="bytes_per_token"):
        session_gaps(session, 0.0)
    with pytest.raises(ValueError, match="bytes_per_token"):
        session_gaps(session, 1e308)  # overflows
    with pytest.raises(ValueError, match="competing_bytes"):
        SessionGap(-1.0, 0.0)
