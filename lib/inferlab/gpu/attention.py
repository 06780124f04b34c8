"""Attention in torch for the GPU measurements: decode over paged K/V, prefill and verify chunks, and the SDPA backend.

Decode attention is one swappable function (``DECODE_ATTENTION``, chosen by ``Settings.attention``):
``gather`` (``paged_attention``) copies each sequence's blocks into a contiguous tensor and calls
``scaled_dot_product_attention``; ``paged`` (``triton_paged_attention``) is the in-place Triton
kernel (``inferlab.kernels.triton_paged``), registered beside it with the same signature::

    attend(q [b, h, d], k_cache [blocks, block_size, kv, d], v_cache, block_tables [b, m] (no -1),
           context_lens [b], full_blocks: bool) -> [b, h, d]

Masks flash attention accepts: none for decode when every context fills its blocks; causal for
a chunk that starts the sequence; ``causal_lower_right`` for a later chunk or a verify step (the
n queries are the last n of the context). A decode whose contexts end inside a block needs a
boolean mask, which only the efficient and math kernels take: the experiments choose full
blocks where they can. ``pick_sdpa_backend`` finds the first backend (flash first) that runs a
step, ``pinned`` runs the step with only that one enabled, and every row records it (column
``backend``), so two rows compare work, not kernels.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._validate import one_of

if TYPE_CHECKING:
    import torch

#: SDPA backends tried in order (torch.nn.attention.SDPBackend names); the first that runs is pinned.
SDPA_ORDER = {"cuda": ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"),
              "cpu": ("FLASH_ATTENTION", "MATH")}


def gather_blocks(cache: "torch.Tensor", block_tables: "torch.Tensor") -> "torch.Tensor":
    """Each row's blocks, in table order, as one tensor ``[batch, max_blocks * block_size, n_kv, d]``; tables hold no -1."""
    b, m = block_tables.shape
    return cache[block_tables].reshape(b, m * cache.shape[1], *cache.shape[2:])


def contiguous_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                         context_lens: "torch.Tensor | None" = None) -> "torch.Tensor":
    """Decode attention over contiguous K/V ``[batch, max_ctx, n_kv, d]``, masked to ``context_lens`` (None: no mask)."""
    import torch

    b, h, d = q.shape
    mask = None
    if context_lens is not None:
        mask = (torch.arange(k.shape[1], device=q.device)[None, :] < context_lens[:, None])[:, None, None, :]
    out = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None, :], k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=h != k.shape[2])
    return out[:, :, 0, :]


def paged_attention(q: "torch.Tensor", k_cache: "torch.Tensor", v_cache: "torch.Tensor",
                    block_tables: "torch.Tensor", context_lens: "torch.Tensor | None" = None,
                    full_blocks: bool = False) -> "torch.Tensor":
    """One decode token per sequence over K/V read through block tables (gathered first): ``[batch, n_heads, d]``.

    ``full_blocks`` (or ``context_lens`` None) means every row fills all its blocks: no mask, so
    flash attention can run. Padding entries (-1) must be replaced by any valid block id first
    (``block_tables.clamp(min=0)``, once per step).
    """
    k, v = gather_blocks(k_cache, block_tables), gather_blocks(v_cache, block_tables)
    return contiguous_attention(q, k, v, None if full_blocks else context_lens)


def chunk_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",
                    bias: bool | None = None) -> "torch.Tensor":
    """n queries ``[n, h, d]``, the last n positions of a context of ``k``'s length ``[ctx, kv, d]``: causal attention.

    A chunk that is the whole context is plain causal; otherwise the causal mask is aligned to
    the lower right (query i sees keys 0 ... ctx - n + i). ``bias`` (default: on CUDA) passes it
    as ``causal_lower_right``, the form flash attention takes; otherwise as the same boolean
    mask (on the CPU, where importing torch.nn.attention.bias costs seconds: it imports Dynamo).
    """
    import torch

    n, ctx = q.shape[0], k.shape[0]
    qt, kt, vt = q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
    gqa = q.shape[1] != k.shape[1]
    if n == ctx:
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=gqa)
        return out[0].transpose(0, 1)
    if q.device.type == "cuda" if bias is None else bias:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(n, ctx)
    else:
        mask = torch.arange(ctx, device=q.device)[None, :] <= torch.arange(ctx - n, ctx, device=q.device)[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=gqa)
    return out[0].transpose(0, 1)


@dataclass(frozen=True)
class DecodeAttention:
    """A decode attention implementation: the function, whether it runs through SDPA (then a backend is pinned),
    and whether it reads K/V in place through the block tables (no gathered copy: nothing to time for a gather)."""

    fn: Callable[..., "torch.Tensor"]
    sdpa: bool = True
    in_place: bool = False


def triton_paged_attention(q: "torch.Tensor", k_cache: "torch.Tensor", v_cache: "torch.Tensor",
                           block_tables: "torch.Tensor", context_lens: "torch.Tensor",
                           full_blocks: bool = False, **stored: object) -> "torch.Tensor":
    """Decode attention read in place through the block tables by the Triton kernel (``inferlab.kernels.triton_paged``).

    ``full_blocks`` is accepted for the common signature and ignored: the kernel masks each context
    to its length itself. ``stored`` (``kv_format``, ``k_scale``, ``v_scale``) says how K/V are stored
    when compressed. The values are not checked (no device sync, so CUDA graphs can capture it);
    on the CPU Triton runs only under its interpreter (``TRITON_INTERPRET=1`` before triton is imported).
    """
    from ..kernels.triton_paged import paged_attention_triton

    return paged_attention_triton(q, k_cache, v_cache, block_tables, context_lens, check_values=False, **stored)


def triton_unavailable(device: str) -> str | None:
    """Why the Triton kernels cannot run on ``device`` here, or None if they can (triton is not imported)."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install -r requirements-gpu.txt)"
    if device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return ("the Triton kernel runs on CUDA, or on the CPU in Triton's interpreter (TRITON_INTERPRET=1 before "
                "triton is imported; python -m inferlab.gpu --device cpu sets it)")
    return None


#: Each decode attention, by the name ``Settings.attention`` picks. An in-place kernel imports its module
#: inside its function (tests/test_layout.py): ``paged`` is the Triton kernel, which needs triton.
DECODE_ATTENTION: dict[str, DecodeAttention] = {
    "gather": DecodeAttention(paged_attention),
    "paged": DecodeAttention(triton_paged_attention, sdpa=False, in_place=True),
}


def decode_attention(name: str) -> DecodeAttention:
    """The decode attention registered as ``name``."""
    return DECODE_ATTENTION[one_of("attention", name, DECODE_ATTENTION)]


def attention_unavailable(name: str, device: str) -> str | None:
    """Why decode attention ``name`` cannot run on ``device`` here (the Triton kernel without CUDA or interpreter), or None."""
    return triton_unavailable(device) if decode_attention(name).in_place else None


# ---- the SDPA backend ---------------------------------------------------------------------------------
def pinned(fn: Callable[[], object], backend: str | None) -> Callable[[], object]:
    """``fn`` run with only SDPA ``backend`` enabled (``fn`` itself if None)."""
    if backend is None:
        return fn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def run() -> object:
        with sdpa_kernel(chosen):
            return fn()

    return run


def pick_sdpa_backend(fn: Callable[[], object], device: str) -> str:
    """The first backend of ``SDPA_ORDER[device]`` under which ``fn()`` runs (it runs once per backend tried).

    A backend that refuses the inputs raises a RuntimeError ("No available kernel", or a shape it
    does not take); the next one is tried. Out of memory is not a refusal: it propagates. If none
    runs, the error names what each one said.
    """
    import torch

    tried = []
    for backend in SDPA_ORDER[one_of("device", device, SDPA_ORDER)]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "flash attention was not used because ..." for every refusal
                pinned(fn, backend)()
            return backend
        except RuntimeError as exc:
            if isinstance(exc, torch.OutOfMemoryError):
                raise
            tried.append(f"{backend}: {str(exc).splitlines()[0][:160]}")
    raise RuntimeError("no SDPA backend runs this step: " + "; ".join(tried))
