"""Transformer dimensions and what follows from them: parameters, weight bytes, KV bytes, FLOP."""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import finite_result, flag, instance, non_negative_int, positive, positive_int


def causal_pairs(new_tokens: int, cached_tokens: int = 0) -> int:
    """Query-key pairs of a causal chunk of ``new_tokens`` after ``cached_tokens``: c*h + c(c+1)/2."""
    c = non_negative_int("new_tokens", new_tokens)
    h = non_negative_int("cached_tokens", cached_tokens)
    return c * h + c * (c + 1) // 2


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer with grouped-query attention, SwiGLU FFN and RMSNorm.

    Mixture-of-experts models set ``n_experts`` > 0; their FFN is ``n_experts`` experts of
    width ``moe_intermediate_size``, ``n_active_experts`` of which run per token.
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool = False
    qk_norm: bool = True
    n_experts: int = 0
    n_active_experts: int = 0
    moe_intermediate_size: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        instance("name", self.name, str), instance("source", self.source, str)
        flag("tie_embeddings", self.tie_embeddings), flag("qk_norm", self.qk_norm)
        for field in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size", "vocab_size"):
            positive_int(field, getattr(self, field))
        for field in ("intermediate_size", "n_experts", "n_active_experts", "moe_intermediate_size"):
            non_negative_int(field, getattr(self, field))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.n_experts:
            for field in ("n_active_experts", "moe_intermediate_size"):
                if getattr(self, field) < 1:
                    raise ValueError(f"{field} must be >= 1 for a mixture of n_experts ({self.n_experts}) experts, "
                                     f"got {getattr(self, field)}")
            if self.n_active_experts > self.n_experts:
                raise ValueError("n_active_experts must not exceed n_experts")
        elif self.intermediate_size < 1:
            raise ValueError(f"intermediate_size must be >= 1 for a dense model (n_experts 0), "
                             f"got {self.intermediate_size}")

    # ---- parameter counts -------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """Linear parameters of one layer's attention (Q, K, V, O projections)."""
        q = self.n_heads * self.head_dim
        kv = self.n_kv_heads * self.head_dim
        return self.hidden_size * (q + 2 * kv) + q * self.hidden_size

    @property
    def ffn_params(self) -> int:
        """Linear parameters of one layer's FFN (all experts and the router for MoE)."""
        if self.n_experts:
            return self.n_experts * 3 * self.hidden_size * self.moe_intermediate_size + self.hidden_size * self.n_experts
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def active_ffn_params(self) -> int:
        """FFN parameters one token multiplies with (router plus active experts for MoE)."""
        if self.n_experts:
            return self.n_active_experts * 3 * self.hidden_size * self.moe_intermediate_size + self.hidden_size * self.n_experts
        return self.ffn_params

    @property
    def norm_params(self) -> int:
        """RMSNorm weights: two per layer, Q/K norms if present, and the final norm."""
        per_layer = 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)
        return self.n_layers * per_layer + self.hidden_size

    @property
    def embedding_params(self) -> int:
        """Parameters of the input embedding table (vocab x hidden)."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection; zero extra when tied to the embedding."""
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    @property
    def linear_params(self) -> int:
        """All linear-layer parameters except lm_head (P_lin in the FLOP formula; every expert for MoE)."""
        return self.n_layers * (self.attention_params + self.ffn_params)

    @property
    def active_linear_params(self) -> int:
        """Linear parameters one token passes through, except lm_head (equals linear_params if dense)."""
        return self.n_layers * (self.attention_params + self.active_ffn_params)

    @property
    def n_params(self) -> int:
        """Total parameter count."""
        return self.linear_params + self.norm_params + self.embedding_params + self.lm_head_params

    # ---- bytes ------------------------------------------------------------------------
    def weight_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes of all weights stored at ``dtype_bytes`` per parameter."""
        return finite_result(self.n_params * positive("dtype_bytes", dtype_bytes), "dtype_bytes")

    def matrix_weight_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes read once per decode step: every weight but the input embedding (D_w)."""
        dense = self.n_params - self.embedding_params
        return finite_result(dense * positive("dtype_bytes", dtype_bytes), "dtype_bytes")

    def ffn_layer_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes of one layer's FFN matrices (288 MiB for Qwen3-8B in BF16)."""
        return finite_result(self.ffn_params * positive("dtype_bytes", dtype_bytes), "dtype_bytes")

    def kv_bytes_per_token(self, dtype_bytes: float = 2) -> float:
        """KV bytes one token adds across all layers: 2 (K and V) x layers x KV heads x head_dim x dtype."""
        values = 2 * self.n_layers * self.n_kv_heads * self.head_dim
        return finite_result(values * positive("dtype_bytes", dtype_bytes), "dtype_bytes")

    # ---- FLOP -------------------------------------------------------------------------
    def flops(self, new_tokens: int, cached_tokens: int = 0, logits: int = 0) -> float:
        """FLOP of one forward over ``new_tokens`` after ``cached_tokens``, computing ``logits`` output rows.

        2 x P_lin x n (linear layers) + 2 x hidden x vocab x logits (lm_head)
        + 4 x heads x head_dim x layers x causal pairs (QK^T and PV).
        """
        n = non_negative_int("new_tokens", new_tokens)
        non_negative_int("logits", logits)
        if logits > n:
            raise ValueError(f"logits ({logits}) must not exceed new_tokens ({n})")
        pairs = causal_pairs(n, cached_tokens)
        linear = 2 * self.active_linear_params * n
        head = 2 * self.hidden_size * self.vocab_size * logits
        attention = 4 * self.n_heads * self.head_dim * self.n_layers * pairs
        return float(linear + head + attention)


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in [
        ModelSpec(
            "qwen3-8b", n_layers=36, n_heads=32, n_kv_heads=8, head_dim=128, hidden_size=4096,
            intermediate_size=12288, vocab_size=151_936, source="Qwen/Qwen3-8B config.json",
        ),
        ModelSpec(
            "llama-3.1-8b", n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, hidden_size=4096,
            intermediate_size=14336, vocab_size=128_256, qk_norm=False,
            source="meta-llama/Llama-3.1-8B config.json",
        ),
        ModelSpec(
            "qwen3-235b-a22b", n_layers=94, n_heads=64, n_kv_heads=4, head_dim=128, hidden_size=4096,
            intermediate_size=0, vocab_size=151_936, n_experts=128, n_active_experts=8,
            moe_intermediate_size=1536, source="Qwen/Qwen3-235B-A22B config.json",
        ),
    ]
}
