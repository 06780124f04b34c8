"""A Qwen3-style decoder in torch over a paged KV cache: the model the GPU measurements run.

It is ``inferlab.tiny_model.TinyQwen3`` written with torch tensors: the same weights (Q/K/V
and gate/up fused into one matrix each, so a decode step launches fewer, larger GEMVs), the
same RMSNorm, rotary embedding, QK-norm, GQA and SwiGLU. ``from_numpy`` loads a TinyQwen3's
weights so the CPU tests can check that both give the same logits; ``random`` builds any
``ModelSpec``'s shape with random weights directly on the device (shapes, not values, set the
time). Every tensor op has static shapes for a given (batch, max_blocks), so ``decode`` can be
captured in a CUDA graph.

Decode attention is a constructor argument (``inferlab.gpu.attention.DECODE_ATTENTION``; by
default ``paged_attention``, which gathers each sequence's blocks and calls SDPA): an in-place
paged kernel drops in without touching the decoder. New K and V are written with ``index_put_``
on the whole pool tensor (``_store``), never through a view of one layer: under torch.compile a
write into a view of an input makes Inductor clone that layer's pool and copy it back (two
pool-sized temporaries per layer, about 104 GB at Qwen3-8B's full preset on an H200).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..kernels.tiny_model import TinyConfig, TinyQwen3
from ..models import ModelSpec
from .attention import chunk_attention, paged_attention

if TYPE_CHECKING:
    import torch

_LAYER_KEYS = ("ln1", "wqkv", "q_norm", "k_norm", "wo", "ln2", "w_gu", "w_down")


class TorchDecoder:
    """Qwen3-style decoder with stacked per-layer weights; ``decode`` and ``chunk`` run over paged K/V pools."""

    def __init__(self, config: TinyConfig, weights: dict[str, "torch.Tensor"],
                 attention: Callable[..., "torch.Tensor"] = paged_attention) -> None:
        import torch

        self.config = config
        self.w = weights
        self.attention = attention  # decode attention: (q, k_cache, v_cache, tables, lens, full_blocks)
        d = config.head_dim
        dev = weights["embed"].device
        self.inv_freq = (config.rope_theta ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)).float().to(dev)
        self.layer_ids = torch.arange(config.n_layers, device=dev)  # index of each layer's pool, made once

    @property
    def device(self) -> "torch.device":
        """Where the weights live."""
        return self.w["embed"].device

    @property
    def dtype(self) -> "torch.dtype":
        """Element type of weights and activations."""
        return self.w["embed"].dtype

    @classmethod
    def from_numpy(cls, model: TinyQwen3, device: str = "cpu", dtype: str = "float32",
                   attention: Callable[..., "torch.Tensor"] = paged_attention) -> "TorchDecoder":
        """The same weights as a numpy TinyQwen3 (Q/K/V and gate/up fused)."""
        import numpy as np
        import torch

        w = model.w
        fused = dict(w, wqkv=np.concatenate([w["wq"], w["wk"], w["wv"]], axis=-1),
                     w_gu=np.concatenate([w["w_gate"], w["w_up"]], axis=-1))
        keep = ("embed", "final_norm", "lm_head", *_LAYER_KEYS)
        return cls(model.config, {k: torch.from_numpy(np.ascontiguousarray(fused[k])).to(device, getattr(torch, dtype))
                                  for k in keep}, attention)

    @classmethod
    def random(cls, spec: ModelSpec, device: str = "cuda", dtype: str = "bfloat16", seed: int = 0,
               attention: Callable[..., "torch.Tensor"] = paged_attention) -> "TorchDecoder":
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
        return cls(c, w, attention)

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
    def _store(self, k_cache: "torch.Tensor", v_cache: "torch.Tensor", layer: int, blocks: "torch.Tensor",
               offsets: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor") -> None:
        """Write k, v ``[n, kv, d]`` at (layer, blocks[i], offsets[i]) of the pools, in place on the pool tensors."""
        at = (self.layer_ids[layer:layer + 1], blocks, offsets)
        k_cache.index_put_(at, k)
        v_cache.index_put_(at, v)

    def decode(self, tokens: "torch.Tensor", block_tables: "torch.Tensor", context_lens: "torch.Tensor",
               k_cache: "torch.Tensor", v_cache: "torch.Tensor", full_blocks: bool = False) -> "torch.Tensor":
        """One decode step: token b sits at position context_lens[b] - 1 (its slot already in the table); logits ``[batch, vocab]``.

        ``full_blocks``: the caller promises every context fills all of its row's blocks, so attention needs no mask.
        """
        import torch

        bs = k_cache.shape[2]
        pos = context_lens - 1
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        blocks, offsets = block_tables[rows, pos // bs], pos % bs
        x, rot = self.w["embed"][tokens], self.rotary(pos)
        tables = block_tables.clamp(min=0)  # once per step
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, rot)
            self._store(k_cache, v_cache, layer, blocks, offsets, k, v)
            attn = self.attention(q, k_cache[layer], v_cache[layer], tables, context_lens, full_blocks=full_blocks)
            x = self._finish(layer, x, attn)
        return self.logits(x)

    def chunk(self, tokens: "torch.Tensor", start: int, block_table: "torch.Tensor", k_cache: "torch.Tensor",
              v_cache: "torch.Tensor", logits: str = "last") -> "torch.Tensor | None":
        """Run ``tokens`` at positions start ... start + n - 1 of one sequence (prefill chunk or verify).

        Attention is causal over the start + n positions, aligned to the lower right (the form flash
        attention takes). ``logits``: 'last' (prefill), 'all' (verifying draft tokens) or 'none'.
        """
        import torch

        n, bs = tokens.shape[0], k_cache.shape[2]
        ctx = start + n
        pos = torch.arange(start, ctx, device=tokens.device)
        every = torch.arange(ctx, device=tokens.device)
        ctx_slots = block_table[every // bs] * bs + every % bs
        blocks, offsets = block_table[pos // bs], pos % bs
        x, rot = self.w["embed"][tokens], self.rotary(pos)
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, rot)
            self._store(k_cache, v_cache, layer, blocks, offsets, k, v)
            kc = k_cache[layer].view(-1, *k_cache.shape[3:])  # read only
            vc = v_cache[layer].view(-1, *v_cache.shape[3:])
            x = self._finish(layer, x, chunk_attention(q, kc[ctx_slots], vc[ctx_slots]))
        if logits == "none":
            return x
        return self.logits(x[-1:] if logits == "last" else x)
