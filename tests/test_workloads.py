"""Synthetic coding-agent trace: seeded, structured like the chapter's (shared head, appended turns)."""

from __future__ import annotations

import pytest

from inferlab.workloads import agent_session, agent_workload, competing_traffic, interleave, reuse_from_previous


def test_seeded_and_reproducible() -> None:
    assert agent_session(3) == agent_session(3)
    assert agent_session(3) != agent_session(4)


def test_session_structure() -> None:
    s = agent_session(13)
    assert len(s) == 12 and all(t.session for t in s)
    assert sum(len(t.input_ids) for t in s) == 20_322  # chapter's real trace: 19,556
    head = s[0].input_ids[:206]
    assert all(t.input_ids[:206] == head for t in s)  # system prompt + tools shared by every turn
    # Figure 8-17: turn 1 diverges right after the 206-token head; turns 2-4 extend one path
    assert s[0].input_ids[206] != s[1].input_ids[206]
    for prev, cur in zip(s[1:3], s[2:4]):
        assert cur.input_ids[: len(prev.input_ids)] == prev.input_ids
    shared = reuse_from_previous(s)
    assert shared[:2] == [0, 206] and sum(shared) == 16_899
    for prev, cur, n in zip(s[1:], s[2:], shared[2:]):
        if cur.kind == "append":  # an appended turn reuses all the previous turn computed: in + out - 1
            assert n == len(prev.input_ids) + len(prev.output_ids) - 1
        else:
            assert cur.kind == "rewrite" and 206 <= n < len(prev.input_ids) + len(prev.output_ids) - 1
    assert [t.kind for t in s].count("rewrite") == 1
    assert [t.reuse_hint for t in s] == [0.0] + [0.9] * 10 + [0.0]
    assert agent_session(13, first_turn_diverges=False)[1].input_ids[:300] == s[1].input_ids[:300]


def test_competing_traffic_shares_nothing_with_the_session() -> None:
    w = agent_workload(13, other_per_gap=8)
    assert len(w) == 12 + 11 * 8
    session_heads = {t.input_ids[:8] for t in w if t.session}
    assert not any(t.input_ids[:8] in session_heads for t in w if not t.session)
    assert [t.turn for t in w if t.session] == list(range(12))


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="turns"):
        agent_session(turns=0)
    with pytest.raises(ValueError, match="rewrite_prob"):
        agent_session(rewrite_prob=2)
    with pytest.raises(ValueError, match="traffic"):
        interleave(agent_session(), competing_traffic(n_requests=2), per_gap=1)
