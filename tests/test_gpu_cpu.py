"""The GPU measurement code run on the CPU at tiny sizes: results are checked, times are not.

Tests that need torch take the ``torch`` fixture, which uses ``pytest.importorskip`` only as a
guard for readers without torch; CI installs torch 2.13.0 (CPU build), so there they all run.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from inferlab import kernels
from inferlab.compression import formats
from inferlab.gpu import EXPERIMENTS
from inferlab.gpu import device as gdev
from inferlab.gpu.kernel_runs import crossover
from inferlab.gpu.model_runs import TINY, plan
from inferlab.kernels import TinyConfig, TinyQwen3
from inferlab.kvcache import BlockManager
from inferlab.models import MODELS
from inferlab.units import GiB

QWEN = MODELS["qwen3-8b"]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


# ---- without torch ----------------------------------------------------------------------------
def test_importing_gpu_modules_does_not_import_torch() -> None:
    code = ("import sys, inferlab.gpu, inferlab.gpu.model_runs, inferlab.gpu.kernel_runs, inferlab.gpu.transfer, "
            "inferlab.book.plot.gpu; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_card_names_map_to_hardware_keys() -> None:
    assert gdev.card_key("NVIDIA H200") == "h200"
    assert gdev.card_key("NVIDIA GH200 480GB") == "gh200"
    assert gdev.card_key("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert gdev.card_key("NVIDIA RTX PRO 6000 Blackwell Workstation Edition") == "rtx-pro-6000"
    assert gdev.card_key("NVIDIA GeForce RTX 4090") is None
    assert gdev.slug("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090"


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
    assert gdev.recorded("decode_step", tmp_path) is None


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
    from inferlab.gpu.decoder import gather_blocks, paged_attention

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


@pytest.fixture(scope="module")
def tiny_records(torch, tmp_path_factory):
    """Every experiment run once at tiny size on the CPU (peaks of the H200 for the efficiency columns)."""
    from inferlab import gpu

    out = tmp_path_factory.mktemp("measured")
    runs = {name: gpu.run(name, "tiny", device="cpu", card="h200", out_dir=out, progress=False) for name in EXPERIMENTS}
    return out, runs


def test_every_experiment_runs_on_the_cpu_and_records(torch, tiny_records) -> None:
    tmp_path, runs = tiny_records
    for name, (rows, path) in runs.items():
        assert len(rows) >= 2 and path == tmp_path / "cpu" / f"{name}.csv"
        back = pd.read_csv(path)
        assert {"gpu", "driver", "torch", "date", "peak_hbm_bandwidth_Bps", "peak_bf16_flops"} <= set(back.columns)
        assert back["torch"].iloc[0] == torch.__version__ and back["card"].iloc[0] == "h200"
        time_col = "step_s" if name == "decode_step" else "time_s"
        assert (rows[time_col] > 0).all()  # CPU times prove the code ran; they are not asserted further
    dec = pd.read_csv(tmp_path / "cpu" / "decode_step.csv")
    assert set(dec["batch"]) == {1, 3} and set(dec["context"]) == {5, 17}
    assert np.allclose(dec["mbu"], dec["read_bytes"] / dec["step_s"] / 4.8e12)
    pre = pd.read_csv(tmp_path / "cpu" / "prefill_chunks.csv")
    assert {"first", "last"} <= set(pre["position"])
    assert (pre.loc[pre["position"] == "last", "cached"] + pre.loc[pre["position"] == "last", "chunk"] == 24).all()
    assert (pre["flops"] == [TINY.flops(c, h) for c, h in zip(pre["chunk"], pre["cached"])]).all()
    kv = pd.read_csv(tmp_path / "cpu" / "kv_formats.csv")
    assert set(kv["format"]) == {"bf16", "fp8", "q8_0"}
    assert crossover(kv).shape[0] == 3
    host = pd.read_csv(tmp_path / "cpu" / "host_copy.csv")
    assert set(host["kind"]) >= {"pageable", "resident", "1 buffer", "2 buffers"}
    assert gdev.recorded("verify_cost", tmp_path)[1] == tmp_path / "cpu" / "verify_cost.csv"


def test_attainable_mbu_needs_graph_rows(torch) -> None:
    from inferlab.gpu.model_runs import attainable_mbu

    rows = pd.DataFrame({"batch": [1, 1, 4], "cuda_graphs": [False, True, True], "mbu": [0.4, 0.75, 0.8]})
    assert attainable_mbu(rows) == 0.75
    with pytest.raises(ValueError, match="batch-1"):
        attainable_mbu(rows[~rows["cuda_graphs"]])


def test_command_line(torch, tmp_path, capsys) -> None:
    from inferlab.gpu.__main__ import main

    assert main(["verify_cost", "--tiny", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "cpu" / "verify_cost.csv").exists()
    assert main(["decode_step", "--device", "cpu"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


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


@pytest.mark.parametrize("cell, view", CELL_CALLS)
def test_gpu_cell_shows_our_recorded_measurements(cell: str, view: str | None, tiny_records, capsys) -> None:
    from inferlab.book.plot.gpu import gpu_cell

    fig = gpu_cell(cell, view, measure=False, measured_dir=tiny_records[0])
    out = capsys.readouterr().out
    assert "our recorded measurement (cpu," in out.splitlines()[0]
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
