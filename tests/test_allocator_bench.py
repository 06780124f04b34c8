"""The allocator benchmark's stream and driver work (a short run; the real measurement is `make bench`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from inferlab.kvcache import BlockManager

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "allocator_bench.py"
_spec = importlib.util.spec_from_file_location("allocator_bench", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("mix", sorted(bench.MIXES))
def test_stream_is_seeded_and_well_formed(mix: str) -> None:
    ops = bench.request_stream(3000, seed=1, mix=mix)
    assert ops == bench.request_stream(3000, 1, mix) and ops != bench.request_stream(3000, 2, mix)
    assert len(ops) == 3000 and {op[0] for op in ops} == {"alloc", "append", "free"}
    live: set[int] = set()
    for op in ops:  # every append and free names a running request; every id is admitted once
        if op[0] == "alloc":
            assert op[1] not in live and op[2]
            live.add(op[1])
        else:
            assert op[1] in live
            if op[0] == "free":
                live.remove(op[1])


def test_ours_runs_the_stream_and_finds_the_shared_prefixes() -> None:
    ops = bench.request_stream(3000, seed=0)
    seconds, cached = bench.run_ours(ops, 6000, 16)
    assert seconds > 0 and cached > 0  # system prompts, resends and continuations hit
    assert cached % 16 == 0


def test_unknown_mix_is_named() -> None:
    with pytest.raises(ValueError, match="mix"):
        bench.request_stream(10, mix="long")


def test_nanovllm_path_must_hold_its_block_manager(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="block_manager.py"):
        bench.load_nanovllm(str(tmp_path))


def test_a_pool_too_small_for_the_stream_is_reported() -> None:
    ops = bench.request_stream(500, seed=0)
    with pytest.raises(RuntimeError, match="pool too small"):
        bench.run_ours(ops, 8, 16)
    assert BlockManager(8, 16).num_free == 8
