"""A Qwen3-style decoder in torch over a paged KV cache: the model the GPU measurements run.

It is ``inferlab.tiny_model.TinyQwen3`` written with torch tensors: the same weights (Q/K/V
and gate/up fused into one matrix each, so a decode step launches fewer, larger GEMVs), the
same RMSNorm, rotary embedding, QK-norm, GQA and SwiGLU. ``from_numpy`` loads a TinyQwen3's
weights so the CPU tests can check that both give the same logits; ``random`` builds any
``ModelSpec``'s shape with random weights directly on the device (shapes, not values, set the
time). Every tensor op has static shapes for a given (batch, max_blocks), so ``decode`` can be
captured in a CUDA graph.

The paged attention here gathers each sequence's blocks into a contiguous tensor and then
attends with ``scaled_dot_product_attention`` (``paged_attention``); vLLM's kernel reads the
blocks in place, so the gather is an extra copy that the experiment of section 8.3.1 times
separately.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..kernels.tiny_model import TinyConfig, TinyQwen3
from ..models import ModelSpec

if TYPE_CHECKING:
    import torch

_LAYER_KEYS = ("ln1", "wqkv", "q_norm", "k_norm", "wo", "ln2", "w_gu", "w_down")


def paged_attention(q: "torch.Tensor", k_cache: "torch.Tensor", v_cache: "torch.Tensor",
                    block_tables: "torch.Tensor", context_lens: "torch.Tensor | None") -> "torch.Tensor":
    """One decode token per sequence over K/V read through block tables: ``[batch, n_heads, d]`` (q's dtype).

    ``context_lens`` None means every row fills all its blocks (no mask: the fastest attention path).
    Padding entries (-1) must be replaced by any valid block id first (``block_tables.clamp(min=0)``).
    """
    k, v = gather_blocks(k_cache, block_tables), gather_blocks(v_cache, block_tables)
    return contiguous_attention(q, k, v, context_lens)


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


class TorchDecoder:
    """Qwen3-style decoder with stacked per-layer weights; ``decode`` and ``chunk`` run over paged K/V pools."""

    def __init__(self, config: TinyConfig, weights: dict[str, "torch.Tensor"]) -> None:
        import torch

        self.config = config
        self.w = weights
        d = config.head_dim
        dev = weights["embed"].device
        self.inv_freq = (config.rope_theta ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)).float().to(dev)

    @property
    def device(self) -> "torch.device":
        """Where the weights live."""
        return self.w["embed"].device

    @property
    def dtype(self) -> "torch.dtype":
        """Element type of weights and activations."""
        return self.w["embed"].dtype

    @classmethod
    def from_numpy(cls, model: TinyQwen3, device: str = "cpu", dtype: str = "float32") -> "TorchDecoder":
        """The same weights as a numpy TinyQwen3 (Q/K/V and gate/up fused)."""
        import numpy as np
        import torch

        w = model.w
        fused = dict(w, wqkv=np.concatenate([w["wq"], w["wk"], w["wv"]], axis=-1),
                     w_gu=np.concatenate([w["w_gate"], w["w_up"]], axis=-1))
        keep = ("embed", "final_norm", "lm_head", *_LAYER_KEYS)
        return cls(model.config, {k: torch.from_numpy(np.ascontiguousarray(fused[k])).to(device, getattr(torch, dtype))
                                  for k in keep})

    @classmethod
    def random(cls, spec: ModelSpec, device: str = "cuda", dtype: str = "bfloat16", seed: int = 0) -> "TorchDecoder":
        """Random weights of ``spec``'s shape, made on the device one layer at a time (no host copy)."""
        import torch

        c = TinyConfig.from_spec(spec)
        g = torch.Generator(device=device).manual_seed(seed)
        dt = getattr(torch, dtype)
        H, I, q, kv = c.hidden_size, c.intermediate_size, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        shapes = {"ln1": (H,), "wqkv": (H, q + 2 * kv), "q_norm": (c.head_dim,), "k_norm": (c.head_dim,),
                  "wo": (q, H), "ln2": (H,), "w_gu": (H, 2 * I), "w_down": (I, H)}
        w: dict[str, torch.Tensor] = {}
        for key, shape in shapes.items():
            t = torch.empty((c.n_layers, *shape), device=device, dtype=dt)
            for layer in range(c.n_layers):
                if len(shape) == 1:
                    t[layer].fill_(1.0)
                else:
                    t[layer].normal_(0.0, 1 / math.sqrt(shape[0]), generator=g)
            w[key] = t
        w["embed"] = torch.empty((c.vocab_size, H), device=device, dtype=dt).normal_(generator=g)
        w["final_norm"] = torch.ones(H, device=device, dtype=dt)
        w["lm_head"] = torch.empty((H, c.vocab_size), device=device, dtype=dt).normal_(0.0, 1 / math.sqrt(H), generator=g)
        return cls(c, w)

    def new_cache(self, num_blocks: int, block_size: int) -> tuple["torch.Tensor", "torch.Tensor"]:
        """Zeroed K and V pools ``[n_layers, num_blocks, block_size, n_kv_heads, head_dim]``."""
        import torch

        c = self.config
        shape = (c.n_layers, num_blocks, block_size, c.n_kv_heads, c.head_dim)
        return (torch.zeros(shape, device=self.device, dtype=self.dtype),
                torch.zeros(shape, device=self.device, dtype=self.dtype))

    # ---- pieces -----------------------------------------------------------------------------------
    def _norm(self, x: "torch.Tensor", weight: "torch.Tensor") -> "torch.Tensor":
        import torch

        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, self.config.rms_eps)

    def rotary(self, positions: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
        """cos and sin ``[n, 1, head_dim]`` of the rotary embedding at ``positions`` (computed once per step)."""
        import torch

        angles = positions.float()[:, None] * self.inv_freq[None, :]
        cos = torch.cat([angles.cos()] * 2, dim=-1)[:, None, :].to(self.dtype)
        sin = torch.cat([angles.sin()] * 2, dim=-1)[:, None, :].to(self.dtype)
        return cos, sin

    @staticmethod
    def _rope(x: "torch.Tensor", cos: "torch.Tensor", sin: "torch.Tensor") -> "torch.Tensor":
        import torch

        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    def _qkv(self, layer: int, x: "torch.Tensor", rot: tuple["torch.Tensor", "torch.Tensor"]):
        c, w = self.config, self.w
        n = x.shape[0]
        qkv = self._norm(x, w["ln1"][layer]) @ w["wqkv"][layer]
        q_end, k_end = c.n_heads * c.head_dim, (c.n_heads + c.n_kv_heads) * c.head_dim
        q = qkv[:, :q_end].reshape(n, c.n_heads, c.head_dim)
        k = qkv[:, q_end:k_end].reshape(n, c.n_kv_heads, c.head_dim)
        v = qkv[:, k_end:].reshape(n, c.n_kv_heads, c.head_dim)
        q = self._rope(self._norm(q, w["q_norm"][layer]), *rot)
        k = self._rope(self._norm(k, w["k_norm"][layer]), *rot)
        return q, k, v

    def _finish(self, layer: int, x: "torch.Tensor", attn: "torch.Tensor") -> "torch.Tensor":
        import torch

        w = self.w
        x = x + attn.reshape(x.shape[0], -1) @ w["wo"][layer]
        gate, up = (self._norm(x, w["ln2"][layer]) @ w["w_gu"][layer]).chunk(2, dim=-1)
        return x + (torch.nn.functional.silu(gate) * up) @ w["w_down"][layer]

    def logits(self, x: "torch.Tensor") -> "torch.Tensor":
        """lm_head over the final norm: ``[n, vocab]``."""
        return self._norm(x, self.w["final_norm"]) @ self.w["lm_head"]

    # ---- steps ------------------------------------------------------------------------------------
    def decode(self, tokens: "torch.Tensor", block_tables: "torch.Tensor", context_lens: "torch.Tensor",
               k_cache: "torch.Tensor", v_cache: "torch.Tensor", full_blocks: bool = False) -> "torch.Tensor":
        """One decode step: token b sits at position context_lens[b] - 1 (its slot already in the table); logits ``[batch, vocab]``.

        ``full_blocks``: the caller promises every context fills all of its row's blocks, so attention needs no mask.
        """
        import torch

        bs = k_cache.shape[2]
        pos = context_lens - 1
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        slots = block_tables[rows, pos // bs] * bs + pos % bs
        x, rot = self.w["embed"][tokens], self.rotary(pos)
        tables, lens = block_tables.clamp(min=0), None if full_blocks else context_lens  # once per step
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, rot)
            kc, vc = k_cache[layer], v_cache[layer]
            kc.view(-1, *kc.shape[2:])[slots] = k
            vc.view(-1, *vc.shape[2:])[slots] = v
            x = self._finish(layer, x, paged_attention(q, kc, vc, tables, lens))
        return self.logits(x)

    def chunk(self, tokens: "torch.Tensor", start: int, block_table: "torch.Tensor", k_cache: "torch.Tensor",
              v_cache: "torch.Tensor", logits: str = "last") -> "torch.Tensor | None":
        """Run ``tokens`` at positions start ... start + n - 1 of one sequence (prefill chunk or verify).

        ``logits``: 'last' (prefill), 'all' (verifying draft tokens) or 'none' (hidden states only).
        """
        import torch

        n, bs = tokens.shape[0], k_cache.shape[2]
        ctx = start + n
        pos = torch.arange(start, ctx, device=tokens.device)
        slots = block_table[pos // bs] * bs + pos % bs
        ctx_slots = block_table[torch.arange(ctx, device=tokens.device) // bs] * bs + torch.arange(ctx, device=tokens.device) % bs
        mask = None if start == 0 else (torch.arange(ctx, device=tokens.device)[None, :] <= pos[:, None])
        x, rot = self.w["embed"][tokens], self.rotary(pos)
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, rot)
            kc = k_cache[layer].view(-1, *k_cache.shape[3:])
            vc = v_cache[layer].view(-1, *v_cache.shape[3:])
            kc[slots], vc[slots] = k, v
            attn = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1)[None], kc[ctx_slots].transpose(0, 1)[None], vc[ctx_slots].transpose(0, 1)[None],
                attn_mask=mask, is_causal=mask is None, enable_gqa=True)
            x = self._finish(layer, x, attn[0].transpose(0, 1))
        if logits == "none":
            return x
        return self.logits(x[-1:] if logits == "last" else x)
