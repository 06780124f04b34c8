"""The contract suite: every public callable of the library, driven with hostile values.

Discovery, not a list: the suite walks ``inferlab``'s modules (all but ``NOT_LIBRARY``); a package
contributes its ``__all__``, a plain module every public name it defines. Each function, each
class (its constructor) and each public method of such a class (``__call__`` too) is a target; a
Protocol (a signature, not a callable) and an exception class are not. ``inspect.signature`` gives
a target's parameters, so a function added later is driven without being listed here.

Every parameter in turn gets hostile values built from its annotation and its valid value (wrong
types, NaN, inf, negative, zero, huge, empty, wrong shapes and dtypes: unsigned, bool, complex,
object), while the others keep valid values: the defaults, or ``VALID``'s entry, the small table of
example arguments a target needs to be called at all. A target with a parameter that has neither
a default nor an entry fails loudly (``test_every_target_can_be_called``): nothing is skipped.

The contract, for each call: it raises ValueError or TypeError whose message names the parameter
and says what is allowed, leaving every argument and the instance as they were (``BlockManager``,
``RadixCache``, ``PagedKVCache``, arrays written in place: compared by ``_fingerprint``); or it
returns a result without NaN or inf unless the callable's docstring documents them. A value of the
wrong kind (``Hostile.refuse``: a str for a number, NaN for a count, a bool array for data ...)
must be refused. A call also must finish within ``CALL_LIMIT_S`` CPU seconds and ``CALL_MEMORY_BYTES`` more.

Each target's catalogue of hostile values runs exhaustively under Hypothesis (a finite
``sampled_from``, derandomized), then about ``DRAWN_PER_PARAMETER`` random draws per parameter (numbers
small or beyond any count the library takes, sequences, arrays of any dtype and a nearby shape).
Violations are collected, not raised one by one, so a failing target reports all of its violations at
once. One test per target: xdist spreads them; the module takes about 20 s on one core.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import signal
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import inferlab
from inferlab import compression, scheduling, serving, workloads
from inferlab.hardware import ACCELERATORS
from inferlab.kernels import PagedKVCache, TinyConfig, TinyQwen3
from inferlab.kvcache import LRU, BlockManager, ContextUpdate, PrefixCost, RadixCache, RadixNode
from inferlab.models import MODELS
from inferlab.scheduling import FITTED_COST, Engine, KVBlockLimit, NoLimit, Request, Work, simulate
from inferlab.speculative.ngram import NgramLM
from inferlab.timeline import RequestTimes

#: Parts of the package outside the contract: they present, grade or execute the book, or need a GPU.
NOT_LIBRARY = {
    "book": "presents the book (figures, widgets, the Sphinx extension)",
    "gpu": "measurements on a real GPU (torch)",
    "exercises": "the exercises' catalogue and grader",
    "grade": "the grader's command line",
    "headless": "notebook execution",
}
#: CPU seconds and extra bytes of address space one call may take (a hang or a runaway allocation is a violation).
CALL_LIMIT_S = 2.0
CALL_MEMORY_BYTES = 2 << 30
#: Random values drawn per parameter after the catalogue.
DRAWN_PER_PARAMETER = 3


# ---- discovery ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One public callable: a function, a class (its constructor) or a method of a class."""

    id: str  # "module:qualname", e.g. "kvcache:BlockManager.allocate"
    obj: Callable
    bound: bool  # a method called on an instance (not a classmethod or staticmethod)
    params: tuple[inspect.Parameter, ...]
    doc: str  # the callable's docstring and its class's: where NaN or inf results are documented

    def __repr__(self) -> str:
        return self.id


def _parameters(obj: Callable, bound: bool) -> tuple[inspect.Parameter, ...]:
    params = [p for p in inspect.signature(obj).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return tuple(params[1:] if bound else params)


def _public_names(module: object, package: bool) -> list[str]:
    if package:
        return list(module.__all__)
    return [n for n, o in vars(module).items() if not n.startswith("_") and getattr(o, "__module__", None) == module.__name__]


def _methods(cls: type) -> Iterator[tuple[str, Callable, bool]]:
    """(name, callable, bound) of the public methods a class defines or inherits from the library."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("inferlab."):
            continue
        for name, raw in vars(klass).items():
            if name in seen or (name.startswith("_") and name != "__call__"):
                continue
            if isinstance(raw, (staticmethod, classmethod)):
                seen.add(name)
                yield name, getattr(cls, name), False
            elif inspect.isfunction(raw):
                seen.add(name)
                yield name, raw, True


def discover() -> list[Target]:
    """Every public callable of the library (see the module docstring)."""
    targets: list[Target] = []
    done: set[int] = set()
    for info in sorted(pkgutil.iter_modules(inferlab.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_LIBRARY:
            continue
        module = importlib.import_module(f"inferlab.{info.name}")
        for name in _public_names(module, info.ispkg):
            obj = getattr(module, name)
            if id(obj) in done or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants and type aliases are not callables of their own
            if inspect.isclass(obj) and (getattr(obj, "_is_protocol", False) or issubclass(obj, BaseException)):
                continue
            done.add(id(obj))
            doc = inspect.getdoc(obj) or ""
            targets.append(Target(f"{info.name}:{name}", obj, False, _parameters(obj, False), doc))
            if inspect.isclass(obj):
                for method, fn, bound in _methods(obj):
                    targets.append(Target(f"{info.name}:{name}.{method}", fn, bound, _parameters(fn, bound),
                                          (inspect.getdoc(fn) or "") + "\n" + doc))
    return targets


# ---- valid arguments -----------------------------------------------------------------------------
MODEL = MODELS["qwen3-8b"]
CARD = ACCELERATORS["rtx-pro-6000"]
TINY = TinyConfig(n_layers=1, n_heads=2, n_kv_heads=1, head_dim=4, hidden_size=8, intermediate_size=8,
                  vocab_size=16)
R1, R2, R3 = Request("r1", 0.0, 16, 4), Request("r2", 0.01, 32, 3), Request("r3", 0.02, 8, 2)


def _f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape).astype(np.float32)


def _manager() -> BlockManager:
    """Two sequences sharing blocks (a fork), a preempted one and a step in flight."""
    bm = BlockManager(12, 4)
    bm.allocate("a", list(range(1, 11)))
    bm.fork("a", "b")
    bm.allocate("p", [20, 21, 22, 23, 24])
    bm.preempt("p")
    bm.begin_step(["a"])
    return bm


def _radix() -> RadixCache:
    cache = RadixCache(64)
    cache.insert([1, 2, 3, 4, 5])
    cache.insert([1, 2, 9, 9])
    return cache


def _locked(cache: RadixCache) -> RadixNode:
    node = cache.match([1, 2, 3]).node
    cache.lock(node)
    return node


def _paged() -> PagedKVCache:
    cache = PagedKVCache(2, 2, 4, 8, 4)
    cache.admit("a", [1, 2, 3, 4, 5, 6])
    return cache


def _prefilled(model: TinyQwen3) -> PagedKVCache:
    cache = model.new_cache(8, 4)
    model.prefill(cache, "s", [1, 2, 3])
    return cache


@lru_cache(maxsize=None)
def _ngram() -> NgramLM:
    return NgramLM.fit()


@lru_cache(maxsize=None)
def _records() -> pd.DataFrame:
    return serving.serve([R1, R2, R3], deadline_s=1.0)


@lru_cache(maxsize=None)
def _sweep() -> pd.DataFrame:
    return scheduling.budget_sweep([R1, R2], [64, 128])


@lru_cache(maxsize=None)
def _schedule():
    return simulate([R1, R2], "continuous", max_running=2)


@lru_cache(maxsize=None)
def _session() -> tuple[workloads.TraceRequest, ...]:
    return tuple(workloads.agent_session(turns=3))


def _trace_table() -> pd.DataFrame:
    """A few requests in the layout of ``serving.azure_conv()``."""
    return pd.DataFrame({"arrived_at": [0.0, 0.5, 1.5, 2.5], "num_prefill_tokens": [16, 32, 8, 16],
                         "num_decode_tokens": [4, 2, 3, 2]})


def _spread() -> list[Request]:
    return [Request(f"d{i}", 0.3 * i + 0.1 * (i % 3), 16, 4) for i in range(10)]


def _update() -> ContextUpdate:
    return ContextUpdate("summarize, then append", 0, 24, 8, 24, read_cached_tokens=64)


def _prefix_cost() -> PrefixCost:
    return PrefixCost(128, 1e6, 0.1, 0.01, 0.01)


def _fields(obj: object) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}


def _quantized() -> np.ndarray:
    return compression.quantize(np.linspace(-1, 1, 64, dtype=np.float32), "q8_0")


def _fp8_codes() -> np.ndarray:
    return compression.fp8_e4m3_encode(np.linspace(-1, 1, 32, dtype=np.float32))[0]


def _q2_block() -> np.ndarray:
    return compression.quantize(np.linspace(-1, 1, 256, dtype=np.float32), "q2_K").reshape(-1)


def _config(name: str) -> serving.ServingConfig:
    return serving.CHAPTER_CONFIGS[name]


@lru_cache(maxsize=None)
def _evaluated() -> pd.DataFrame:
    return serving.evaluate_configs()



_ROOF = dict(matrix_weight_bytes=1e9, kv_bytes_per_token=1e5, peak_flops=1e15, bandwidth=2e12)

#: Example arguments per target (a function: ``lambda: {...}``; a method: ``lambda instance: {...}``), fresh per
#: call. Parameters not given here keep their defaults; an entry may also replace a default by a cheaper value.
VALID: dict[str, Callable[..., dict]] = {
    "calibration:prefill_time": lambda: dict(model=MODEL, accelerator=CARD, new_tokens=128),
    "calibration:measured_decode_step": lambda: dict(read_bytes=20e9),
    "calibration:hidden_read_share": lambda: dict(accelerator=CARD),
    "compression:BlockFormat": lambda: dict(name="q8_0", block_values=32, block_bytes=34, code_bits=8,
                                            description="int8 codes"),
    "compression:BlockFormat.stored_bytes": lambda f: dict(n_values=100),
    "compression:block_format": lambda: dict(fmt="q8_0"),
    "compression:dequantize": lambda: dict(data=_quantized(), fmt="q8_0"),
    "compression:fp8_e4m3_decode": lambda: dict(codes=_fp8_codes()),
    "compression:fp8_e4m3_encode": lambda: dict(x=np.linspace(-1, 1, 32, dtype=np.float32)),
    "compression:fp8_e4m3_round_trip": lambda: dict(x=np.linspace(-1, 1, 32, dtype=np.float32)),
    "compression:fp8_e4m3_scale": lambda: dict(x=np.linspace(-1, 1, 32, dtype=np.float32)),
    "compression:q2_K_fields": lambda: dict(block=_q2_block()),
    "compression:read_floor_share": lambda: dict(kv_bytes_per_token=131_072.0,
                                                 line=compression.kv.ITL_BF16_H100, bandwidth=3.35e12),
    "compression:quantize": lambda: dict(x=np.linspace(-1, 1, 64, dtype=np.float32), fmt="q8_0"),
    "compression:round_trip": lambda: dict(x=np.linspace(-1, 1, 64, dtype=np.float32), fmt="q8_0"),
    "compression:to_bf16": lambda: dict(x=np.linspace(-1, 1, 8, dtype=np.float32)),
    "datasets:published": lambda: dict(name="batch_sweep_8_1"),
    "datasets:trace": lambda: dict(name="azure_conv_2023"),
    "example:RequestClass": lambda: dict(name="short", prompt_tokens=16, output_tokens=4),
    "example:short_request_in_batch": lambda: dict(batch=16),
    "hardware:Accelerator": lambda: dict(name="card", memory_bytes=8e10, hbm_bandwidth=2e12, peak_bf16_flops=1e15,
                                         power_w=700.0, host_link_bandwidth=6.4e10, host_link="PCIe", source="test"),
    "hardware:Accelerator.memory_time": lambda a: dict(n_bytes=1e9),
    "hardware:Accelerator.compute_time": lambda a: dict(flops=1e12),
    "hardware:Accelerator.transfer_time": lambda a: dict(n_bytes=1e9),
    "kernels:attention": lambda: dict(q=_f32(3, 4, 4), k=_f32(5, 2, 4), v=_f32(5, 2, 4)),
    "kernels:gather_kv": lambda: dict(cache=_f32(6, 4, 2, 4), block_table=[0, 1], n_tokens=6),
    "kernels:paged_attention": lambda: dict(q=_f32(2, 4, 4), k_cache=_f32(6, 4, 2, 4), v_cache=_f32(6, 4, 2, 4),
                                            block_tables=np.array([[0, 1], [2, -1]]), context_lens=np.array([6, 3])),
    "kernels:paged_prefill_attention": lambda: dict(q=_f32(2, 4, 4), k_cache=_f32(6, 4, 2, 4),
                                                    v_cache=_f32(6, 4, 2, 4), block_table=[0, 1], context_len=6),
    "kernels:slot_mapping": lambda: dict(block_table=[3, 1], start=2, n_tokens=4, block_size=4),
    "kernels:tables_from_manager": lambda: dict(manager=_manager(), seq_ids=["a", "b"]),
    "kernels:write_kv": lambda: dict(k_cache=np.zeros((6, 4, 2, 4), np.float32), v_cache=np.zeros((6, 4, 2, 4), np.float32),
                                     block_table=[0, 1], start=1, k=_f32(3, 2, 4), v=_f32(3, 2, 4)),
    "kernels:PagedKVCache": lambda: dict(n_layers=2, n_kv_heads=2, head_dim=4, num_blocks=8, block_size=4),
    "kernels:PagedKVCache.can_admit": lambda c: dict(tokens=[1, 2, 3]),
    "kernels:PagedKVCache.admit": lambda c: dict(seq_id="new", tokens=[1, 2, 3]),
    "kernels:PagedKVCache.can_append": lambda c: dict(seq_id="a", n_tokens=2),
    "kernels:PagedKVCache.append": lambda c: dict(seq_id="a", tokens=[7, 8]),
    "kernels:PagedKVCache.truncate": lambda c: dict(seq_id="a", n_tokens=3),
    "kernels:PagedKVCache.free": lambda c: dict(seq_id="a"),
    "kernels:PagedKVCache.length": lambda c: dict(seq_id="a"),
    "kernels:PagedKVCache.block_table": lambda c: dict(seq_id="a"),
    "kernels:PagedKVCache.tables": lambda c: dict(seq_ids=["a"]),
    "kernels:PagedKVCache.write": lambda c: dict(layer=0, seq_id="a", start=0, k=_f32(6, 2, 4), v=_f32(6, 2, 4)),
    "kernels:PagedKVCache.write_slots": lambda c: dict(layer=0, slots=np.array([0, 1]), k=_f32(2, 2, 4),
                                                       v=_f32(2, 2, 4)),
    "kernels:PagedKVCache.read": lambda c: dict(layer=0, seq_id="a"),
    "kernels:TinyConfig.from_spec": lambda: dict(spec=TINY.spec),
    "kernels:TinyQwen3": lambda: dict(config=TINY),
    "kernels:TinyQwen3.new_cache": lambda m: dict(num_blocks=8, block_size=4),
    "kernels:TinyQwen3.forward": lambda m: dict(tokens=[1, 2, 3]),
    "kernels:TinyQwen3.prefill": lambda m: dict(cache=m.new_cache(8, 4), seq_id="s", prompt=[1, 2, 3]),
    "kernels:TinyQwen3.extend": lambda m: dict(cache=_prefilled(m), seq_id="s", tokens=[4, 5]),
    "kernels:TinyQwen3.decode": lambda m: dict(cache=_prefilled(m), seq_ids=["s"], tokens=[4]),
    "kernels:TinyQwen3.generate": lambda m: dict(cache=m.new_cache(8, 4), seq_id="g", prompt=[1, 2], n_tokens=3),
    "kernels:TinyQwen3.verify": lambda m: dict(cache=_prefilled(m), seq_id="s", pending=4, draft=[5, 6]),
    "kvcache:BlockManager": lambda: dict(num_blocks=8, block_size=4),
    "kvcache:ReservationRun": lambda: dict(reserve="answer", num_blocks=64, admitted=2, reserved_blocks=20,
                                           used_blocks=(10, 12), completed=True, ran_dry_at=None, stuck=0),
    "kvcache:admit_and_decode": lambda: dict(num_blocks=64, prompt_tokens=40, output_tokens=8),
    "kvcache:max_batch": lambda: dict(kv_budget_bytes=12 * 2**30, kv_bytes_per_token=147_456, prompt_tokens=2048,
                                      output_tokens=256),
    "kvcache:pool_blocks": lambda: dict(kv_budget_bytes=12 * 2**30, model=MODELS["qwen3-8b"]),
    "kvcache:BlockManager.ref_count": lambda b: dict(block_id=0),
    "kvcache:BlockManager.is_free": lambda b: dict(block_id=0),
    "kvcache:BlockManager.block_tokens": lambda b: dict(block_id=0),
    "kvcache:BlockManager.block_prefix": lambda b: dict(block_id=0),
    "kvcache:BlockManager.block_table": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.batch_tables": lambda b: dict(seq_ids=["a", "b"]),
    "kvcache:BlockManager.num_tokens": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.last_block_fill": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.read": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.blocks_needed": lambda b: dict(tokens=[1, 2, 3, 4, 5]),
    "kvcache:BlockManager.can_allocate": lambda b: dict(tokens=[1, 2, 3, 4, 5]),
    "kvcache:BlockManager.append_blocks_needed": lambda b: dict(seq_id="a", n_tokens=2),
    "kvcache:BlockManager.can_append": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.allocate": lambda b: dict(seq_id="new", tokens=[1, 2, 3]),
    "kvcache:BlockManager.append": lambda b: dict(seq_id="a", tokens=[5, 6]),
    "kvcache:BlockManager.append_token": lambda b: dict(seq_id="a", token=7),
    "kvcache:BlockManager.fork": lambda b: dict(parent_id="a", child_id="c"),
    "kvcache:BlockManager.truncate": lambda b: dict(seq_id="a", n_tokens=5),
    "kvcache:BlockManager.free": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.preempt": lambda b: dict(seq_id="a"),
    "kvcache:BlockManager.resume": lambda b: dict(seq_id="p"),
    "kvcache:BlockManager.begin_step": lambda b: dict(seq_ids=["a"]),
    "kvcache:BlockManager.end_step": lambda b: dict(step_id=b.steps_in_flight[0]),
    "kvcache:PoolState": lambda: _fields(_manager().state()),
    "kvcache:SeqState": lambda: dict(tokens=[1, 2, 3]),
    "kvcache:LRU.score": lambda p: (lambda c: dict(node=c.match([1, 2]).node, cache=c))(_radix()),
    "kvcache:Match": lambda: dict(length=2, node=RadixNode()),
    "kvcache:RadixCache": lambda: dict(capacity_tokens=64),
    "kvcache:RadixCache.match": lambda c: dict(tokens=[1, 2, 3]),
    "kvcache:RadixCache.peek": lambda c: dict(tokens=[1, 2, 3]),
    "kvcache:RadixCache.lock": lambda c: dict(node=c.match([1, 2, 3]).node),
    "kvcache:RadixCache.unlock": lambda c: dict(node=_locked(c)),
    "kvcache:RadixCache.insert": lambda c: dict(tokens=[1, 2, 7], reuse_hint=0.5),
    "kvcache:RadixCache.evict": lambda c: dict(n_tokens=2),
    "kvcache:RadixCache.prefix_of": lambda c: dict(node=c.match([1, 2, 3]).node),
    "kvcache:ValuePerByte": lambda: dict(saving_s=lambda n, c: 1e-3 * n, bytes_per_token=1024.0),
    "kvcache:ValuePerByte.hit_probability": lambda p: (lambda c: dict(node=c.match([1, 2]).node, cache=c))(_radix()),
    "kvcache:ValuePerByte.score": lambda p: (lambda c: dict(node=c.match([1, 2]).node, cache=c))(_radix()),
    "kvcache:eviction_sweep": lambda: dict(requests=list(_session()), pool_bytes=[1e6], bytes_per_token=1024.0,
                                           policies={"LRU": LRU}),
    "kvcache:replay": lambda: dict(requests=list(_session()), capacity_tokens=512),
    "kvcache:smallest_pool": lambda: dict(pool_sizes=[1.0, 2.0, 4.0], hits=[1, 3, 4]),
    "kvcache:standard_policies": lambda: dict(model=MODEL, accelerator=CARD),
    "kvcache:ContextUpdate": lambda: dict(name="append", reused_tokens=8, processed_tokens=2, generated_tokens=0,
                                          context_after=10),
    "kvcache:PrefixCost": lambda: _fields(_prefix_cost()),
    "kvcache:PrefixCost.value": lambda c: dict(p_hit=0.5),
    "kvcache:PrefixCost.value_per_byte": lambda c: dict(p_hit=0.5),
    "kvcache:PrefixCost.break_even_maintenance": lambda c: dict(p_hit=0.5),
    "kvcache:PrefixCost.hit_probability_for": lambda c: dict(target_s=0.01),
    "kvcache:generation_time": lambda: dict(update=_update(), model=MODEL),
    "kvcache:best_use_of_space": lambda: dict(candidates=[(_prefix_cost(), 0.5)], capacity_bytes=2e6),
    "kvcache:break_even_hit_probability": lambda: dict(recompute_s=0.1, fetch_s=0.01, maintain_s=0.01),
    "kvcache:expected_saving": lambda: dict(p_hit=0.5, recompute_s=0.1, fetch_s=0.01, maintain_s=0.01),
    "kvcache:keep_ratio_threshold": lambda: dict(p_hit=0.5),
    "kvcache:prefix_cost": lambda: dict(model=MODEL, accelerator=CARD, tokens=128),
    "kvcache:recompute_to_fetch_ratio": lambda: dict(model=MODEL, accelerator=CARD, tokens=[128, 256]),
    "kvcache:slowest_paying_link": lambda: dict(model=MODEL, accelerator=CARD, tokens=128, p_hit=0.5),
    "kvcache:SessionGap": lambda: dict(competing_bytes=2048.0, session_bytes=1024.0),
    "kvcache:session_gaps": lambda: dict(requests=list(_session()), bytes_per_token=1024.0),
    "memory:blocks_for": lambda: dict(tokens=33),
    "memory:tail_waste": lambda: dict(tokens=33),
    "memory:kv_tokens": lambda: dict(prompt_tokens=16, output_tokens=4),
    "memory:request_kv_bytes": lambda: dict(model=MODEL, prompt_tokens=16, output_tokens=4),
    "memory:shared_and_private_bytes": lambda: dict(model=MODEL, prompt_tokens=16, output_tokens=4),
    "memory:batch_kv_bytes": lambda: dict(n_requests=2, model=MODEL, prompt_tokens=16, output_tokens=4),
    "memory:max_concurrent_requests": lambda: dict(kv_budget_bytes=1e9, model=MODEL, prompt_tokens=16,
                                                   output_tokens=4),
    "memory:reserved_slots": lambda: dict(lengths=[5, 9], max_tokens=16),
    "memory:paged_slots": lambda: dict(lengths=[5, 9], block_size=4),
    "memory:paged_waste": lambda: dict(lengths=[5, 9], block_size=4),
    "memory:block_table_entries": lambda: dict(lengths=[5, 9], block_size=4),
    "memory:shared_prefix_slots": lambda: dict(lengths=[8, 9], block_size=4, shared_tokens=4, sharers=2),
    "memory:branch_blocks": lambda: dict(branches=4, shared_blocks=95, private_blocks=9),
    "memory:blocks_saved_by_sharing": lambda: dict(n_requests=4, shared_blocks=95),
    "models:causal_pairs": lambda: dict(new_tokens=4),
    "models:ModelSpec": lambda: dict(name="m", n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, hidden_size=32,
                                     intermediate_size=64, vocab_size=100),
    "models:ModelSpec.flops": lambda m: dict(new_tokens=4),
    "roofline:efficiency": lambda: dict(name="value", value=0.5),  # name: the label its message uses
    "roofline:weight_intensity": lambda: dict(batch=4),
    "roofline:step_read_bytes": lambda: dict(batch=4, context_tokens=128, matrix_weight_bytes=1e9,
                                             kv_bytes_per_token=1e5),
    "roofline:bytes_per_output_token": lambda: dict(batch=4, context_tokens=128, matrix_weight_bytes=1e9,
                                                    kv_bytes_per_token=1e5),
    "roofline:hbm_bytes_per_output_token": lambda: dict(batch=4, weight_bytes=1e9, kv_bytes=1e5),
    "roofline:b_kv": lambda: dict(matrix_weight_bytes=1e9, context_tokens=128, kv_bytes_per_token=1e5),
    "roofline:resident_bytes": lambda: dict(batch=4, context_tokens=128, weight_bytes=1e9, kv_bytes_per_token=1e5),
    "roofline:step_time": lambda: dict(batch=4, flops_per_request=1e9, context_tokens=128, **_ROOF),
    "roofline:fixed_step_cost": lambda: dict(measured_step_s=0.03, batch=4, context_tokens=128,
                                             matrix_weight_bytes=1e9, kv_bytes_per_token=1e5, bandwidth=2e12),
    "roofline:step_mfu": lambda: dict(batch=4, flops_per_request=1e9, step_s=0.03, peak_flops=1e15),
    "roofline:compute_memory_crossover": lambda: dict(flops_per_request=1e9, context_tokens=128, **_ROOF),
    "roofline:context_crossover": lambda: dict(flops_at_zero_context=1e9, flops_per_context_token=1e5,
                                               kv_bytes_per_token=1e5, peak_flops=1e15, bandwidth=2e12),
    "roofline:decode_context_crossover": lambda: dict(model=MODEL, accelerator=CARD),
    "roofline:decode_crossover_table": lambda: dict(model=MODEL, accelerator=CARD, contexts=[128, 2048]),
    "roofline:decode_flops_per_request": lambda: dict(model=MODEL, context_tokens=128),
    "roofline:decode_step_time": lambda: dict(model=MODEL, accelerator=CARD, batch=4, context_tokens=128),
    "roofline:decode_time_per_token": lambda: dict(model=MODEL, accelerator=CARD, batch=4, context_tokens=128),
    "roofline:decode_mfu": lambda: dict(model=MODEL, accelerator=CARD, batch=4, context_tokens=128),
    "roofline:lora_adapter_bytes": lambda: dict(model=MODEL),
    "roofline:adapter_groups": lambda: dict(adapters=["a", "b", "a"]),
    "roofline:adapter_weight_intensity": lambda: dict(adapters=["a", "b", "a"]),
    "scheduling:KVBlockLimit": lambda: dict(total_blocks=64),
    "scheduling:KVBlockLimit.blocks_needed": lambda k: dict(request=R1),
    "scheduling:KVBlockLimit.fits": lambda k: dict(request=R1),
    "scheduling:KVBlockLimit.can_admit": lambda k: dict(request=R1),
    "scheduling:KVBlockLimit.admit": lambda k: dict(request=R1),
    "scheduling:KVBlockLimit.release": lambda k: (k.admit(R1), dict(request=R1))[1],
    "scheduling:NoLimit.fits": lambda k: dict(request=R1),
    "scheduling:NoLimit.can_admit": lambda k: dict(request=R1),
    "scheduling:NoLimit.admit": lambda k: dict(request=R1),
    "scheduling:NoLimit.release": lambda k: dict(request=R1),
    "scheduling:IterationCost": lambda: _fields(FITTED_COST),
    "scheduling:IterationCost.__call__": lambda c: dict(work=[Work(R1, "prefill", 16, 0, 1)]),
    "scheduling:IterationCost.of_totals": lambda c: dict(new_tokens=16, pairs=136),
    "scheduling:IterationCost.of": lambda c: dict(new_tokens=16),
    "scheduling:IterationCost.decode": lambda c: dict(batch=4, context_tokens=128),
    "scheduling:RooflineCost": lambda: dict(model=MODEL, accelerator=CARD),
    "scheduling:RooflineCost.__call__": lambda c: dict(work=[Work(R1, "prefill", 16, 0, 1)]),
    "scheduling:RooflineCost.of_totals": lambda c: dict(new_tokens=16, pairs=136, kv_tokens=16, logits=1),
    "scheduling:Work": lambda: dict(request=R1, kind="prefill", new_tokens=16, cached_tokens=0, emits=1),
    "scheduling:Schedule.iterations_queued": lambda s: dict(name="r1"),
    "scheduling:Iteration": lambda: dict(index=0, start_s=0.0, duration_s=0.1, work=(Work(R1, "prefill", 16, 0, 1),)),
    "scheduling:IterationLog": lambda: dict(start_s=[0.0, 0.1], duration_s=[0.1, 0.1], work_of=lambda k: ()),
    "scheduling:Engine": lambda: dict(requests=[R1], limits=scheduling.Limits(), admission=NoLimit()),
    "scheduling:Engine.arrive": lambda e: dict(now=0.0),
    "scheduling:Live": lambda: dict(request=R1, index=0),
    "scheduling:Request": lambda: dict(name="r", arrival_s=0.0, prompt_tokens=16, output_tokens=4),
    "scheduling:Schedule": lambda: _fields(_schedule()),
    "scheduling:Served": lambda: dict(request=R1, first_work_s=0.0, times=RequestTimes(0.0, np.array([0.1, 0.2]))),
    "scheduling:simulate": lambda: dict(requests=[R1, R2], policy="continuous", max_running=2),
    "scheduling:run_example": lambda: dict(policy="continuous"),
    "scheduling:batch_requests": lambda: dict(n=2, prompt_tokens=16, output_tokens=4),
    "scheduling:budget_sweep": lambda: dict(requests=[R1, R2], budgets=[64, 128]),
    "scheduling:budget_within_gap": lambda: dict(sweep=_sweep().copy(), gap_limit_s=0.1),
    "scheduling:quickest_admission_budget": lambda: dict(sweep=_sweep().copy()),
    "serving:ServingConfig": lambda: dict(name="X", description="test"),
    "serving:evaluate": lambda: dict(config=_config("A")),
    "serving:RoundBreakdown": lambda: dict(read_bytes=1e9, verify_flops=1e12, step_s=0.03, compute_s=0.01,
                                           overhead_s=0.0, source="modelled"),
    "serving:round_breakdown": lambda: dict(config=_config("A")),
    "serving:read_bound_rounds": lambda: dict(config=_config("B")),
    "serving:dispersion": lambda: dict(requests=_spread()),
    "serving:mean_rate": lambda: dict(requests=_spread()),
    "serving:poisson_twin": lambda: dict(requests=_spread()),
    "serving:trace_window": lambda: dict(table=_trace_table()),
    "serving:trace_comparison": lambda: dict(table=_trace_table(), duration_s=10.0, speedups=(1.0,), seeds=(1,)),
    "serving:feasible": lambda: dict(table=_evaluated().copy()),
    "serving:prefix_fetch_time": lambda: dict(config=_config("B"), link_bandwidth=6.4e10),
    "serving:tokens_per_round_needed": lambda: dict(config=_config("A")),
    "serving:EngineSetup.run": lambda e: dict(requests=[R1, R2]),
    "serving:ServingPolicy": lambda: dict(scheduler_policy="continuous"),
    "serving:poisson_requests": lambda: dict(rate_per_s=4.0, n_requests=3, prompt_tokens=16, output_tokens=4),
    "serving:serve": lambda: dict(requests=[R1, R2, R3]),
    "serving:trace_requests": lambda: dict(arrivals_s=[0.0, 0.1], prompt_tokens=16, output_tokens=4),
    "serving:amdahl_speedup": lambda: dict(fraction_accelerated=0.5, stage_speedup=2.0),
    "serving:completion_and_goodput": lambda: dict(records=_records().copy()),
    "serving:in_system_curve": lambda: dict(records=_records().copy()),
    "serving:little_n": lambda: dict(arrival_rate_per_s=2.0, mean_time_s=0.5),
    "serving:mean_in_system": lambda: dict(records=_records().copy()),
    "serving:observation_window": lambda: dict(records=_records().copy()),
    "serving:summarize_served": lambda: dict(records=_records().copy()),
    "serving:task_time": lambda: dict(stages_s={"prefill": 0.1, "decode": 0.5}, speedups={"decode": 2.0}),
    "serving:time_average_in_system": lambda: dict(records=_records().copy(), start_s=0.0, end_s=1.0),
    "serving:decode_rate": lambda: dict(batch=4, step_s=0.03),
    "serving:gpu_seconds": lambda: dict(new_tokens=16, output_tokens=4, r_p=1e4, r_d=30.0),
    "serving:prefill_rate": lambda: dict(new_tokens=16, seconds=0.01),
    "serving:goodput_at": lambda: dict(rate_per_s=4.0, windows=1, policies=("chunked",)),
    "serving:goodput_sweep": lambda: dict(rates=(4,), policies=("chunked",), windows=1),
    "serving:goodput_windows": lambda: dict(rates=(4,), policies=("chunked",), windows=1),
    "serving:window_counts": lambda: dict(windows=[_records().copy()]),
    "serving:served_windows": lambda: dict(rate_per_s=4.0, policy="chunked", windows=1),
    "serving:window_medians": lambda: dict(windows=serving.goodput_windows(rates=(4,), policies=("chunked",),
                                                                           windows=1)),
    "serving:beside_published": lambda: dict(
        medians=serving.window_medians(serving.goodput_windows(rates=(4,), policies=("chunked",), windows=1)),
        published=inferlab.datasets.published("goodput_8_6_2").set_index(["arrival_rate_per_s", "policy"])),
    "serving:clock_comparison": lambda: dict(records=_records().copy()),
    "serving:load_table": lambda: dict(rates=(4,), policies=("chunked",), n_requests=4),
    "serving:stream_length_table": lambda: dict(rates=(4,), lengths=(4,)),
    "serving:request_outcomes": lambda: dict(records=_records().copy()),
    "serving:retrieval_window": lambda: dict(rate_per_s=4.0, n_requests=4),
    "speculative:expected_tokens": lambda: dict(accept_probs=[0.8, 0.6]),
    "speculative:tokens_distribution": lambda: dict(accept_probs=[0.8, 0.6]),
    "speculative:SourceRound": lambda: dict(source="context lookup", draft_s=1e-4, verify_s=0.03, tokens=2.0,
                                            extra_bytes=0.0),
    "speculative:tie_forward_overhead": lambda: dict(source="draft model, serial", drafts=3, accept=0.7, verify_s=0.03,
                                                     draft_weight_bytes=2e9, bandwidth=5e11),
    "speculative:source_round": lambda: dict(source="draft model, serial", drafts=3, accept=0.7, verify_s=0.03,
                                             draft_weight_bytes=1e9, bandwidth=1e12),
    "speculative:DecodeResult": lambda: dict(tokens=np.array([1, 2]), rounds=()),
    "speculative:speculative_decode": lambda: dict(target=_ngram(), prompt=_ngram().encode("the cache"), n_tokens=4),
    "speculative:simulate_speculative": lambda: dict(requests=[R1, R2], accept_probs=[0.8], cost=FITTED_COST),
    "speculative:speculative_plan": lambda: dict(accept_probs=[0.8], rng=np.random.default_rng(0)),
    "speculative:speculative_batch_sweep": lambda: dict(batches=[1, 2], prompt_tokens=16, output_tokens=4,
                                                        accept_probs=[0.8], cost=FITTED_COST),
    "speculative:DraftLengthChoice": lambda: dict(length=2, tokens_per_round=2.4, s_per_token=0.01,
                                                  plain_s_per_token=0.02),
    "speculative:best_draft_length": lambda: dict(accept_probs=[0.8, 0.6], round_s=lambda m: 0.02 + 0.003 * m),
    "speculative:Verdict": lambda: dict(draft=(1, 2), accepted=1, emitted=(1, 3)),
    "speculative:acceptance_probability": lambda: dict(p=[0.5, 0.5], q=[0.25, 0.75]),
    "speculative:acceptance_rate": lambda: dict(p=[0.5, 0.5], q=[0.25, 0.75]),
    "speculative:emission_distribution": lambda: dict(p=[0.5, 0.5], q=[0.25, 0.75]),
    "speculative:residual": lambda: dict(p=[0.5, 0.5], q=[0.25, 0.75]),
    "speculative:greedy_verify": lambda: dict(draft=[1, 2], target=[1, 3, 4]),
    "speculative:sample_position": lambda: dict(p=[0.5, 0.5], q=[0.25, 0.75], n=4, rng=0),
    "speculative:verify_sample": lambda: dict(p_rows=[[0.5, 0.5], [0.5, 0.5]], q_rows=[[0.25, 0.75]], draft=[1], rng=0),
    "symbolic:solve_linear": lambda: dict(eq=sp.Eq(2 * sp.Symbol("x"), 4), x=sp.Symbol("x")),
    "symbolic:kv_per_token_for": lambda: dict(n_layers=36, n_kv_heads=8, head_dim=128),
    "symbolic:iteration_time_for": lambda: dict(fixed_s=0.02, per_token_s=3e-5, per_pair_s=3e-9),
    "symbolic:largest_piece": lambda: dict(fixed_s=0.02, per_token_s=3e-5, per_pair_s=3e-9),
    "timeline:RequestTimes": lambda: dict(arrival_s=0.0, token_times_s=np.array([0.1, 0.2])),
    "timeline:RequestTimes.meets": lambda r: dict(deadline_s=1.0),
    "timeline:single_request": lambda: dict(queue_s=0.1, prefill_s=0.1, itl_s=0.02, output_tokens=4),
    "timeline:request_time": lambda: dict(queue_s=0.1, prefill_s=0.1, itl_s=0.02, output_tokens=4),
    "timeline:decode_throughput": lambda: dict(batch=4, step_s=0.03),
    "timeline:itls_by_request": lambda: dict(requests=[RequestTimes(0.0, np.array([0.1, 0.2]))]),
    "timeline:summarize": lambda: dict(requests=[RequestTimes(0.0, np.array([0.1, 0.2]))]),
    "units:to": lambda: dict(value=1024.0, unit="KiB"),
    "units:fmt_binary": lambda: dict(n_bytes=2048.0),
    "units:fmt_decimal": lambda: dict(n_bytes=2048.0),
    "units:fmt_bytes": lambda: dict(n_bytes=2048.0),
    "units:fmt_time": lambda: dict(seconds=0.5),
    "workloads:TraceRequest": lambda: dict(name="t", input_ids=(1, 2, 3), output_ids=(4,)),
    "workloads:agent_session": lambda: dict(turns=3),
    "workloads:competing_traffic": lambda: dict(n_requests=3),
    "workloads:interleave": lambda: dict(session=list(_session()), traffic=workloads.competing_traffic(n_requests=4), per_gap=2),
    "workloads:agent_workload": lambda: dict(turns=3, other_per_gap=1),
    "workloads:reuse_from_previous": lambda: dict(session=list(_session())),
}

#: The instance a method runs on, by class (default: the class built from its ``VALID`` arguments).
INSTANCES: dict[str, Callable[[], object]] = {
    "compression:BlockFormat": lambda: compression.block_format("q8_0"),
    "hardware:Accelerator": lambda: CARD,
    "kernels:PagedKVCache": _paged,
    "kvcache:BlockManager": _manager,
    "kvcache:RadixCache": _radix,
    "kvcache:PrefixCost": _prefix_cost,
    "models:ModelSpec": lambda: MODEL,
    "scheduling:IterationCost": lambda: FITTED_COST,
    "scheduling:Engine": lambda: (lambda e: (e.arrive(0.0), e)[1])(Engine([R1], scheduling.Limits(), NoLimit())),
    "scheduling:KVBlockLimit": lambda: KVBlockLimit(64),
    "scheduling:Schedule": _schedule,
    "timeline:RequestTimes": lambda: RequestTimes(0.0, np.array([0.1, 0.2])),
}


class MissingArguments(LookupError):
    """A target with a parameter that has neither a default nor an entry in ``VALID``."""


def _class_id(target: Target) -> str:
    return target.id.rsplit(".", 1)[0]


def _instance(target: Target) -> object | None:
    if not target.bound:
        return None
    make = INSTANCES.get(_class_id(target))
    if make is not None:
        return make()
    ctor = next(t for t in TARGETS if t.id == _class_id(target))
    return ctor.obj(**valid_arguments(ctor, None))


def valid_arguments(target: Target, instance: object | None) -> dict:
    """Fresh valid arguments of every parameter of ``target`` (``VALID``'s entry over the defaults)."""
    entry = VALID.get(target.id)
    given_ = {} if entry is None else (entry(instance) if target.bound else entry())
    names = {p.name for p in target.params}
    if set(given_) - names:
        raise MissingArguments(f"{target.id}: VALID names parameters it does not have: {sorted(set(given_) - names)}")
    args = {}
    for p in target.params:
        if p.name in given_:
            args[p.name] = given_[p.name]
        elif p.default is not p.empty:
            args[p.name] = p.default
        else:
            raise MissingArguments(f"{target.id}: parameter {p.name!r} has no default and no entry in VALID")
    return args


def _call(target: Target, instance: object | None, args: dict) -> object:
    if target.bound:
        return getattr(instance, target.obj.__name__)(**args)
    return target.obj(**args)


# ---- hostile values ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hostile:
    """A value for one parameter; ``refuse``: it is of the wrong kind, so the call must refuse it."""

    value: object
    label: str
    refuse: bool


_F64_MAX = float(np.finfo(np.float64).max)
_WORD = r"(?<![A-Za-z0-9_]){}(?![A-Za-z0-9_])"


def _mentions(annotation: str, word: str) -> bool:
    return re.search(_WORD.format(re.escape(word)), annotation) is not None


def _kind(param: inspect.Parameter, valid: object) -> str:
    """What a parameter holds: bool, int, float, str, array, seq, map, key (any hashable) or object."""
    ann = "" if param.annotation is param.empty else str(param.annotation)
    if isinstance(valid, (bool, np.bool_)) or ann == "bool":
        return "bool"
    if isinstance(valid, np.ndarray):
        return "array"
    if ann in ("Hashable", "object"):
        return "key"
    if isinstance(valid, str):
        return "str"
    if isinstance(valid, (int, np.integer)) and _mentions(ann, "int") and not _mentions(ann, "float"):
        return "int"
    if isinstance(valid, (int, float, np.integer, np.floating)):
        return "float"
    if valid is None:
        for kind in ("int", "float", "str"):
            if re.fullmatch(rf"{kind} \| None", ann):
                return kind
    if isinstance(valid, (list, tuple)) or re.match(r"(Sequence|Iterable|list|tuple)\[", ann):
        return "seq"
    if isinstance(valid, dict) or re.match(r"(Mapping|dict)\[", ann):
        return "map"
    return "object"


def _element(param: inspect.Parameter, valid: object) -> str:
    """The kind of a sequence's elements: int, float, str, key or object."""
    ann = "" if param.annotation is param.empty else str(param.annotation)
    inner = re.search(r"(?:Sequence|Iterable|list|tuple)\[([^\],]+)", ann)
    name = inner.group(1).strip() if inner else ""
    if name in ("int", "float", "str", "bool"):
        return name
    if name == "Hashable":
        return "key"
    items = list(valid) if isinstance(valid, (list, tuple)) else []
    if items and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in items):
        return "int"
    if items and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        return "float"
    return "object"


def _optional(param: inspect.Parameter) -> bool:
    ann = "" if param.annotation is param.empty else str(param.annotation)
    return param.default is None or _mentions(ann, "None")


def _numbers(kind: str) -> list[Hostile]:
    out = [Hostile(-1, "-1", False), Hostile(0, "0", False), Hostile(True, "True", True),
           Hostile(math.nan, "nan", True), Hostile(math.inf, "inf", True), Hostile(-math.inf, "-inf", True),
           Hostile("1", "'1'", True), Hostile([1], "[1]", True), Hostile(1j, "1j", True)]
    if kind == "int":
        return out + [Hostile(2**63, "2**63", False), Hostile(1.5, "1.5", True), Hostile(2.0, "2.0 (a float)", True)]
    return out + [Hostile(-1.0, "-1.0", False), Hostile(1e300, "1e300", False), Hostile(_F64_MAX, "the largest float", False),
                  Hostile(5e-324, "5e-324 (the smallest float > 0)", False),
                  Hostile(10**400, "10**400 (an int beyond float range)", False)]


def _sequences(element: str, valid: object) -> list[Hostile]:
    numeric = element in ("int", "float")
    base = list(valid) if isinstance(valid, (list, tuple)) and len(valid) else [1]
    out = [Hostile([], "[]", False), Hostile(1.5, "1.5 (not a sequence)", True),
           Hostile(base + base, "the valid sequence twice", False), Hostile([base], "[valid] (nested)", numeric)]
    if element != "key":
        out.append(Hostile("ab", "'ab' (a str)", element != "str"))
    if numeric:
        out += [Hostile([-1] + base[1:], "first element -1", False), Hostile([math.nan] + base[1:], "first element nan", True),
                Hostile([math.inf] + base[1:], "first element inf", True), Hostile([None] + base[1:], "first element None", True),
                Hostile([True] + base[1:], "first element True", True), Hostile(["1"] + base[1:], "first element '1'", True),
                Hostile([2**63] + base[1:], "first element 2**63", False),
                Hostile(np.array(base, dtype=bool), "a bool array", True),
                Hostile(np.array(base, dtype=complex), "a complex array", True)]
        if element == "int":
            out += [Hostile([1.5] + base[1:], "first element 1.5", True),
                    Hostile(np.array(base, dtype=float), "a float array", True)]
        else:
            out += [Hostile([1e300] + base[1:], "first element 1e300", False)]
    return out


def _arrays(valid: np.ndarray, allows_bool: bool) -> list[Hostile]:
    integer = valid.dtype.kind in "iu"
    out = [Hostile(valid.astype(bool), "a bool array", not allows_bool),
           Hostile(valid.astype(complex), "a complex array", True),
           Hostile(valid.astype(object), "an object array", True),
           Hostile(valid.astype(str), "a str array", True),
           Hostile(valid.astype(np.uint8), "a uint8 array", False),
           Hostile(valid[:0], "empty along axis 0", False),
           Hostile(valid[None], "one more dimension", False),
           Hostile(valid.tolist(), "a nested list", False),
           Hostile("ab", "'ab' (a str)", True), Hostile(1.5, "1.5 (a scalar)", False)]
    if valid.ndim > 1:
        out += [Hostile(valid[0], "one dimension fewer", False), Hostile(valid[..., :-1], "last axis one shorter", False)]
    if integer:
        out += [Hostile(valid.astype(float), "a float array", True), Hostile(-np.ones_like(valid), "all -1", False),
                Hostile(np.full(valid.shape, 2**63, np.uint64), "all 2**63 (uint64)", False)]
    elif valid.size:
        for value, label in ((np.nan, "nan"), (np.inf, "inf"), (1e300, "1e300"), (-1.0, "-1")):
            bad = valid.astype(np.float64)
            bad.flat[0] = value
            out.append(Hostile(bad, f"float64 array with {label} first", False))
    return out


def _maps(valid: object) -> list[Hostile]:
    key = next(iter(valid)) if isinstance(valid, dict) and valid else "x"
    return [Hostile({}, "{}", False), Hostile([(key, 1)], "a list of pairs", True), Hostile("ab", "'ab' (a str)", True),
            Hostile({key: math.nan}, f"{{{key!r}: nan}}", True), Hostile({key: None}, f"{{{key!r}: None}}", True),
            Hostile({key: -1.0}, f"{{{key!r}: -1.0}}", False), Hostile({("no", "such"): 1.0}, "an unknown key", False)]


def catalogue(param: inspect.Parameter, valid: object) -> list[Hostile]:
    """The hostile values of one parameter, from its annotation and its valid value."""
    kind, ann = _kind(param, valid), "" if param.annotation is param.empty else str(param.annotation)
    if kind == "bool":
        out = [Hostile("False", "'False'", True), Hostile(2, "2", True), Hostile(0.5, "0.5", True)]
    elif kind in ("int", "float"):
        out = _numbers(kind)
    elif kind == "str":
        out = [Hostile("", "''", False), Hostile("no-such-name", "'no-such-name'", False),
               Hostile(b"ab", "b'ab'", True), Hostile(["a"], "['a']", True), Hostile(1.5, "1.5", True)]
        if not _mentions(ann, "int"):
            out.append(Hostile(1, "1", True))
    elif kind == "array":
        out = _arrays(valid, _mentions(ann, "bool"))
    elif kind == "seq":
        out = _sequences(_element(param, valid), valid)
    elif kind == "map":
        out = _maps(valid)
    elif kind == "key":
        return [Hostile([1], "[1] (unhashable)", True), Hostile("no-such-id", "'no-such-id'", False),
                Hostile(None, "None", False), Hostile(1.5, "1.5", False)]
    else:
        out = [Hostile("ab", "'ab'", not _mentions(ann, "str")), Hostile(1.5, "1.5", True),
               Hostile(object(), "object()", True), Hostile([], "[]", False)]
    if not _optional(param):
        out.append(Hostile(None, "None", True))
    return out


#: Random numbers are small or beyond any count or size the library takes (a valid count in between, such as
#: 10**4 windows of a serving sweep, may be right and merely slow; the catalogue covers the boundaries).
_INTS = st.one_of(st.integers(-8, 64), st.integers(2**31, 2**70), st.integers(-(2**70), -(2**31)))
_FLOATS = st.one_of(st.floats(-64.0, 64.0), st.floats(min_value=1e30), st.floats(max_value=-1e30),
                    st.sampled_from([math.nan, math.inf, -math.inf, 5e-324, -0.0]))


def drawn(param: inspect.Parameter, valid: object) -> st.SearchStrategy[Hostile] | None:
    """Random hostile values of one parameter (None: the catalogue says it all)."""
    kind = _kind(param, valid)
    if kind == "int":
        return st.one_of(_INTS.map(lambda v: Hostile(v, repr(v), False)), _FLOATS.map(lambda v: Hostile(v, repr(v), True)))
    if kind == "float":
        return st.one_of(_FLOATS.map(lambda v: Hostile(v, repr(v), not math.isfinite(v))),
                         st.integers(-(2**1100), 2**1100).filter(lambda v: abs(v) > 2**100).map(
                             lambda v: Hostile(v, "a large int", False)))
    if kind == "str":
        return st.text(max_size=6).map(lambda v: Hostile(v, repr(v), False))
    if kind == "seq" and _element(param, valid) in ("int", "float"):
        integer = _element(param, valid) == "int"
        item = st.one_of(st.integers(-(2**65), 2**65), st.floats(), st.booleans(), st.none())

        def hostile(v: list) -> Hostile:
            ok = all(type(x) is int or (not integer and type(x) is float and math.isfinite(x)) for x in v)
            return Hostile(v, repr(v)[:80], not ok)

        return st.lists(item, max_size=5).map(hostile)
    if kind == "array":
        dtypes = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int8, np.uint64, np.bool_,
                                  np.complex128])
        shapes = hnp.array_shapes(min_dims=max(valid.ndim - 1, 1), max_dims=valid.ndim + 1, min_side=0, max_side=4)
        integer = valid.dtype.kind in "iu"

        def hostile(a: np.ndarray) -> Hostile:
            wrong = a.dtype.kind in "bc" or (integer and a.dtype.kind == "f")
            return Hostile(a, f"{a.dtype} array of shape {a.shape}", wrong)

        return st.one_of(hnp.arrays(dtypes, hnp.array_shapes(min_dims=valid.ndim, max_dims=valid.ndim, min_side=0,
                                                                max_side=6)), hnp.arrays(dtypes, shapes)).map(hostile)
    return None


# ---- the contract --------------------------------------------------------------------------------
class Overrun(BaseException):
    """A call ran past ``CALL_LIMIT_S`` (a BaseException, so no ``except Exception`` in the library hides it)."""


@contextlib.contextmanager
def _limits() -> Iterator[None]:
    """At most ``CALL_LIMIT_S`` CPU seconds and ``CALL_MEMORY_BYTES`` more address space (where the OS allows)."""
    # CPU time of this process (ITIMER_PROF), not wall time: a loaded machine slows a call, not its CPU seconds
    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if timed:
        def stop(signum: int, frame: object) -> None:
            raise Overrun

        previous = signal.signal(signal.SIGPROF, stop)
        signal.setitimer(signal.ITIMER_PROF, CALL_LIMIT_S)
    limited = _limit_memory()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
        if limited is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, limited)


def _limit_memory() -> tuple[int, int] | None:
    """Cap the address space at its current size + ``CALL_MEMORY_BYTES``; return the limits to restore."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * resource.getpagesize()
        old = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + CALL_MEMORY_BYTES
        if old[1] != resource.RLIM_INFINITY:
            cap = min(cap, old[1])
        resource.setrlimit(resource.RLIMIT_AS, (cap, old[1]))
        return old
    except (ImportError, OSError, ValueError):
        return None


def _fingerprint(value: object, depth: int = 0) -> object:
    """A comparable copy of what a call may change: pools, caches, arrays, containers (depth-limited)."""
    if depth > 4:
        return type(value).__name__
    if isinstance(value, BlockManager):
        return ("BlockManager", value.state(), value.num_free, value.num_used, value.num_draining, value.num_indexed,
                {s: (tuple(q.tokens), tuple(q.block_table), q.preempted) for s, q in value.seqs.items()},
                dict(value.in_flight), tuple(value.steps_in_flight), value.recomputed_tokens,
                value.cached_tokens_total)
    if isinstance(value, RadixCache):
        nodes = sorted((value.prefix_of(n), n.lock_ref, n.last_access, n.hits, n.reuse_hint) for n in value.nodes())
        return ("RadixCache", value.size, value.clock, value.evicted_tokens, value.root.lock_ref, tuple(nodes))
    if isinstance(value, PagedKVCache):
        return ("PagedKVCache", _fingerprint(value.manager), value.k.tobytes(), value.v.tobytes())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape,
                value.tobytes() if value.dtype.kind != "O" else repr(value.tolist()))
    if isinstance(value, pd.DataFrame | pd.Series):
        return ("pandas", value.shape, value.to_json())
    if isinstance(value, dict):
        return ("dict", tuple((repr(k), _fingerprint(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, list | tuple | set | frozenset | deque):
        return (type(value).__name__, tuple(_fingerprint(v, depth + 1) for v in value))
    if isinstance(value, (int, float, complex, str, bytes, type(None))):
        return value
    if dataclasses.is_dataclass(value) and not value.__dataclass_params__.frozen:  # a mutable record (slots too)
        state = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif isinstance(value, (Engine, TinyQwen3)):  # mutable objects of the library passed as arguments
        state = vars(value)
    else:
        return (type(value).__name__, id(value))
    return (type(value).__name__, tuple((k, _fingerprint(v, depth + 1)) for k, v in state.items()
                                        if k not in ("parent", "children")))


def _non_finite(value: object, depth: int = 0) -> set[str]:
    """'nan' and/or 'inf' if a float anywhere in ``value`` is one (numbers, arrays, frames, containers, dataclasses)."""
    found: set[str] = set()
    if depth > 4 or isinstance(value, (bool, int, str, bytes, type(None), type)):
        return found
    if isinstance(value, sp.Basic):  # a sympy expression: its NaN, oo, -oo and zoo
        return ({"nan"} if value.has(sp.nan) else set()) | ({"inf"} if value.has(sp.oo, -sp.oo, sp.zoo) else set())
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        value = np.asarray(value)
    if isinstance(value, pd.DataFrame):
        value = value.select_dtypes("number").to_numpy(dtype=np.complex128)
    elif isinstance(value, pd.Series):
        value = value.to_numpy() if pd.api.types.is_numeric_dtype(value) else value.tolist()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            if np.isnan(value).any():
                found.add("nan")
            if np.isinf(value).any():
                found.add("inf")
        elif value.dtype.kind == "O":
            for item in value.flat[:1000]:
                found |= _non_finite(item, depth + 1)
        return found
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:10_000]
    elif dataclasses.is_dataclass(value):
        items = [getattr(value, f.name) for f in dataclasses.fields(value) if f.name != "parent"]
    else:
        return found
    for item in items:
        found |= _non_finite(item, depth + 1)
    return found


def _documented(target: Target, what: str) -> bool:
    pattern = r"\bNaN\b" if what == "nan" else r"\binf\b|\binfinite\b|\binfinity\b"
    return re.search(pattern, target.doc) is not None


_ALLOWED = re.compile(r"must|one of|allowed|expected|at least|at most|lie in|not exceed|only|requires?|needs?",
                      re.IGNORECASE)


def violation(target: Target, param: str | None, hostile: Hostile | None) -> str | None:
    """Call ``target`` with ``param`` set to ``hostile`` (None: all valid); what went wrong, or None."""
    instance = _instance(target)
    args = valid_arguments(target, instance)
    if param is not None:
        args[param] = hostile.value
    watched = [instance] + [v for k, v in args.items() if k != param]
    before = [_fingerprint(v) for v in watched]
    try:
        with _limits():
            result = _call(target, instance, args)
    except Overrun:
        return f"did not finish within {CALL_LIMIT_S} CPU seconds"
    except (ValueError, TypeError) as e:
        if param is None:
            return f"refused valid arguments: {type(e).__name__}: {e}"
        problems = []
        message = str(e)
        if re.search(_WORD.format(re.escape(param)), message) is None:
            problems.append("does not name the parameter")
        if _ALLOWED.search(message) is None:
            problems.append("does not say what is allowed")
        if [_fingerprint(v) for v in watched] != before:
            problems.append("changed the state")
        return f"{type(e).__name__} {', '.join(problems)}: {message[:200]!r}" if problems else None
    except BaseException as e:  # noqa: BLE001 - anything else breaks the contract (MemoryError, KeyError, ...)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return f"raised {type(e).__name__}: {str(e)[:200]!r}"
    if hostile is not None and hostile.refuse:
        return f"accepted it (returned {type(result).__name__})"
    bad = {what for what in _non_finite(result) if not _documented(target, what)}
    if bad:
        return f"returned {' and '.join(sorted(bad))} (not documented)"
    return None


# ---- the tests -----------------------------------------------------------------------------------
TARGETS = discover()


def cases(target: Target) -> list[tuple[str, Hostile]]:
    """Every (parameter, hostile value) of the target's catalogue."""
    instance = _instance(target)
    args = valid_arguments(target, instance)
    return [(p.name, h) for p in target.params for h in catalogue(p, args[p.name])]


def test_discovery_walks_the_library() -> None:
    """Discovery finds the packages and their callables, and the tables name only targets that exist."""
    ids = {t.id for t in TARGETS}
    modules = {t.id.split(":")[0] for t in TARGETS}
    assert {"units", "hardware", "models", "datasets", "memory", "roofline", "symbolic", "timeline", "calibration",
            "example", "workloads", "scheduling", "kvcache", "compression", "speculative", "serving",
            "kernels"} <= modules, modules
    assert not modules & set(NOT_LIBRARY)
    assert {"scheduling:simulate", "kvcache:BlockManager.allocate", "kernels:PagedKVCache.write"} <= ids
    stale = sorted(set(VALID) - ids) + sorted(set(INSTANCES) - ids)
    assert not stale, f"VALID or INSTANCES name callables discovery does not find: {stale}"


def test_every_target_can_be_called() -> None:
    """Each discovered callable has valid arguments (defaults or a VALID entry): nothing is silently skipped."""
    missing = []
    for target in TARGETS:
        try:
            valid_arguments(target, _instance(target))
        except MissingArguments as e:
            missing.append(str(e))
    assert not missing, "public callables the suite cannot call; add example arguments to VALID:\n" + "\n".join(missing)


def test_the_contract_sees_a_violation() -> None:
    """The checks bite: an error that names nothing, an overflow, a refusal after a change, a wrong type accepted."""
    def reciprocal(n: int = 2) -> float:
        """1 / n."""
        return 1 / n

    def scaled(x: float = 1.0) -> float:
        """x times 1e10."""
        return x * 1e10

    def drained(queue: list = [1, 2], n: int = 1) -> int:  # noqa: B006 - the shared default is what it changes
        """Appends to ``queue``, then checks ``n``."""
        queue.append(n)
        if n > 1:
            raise ValueError(f"n must be at most 1, got {n}")
        return n

    def truthy(flag: bool = True) -> bool:
        """Whether ``flag`` is set."""
        return bool(flag)

    def fake(fn: Callable) -> Target:
        return Target(f"fake:{fn.__name__}", fn, False, _parameters(fn, False), inspect.getdoc(fn) or "")

    assert "raised ZeroDivisionError" in violation(fake(reciprocal), "n", Hostile(0, "0", False))
    assert "returned inf" in violation(fake(scaled), "x", Hostile(1e300, "1e300", False))
    assert "changed the state" in violation(fake(drained), "n", Hostile(2, "2", False))
    assert "accepted" in violation(fake(truthy), "flag", Hostile("False", "'False'", True))
    assert violation(fake(reciprocal), "n", Hostile(4, "4", False)) is None


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
def test_contract(target: Target) -> None:
    """Valid arguments give a finite (or documented) result; each hostile value is refused cleanly or handled."""
    failures: dict[str, str] = {}
    problem = violation(target, None, None)
    if problem:
        failures["valid arguments"] = problem
    todo = cases(target)
    seen: set[int] = set()
    quiet = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))

    @settings(max_examples=max(len(todo), 1), **quiet)
    @given(st.sampled_from(range(len(todo))) if todo else st.none())
    def run_catalogue(i: int | None) -> None:
        if i is None:
            return
        seen.add(i)
        param, hostile = todo[i]
        problem = violation(target, param, hostile)
        if problem:
            failures[f"{param}={hostile.label}"] = problem

    run_catalogue()
    assert seen == set(range(len(todo))), "Hypothesis did not run the whole catalogue"

    args = valid_arguments(target, _instance(target))
    strategies = {p.name: s for p in target.params if (s := drawn(p, args[p.name])) is not None}
    if strategies:
        @settings(max_examples=DRAWN_PER_PARAMETER * len(strategies), **quiet)
        @given(st.sampled_from(sorted(strategies)).flatmap(lambda name: st.tuples(st.just(name), strategies[name])))
        def run_drawn(case: tuple[str, Hostile]) -> None:
            param, hostile = case
            problem = violation(target, param, hostile)
            if problem:
                failures.setdefault(f"{param}={hostile.label} (drawn)", problem)

        run_drawn()
    assert not failures, f"{target.id} breaks the contract:\n" + "\n".join(f"  {k}: {v}" for k, v in failures.items())
