"""The in-place Triton decode attention (``DECODE_ATTENTION["paged"]``) in the GPU code, on the CPU through the interpreter.

The tiny paged_vs_contiguous run with ``attention="paged"``: every row's output is the gather path's, and the
tiny model's decode through the kernel gives the gather path's logits. float32 throughout: the interpreter
computes bfloat16 tl.dot wrongly (tests/test_triton_paged.py).
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run in numpy on the CPU

import pytest  # noqa: E402

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from inferlab.gpu.attention import DECODE_ATTENTION, decode_attention  # noqa: E402
from inferlab.gpu.kernel_runs import PAGED_PRESETS, paged_vs_contiguous  # noqa: E402
from inferlab.gpu.settings import TINY, settings_for  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors
    yield
    torch.set_num_threads(threads)


def test_paged_is_registered_in_place() -> None:
    paged = decode_attention("paged")
    assert paged is DECODE_ATTENTION["paged"] and not paged.sdpa and paged.in_place
    assert DECODE_ATTENTION["gather"].sdpa and not DECODE_ATTENTION["gather"].in_place


def test_paged_vs_contiguous_runs_the_paged_kernel_and_matches_the_gather_path() -> None:
    s = settings_for("tiny", "cpu", attention="paged", dtype="float32", progress=False)
    z = PAGED_PRESETS["tiny"]
    rows = list(paged_vs_contiguous(s, z))
    assert len(rows) == len(z.contexts) * (1 + len(z.block_sizes))
    contiguous = [r for r in rows if r["layout"] == "contiguous"]
    paged = [r for r in rows if r["layout"] == "paged"]
    assert {r["attention_ran"] for r in contiguous} == {"contiguous"} and contiguous[0]["backend"]
    assert {r["attention_ran"] for r in paged} == {"paged"} and {r["backend"] for r in paged} == {"paged"}
    assert [r["block_size"] for r in paged] == list(z.block_sizes)
    assert all(r["gather_s"] == 0.0 for r in rows)  # the kernel reads the blocks in place: no gather
    for r in rows:
        assert r["time_s"] > 0 and 0 <= r["max_abs_diff"] < 1e-5, r


def test_gather_rows_time_the_gather_and_match_themselves() -> None:
    s = settings_for("tiny", "cpu", dtype="float32", progress=False)
    rows = list(paged_vs_contiguous(s, PAGED_PRESETS["tiny"]))
    paged = [r for r in rows if r["layout"] == "paged"]
    assert {r["attention_ran"] for r in paged} == {"gather"} and all(r["gather_s"] > 0 for r in paged)
    assert all(r["max_abs_diff"] == 0.0 for r in rows)


def test_tiny_model_decode_through_the_paged_kernel_gives_the_gather_logits() -> None:
    from inferlab.gpu.decoder import TorchDecoder

    gather = TorchDecoder.random(TINY, "cpu", "float32", seed=0)
    paged = TorchDecoder.random(TINY, "cpu", "float32", seed=0, attention=DECODE_ATTENTION["paged"].fn)
    g = torch.Generator().manual_seed(1)
    kc, vc = gather.new_cache(12, 4)
    kc.normal_(generator=g), vc.normal_(generator=g)
    kc[:, 0], vc[:, 0] = float("nan"), float("nan")  # block 0 is in no table: the kernel must never read it
    tables = torch.tensor([[3, 7, 1, -1], [5, 2, -1, -1], [9, 4, 11, 6]], dtype=torch.int32)
    lens = torch.tensor([10, 8, 15], dtype=torch.int32)  # a ragged tail, a full last block, a -1 past the context
    tokens = torch.tensor([1, 2, 3])
    want = gather.decode(tokens, tables.long(), lens.long(), kc.nan_to_num(), vc.nan_to_num())
    got = paged.decode(tokens, tables, lens, kc.clone(), vc.clone())
    assert got.shape == (3, TINY.vocab_size) and torch.isfinite(got).all()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
