"""The chapter's nine exercises: their inputs, parts and references computed by the library from the inputs.

Each exercise lists its inputs (``inputs``: the values of the notebook's cell tagged ``parameters``) and
how to draw other ones (``vary``: small changes that keep the exercise meaningful); each part's reference
is a function of those inputs, so the grader can grade a notebook run again on a variant. Nothing here
runs in a student's kernel: ``check`` compares with the public answers shipped in
``data/exercises/expected.json`` (``public``), and the grader's sandbox sees this catalog without its
references. Hand-calculation parts name the library calls they forbid (``forbids``, from the notebooks'
Rules); the grader flags a part whose cells call one for a person to review.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .core import Exercise, Inputs, Part

if TYPE_CHECKING:  # the draws get a Generator; numpy itself is not imported here (check must start fast)
    import numpy as np

__all__ = ["EXERCISES", "SESSION_SEEDS"]


class _Units:
    """``inferlab.units``, imported when a reference first needs it (it imports numpy; check must start fast)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(import_module("inferlab.units"), name)


U = _Units()


def _lib(name: str) -> Any:
    """Import ``inferlab.<name>`` when a reference is computed, so importing the catalog stays fast."""
    return import_module(f"inferlab.{name}")


def _pick(rng: np.random.Generator, options: Any) -> Any:
    """One of ``options`` (a list of values), as a plain Python value."""
    value = options[int(rng.integers(len(options)))]
    return value.item() if hasattr(value, "item") else value


# ---- 8-1: batch and reads ---------------------------------------------------------------------
def _per_token_gib(p: Inputs) -> Any:
    roofline = _lib("roofline")
    return import_module("pandas").DataFrame(
        {str(ctx): [roofline.bytes_per_output_token(b, ctx, p.weight_bytes, p.kv_bytes_per_token) / U.GiB
                    for b in p.batches] for ctx in p.contexts}, index=list(p.batches))


def _b_kv(p: Inputs, ctx: int) -> int:
    return _lib("roofline").b_kv(p.weight_bytes, ctx, p.kv_bytes_per_token)


def _capacity(p: Inputs, ctx: int) -> int:
    memory = _lib("memory")
    per_request = memory.blocks_for(memory.kv_tokens(ctx, p.output_tokens), p.block_tokens) * p.block_tokens \
        * p.kv_bytes_per_token
    return int(p.kv_budget_gib * U.GiB // per_request)


def _vary_8_1(rng: np.random.Generator) -> dict[str, Any]:
    return {"weight_bytes": int(round(15_136_811_008 * rng.uniform(0.7, 1.35), -6)),
            "kv_bytes_per_token": _pick(rng, [96, 112, 128, 160, 176, 192]) * 1024,
            "contexts": _pick(rng, [[1024, 4096], [1536, 6144], [3072, 12288], [4096, 16384], [2560, 10240]]),
            "batches": _pick(rng, [[1, 2, 8, 32], [1, 8, 32, 128], [2, 4, 16, 64], [1, 4, 16, 64]]),
            "kv_budget_gib": _pick(rng, [8, 10, 14, 16, 20, 24]), "block_tokens": _pick(rng, [8, 16, 32]),
            "output_tokens": _pick(rng, [128, 192, 384, 512])}


_HAND_8_1 = ("inferlab.roofline", "inferlab.memory")
EX_8_1 = Exercise("8-1", "Reads per output token as the batch grows", notebook="8-1-batch-reads.ipynb", inputs={
    "weight_bytes": 15_136_811_008, "kv_bytes_per_token": 147_456, "contexts": [2048, 8192],
    "batches": [1, 4, 16, 64], "kv_budget_gib": 12, "block_tokens": 16, "output_tokens": 256,
}, vary=_vary_8_1, parts=(
    Part("per_token_gib", "Bytes read per output token (GiB) for each context and batch", _per_token_gib, points=2,
         precision="dec:2", forbids=_HAND_8_1,
         hint="weights are read once per step and shared by the batch; each request reads its own KV"),
    Part("b_kv_short", "Smallest batch whose KV reads reach the shared weight reads, shorter context",
         lambda p: _b_kv(p, p.contexts[0]), forbids=_HAND_8_1,
         hint="solve b L k >= D_w for the smallest whole b"),
    Part("b_kv_long", "The same for the longer context", lambda p: _b_kv(p, p.contexts[1]), forbids=_HAND_8_1,
         hint="solve b L k >= D_w for the smallest whole b"),
    Part("max_requests_short", "Independent requests of the shorter context that fit in the KV budget",
         lambda p: _capacity(p, p.contexts[0]), forbids=_HAND_8_1,
         hint="a finished request holds prompt + output - 1 tokens, allocated in whole blocks"),
    Part("max_requests_long", "The same for the longer context", lambda p: _capacity(p, p.contexts[1]),
         forbids=_HAND_8_1, hint="a finished request holds prompt + output - 1 tokens, allocated in whole blocks"),
    Part("capacity_binds_first", "True if the memory limit stops the batch before the KV reads reach the weight "
         "reads, for both contexts", lambda p: all(_capacity(p, c) < _b_kv(p, c) for c in p.contexts),
         hint="compare each context's capacity with its b_KV"),
    Part("explanation", "In two or three sentences: what limits the batch first, and what follows for throughput"),
))


# ---- 8-2: chunk size from a gap limit --------------------------------------------------------------
def _cost(p: Inputs) -> Any:
    return _lib("scheduling").IterationCost(p.fixed_ms * U.ms, p.per_token_us * 1e-6, p.per_pair_ns * 1e-9)


def _iteration_ms(p: Inputs, index: int) -> float:
    sch = _lib("scheduling")
    requests = (sch.Request("r0", 0.0, p.prompt_short, 8), sch.Request("r1", 0.0, p.prompt_short, 2),
                sch.Request("r2", 0.020, p.prompt_long, 2), sch.Request("r3", 0.030, p.prompt_short, 4))
    return sch.simulate(requests, "continuous", _cost(p), 2).iterations[index].duration_s / U.ms


def _record(p: Inputs) -> Any:
    from .data import build

    return build("replay_record_8_2", interval_ms=p.replay_interval_ms)


def _vary_8_2(rng: np.random.Generator) -> dict[str, Any]:
    chunk = _pick(rng, [256, 384, 768, 1024])
    return {"fixed_ms": round(float(rng.uniform(20, 32)), 2), "per_token_us": round(float(rng.uniform(24, 38)), 1),
            "per_pair_ns": _pick(rng, [2.0, 2.5, 3.5, 4.0]), "prompt_short": _pick(rng, [1024, 1536, 2560, 3072]),
            "prompt_long": _pick(rng, [6144, 10240, 12288]), "chunk_tokens": chunk,
            "cached_tokens": chunk * int(rng.integers(4, 25)),
            "replay_interval_ms": _pick(rng, [40, 50, 60, 100, 120, 160]),
            "gap_limit_ms": _pick(rng, [60, 75, 90, 110, 140, 180, 220])}


_HAND_8_2 = ("inferlab.scheduling",)
EX_8_2 = Exercise("8-2", "Choosing the prefill chunk from a gap limit", notebook="8-2-chunk-size.ipynb", core=True,
                  inputs={"fixed_ms": 26.22, "per_token_us": 30.4, "per_pair_ns": 3.0, "prompt_short": 2048,
                          "prompt_long": 8192, "chunk_tokens": 512, "cached_tokens": 7680, "replay_interval_ms": 80,
                          "gap_limit_ms": 50},
                  vary=_vary_8_2, parts=(
    Part("prefill_r0_r1_ms", "Iteration time of r0 and r1's joint prefill (ms)", lambda p: _iteration_ms(p, 0),
         precision="dec:2", forbids=_HAND_8_2,
         hint="the fixed cost once, the per-token cost for every new token, the per-pair cost for both prompts"),
    Part("decode_ms", "The next decode iteration (ms)", lambda p: _iteration_ms(p, 1), precision="dec:2",
         forbids=_HAND_8_2, hint="a decode token at position L_in + j attends to L_in + j keys"),
    Part("admit_r2_ms", "The iteration that admits r2 under continuous batching (ms)", lambda p: _iteration_ms(p, 2),
         precision="dec:2", forbids=_HAND_8_2, hint="r2's whole prompt runs beside r0's next decode token"),
    Part("gap_source", "Where the longest output gap comes from (one or two sentences)"),
    Part("pairs_h0", "Causal pairs of a chunk with no history",
         lambda p: _lib("models").causal_pairs(p.chunk_tokens, 0), forbids=(*_HAND_8_2, "inferlab.models"),
         hint="token i of the chunk attends to itself and every token before it"),
    Part("pairs_cached", "Causal pairs of the chunk after the cached tokens",
         lambda p: _lib("models").causal_pairs(p.chunk_tokens, p.cached_tokens),
         forbids=(*_HAND_8_2, "inferlab.models"), hint="every new token also attends to all the cached ones"),
    Part("budget_within_gap", "Largest token budget whose longest gap stays under the limit in the replay",
         lambda p: _lib("scheduling").budget_within_gap(_record(p), p.gap_limit_ms / 1000),
         hint="the gap column is in seconds"),
    Part("budget_fastest", "Token budget that admits the late requests soonest",
         lambda p: _lib("scheduling").quickest_admission_budget(_record(p)), choice=True,
         hint="look at the late arrivals' mean queueing"),
    Part("budget_reason", "Which time decides each choice, and why"),
))


# ---- 8-3: block size and sharing --------------------------------------------------------------
def _kv_mib(p: Inputs, n: int, shared: int) -> float:
    model = _lib("example").MODEL
    if model.kv_bytes_per_token() != p.kv_bytes_per_token:
        raise ValueError("8-3 keeps the running example's KV per token")
    return _lib("memory").batch_kv_bytes(n, model, p.prompt_tokens, p.output_tokens, p.block_tokens,
                                         shared_prefix_tokens=shared) / U.MiB


def _vary_8_3(rng: np.random.Generator) -> dict[str, Any]:
    prompt = _pick(rng, [4096, 6144, 10240, 12288])
    return {"lengths": [int(n) for n in rng.integers(3, 24, 4)], "prompt_tokens": prompt,
            "output_tokens": _pick(rng, [128, 192, 384, 512]), "block_tokens": _pick(rng, [8, 32]),
            "shared_prefix_tokens": _pick(rng, [prompt // 2, prompt // 4 * 3, prompt - 1000, prompt // 2 + 100]),
            "extra_shared_blocks": _pick(rng, [2, 3, 4])}


_HAND_8_3 = ("inferlab.memory", "inferlab.kvcache")
EX_8_3 = Exercise("8-3", "Block size and prefix sharing", notebook="8-3-block-size.ipynb", inputs={
    "lengths": [9, 13, 5, 15], "block_sizes": [2, 4, 8], "prompt_tokens": 8192, "output_tokens": 256,
    "block_tokens": 16, "kv_bytes_per_token": 147_456, "shared_prefix_tokens": 6144, "request_counts": [8, 16, 32],
    "extra_shared_blocks": 1,
}, vary=_vary_8_3, parts=(
    Part("tail_waste", "Unused token positions in each sequence's last block, per block size (a dict: block size "
         "-> list of counts)", lambda p: {b: _lib("memory").paged_waste(list(p.lengths), b) for b in p.block_sizes},
         forbids=_HAND_8_3, hint="a sequence of L tokens takes ceil(L / p) blocks of p positions"),
    Part("total_waste", "Total unused positions per block size (dict)",
         lambda p: {b: sum(_lib("memory").paged_waste(list(p.lengths), b)) for b in p.block_sizes},
         forbids=_HAND_8_3, hint="add up the four sequences' unused positions"),
    Part("table_entries", "Total block-table entries per block size (dict)",
         lambda p: {b: _lib("memory").block_table_entries(list(p.lengths), b) for b in p.block_sizes},
         forbids=_HAND_8_3, hint="one entry per logical block of every sequence"),
    Part("independent_mib", "KV of the long requests stored independently, per number of requests (MiB, dict)",
         lambda p: {n: _kv_mib(p, n, 0) for n in p.request_counts}, precision="dec:2",
         hint="a finished request holds prompt + output - 1 tokens, in whole blocks"),
    Part("shared_mib", "The same with the shared prefix stored once (MiB, dict)",
         lambda p: {n: _kv_mib(p, n, p.shared_prefix_tokens) for n in p.request_counts}, precision="dec:2",
         hint="only whole blocks of the prefix can be shared"),
    Part("blocks_saved", "Blocks saved by b requests when more private full blocks join the shared prefix "
         "(a function of b)", lambda p: lambda b: _lib("memory").blocks_saved_by_sharing(b, p.extra_shared_blocks),
         probes=((1,), (2,), (16,), (100,)), forbids=_HAND_8_3,
         hint="count the physical copies of those blocks before and after sharing"),
))


# ---- 8-4: which prefixes to keep ---------------------------------------------------------------
#: Agent sessions whose 1 GiB replay finds some of the session in the cache (between 3 % and 25 % of its input).
SESSION_SEEDS = (0, 5, 13, 28, 30, 35, 48, 49, 55, 63, 64, 65, 77, 80, 89, 92, 101, 102, 104, 106, 108, 109, 111,
                 113, 114, 122, 127, 131, 135, 140, 151, 153, 156, 159, 168, 185, 189, 191, 203, 214)


def _prefix(p: Inputs, tokens: int, link_gb_s: float) -> Any:
    ex = _lib("example")
    if ex.MODEL.kv_bytes_per_token() != p.kv_bytes_per_token or ex.ACCELERATOR.peak_bf16_flops != p.peak_tflops * 1e12:
        raise ValueError("8-4 keeps the running example's model and card")
    return _lib("kvcache").prefix_cost(ex.MODEL, ex.ACCELERATOR, tokens, link_bandwidth=link_gb_s * U.GB, mfu=p.mfu)


def _crossover(p: Inputs, link_gb_s: float) -> float:
    b = _prefix(p, p.b_tokens, link_gb_s).value(p.p_hit)
    return _prefix(p, p.a_tokens, link_gb_s).hit_probability_for(p.b_count * b)


def _replay_share(p: Inputs, column: str) -> float:
    from .data import build

    table = build("agent_replay_8_4", seed=p.session_seed)
    return float(table[column].sum() / table["input_tokens"].sum())


def _vary_8_4(rng: np.random.Generator) -> dict[str, Any]:
    b = _pick(rng, [1024, 1536, 2560, 3072])
    return {"b_tokens": b, "a_tokens": 3 * b, "mfu": _pick(rng, [0.55, 0.58, 0.6, 0.65, 0.68]),
            "p_hit": _pick(rng, [0.3, 0.4, 0.6, 0.7]),
            "session_seed": _pick(rng, [s for s in SESSION_SEEDS if s != 13])}


_HAND_8_4 = ("inferlab.kvcache", "inferlab.calibration")
EX_8_4 = Exercise("8-4", "Which prefixes to keep in a small cache", notebook="8-4-prefix-cache.ipynb", core=True,
                  inputs={"a_tokens": 6144, "b_tokens": 2048, "b_count": 3, "kv_bytes_per_token": 147_456,
                          "peak_tflops": 503.8, "mfu": 0.622, "link_gb_s": 64, "gen4_gb_s": 32, "p_hit": 0.5,
                          "session_seed": 13},
                  vary=_vary_8_4, parts=(
    Part("value_a_ms", "Expected net saving of keeping prefix A (ms)",
         lambda p: _prefix(p, p.a_tokens, p.link_gb_s).value(p.p_hit) / U.ms, precision="dec:1", forbids=_HAND_8_4,
         hint="recompute time from the prefill FLOP at the given efficiency; fetch and maintenance over the link"),
    Part("value_three_b_ms", "The same for the three B prefixes together (ms)",
         lambda p: p.b_count * _prefix(p, p.b_tokens, p.link_gb_s).value(p.p_hit) / U.ms, precision="dec:1",
         forbids=_HAND_8_4, hint="each B prefix is worth V_h on its own; the cache holds all three"),
    Part("p_a_crossover", "Hit probability of A below which the B prefixes are the better use of the space",
         lambda p: _crossover(p, p.link_gb_s), precision="dec:3", forbids=_HAND_8_4,
         hint="solve V_h(A) = the three B prefixes' saving for A's hit probability"),
    Part("p_a_crossover_gen4", "The same over PCIe Gen4 x16", lambda p: _crossover(p, p.gen4_gb_s),
         precision="dec:3", forbids=_HAND_8_4, hint="fetch and maintenance both take longer on the slower link"),
    Part("common_share", "Share of the session's input tokens shared with the previous turn",
         lambda p: _replay_share(p, "shared_with_previous"), precision="dec:3",
         hint="sum the shared tokens over all turns, then divide by all input tokens"),
    Part("hit_share_1gib", "Share of the session's input tokens found in a 1 GiB cache with competing traffic",
         lambda p: _replay_share(p, "hit_tokens_1gib"), precision="dec:3",
         hint="the same ratio with the 1 GiB hit column"),
    Part("replay_analysis", "Why does competing traffic make the actual hit share smaller than the shared share?"),
))


# ---- 8-5: offloading FFN weights ---------------------------------------------------------------------
def _plan(p: Inputs, buffers: int) -> Any:
    return _lib("compression.offload").OffloadPlan(p.ffn_mib * U.MiB, p.offloaded, buffers)


def _copy_s(p: Inputs, link_gb_s: float) -> float:
    return _lib("compression.offload").copy_time(_plan(p, 1).copy_bytes_per_step, link_gb_s * U.GB)


def _vary_8_5(rng: np.random.Generator) -> dict[str, Any]:
    per_token = 147_456 / U.MiB
    ctx, out = _pick(rng, [4096, 5120, 6144, 8192, 10240]), _pick(rng, [256, 512, 1024])
    return {"ffn_mib": _pick(rng, [144, 192, 240, 336]), "offloaded": _pick(rng, [6, 8, 9, 10, 18]),
            "input_state_mib": ctx * per_token, "request_state_mib": -(-(ctx + out - 1) // 16) * 16 * per_token,
            "links_gb_s": {"pcie": _pick(rng, [16, 64]), "c2c": _pick(rng, [300, 600])},
            "steps": _pick(rng, [127, 255, 383, 767]), "copy_budget_s": _pick(rng, [1.0, 1.5, 3.0, 4.0])}


_HAND_8_5 = ("inferlab.compression",)
EX_8_5 = Exercise("8-5", "Capacity freed by offloading, and the copies it adds", notebook="8-5-offload.ipynb", inputs={
    "ffn_mib": 288, "offloaded": 12, "buffers": [1, 2], "input_state_mib": 1008.0, "request_state_mib": 1080.0,
    "links_gb_s": {"pcie": 32, "c2c": 450}, "steps": 511, "copy_budget_s": 2.0,
}, vary=_vary_8_5, parts=(
    Part("net_mib", "Accelerator memory saved net of the prefetch buffers (MiB), per number of buffers (dict)",
         lambda p: {b: _plan(p, b).net_bytes / U.MiB for b in p.buffers}, precision="dec:1", forbids=_HAND_8_5,
         hint="a buffer holds one offloaded block on the accelerator"),
    Part("extra_inputs", "Extra input states that fit in that space, per number of buffers (dict)",
         lambda p: {b: _plan(p, b).extra_requests(p.input_state_mib * U.MiB) for b in p.buffers}, forbids=_HAND_8_5,
         hint="only whole states count"),
    Part("extra_requests", "Extra complete request states that fit, per number of buffers (dict)",
         lambda p: {b: _plan(p, b).extra_requests(p.request_state_mib * U.MiB) for b in p.buffers}, forbids=_HAND_8_5,
         hint="only whole states count"),
    Part("copy_step_ms", "Lower bound on the copy time per step (ms) over each link (dict keyed by link)",
         lambda p: {k: _copy_s(p, bw) / U.ms for k, bw in p.links_gb_s.items()}, precision="sig:3", forbids=_HAND_8_5,
         hint="every offloaded block crosses the link once per step; GB/s counts 10^9 bytes, a MiB 2^20"),
    Part("copy_total_s", "The same summed over all the steps (s, dict)",
         lambda p: {k: p.steps * _copy_s(p, bw) for k, bw in p.links_gb_s.items()}, precision="sig:3",
         forbids=_HAND_8_5, hint="the copies repeat every step"),
    Part("min_bandwidth_gb_s", "Lowest one-direction bandwidth that fits all the steps' copies in the time allowed "
         "(GB/s)", lambda p: _lib("compression.offload").min_link_bandwidth(
             _plan(p, 1).copy_bytes_per_step, p.steps, p.copy_budget_s) / U.GB, precision="sig:3", forbids=_HAND_8_5,
         hint="all the bytes of all the steps over the time allowed"),
))


# ---- 8-6: KV compression, correctness and retries -------------------------------------------------------
def _kv_format_mib(p: Inputs, prompt: int, outputs: int, fmt: str) -> float:
    model = _lib("example").MODEL
    if model.kv_bytes_per_token() != p.kv_bytes_per_token:
        raise ValueError("8-6 keeps the running example's KV per token")
    return _lib("compression.kv").kv_bytes_in_format(model, prompt, outputs, fmt, p.block_tokens) / U.MiB


def _changed_tasks(p: Inputs) -> list[int]:
    grid = _lib("datasets").published("quality_grid_8_4_4").groupby(["config", "task"])["correct"].sum().unstack()
    return sorted(int(t) for t in p.tasks if grid.loc["BF16 KV", t] != grid.loc["FP8 KV + BF16 Q", t])


def _retry(p: Inputs, kind: str) -> float:
    from .data import build

    r = build("retry_records_8_6", seed=p.retry_seed)
    with_retries = float(r.groupby(["task", "run"])["seconds"].sum().sum())
    last_only = float(r[r["correct"]]["seconds"].sum())
    return {"with_retries": with_retries, "last_only": last_only, "overhead": with_retries - last_only}[kind]


def _vary_8_6(rng: np.random.Generator) -> dict[str, Any]:
    dropped = {_pick(rng, [5, 6]), *(int(t) for t in rng.choice([1, 2, 3, 4, 7, 8], 2, replace=False))}
    return {"prompt_tokens": _pick(rng, [4000, 6144, 10000, 12288, 16384]),
            "output_tokens": _pick(rng, [128, 200, 300, 512]), "block_tokens": _pick(rng, [16, 32]),
            "tasks": [t for t in range(1, 9) if t not in dropped], "retry_seed": int(rng.integers(100, 100_000))}


EX_8_6 = Exercise("8-6", "KV compression: capacity, correctness and the cost of retries",
                  notebook="8-6-kv-quality.ipynb",
                  inputs={"prompt_tokens": 8192, "output_tokens": 256, "block_tokens": 16,
                          "kv_bytes_per_token": 147_456, "tasks": [1, 2, 3, 4, 5, 6, 7, 8], "retry_seed": 6},
                  vary=_vary_8_6, parts=(
    Part("kv_mib", "KV of the input and of the finished request in q8_0 and q4_0 (MiB): a dict "
         "{'q8_0': {'input': ..., 'request': ...}, 'q4_0': {...}}",
         lambda p: {f: {"input": _kv_format_mib(p, p.prompt_tokens, 1, f),
                        "request": _kv_format_mib(p, p.prompt_tokens, p.output_tokens, f)} for f in ("q8_0", "q4_0")},
         precision="dec:3", forbids=("inferlab.compression",),
         hint="count whole blocks first, then the bytes of a 32-value group in each format"),
    Part("changed_tasks", "Tasks (among the inputs' tasks) whose correctness differs between BF16 KV and "
         "FP8 KV + BF16 Q (a list)", _changed_tasks, unordered=True,
         hint="compare the two configurations' correct counts task by task"),
    Part("with_retries_s", "Generation time of all runs, counting every attempt of a retried task (s)",
         lambda p: _retry(p, "with_retries"), precision="dec:3", hint="every row is one generation"),
    Part("last_only_s", "The same counting only the successful attempt of each run (s)",
         lambda p: _retry(p, "last_only"), precision="dec:3", hint="keep the rows of correct answers"),
    Part("retry_overhead_s", "What counting only successes leaves out (s)", lambda p: _retry(p, "overhead"),
         precision="dec:3", hint="the difference of the two totals"),
    Part("interpretation", "Both configurations answer 28 of 32: why is that not evidence that they are equivalent?"),
))


# ---- 8-7: the best draft length ----------------------------------------------------------------
def _tokens(p: Inputs, m: int) -> float:
    return _lib("speculative").expected_tokens([p.accept] * m)


def _per_token_ms(p: Inputs, m: int, group: int = 1) -> float:
    round_s = _lib("speculative.cost").linear_round_s(m, p.verify_ms * U.ms, p.draft_ms * U.ms, group)
    return round_s / _tokens(p, m) / U.ms


def _vary_8_7(rng: np.random.Generator) -> dict[str, Any]:
    return {"accept": _pick(rng, [0.6, 0.65, 0.7, 0.8, 0.85]), "verify_ms": round(float(rng.uniform(18, 35)), 1),
            "draft_ms": round(float(rng.uniform(1.5, 6.0)), 1)}


_HAND_8_7 = ("inferlab.speculative",)
EX_8_7 = Exercise("8-7", "The draft length that minimizes time per token", notebook="8-7-draft-length.ipynb", inputs={
    "accept": 0.75, "verify_ms": 26.3, "draft_ms": 3.6, "lengths": [1, 2, 4, 8], "group": 4, "compare": [4, 5],
}, vary=_vary_8_7, parts=(
    Part("expected_tokens", "Expected tokens per round for each draft length (dict)",
         lambda p: {m: _tokens(p, m) for m in p.lengths}, precision="sig:3", forbids=_HAND_8_7,
         hint="a geometric sum: the j-th draft survives with probability a^j"),
    Part("ms_per_token", "Time per output token (ms) with T_m = verify + m x draft, for each length (dict)",
         lambda p: {m: _per_token_ms(p, m) for m in p.lengths}, precision="sig:3", forbids=_HAND_8_7,
         hint="a round's time over the tokens it emits on average"),
    Part("grouped_ms_per_token", "With drafts run in groups (a part group costs a whole one), time per token (ms) "
         "for the two lengths compared (dict)", lambda p: {m: _per_token_ms(p, m, p.group) for m in p.compare},
         precision="sig:3", forbids=_HAND_8_7, hint="round the number of groups up"),
    Part("better_length", "Which of the two lengths is better with groups?",
         lambda p: min(p.compare, key=lambda m: _per_token_ms(p, m, p.group)), choice=True, forbids=_HAND_8_7,
         hint="the lower time per token wins"),
    Part("marginal_reason", "Explain the choice with the marginal condition dT/dN < T/N"),
))


# ---- 8-8: stage speed-ups of a whole task -------------------------------------------------------
def _vary_8_8(rng: np.random.Generator) -> dict[str, Any]:
    stages = {"prefill": float(rng.integers(10, 36)), "decode": float(rng.integers(30, 71)),
              "tools": float(rng.integers(10, 46))}
    speedup = _pick(rng, [2.0, 3.0, 5.0, 6.0])
    breakeven = stages["decode"] * (1 - 1 / speedup)
    return {"stages_s": stages, "decode_speedup": speedup,
            "setup_s": float(rng.integers(2, max(3, int(0.6 * breakeven))))}


EX_8_8 = Exercise("8-8", "Stage speed-ups and draft set-up in a whole task", notebook="8-8-task-time.ipynb", inputs={
    "stages_s": {"prefill": 20.0, "decode": 50.0, "tools": 30.0}, "halving": 2.0, "decode_speedup": 4.0,
    "setup_s": 8.0,
}, vary=_vary_8_8, parts=(
    Part("halved_s", "Task time when each stage alone is sped up by the halving factor (s, dict: stage -> time)",
         lambda p: {s: _lib("serving").task_time(p.stages_s, {s: p.halving}) for s in p.stages_s},
         precision="dec:1", forbids=("inferlab.serving",), hint="only that one stage gets shorter"),
    Part("net_speedup", "Speed-up of the whole task when decode runs faster but needs the draft set-up",
         lambda p: sum(p.stages_s.values()) / _lib("serving").task_time(p.stages_s, {"decode": p.decode_speedup},
                                                                         added_s=p.setup_s),
         precision="dec:2", forbids=("inferlab.serving",),
         hint="compare the whole task before and after, set-up included"),
    Part("breakeven_setup_s", "Set-up time at which the change stops saving time (s)",
         lambda p: p.stages_s["decode"] - p.stages_s["decode"] / p.decode_speedup, precision="dec:1",
         forbids=("inferlab.serving",), hint="the set-up may take what the faster decode saves"),
))


# ---- 8-9: a configuration with context-lookup drafts ----------------------------------------------
def _table(p: Inputs, budget_gib: float, outputs: int) -> Any:
    if (p.n_requests, p.prompt_tokens, p.shared_prefix_tokens, p.block_tokens, p.kv_bytes_per_token) != \
            (16, 8192, 6144, 16, 147_456) or outputs > 256 or p.step_ms != 27.35:
        raise ValueError("8-9 keeps the shape at which B's prefill and step were measured")
    return _evaluated(p.deadline_s, p.tokens_per_round, p.lookup_ms, budget_gib, outputs)


@lru_cache(maxsize=256)
def _evaluated(deadline_s: float, tokens_per_round: float, lookup_ms: float, budget_gib: float, outputs: int) -> Any:
    """B, D and E evaluated by the library (one table per variant and question, cached: several parts read it)."""
    serving = _lib("serving")
    chapter = serving.CHAPTER_CONFIGS
    wl = serving.Workload(16, 8192, outputs, 6144, deadline_s)
    e = serving.ServingConfig("E", "BF16, shared prefix + context lookup", shared_prefix=True,
                              tokens_per_round=tokens_per_round, round_overhead_s=lookup_ms * U.ms,
                              prefill_s=chapter["B"].prefill_s, decode_step_s=chapter["B"].decode_step_s)
    return serving.evaluate_configs([chapter["B"], chapter["D"], e], kv_budget_bytes=budget_gib * U.GiB, workload=wl)


def _best(p: Inputs, budget_gib: float, outputs: int) -> str:
    return _lib("serving").feasible(_table(p, budget_gib, outputs))[0]


def _vary_8_9(rng: np.random.Generator) -> dict[str, Any]:
    return {"output_tokens": _pick(rng, [128, 160, 192, 224]), "tokens_per_round": _pick(rng, [1.6, 1.8, 2.2, 2.5]),
            "lookup_ms": _pick(rng, [0.05, 0.2, 0.4]), "deadline_s": _pick(rng, [6.0, 6.5, 7.5, 8.0])}


EX_8_9 = Exercise("8-9", "A configuration that drafts from the context", notebook="8-9-configuration.ipynb",
                  core=True, inputs={
    "n_requests": 16, "prompt_tokens": 8192, "shared_prefix_tokens": 6144, "output_tokens": 256, "block_tokens": 16,
    "kv_bytes_per_token": 147_456, "prefill_s": 2.04, "step_ms": 27.35, "tokens_per_round": 2, "lookup_ms": 0.1,
    "deadline_s": 7.0,
}, vary=_vary_8_9, parts=(
    Part("e_kv_mib", "KV and auxiliary memory of configuration E (MiB)",
         lambda p: float(_table(p, 12, p.output_tokens).loc["E", "kv_bytes"] / U.MiB), precision="dec:1",
         forbids=("inferlab.serving",), hint="the prefix's whole blocks once, each request's own blocks once each"),
    Part("e_total_s", "Total time of E for the batch (s)",
         lambda p: float(_table(p, 12, p.output_tokens).loc["E", "total_s"]), precision="dec:2",
         forbids=("inferlab.serving",), hint="prefill, then the rounds the outputs after the first need"),
    Part("e_gpu_s_per_good", "GPU-seconds per good result of E",
         lambda p: float(_table(p, 12, p.output_tokens).loc["E", "gpu_s_per_good"]), precision="dec:2",
         forbids=("inferlab.serving",), hint="the batch's time over the results that fit and arrive in time"),
    Part("best_12gib", "Cheapest configuration per good result among B, D and E with 12 GiB",
         lambda p: _best(p, 12, p.output_tokens), hint="a configuration counts only if it fits and is on time"),
    Part("best_6gib", "The same with 6 GiB for KV", lambda p: _best(p, 6, p.output_tokens),
         hint="a configuration counts only if it fits and is on time"),
    Part("best_16_outputs", "The same with 12 GiB and 16 output tokens", lambda p: _best(p, 12, 16),
         hint="with few outputs the prefill weighs more"),
    Part("experiment", "The open experiment: your trace, the two configurations, and their goodput"),
))

EXERCISES: dict[str, Exercise] = {e.id: e for e in (EX_8_1, EX_8_2, EX_8_3, EX_8_4, EX_8_5, EX_8_6, EX_8_7, EX_8_8,
                                                   EX_8_9)}
assert math.isfinite(sum(e.max_points for e in EXERCISES.values()))
