"""Choosing a configuration: memory against the budget, time against the deadline, then cost per good result.

A configuration is data: how the KV state is laid out (independent contexts or one cached shared
prefix), its storage format, and what speculation adds (tokens per round, draft memory, extra
prefill, a per-round lookup). ``evaluate_configs`` turns each into the three checks of section
8.6.3 for a batch of alike requests arriving together: KV bytes (fits?), total time (on time?) and
GPU-seconds and energy per good result.

Times follow the chapter's accounting: prefill is model FLOP at the measured MFU of the shared-prefix
batch (57.77 % of peak BF16), a decode round is either a measured step time or the step time of
experiment 8-1 interpolated in bytes read (``calibration.measured_decode_step``), never shorter
than the round's compute at 58 % MFU (section 8.2.1: the larger of the two bounds). A measured time
(B's 2.04 s prefill and 27.35 ms step) is used only for the shape it was measured at, 16 x 8K prompts
with 6K shared (the step: up to 256 outputs); any other workload is modelled, as A and C always are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from .. import calibration, example
from .._validate import finite_result, fraction, non_negative, non_negative_int, one_of, positive, positive_int
from ..compression.formats import block_format
from ..hardware import Accelerator
from ..memory import batch_kv_bytes
from ..models import ModelSpec
from ..units import GiB, MiB, ms

__all__ = [
    "KV_FORMAT_RATIO", "ServingConfig", "Workload", "CHAPTER_CONFIGS", "CHAPTER_WORKLOAD", "VERIFY_MFU",
    "MEASURED_SHARED_STEP_S", "MEASURED_ON", "MEASURED_SHARED_PREFILL_S", "feasible", "DRAFT_BYTES", "DRAFT_PREFILL_OVERHEAD", "kv_bytes", "config_prefill_time",
    "decode_rounds", "round_time", "tokens_per_round_needed", "prefix_fetch_time", "evaluate", "evaluate_configs",
    "STEP_SOURCES", "RoundBreakdown", "round_breakdown", "read_bound_rounds",
]

#: Bytes of a KV value in each storage format relative to BF16 (GGML blocks of 32: 34 and 18 bytes vs 64).
KV_FORMAT_RATIO: dict[str, float] = {f: block_format(f).ratio_to(2.0) for f in ("bf16", "q8_0", "q4_0")}
#: The card the step times and B's prefill were measured on (experiment 8-1).
MEASURED_ON = example.ACCELERATOR
#: Compute efficiency of a verification round (section 8.6.3 uses 58 %).
VERIFY_MFU = 0.58
#: Measured prefill of config B: 32,768 new tokens at r_P of about 16,059 tokens/s (experiment 8-1), seconds.
MEASURED_SHARED_PREFILL_S = 32_768 / 16_059
#: Measured decode step of config B: 8K prompts with 6K cached, batch 16 (experiment 8-1), seconds.
MEASURED_SHARED_STEP_S = 27.35 * ms
#: Extra device memory of the DFlash draft model (experiment 8-5: 17,706 -> 20,894 MiB).
DRAFT_BYTES = (20_894 - 17_706) * MiB
#: Extra prefill of the draft model (experiment 8-5: TTFT 129.4 -> 141.6 ms at about 2300 input tokens).
DRAFT_PREFILL_OVERHEAD = 0.094
#: Where a round's time comes from (``evaluate``'s ``step_source``): the measured step itself; that step moved to
#: another card's bandwidth; experiment 8-1 interpolated in bytes read; the verification compute, which is longer.
STEP_SOURCES = ("measured", "transferred", "modelled", "compute-bound")


def _instance(name: str, value: Any, kind: type) -> Any:
    """Return ``value`` if it is a ``kind``, else raise ValueError naming ``name``."""
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {type(value).__name__}: {value!r}")
    return value


@dataclass(frozen=True)
class Workload:
    """A batch of alike requests arriving together: prompts sharing their first tokens, a deadline."""

    n_requests: int = 16
    prompt_tokens: int = example.LONG.prompt_tokens
    output_tokens: int = example.LONG.output_tokens
    shared_prefix_tokens: int = example.LONG.shared_prefix_tokens
    deadline_s: float = example.DEADLINE_S

    def __post_init__(self) -> None:
        positive_int("n_requests", self.n_requests)
        positive_int("prompt_tokens", self.prompt_tokens)
        positive_int("output_tokens", self.output_tokens)
        non_negative_int("shared_prefix_tokens", self.shared_prefix_tokens)
        positive("deadline_s", self.deadline_s)
        if self.shared_prefix_tokens >= self.prompt_tokens:
            raise ValueError("shared_prefix_tokens must be smaller than prompt_tokens")


@dataclass(frozen=True)
class ServingConfig:
    """How one configuration stores state and generates: layout, format, speculation, measured step.

    ``decode_step_s`` (seconds per round) and ``prefill_s`` (seconds for the batch) are measurements of
    ``CHAPTER_WORKLOAD``'s shape on ``MEASURED_ON``; for any other shape they are modelled as when they are None.
    """

    name: str
    description: str
    shared_prefix: bool = False
    kv_format: str = "bf16"
    tokens_per_round: float = 1.0
    draft_bytes: float = 0.0
    prefill_overhead: float = 0.0
    round_overhead_s: float = 0.0
    verify_positions: int = 1
    decode_step_s: float | None = None  # measured round time; None: interpolate experiment 8-1 in bytes read
    prefill_s: float | None = None  # measured prefill of the batch; None: model FLOP at the measured MFU

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty str, got {self.name!r}")
        _instance("description", self.description, str)
        _instance("shared_prefix", self.shared_prefix, bool)
        one_of("kv_format", _instance("kv_format", self.kv_format, str), KV_FORMAT_RATIO)
        if positive("tokens_per_round", self.tokens_per_round) < 1:
            raise ValueError(f"tokens_per_round must be a finite number >= 1, got {self.tokens_per_round!r}")
        non_negative("draft_bytes", self.draft_bytes)
        non_negative("prefill_overhead", self.prefill_overhead)
        non_negative("round_overhead_s", self.round_overhead_s)
        positive_int("verify_positions", self.verify_positions)
        if self.decode_step_s is not None:
            positive("decode_step_s", self.decode_step_s)
        if self.prefill_s is not None:
            positive("prefill_s", self.prefill_s)


CHAPTER_WORKLOAD = Workload()

CHAPTER_CONFIGS: dict[str, ServingConfig] = {
    c.name: c for c in (
        ServingConfig("A", "BF16, independent contexts"),
        ServingConfig("B", "BF16, shared prefix", shared_prefix=True,
                      prefill_s=MEASURED_SHARED_PREFILL_S, decode_step_s=MEASURED_SHARED_STEP_S),
        ServingConfig("C", "q8_0, independent contexts", kv_format="q8_0"),
        ServingConfig("D", "BF16, shared prefix + draft model (3 tokens per round)", shared_prefix=True,
                      tokens_per_round=3, draft_bytes=DRAFT_BYTES, prefill_overhead=DRAFT_PREFILL_OVERHEAD,
                      verify_positions=8, prefill_s=MEASURED_SHARED_PREFILL_S,
                      decode_step_s=MEASURED_SHARED_STEP_S),
        ServingConfig("E", "BF16, shared prefix + context lookup (2 tokens per round)", shared_prefix=True,
                      tokens_per_round=2, round_overhead_s=0.1 * ms, prefill_s=MEASURED_SHARED_PREFILL_S,
                      decode_step_s=MEASURED_SHARED_STEP_S),
    )
}


def _prefill_shape(workload: Workload) -> tuple[int, int, int]:
    return workload.n_requests, workload.prompt_tokens, workload.shared_prefix_tokens


def _measured_step_applies(config: ServingConfig, workload: Workload) -> bool:
    """Whether ``config.decode_step_s`` was measured at this workload's shape.

    The measured steps of B, D and E are the mean over 255 rounds at 16 x 8K prompts, 6K shared: a workload of
    that batch with up to 256 outputs runs (a subset of) those steps; any other batch, prompt or longer output does not.
    """
    return (config.decode_step_s is not None and _prefill_shape(workload) == _prefill_shape(CHAPTER_WORKLOAD)
            and workload.output_tokens <= CHAPTER_WORKLOAD.output_tokens)


_UNUSED = object()


def _check(config: Any, workload: Any, model: Any = _UNUSED, accelerator: Any = _UNUSED) -> None:
    """Raise ValueError naming the first argument of the wrong type (model, accelerator: where the caller has one)."""
    _instance("config", config, ServingConfig)
    _instance("workload", workload, Workload)
    if model is not _UNUSED:
        _instance("model", model, ModelSpec)
    if accelerator is not _UNUSED:
        _instance("accelerator", accelerator, Accelerator)


def kv_bytes(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD,
             model: ModelSpec = example.MODEL) -> float:
    """KV and auxiliary bytes of the whole batch at completion, draft model included."""
    _check(config, workload, model)
    shared = workload.shared_prefix_tokens if config.shared_prefix else 0
    kv = batch_kv_bytes(workload.n_requests, model, workload.prompt_tokens, workload.output_tokens,
                        shared_prefix_tokens=shared)
    return kv * KV_FORMAT_RATIO[config.kv_format] + config.draft_bytes


def config_prefill_time(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD, model: ModelSpec = example.MODEL,
                 accelerator: Accelerator = example.ACCELERATOR,
                 mfu: float = calibration.PREFILL_MFU_SHARED_BATCH16) -> float:
    """Seconds to prefill the batch (a cached shared prefix is not recomputed), draft overhead included.

    A measured ``config.prefill_s`` is used for the batch it was measured on (the chapter's 16 x 8K, 6K shared).
    ``mfu``: fraction of peak BF16 FLOP/s in (0, 1].
    """
    _check(config, workload, model, accelerator)
    if fraction("mfu", mfu) == 0:
        raise ValueError(f"mfu must lie in (0, 1], got {mfu!r}")
    if (config.prefill_s is not None and accelerator == MEASURED_ON
            and _prefill_shape(workload) == _prefill_shape(CHAPTER_WORKLOAD)):
        return config.prefill_s * (1 + config.prefill_overhead)
    cached = workload.shared_prefix_tokens if config.shared_prefix else 0
    one = calibration.prefill_time(model, accelerator, workload.prompt_tokens - cached, cached, mfu=mfu)
    return workload.n_requests * one * (1 + config.prefill_overhead)


def decode_rounds(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD) -> int:
    """Rounds after the first token: ceil((G - 1) / tokens per round)."""
    _check(config, workload)
    return math.ceil((workload.output_tokens - 1) / config.tokens_per_round)


@dataclass(frozen=True)
class RoundBreakdown:
    """What one decode round reads and computes, and the time that follows (seconds; ``source``: ``STEP_SOURCES``)."""

    read_bytes: float  # weights read once plus every request's KV, in the configuration's KV format
    verify_flops: float  # the batch's verification pass over verify_positions per request
    step_s: float  # the memory-side step
    compute_s: float  # the verification compute at VERIFY_MFU
    overhead_s: float  # per-round work beside the pass (a lookup)
    source: str

    def __post_init__(self) -> None:
        for name in ("read_bytes", "verify_flops", "step_s", "compute_s", "overhead_s"):
            non_negative(name, getattr(self, name))
        one_of("source", self.source, STEP_SOURCES)

    @property
    def round_s(self) -> float:
        """The longer of the memory-side step and the verification compute, plus the per-round overhead."""
        return max(self.step_s, self.compute_s) + self.overhead_s


def round_breakdown(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD, model: ModelSpec = example.MODEL,
                    accelerator: Accelerator = example.ACCELERATOR) -> RoundBreakdown:
    """Bytes read, verification FLOP and the times of one decode round (``round_time`` is its ``round_s``)."""
    _check(config, workload, model, accelerator)
    # the chapter reads each prompt's KV once per round (34.46 GB for sixteen 8K contexts)
    kv_read = workload.n_requests * workload.prompt_tokens * model.kv_bytes_per_token()
    read = model.matrix_weight_bytes() + kv_read * KV_FORMAT_RATIO[config.kv_format]
    if _measured_step_applies(config, workload):
        step, source = config.decode_step_s, "measured"
    else:
        step, source = calibration.measured_decode_step(read), "modelled"
    if accelerator != MEASURED_ON:
        step = step - MEASURED_ON.memory_time(read) + accelerator.memory_time(read)
        source = "transferred" if source == "measured" else source
    verify_flops = workload.n_requests * model.flops(
        config.verify_positions, workload.prompt_tokens, logits=config.verify_positions)
    compute = accelerator.compute_time(verify_flops, VERIFY_MFU)
    if compute > step:
        source = "compute-bound"
    return RoundBreakdown(read, verify_flops, step, compute, config.round_overhead_s, source)


def read_bound_rounds(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD, model: ModelSpec = example.MODEL,
                      accelerator: Accelerator = example.ACCELERATOR) -> list[float]:
    """Seconds of each decode round if it took only its reads at the accelerator's peak bandwidth: no per-step
    overhead, no compute. Unlike ``round_breakdown`` (each request's prompt), round r reads every request's
    context as it has grown, prompt + 1 + (r - 1) x tokens per round, in the configuration's KV format."""
    _check(config, workload, model, accelerator)
    per_token = workload.n_requests * model.kv_bytes_per_token() * KV_FORMAT_RATIO[config.kv_format]
    return [accelerator.memory_time(model.matrix_weight_bytes()
                                    + per_token * (workload.prompt_tokens + 1 + r * config.tokens_per_round))
            for r in range(decode_rounds(config, workload))]


def round_time(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD, model: ModelSpec = example.MODEL,
               accelerator: Accelerator = example.ACCELERATOR) -> float:
    """Seconds per decode round: max(memory-side step, verification compute) plus any per-round lookup.

    The memory-side step is measured on the RTX PRO 6000: B's 27.35 ms at the shape it was measured at
    (16 x 8K prompts, 6K shared, up to 256 outputs), otherwise experiment 8-1 interpolated in bytes read,
    as for A and C. On another card the step keeps its fixed part (the measured step minus its reads at
    peak bandwidth: the engine's per-step overhead) and reads the same bytes at that card's bandwidth.
    """
    return round_breakdown(config, workload, model, accelerator).round_s


def tokens_per_round_needed(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD,
                            model: ModelSpec = example.MODEL,
                            accelerator: Accelerator = example.ACCELERATOR) -> float:
    """Fewest tokens per round that still meet the deadline at this round time (inf if prefill alone is too late)."""
    _check(config, workload, model, accelerator)
    step = round_time(config, workload, model, accelerator)
    rounds = math.floor((workload.deadline_s - config_prefill_time(config, workload, model, accelerator)) / step)
    if rounds < 1:
        return math.inf
    return max(1.0, (workload.output_tokens - 1) / rounds)


def prefix_fetch_time(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD,
                      model: ModelSpec = example.MODEL, link_bandwidth: float | None = None) -> float:
    """Seconds to bring a shared prefix's KV from host memory over ``link_bandwidth`` (bytes/s; None: on the device)."""
    return _prefix_fetch(config, workload, model, link_bandwidth, "link_bandwidth")


def _prefix_fetch(config: ServingConfig, workload: Workload, model: ModelSpec, link_bandwidth: float | None,
                  name: str) -> float:
    """``prefix_fetch_time`` with the bandwidth's parameter called ``name`` in its errors."""
    _check(config, workload, model)
    if link_bandwidth is not None:
        positive(name, link_bandwidth)
    if link_bandwidth is None or not config.shared_prefix:
        return 0.0
    prefix = workload.shared_prefix_tokens * model.kv_bytes_per_token() * KV_FORMAT_RATIO[config.kv_format]
    return finite_result(prefix / link_bandwidth, name)


def evaluate(config: ServingConfig, workload: Workload = CHAPTER_WORKLOAD,
             kv_budget_bytes: float = example.KV_BUDGET_BYTES, model: ModelSpec = example.MODEL,
             accelerator: Accelerator = example.ACCELERATOR,
             prefix_link_bandwidth: float | None = None) -> dict[str, float | bool | str]:
    """One configuration's checks: KV bytes vs budget, total time vs deadline, GPU-s and joules per good result.

    ``prefix_link_bandwidth``: None when the cached prefix is already on the device (the chapter's case);
    otherwise it waits in host memory and is copied over a link of that bandwidth (bytes/s) before prefill.
    ``step_source`` says where ``round_s`` comes from (``STEP_SOURCES``): "measured" only at the shape the
    step was measured at, on the card it was measured on. ``gpu_s_per_good`` and ``energy_j_per_good`` are
    infinite when no result is good (the batch does not fit or misses the deadline).
    """
    _check(config, workload, model, accelerator)
    positive("kv_budget_bytes", kv_budget_bytes)
    if prefix_link_bandwidth is not None:
        positive("prefix_link_bandwidth", prefix_link_bandwidth)
    kv = kv_bytes(config, workload, model)
    prefill = config_prefill_time(config, workload, model, accelerator) + _prefix_fetch(
        config, workload, model, prefix_link_bandwidth, "prefix_link_bandwidth")
    rounds = decode_rounds(config, workload)
    breakdown = round_breakdown(config, workload, model, accelerator)
    step, source = breakdown.round_s, breakdown.source
    total = prefill + rounds * step
    fits = kv <= kv_budget_bytes
    on_time = total <= workload.deadline_s
    good = workload.n_requests if fits and on_time else 0
    gpu_s_per_good = total / good if good else math.inf
    return {"description": config.description, "kv_bytes": kv, "kv_gib": kv / GiB, "prefill_s": prefill,
            "rounds": rounds, "round_s": step, "step_source": source, "total_s": total, "fits": fits,
            "on_time": on_time, "good": good, "gpu_s_per_good": gpu_s_per_good,
            "energy_j_per_good": accelerator.power_w * gpu_s_per_good}


def _workload(workload: Workload | None, deadline_s: float | None, output_tokens: int | None) -> Workload:
    """The one workload that ``evaluate_configs``'s three workload arguments describe (see there)."""
    given = {}
    if deadline_s is not None:
        given["deadline_s"] = positive("deadline_s", deadline_s)
    if output_tokens is not None:
        given["output_tokens"] = positive_int("output_tokens", output_tokens)
    if workload is None:
        return replace(CHAPTER_WORKLOAD, **given)
    _instance("workload", workload, Workload)
    for name, value in given.items():
        if value != getattr(workload, name):
            raise ValueError(f"{name}={value!r} disagrees with workload.{name}={getattr(workload, name)!r}; "
                             f"give it once (in workload, or as {name} without workload)")
    return workload


def evaluate_configs(configs: Iterable[ServingConfig] | dict[str, ServingConfig] | None = None,
                     kv_budget_bytes: float = example.KV_BUDGET_BYTES, deadline_s: float | None = None,
                     output_tokens: int | None = None,
                     workload: Workload | None = None,
                     accelerator: Accelerator = example.ACCELERATOR,
                     prefix_link_bandwidth: float | None = None) -> pd.DataFrame:
    """Evaluate configurations (default: the chapter's A-E) for one workload; one row per configuration.

    The workload is ``workload`` (default: ``CHAPTER_WORKLOAD``). ``deadline_s`` (seconds) and ``output_tokens``
    are shorthands for its fields: without ``workload`` they replace the chapter's values; with it they must
    equal its fields, and a conflict raises ValueError naming both. Configuration names must be distinct.

    On a card other than the RTX PRO 6000 the times are transferred as ``config_prefill_time`` and ``round_time``
    say (same efficiencies and per-step overhead, that card's peaks): an estimate, not a measurement.
    ``step_source`` says for each row whether its round time is the measurement or the model (``evaluate``).

    ``gpu_s_per_good`` and ``energy_j_per_good`` are infinite when a configuration returns no good result.
    """
    chosen = CHAPTER_CONFIGS if configs is None else configs
    if isinstance(chosen, (str, bytes)) or not isinstance(chosen, Iterable):
        raise ValueError(f"configs must be a dict or an iterable of ServingConfig, got {type(chosen).__name__}")
    items = list(chosen.values()) if isinstance(chosen, dict) else list(chosen)
    if not items:
        raise ValueError("configs must hold at least one ServingConfig")
    for c in items:
        if not isinstance(c, ServingConfig):
            raise ValueError(f"configs must hold ServingConfig objects, got {type(c).__name__}")
    names = [c.name for c in items]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"configs must name each configuration once; {name!r} appears {names.count(name)} times")
    wl = _workload(workload, deadline_s, output_tokens)
    rows = {c.name: evaluate(c, wl, kv_budget_bytes, accelerator=accelerator,
                             prefix_link_bandwidth=prefix_link_bandwidth) for c in items}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("config")


def feasible(table: pd.DataFrame) -> list[str]:
    """Names of the configurations that fit and finish on time, cheapest per good result first.

    ``table``: an ``evaluate_configs`` result (columns fits, on_time, gpu_s_per_good).
    """
    _instance("table", table, pd.DataFrame)
    missing = [c for c in ("fits", "on_time", "gpu_s_per_good") if c not in table.columns]
    if missing:
        raise ValueError(f"table must have the columns of evaluate_configs, missing {missing}")
    ok = table[table["fits"] & table["on_time"]]
    return list(ok.sort_values("gpu_s_per_good").index)
