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
    assert sum(len(t.input_ids) for t in s) == 19_016  # chapter's real trace: 19,556
    head = s[0].input_ids[:206]
    assert all(t.input_ids[:206] == head for t in s)  # system prompt + tools shared by every turn
    shared = reuse_from_previous(s)
    assert sum(shared) == 16_266
    for prev, cur, n in zip(s, s[1:], shared[1:]):
        if cur.kind == "append":  # an appended turn reuses all of the previous input and output
            assert n == len(prev.input_ids) + len(prev.output_ids)
        else:
            assert cur.kind == "rewrite" and 206 <= n < len(prev.input_ids) + len(prev.output_ids)
    assert [t.kind for t in s].count("rewrite") == 1
    assert [t.reuse_hint for t in s] == [0.9] * 11 + [0.0]


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
