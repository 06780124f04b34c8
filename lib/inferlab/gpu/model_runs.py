"""Whole-model measurements: decode step against batch and context, prefill chunks, verifying k drafts.

Each experiment takes the run's ``Settings`` and its own sizes, builds a model of the settings'
shape with random weights (``TorchDecoder.random``), as many layers as fit the device's free
memory (the ``layers`` column says how many; bytes and FLOP are those of the layers that ran),
and yields one row per point as soon as it is measured, with the roofline's prediction beside
it. A point that runs out of memory yields a failed row with the error and the experiment goes
on; a point that does not fit the KV pool, or a compile without a compiler toolchain, yields
a skipped row saying why.

A decode step runs each way it can (``DECODE_PATHS``: eager, graph, compiled, graph+compiled; the
compiled ones for a few batches, next to the same batch's eager and graph rows), and each row's
``path`` says which ran.

Attention runs the way flash attention takes it: decode contexts fill their blocks (no mask),
prefill and verify chunks use the lower-right causal mask, and the SDPA backend is pinned per
point and recorded (``backend``). The decode attention is ``Settings.attention``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tqdm.auto import tqdm

from .. import roofline
from .._validate import one_of, positive_int
from ..models import ModelSpec
from .attention import decode_attention, pick_sdpa_backend, pinned
from .decoder import TorchDecoder
from .device import DeviceInfo, device_info, layer_bytes, release, scaled
from .records import describe, failed, skipped
from .settings import TINY, Settings
from .timing import L2Flush, median_time

__all__ = ["DECODE_PATHS", "TINY", "attainable_mbu", "decode_fn", "decode_points", "decode_step", "plan",
           "prefill_chunks", "verify_cost"]

REFERENCE_KV_TOKENS = 64 * 2048  # the chapter's largest batch point (Experiment 8-1): 64 requests x 2K context


@dataclass(frozen=True)
class DecodeSizes:
    """Points of ``decode_step``: every batch at every context, eager and with CUDA graphs; compiled at one context.

    A batch of ``compiled_batches`` runs through torch.compile too, with and without CUDA graphs, at
    the 2K context (or the first): its four rows (``DECODE_PATHS``) stand side by side.
    """

    batches: tuple[int, ...] = (1, 4, 16, 64)
    contexts: tuple[int, ...] = (2048,)
    compiled_batches: tuple[int, ...] = ()


@dataclass(frozen=True)
class PrefillSizes:
    """Points of ``prefill_chunks``: each chunk size at the first, a middle and the last position of the prompt."""

    chunks: tuple[int, ...] = (512, 2048)
    prompt_tokens: int = 8192


@dataclass(frozen=True)
class VerifySizes:
    """Points of ``verify_cost``: k positions verified after ``context`` tokens (a multiple of the block size)."""

    positions: tuple[int, ...] = (1, 2, 5, 8)
    context: int = 2048


DECODE_PRESETS = {
    "full": DecodeSizes((1, 2, 4, 8, 16, 32, 64, 128, 256), (512, 2048, 8192), (1, 64)),
    "quick": DecodeSizes((1, 4, 16, 64), (2048,), ()),
    "tiny": DecodeSizes((1, 3), (8, 17), (3,)),  # 17 ends inside a block: the masked path runs too
}
PREFILL_PRESETS = {
    "full": PrefillSizes((256, 512, 1024, 2048), 8192),
    "quick": PrefillSizes((512, 2048), 8192),
    "tiny": PrefillSizes((4, 8), 24),
}
VERIFY_PRESETS = {
    "full": VerifySizes((1, 2, 3, 4, 5, 6, 8, 12, 16), 2048),
    "quick": VerifySizes((1, 2, 5, 8), 2048),
    "tiny": VerifySizes((1, 3), 8),
}
#: How a decode step runs: launched from Python, replayed as a CUDA graph, compiled (Inductor's fused kernels)
#: launched from Python, compiled and replayed as a CUDA graph.
DECODE_PATHS = ("eager", "graph", "compiled", "graph+compiled")
DECODE_COLUMNS = ("model", "layers", "batch", "context", "path", "cuda_graphs", "compiled", "step_s", "read_bytes",
                  "achieved_Bps", "flops", "achieved_flops", "mbu", "mfu", "predicted_s")
PREFILL_COLUMNS = ("model", "layers", "chunk", "cached", "position", "time_s", "flops", "achieved_flops", "mfu",
                   "predicted_s")
VERIFY_COLUMNS = ("model", "layers", "positions", "context", "cuda_graphs", "time_s", "decode_s", "ratio",
                  "decode_backend", "flops", "predicted_s")


def plan(spec: ModelSpec, budget_bytes: float, kv_tokens: int, dtype_bytes: int = 2, n_layers: int | None = None,
         max_kv_tokens: int | None = None) -> tuple[int, int]:
    """(layers, KV-pool tokens) for ``budget_bytes``: every layer if they fit beside ``kv_tokens`` of KV, else fewer.

    The pool then takes all the memory the weights leave (at most ``max_kv_tokens``); points that
    need more KV are skipped by the caller. If one layer does not fit beside ``kv_tokens``, the
    pool shrinks to what one layer leaves.
    """
    fixed = (spec.embedding_params + spec.lm_head_params + spec.hidden_size) * dtype_bytes
    per_token_layer = spec.kv_bytes_per_token(dtype_bytes) / spec.n_layers
    per_layer = layer_bytes(spec, dtype_bytes) + kv_tokens * per_token_layer
    layers = n_layers or min(spec.n_layers, int((budget_bytes - fixed) // per_layer))
    layers = max(layers, 1)
    tokens = int((budget_bytes - fixed - layers * layer_bytes(spec, dtype_bytes)) // (layers * per_token_layer))
    if tokens < 1:
        raise ValueError(f"the device's free memory ({budget_bytes:.3g} B usable) must hold one layer of {spec.name}")
    return layers, min(tokens, max_kv_tokens or tokens)


@dataclass
class _Model:
    spec: ModelSpec  # the layers that run
    decoder: TorchDecoder
    k_cache: "object"
    v_cache: "object"
    dtype_bytes: int
    peaks: tuple[float | None, float | None]  # HBM bandwidth, BF16 FLOP/s (None: unknown card)

    @property
    def num_blocks(self) -> int:
        return int(self.k_cache.shape[1])


def _model(s: Settings, info: DeviceInfo, kv_tokens: int, max_kv_tokens: int | None = None) -> _Model:
    import torch

    dtype_bytes = torch.empty((), dtype=getattr(torch, s.dtype)).element_size()
    layers, pool_tokens = plan(s.spec, info.free_bytes * s.memory_fraction, kv_tokens, dtype_bytes, s.n_layers,
                               max_kv_tokens or kv_tokens)
    spec = scaled(s.spec, layers)
    dec = TorchDecoder.random(spec, s.device, s.dtype, s.seed, decode_attention(s.attention).fn)
    kc, vc = dec.new_cache(max(1, pool_tokens // s.block_size), s.block_size)
    a = info.accelerator
    return _Model(spec, dec, kc, vc, dtype_bytes, (a.hbm_bandwidth, a.peak_bf16_flops) if a else (None, None))


def _random_tables(n_seqs: int, blocks_each: int, num_blocks: int, device: str, seed: int):
    """Distinct, shuffled physical blocks for every sequence (no two rows share a block)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.randperm(num_blocks, generator=g)[: n_seqs * blocks_each]
    return perm.reshape(n_seqs, blocks_each).to(device)


def _backend(step, s: Settings, uses_sdpa: bool = True) -> str | None:
    """The SDPA backend ``step`` runs under (pinned from now on), or None when its attention is not SDPA's."""
    return pick_sdpa_backend(step, s.device) if uses_sdpa else None


#: Exceptions (by class name, anywhere in the chain) that mean there is no compiler toolchain, not a failure.
NO_COMPILER = ("InvalidCxxCompiler", "TritonMissing", "GPUTooOldForTriton")


def in_chain(exc: BaseException, names: tuple[str, ...]) -> BaseException | None:
    """The first exception of a class named in ``names`` in ``exc``'s chain (Dynamo wraps, causes, contexts), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in names:
            return exc
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return None


def no_compiler(exc: BaseException) -> bool:
    """Whether ``exc`` (a torch.compile error, possibly wrapped by Dynamo) says a compiler toolchain is missing."""
    return in_chain(exc, NO_COMPILER) is not None


def _guarded(fields: dict, measure: Callable[[], dict], device: str, compiled: bool = False) -> dict:
    """``fields`` with ``measure()``'s columns; a failed row if it ran out of memory, a skipped one if no compiler.

    Every other exception propagates: the experiment stops there (its rows so far are written).
    """
    try:
        return {**fields, **measure()}
    except Exception as exc:
        if (oom := in_chain(exc, ("OutOfMemoryError",))) is not None:
            row = failed(fields, oom)
        elif compiled and no_compiler(exc):
            row = skipped(fields, "no compiler toolchain for torch.compile: " + describe(in_chain(exc, NO_COMPILER)))
        else:
            raise
    release(device)  # after the except block, which held the failed frames and their tensors
    return row


def decode_points(z: DecodeSizes, graphs: bool, compiles: bool) -> list[tuple[int, int, str]]:
    """(context, batch, path) of every point of ``decode_step``, a batch's paths side by side.

    Every batch at every context runs eager, and as a CUDA graph where there are graphs; a batch of
    ``z.compiled_batches`` also runs compiled (and compiled inside a CUDA graph) at the 2K context
    (else the first), when ``compiles``: compiling takes a minute per shape.
    """
    ref_ctx = 2048 if 2048 in z.contexts else z.contexts[0]
    points = []
    for L in z.contexts:
        for b in z.batches:
            paths = ["eager", "graph"] if graphs else ["eager"]
            if compiles and L == ref_ctx and b in z.compiled_batches:
                paths += ["compiled", "graph+compiled"] if graphs else ["compiled"]
            points += [(L, b, p) for p in paths]
    if compiles:  # a compiled batch the sweep does not hold: all its paths, side by side
        points += [(ref_ctx, b, p) for b in z.compiled_batches if b not in z.batches
                   for p in (DECODE_PATHS if graphs else ("eager", "compiled"))]
    return points


def decode_step(s: Settings, z: DecodeSizes = DecodeSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Decode step time (s) against batch and context, each way a step can run; bandwidth and MBU against the roofline.

    ``path`` (``DECODE_PATHS``) says how each row's step ran: ``eager`` (every kernel launched from
    Python), ``graph`` (one CUDA graph replay: no launch cost on the host), ``compiled`` (torch.compile's
    fused kernels, launched from Python) and ``graph+compiled`` (both); ``cuda_graphs`` and ``compiled``
    say the same as two flags. The compiled paths run for ``z.compiled_batches`` when ``s.compiles``
    (compiled once per batch, the graph captured from the compiled step); graphs exist on CUDA only.
    """
    info = info or device_info(s.device, s.card)
    bs = s.block_size
    need = max(b * -(-L // bs) * bs for b in (*z.batches, *z.compiled_batches) for L in z.contexts)
    m = _model(s, info, min(need, REFERENCE_KV_TOKENS), max_kv_tokens=need)  # layers dropped only for 128K tokens
    spec, nb, (bw, peak) = m.spec, m.dtype_bytes, m.peaks
    attention = decode_attention(s.attention)
    flush = L2Flush(s.device) if s.flush_l2 else False
    compiled_steps: dict = {}  # (context, batch) -> the compiled step and its backend, or the error compiling it
    for L, b, path in tqdm(decode_points(z, s.graphs, s.compiles), desc="decode_step", disable=not s.progress):
        compiled = path in ("compiled", "graph+compiled")
        fields = dict(model=spec.name, layers=spec.n_layers, batch=b, context=L, path=path,
                      cuda_graphs=path in ("graph", "graph+compiled"), compiled=compiled)
        blocks_each = -(-L // bs)
        if b * blocks_each > m.num_blocks:
            yield skipped(fields, f"batch {b} x context {L} needs {b * blocks_each} blocks; the pool here has "
                                  f"{m.num_blocks}")
            continue
        row = _guarded(fields, lambda: _decode_point(m, s, attention.sdpa, b, L, path, flush, s.seed + b,
                                                     compiled_steps), s.device, compiled)
        if row.get("status") in ("failed", "skipped"):
            yield row
            continue
        t = row["step_s"]
        read = roofline.step_read_bytes(b, L, spec.matrix_weight_bytes(nb), spec.kv_bytes_per_token(nb))
        flops = b * spec.flops(1, L - 1, logits=1)
        yield {**row, "read_bytes": read, "achieved_Bps": read / t, "flops": flops,
               "achieved_flops": flops / t, "mbu": read / t / bw if bw else None,
               "mfu": flops / t / peak if peak else None,
               "predicted_s": roofline.step_time(b, flops / b, L, spec.matrix_weight_bytes(nb),
                                                 spec.kv_bytes_per_token(nb), peak, bw) if bw else None}


def decode_fn(decoder: TorchDecoder, tokens, tables, lens, k_cache, v_cache, full_blocks: bool,
              compiled: bool = False) -> Callable[[], object]:
    """The decode step ``decode_step`` times, over these inputs: eager, or through torch.compile (whole graph, static shapes)."""
    def step():
        return decoder.decode(tokens, tables, lens, k_cache, v_cache, full_blocks)

    if not compiled:
        return step
    import torch

    return torch.compile(step, fullgraph=True, dynamic=False)


def _decode_point(m: _Model, s: Settings, uses_sdpa: bool, b: int, L: int, path: str, flush, seed: int,
                  compiled_steps: dict | None = None) -> dict:
    """``step_s`` and ``backend`` of one decode step of batch ``b`` at context ``L`` run as ``path``.

    A compiled step is compiled once per (L, b) and kept in ``compiled_steps`` for the other compiled
    path (with its inputs); a compile that failed raises the same error again there.
    """
    import torch

    one_of("path", path, DECODE_PATHS)
    dev = s.device
    graph, compiled = path in ("graph", "graph+compiled"), path in ("compiled", "graph+compiled")
    cache = {} if compiled_steps is None else compiled_steps
    if compiled and (L, b) in cache:
        if isinstance(cache[L, b], BaseException):
            raise cache[L, b]
        fn, backend = cache[L, b]
    else:
        tables = _random_tables(b, -(-L // s.block_size), m.num_blocks, dev, seed)
        lens = torch.full((b,), L, device=dev, dtype=torch.long)
        tokens = torch.randint(0, m.spec.vocab_size, (b,), device=dev)
        full = L % s.block_size == 0  # every row fills its blocks: no attention mask, flash attention runs
        inputs = (m.decoder, tokens, tables, lens, m.k_cache, m.v_cache, full)
        backend = _backend(decode_fn(*inputs), s, uses_sdpa)
        fn = pinned(decode_fn(*inputs), backend)
        if compiled:
            fn = pinned(decode_fn(*inputs, compiled=True), backend)
            try:
                fn()  # compile now: a missing toolchain or an out-of-memory error surfaces here, with its own text
            except Exception as exc:
                cache[L, b] = exc
                raise
            cache[L, b] = (fn, backend)
    t = median_time(fn, dev, s.warmup, s.repeats, graph=graph, flush=flush)
    return {"step_s": t, "backend": backend or s.attention}


def _timed(step: Callable[[], object], s: Settings, flush, graph: bool) -> dict:
    """``time_s`` of ``step`` run under the first SDPA backend that takes it, and that ``backend``."""
    backend = _backend(step, s)
    return {"time_s": median_time(pinned(step, backend), s.device, s.warmup, s.repeats, graph=graph, flush=flush),
            "backend": backend}


def prefill_chunks(s: Settings, z: PrefillSizes = PrefillSizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Time (s) of one prefill chunk after 0 ... prompt - chunk cached tokens (no logits, as the chapter's footnote 6); MFU."""
    import torch

    info = info or device_info(s.device, s.card)
    m = _model(s, info, z.prompt_tokens)
    spec, nb, (bw, peak) = m.spec, m.dtype_bytes, m.peaks
    bs = s.block_size
    if m.num_blocks * bs < z.prompt_tokens:
        raise ValueError(f"prompt_tokens ({z.prompt_tokens}) must fit the KV pool this device leaves "
                         f"({m.num_blocks * bs} tokens)")
    table = _random_tables(1, -(-z.prompt_tokens // bs), m.num_blocks, s.device, s.seed)[0]
    m.k_cache.normal_(), m.v_cache.normal_()  # a history with real numbers in it
    points = []
    for c in z.chunks:
        if c > z.prompt_tokens:
            raise ValueError(f"chunks must not exceed prompt_tokens ({z.prompt_tokens}), got {c}")
        last = (z.prompt_tokens // c - 1) * c
        points += [(c, h, "first" if h == 0 else "last" if h == last else "middle")
                   for h in sorted({0, last // 2 // c * c, last})]
    flush = L2Flush(s.device) if s.flush_l2 else False
    for c, h, where in tqdm(points, desc="prefill_chunks", disable=not s.progress):
        fields = dict(model=spec.name, layers=spec.n_layers, chunk=c, cached=h, position=where)
        tokens = torch.randint(0, spec.vocab_size, (c,), device=s.device)

        def step():
            return m.decoder.chunk(tokens, h, table, m.k_cache, m.v_cache, logits="none")

        row = _guarded(fields, lambda: _timed(step, s, flush, graph=False), s.device)
        if row.get("status") == "failed":
            yield row
            continue
        t, flops = row["time_s"], spec.flops(c, h)
        yield {**row, "flops": flops, "achieved_flops": flops / t, "mfu": flops / t / peak if peak else None,
               "predicted_s": max(flops / peak, spec.matrix_weight_bytes(nb) / bw) if peak else None}


def verify_cost(s: Settings, z: VerifySizes = VerifySizes(), info: DeviceInfo | None = None) -> Iterator[dict]:
    """Time (s) of verifying k positions (logits for each) against one decode step, both over ``z.context`` tokens.

    The decode step is the token at position context - 1; verifying k positions runs the tokens
    at context - k ... context - 1. Both read the same ``context`` positions of K/V, which fill
    their blocks (decode without a mask, verify with the lower-right causal one), so the ratio
    compares the work of k rows against one, not two attention kernels.
    """
    import torch

    bs = s.block_size
    positive_int("context", z.context)
    if z.context % bs or max(z.positions) > z.context:
        raise ValueError(f"context ({z.context}) must be a multiple of block_size ({bs}) and at least the "
                         f"largest positions ({max(z.positions)})")
    info = info or device_info(s.device, s.card)
    m = _model(s, info, z.context + bs)
    spec, nb, (bw, peak) = m.spec, m.dtype_bytes, m.peaks
    table = _random_tables(1, z.context // bs, m.num_blocks, s.device, s.seed)
    m.k_cache.normal_(), m.v_cache.normal_()
    lens = torch.tensor([z.context], device=s.device)
    tok = torch.randint(0, spec.vocab_size, (1,), device=s.device)
    attention = decode_attention(s.attention)

    def step():
        return m.decoder.decode(tok, table, lens, m.k_cache, m.v_cache, full_blocks=True)

    decode_backend = _backend(step, s, attention.sdpa)
    flush = L2Flush(s.device) if s.flush_l2 else False
    decode_s = median_time(pinned(step, decode_backend), s.device, s.warmup, s.repeats, graph=s.graphs, flush=flush)
    for k in tqdm(z.positions, desc="verify_cost", disable=not s.progress):
        fields = dict(model=spec.name, layers=spec.n_layers, positions=k, context=z.context, cuda_graphs=s.graphs,
                      decode_s=decode_s, decode_backend=decode_backend or s.attention)
        tokens = torch.randint(0, spec.vocab_size, (k,), device=s.device)

        def verify():
            return m.decoder.chunk(tokens, z.context - k, table[0], m.k_cache, m.v_cache, logits="all")

        row = _guarded(fields, lambda: _timed(verify, s, flush, graph=s.graphs), s.device)
        if row.get("status") == "failed":
            yield row
            continue
        flops = spec.flops(k, z.context - k, logits=k)
        yield {**row, "ratio": row["time_s"] / decode_s, "flops": flops,
               "predicted_s": roofline.step_time(1, flops, z.context, spec.matrix_weight_bytes(nb),
                                                 spec.kv_bytes_per_token(nb), peak, bw) if bw else None}


def attainable_mbu(rows) -> float:
    """Best MBU of batch-1 decode with CUDA graphs in a decode_step record (the book asks for at least 70 %)."""
    sel = rows[(rows["batch"] == 1) & rows["cuda_graphs"].astype(bool)]  # compiled or not
    if sel.empty or sel["mbu"].isna().all():
        raise ValueError("rows must hold batch-1 CUDA-graph decode steps on a card with known peaks")
    return float(sel["mbu"].max())
