"""Hybrid models resume from the nearest recurrent-state snapshot (8.3.3, Figure 8-19)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab.kvcache.snapshots import (DEEPSEEK_V41_DECODER_LAYERS, DEEPSEEK_V41_ENCODER_LAYERS, KDA_SNAPSHOT_BYTES_TP8,
                                        hybrid_restore_paths, hybrid_restore_table, restore, snapshot_positions,
                                        snapshot_storage, spacing_tradeoff, window_chain_reach)
from inferlab.units import MiB


def test_match_10752_restores_from_8192() -> None:
    r = restore(10_752, snapshot_positions(10_752, 4096))
    assert snapshot_positions(10_752, 4096) == [4096, 8192]
    assert (r.restored_from, r.recomputed_tokens) == (8192, 2560)


def test_snapshot_storage() -> None:
    assert round(KDA_SNAPSHOT_BYTES_TP8 / MiB, 1) == 53.6
    assert round(snapshot_storage(2) / MiB) == 107
    assert round(snapshot_storage(32) / MiB) == 1714


def test_spacing_tradeoff() -> None:
    n, storage, worst, mean = spacing_tradeoff(131_072, 4096)
    assert n == 32 and round(storage / MiB) == 1714 and worst == 4095
    assert mean == pytest.approx(2047.5, abs=0.1)
    assert spacing_tradeoff(131_072, 1024)[3] < mean


@given(match=st.integers(0, 50_000), interval=st.integers(1, 9000))
def test_recompute_is_below_the_interval(match: int, interval: int) -> None:
    r = restore(match, snapshot_positions(match + interval, interval))
    assert 0 <= r.recomputed_tokens < interval and r.restored_from % interval == 0


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="interval"):
        snapshot_positions(100, 0)
    with pytest.raises(ValueError, match="matched_tokens"):
        restore(-1, [])
    with pytest.raises(ValueError, match="snapshots"):
        restore(10, [4, -2])
    with pytest.raises(ValueError, match="snapshots"):
        restore(10, [4.5])
    assert restore(10, []).restored_from == 0 and restore(3, [4, 8]).recomputed_tokens == 3


def test_hybrid_restore_paths_figure_8_21() -> None:
    both, glob, miss = hybrid_restore_table(8192, 1024)
    assert (both.encoder_replayed, both.encoder_recomputed, both.encoder_new) == (0, 0, 1024)
    assert (glob.encoder_replayed, glob.encoder_recomputed, glob.encoder_new) == (128, 0, 1024)
    assert (miss.encoder_replayed, miss.encoder_recomputed, miss.encoder_new) == (0, 8192, 1024)
    assert {p.decoder_window for p in (both, glob, miss)} == {128} and both.decoder_layers == 20
    assert [p.encoder_tokens for p in (both, glob, miss)] == [1024, 1152, 9216]
    short = hybrid_restore_paths(True, False, 50, 10)
    assert short.encoder_replayed == 50 and short.decoder_window == 60
    assert hybrid_restore_paths(False, True, 100, 1).encoder_recomputed == 100  # SWA is useless without global KV
    with pytest.raises(ValueError, match="window"):
        hybrid_restore_paths(True, True, 10, 1, window=0)
    with pytest.raises(ValueError, match="prefix_tokens"):
        hybrid_restore_paths(True, True, 0, 0)


def test_window_chain_reach() -> None:
    assert DEEPSEEK_V41_ENCODER_LAYERS + DEEPSEEK_V41_DECODER_LAYERS == 40
    assert window_chain_reach(DEEPSEEK_V41_ENCODER_LAYERS, 128) == 20 * 127 == 2540
    assert window_chain_reach(1, 128) == 127  # one layer: exactly what a 128-token replay covers
    with pytest.raises(ValueError, match="layers"):
        window_chain_reach(0, 128)
    with pytest.raises(ValueError, match="window"):
        window_chain_reach(2, 0)
