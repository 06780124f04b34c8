"""The GPU measurement code run on the CPU at tiny sizes: results are checked, times are not.

Tests that need torch take the ``torch`` fixture, which uses ``pytest.importorskip`` only as a
guard for readers without torch; CI installs torch 2.13.0 (CPU build), so there they all run.
CUDA-only branches are checked with mocked device facts (names, memory, the order of calls);
torch.compile through Inductor on the CPU takes tens of seconds and lives in test_gpu_compile.py.
The Triton kernel's rows run in Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from inferlab import kernels
from inferlab.compression import formats
from inferlab.gpu import EXPERIMENTS
from inferlab.gpu import device as gdev
from inferlab.gpu import records as grec
from inferlab.gpu.kernel_runs import crossover
from inferlab.gpu.model_runs import TINY, plan
from inferlab.gpu.settings import settings_for
from inferlab.kernels import TinyConfig, TinyQwen3
from inferlab.kvcache import BlockManager
from inferlab.models import MODELS
from inferlab.units import GiB

QWEN = MODELS["qwen3-8b"]
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the Triton kernel's rows run in its interpreter


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a second thread only waits (on 2 shared cores, for milliseconds)
    yield torch
    torch.set_num_threads(threads)


# ---- without torch ----------------------------------------------------------------------------
def test_importing_gpu_modules_does_not_import_torch() -> None:
    modules = ["inferlab.gpu", *(f"inferlab.gpu.{m}" for m in ("model_runs", "kernel_runs", "transfer", "runner",
                                                               "timing", "attention", "records", "settings", "device",
                                                               "decoder", "__main__")), "inferlab.book.plot.gpu"]
    code = f"import sys, {', '.join(modules)}; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


GB_ = 1e9


@pytest.mark.parametrize("name, total_gib, key", [
    ("NVIDIA H200", 139.8, "h200"),
    ("NVIDIA H200 NVL", 139.8, None),  # same memory, lower compute peak: not the SXM entry
    ("NVIDIA H100 80GB HBM3", 79.6, "h100-sxm"),
    ("NVIDIA H100 PCIe", 79.6, None),  # 2.0 TB/s, not the SXM's 3.35
    ("NVIDIA H100 NVL", 93.6, None),
    ("NVIDIA GH200 480GB", 95.0, "gh200"),
    ("NVIDIA GH200 144G HBM3e", 143.0, None),  # not the 96 GB entry
    ("NVIDIA A100-SXM4-80GB", 79.2, "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", 39.4, None),
    ("NVIDIA A100 80GB PCIe", 79.2, None),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 95.6, "rtx-pro-6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 95.6, None),
    ("NVIDIA GeForce RTX 4090", 23.6, None),
])
def test_cards_match_on_name_and_memory_together(name: str, total_gib: float, key: str | None) -> None:
    assert gdev.card_key(name, total_gib * GiB) == key


def test_an_unknown_card_records_unknown_peaks_not_a_neighbours(torch, monkeypatch) -> None:
    calls = _mock_cuda(torch, monkeypatch, "NVIDIA H100 PCIe", free=70 * GiB, total=79.6 * GiB)
    info = gdev.device_info("cuda")
    meta = info.metadata()
    assert meta["card"] == "unknown" and meta["card_match"] == "unknown" and meta["peak_hbm_bandwidth_Bps"] is None
    assert info.slug == "nvidia-h100-pcie" and meta["gpu"] == "NVIDIA H100 PCIe" and calls
    forced = gdev.device_info("cuda", card="h100-sxm")  # the user's word, said so in the row
    assert forced.metadata()["card_match"] == "--card (user)" and forced.metadata()["peak_hbm_bandwidth_Bps"] == 3350e9
    assert forced.slug == "nvidia-h100-pcie"  # the folder still names the real card
    _mock_cuda(torch, monkeypatch, "NVIDIA H200", free=139 * GiB, total=139.8 * GiB)
    assert gdev.device_info("cuda").metadata()["card"] == "h200" and gdev.device_info("cuda").slug == "h200"


def _mock_cuda(torch, monkeypatch, name: str, free: float, total: float, cached: float = 0.0) -> list[str]:
    """torch.cuda as a card of this name and memory; ``cached`` bytes sit in the allocator until empty_cache."""
    calls: list[str] = []
    state = {"cached": cached}

    def empty_cache() -> None:
        calls.append("empty_cache")
        state["cached"] = 0.0

    def mem_get_info() -> tuple[int, int]:
        calls.append("mem_get_info")
        return int(free - state["cached"]), int(total)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("synchronize"))
    monkeypatch.setattr(gdev, "_driver_version", lambda: "999.1")
    return calls


def test_free_memory_is_read_after_the_cache_is_emptied(torch, monkeypatch) -> None:
    """Earlier experiments leave blocks in PyTorch's cache; free memory is read after handing them back."""
    calls = _mock_cuda(torch, monkeypatch, "NVIDIA H200", free=130 * GiB, total=139.8 * GiB, cached=120 * GiB)
    info = gdev.device_info("cuda")
    assert info.free_bytes == int(130 * GiB)  # not the 10 GiB the cache left visible
    assert calls.index("empty_cache") < calls.index("mem_get_info")
    assert info.driver == "999.1" and info.total_bytes == int(139.8 * GiB)


def test_model_scale_follows_free_memory() -> None:
    kv_2k_64 = 64 * 2048  # the chapter's batch-64 point
    fixed = (QWEN.embedding_params + QWEN.lm_head_params + QWEN.hidden_size) * 2
    per_token = QWEN.kv_bytes_per_token()
    budget = 139 * GiB * 0.8  # an H200 holds every layer; the pool takes the rest
    layers, tokens = plan(QWEN, budget, kv_2k_64)
    assert layers == 36 and tokens > 4 * kv_2k_64
    assert fixed + 36 * gdev.layer_bytes(QWEN) + tokens * per_token <= budget
    assert fixed + 36 * gdev.layer_bytes(QWEN) + (tokens + 1) * per_token > budget
    assert plan(QWEN, budget, kv_2k_64, max_kv_tokens=1000) == (36, 1000)
    layers, tokens = plan(QWEN, 24 * GiB * 0.8, kv_2k_64)  # a 24 GB card: fewer layers, same KV per layer
    assert 1 <= layers < 36 and tokens >= kv_2k_64
    assert fixed + layers * (gdev.layer_bytes(QWEN) + tokens * per_token / 36) <= 24 * GiB * 0.8
    assert plan(QWEN, 4 * GiB, 10**9)[0] == 1  # one layer and a smaller pool
    with pytest.raises(ValueError, match="one layer"):
        plan(QWEN, 1 * GiB, 1)
    assert gdev.layers_that_fit(QWEN, 1e12) == 36
    assert gdev.scaled(QWEN, 9).n_layers == 9 and gdev.scaled(QWEN, 36) is QWEN


def test_crossover_reproduces_the_chapters_7000_tokens() -> None:
    # H100, Llama-3.1-8B (8.4.2): BF16 6.44 + 4.37e-5 L ms, FP8 6.58 + 2.37e-5 L ms -> about 7000 tokens
    ctx = np.array([1024, 4096, 16384, 32768])
    rows = pd.concat([pd.DataFrame({"format": "bf16", "context": ctx, "time_s": (6.44 + 4.37e-5 * ctx) / 1e3}),
                      pd.DataFrame({"format": "fp8", "context": ctx, "time_s": (6.58 + 2.37e-5 * ctx) / 1e3})])
    fits = crossover(rows).set_index("format")
    assert fits.loc["fp8", "crossover_tokens"] == pytest.approx(7000, rel=1e-6)
    assert fits.loc["fp8", "fixed_s"] * 1e3 == pytest.approx(6.58)
    slower = rows.assign(time_s=np.where(rows["format"] == "fp8", rows["time_s"] * 2, rows["time_s"]))
    assert math.isinf(crossover(slower).set_index("format").loc["fp8", "crossover_tokens"])
    with pytest.raises(ValueError, match="two contexts"):
        crossover(rows[rows["context"] == 1024])


def test_recorded_returns_none_without_records(tmp_path) -> None:
    assert grec.recorded("decode_step", tmp_path) is None


def _info(device: str = "cuda", name: str = "NVIDIA H200", card: str | None = "h200") -> gdev.DeviceInfo:
    from inferlab.hardware import ACCELERATORS

    return gdev.DeviceInfo(device, name, "550.1", "2.13.0", "2026-01-02T03:04:05+00:00", 10**11, 15 * 10**10,
                           ACCELERATORS[card] if card else None, "name and memory" if card else "unknown")


def test_rows_are_appended_as_they_come_with_the_header_once(tmp_path) -> None:
    s = settings_for("full", "cuda")
    rec = grec.Recorder("exp", ("a", "b"), s, _info(), tmp_path)
    rec.add({"a": 1, "b": 2.5, "backend": "FLASH_ATTENTION"})
    first = rec.path.read_text()
    rec.add(grec.failed({"a": 2}, MemoryError("out of memory")))
    text = rec.path.read_text()
    assert text.startswith(first) and text.count("\n") == 3 and text.count("experiment,") == 1
    back = pd.read_csv(rec.path)
    assert list(back["status"]) == ["ok", "failed"] and back["error"].iloc[1] == "MemoryError: out of memory"
    assert {"preset", "backend", "gpu", "driver", "torch", "date", "card", "card_match", "peak_hbm_bandwidth_Bps",
            "peak_bf16_flops", "host_link_Bps", "dtype", "attention", "device"} <= set(back.columns)
    assert (back["preset"] == "full").all() and (back["card"] == "h200").all() and rec.path.parent.name == "h200"
    with pytest.raises(ValueError, match="only the columns"):
        rec.add({"nope": 1})
    with pytest.raises(ValueError, match="status"):
        rec.add({"a": 1, "status": "meh"})


def test_only_full_cuda_runs_are_measurements(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("INFERLAB_GPU_RUNS", str(tmp_path / "cache"))
    assert grec.default_out_dir(settings_for("full", "cuda")) == grec.MEASURED_DIR
    for preset, device in (("quick", "cuda"), ("tiny", "cuda"), ("tiny", "cpu"), ("full", "cpu")):
        s = settings_for(preset, device)
        assert grec.default_out_dir(s) == tmp_path / "cache" / preset
        with pytest.raises(ValueError, match="only full-size CUDA runs"):
            grec.Recorder("exp", ("a",), s, _info(device), grec.MEASURED_DIR)
    # what the cells show: ok rows of full CUDA runs only
    for folder, device, preset in (("h200", "cuda", "full"), ("cpu", "cpu", "tiny"), ("h100", "cuda", "quick")):
        s = settings_for(preset, device)
        rec = grec.Recorder("exp", ("a",), s, _info(device), tmp_path / "m" / folder)
        rec.add({"a": 1})
        rec.add(grec.skipped({"a": 2}, "does not fit"))
    rows, path = grec.recorded("exp", tmp_path / "m" / "h200")
    assert list(rows["a"]) == [1] and path.parent.name == "h200"
    assert grec.recorded("exp", tmp_path / "m" / "cpu") is None and grec.recorded("exp", tmp_path / "m" / "h100") is None


# ---- with torch, on the CPU -----------------------------------------------------------------------
def test_torch_decoder_equals_numpy_model(torch) -> None:
    from inferlab.gpu.decoder import TorchDecoder

    model = TinyQwen3(TinyConfig(), seed=4)
    td = TorchDecoder.from_numpy(model)
    prompts = [list(range(3, 14)), list(range(40, 61)), [5, 6]]
    cache = model.new_cache(64, 4)
    kc, vc = td.new_cache(64, 4)
    nxt = []
    for s, p in enumerate(prompts):  # prefill in two chunks in torch, whole in numpy, into the same blocks
        want = model.prefill(cache, s, p)
        table = torch.tensor(cache.block_table(s))
        cut = len(p) // 2
        if cut:
            td.chunk(torch.tensor(p[:cut]), 0, table, kc, vc)
        got = td.chunk(torch.tensor(p[cut:]), cut, table, kc, vc)[0].numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        nxt.append(int(np.argmax(want)))
    for _ in range(3):  # batched decode through the same block tables
        want = model.decode(cache, [0, 1, 2], nxt)
        tables, lens = cache.tables([0, 1, 2])
        got = td.decode(torch.tensor(nxt), torch.tensor(tables), torch.tensor(lens), kc, vc).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        nxt = np.argmax(want, axis=-1).tolist()


def test_torch_verify_logits_equal_reference(torch) -> None:
    from inferlab.gpu.decoder import TorchDecoder

    model = TinyQwen3(TinyConfig(n_layers=3), seed=5)
    td = TorchDecoder.from_numpy(model)
    tokens = list(range(10, 31))
    bm = BlockManager(16, 4, prefix_caching=False)
    bm.allocate("s", tokens)
    kc, vc = td.new_cache(16, 4)
    table = torch.tensor(bm.block_table("s"))
    td.chunk(torch.tensor(tokens[:16]), 0, table, kc, vc)
    got = td.chunk(torch.tensor(tokens[16:]), 16, table, kc, vc, logits="all").numpy()
    np.testing.assert_allclose(got, model.forward(tokens)[16:], rtol=1e-4, atol=1e-4)


def test_random_decoder_has_the_specs_parameters(torch) -> None:
    from inferlab.gpu.decoder import TorchDecoder

    td = TorchDecoder.random(TINY, "cpu", "float32", seed=0)
    assert sum(t.numel() for t in td.w.values()) == TINY.n_params
    assert td.w["wqkv"].shape == (2, 32, (4 + 2 + 2) * 16)
    kc, _ = td.new_cache(5, 4)
    assert kc.shape == (2, 5, 4, 2, 16)
    logits = td.decode(torch.tensor([1]), torch.tensor([[3]]), torch.tensor([1]), *td.new_cache(5, 4))
    assert logits.shape == (1, TINY.vocab_size) and torch.isfinite(logits).all()
    # contexts that fill their blocks: the unmasked path gives the masked path's logits
    kc, vc = td.new_cache(6, 4)
    kc.normal_(), vc.normal_()
    args = (torch.tensor([1, 2]), torch.tensor([[3, 0], [5, 1]]), torch.tensor([8, 8]), kc, vc)
    torch.testing.assert_close(td.decode(*args, full_blocks=True), td.decode(*args))


def test_torch_paged_attention_equals_numpy_kernel(torch) -> None:
    from inferlab.gpu.attention import gather_blocks, paged_attention

    rng = np.random.default_rng(0)
    lengths, p, n_kv, d = [5, 17, 1, 32], 4, 2, 8
    need = sum(-(-n // p) for n in lengths) + 2
    bm = BlockManager(need, p, prefix_caching=False, free_order=rng.permutation(need).tolist())
    for s, n in enumerate(lengths):
        bm.allocate(s, list(range(n)))
    kc, vc = rng.normal(size=(2, need, p, n_kv, d)).astype(np.float32)
    q = rng.normal(size=(4, 6, d)).astype(np.float32)
    tables, lens = kernels.tables_from_manager(bm, range(4))
    want = kernels.paged_attention(q, kc, vc, tables, lens)
    safe = np.maximum(tables, 0)  # padding entries (-1) point at any valid block; the mask hides them
    got = paged_attention(*(torch.from_numpy(a) for a in (q, kc, vc, safe, lens))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    gathered = gather_blocks(torch.from_numpy(kc), torch.from_numpy(safe)).numpy()
    np.testing.assert_array_equal(gathered[1, :17], kernels.gather_kv(kc, bm.block_table(1), 17))


def test_torch_kv_codecs_equal_inferlab_quant(torch) -> None:
    from inferlab.gpu.kernel_runs import fp8_decode, fp8_encode, q8_0_decode, q8_0_encode

    x = np.random.default_rng(1).normal(size=(3, 5, 128)).astype(np.float32)
    x[0, 0, :32] = 0  # an all-zero group
    x[1, 1, :32] = np.linspace(-127, 127, 32) / 2  # exact halves: rounded away from zero
    codes, scales = q8_0_encode(torch.from_numpy(x))
    blocks = formats.quantize(x, "q8_0").reshape(3, 5, 4, 34)
    np.testing.assert_array_equal(scales.numpy().view(np.uint8).reshape(3, 5, 4, 2), blocks[..., :2])
    np.testing.assert_array_equal(codes.numpy().view(np.uint8).reshape(3, 5, 4, 32), blocks[..., 2:])
    np.testing.assert_array_equal(q8_0_decode(codes, scales).numpy(), formats.round_trip(x, "q8_0"))
    f8, s = fp8_encode(torch.from_numpy(x))
    assert s == pytest.approx(formats.fp8_e4m3_scale(x))
    np.testing.assert_allclose(fp8_decode(f8, s).numpy(), formats.fp8_e4m3_round_trip(x), rtol=1e-6)
    with pytest.raises(ValueError, match="multiple of 32"):
        q8_0_encode(torch.zeros(3, 20))


@pytest.mark.parametrize("layers, buffers", [(1, 1), (4, 1), (4, 2), (5, 2), (3, 4)])
def test_prefetch_pipeline_gives_the_resident_result(torch, layers: int, buffers: int) -> None:
    from inferlab.gpu.transfer import prefetch_forward

    g = torch.Generator().manual_seed(layers)
    host = [torch.randn(16, 16, generator=g) / 4 for _ in range(layers)]
    x = torch.randn(3, 16, generator=g)
    want = x
    for w in host:
        want = want @ w
    torch.testing.assert_close(prefetch_forward(x, host, buffers), want)
    with pytest.raises(ValueError, match="buffers"):
        prefetch_forward(x, host, 0)


@pytest.mark.parametrize("layers, buffers", [(5, 1), (5, 2), (2, 3)])
def test_prefetch_copies_wait_for_the_compute_that_read_their_buffer(torch, layers: int, buffers: int) -> None:
    """The stream ordering, logged: copies after all earlier compute, compute after its copy, reuse after the read."""
    from inferlab.gpu.transfer import PipelineSync, prefetch_forward

    log: list[tuple] = []

    class Logged(PipelineSync):
        def begin(self):
            log.append(("copies wait for earlier compute",))

        def copy(self, b, dst, src, reuse):
            if reuse:
                log.append(("copy waits for compute done", b))
            log.append(("copy", b))
            super().copy(b, dst, src, reuse)

        def before_compute(self, b):
            log.append(("compute waits for copy", b))

        def after_compute(self, b):
            log.append(("compute done", b))

        def end(self):
            log.append(("compute waits for all copies",))

    host = [torch.randn(4, 4) for _ in range(layers)]
    prefetch_forward(torch.randn(2, 4), host, buffers, Logged("cpu", buffers))
    assert log[0] == ("copies wait for earlier compute",) and log[-1] == ("compute waits for all copies",)
    n = min(buffers, layers)
    copies = [i for i, e in enumerate(log) if e[0] == "copy"]
    computes = [i for i, e in enumerate(log) if e[0] == "compute done"]
    assert len(copies) == layers and len(computes) == layers
    for i in range(layers):
        b = i % n
        assert log[computes[i] - 1] == ("compute waits for copy", b) and copies[i] < computes[i]
        if i >= n:  # reusing buffer b: the copy waits for the compute that read it (layer i - n)
            assert log[copies[i] - 1] == ("copy waits for compute done", b) and computes[i - n] < copies[i]


def test_prefetch_compute_is_sized_to_the_copy() -> None:
    from inferlab.gpu.transfer import match_rows

    seen = []

    def compute_s(rows: int) -> float:  # 70 us for one row, then 0.3 us per row (compute-bound)
        seen.append(rows)
        return 70e-6 + 0.3e-6 * rows

    rows, t = match_rows(5e-3, compute_s)
    assert t == pytest.approx(5e-3, rel=0.05) and rows % 16 == 0 and len(seen) <= 3
    assert match_rows(5e-3, compute_s, max_rows=1024)[0] == 1024
    assert match_rows(1e-9, compute_s)[0] == 16


def test_pageable_copy_source_is_written(torch) -> None:
    """A torch.empty never written maps the shared zero page and copies faster than real data."""
    from inferlab.gpu.transfer import host_buffer

    buf = host_buffer(1 << 16, pinned=False, seed=1)
    assert buf.dtype == torch.uint8 and (buf != 0).float().mean() > 0.95 and len(torch.unique(buf)) > 200


def test_the_timer_counts_calls_and_works_on_the_cpu(torch) -> None:
    from inferlab.gpu.timing import L2Flush, graphed, median_time

    n = []
    assert median_time(lambda: n.append(1), "cpu", warmup=2, repeats=3, calls=4, graph=True, flush=True) >= 0
    assert len(n) == 2 + 3 * 4
    t = median_time(lambda: time.sleep(2e-3), "cpu", warmup=0, repeats=3, calls=2)
    assert 2e-3 <= t < 0.05  # per call, not per repeat
    assert L2Flush("cpu").nbytes == 0
    graphed(lambda: n.append(2), "cpu", calls=3)()
    assert n.count(2) == 3
    with pytest.raises(ValueError, match="calls"):
        median_time(lambda: None, "cpu", calls=0)


def test_on_cuda_the_timer_flushes_outside_the_window_and_times_n_calls(torch, monkeypatch) -> None:
    """Mocked CUDA events: per repeat, flush, start, the calls (or one graph replay), end; the median per call."""
    from inferlab.gpu import timing

    log: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing

        def record(self) -> None:
            log.append("record")

        def elapsed_time(self, end: "Event") -> float:
            return 6.0  # ms

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: log.append("sync"))
    t = timing.median_time(lambda: log.append("fn"), "cuda", warmup=1, repeats=2, calls=3,
                           flush=lambda: log.append("flush"))
    assert t == pytest.approx(6e-3 / 3)
    window = ["flush", "record", "fn", "fn", "fn", "record"]
    assert log == ["fn", "sync", *window, *window, "sync"]  # no sync between repeats: the host stays ahead
    log.clear()
    monkeypatch.setattr(timing, "graphed", lambda fn, device, calls: lambda: log.append(f"replay of {calls}"))
    timing.median_time(lambda: log.append("fn"), "cuda", warmup=0, repeats=1, calls=4, graph=True,
                       flush=lambda: log.append("flush"))
    assert log == ["sync", "flush", "record", "replay of 4", "record", "sync"]


def test_the_l2_flush_writes_then_reads_twice_the_cache(torch, monkeypatch) -> None:
    from inferlab.gpu.timing import L2Flush

    class Props:
        L2_cache_size = 1 << 20

    made = []
    real_empty = torch.empty

    def empty(*shape, device=None, **kw):
        made.append((shape, device))
        return real_empty(*shape, **kw)  # a CPU tensor stands in for the device buffer

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: Props())
    monkeypatch.setattr(torch, "empty", empty)
    flush = L2Flush("cuda")
    assert made == [((2 << 20,), "cuda")] and flush.nbytes == 2 << 20
    flush()
    assert bool((flush.buffer == 1).all())


def test_the_sdpa_backend_is_pinned_and_named(torch) -> None:
    from inferlab.gpu.attention import pick_sdpa_backend, pinned

    def flash_refused():
        if torch.backends.cuda.flash_sdp_enabled():
            raise RuntimeError("No available kernel. Aborting execution.")
        return torch.backends.cuda.math_sdp_enabled()

    assert pick_sdpa_backend(flash_refused, "cpu") == "MATH"
    assert pinned(flash_refused, "MATH")() is True
    assert torch.backends.cuda.flash_sdp_enabled()  # the pin ends with the call

    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory")

    with pytest.raises(torch.OutOfMemoryError):  # not taken for a refused kernel
        pick_sdpa_backend(oom, "cpu")
    with pytest.raises(RuntimeError, match="no SDPA backend runs"):
        pick_sdpa_backend(lambda: (_ for _ in ()).throw(RuntimeError("No available kernel")), "cpu")


def test_verify_compares_work_not_kernels(torch, monkeypatch) -> None:
    """verify_cost: the decode step attends without a mask (its context fills its blocks), verify rows with the
    lower-right causal mask over the same context; decode_step at a block multiple attends without a mask too."""
    from inferlab.gpu import model_runs

    sdpa, seen = torch.nn.functional.scaled_dot_product_attention, []

    def logged(q, k, v, attn_mask=None, is_causal=False, **kw):
        seen.append((q.shape[-2], k.shape[-2], attn_mask, is_causal))
        return sdpa(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", logged)
    s = settings_for("tiny", "cpu", progress=False, repeats=1, warmup=0)
    rows = list(model_runs.verify_cost(s, model_runs.VerifySizes((1, 3), 8)))
    assert [r["positions"] for r in rows] == [1, 3]
    decode = [c for c in seen if c[0] == 1 and c[2] is None and not c[3]]
    assert decode and all(c[1] == 8 for c in decode)  # one query over all 8 positions, no mask
    for n_q, n_k, mask, causal in seen:
        if mask is not None:  # a verify chunk: query i sees keys 0 ... 8 - n + i
            want = torch.arange(n_k)[None, :] <= torch.arange(n_k - n_q, n_k)[:, None]
            assert n_k == 8 and torch.equal(mask, want)
    seen.clear()
    list(model_runs.decode_step(s, model_runs.DecodeSizes((2,), (8,))))
    assert seen and all(mask is None and not causal for *_, mask, causal in seen)


def test_chunk_attention_is_lower_right_causal(torch) -> None:
    from inferlab.gpu.attention import chunk_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 4, 8, generator=g), torch.randn(9, 2, 8, generator=g), torch.randn(9, 2, 8, generator=g)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    scores = torch.einsum("nhd,chd->hnc", q, kk) / 8**0.5
    visible = torch.arange(9)[None, :] <= torch.arange(6, 9)[:, None]  # query i is position 6 + i
    want = torch.einsum("hnc,chd->nhd", scores.masked_fill(~visible, float("-inf")).softmax(-1), vv)
    torch.testing.assert_close(chunk_attention(q, k, v), want)


@pytest.fixture(scope="module")
def tiny_records(torch, tmp_path_factory):
    """Every experiment run once at tiny size on the CPU (peaks of the H200 for the efficiency columns)."""
    from inferlab import gpu

    out = tmp_path_factory.mktemp("runs")
    runs = {name: gpu.run(name, "tiny", device="cpu", card="h200", out_dir=out, progress=False) for name in EXPERIMENTS}
    return out, runs


def test_every_experiment_runs_on_the_cpu_and_records(torch, tiny_records) -> None:
    tmp_path, runs = tiny_records
    for name, (rows, path) in runs.items():
        assert len(rows) >= 2 and path == tmp_path / "cpu" / f"{name}.csv"
        back = pd.read_csv(path)
        assert {"gpu", "driver", "torch", "date", "peak_hbm_bandwidth_Bps", "peak_bf16_flops", "preset", "backend",
                "status", "card_match"} <= set(back.columns)
        assert back["torch"].iloc[0] == torch.__version__ and back["card"].iloc[0] == "h200"
        assert (back["preset"] == "tiny").all() and (back["status"] == "ok").all() and back["backend"].notna().all()
        time_col = "step_s" if name == "decode_step" else "time_s"
        assert (rows[time_col] > 0).all()  # CPU times prove the code ran; they are not asserted further
    dec = pd.read_csv(tmp_path / "cpu" / "decode_step.csv")
    assert set(dec["batch"]) == {1, 3} and set(dec["context"]) == {8, 17} and not dec["compiled"].any()
    assert (dec["path"] == "eager").all()  # no graphs on the CPU, no compiling unless asked
    assert np.allclose(dec["mbu"], dec["read_bytes"] / dec["step_s"] / 4.8e12)
    pre = pd.read_csv(tmp_path / "cpu" / "prefill_chunks.csv")
    assert {"first", "last"} <= set(pre["position"])
    assert (pre.loc[pre["position"] == "last", "cached"] + pre.loc[pre["position"] == "last", "chunk"] == 24).all()
    assert (pre["flops"] == [TINY.flops(c, h) for c, h in zip(pre["chunk"], pre["cached"])]).all()
    kv = pd.read_csv(tmp_path / "cpu" / "kv_formats.csv")
    assert set(kv["format"]) == {"bf16", "fp8", "q8_0"} and set(kv["attention_ran"]) == {"paged", "sdpa"}
    assert crossover(kv, attention="paged").shape[0] == 3 and crossover(kv, attention="sdpa").shape[0] == 3
    assert (kv["max_abs_diff"] < 0.05).all()  # bfloat16: the kernel's dots in float32 under the interpreter
    paged = pd.read_csv(tmp_path / "cpu" / "paged_vs_contiguous.csv")
    assert set(paged["attention_ran"]) == {"contiguous", "paged", "gather"} and (paged["max_abs_diff"] < 0.05).all()
    host = pd.read_csv(tmp_path / "cpu" / "host_copy.csv")
    assert set(host["kind"]) >= {"pageable", "resident", "1 buffer", "2 buffers"}
    assert (host.loc[host["part"] == "prefetch", "rows"] >= 16).all()
    ver = pd.read_csv(tmp_path / "cpu" / "verify_cost.csv")
    assert (ver["context"] % 4 == 0).all() and ver["decode_backend"].notna().all()  # the decode fills its blocks
    assert (ver["flops"] == [TINY.flops(k, 8 - k, logits=k) for k in ver["positions"]]).all()
    assert grec.recorded("verify_cost", tmp_path) is None  # a CPU run is never shown as a measurement


def test_attainable_mbu_needs_graph_rows(torch) -> None:
    from inferlab.gpu.model_runs import attainable_mbu

    rows = pd.DataFrame({"batch": [1, 1, 4], "cuda_graphs": [False, True, True], "mbu": [0.4, 0.75, 0.8]})
    assert attainable_mbu(rows) == 0.75
    with pytest.raises(ValueError, match="batch-1"):
        attainable_mbu(rows[~rows["cuda_graphs"]])


def test_command_line(torch, tmp_path, capsys, monkeypatch) -> None:
    from inferlab.gpu.__main__ import main

    monkeypatch.setenv("INFERLAB_GPU_RUNS", str(tmp_path / "cache"))
    assert main(["verify_cost", "--device", "cpu"]) == 0  # the CPU path: tiny sizes, into the cache
    assert (tmp_path / "cache" / "tiny" / "cpu" / "verify_cost.csv").exists()
    assert main(["verify_cost", "--tiny", "--device", "cpu", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "cpu" / "verify_cost.csv").exists()
    assert "summary: 1 of 1 experiments ran cleanly" in capsys.readouterr().out
    assert main(["decode_step", "--device", "cpu", "--quick"]) == 2
    assert "only the tiny sizes" in capsys.readouterr().err
    assert main(["decode_step", "--device", "cpu", "--card", "tpu"]) == 2
    assert "card must be one of" in capsys.readouterr().err
    monkeypatch.setattr("inferlab.gpu.__main__.cuda_available", lambda: False)
    assert main(["decode_step"]) == 2  # CUDA is the default device; no silent fallback to the CPU
    assert "no CUDA device" in capsys.readouterr().err
    assert main(["decode_step", "--device", "cuda", "--tiny"]) == 2  # asked for CUDA: refused
    assert "no CUDA device" in capsys.readouterr().err
    monkeypatch.delenv("TRITON_INTERPRET")
    assert main(["verify_cost", "--tiny", "--out", str(tmp_path / "t")]) == 0  # a tiny run says it goes to the CPU
    assert "the tiny run goes to the CPU" in capsys.readouterr().out
    assert (tmp_path / "t" / "cpu" / "verify_cost.csv").exists()
    assert os.environ["TRITON_INTERPRET"] == "1"  # the CPU path runs the Triton kernels in the interpreter


def test_a_failing_experiment_leaves_the_others_and_exits_non_zero(torch, tmp_path, capsys, monkeypatch) -> None:
    """Experiment 3 raises after one row: every other CSV is written, its row too, and the summary says why."""
    from inferlab.gpu import runner
    from inferlab.gpu.__main__ import main

    names, real = list(EXPERIMENTS), runner.experiment

    def fake(name: str):
        columns = real(name)[2]

        def rows(s, z, info):  # one row of the experiment's columns, as fast as it gets
            yield {columns[0]: "x", columns[-1]: 1.0}
            if name == names[2]:
                raise RuntimeError("simulated failure in experiment 3")
        return rows

    monkeypatch.setattr(runner, "experiment", lambda name: (fake(name), *real(name)[1:]))
    assert main(["all", "--device", "cpu", "--out", str(tmp_path)]) == 1
    for name in names:
        assert len(pd.read_csv(tmp_path / "cpu" / f"{name}.csv")) == 1, name  # experiment 3's row before it failed
    out = capsys.readouterr()
    summary = out.out[out.out.index("summary:"):]
    assert f"summary: 5 of 6 experiments ran cleanly; not clean: {names[2]}" in summary
    assert "stopped by RuntimeError: simulated failure in experiment 3" in summary
    assert "Traceback" in out.err and "simulated failure" in out.err


def test_an_out_of_memory_point_fails_alone(torch, tmp_path, monkeypatch) -> None:
    """A point that runs out of memory is a failed row with the error; the next point still runs."""
    from inferlab.gpu import model_runs, runner

    real = model_runs._decode_point

    def oom_at_batch_3(m, s, uses_sdpa, b, *args):
        if b == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 52.00 GiB")
        return real(m, s, uses_sdpa, b, *args)

    monkeypatch.setattr(model_runs, "_decode_point", oom_at_batch_3)
    out = runner.run_experiment("decode_step", settings_for("tiny", "cpu", progress=False), tmp_path)
    assert out.error is None and not out.clean and out.count("ok") == 2 and out.count("failed") == 2
    back = pd.read_csv(out.path)
    assert back.loc[back["batch"] == 3, "error"].str.startswith("OutOfMemoryError: CUDA out of memory").all()
    assert "failed point: OutOfMemoryError" in runner.summary([out])


class InvalidCxxCompiler(RuntimeError):
    """Named like torch._inductor.exc's (importing that takes seconds: test_gpu_compile.py uses the real ones)."""


class BackendCompilerFailed(RuntimeError):
    """Named like torch._dynamo.exc's, which wraps what the compiler raised in ``inner_exception``."""

    def __init__(self, inner: BaseException) -> None:
        super().__init__(f"backend='inductor' raised:\n{type(inner).__name__}: {inner}")
        self.inner_exception = inner


def test_compile_errors_are_reported_not_hidden(torch, tmp_path, monkeypatch) -> None:
    """No toolchain: a skipped row saying so; out of memory while compiling: a failed row; anything else: stops."""
    from inferlab.gpu import model_runs, runner

    def compiling_raises(exc):
        def compile(fn, **kw):
            def run():
                raise exc
            return run
        return compile

    s = settings_for("tiny", "cpu", compile=True, progress=False)
    one = dict(batches=(1,), contexts=(8,), compiled_batches=(1,))
    cases = [(BackendCompilerFailed(InvalidCxxCompiler("No working C compiler found")), "skipped",
              "no compiler toolchain for torch.compile: InvalidCxxCompiler: No working C compiler found"),
             (BackendCompilerFailed(torch.OutOfMemoryError("CUDA out of memory")), "failed",
              "OutOfMemoryError: CUDA out of memory")]
    for exc, status, text in cases:
        monkeypatch.setattr(torch, "compile", compiling_raises(exc))
        out = runner.run_experiment("decode_step", s, tmp_path, **one)
        compiled = [r for r in out.rows if r["compiled"]]
        assert len(compiled) == 1 and compiled[0]["status"] == status and compiled[0]["error"] == text, compiled
        assert out.count("ok") == 1 and out.error is None  # the eager row, and the experiment went on
    assert model_runs.no_compiler(BackendCompilerFailed(InvalidCxxCompiler()))
    assert not model_runs.no_compiler(RuntimeError("Triton Error [CUDA]: an illegal memory access"))
    monkeypatch.setattr(torch, "compile", compiling_raises(BackendCompilerFailed(ValueError("a bug"))))
    out = runner.run_experiment("decode_step", s, tmp_path, **one)
    assert out.error.startswith("BackendCompilerFailed: backend='inductor' raised: ValueError: a bug")
    assert out.count("ok") == 1 and not out.clean


def test_decode_paths_stand_side_by_side() -> None:
    """Every batch eager and graphed; a compiled batch also compiled and compiled inside a graph, at 2K, next to them."""
    from inferlab.gpu.model_runs import DecodeSizes, decode_points

    z = DecodeSizes((1, 4), (512, 2048), (1, 64))
    assert decode_points(z, graphs=True, compiles=True) == [
        (512, 1, "eager"), (512, 1, "graph"), (512, 4, "eager"), (512, 4, "graph"),
        (2048, 1, "eager"), (2048, 1, "graph"), (2048, 1, "compiled"), (2048, 1, "graph+compiled"),
        (2048, 4, "eager"), (2048, 4, "graph"),
        (2048, 64, "eager"), (2048, 64, "graph"), (2048, 64, "compiled"), (2048, 64, "graph+compiled")]
    assert decode_points(z, graphs=False, compiles=True)[:4] == [(512, 1, "eager"), (512, 4, "eager"),
                                                                 (2048, 1, "eager"), (2048, 1, "compiled")]
    assert {p for *_, p in decode_points(z, graphs=True, compiles=False)} == {"eager", "graph"}
    assert decode_points(DecodeSizes((3,), (8, 17), (3,)), False, True) == [(8, 3, "eager"), (8, 3, "compiled"),
                                                                            (17, 3, "eager")]


def test_graph_and_compiled_rows_run_their_path(torch, monkeypatch) -> None:
    """Graphs forced on (CUDA's branch), torch.compile mocked: four rows per compiled batch, each timed its own way,
    one compile per (context, batch) shared by both compiled paths; a compile that fails fails both, compiled once."""
    from inferlab.gpu import model_runs
    from inferlab.gpu.settings import Settings

    compiles, timed = [], []

    def compile(fn, **kw):
        compiles.append(kw)
        return fn

    real_time = model_runs.median_time

    def median_time(fn, device, warmup, repeats, *, graph=False, flush=False):
        timed.append(graph)
        return real_time(fn, device, warmup, repeats, graph=graph, flush=flush)

    monkeypatch.setattr(Settings, "graphs", property(lambda self: True))
    monkeypatch.setattr(torch, "compile", compile)
    monkeypatch.setattr(model_runs, "median_time", median_time)
    s = settings_for("tiny", "cpu", compile=True, progress=False, repeats=1, warmup=0, card="h200")
    rows = list(model_runs.decode_step(s, model_runs.DecodeSizes((1, 3), (8,), (3,))))
    assert [(r["batch"], r["path"], r["cuda_graphs"], r["compiled"]) for r in rows] == [
        (1, "eager", False, False), (1, "graph", True, False), (3, "eager", False, False), (3, "graph", True, False),
        (3, "compiled", False, True), (3, "graph+compiled", True, True)]
    assert timed == [False, True, False, True, False, True]
    assert compiles == [dict(fullgraph=True, dynamic=False)]  # once, for both compiled paths of batch 3
    assert all(r["step_s"] > 0 and r["mbu"] > 0 and r.get("status", "ok") == "ok" for r in rows)

    class InvalidCxxCompiler(RuntimeError):
        pass

    def no_toolchain(fn, **kw):
        compiles.append(kw)

        def run():
            raise InvalidCxxCompiler("No working C compiler found")
        return run

    compiles.clear()
    monkeypatch.setattr(torch, "compile", no_toolchain)
    rows = list(model_runs.decode_step(s, model_runs.DecodeSizes((3,), (8,), (3,))))
    assert [(r["path"], r.get("status", "ok")) for r in rows] == [("eager", "ok"), ("graph", "ok"),
                                                                  ("compiled", "skipped"), ("graph+compiled", "skipped")]
    assert len(compiles) == 1 and all("No working C compiler" in r["error"] for r in rows[2:])


def test_decode_rows_without_a_path_column_are_read_from_their_flags() -> None:
    from inferlab.book.plot.gpu import decode_paths

    rows = pd.DataFrame({"cuda_graphs": [False, True, False, True], "compiled": [False, False, True, True]})
    assert list(decode_paths(rows)) == ["eager", "graph", "compiled", "graph+compiled"]
    assert list(decode_paths(rows.assign(path=["a", "b", "c", "d"]))) == ["a", "b", "c", "d"]


def test_the_gpu_cells_draw_every_path_and_the_in_place_kernel(tiny_records) -> None:
    """decode_step: a line per path, compiled ones included; paged_vs_contiguous: the in-place kernel against
    contiguous, no 'paged minus gather'; kv_formats: the kernel's rows, and the crossover from them."""
    from inferlab.book.plot import gpu as plot

    dec = pd.read_csv(tiny_records[0] / "cpu" / "decode_step.csv")
    extra = dec[dec["batch"] == 3].assign(path="graph+compiled", cuda_graphs=True, compiled=True)
    fig = plot.draw_decode(plot.CellData("decode_step", "recorded", pd.concat([dec, extra]), "x"))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "L=8, eager" in labels and "L=8, compiled + CUDA graphs" in labels
    pv = pd.read_csv(tiny_records[0] / "cpu" / "paged_vs_contiguous.csv")
    fig = plot.draw_paged(plot.CellData("paged_vs_contiguous", "recorded", pv, "x"))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:3] == ["paged, in place (Triton), L=37", "gather + SDPA, L=37", "contiguous, L=37"]
    assert not any("minus" in label for label in labels)
    kv = pd.read_csv(tiny_records[0] / "cpu" / "kv_formats.csv")
    fig = plot.draw_kv_formats(plot.CellData("kv_formats", "recorded", kv, "x"))
    assert fig.axes[0].get_title().startswith("crossover vs bf16 (in-kernel conversion)")


def test_settings_and_overrides(torch, tmp_path) -> None:
    from inferlab import gpu
    from inferlab.gpu.settings import Settings

    s = settings_for("tiny", "cpu")
    assert s.spec is TINY and s.block_size == 4 and not s.graphs and not s.compiles
    assert settings_for("full", "cuda").compiles and settings_for("full", "cuda").repeats == 10
    with pytest.raises(Exception):
        s.repeats = 3  # frozen
    with pytest.raises(ValueError, match="device"):
        Settings(device="tpu")
    with pytest.raises(ValueError, match="changes must be Settings fields"):
        settings_for("tiny", "cpu", batches=(1,))
    rows, _ = gpu.run("verify_cost", "tiny", device="cpu", out_dir=tmp_path, progress=False, positions=(2,), repeats=1)
    assert list(rows["positions"]) == [2]
    with pytest.raises(ValueError, match="overrides must be fields"):
        gpu.run("verify_cost", "tiny", device="cpu", out_dir=tmp_path, nope=1)
    with pytest.raises(ValueError, match="multiple of block_size"):
        gpu.run("verify_cost", "tiny", device="cpu", out_dir=tmp_path, progress=False, context=9)


def test_unknown_inputs_are_rejected(torch) -> None:
    from inferlab import gpu

    with pytest.raises(ValueError, match="name must be one of"):
        gpu.run("nope", "tiny", device="cpu")
    with pytest.raises(ValueError, match="preset"):
        gpu.run("decode_step", "huge", device="cpu")
    with pytest.raises(ValueError, match="card"):
        gdev.device_info("cpu", card="tpu")
    with pytest.raises(ValueError, match="model must be one of"):
        gpu.run("decode_step", "tiny", device="cpu", model="gpt-5", write=False)
    with pytest.raises(ValueError, match="attention must be one of"):
        gpu.run("decode_step", "tiny", device="cpu", attention="magic", write=False)


# ---- GPU cells ------------------------------------------------------------------------------------
CELL_CALLS = [("decode_step", None), ("decode_step", "mbu"), ("prefill_chunks", None), ("paged_vs_contiguous", None),
              ("kv_formats", None), ("host_copy", None), ("verify_cost", None), ("efficiency", None)]


@pytest.mark.parametrize("cell, view", CELL_CALLS)
def test_gpu_cell_without_a_gpu_says_so_in_one_line(cell: str, view: str | None, tmp_path, capsys) -> None:
    from matplotlib.figure import Figure

    from inferlab.book.plot.gpu import gpu_cell, no_gpu_reason

    if no_gpu_reason() is None:
        pytest.skip("this machine has a CUDA device: the cell would measure")
    fig = gpu_cell(cell, view, measured_dir=tmp_path, show_table=False)  # empty: the chapter's numbers or none
    out = capsys.readouterr().out.strip().splitlines()
    assert isinstance(fig, Figure) and len(out) == 1 and out[0].startswith("No GPU")
    assert ("published numbers" in out[0]) == (cell in ("decode_step", "prefill_chunks", "kv_formats", "verify_cost",
                                                        "efficiency"))


def test_verify_cost_is_drawn_from_zero() -> None:
    from inferlab.book.plot.gpu import gpu_cell

    ax = gpu_cell("verify_cost", measure=False, show_table=False).axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 1  # "about one decode step" against zero, not a 10 % zoom


@pytest.fixture(scope="module")
def measured(tiny_records, tmp_path_factory):
    """The tiny rows relabelled as a full CUDA run on an H200: what data/measured/ holds after a real run."""
    out = tmp_path_factory.mktemp("measured")
    for name in EXPERIMENTS:
        rows = pd.read_csv(tiny_records[0] / "cpu" / f"{name}.csv")
        (out / "h200").mkdir(exist_ok=True)
        rows.assign(device="cuda", preset="full", gpu="NVIDIA H200").to_csv(out / "h200" / f"{name}.csv", index=False)
    return out


@pytest.mark.parametrize("cell, view", CELL_CALLS)
def test_gpu_cell_shows_our_recorded_measurements(cell: str, view: str | None, measured, capsys) -> None:
    from inferlab.book.plot.gpu import gpu_cell

    fig = gpu_cell(cell, view, measure=False, measured_dir=measured)
    out = capsys.readouterr().out
    assert "our recorded measurement (NVIDIA H200," in out.splitlines()[0]
    assert len(fig.axes) >= 1 and any(ax.lines or ax.patches for ax in fig.axes)


def test_gpu_cell_rejects_unknown_cells_and_measuring_without_cuda(tmp_path) -> None:
    from inferlab.book.plot.gpu import gpu_cell, no_gpu_reason

    with pytest.raises(ValueError, match="cell must be one of"):
        gpu_cell("nope")
    with pytest.raises(ValueError, match="view must be one of"):
        gpu_cell("kv_formats", "mbu")
    if no_gpu_reason() is not None:
        with pytest.raises(ValueError, match="measure must be False"):
            gpu_cell("decode_step", measure=True, measured_dir=tmp_path)


def test_no_driver_means_no_torch_import(monkeypatch) -> None:
    """Without an NVIDIA driver the GPU cells answer without importing torch (it costs seconds)."""
    import sys

    from inferlab.gpu import device

    monkeypatch.setattr(device, "nvidia_driver_present", lambda: False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert device.cuda_available() is False and "torch" not in sys.modules
