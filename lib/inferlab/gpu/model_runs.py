"""Whole-model measurements: decode step against batch and context, prefill chunks, verifying k drafts.

Each function builds a model of ``model``'s shape with random weights (``TorchDecoder.random``),
as many layers as fit the device's free memory (the ``layers`` column says how many; bytes and
FLOP are those of the layers that ran), times with CUDA events after warm-up (median), and
returns one row per point with the roofline's prediction beside the measurement.
"""

from __future__ import annotations

import pandas as pd
from tqdm.auto import tqdm

from .. import roofline
from ..kernels.tiny_model import TinyConfig
from ..models import MODELS, ModelSpec
from .decoder import TorchDecoder
from .device import DeviceInfo, device_info, graphed, layer_bytes, median_time, scaled

TINY = TinyConfig(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, hidden_size=32, intermediate_size=64,
                  vocab_size=128).spec

REFERENCE_KV_TOKENS = 64 * 2048  # the chapter's largest batch point (Experiment 8-1): 64 requests x 2K context
DECODE_PRESETS = {
    "full": dict(batches=(1, 2, 4, 8, 16, 32, 64, 128, 256), contexts=(512, 2048, 8192), repeats=10,
                 compiled_batches=(1, 64)),
    "quick": dict(batches=(1, 4, 16, 64), contexts=(2048,), repeats=5, compiled_batches=()),
    "tiny": dict(batches=(1, 3), contexts=(5, 17), repeats=1, model=TINY, block_size=4),
}
PREFILL_PRESETS = {
    "full": dict(chunks=(256, 512, 1024, 2048), prompt_tokens=8192, repeats=5),
    "quick": dict(chunks=(512, 2048), prompt_tokens=8192, repeats=3),
    "tiny": dict(chunks=(4, 8), prompt_tokens=24, repeats=1, model=TINY, block_size=4),
}
VERIFY_PRESETS = {
    "full": dict(positions=(1, 2, 3, 4, 5, 6, 8, 12, 16), context=2048, repeats=10),
    "quick": dict(positions=(1, 2, 5, 8), context=2048, repeats=5),
    "tiny": dict(positions=(1, 3), context=9, repeats=1, model=TINY, block_size=4),
}


def _spec(model: str | ModelSpec) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)} or a ModelSpec, got {model!r}")
    return MODELS[model]


def _kv_bytes_per_token_layer(spec: ModelSpec, dtype_bytes: int) -> float:
    return spec.kv_bytes_per_token(dtype_bytes) / spec.n_layers


def plan(spec: ModelSpec, budget_bytes: float, kv_tokens: int, dtype_bytes: int = 2, n_layers: int | None = None,
         max_kv_tokens: int | None = None) -> tuple[int, int]:
    """(layers, KV-pool tokens) for ``budget_bytes``: every layer if they fit beside ``kv_tokens`` of KV, else fewer.

    The pool then takes all the memory the weights leave (at most ``max_kv_tokens``); points that
    need more KV are skipped by the caller. If one layer does not fit beside ``kv_tokens``, the
    pool shrinks to what one layer leaves.
    """
    fixed = (spec.embedding_params + spec.lm_head_params + spec.hidden_size) * dtype_bytes
    per_token_layer = spec.kv_bytes_per_token(dtype_bytes) / spec.n_layers
    per_layer = layer_bytes(spec, dtype_bytes) + kv_tokens * per_token_layer
    layers = n_layers or min(spec.n_layers, int((budget_bytes - fixed) // per_layer))
    layers = max(layers, 1)
    tokens = int((budget_bytes - fixed - layers * layer_bytes(spec, dtype_bytes)) // (layers * per_token_layer))
    if tokens < 1:
        raise ValueError(f"the device's free memory ({budget_bytes:.3g} B usable) must hold one layer of {spec.name}")
    return layers, min(tokens, max_kv_tokens or tokens)


def _setup(model: str | ModelSpec, device: str, card: str | None, kv_tokens: int, block_size: int, dtype: str,
           memory_fraction: float, n_layers: int | None, seed: int, max_kv_tokens: int | None = None):
    import torch

    info = device_info(device, card)
    spec = _spec(model)
    dtype_bytes = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    layers, pool_tokens = plan(spec, info.free_bytes * memory_fraction, kv_tokens, dtype_bytes, n_layers,
                               max_kv_tokens or kv_tokens)
    used = scaled(spec, layers)
    decoder = TorchDecoder.random(used, device, dtype, seed)
    kc, vc = decoder.new_cache(max(1, pool_tokens // block_size), block_size)
    return info, used, decoder, kc, vc, dtype_bytes


def _random_tables(n_seqs: int, blocks_each: int, num_blocks: int, device: str, seed: int):
    """Distinct, shuffled physical blocks for every sequence (no two rows share a block)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.randperm(num_blocks, generator=g)[: n_seqs * blocks_each]
    return perm.reshape(n_seqs, blocks_each).to(device)


def _peaks(info: DeviceInfo) -> tuple[float | None, float | None]:
    a = info.accelerator
    return (a.hbm_bandwidth, a.peak_bf16_flops) if a else (None, None)


def decode_step(model: str | ModelSpec = "qwen3-8b", batches: tuple[int, ...] = (1, 4, 16, 64),
                contexts: tuple[int, ...] = (2048,), cuda_graphs: tuple[bool, ...] | None = None,
                device: str = "cuda", card: str | None = None, block_size: int = 16, dtype: str = "bfloat16",
                memory_fraction: float = 0.8, n_layers: int | None = None, warmup: int = 3, repeats: int = 10,
                compiled_batches: tuple[int, ...] = (), seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Decode step time (s) against batch and context, with and without CUDA graphs; bandwidth and MBU against the roofline.

    Batches in ``compiled_batches`` are also run through ``torch.compile`` (fused elementwise kernels)
    inside a CUDA graph at the 2K context (or the first one): the fastest step this code offers
    (column ``compiled``).
    """
    import torch

    graphs = cuda_graphs if cuda_graphs is not None else ((False, True) if device == "cuda" else (False,))
    need = max(b * -(-L // block_size) * block_size for b in batches for L in contexts)
    reference = min(need, REFERENCE_KV_TOKENS)  # layers are dropped only to keep this much KV
    info, spec, dec, kc, vc, nb = _setup(model, device, card, reference, block_size, dtype, memory_fraction, n_layers,
                                         seed, max_kv_tokens=need)
    bw, peak = _peaks(info)
    points = [(L, b, g, False) for L in contexts for b in batches for g in graphs]
    ref_ctx = 2048 if 2048 in contexts else contexts[0]  # compiling takes a minute per shape: one context only
    points += [(ref_ctx, b, device == "cuda", True) for b in compiled_batches]
    rows = []
    for L, b, g, compiled in tqdm(points, desc="decode_step", disable=not progress):
        blocks_each = -(-L // block_size)
        if b * blocks_each > kc.shape[1]:
            print(f"decode_step: batch {b} x context {L} does not fit the KV pool here; skipped")
            continue
        tables = _random_tables(b, blocks_each, kc.shape[1], device, seed + b)
        lens = torch.full((b,), L, device=device, dtype=torch.long)
        tokens = torch.randint(0, spec.vocab_size, (b,), device=device)
        full = L % block_size == 0  # every row fills its blocks: no attention mask
        step = lambda: dec.decode(tokens, tables, lens, kc, vc, full)  # noqa: E731
        if compiled:
            try:
                step = torch.compile(step, fullgraph=True, dynamic=False)
                step()  # compile now, inside the try
                fn = graphed(step, device) if g else step
            except Exception as exc:  # no compiler toolchain here: say so, keep the other rows
                print(f"decode_step: torch.compile failed for batch {b} ({type(exc).__name__}); skipped")
                continue
        else:
            fn = graphed(step, device) if g else step
        t = median_time(fn, device, warmup, repeats)
        read = roofline.step_read_bytes(b, L, spec.matrix_weight_bytes(nb), spec.kv_bytes_per_token(nb))
        flops = b * spec.flops(1, L - 1, logits=1)
        rows.append(dict(model=spec.name, layers=spec.n_layers, batch=b, context=L, cuda_graphs=g,
                         compiled=compiled, step_s=t,
                         read_bytes=read, achieved_Bps=read / t, flops=flops, achieved_flops=flops / t,
                         mbu=read / t / bw if bw else None, mfu=flops / t / peak if peak else None,
                         predicted_s=roofline.step_time(b, flops / b, L, spec.matrix_weight_bytes(nb),
                                                        spec.kv_bytes_per_token(nb), peak, bw) if bw else None))
        del fn
    return pd.DataFrame(rows)


def prefill_chunks(model: str | ModelSpec = "qwen3-8b", chunks: tuple[int, ...] = (512, 2048), prompt_tokens: int = 8192,
                   device: str = "cuda", card: str | None = None, block_size: int = 16, dtype: str = "bfloat16",
                   memory_fraction: float = 0.8, n_layers: int | None = None, warmup: int = 2, repeats: int = 5,
                   seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Time (s) of one prefill chunk after 0 ... prompt - chunk cached tokens (no logits, as the chapter's footnote 6); MFU."""
    import torch

    info, spec, dec, kc, vc, nb = _setup(model, device, card, prompt_tokens, block_size, dtype, memory_fraction,
                                         n_layers, seed)
    bw, peak = _peaks(info)
    if kc.shape[1] * block_size < prompt_tokens:
        raise ValueError(f"prompt_tokens ({prompt_tokens}) must fit the KV pool this device leaves "
                         f"({kc.shape[1] * block_size} tokens)")
    table = _random_tables(1, -(-prompt_tokens // block_size), kc.shape[1], device, seed)[0]
    kc.normal_(), vc.normal_()  # a history with real numbers in it
    points = []
    for c in chunks:
        if c > prompt_tokens:
            raise ValueError(f"chunks must not exceed prompt_tokens ({prompt_tokens}), got {c}")
        last = (prompt_tokens // c - 1) * c
        points += [(c, h, "first" if h == 0 else "last" if h == last else "middle")
                   for h in sorted({0, last // 2 // c * c, last})]
    rows = []
    for c, h, where in tqdm(points, desc="prefill_chunks", disable=not progress):
        tokens = torch.randint(0, spec.vocab_size, (c,), device=device)
        t = median_time(lambda: dec.chunk(tokens, h, table, kc, vc, logits="none"), device, warmup, repeats)
        flops = spec.flops(c, h)
        rows.append(dict(model=spec.name, layers=spec.n_layers, chunk=c, cached=h, position=where, time_s=t,
                         flops=flops, achieved_flops=flops / t, mfu=flops / t / peak if peak else None,
                         predicted_s=max(flops / peak, spec.matrix_weight_bytes(nb) / bw) if peak else None))
    return pd.DataFrame(rows)


def verify_cost(model: str | ModelSpec = "qwen3-8b", positions: tuple[int, ...] = (1, 2, 5, 8), context: int = 2048,
                device: str = "cuda", card: str | None = None, block_size: int = 16, dtype: str = "bfloat16",
                cuda_graphs: bool | None = None, memory_fraction: float = 0.8, n_layers: int | None = None,
                warmup: int = 3, repeats: int = 10, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Time (s) of verifying k positions (logits for each) after ``context`` tokens, against one decode step (batch 1)."""
    import torch

    graphs = (device == "cuda") if cuda_graphs is None else cuda_graphs
    info, spec, dec, kc, vc, nb = _setup(model, device, card, context + max(positions) + block_size, block_size, dtype,
                                         memory_fraction, n_layers, seed)
    bw, peak = _peaks(info)
    blocks_each = -(-(context + max(positions)) // block_size)
    table = _random_tables(1, blocks_each, kc.shape[1], device, seed)
    lens = torch.tensor([context + 1], device=device)
    tok = torch.randint(0, spec.vocab_size, (1,), device=device)
    step = lambda: dec.decode(tok, table, lens, kc, vc, context + 1 == blocks_each * block_size)  # noqa: E731
    decode_s = median_time(graphed(step, device) if graphs else step, device, warmup, repeats)
    rows = []
    for k in tqdm(positions, desc="verify_cost", disable=not progress):
        tokens = torch.randint(0, spec.vocab_size, (k,), device=device)
        fn = lambda: dec.chunk(tokens, context, table[0], kc, vc, logits="all")  # noqa: E731
        t = median_time(graphed(fn, device) if graphs else fn, device, warmup, repeats)
        flops = spec.flops(k, context, logits=k)
        rows.append(dict(model=spec.name, layers=spec.n_layers, positions=k, context=context, cuda_graphs=graphs,
                         time_s=t, decode_s=decode_s, ratio=t / decode_s, flops=flops,
                         predicted_s=roofline.step_time(1, flops, context, spec.matrix_weight_bytes(nb),
                                                        spec.kv_bytes_per_token(nb), peak, bw) if bw else None))
    return pd.DataFrame(rows)


def attainable_mbu(rows: pd.DataFrame) -> float:
    """Best MBU of batch-1 decode with CUDA graphs in a decode_step record (the book asks for at least 70 %)."""
    sel = rows[(rows["batch"] == 1) & rows["cuda_graphs"].astype(bool)]  # compiled or not
    if sel.empty or sel["mbu"].isna().all():
        raise ValueError("rows must hold batch-1 CUDA-graph decode steps on a card with known peaks")
    return float(sel["mbu"].max())


