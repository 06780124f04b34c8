"""The chapter's nine exercises as parts with references computed by the library.

Each reference is a function, so nothing of the answer lives in the notebook a student receives.
Hand-calculation parts say in the notebook which library calls are off limits; the grader checks
the numbers, and a person reads the explanations.
"""

from __future__ import annotations

import math
from importlib import import_module
from typing import Any

from ..units import GB, GiB, MiB, ms
from .core import Exercise, Part

__all__ = ["EXERCISES"]


def _lib(name: str) -> Any:
    """Import ``inferlab.<name>`` when a reference is computed, so ``check`` in a notebook starts fast."""
    return import_module(f"inferlab.{name}")





# ---- 8-1: batch and reads ---------------------------------------------------------------------
def _per_token_gib() -> Any:
    model, roofline = _lib("example").MODEL, _lib("roofline")
    d_w, k = model.matrix_weight_bytes(), model.kv_bytes_per_token()
    return import_module("pandas").DataFrame({f"{ctx}": [roofline.bytes_per_output_token(b, ctx, d_w, k) / GiB for b in (1, 4, 16, 64)]
                         for ctx in (2048, 8192)}, index=[1, 4, 16, 64])


def _b_kv(ctx: int) -> int:
    model = _lib("example").MODEL
    return _lib("roofline").b_kv(model.matrix_weight_bytes(), ctx, model.kv_bytes_per_token())


def _capacity(prompt: int) -> int:
    ex = _lib("example")
    return _lib("memory").max_concurrent_requests(ex.KV_BUDGET_BYTES, ex.MODEL, prompt, 256)


EX_8_1 = Exercise("8-1", "Reads per output token as the batch grows", notebook="8-1-batch-reads.ipynb", parts=(
    Part("per_token_gib", "Bytes read per output token (GiB) for 2K and 8K contexts at batch 1, 4, 16, 64",
         _per_token_gib, points=2, hint="weights are read once per step and shared; each request reads its own KV"),
    Part("b_kv_2k", "Smallest batch whose KV reads reach the shared weight reads, 2K context", lambda: _b_kv(2048),
         rtol=0, hint="solve b L k >= D_w for the smallest integer b"),
    Part("b_kv_8k", "The same for an 8K context", lambda: _b_kv(8192), rtol=0),
    Part("max_requests_2k", "Independent 2K requests (256 outputs, 16-token blocks) that fit in 12 GiB",
         lambda: _capacity(2048), rtol=0, hint="a finished request holds prompt + output - 1 tokens, in whole blocks"),
    Part("max_requests_8k", "The same for 8K requests", lambda: _capacity(8192), rtol=0),
    Part("capacity_binds_first", "True if the memory limit stops the batch before the KV reads reach the weight "
         "reads, for both context lengths", lambda: _capacity(2048) < _b_kv(2048) and _capacity(8192) < _b_kv(8192)),
    Part("explanation", "In two or three sentences: what limits the batch first, and what follows for throughput"),
))


# ---- 8-2: chunk size from a gap limit --------------------------------------------------------------
def _iteration_ms(index: int) -> float:
    return _lib("scheduling").run_example("continuous").iterations[index].duration_s / ms


def _replay_sweep() -> Any:
    sch = _lib("scheduling")
    return sch.budget_sweep(sch.replay_requests(), [512, 1024, 2048, 4096, 8192], max_running=8)


EX_8_2 = Exercise("8-2", "Choosing the prefill chunk from a gap limit", notebook="8-2-chunk-size.ipynb", core=True,
                  parts=(
    Part("prefill_r0_r1_ms", "Iteration time of r0 and r1's joint prefill (ms)", lambda: _iteration_ms(0),
         rtol=2e-4, hint="26.22 ms + 30.4 us per new token + 3 ns per causal pair, both prompts in one iteration"),
    Part("decode_ms", "The next decode iteration (ms)", lambda: _iteration_ms(1), rtol=2e-4,
         hint="a decode token at position L_in + j attends to L_in + j keys"),
    Part("admit_r2_ms", "The iteration that admits r2 under continuous batching (ms)", lambda: _iteration_ms(2),
         rtol=2e-4, hint="r2's whole 8192-token prompt runs beside r0's decode"),
    Part("gap_source", "Where the longest output gap comes from (one or two sentences)"),
    Part("pairs_h0", "Causal pairs of a 512-token chunk with no history", lambda: _lib("models").causal_pairs(512, 0), rtol=0),
    Part("pairs_h7680", "Causal pairs of a 512-token chunk after 7680 cached tokens", lambda: _lib("models").causal_pairs(512, 7680),
         rtol=0),
    Part("budget_gap_50ms", "Token budget for a longest gap under 50 ms in the six-request replay",
         lambda: _lib("scheduling").budget_within_gap(_replay_sweep(), 0.050), rtol=0),
    Part("budget_fastest", "Token budget that admits the late requests soonest",
         lambda: _lib("scheduling").quickest_admission_budget(_replay_sweep()), rtol=0),
    Part("budget_reason", "Which time decides each choice, and why"),
))


# ---- 8-3: block size and sharing --------------------------------------------------------------
_LENGTHS = (9, 13, 5, 15)


def _long_capacity(n: int, shared: bool) -> float:
    return _lib("memory").batch_kv_bytes(n, _lib("example").MODEL, 8192, 256,
                                 shared_prefix_tokens=6144 if shared else 0) / MiB


EX_8_3 = Exercise("8-3", "Block size and prefix sharing", notebook="8-3-block-size.ipynb", parts=(
    Part("tail_waste", "Unused token positions in each sequence's last block, for block sizes 2, 4 and 8 "
         "(a dict: block size -> list of four counts)",
         lambda: {b: _lib("memory").paged_waste(list(_LENGTHS), b) for b in (2, 4, 8)}, rtol=0),
    Part("total_waste", "Total unused positions per block size (dict)",
         lambda: {b: sum(_lib("memory").paged_waste(list(_LENGTHS), b)) for b in (2, 4, 8)}, rtol=0),
    Part("table_entries", "Total block-table entries per block size (dict)",
         lambda: {b: _lib("memory").block_table_entries(list(_LENGTHS), b) for b in (2, 4, 8)}, rtol=0),
    Part("independent_mib", "KV of 8, 16 and 32 long requests stored independently (MiB, dict)",
         lambda: {n: _long_capacity(n, False) for n in (8, 16, 32)}),
    Part("shared_mib", "The same with the 6144-token prefix stored once (MiB, dict)",
         lambda: {n: _long_capacity(n, True) for n in (8, 16, 32)}),
    Part("blocks_saved", "Blocks saved by b requests when one private full block joins the shared prefix "
         "(a function of b)", lambda: lambda b: _lib("memory").blocks_saved_by_sharing(b, 1),
         rtol=0, probes=((1,), (2,), (16,), (100,)), hint="the block is now stored once instead of b times"),
))


_GEN4 = 32 * GB  # PCIe Gen4 x16, per direction


# ---- 8-4: which prefixes to keep ---------------------------------------------------------------
def _prefixes(link: float | None = None):
    ex, cost = _lib("example"), _lib("kvcache").prefix_cost
    a = cost(ex.MODEL, ex.ACCELERATOR, 6144, link_bandwidth=link)
    b = cost(ex.MODEL, ex.ACCELERATOR, 2048, link_bandwidth=link)
    return a, b


EX_8_4 = Exercise("8-4", "Which prefixes to keep in a small cache", notebook="8-4-prefix-cache.ipynb", core=True,
                  parts=(
    Part("value_a_ms", "Expected net saving of keeping prefix A at a 50 % hit probability (ms)",
         lambda: _prefixes()[0].value(0.5) / ms, rtol=1e-3,
         hint="p (T_rec - T_fetch) - T_maint; recompute at 62 % of 503.8 TFLOP/s, fetch at 64 GB/s"),
    Part("value_three_b_ms", "The same for three B prefixes (ms)", lambda: 3 * _prefixes()[1].value(0.5) / ms,
         rtol=1e-3),
    Part("p_a_crossover", "Hit probability of A below which three B prefixes are the better use of 864 MiB",
         lambda: _prefixes()[0].hit_probability_for(3 * _prefixes()[1].value(0.5)), rtol=0, atol=0.001),
    Part("p_a_crossover_gen4", "The same over PCIe Gen4 x16 (32 GB/s per direction)",
         lambda: _prefixes(_GEN4)[0].hit_probability_for(3 * _prefixes(_GEN4)[1].value(0.5)),
         rtol=0, atol=0.001),
    Part("common_share", "Share of the session's input tokens shared with the previous turn (12-turn replay)",
         lambda: _replay_share("shared_with_previous")),
    Part("hit_share_1gib", "Share of the session's input tokens found in a 1 GiB cache with competing traffic",
         lambda: _replay_share("hit_tokens_1gib")),
    Part("replay_analysis", "Why does competing traffic make the actual hit share smaller than the shared share?"),
))


def _replay_share(column: str) -> float:
    from .data import build

    table = build("agent_replay_8_4")
    return float(table[column].sum() / table["input_tokens"].sum())


# ---- 8-5: offloading FFN weights ---------------------------------------------------------------------
_FFN = 288 * MiB
_LINKS = {"gen5": 64 * GB, "c2c": 450 * GB}  # per direction: PCIe Gen5 x16, NVLink-C2C


def _plan(buffers: int) -> Any:
    return _lib("compression.offload").OffloadPlan(_FFN, 9, buffers)


EX_8_5 = Exercise("8-5", "Capacity freed by offloading, and the copies it adds", notebook="8-5-offload.ipynb",
                  parts=(
    Part("net_mib", "Accelerator memory saved net of the prefetch buffers (MiB), for one and two buffers (dict)",
         lambda: {b: _plan(b).net_bytes / MiB for b in (1, 2)}),
    Part("extra_inputs", "Extra 1152 MiB input states that fit in that space, for one and two buffers (dict)",
         lambda: {b: _plan(b).extra_requests(1152 * MiB) for b in (1, 2)}, rtol=0),
    Part("extra_requests", "Extra 1188 MiB complete request states that fit, for one and two buffers (dict)",
         lambda: {b: _plan(b).extra_requests(1188 * MiB) for b in (1, 2)}, rtol=0),
    Part("copy_step_ms", "Lower bound on the copy time per step (ms) over PCIe Gen5 x16 and NVLink-C2C "
         "(dict with keys 'gen5', 'c2c')",
         lambda: {k: _lib("compression.offload").copy_time(_plan(1).copy_bytes_per_step, bw) / ms for k, bw in _LINKS.items()}),
    Part("copy_255_s", "The same summed over 255 steps (s, dict)",
         lambda: {k: 255 * _lib("compression.offload").copy_time(_plan(1).copy_bytes_per_step, bw) for k, bw in _LINKS.items()}),
    Part("min_bandwidth_gb_s", "Lowest one-direction bandwidth that fits all 255 steps' copies in 1 s (GB/s)",
         lambda: _lib("compression.offload").min_link_bandwidth(_plan(1).copy_bytes_per_step, 255, 1.0) / GB),
))


# ---- 8-6: KV compression, correctness and retries -------------------------------------------------------
def _kv_mib(prompt: int, outputs: int, fmt: str) -> float:
    return _lib("compression.kv").kv_bytes_in_format(_lib("example").MODEL, prompt, outputs, fmt) / MiB


def _changed_tasks() -> list[int]:
    grid = _lib("datasets").published("quality_grid_8_4_4").groupby(["config", "task"])["correct"].sum().unstack()
    return sorted(int(t) for t in grid.columns if grid.loc["BF16 KV", t] != grid.loc["FP8 KV + BF16 Q", t])


def _retry(kind: str) -> float:
    from .data import build

    r = build("retry_records_8_6")
    with_retries = r.groupby(["task", "run"])["seconds"].sum().sum()
    last_only = r[r["correct"]]["seconds"].sum()
    return {"with_retries": with_retries, "last_only": last_only, "overhead": with_retries - last_only}[kind]


EX_8_6 = Exercise("8-6", "KV compression: capacity, correctness and the cost of retries", notebook="8-6-kv-quality.ipynb",
                  parts=(
    Part("kv_mib", "KV of an 8K input and of a finished long request (8192 in, 256 out) in q8_0 and q4_0 (MiB): "
         "a dict {'q8_0': {'input': ..., 'request': ...}, 'q4_0': {...}}",
         lambda: {f: {"input": _kv_mib(8192, 1, f), "request": _kv_mib(8192, 256, f)} for f in ("q8_0", "q4_0")}),
    Part("changed_tasks", "Tasks (numbers 1-8) whose correctness differs between BF16 KV and FP8 KV + BF16 Q (a list)",
         _changed_tasks, rtol=0),
    Part("with_retries_s", "Generation time of all runs, counting every attempt of a retried task (s)",
         lambda: _retry("with_retries")),
    Part("last_only_s", "The same counting only the successful attempt of each run (s)", lambda: _retry("last_only")),
    Part("retry_overhead_s", "What counting only successes leaves out (s)", lambda: _retry("overhead")),
    Part("interpretation", "Both configurations answer 28 of 32: why is that not evidence that they are equivalent?"),
))


# ---- 8-7: the best draft length ----------------------------------------------------------------
_A = 0.75


def _per_token_ms(m: int, group: int = 1) -> float:
    sc = _lib("speculative.cost")
    return sc.linear_round_s(m, 26.3 * ms, 3.6 * ms, group) / sc.expected_tokens([_A] * m) / ms


EX_8_7 = Exercise("8-7", "The draft length that minimizes time per token", notebook="8-7-draft-length.ipynb", parts=(
    Part("expected_tokens", "Expected tokens per round at a = 3/4 for draft lengths 1, 2, 4, 8 (dict)",
         lambda: {m: _lib("speculative").expected_tokens([_A] * m) for m in (1, 2, 4, 8)}),
    Part("ms_per_token", "Time per output token (ms) with T_m = 26.3 + 3.6 m ms, for m = 1, 2, 4, 8 (dict)",
         lambda: {m: _per_token_ms(m) for m in (1, 2, 4, 8)}, rtol=2e-3),
    Part("grouped_ms_per_token", "With drafts run in groups of 4 (a part group costs a whole one), time per token "
         "(ms) for m = 4 and m = 5 (dict)", lambda: {m: _per_token_ms(m, 4) for m in (4, 5)}, rtol=2e-3),
    Part("better_length", "Which of 4 and 5 is better with groups of 4?",
         lambda: min((4, 5), key=lambda m: _per_token_ms(m, 4)), rtol=0),
    Part("marginal_reason", "Explain the choice with the marginal condition dT/dN < T/N"),
))


# ---- 8-8: stage speed-ups of a whole task -------------------------------------------------------
_TASK = {"prefill": 20.0, "decode": 50.0, "tools": 30.0}


EX_8_8 = Exercise("8-8", "Stage speed-ups and draft set-up in a whole task", notebook="8-8-task-time.ipynb", parts=(
    Part("halved_s", "Task time when each stage alone is halved (s, dict: stage -> time)",
         lambda: {s: _lib("serving").task_time(_TASK, {s: 2.0}) for s in _TASK}),
    Part("net_speedup", "Speed-up when decode runs 4x faster but needs 8 s of draft set-up",
         lambda: sum(_TASK.values()) / _lib("serving").task_time(_TASK, {"decode": 4.0}, added_s=8.0),
         hint="compare the whole task before and after, set-up included"),
    Part("breakeven_setup_s", "Set-up time at which the change stops saving time (s)",
         lambda: _TASK["decode"] - _TASK["decode"] / 4.0),
))


# ---- 8-9: a configuration with context-lookup drafts ----------------------------------------------
def _e(**kw):
    return _lib("serving").evaluate_configs(kv_budget_bytes=kw.get("budget", 12 * GiB),
                                    output_tokens=kw.get("outputs", 256))


EX_8_9 = Exercise("8-9", "A configuration that drafts from the context", notebook="8-9-configuration.ipynb",
                  core=True, parts=(
    Part("e_kv_mib", "KV and auxiliary memory of configuration E (MiB)", lambda: _e().loc["E", "kv_bytes"] / MiB),
    Part("e_total_s", "Total time of E for the sixteen requests (s)", lambda: _e().loc["E", "total_s"], rtol=2e-3),
    Part("e_gpu_s_per_good", "GPU-seconds per good result of E", lambda: _e().loc["E", "gpu_s_per_good"], rtol=3e-3),
    Part("best_12gib", "Cheapest configuration per good result among B, D and E with 12 GiB",
         lambda: _lib("serving").feasible(_e().loc[["B", "D", "E"]])[0]),
    Part("best_6gib", "The same with 6 GiB for KV",
         lambda: _lib("serving").feasible(_e(budget=6 * GiB).loc[["B", "D", "E"]])[0]),
    Part("best_16_outputs", "The same with 12 GiB and 16 output tokens",
         lambda: _lib("serving").feasible(_e(outputs=16).loc[["B", "D", "E"]])[0]),
    Part("experiment", "The open experiment: your trace, the two configurations, and their goodput"),
))

EXERCISES: dict[str, Exercise] = {e.id: e for e in (EX_8_1, EX_8_2, EX_8_3, EX_8_4, EX_8_5, EX_8_6, EX_8_7, EX_8_8,
                                                   EX_8_9)}
assert math.isfinite(sum(e.max_points for e in EXERCISES.values()))
