"""Section 8.3's sympy forms agree with the allocator, the capacity functions and the snapshot model."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.example import KV_BUDGET_BYTES, MODEL
from inferlab.kvcache import BlockManager
from inferlab.kvcache import symbolic as ks
from inferlab.kvcache.scenarios import fork_branches
from inferlab.kvcache.snapshots import restore, snapshot_positions
from inferlab.memory import branch_blocks, max_concurrent_requests, shared_and_private_bytes, tail_waste
from inferlab.units import MiB


def test_forms() -> None:
    assert ks.TAIL_WASTE_BY_REMAINDER == ks.B - ks.r and ks.MAX_TAIL_WASTE == ks.B - 1
    assert sp.simplify(ks.MEAN_TAIL_WASTE - (ks.B - 1) / 2) == 0
    assert sp.simplify(ks.SAVED_SHARE - (ks.b - 1) * ks.M_pre / (ks.b * (ks.M_pre + ks.M_priv))) == 0
    assert ks.SAVED_SHARE_LIMIT == ks.M_pre / (ks.M_pre + ks.M_priv)


@given(st.integers(1, 5000), st.integers(1, 64))
def test_tail_waste_is_the_library_s(length, block) -> None:
    assert ks.value(ks.TAIL_WASTE, L=length, B=block) == tail_waste(length, block) <= block - 1


def test_mean_waste_over_every_length() -> None:
    waste = [tail_waste(n, 16) for n in range(1, 2049)]
    assert sp.Rational(sum(waste), len(waste)) == ks.value(ks.MEAN_TAIL_WASTE, B=16) == sp.Rational(15, 2)


def test_sharing_forms_match_the_allocator_and_memory() -> None:
    refs, physical, saved = branch_blocks(4, 95, 9)
    assert ks.value(ks.SEPARATE_KV, b=4, M_pre=95, M_priv=9) == refs
    assert ks.value(ks.SHARED_KV, b=4, M_pre=95, M_priv=9) == physical == fork_branches(4, 1520, 144).used_blocks
    assert float(ks.value(ks.SAVED_SHARE, b=4, M_pre=95, M_priv=9)) == pytest.approx(saved)
    shared, private = shared_and_private_bytes(MODEL, 8192, 256, 16, 6144)
    fit = sp.floor(ks.value(ks.MAX_SHARERS, C_KV=KV_BUDGET_BYTES / MiB, M_pre=shared / MiB, M_priv=private / MiB))
    assert fit == max_concurrent_requests(KV_BUDGET_BYTES, MODEL, 8192, 256, 16, 6144) == 35


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 200), st.integers(0, 200), st.sampled_from([1, 4, 16]))
def test_hit_tokens_are_what_the_block_manager_finds(prompt, differ_at, block) -> None:
    differ_at = min(differ_at, prompt)
    bm = BlockManager(4 * (prompt // block + 2), block)
    first = list(range(prompt))
    bm.allocate("first", first)
    bm.free("first")
    second = first[:differ_at] + [10**6 + t for t in range(prompt - differ_at)]
    cached = bm.allocate("second", second)
    assert cached == ks.value(ks.HIT_TOKENS, L_in=prompt, L_pre=differ_at, B=block)
    assert prompt - cached == ks.value(ks.COMPUTED_TOKENS, L_in=prompt, L_pre=differ_at, B=block)


@given(st.integers(0, 40_000), st.integers(1, 8192))
def test_snapshot_forms_are_the_restore_model(match, interval) -> None:
    r = restore(match, snapshot_positions(match, interval))
    assert ks.value(ks.SNAPSHOT_RECOMPUTE, L_pre=match, Delta_snap=interval) == r.recomputed_tokens
    if match:
        assert ks.value(ks.SNAPSHOTS_KEPT, L=match, Delta_snap=interval) == len(snapshot_positions(match, interval))


def test_value_names_its_symbols() -> None:
    with pytest.raises(ValueError, match="numbers must name"):
        ks.value(ks.TAIL_WASTE, X=3)


@pytest.mark.parametrize("bad", ["x", float("nan"), float("inf"), None, True, [1]])
def test_value_refuses_what_is_not_a_number(bad) -> None:
    with pytest.raises(ValueError, match="L must be a finite number"):
        ks.value(ks.TAIL_WASTE, L=bad, B=4)
    with pytest.raises(ValueError, match="form must be a sympy expression"):
        ks.value("B - 1", B=4)


def test_value_is_exact_for_large_integers() -> None:
    assert ks.value(ks.TAIL_WASTE, L=2**60 + 1, B=16) == 15
