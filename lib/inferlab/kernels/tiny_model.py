"""A tiny Qwen3-style decoder in numpy that runs for real over the paged KV cache.

Same architecture as Qwen3 (RMSNorm, rotary position embedding, grouped-query attention with
per-head RMSNorm of Q and K, SwiGLU FFN, untied lm_head), random weights from a seed, any
dimensions. Attention goes through ``inferlab.kernels`` and the K/V through
``inferlab.kernels.PagedKVCache``, so the mechanisms of sections 8.2-8.5 run on real
numbers: a prompt prefilled whole or in chunks, a batch of decodes, a prefix hit that skips
its compute, greedy speculative decoding with rollback. ``forward`` without a cache is the
reference every cached path must reproduce. ``computed_tokens`` counts the token positions
the model actually ran (a prefix hit does not add to it).

Convention (as ``inferlab.memory``): the cache holds every token fed to the model; the
last emitted token is not yet in it (it is fed at the next step).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .._validate import MAX_COUNT, distinct_ids, generator, instance, non_negative_int, positive, positive_int, token_ids
from ..models import ModelSpec
from . import reference
from .paged_kv import PagedKVCache


@dataclass(frozen=True)
class TinyConfig:
    """Dimensions of a tiny Qwen3-style decoder (Qwen3 defaults for rope_theta and rms_eps)."""

    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    hidden_size: int = 32
    intermediate_size: int = 64
    vocab_size: int = 128
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size", "intermediate_size",
                     "vocab_size"):
            positive_int(name, getattr(self, name))
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (rotary pairs), got {self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        positive("rope_theta", self.rope_theta)
        positive("rms_eps", self.rms_eps)

    @property
    def spec(self) -> ModelSpec:
        """The same dimensions as an ``inferlab.models.ModelSpec``, so the book's formulas apply to it."""
        return ModelSpec("tiny-qwen3", self.n_layers, self.n_heads, self.n_kv_heads, self.head_dim,
                         self.hidden_size, self.intermediate_size, self.vocab_size)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> "TinyConfig":
        """A config with a ModelSpec's dimensions (dense models only)."""
        if instance("spec", spec, ModelSpec).n_experts:
            raise ValueError(f"spec must be a dense model, got {spec.name!r} with {spec.n_experts} experts")
        return cls(spec.n_layers, spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.hidden_size,
                   spec.intermediate_size, spec.vocab_size)


def init_weights(config: TinyConfig, seed: int | np.random.Generator = 0) -> dict[str, np.ndarray]:
    """Random float32 weights, layers stacked on axis 0; matrices are ``[in, out]`` scaled by 1/sqrt(in)."""
    rng = np.random.default_rng(seed)
    c = config
    L, H, I = c.n_layers, c.hidden_size, c.intermediate_size
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim

    def mat(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[-2])).astype(np.float32)

    def norm(*shape: int) -> np.ndarray:
        return (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)

    return {
        "embed": rng.standard_normal((c.vocab_size, H)).astype(np.float32),
        "ln1": norm(L, H), "wq": mat(L, H, q), "wk": mat(L, H, kv), "wv": mat(L, H, kv),
        "q_norm": norm(L, c.head_dim), "k_norm": norm(L, c.head_dim), "wo": mat(L, q, H),
        "ln2": norm(L, H), "w_gate": mat(L, H, I), "w_up": mat(L, H, I), "w_down": mat(L, I, H),
        "final_norm": norm(H), "lm_head": mat(H, c.vocab_size),
    }


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * weight


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Rotary embedding (rotate-half layout, as Qwen3) of ``x`` ``[n, heads, d]`` at token ``positions`` ``[n]``."""
    d = x.shape[-1]
    inv_freq = theta ** -(np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1).astype(np.float32)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1).astype(np.float32)[:, None, :]
    rotated = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)
    return x * cos + rotated * sin


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x)."""
    return x / (1 + np.exp(-x))


class TinyQwen3:
    """A Qwen3-style decoder with seeded random weights; every path through the paged cache matches ``forward``."""

    def __init__(self, config: TinyConfig | None = None, seed: int | np.random.Generator = 0) -> None:
        self.config = TinyConfig() if config is None else instance("config", config, TinyConfig, "a TinyConfig or None")
        self.w = init_weights(self.config, generator("seed", seed))
        self.computed_tokens = 0

    # ---- building blocks ------------------------------------------------------------------
    def new_cache(self, num_blocks: int, block_size: int = 16, prefix_caching: bool = True) -> PagedKVCache:
        """An empty float32 paged cache shaped for this model."""
        c = self.config
        return PagedKVCache(c.n_layers, c.n_kv_heads, c.head_dim, num_blocks, block_size, prefix_caching)

    def _tokens(self, tokens: Sequence[int], name: str = "tokens", allow_empty: bool = True) -> np.ndarray:
        """``tokens`` as int64 ids in [0, vocab_size) (ints: not bools, floats or str), else ValueError naming it."""
        return np.asarray(token_ids(tokens, name, self.config.vocab_size, allow_empty), dtype=np.int64)

    def _qkv(self, layer: int, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, w = self.config, self.w
        h = rms_norm(x, w["ln1"][layer], c.rms_eps)
        q = (h @ w["wq"][layer]).reshape(len(x), c.n_heads, c.head_dim)
        k = (h @ w["wk"][layer]).reshape(len(x), c.n_kv_heads, c.head_dim)
        v = (h @ w["wv"][layer]).reshape(len(x), c.n_kv_heads, c.head_dim)
        q = rope(rms_norm(q, w["q_norm"][layer], c.rms_eps), positions, c.rope_theta)
        k = rope(rms_norm(k, w["k_norm"][layer], c.rms_eps), positions, c.rope_theta)
        return q, k, v

    def _finish_layer(self, layer: int, x: np.ndarray, attn: np.ndarray) -> np.ndarray:
        c, w = self.config, self.w
        x = x + attn.reshape(len(x), -1) @ w["wo"][layer]
        h = rms_norm(x, w["ln2"][layer], c.rms_eps)
        return x + (silu(h @ w["w_gate"][layer]) * (h @ w["w_up"][layer])) @ w["w_down"][layer]

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return rms_norm(x, self.w["final_norm"], self.config.rms_eps) @ self.w["lm_head"]

    # ---- reference --------------------------------------------------------------------------
    def forward(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits ``[n, vocab]`` of every position of ``tokens``, without a cache (the reference)."""
        t = self._tokens(tokens, allow_empty=False)
        x, pos = self.w["embed"][t], np.arange(len(t))
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            x = self._finish_layer(layer, x, reference.attention(q, k, v))
        return self._logits(x)

    # ---- over the paged cache ----------------------------------------------------------------
    def _run(self, cache: PagedKVCache, seq_id: Hashable, tokens: np.ndarray, start: int) -> np.ndarray:
        """Run ``tokens`` at positions start ... start + n - 1 of ``seq_id`` (slots already held); logits ``[n, vocab]``."""
        x, pos = self.w["embed"][tokens], np.arange(start, start + len(tokens))
        table = cache.block_table(seq_id)
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            cache.write(layer, seq_id, start, k, v)
            attn = reference.paged_prefill_attention(q, cache.k[layer], cache.v[layer], table, start + len(tokens))
            x = self._finish_layer(layer, x, attn)
        self.computed_tokens += len(tokens)
        return self._logits(x)

    def prefill(self, cache: PagedKVCache, seq_id: Hashable, prompt: Sequence[int],
                chunk_tokens: int | None = None) -> np.ndarray:
        """Admit ``prompt`` and run the positions not found cached, ``chunk_tokens`` at a time; last logits ``[vocab]``."""
        instance("cache", cache, PagedKVCache)
        t = self._tokens(prompt, "prompt", allow_empty=False)
        chunk = len(t) if chunk_tokens is None else positive_int("chunk_tokens", chunk_tokens)
        start = cache.admit(seq_id, t.tolist())
        logits = None
        for s in range(start, len(t), chunk):
            logits = self._run(cache, seq_id, t[s: s + chunk], s)
        return logits[-1]

    def extend(self, cache: PagedKVCache, seq_id: Hashable, tokens: Sequence[int]) -> np.ndarray:
        """Append ``tokens`` to an admitted sequence and run them as one chunk; logits ``[n, vocab]``."""
        instance("cache", cache, PagedKVCache)
        t = self._tokens(tokens, allow_empty=False)
        start = cache.length(seq_id)
        cache.append(seq_id, t.tolist())
        return self._run(cache, seq_id, t, start)

    def decode(self, cache: PagedKVCache, seq_ids: Sequence[Hashable], tokens: Sequence[int]) -> np.ndarray:
        """One decode step: feed one token per sequence, attend through the block tables; logits ``[batch, vocab]``."""
        instance("cache", cache, PagedKVCache)
        seq_ids = distinct_ids("seq_ids", seq_ids)
        t = self._tokens(tokens)
        if len(t) != len(seq_ids):
            raise ValueError(f"tokens must hold one token per sequence of seq_ids ({len(seq_ids)}), got {len(t)}")
        missing = [s for s in seq_ids if not cache.can_append(s, 1)]
        if missing:
            raise ValueError(f"seq_ids {missing!r} cannot grow: the cache has {cache.manager.num_free} free blocks")
        for s, tok in zip(seq_ids, t.tolist()):
            cache.append(s, [tok])
        tables, lens = cache.tables(seq_ids)
        pos = lens - 1
        slots = tables[np.arange(len(t)), pos // cache.block_size] * cache.block_size + pos % cache.block_size
        x = self.w["embed"][t]
        for layer in range(self.config.n_layers):
            q, k, v = self._qkv(layer, x, pos)
            cache.write_slots(layer, slots, k, v)
            x = self._finish_layer(layer, x, reference.paged_attention(q, cache.k[layer], cache.v[layer], tables, lens))
        self.computed_tokens += len(t)
        return self._logits(x)

    def generate(self, cache: PagedKVCache, seq_id: Hashable, prompt: Sequence[int], n_tokens: int,
                 chunk_tokens: int | None = None) -> list[int]:
        """Greedy generation of ``n_tokens`` outputs (the last one is emitted, not fed back)."""
        instance("cache", cache, PagedKVCache)
        n = non_negative_int("n_tokens", n_tokens, at_most=MAX_COUNT)
        prompt_ids = self._tokens(prompt, "prompt", allow_empty=False).tolist()
        out: list[int] = []
        if n == 0:
            return out
        # every block the whole sequence needs must be free now: a run out of room would stop halfway
        grown = -(-(len(prompt_ids) + n - 1) // cache.block_size) - -(-len(prompt_ids) // cache.block_size)
        need = cache.manager.blocks_needed(prompt_ids) + grown
        if need > cache.manager.num_free:
            raise ValueError(f"n_tokens must fit the cache: the prompt and {n} outputs need {need} blocks, "
                             f"{cache.manager.num_free} are free")
        out.append(int(np.argmax(self.prefill(cache, seq_id, prompt, chunk_tokens))))
        while len(out) < n:
            out.append(int(np.argmax(self.decode(cache, [seq_id], [out[-1]])[0])))
        return out

    def verify(self, cache: PagedKVCache, seq_id: Hashable, pending: int, draft: Sequence[int]) -> list[int]:
        """One greedy speculative round: feed ``pending`` and the draft together, keep the agreeing prefix, roll back the rest.

        Returns the emitted tokens: the accepted draft tokens and the target's next token
        (a correction, or the bonus token when the whole draft is accepted). The cache keeps
        ``pending`` and the accepted draft tokens; the K/V of rejected ones is truncated away.
        """
        instance("cache", cache, PagedKVCache)
        d = self._tokens(draft, "draft").tolist()
        pending = int(self._tokens([pending], "pending")[0])
        before = cache.length(seq_id)
        target = np.argmax(self.extend(cache, seq_id, [pending, *d]), axis=-1).tolist()
        accepted = 0
        while accepted < len(d) and d[accepted] == target[accepted]:
            accepted += 1
        cache.truncate(seq_id, before + 1 + accepted)
        return d[:accepted] + [target[accepted]]
