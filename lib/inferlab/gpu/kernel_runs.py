"""Attention-only measurements: paged against contiguous K/V (8.3.1), and BF16 / FP8 / q8_0 KV with dequantization (8.4.2).

Both run one layer's decode attention with Qwen3-8B's heads (32 query, 8 KV, head_dim 128) for
a batch of sequences. The KV codecs here are torch versions of ``inferlab.compression``'s (q8_0 byte for
byte: fp16 scale = max|x|/127 per 32 values, codes rounded half away from zero; FP8 e4m3 with a
per-tensor scale max|x|/448); the compressed KV is dequantized to the compute dtype before
attention, and that conversion is timed as part of the step (the T_c of section 8.4.2).

One layer's attention takes microseconds, less than launching it from Python: every time here
is a CUDA-graph replay with the L2 cache flushed before it (``timing.median_time``). The paged
rows run ``Settings.attention`` (``attention.DECODE_ATTENTION``: ``gather``, the gather + SDPA reference,
or ``paged``, the in-place Triton kernel) against contiguous attention (SDPA over one contiguous K/V
buffer per sequence); each row names the attention that ran (``attention_ran``), and SDPA's backend
is pinned per point and recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .._validate import one_of
from ..compression import FP8_E4M3_MAX, block_format
from .attention import contiguous_attention, decode_attention, gather_blocks, pick_sdpa_backend, pinned
from .device import DeviceInfo, device_info
from .settings import Settings
from .timing import L2Flush, median_time

@dataclass(frozen=True)
class PagedSizes:
    """Points of ``paged_vs_contiguous``: each context with contiguous K/V and with each block size; the heads."""

    batch: int = 32
    contexts: tuple[int, ...] = (4096,)
    block_sizes: tuple[int, ...] = (8, 16, 32, 64)
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128


@dataclass(frozen=True)
class KVSizes:
    """Points of ``kv_formats``: each context in each KV format; the heads."""

    batch: int = 16
    contexts: tuple[int, ...] = (2048, 8192, 32768)
    formats: tuple[str, ...] = ("bf16", "fp8", "q8_0")
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128


PAGED_PRESETS = {
    "full": PagedSizes(32, (1024, 4096, 16384), (8, 16, 32, 64)),
    "quick": PagedSizes(32, (4096,), (8, 16, 32, 64)),
    "tiny": PagedSizes(3, (37,), (1, 4, 16), n_heads=4, n_kv_heads=2, head_dim=16),  # 37: partial blocks too
}
KV_PRESETS = {
    "full": KVSizes(16, (1024, 2048, 4096, 8192, 16384, 32768)),
    "quick": KVSizes(16, (2048, 8192, 32768)),
    "tiny": KVSizes(2, (32, 64), n_heads=4, n_kv_heads=2, head_dim=64),
}
PAGED_COLUMNS = ("layout", "attention_ran", "block_size", "batch", "context", "time_s", "gather_s", "max_abs_diff",
                 "kv_bytes", "achieved_Bps", "predicted_s")
KV_COLUMNS = ("format", "batch", "context", "time_s", "dequant_s", "kv_bytes", "predicted_s")
#: Stored bytes per K or V value in each format this experiment runs (q8_0: its codes and fp16 scale per 32 values).
KV_STORED_BYTES = {"bf16": 2.0, "fp8": 1.0, "q8_0": block_format("q8_0").bits_per_value / 8}


# ---- codecs ---------------------------------------------------------------------------------------
def q8_0_encode(x: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:  # noqa: F821
    """q8_0 of the last axis (a multiple of 32): int8 codes like ``x`` and fp16 scales ``[..., n/32]``."""
    import torch

    if x.shape[-1] % 32:
        raise ValueError(f"x must have a last axis that is a multiple of 32, got shape {tuple(x.shape)}")
    b = x.float().reshape(*x.shape[:-1], -1, 32)
    d = b.abs().amax(dim=-1, keepdim=True) / 127
    inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
    v = b * inv
    frac = (v - v.trunc()).abs()
    q = torch.where(frac == 0.5, v.trunc() + v.sign(), torch.round(v))  # C roundf: halves away from zero
    return q.to(torch.int8).reshape(x.shape), d.squeeze(-1).half()


def q8_0_decode(codes: "torch.Tensor", scales: "torch.Tensor", dtype: "torch.dtype | None" = None) -> "torch.Tensor":  # noqa: F821
    """Values of q8_0 codes times their scales, computed in ``dtype`` (float32 by default)."""
    import torch

    dt = dtype or torch.float32
    v = codes.reshape(*codes.shape[:-1], -1, 32).to(dt) * scales.to(dt)[..., None]
    return v.reshape(codes.shape)


def fp8_encode(x: "torch.Tensor") -> tuple["torch.Tensor", float]:  # noqa: F821
    """FP8 e4m3fn codes of x / s with the per-tensor scale s = max|x| / 448 (1 for all zeros)."""
    import torch

    amax = float(x.abs().max()) if x.numel() else 0.0
    s = amax / FP8_E4M3_MAX if amax > 0 else 1.0
    return (x.float() / s).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn), s


def fp8_decode(codes: "torch.Tensor", scale: float, dtype: "torch.dtype | None" = None) -> "torch.Tensor":  # noqa: F821
    """Values of FP8 codes times ``scale``, computed in ``dtype`` (float32 by default)."""
    import torch

    return codes.to(dtype or torch.float32) * scale


# ---- experiments ----------------------------------------------------------------------------------
def _qkv(batch: int, ctx: int, z: "PagedSizes | KVSizes", device: str, dtype: str, seed: int):
    """Random q ``[batch, heads, d]`` and K, V ``[batch, ctx, kv, d]``, drawn on the device (a GB on the host is seconds)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    q = torch.randn(batch, z.n_heads, z.head_dim, generator=g, device=device, dtype=dt)
    k = torch.randn(batch, ctx, z.n_kv_heads, z.head_dim, generator=g, device=device, dtype=dt)
    v = torch.randn(batch, ctx, z.n_kv_heads, z.head_dim, generator=g, device=device, dtype=dt)
    return q, k, v


def _timed(fn: Callable[[], object], s: Settings, flush, uses_sdpa: bool = True) -> tuple[float, str | None]:
    """Seconds of ``fn`` (graph replays, L2 flushed) under the SDPA backend pinned for it, and that backend."""
    backend = pick_sdpa_backend(fn, s.device) if uses_sdpa else None
    return median_time(pinned(fn, backend), s.device, s.warmup, s.repeats, graph=s.graphs, flush=flush), backend


def _max_abs_diff(a: "torch.Tensor", b: "torch.Tensor") -> float:  # noqa: F821
    """Largest |a - b|, computed in float32."""
    return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0


def paged_vs_contiguous(s: Settings, z: PagedSizes = PagedSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Decode attention time (s) over K/V in shuffled blocks of each size (``Settings.attention``), and over contiguous K/V.

    Each row names the attention that ran (``attention_ran``: ``contiguous`` for SDPA over one
    contiguous K/V buffer per sequence, else ``Settings.attention``). ``gather_s`` is the gather alone,
    timed for an attention that gathers (0 for one that reads the blocks in place). ``max_abs_diff``
    is the largest difference of the row's output from the gather path's (``DECODE_ATTENTION["gather"]``)
    over the same K/V: the contiguous row is that path with one block per sequence.
    """
    import torch

    info = info or device_info(s.device, s.card)
    bw = info.accelerator.hbm_bandwidth if info.accelerator else None
    attention, reference = decode_attention(s.attention), decode_attention("gather")
    flush = L2Flush(s.device) if s.flush_l2 else False
    points = [(L, p) for L in z.contexts for p in (0, *z.block_sizes)]
    for L, p in tqdm(points, desc="paged_vs_contiguous", disable=not s.progress):
        if p == 0:  # one context's q, K, V for all its layouts
            q, k, v = _qkv(z.batch, L, z, s.device, s.dtype, s.seed)
        lens = torch.full((z.batch,), L, device=s.device, dtype=torch.int32)  # int32, as the Triton kernel takes
        full = L % max(p, 1) == 0  # contexts that fill their blocks need no mask (flash attention)
        kv_bytes = 2 * k.numel() * k.element_size()
        common = dict(batch=z.batch, context=L, kv_bytes=kv_bytes, predicted_s=kv_bytes / bw if bw else None)
        if p == 0:
            t, backend = _timed(lambda: contiguous_attention(q, k, v), s, flush)
            one_block = torch.arange(z.batch, device=s.device)[:, None]  # sequence b's K/V is block b, of L tokens
            want = reference.fn(q, k, v, one_block, lens, full_blocks=True)
            diff = _max_abs_diff(pinned(lambda: contiguous_attention(q, k, v), backend)(), want)
            yield dict(layout="contiguous", attention_ran="contiguous", block_size=L, time_s=t, gather_s=0.0,
                       max_abs_diff=diff, achieved_Bps=kv_bytes / t, backend=backend, **common)
            continue
        m = -(-L // p)
        num_blocks = z.batch * m
        perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(s.seed + p)).to(s.device)
        tables = perm.reshape(z.batch, m).to(torch.int32)
        kc = torch.zeros(num_blocks, p, z.n_kv_heads, z.head_dim, device=s.device, dtype=k.dtype)
        vc = torch.zeros_like(kc)
        pad = m * p - L
        kp = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad)).reshape(z.batch * m, p, z.n_kv_heads, z.head_dim)
        vp = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad)).reshape(z.batch * m, p, z.n_kv_heads, z.head_dim)
        kc[perm], vc[perm] = kp, vp  # row b's block j lives at physical block tables[b, j]
        del kp, vp
        t, backend = _timed(lambda: attention.fn(q, kc, vc, tables, lens, full_blocks=full), s, flush, attention.sdpa)
        tg = 0.0 if attention.in_place else median_time(
            lambda: (gather_blocks(kc, tables), gather_blocks(vc, tables)), s.device, s.warmup, s.repeats,
            graph=s.graphs, flush=flush)
        got = pinned(lambda: attention.fn(q, kc, vc, tables, lens, full_blocks=full), backend)()
        diff = _max_abs_diff(got, reference.fn(q, kc, vc, tables, lens, full_blocks=full))
        yield dict(layout="paged", attention_ran=s.attention, block_size=p, time_s=t, gather_s=tg,
                   max_abs_diff=diff, achieved_Bps=kv_bytes / t, backend=backend or s.attention, **common)


def kv_formats(s: Settings, z: KVSizes = KVSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Decode attention time (s) over KV stored as BF16, FP8 or q8_0, dequantization included; bytes read per format."""
    import torch

    for f in z.formats:
        one_of("formats[i]", f, KV_STORED_BYTES)
    info = info or device_info(s.device, s.card)
    bw = info.accelerator.hbm_bandwidth if info.accelerator else None
    dt = getattr(torch, s.dtype)
    flush = L2Flush(s.device) if s.flush_l2 else False
    for L, f in tqdm([(L, f) for L in z.contexts for f in z.formats], desc="kv_formats", disable=not s.progress):
        if f == z.formats[0]:  # every sequence has all L tokens: no mask
            q, k, v = _qkv(z.batch, L, z, s.device, s.dtype, s.seed)
        if f == "bf16":
            deq = lambda: (k, v)  # noqa: E731
        elif f == "fp8":
            (kq, ks), (vq, vs) = fp8_encode(k), fp8_encode(v)
            deq = lambda: (fp8_decode(kq, ks, dt), fp8_decode(vq, vs, dt))  # noqa: E731
        else:
            (kq, ks), (vq, vs) = q8_0_encode(k), q8_0_encode(v)
            deq = lambda: (q8_0_decode(kq, ks, dt), q8_0_decode(vq, vs, dt))  # noqa: E731
        t, backend = _timed(lambda: contiguous_attention(q, *deq()), s, flush)
        t_deq = median_time(deq, s.device, s.warmup, s.repeats, graph=s.graphs, flush=flush) if f != "bf16" else 0.0
        kv_bytes = 2 * z.batch * L * z.n_kv_heads * z.head_dim * KV_STORED_BYTES[f]
        yield dict(format=f, batch=z.batch, context=L, time_s=t, dequant_s=t_deq, kv_bytes=kv_bytes,
                   predicted_s=kv_bytes / bw if bw else None, backend=backend)


def crossover(rows: pd.DataFrame, baseline: str = "bf16", time_column: str = "time_s") -> pd.DataFrame:
    """Straight-line fits time = fixed + per_token x context per format, and the context where each beats ``baseline``.

    ``crossover_tokens`` is (fixed_f - fixed_base) / (per_token_base - per_token_f); inf where the format
    never pays (its per-token slope is not smaller), 0 where it is never slower.
    """
    need = {"format", "context", time_column}
    if not need <= set(rows.columns):
        raise ValueError(f"rows must have columns {sorted(need)}, got {sorted(rows.columns)}")
    fits = {}
    for f, grp in rows.groupby("format"):
        if grp["context"].nunique() < 2:
            raise ValueError(f"rows must hold at least two contexts per format; {f!r} has {grp['context'].nunique()}")
        slope, fixed = np.polyfit(grp["context"].astype(float), grp[time_column].astype(float), 1)
        fits[f] = (fixed, slope)
    if baseline not in fits:
        raise ValueError(f"baseline must be one of {sorted(fits)}, got {baseline!r}")
    a0, b0 = fits[baseline]
    out = []
    for f, (a, b) in fits.items():
        if f == baseline:
            continue
        if b >= b0:
            x = math.inf if a > a0 or b > b0 else 0.0
        else:
            x = max((a - a0) / (b0 - b), 0.0)
        out.append(dict(format=f, fixed_s=a, per_token_s=b, crossover_tokens=x))
    return pd.DataFrame([dict(format=baseline, fixed_s=a0, per_token_s=b0, crossover_tokens=0.0), *out])
