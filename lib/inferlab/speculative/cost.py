"""What a speculative round costs and yields: expected tokens per round, time per token, break-even and draft length.

A round of m drafts emits N tokens, 1 <= N <= m + 1. With a_j the probability that draft j is
accepted given that drafts 1..j-1 were, P(N > j) = a_1 ... a_j, so
E[N] = 1 + sum_j prod_{i<=j} a_i (Chapter 8, sections 8.5.2 and 8.5.4). Time per output token is
total time over total tokens, never the mean of per-round rates. Lengthening the draft from m - 1
to m is worth it only when the time it adds per extra expected token beats the current time per
token: dT/dN < T/N. All times in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import finite_result, function, non_negative, non_negative_int, positive, positive_int, real_array
from ..hardware import Accelerator
from ..models import ModelSpec
from ..roofline import step_time
from ..scheduling.shapes import padded_rows

__all__ = ["expected_tokens", "tokens_distribution", "time_per_token", "mean_of_round_rates",
           "spec_time_per_token", "break_even_draft_s", "amortization_tokens", "expected_rounds",
           "request_time", "effective_bandwidth", "draft_forward_s", "drafting_s", "marginal_tokens",
           "worth_extending", "linear_round_s", "draft_length_table", "verify_rows", "VERIFY_BUCKETS",
           "extra_verify_flops", "verify_step_s", "batch_speedup", "geometric_profile", "round_time_s",
           "batch_padded_rows", "padded_round_time_s", "DraftLengthChoice", "best_draft_length"]

#: Captured verification shapes of section 8.5.4: 4 or 5 verified tokens run as 8 rows, 9 as 16.
VERIFY_BUCKETS: tuple[int, ...] = (8, 16, 32, 64)


def _accept_probs(accept_probs: Sequence[float] | np.ndarray) -> np.ndarray:
    a = real_array("accept_probs", accept_probs)
    if not np.all(np.isfinite(a)) or np.any((a < 0) | (a > 1)):
        raise ValueError(f"accept_probs must lie in [0, 1], got {a.tolist()}")
    return a


def expected_tokens(accept_probs: Sequence[float] | np.ndarray) -> float:
    """E[N] = 1 + sum_j prod_{i<=j} a_i, tokens emitted per round (a_j: acceptance of draft j given the earlier ones)."""
    return float(1.0 + np.cumprod(_accept_probs(accept_probs)).sum())


def tokens_distribution(accept_probs: Sequence[float] | np.ndarray) -> np.ndarray:
    """P(N = n) for n = 1 .. m + 1 tokens emitted by a round of m = len(accept_probs) drafts."""
    a = _accept_probs(accept_probs)
    survive = np.concatenate(([1.0], np.cumprod(a)))  # P(N >= n), n = 1 .. m + 1
    return survive - np.append(survive[1:], 0.0)


def _rounds(round_s: Sequence[float], round_tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    t, n = np.asarray(round_s, dtype=np.float64), np.asarray(round_tokens)
    if t.ndim != 1 or t.size == 0 or t.shape != n.shape:
        raise ValueError("round_s and round_tokens must be non-empty 1-D sequences of the same length")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"round_s must be finite and >= 0, got {t.tolist()}")
    if not np.issubdtype(n.dtype, np.integer) or np.any(n < 1):
        raise ValueError(f"round_tokens must be integers >= 1 (a round emits at least one token), got {n.tolist()}")
    return t, n


def time_per_token(round_s: Sequence[float], round_tokens: Sequence[int]) -> float:
    """Seconds per output token over many rounds: sum of round times over sum of tokens emitted."""
    t, n = _rounds(round_s, round_tokens)
    return float(t.sum() / n.sum())


def mean_of_round_rates(round_s: Sequence[float], round_tokens: Sequence[int]) -> float:
    """The pitfall: the unweighted mean of each round's T_r/N_r (weights a 1-token round like a 5-token one)."""
    t, n = _rounds(round_s, round_tokens)
    return float(np.mean(t / n))


def spec_time_per_token(accept_probs: Sequence[float], verify_s: float, draft_s: float = 0.0) -> float:
    """Expected seconds per output token: (verify_s + draft_s) / E[N]."""
    return (positive("verify_s", verify_s) + non_negative("draft_s", draft_s)) / expected_tokens(accept_probs)


def break_even_draft_s(accept_probs: Sequence[float], verify_s: float, plain_step_s: float | None = None) -> float:
    """Largest draft (query) time per round that still beats plain decode: E[N] x plain_step_s - verify_s."""
    plain = positive("verify_s", verify_s) if plain_step_s is None else positive("plain_step_s", plain_step_s)
    return expected_tokens(accept_probs) * plain - verify_s


def amortization_tokens(setup_s: float, plain_s_per_token: float, spec_s_per_token: float) -> float:
    """Output tokens after which a one-off setup (e.g. building a lookup index) is paid back by the per-token saving."""
    non_negative("setup_s", setup_s)
    saving = positive("plain_s_per_token", plain_s_per_token) - positive("spec_s_per_token", spec_s_per_token)
    if saving <= 0:
        raise ValueError(f"spec_s_per_token ({spec_s_per_token}) must be below plain_s_per_token "
                         f"({plain_s_per_token}) for the setup to pay back")
    return setup_s / saving


def expected_rounds(n_tokens: int, accept_probs: Sequence[float]) -> float:
    """Exact expected number of rounds until at least ``n_tokens`` tokens are emitted (rounds independent).

    r(n) = 1 + sum_j P(N = j) r(n - j) with r(n <= 0) = 0; not n / E[N], which ignores the overshoot
    of the last round.
    """
    n = positive_int("n_tokens", n_tokens)
    pmf = tokens_distribution(accept_probs)
    if pmf[0] >= 1.0:
        return float(n)
    rounds = np.zeros(n + 1)
    for t in range(1, n + 1):  # a linear recurrence over token counts (m + 1 terms each)
        prev = rounds[np.maximum(t - np.arange(1, pmf.size + 1), 0)]
        rounds[t] = 1.0 + pmf @ prev
    return float(rounds[n])


def request_time(n_tokens: int, accept_probs: Sequence[float], round_s: float, setup_s: float = 0.0) -> float:
    """Expected seconds to emit ``n_tokens``: setup plus the exact expected rounds times the round time."""
    return non_negative("setup_s", setup_s) + expected_rounds(n_tokens, accept_probs) * positive("round_s", round_s)


def effective_bandwidth(read_bytes: float, step_s: float) -> float:
    """Bytes per second a measured step achieved: bytes read over its time."""
    return positive("read_bytes", read_bytes) / positive("step_s", step_s)


def draft_forward_s(draft_weight_bytes: float, bandwidth: float) -> float:
    """Seconds of one memory-bound forward of a draft network: its weight bytes over the effective bandwidth."""
    return finite_result(positive("draft_weight_bytes", draft_weight_bytes) / positive("bandwidth", bandwidth),
                         "draft_weight_bytes", "bandwidth")


def drafting_s(n_drafts: int, forward_s: float, parallel: bool) -> float:
    """Seconds to draft ``n_drafts`` tokens: one forward each (serial) or one forward for all (parallel, DFlash-like)."""
    n = non_negative_int("n_drafts", n_drafts)
    return (1 if parallel and n else n) * non_negative("forward_s", forward_s)


def marginal_tokens(accept_probs: Sequence[float]) -> np.ndarray:
    """dN_m = prod_{i<=m} a_i: expected extra tokens from the m-th draft, for m = 1 .. len(accept_probs)."""
    return np.cumprod(_accept_probs(accept_probs))


def worth_extending(round_s: float, tokens: float, extra_s: float, extra_tokens: float) -> bool:
    """The marginal rule: a longer draft lowers time per token iff extra_s / extra_tokens < round_s / tokens."""
    positive("round_s", round_s), positive("tokens", tokens), non_negative("extra_s", extra_s)
    if positive("extra_tokens", extra_tokens) and extra_s == 0:
        return True
    return extra_s / extra_tokens < round_s / tokens


def linear_round_s(m: int, verify_s: float, per_draft_s: float, group: int = 1) -> float:
    """Round time of m drafts costing ``per_draft_s`` each, run in groups of ``group`` positions (a part group pays whole)."""
    m = non_negative_int("m", m)
    g = positive_int("group", group)
    return positive("verify_s", verify_s) + non_negative("per_draft_s", per_draft_s) * g * -(-m // g)


def draft_length_table(accept_probs: Sequence[float], round_s: Callable[[int], float],
                       lengths: Sequence[int] | None = None) -> pd.DataFrame:
    """Per draft length m: E[N_m], T_m, time per token, and the marginal test against m - 1 (seconds).

    ``accept_probs`` gives a_1 .. a_M; ``round_s(m)`` the round time with m drafts.
    """
    a = _accept_probs(accept_probs)
    ms = list(range(1, a.size + 1)) if lengths is None else [positive_int("lengths", m) for m in lengths]
    if any(m > a.size for m in ms):
        raise ValueError(f"lengths must not exceed len(accept_probs) = {a.size}")
    rows = []
    for m in ms:
        n, t = expected_tokens(a[:m]), round_s(m)
        n_prev, t_prev = expected_tokens(a[:m - 1]), round_s(m - 1)
        d_n, d_t = n - n_prev, t - t_prev
        rows.append({"m": m, "E[N]": n, "T_m (s)": t, "T/N (s)": t / n, "dN": d_n, "dT (s)": d_t,
                     "dT/dN (s)": d_t / d_n if d_n > 0 else np.inf,
                     "extend from m-1": worth_extending(t_prev, n_prev, d_t, d_n) if d_n > 0 else False})
    return pd.DataFrame(rows).set_index("m")


@dataclass(frozen=True)
class DraftLengthChoice:
    """The draft length with the least time per output token (``best_draft_length``); times in seconds.

    ``length``: the best m; ``tokens_per_round``: its E[N_m]; ``s_per_token``: its round time over E[N_m];
    ``plain_s_per_token``: one plain decode step (a round of no drafts, which emits one token).
    """

    length: int
    tokens_per_round: float
    s_per_token: float
    plain_s_per_token: float

    def __post_init__(self) -> None:
        positive_int("length", self.length)
        if positive("tokens_per_round", self.tokens_per_round) < 1:
            raise ValueError(f"tokens_per_round must be at least 1 (a round emits one token or more), "
                             f"got {self.tokens_per_round!r}")
        positive("s_per_token", self.s_per_token), positive("plain_s_per_token", self.plain_s_per_token)

    @property
    def speedup(self) -> float:
        """Plain decode's time per token over the best length's: how many times faster speculation is (> 1: faster)."""
        return self.plain_s_per_token / self.s_per_token


def best_draft_length(accept_probs: Sequence[float] | np.ndarray,
                      round_s: Callable[[int], float]) -> DraftLengthChoice:
    """The draft length m in 1 .. len(accept_probs) with the least time per token round_s(m) / E[N_m].

    ``accept_probs`` gives a_1 .. a_M (at least one), ``round_s(m)`` the seconds of a round with m drafts, and
    ``round_s(0)`` those of a plain decode step; E[N_m] = 1 + sum_{j<=m} prod_{i<=j} a_i. The least time per token
    is the most tokens per second; on a tie the shorter draft wins. Raises ValueError if ``round_s`` is not
    callable or returns anything but a finite number > 0.
    """
    a = _accept_probs(accept_probs)
    if a.size == 0:
        raise ValueError("accept_probs must hold at least one acceptance (a draft length of 1 or more)")
    function("round_s", round_s)

    def seconds(m: int) -> float:
        value = round_s(m)
        try:
            return positive("round_s", value)
        except ValueError:
            raise ValueError(f"round_s must return a finite number of seconds > 0, got {value!r:.80} "
                             f"for m = {m}") from None

    plain = seconds(0)
    tokens = 1.0 + np.cumsum(np.cumprod(a))  # E[N_m], m = 1 .. M
    per_token = np.array([seconds(m) for m in range(1, a.size + 1)]) / tokens
    best = int(np.argmin(per_token))  # the first minimum: the shortest of equally good lengths
    return DraftLengthChoice(best + 1, float(tokens[best]), float(per_token[best]), plain)


def verify_rows(verified_tokens: int, buckets: Sequence[int] = VERIFY_BUCKETS) -> int:
    """Rows a verification pass computes: the verified tokens padded up to a captured shape (shapes.padded_rows)."""
    return padded_rows(positive_int("verified_tokens", verified_tokens), buckets)


def extra_verify_flops(model: ModelSpec, context_tokens: int, drafts: int) -> float:
    """FLOP a pass verifying ``drafts`` + 1 positions adds to a one-token decode step after ``context_tokens``."""
    n = non_negative_int("drafts", drafts) + 1
    return model.flops(n, context_tokens, logits=n) - model.flops(1, context_tokens, logits=1)


def verify_step_s(model: ModelSpec, accelerator: Accelerator, batch: int, context_tokens: int, drafts: int,
                  mfu: float = 1.0, mbu: float = 1.0) -> float:
    """Roofline seconds of one step in which ``batch`` requests each verify ``drafts`` + 1 positions (0 drafts: decode)."""
    n = non_negative_int("drafts", drafts) + 1
    return step_time(batch, model.flops(n, context_tokens, logits=n), context_tokens, model.matrix_weight_bytes(),
                     model.kv_bytes_per_token(), accelerator.peak_bf16_flops, accelerator.hbm_bandwidth, mfu, mbu)


def batch_speedup(model: ModelSpec, accelerator: Accelerator, batch: int, context_tokens: int,
                  accept_probs: Sequence[float], mfu: float = 1.0, mbu: float = 1.0, draft_s: float = 0.0,
                  fixed_s: float = 0.0) -> float:
    """Plain decode time per token over speculative time per token at ``batch`` (roofline steps + ``fixed_s`` each).

    Every request drafts len(accept_probs) tokens per round; ``draft_s`` is added per round. While the
    verification step stays memory-bound the extra rows are free; once its compute passes the reads,
    every extra row costs time and the gain shrinks towards E[N] x plain / (k + 1) x plain.
    """
    k = len(_accept_probs(accept_probs))
    plain = verify_step_s(model, accelerator, batch, context_tokens, 0, mfu, mbu) + non_negative("fixed_s", fixed_s)
    spec = verify_step_s(model, accelerator, batch, context_tokens, k, mfu, mbu) + fixed_s
    return plain / ((spec + non_negative("draft_s", draft_s)) / expected_tokens(accept_probs))


def geometric_profile(a: float, m: int, decay: float = 1.0) -> np.ndarray:
    """Acceptance profile a_j = a x decay**(j-1), j = 1 .. m (decay < 1: later drafts agree less often)."""
    if not 0 <= a <= 1 or not 0 < decay <= 1:
        raise ValueError(f"a must lie in [0, 1] and decay in (0, 1], got a={a!r}, decay={decay!r}")
    return a * decay ** np.arange(non_negative_int("m", m))


def round_time_s(m: int, model: ModelSpec, accelerator: Accelerator, batch: int = 1, context_tokens: int = 2048,
                 per_draft_s: float = 0.0, group: int = 1, overhead_s: float = 0.0, mfu: float = 1.0,
                 buckets: Sequence[int] | None = None) -> float:
    """One round at ``batch``: overhead + roofline verification of m + 1 rows per request (padded to ``buckets``)
    + drafting of m tokens at ``per_draft_s`` each, in groups of ``group`` (a part group pays whole)."""
    rows = non_negative_int("m", m) + 1
    if buckets is not None:
        rows = padded_rows(rows, buckets)
    verify = verify_step_s(model, accelerator, batch, context_tokens, rows - 1, mfu, 1.0)
    return non_negative("overhead_s", overhead_s) + verify + linear_round_s(m, 1.0, per_draft_s, group) - 1.0


def batch_padded_rows(m: int, batch: int, captured: Sequence[int] | None = None) -> int:
    """Rows one verification iteration computes: the batch's total, ``batch`` x (m + 1), padded up to the smallest
    captured size that holds it; past the largest captured size (or with ``captured`` None) it runs unpadded."""
    total = positive_int("batch", batch) * (non_negative_int("m", m) + 1)
    return total if captured is None else padded_rows(total, captured)


def padded_round_time_s(m: int, model: ModelSpec, accelerator: Accelerator, batch: int = 1,
                        context_tokens: int = 2048, per_draft_s: float = 0.0, overhead_s: float = 0.0,
                        mfu: float = 1.0, captured: Sequence[int] | None = None) -> float:
    """One round at ``batch`` as an engine with captured graphs runs it: overhead + roofline verification of every
    request's m + 1 rows, the iteration's total padded to a captured size (``batch_padded_rows``; a padding row costs
    the linear layers' FLOP of one token) + m serial drafts at ``per_draft_s`` each. m = 0 is a plain decode step."""
    m = non_negative_int("m", m)
    n = m + 1
    rows = batch_padded_rows(m, batch, captured)
    pad_flops = (rows - batch * n) * 2.0 * model.active_linear_params / batch
    flops = model.flops(n, non_negative_int("context_tokens", context_tokens), logits=n) + pad_flops
    verify = step_time(batch, flops, context_tokens, model.matrix_weight_bytes(), model.kv_bytes_per_token(),
                       accelerator.peak_bf16_flops, accelerator.hbm_bandwidth, mfu, 1.0)
    return finite_result(non_negative("overhead_s", overhead_s) + verify + non_negative("per_draft_s", per_draft_s) * m,
                         "per_draft_s", "overhead_s")
