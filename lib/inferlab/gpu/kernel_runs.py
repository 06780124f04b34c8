"""Attention-only measurements: paged against contiguous K/V (8.3.1), and BF16 / FP8 / q8_0 KV (8.4.2).

Both run one layer's decode attention with Qwen3-8B's heads (32 query, 8 KV, head_dim 128) for
a batch of sequences. One layer's attention takes microseconds, less than launching it from
Python: every time here is a CUDA-graph replay with the L2 cache flushed before it
(``timing.median_time``). Each row names the attention that ran (``attention_ran``) and SDPA's
backend where SDPA ran (pinned per point); a point that raises yields a failed row with the
error and the experiment goes on; a point that cannot run here (the Triton kernel on the CPU
without its interpreter) yields a skipped row saying why.

``paged_vs_contiguous`` runs each attention of ``PagedSizes.attentions`` over K/V in shuffled
blocks of each size: ``paged``, the in-place Triton kernel (``inferlab.kernels.triton_paged``),
and ``gather``, the gather + SDPA reference; beside them SDPA over one contiguous K/V buffer per
sequence (``contiguous``).

``kv_formats`` stores K/V as BF16, FP8 e4m3 (per-tensor scale max|x|/448, as
``inferlab.compression.fp8_e4m3_encode``) or q8_0 (fp16 scale max|x|/127 per 32 values along
head_dim, codes rounded half away from zero: ``inferlab.compression``'s byte for byte) and runs

- ``paged``: the Triton kernel over the stored bytes in shuffled blocks of ``Settings.block_size``,
  converting each tile in registers after the load (``kv_format``): it reads 1 (FP8) or 34/32
  (q8_0) bytes per value instead of 2, so this is the row that can show compression paying;
- ``sdpa``: the contiguous K/V first dequantized into a full copy in the compute dtype, then
  SDPA (the conversion is inside ``time_s`` and alone in ``dequant_s``): it reads the stored
  bytes, writes and reads the copy, so a compressed format can only lose here. It is kept as the
  contrast: where the conversion happens decides whether fewer stored bytes mean less time.

What ``kv_formats`` can and cannot show: it measures one layer's attention alone, so its
crossover (``crossover``: where a format's straight line t = fixed + per_token x context drops
below BF16's) is that of the attention kernel, not of a whole decode step. A whole step also
reads every weight once (about 16 GB for Qwen3-8B, a fixed cost that does not shrink with the
KV format), so the chapter's 7,000-token fit of whole-model time per token cannot be reproduced
from these rows; they show whether, and from which context, reading fewer KV bytes with the
conversion inside the kernel makes attention itself faster on this card. The FP8 scale is one
per tensor, computed from the data (a server calibrates it); the kernel is ours (integer bit
operations for FP8, which any CUDA GPU runs), not a production FP8 kernel.
"""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .._validate import one_of
from ..compression import FP8_E4M3_MAX, block_format
from .attention import (attention_unavailable, contiguous_attention, decode_attention, gather_blocks,
                        pick_sdpa_backend, pinned, triton_paged_attention)
from .device import DeviceInfo, device_info, release
from .records import failed, skipped
from .settings import Settings
from .timing import L2Flush, median_time

@dataclass(frozen=True)
class PagedSizes:
    """Points of ``paged_vs_contiguous``: each context with contiguous K/V, and with each block size through each attention."""

    batch: int = 32
    contexts: tuple[int, ...] = (4096,)
    block_sizes: tuple[int, ...] = (8, 16, 32, 64)
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    attentions: tuple[str, ...] = ("paged", "gather")  # attention.DECODE_ATTENTION names


@dataclass(frozen=True)
class KVSizes:
    """Points of ``kv_formats``: each context in each KV format through each attention; the heads."""

    batch: int = 16
    contexts: tuple[int, ...] = (2048, 8192, 32768)
    formats: tuple[str, ...] = ("bf16", "fp8", "q8_0")
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    attentions: tuple[str, ...] = ("paged", "sdpa")  # KV_ATTENTIONS


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
KV_COLUMNS = ("format", "attention_ran", "block_size", "batch", "context", "time_s", "dequant_s", "kv_bytes",
              "read_bytes", "max_abs_diff", "predicted_s")
#: Stored bytes per K or V value in each format this experiment runs (q8_0: its codes and fp16 scale per 32 values).
KV_STORED_BYTES = {"bf16": 2.0, "fp8": 1.0, "q8_0": block_format("q8_0").bits_per_value / 8}
#: How ``kv_formats`` attends: the Triton kernel converting in registers, or SDPA over a dequantized copy.
KV_ATTENTIONS = ("paged", "sdpa")
#: The Triton kernel's name of each format's storage (``inferlab.kernels.triton_paged.KV_FORMATS``).
_KERNEL_FORMAT = {"bf16": "same", "fp8": "fp8", "q8_0": "q8_0"}


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


#: Largest ``max_abs_diff`` of a correct output in each compute dtype (outputs are averages of N(0, 1) values;
#: bfloat16's rounding of q, K and the weights gives about 0.01): above it, or NaN, a row is failed as wrong.
MAX_ABS_DIFF = {"float32": 1e-3, "float16": 0.02, "bfloat16": 0.1}


def _point(fields: dict, measure: Callable[[], dict], device: str, dtype: str | None = None) -> dict:
    """``fields`` with ``measure()``'s columns; if it raises, a failed row with the error (printed with its traceback).

    The experiment goes on after a failed point: on a first GPU run one kernel that does not compile, or
    runs out of memory, must not lose the points after it. With ``dtype``, a row whose ``max_abs_diff``
    is NaN or above ``MAX_ABS_DIFF[dtype]`` keeps its times but is failed: a fast wrong kernel is not a result.
    """
    try:
        row = {**fields, **measure()}
        diff = row.get("max_abs_diff")
        if dtype is not None and diff is not None and not diff <= MAX_ABS_DIFF[dtype]:
            return {**row, "status": "failed", "error": f"wrong output: max_abs_diff {diff:.3g} from the reference "
                                                        f"is above {MAX_ABS_DIFF[dtype]:g} for {dtype}"}
        return row
    except Exception as exc:
        row = failed(fields, exc)
        print(f"point {fields} failed:\n{traceback.format_exc()}", file=sys.stderr)
    release(device)  # after the except block, which held the failed frames and their tensors
    return row


def _paged_pool(x: "torch.Tensor", block_size: int, perm: "torch.Tensor") -> "torch.Tensor":  # noqa: F821
    """``x`` ``[batch, L, ...]`` as a pool of blocks ``[batch * m, block_size, ...]``: row b's block j at ``perm[b m + j]``."""
    import torch

    b, L = x.shape[:2]
    m = -(-L // block_size)
    if m * block_size > L:  # the tail of each row's last block: zeros, never read
        x = torch.cat([x, torch.zeros((b, m * block_size - L, *x.shape[2:]), dtype=x.dtype, device=x.device)], 1)
    pool = torch.empty((b * m, block_size, *x.shape[2:]), dtype=x.dtype, device=x.device)
    pool[perm] = x.reshape(b * m, block_size, *x.shape[2:])
    return pool


def _shuffled(batch: int, L: int, block_size: int, device: str, seed: int) -> tuple["torch.Tensor", "torch.Tensor"]:  # noqa: F821
    """A permutation of the batch x ceil(L / block_size) blocks, and the block tables it makes (int32)."""
    import torch

    m = -(-L // block_size)
    perm = torch.randperm(batch * m, generator=torch.Generator().manual_seed(seed)).to(device)
    return perm, perm.reshape(batch, m).to(torch.int32)


def paged_vs_contiguous(s: Settings, z: PagedSizes = PagedSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Decode attention time (s) over K/V in shuffled blocks of each size, through each of ``z.attentions``, and contiguous.

    Each row names the attention that ran (``attention_ran``): ``contiguous`` for SDPA over one
    contiguous K/V buffer per sequence, else a ``DECODE_ATTENTION`` name (``paged``: the Triton kernel
    reading the blocks in place; ``gather``: the blocks copied into a contiguous tensor, then SDPA).
    ``gather_s`` is the gather alone, timed for an attention that gathers (0 for one that reads the
    blocks in place). ``max_abs_diff`` is the largest difference of the row's output from the gather
    path's over the same K/V: the contiguous row is that path with one block per sequence; above
    ``MAX_ABS_DIFF`` the row is failed.
    """
    import torch

    attentions = {a: decode_attention(a) for a in z.attentions}
    reference = decode_attention("gather")
    info = info or device_info(s.device, s.card)
    bw = info.accelerator.hbm_bandwidth if info.accelerator else None
    flush = L2Flush(s.device) if s.flush_l2 else False
    bar = tqdm(total=len(z.contexts) * (1 + len(z.block_sizes) * len(attentions)), desc="paged_vs_contiguous",
               disable=not s.progress)
    for L in z.contexts:
        q, k, v = _qkv(z.batch, L, z, s.device, s.dtype, s.seed)
        lens = torch.full((z.batch,), L, device=s.device, dtype=torch.int32)  # int32, as the Triton kernel takes
        kv_bytes = 2 * k.numel() * k.element_size()
        common = dict(batch=z.batch, context=L, kv_bytes=kv_bytes, predicted_s=kv_bytes / bw if bw else None)

        def contiguous() -> dict:
            t, backend = _timed(lambda: contiguous_attention(q, k, v), s, flush)
            one_block = torch.arange(z.batch, device=s.device)[:, None]  # sequence b's K/V is block b, of L tokens
            want = reference.fn(q, k, v, one_block, lens, full_blocks=True)
            diff = _max_abs_diff(pinned(lambda: contiguous_attention(q, k, v), backend)(), want)
            return dict(time_s=t, gather_s=0.0, max_abs_diff=diff, achieved_Bps=kv_bytes / t, backend=backend)

        yield _point(dict(layout="contiguous", attention_ran="contiguous", block_size=L, **common), contiguous,
                     s.device, s.dtype)
        bar.update()
        for p in z.block_sizes:
            perm, tables = _shuffled(z.batch, L, p, s.device, s.seed + p)
            kc, vc = _paged_pool(k, p, perm), _paged_pool(v, p, perm)  # row b's block j at tables[b, j]
            full = L % p == 0  # contexts that fill their blocks need no mask (flash attention)
            for name, attention in attentions.items():
                fields = dict(layout="paged", attention_ran=name, block_size=p, **common)
                why = attention_unavailable(name, s.device)

                def paged() -> dict:
                    def attend():
                        return attention.fn(q, kc, vc, tables, lens, full_blocks=full)

                    t, backend = _timed(attend, s, flush, attention.sdpa)
                    tg = 0.0 if attention.in_place else median_time(
                        lambda: (gather_blocks(kc, tables), gather_blocks(vc, tables)), s.device, s.warmup,
                        s.repeats, graph=s.graphs, flush=flush)
                    diff = _max_abs_diff(pinned(attend, backend)(), reference.fn(q, kc, vc, tables, lens,
                                                                                 full_blocks=full))
                    return dict(time_s=t, gather_s=tg, max_abs_diff=diff, achieved_Bps=kv_bytes / t,
                                backend=backend or name)

                yield skipped(fields, why) if why else _point(fields, paged, s.device, s.dtype)
                bar.update()
            del kc, vc
    bar.close()


def _stored(f: str, x: "torch.Tensor") -> tuple["torch.Tensor", object, Callable[..., "torch.Tensor"]]:  # noqa: F821
    """x as format ``f`` stores it: (codes, scale(s), decode(dtype) -> values); FP8 codes as their bytes (uint8)."""
    import torch

    if f == "bf16":
        return x, None, lambda dtype=None: x if dtype in (None, x.dtype) else x.to(dtype)
    if f == "fp8":
        codes, scale = fp8_encode(x)
        return codes.view(torch.uint8), scale, lambda dtype=None: fp8_decode(codes, scale, dtype)
    codes, scales = q8_0_encode(x)
    return codes, scales, lambda dtype=None: q8_0_decode(codes, scales, dtype)


def kv_formats(s: Settings, z: KVSizes = KVSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Decode attention time (s) over K/V stored as BF16, FP8 or q8_0, through each of ``z.attentions``; bytes per format.

    ``paged`` rows run the Triton kernel over the stored bytes, in shuffled blocks of
    ``Settings.block_size``, converting in registers (``kv_format``); ``sdpa`` rows dequantize the
    contiguous K/V into a copy in the compute dtype and run SDPA (``dequant_s``: that conversion
    alone). ``kv_bytes`` is what the format stores; ``read_bytes`` what the row's attention moves
    (the stored bytes, plus writing and reading the copy for ``sdpa`` over a compressed format);
    ``predicted_s`` is read_bytes at the card's peak bandwidth. ``max_abs_diff`` is the largest
    difference from float32 attention over the decoded values (empty if those float32 copies do not
    fit); above ``MAX_ABS_DIFF`` the row is failed. See the module's docstring for what these rows can
    and cannot show.
    """
    import torch

    for f in z.formats:
        one_of("formats[i]", f, KV_STORED_BYTES)
    for a in z.attentions:
        one_of("attentions[i]", a, KV_ATTENTIONS)
    info = info or device_info(s.device, s.card)
    bw = info.accelerator.hbm_bandwidth if info.accelerator else None
    dt = getattr(torch, s.dtype)
    bs = s.block_size
    flush = L2Flush(s.device) if s.flush_l2 else False
    why_not_paged = attention_unavailable("paged", s.device)
    bar = tqdm(total=len(z.contexts) * len(z.formats) * len(z.attentions), desc="kv_formats", disable=not s.progress)
    for L in z.contexts:  # every sequence has all L tokens: no mask
        q, k, v = _qkv(z.batch, L, z, s.device, s.dtype, s.seed)
        lens = torch.full((z.batch,), L, device=s.device, dtype=torch.int32)
        values = 2 * k.numel()  # K and V
        for f in z.formats:
            (kq, ks, k_dec), (vq, vs, v_dec) = _stored(f, k), _stored(f, v)
            kv_bytes = values * KV_STORED_BYTES[f]
            want = []  # float32 attention over the decoded values, computed once, by the first row that runs

            def diff(out: "torch.Tensor") -> float:  # noqa: F821
                """out's largest difference from float32 attention (NaN where the float32 copies do not fit)."""
                try:
                    if not want:
                        want.append(contiguous_attention(q.float(), k_dec(torch.float32), v_dec(torch.float32)))
                    return _max_abs_diff(out, want[0])
                except torch.OutOfMemoryError:
                    return None  # not checked

            for a in z.attentions:
                copy = 0 if a == "paged" or f == "bf16" else 2 * values * dt.itemsize  # the copy written, then read
                fields = dict(format=f, attention_ran=a, block_size=bs if a == "paged" else L, batch=z.batch,
                              context=L, kv_bytes=kv_bytes, read_bytes=kv_bytes + copy,
                              predicted_s=(kv_bytes + copy) / bw if bw else None)
                if a == "paged":
                    if why_not_paged:
                        yield skipped(fields, why_not_paged)
                        bar.update()
                        continue

                    def measure() -> dict:
                        perm, tables = _shuffled(z.batch, L, bs, s.device, s.seed + bs)
                        pool = [_paged_pool(x, bs, perm) for x in (kq, vq)]
                        scales = [_paged_pool(x, bs, perm) if f == "q8_0" else x for x in (ks, vs)]

                        def attend():
                            return triton_paged_attention(q, *pool, tables, lens, kv_format=_KERNEL_FORMAT[f],
                                                          k_scale=scales[0], v_scale=scales[1])

                        t = median_time(attend, s.device, s.warmup, s.repeats, graph=s.graphs, flush=flush)
                        return dict(time_s=t, dequant_s=0.0, max_abs_diff=diff(attend()), backend="paged")
                else:
                    def measure() -> dict:
                        def attend():
                            return contiguous_attention(q, k_dec(dt), v_dec(dt))

                        t, backend = _timed(attend, s, flush)
                        t_deq = 0.0 if f == "bf16" else median_time(lambda: (k_dec(dt), v_dec(dt)), s.device,
                                                                    s.warmup, s.repeats, graph=s.graphs, flush=flush)
                        return dict(time_s=t, dequant_s=t_deq, max_abs_diff=diff(pinned(attend, backend)()),
                                    backend=backend)

                yield _point(fields, measure, s.device, s.dtype)
                bar.update()
    bar.close()


def crossover(rows: pd.DataFrame, baseline: str = "bf16", time_column: str = "time_s",
              attention: str | None = None) -> pd.DataFrame:
    """Straight-line fits time = fixed + per_token x context per format, and the context where each beats ``baseline``.

    ``crossover_tokens`` is (fixed_f - fixed_base) / (per_token_base - per_token_f); inf where the format
    never pays (its per-token slope is not smaller), 0 where it is never slower. Rows with an
    ``attention_ran`` column are those of ``attention`` (which may be None only if they hold one).
    """
    need = {"format", "context", time_column}
    if not need <= set(rows.columns):
        raise ValueError(f"rows must have columns {sorted(need)}, got {sorted(rows.columns)}")
    if "attention_ran" in rows.columns:
        ran = sorted(rows["attention_ran"].dropna().astype(str).unique())
        if attention is None and len(ran) > 1:
            raise ValueError(f"attention must name one of the rows' attention_ran {ran}: a fit mixes no kernels")
        if attention is not None:
            rows = rows[rows["attention_ran"] == one_of("attention", attention, ran)]
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
