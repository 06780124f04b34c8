"""The in-place Triton decode attention (``DECODE_ATTENTION["paged"]``) in the GPU code, on the CPU through the interpreter.

The tiny paged_vs_contiguous run: the kernel's rows and the gather path's both give the gather path's output;
kv_formats: the kernel converts FP8 and q8_0 in registers and equals float32 attention over the decoded values;
without CUDA or the interpreter the kernel's rows are skipped, a kernel that raises fails only its points; the
tiny model's decode through the kernel gives the gather path's logits. float32 throughout: the interpreter
computes bfloat16 tl.dot wrongly (tests/test_triton_paged.py).
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run in numpy on the CPU

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from inferlab.gpu.attention import DECODE_ATTENTION, decode_attention  # noqa: E402
from inferlab.gpu.kernel_runs import KV_PRESETS, PAGED_PRESETS, crossover, kv_formats, paged_vs_contiguous  # noqa: E402
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


def test_paged_vs_contiguous_runs_the_paged_kernel_and_the_gather_path() -> None:
    """Each block size through the in-place kernel and through the gather path; both equal the gather path's output."""
    s = settings_for("tiny", "cpu", dtype="float32", progress=False, repeats=1, warmup=0)
    z = PAGED_PRESETS["tiny"]
    assert z.attentions == ("paged", "gather")
    rows = list(paged_vs_contiguous(s, z))
    assert len(rows) == len(z.contexts) * (1 + 2 * len(z.block_sizes)) and all(r.get("status", "ok") == "ok" for r in rows)
    contiguous = [r for r in rows if r["layout"] == "contiguous"]
    paged = [r for r in rows if r["attention_ran"] == "paged"]
    gather = [r for r in rows if r["attention_ran"] == "gather"]
    assert {r["attention_ran"] for r in contiguous} == {"contiguous"} and contiguous[0]["backend"]
    assert {r["backend"] for r in paged} == {"paged"} and {r["layout"] for r in paged + gather} == {"paged"}
    assert [r["block_size"] for r in paged] == [r["block_size"] for r in gather] == list(z.block_sizes)
    assert all(r["gather_s"] == 0.0 for r in paged)  # the kernel reads the blocks in place: no gather
    assert all(r["gather_s"] > 0 and r["max_abs_diff"] == 0.0 for r in gather)
    for r in rows:
        assert r["time_s"] > 0 and 0 <= r["max_abs_diff"] < 1e-5, r


def test_without_cuda_or_the_interpreter_the_kernel_rows_are_skipped(monkeypatch) -> None:
    from inferlab.gpu.attention import attention_unavailable

    monkeypatch.delenv("TRITON_INTERPRET")
    assert "TRITON_INTERPRET=1" in attention_unavailable("paged", "cpu")
    assert attention_unavailable("gather", "cpu") is None and attention_unavailable("paged", "cuda") is None
    s = settings_for("tiny", "cpu", dtype="float32", progress=False, repeats=1, warmup=0)
    rows = list(paged_vs_contiguous(s, replace(PAGED_PRESETS["tiny"], block_sizes=(4,))))
    assert [(r["attention_ran"], r.get("status", "ok")) for r in rows] == [("contiguous", "ok"), ("paged", "skipped"),
                                                                   ("gather", "ok")]
    assert "interpreter" in rows[1]["error"]
    kv = list(kv_formats(s, replace(KV_PRESETS["tiny"], contexts=(32,), formats=("bf16", "fp8"))))
    assert [(r["attention_ran"], r.get("status", "ok")) for r in kv] == [("paged", "skipped"), ("sdpa", "ok")] * 2


def test_kv_formats_convert_in_the_kernel_and_match_float32_attention_over_the_decoded_values() -> None:
    s = settings_for("tiny", "cpu", dtype="float32", progress=False, card="h200", repeats=1, warmup=0)
    z = KV_PRESETS["tiny"]
    rows = pd.DataFrame(kv_formats(s, z))
    assert len(rows) == len(z.contexts) * len(z.formats) * 2 and "status" not in rows  # all ok
    paged, sdpa = rows[rows["attention_ran"] == "paged"], rows[rows["attention_ran"] == "sdpa"]
    assert (paged["backend"] == "paged").all() and (paged["block_size"] == s.block_size).all()
    assert (paged["dequant_s"] == 0).all() and (paged["read_bytes"] == paged["kv_bytes"]).all()
    values = 2 * z.batch * rows["context"] * z.n_kv_heads * z.head_dim  # K and V
    assert np.allclose(rows["kv_bytes"] / values, rows["format"].map({"bf16": 2, "fp8": 1, "q8_0": 34 / 32}))
    # the kernel reads the stored bytes; SDPA over a compressed format also writes and reads a float32 copy
    copy = sdpa["format"] != "bf16"
    assert (sdpa["read_bytes"] == sdpa["kv_bytes"] + copy * 2 * values[sdpa.index] * 4).all()
    assert (sdpa.loc[copy, "dequant_s"] > 0).all() and (sdpa.loc[~copy, "dequant_s"] == 0).all()
    assert np.allclose(rows["predicted_s"], rows["read_bytes"] / 4.8e12)
    assert (rows["max_abs_diff"] < 1e-5).all(), rows[["format", "attention_ran", "max_abs_diff"]]
    fits = crossover(rows, attention="paged")
    assert list(fits["format"]) == ["bf16", "fp8", "q8_0"]
    with pytest.raises(ValueError, match="attention must name one of"):
        crossover(rows)


def test_a_kernel_that_raises_fails_its_points_and_the_rest_run(monkeypatch, capsys) -> None:
    """On a first GPU run a kernel that does not compile must not lose the other points: failed rows, with the error;
    a kernel whose output is wrong keeps its times but its rows are failed too."""
    from inferlab.gpu import kernel_runs

    real = kernel_runs.triton_paged_attention

    def broken(*args, **kwargs):
        raise RuntimeError("PTX assembly failed")

    monkeypatch.setattr(kernel_runs, "triton_paged_attention", broken)
    s = settings_for("tiny", "cpu", dtype="float32", progress=False, repeats=1, warmup=0)
    rows = list(kv_formats(s, replace(KV_PRESETS["tiny"], contexts=(32,))))
    assert [r.get("status", "ok") for r in rows] == ["failed", "ok"] * 3
    assert rows[0]["error"] == "RuntimeError: PTX assembly failed"
    assert "PTX assembly failed" in capsys.readouterr().err  # with its traceback

    monkeypatch.setattr(kernel_runs, "triton_paged_attention", lambda *a, **kw: real(*a, **kw) * 1.5)
    rows = list(kv_formats(s, replace(KV_PRESETS["tiny"], contexts=(32,), formats=("fp8",))))
    assert [r.get("status", "ok") for r in rows] == ["failed", "ok"]  # a fast wrong kernel is not a result
    assert rows[0]["error"].startswith("wrong output: max_abs_diff") and rows[0]["time_s"] > 0


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
