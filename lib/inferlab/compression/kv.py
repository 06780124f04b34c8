"""What a smaller KV format buys and costs: bytes per context, read time saved vs conversion time (8.4.1-8.4.2).

- Size: a context's KV in a block format is its BF16 bytes x (block bytes / (block values x 2)).
- Time: reading dD fewer bytes at bandwidth beta saves dD / beta; converting costs T_c, so
  dT = dD / beta - T_c (positive: the compressed format is faster). Experiment 8-1 gives beta two ways: the
  whole-step average (bytes read / step time) and the marginal rate (extra bytes / extra time between two batches).
- Measured ITL lines t(L) = a + b L of BF16 and FP8 KV cross where a_1 + b_1 L = a_2 + b_2 L.
- A quantized weight file fits when memory - reserve - file >= the KV the requests need.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import sympy as sp

from .._validate import member, non_negative, non_negative_int, positive, positive_int
from ..datasets import published
from ..memory import request_kv_bytes
from ..models import ModelSpec
from ..symbolic import solve_linear
from ..units import GB
from .formats import block_format

# ---- sizes --------------------------------------------------------------------------------


def kv_bytes_in_format(model: ModelSpec, prompt_tokens: int, output_tokens: int, fmt: str,
                       block_size: int = 16) -> float:
    """KV bytes of one request stored in ``fmt`` (bf16, fp8_e4m3, q8_0, q4_0, q2_K), whole 16-token blocks."""
    bf16 = request_kv_bytes(model, prompt_tokens, output_tokens, block_size)
    return bf16 * block_format(fmt).ratio_to(2.0)


def requests_that_fit(budget_bytes: float, model: ModelSpec, prompt_tokens: int, output_tokens: int, fmt: str,
                      block_size: int = 16) -> int:
    """Independent requests whose KV, stored in ``fmt``, fits in ``budget_bytes`` (no sharing)."""
    per = kv_bytes_in_format(model, prompt_tokens, output_tokens, fmt, block_size)
    return int(non_negative("budget_bytes", budget_bytes) // per)


# ---- read saving vs conversion --------------------------------------------------------------


def decode_bandwidth_measured(batch: int = 64) -> float:
    """Achieved read bandwidth of a decode step in experiment 8-1 (bytes read / step time), B/s.

    At batch 64 this is 34.46 GB / 29.63 ms = 1.163 TB/s, the chapter's "about 1.16 TB/s (65 % of peak)".
    """
    sweep = published("batch_sweep_8_1").set_index("batch")
    if batch not in sweep.index:
        raise ValueError(f"batch must be one of {sorted(sweep.index)}, got {batch!r}")
    row = sweep.loc[batch]
    return float(row["step_read_gb"] * GB / row["decode_step_s"])


@dataclass(frozen=True)
class MarginalRead:
    """What experiment 8-1's decode step read and took in addition from ``from_batch`` to ``to_batch``."""

    from_batch: int
    to_batch: int
    extra_bytes: float  # bytes read per step, to_batch's minus from_batch's
    extra_s: float  # decode step seconds, to_batch's minus from_batch's

    @property
    def bandwidth(self) -> float:
        """Extra bytes over extra seconds (B/s): what one more byte read cost the step at the margin."""
        return self.extra_bytes / self.extra_s


def marginal_decode_read(from_batch: int = 16, to_batch: int = 64) -> MarginalRead:
    """The slope of experiment 8-1's decode step against the bytes it reads, between two measured batches.

    From batch 16 to 64 the step read 34.46 - 19.97 = 14.49 GB more but took only 29.63 - 27.44 = 2.19 ms
    longer: about 6.6 TB/s at the margin (``.bandwidth``), above the RTX PRO 6000's 1792 GB/s peak, against
    the whole-step average ``decode_bandwidth_measured`` (1.16 TB/s at batch 64). Both batches must be rows of
    the sweep (1, 4, 16, 64) and ``to_batch`` the larger.
    """
    sweep = published("batch_sweep_8_1").set_index("batch")
    rows = f"a batch of experiment 8-1 ({', '.join(map(str, sweep.index))})"
    lo = member("from_batch", positive_int("from_batch", from_batch), sweep.index, rows)
    hi = member("to_batch", positive_int("to_batch", to_batch), sweep.index, rows)
    if hi <= lo:
        raise ValueError(f"to_batch must be larger than from_batch ({lo}), got {hi!r}")
    low, high = sweep.loc[lo], sweep.loc[hi]
    extra_bytes = float((high["step_read_gb"] - low["step_read_gb"]) * GB)
    extra_s = float(high["decode_step_s"] - low["decode_step_s"])
    if extra_bytes <= 0 or extra_s <= 0:  # pragma: no cover - the published sweep grows with the batch
        raise ArithmeticError("experiment 8-1's step must read more and take longer at the larger batch")
    return MarginalRead(lo, hi, extra_bytes, extra_s)


def read_saving(delta_bytes: float, bandwidth: float, conversion_s: float = 0.0) -> float:
    """Net time saved by reading ``delta_bytes`` fewer bytes at ``bandwidth`` B/s, minus the conversion: s."""
    return non_negative("delta_bytes", delta_bytes) / positive("bandwidth", bandwidth) \
        - non_negative("conversion_s", conversion_s)


def break_even_conversion(delta_bytes: float, bandwidth: float) -> float:
    """Largest conversion time that still saves time: dD / beta, seconds."""
    return read_saving(delta_bytes, bandwidth, 0.0)


def read_saving_symbolic() -> tuple[sp.Eq, sp.Expr]:
    """(Delta T = Delta D / beta_eff - T_conv, the break-even T_conv solved by sympy); symbols of notation.md."""
    dD, beta, T_c, dT = sp.symbols(r"\Delta{D} \beta_{\mathrm{eff}} T_{\mathrm{conv}} \Delta{T}", positive=True)
    eq = sp.Eq(dT, dD / beta - T_c)
    return eq, solve_linear(eq.rhs, T_c)


# ---- linear ITL models and their crossover -----------------------------------------------


@dataclass(frozen=True)
class LinearITL:
    """Inter-token latency fitted as fixed_s + per_token_s x context tokens (seconds)."""

    name: str
    fixed_s: float
    per_token_s: float

    def __post_init__(self) -> None:
        non_negative("fixed_s", self.fixed_s)
        non_negative("per_token_s", self.per_token_s)

    def at(self, context_tokens: float) -> float:
        """ITL at ``context_tokens`` tokens of context, seconds."""
        return self.fixed_s + self.per_token_s * non_negative("context_tokens", context_tokens)


def published_itl_fits() -> dict[str, LinearITL]:
    """The chapter's ITL fits by KV format (H100, Llama-3.1-8B): 6.44 + 4.37e-5 L and 6.58 + 2.37e-5 L ms."""
    t = published("kv_formats_fit_8_4_2").set_index("format")
    return {f: LinearITL(f"{f.upper()} KV", float(r.fixed_s), float(r.per_token_s)) for f, r in t.iterrows()}


ITL_BF16_H100 = published_itl_fits()["bf16"]
ITL_FP8_H100 = published_itl_fits()["fp8"]


def itl_crossover(a: LinearITL, b: LinearITL) -> float:
    """Context length (tokens) where two ITL lines meet: (fixed_b - fixed_a) / (slope_a - slope_b)."""
    if a.per_token_s == b.per_token_s:
        raise ValueError("a and b must have different per_token_s (parallel lines never cross)")
    return (b.fixed_s - a.fixed_s) / (a.per_token_s - b.per_token_s)


def itl_crossover_symbolic() -> tuple[sp.Eq, sp.Expr]:
    """(tau_0 + tau_1 L for BF16 = the same for FP8, the crossover L_x solved by sympy; L* is 8.2.1's)."""
    names = r"L \tau_{0\mathrm{B}} \tau_{1\mathrm{B}} \tau_{0\mathrm{F}} \tau_{1\mathrm{F}}"
    L, a1, b1, a2, b2 = sp.symbols(names, positive=True)
    eq = sp.Eq(a1 + b1 * L, a2 + b2 * L)
    return eq, sp.cancel(solve_linear(eq, L))


# ---- does a quantized weight file leave room for KV? ----------------------------------------


@dataclass(frozen=True)
class WeightFit:
    """Memory left after loading a weight file, and how many requests' KV fit in it (bytes)."""

    available_bytes: float
    file_bytes: float
    kv_bytes_per_request: float

    @property
    def left_bytes(self) -> float:
        """Available memory minus the file (negative: the file alone does not fit)."""
        return self.available_bytes - self.file_bytes

    @property
    def requests(self) -> int:
        """Whole requests whose KV fits in what is left (0 when nothing is left)."""
        return max(int(self.left_bytes // self.kv_bytes_per_request), 0)

    @property
    def left_after_requests_bytes(self) -> float:
        """What is left once ``requests`` requests hold their KV."""
        return self.left_bytes - self.requests * self.kv_bytes_per_request


def weight_file_fit(file_bytes: float, memory_bytes: float, reserved_bytes: float, model: ModelSpec,
                    context_tokens: int, kv_dtype_bytes: float = 2) -> WeightFit:
    """Load a ``file_bytes`` file into ``memory_bytes`` minus ``reserved_bytes``; KV per ``context_tokens`` request."""
    available = positive("memory_bytes", memory_bytes) - non_negative("reserved_bytes", reserved_bytes)
    if available <= 0:
        raise ValueError("reserved_bytes must be smaller than memory_bytes")
    non_negative_int("context_tokens", context_tokens)
    kv = context_tokens * model.kv_bytes_per_token(kv_dtype_bytes)
    return WeightFit(available, positive("file_bytes", file_bytes), max(kv, 1.0))


def gguf_files() -> pd.DataFrame:
    """The two Qwen3-235B-A22B GGUF files of section 8.4.1 (bytes, with provenance in data/README.md)."""
    return published("qwen3_235b_gguf_8_4_1").set_index("variant")


def compact_states() -> pd.DataFrame:
    """Per-8K-context state sizes of 8.4.2 (GQA vs MLA; DeepSeek V4 vs V4.1 global + SWA), MiB as printed."""
    return published("compact_state_8_4_2").set_index("state")
