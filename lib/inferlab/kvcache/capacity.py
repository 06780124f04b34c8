"""How many alike requests a KV budget holds (section 8.1.2): the count in sympy, and a run on a real pool.

The closed form starts from the memory inequality of one accelerator (``symbolic.MEMORY_FITS``): what
is left of C after the weights, activations and buffers is the KV budget C_KV. b alike requests that
share a prefix of M_pre bytes (stored once) and each hold M_priv bytes of their own fit while
M_pre + b M_priv <= C_KV. A request holds KV for its prompt and every output but the last
(L_in + G - 1 tokens), handed out in whole blocks of B tokens; only whole blocks of a prefix are shared.

The run does the same on a ``BlockManager``: requests are admitted one by one into a pool of
C_KV / (B k) blocks and then decode in lockstep, one token each per step. Two admission rules:

- ``reserve="answer"``: a request is admitted only if the pool can also set aside every block its
  answer will need; decoding then never runs out.
- ``reserve="prompt"``: a request is admitted if its prompt fits now; decoding may find the pool
  empty halfway through the answers (an engine would then preempt someone, section 8.3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .._validate import finite_result, flag, instance, items, non_negative, non_negative_int, one_of, positive, positive_int
from ..memory import blocks_for, kv_tokens
from ..models import ModelSpec
from ..symbolic import C, G, M_a, M_u, M_w, b_s, k_tok, solve_linear
from .block_manager import BlockManager

__all__ = [
    "L_in", "L_pre", "B_blk", "C_KV", "M_pre", "M_priv", "KV_BUDGET", "TOKENS_HELD", "PREFIX_KV", "PRIVATE_KV",
    "BATCH_BOUND", "MAX_BATCH", "max_batch", "pool_blocks", "RESERVE_RULES", "MAX_POOL_BLOCKS", "MAX_POOL_TOKENS",
    "MAX_RUN_TOKENS", "ReservationRun", "admit_and_decode",
]

# ---- the count in closed form (symbols as in notation.md) -------------------------------------
L_in, L_pre, B_blk = sp.symbols(r"L_{\mathrm{in}} L_{\mathrm{pre}} B", positive=True, integer=True)
C_KV, M_pre, M_priv = sp.symbols(r"C_{\mathrm{KV}} M_{\mathrm{pre}} M_{\mathrm{priv}}", nonnegative=True)

#: The KV budget: what the memory inequality leaves of C once weights, activations and buffers are in.
KV_BUDGET = C - M_w - M_a - M_u
#: Tokens whose KV a finished request holds: the prompt and every output but the last.
TOKENS_HELD = L_in + G - 1
#: KV of the shared prefix, stored once: its whole blocks only.
PREFIX_KV = B_blk * sp.floor(L_pre / B_blk) * k_tok
#: KV one request holds for itself at completion, in whole blocks (everything past the shared blocks).
PRIVATE_KV = B_blk * sp.ceiling((TOKENS_HELD - B_blk * sp.floor(L_pre / B_blk)) / B_blk) * k_tok
#: The batch at which b requests fill the budget exactly: M_pre + b M_priv = C_KV, solved for b.
BATCH_BOUND = sp.together(solve_linear(sp.Eq(M_pre + b_s * M_priv, C_KV), b_s))
#: The most alike requests that fit: the bound rounded down.
MAX_BATCH = sp.floor(BATCH_BOUND)


def max_batch(kv_budget_bytes: float, kv_bytes_per_token: float, prompt_tokens: int, output_tokens: int,
              block_size: int = 16, shared_prefix_tokens: int = 0) -> int:
    """``MAX_BATCH`` with numbers substituted: alike requests whose KV, reserved to completion, fits the budget.

    Agrees with ``memory.max_concurrent_requests`` (the tests hold them to each other); this one goes
    through the sympy forms the page shows.
    """
    budget = non_negative("kv_budget_bytes", kv_budget_bytes)
    k = positive("kv_bytes_per_token", kv_bytes_per_token)
    p = positive_int("prompt_tokens", prompt_tokens)
    g = positive_int("output_tokens", output_tokens)
    blk = positive_int("block_size", block_size)
    pre = non_negative_int("shared_prefix_tokens", shared_prefix_tokens)
    if pre > p:
        raise ValueError(f"shared_prefix_tokens ({pre}) must not exceed prompt_tokens ({p})")
    sizes = {L_in: p, G: g, B_blk: blk, L_pre: pre, k_tok: sp.Rational(k)}  # exact: a float's own binary value
    private = PRIVATE_KV.subs(sizes)
    if private == 0:
        raise ValueError("requests hold no private KV: prompt_tokens + output_tokens must exceed the shared prefix")
    shared = PREFIX_KV.subs(sizes)
    if shared + private > budget:
        return 0
    return int(MAX_BATCH.subs({M_pre: shared, M_priv: private, C_KV: sp.Rational(budget)}))


# ---- the same on a real pool ------------------------------------------------------------------
RESERVE_RULES = ("answer", "prompt")
#: Limits of a run, which keeps every token in Python lists and writes one token per request per step: at
#: most 2**14 blocks and 2**20 token positions (num_blocks x block_size; 144 GiB of Qwen3-8B KV), and 2**20
#: tokens per prompt or output, so that a run takes at most a few seconds. The running example has 5461 blocks.
MAX_POOL_BLOCKS = 2**14
MAX_POOL_TOKENS = 2**20
MAX_RUN_TOKENS = 2**20


def pool_blocks(kv_budget_bytes: float, model: ModelSpec, block_size: int = 16, dtype_bytes: float = 2) -> int:
    """Whole blocks of ``block_size`` tokens that ``kv_budget_bytes`` hold: floor(C_KV / (B k))."""
    budget = non_negative("kv_budget_bytes", kv_budget_bytes)
    instance("model", model, ModelSpec)
    per_block = positive_int("block_size", block_size) * model.kv_bytes_per_token(dtype_bytes)
    return int(finite_result(budget // per_block, "kv_budget_bytes", "1 / dtype_bytes"))


@dataclass(frozen=True)
class ReservationRun:
    """Alike requests admitted into a pool under one rule, then decoded together until done or out of blocks.

    ``used_blocks[0]`` is the pool right after admission (the prompts' KV); ``used_blocks[j]`` after decode
    step j, which writes the KV of output token j of every request (a run that admitted nobody has no steps).
    ``reserved_blocks`` is what admission counted as taken: the blocks in use plus those set aside for the
    answers (equal to ``used_blocks[0]`` under ``reserve="prompt"``). ``ran_dry_at`` is the number of output
    tokens each request had received when a KV write first found no free block (None if the run completed),
    and ``stuck`` how many requests could not write at that step.
    """

    reserve: str
    num_blocks: int
    admitted: int
    reserved_blocks: int
    used_blocks: tuple[int, ...]
    completed: bool
    ran_dry_at: int | None
    stuck: int

    def __post_init__(self) -> None:
        one_of("reserve", self.reserve, RESERVE_RULES)
        positive_int("num_blocks", self.num_blocks)
        for name in ("admitted", "reserved_blocks", "stuck"):
            non_negative_int(name, getattr(self, name))
        used = tuple(non_negative_int(f"used_blocks[{i}]", u) for i, u in enumerate(items("used_blocks",
                                                                                          self.used_blocks)))
        object.__setattr__(self, "used_blocks", used)
        flag("completed", self.completed)
        if self.ran_dry_at is not None:
            non_negative_int("ran_dry_at", self.ran_dry_at)


def admit_and_decode(num_blocks: int, prompt_tokens: int, output_tokens: int, reserve: str = "answer",
                     block_size: int = 16, shared_prefix_tokens: int = 0) -> ReservationRun:
    """Admit alike requests into a ``BlockManager`` of ``num_blocks`` until one does not fit, then decode them.

    Every request's prompt is its own tokens, except the first ``shared_prefix_tokens``, which all requests
    share (the pool finds their full blocks by content and stores them once). Under ``reserve="answer"``
    admission also sets aside the blocks the request's remaining ``output_tokens - 1`` KV writes will take;
    under ``reserve="prompt"`` it does not. Decoding is lockstep: step j writes output token j's KV for
    every request, in admission order, and the run stops at the first step where a write finds no block.
    """
    n_blocks = positive_int("num_blocks", num_blocks, at_most=MAX_POOL_BLOCKS)
    p = positive_int("prompt_tokens", prompt_tokens, at_most=MAX_RUN_TOKENS)
    g = positive_int("output_tokens", output_tokens, at_most=MAX_RUN_TOKENS)
    rule = one_of("reserve", reserve, RESERVE_RULES)
    blk = positive_int("block_size", block_size, at_most=MAX_POOL_TOKENS)
    if n_blocks * blk > MAX_POOL_TOKENS:
        raise ValueError(f"num_blocks x block_size must be at most {MAX_POOL_TOKENS} token positions, got "
                         f"{n_blocks} x {blk}")
    pre = non_negative_int("shared_prefix_tokens", shared_prefix_tokens)
    if pre >= p:
        raise ValueError(f"shared_prefix_tokens ({pre}) must be below prompt_tokens ({p}): the last prompt "
                         "token is always computed")
    pool = BlockManager(n_blocks, blk)
    prefix = list(range(pre))
    later = blocks_for(kv_tokens(p, g), blk) - blocks_for(p, blk) if rule == "answer" else 0
    owed: list[int] = []  # blocks still set aside for each admitted request
    outstanding = 0  # their sum
    while True:
        r = len(owed)
        prompt = prefix + [(r + 1) * MAX_RUN_TOKENS * 4 + t for t in range(p - pre)]
        if pool.blocks_needed(prompt) + later > pool.num_free - outstanding:
            break
        pool.allocate(r, prompt)
        owed.append(later)
        outstanding += later
    admitted = len(owed)
    reserved = pool.num_used + outstanding
    used = [pool.num_used]
    ran_dry_at, stuck = None, 0
    for j in range(1, g if admitted else 1):  # output j is fed back and its KV written (never the last output)
        for r in range(admitted):
            if not pool.can_append(r, 1):
                stuck += 1
                continue
            before = pool.num_used
            pool.append_token(r, (r + 1) * MAX_RUN_TOKENS * 4 + p + j)
            if pool.num_used > before and owed[r]:
                owed[r] -= 1
                outstanding -= 1
        used.append(pool.num_used)
        if stuck:
            ran_dry_at = j
            break
    return ReservationRun(rule, n_blocks, admitted, reserved, tuple(used), ran_dry_at is None, ran_dry_at, stuck)
