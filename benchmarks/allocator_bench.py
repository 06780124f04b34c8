"""Allocator benchmark: microseconds per allocate/append/free operation of ``paging.BlockManager``, best of N.

Run: `.venv/bin/python benchmarks/allocator_bench.py [--ops 100000] [--repeats 5] [--nanovllm PATH]`.
With a nano-vllm checkout (``--nanovllm`` or env var NANOVLLM_PATH; it needs ``xxhash``),
its ``BlockManager`` runs the same request stream in the same process and the ratio is
printed; its code is loaded from that path, never copied here.

Two seeded synthetic streams ("mixes"), each with up to 32 running requests, 16-token
blocks, outputs decoded one token per operation and a pool small enough that freed blocks
are reused (so cached blocks are evicted and found again):

* ``multi-turn``: four shared system prompts (256-2048 tokens) plus 16-512 tokens of user
  text, a fifth of the requests resent exactly, a third continuing a finished conversation
  (its prompt and output plus 16-256 new tokens), outputs of 8-128 tokens;
* ``short``: one 64-token system prompt plus 8-63 tokens, a fifth resent exactly, outputs of
  4-31 tokens (admission is a larger share of the operations).

Every checked
call is timed: ours runs ``can_allocate`` then ``allocate``, ``can_append`` then ``append_token``;
nano-vllm runs ``can_allocate``, ``allocate`` and ``hash_blocks`` per admission and
``can_append``, ``may_append`` and ``hash_blocks`` per decoded token, as its scheduler does.
Its ``Sequence`` objects are built before the clock starts (ours copies the tokens inside).
Times are this process's CPU time (``time.process_time``), so other work on a shared machine
inflates them less than wall time; the two managers run alternately, best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

from inferlab.kvcache import BlockManager

VOCAB = 151_936


MIXES = {  # system prompt lengths, user text, continuation text, share resent, share continued, output, admission rate
    "multi-turn": ((256, 512, 1024, 2048), (16, 513), (16, 257), 0.2, 0.3, (8, 129), 0.08),
    "short": ((64,), (8, 64), (8, 64), 0.2, 0.0, (4, 32), 0.3),
}


def request_stream(n_ops: int, seed: int = 0, mix: str = "multi-turn", max_running: int = 32) -> list[tuple]:
    """A seeded list of ("alloc", id, tokens) / ("append", id, token) / ("free", id) operations."""
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {sorted(MIXES)}, got {mix!r}")
    system_lengths, user, more, resent, continued, output, admit = MIXES[mix]
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, VOCAB, n).tolist() for n in system_lengths]
    history: list[list[int]] = []  # prompts sent and finished conversations
    running: dict[int, list] = {}  # id -> [tokens so far, tokens left to decode]
    ops: list[tuple] = []
    next_id = 0
    while len(ops) < n_ops:
        if len(running) < max_running and (not running or rng.random() < admit):
            kind = rng.random()
            if history and kind < resent:
                prompt = list(history[rng.integers(len(history))])  # an exact resend
            elif history and kind < resent + continued:
                prompt = history[rng.integers(len(history))] + rng.integers(0, VOCAB, rng.integers(*more)).tolist()
            else:
                prompt = systems[rng.integers(len(systems))] + rng.integers(0, VOCAB, rng.integers(*user)).tolist()
            history.append(prompt)
            running[next_id] = [list(prompt), int(rng.integers(*output))]
            ops.append(("alloc", next_id, prompt))
            next_id += 1
            continue
        sid = list(running)[rng.integers(len(running))]
        seq = running[sid]
        if seq[1] == 0:
            ops.append(("free", sid))
            history.append(seq[0])
            del running[sid]
            continue
        token = int(rng.integers(0, VOCAB))
        seq[0].append(token)
        seq[1] -= 1
        ops.append(("append", sid, token))
    return ops


def run_ours(ops: list[tuple], num_blocks: int, block_size: int) -> tuple[float, int]:
    """Seconds to run ``ops`` through a fresh ``BlockManager``, and the cached tokens it found."""
    bm = BlockManager(num_blocks, block_size, vocab_size=VOCAB)
    cached = 0
    t0 = time.process_time()
    for op in ops:
        kind, sid = op[0], op[1]
        if kind == "append":
            if not bm.can_append(sid):
                raise RuntimeError("pool too small for the stream")
            bm.append_token(sid, op[2])
        elif kind == "alloc":
            if not bm.can_allocate(op[2]):
                raise RuntimeError("pool too small for the stream")
            cached += bm.allocate(sid, op[2])
        else:
            bm.free(sid)
    return time.process_time() - t0, cached


def load_nanovllm(path: str) -> tuple[type, type]:
    """nano-vllm's ``BlockManager`` and ``Sequence`` from a checkout, without importing torch."""
    root = Path(path).expanduser().resolve() / "nanovllm"
    if not (root / "engine" / "block_manager.py").is_file():
        raise SystemExit(f"no nanovllm/engine/block_manager.py under {path}")
    for name, folder in (("nanovllm", root), ("nanovllm.engine", root / "engine")):
        pkg = types.ModuleType(name)  # bare packages: their __init__ would import torch
        pkg.__path__ = [str(folder)]
        sys.modules[name] = pkg
    bm_mod = importlib.import_module("nanovllm.engine.block_manager")
    seq_mod = importlib.import_module("nanovllm.engine.sequence")
    return bm_mod.BlockManager, seq_mod.Sequence


def run_nanovllm(ops: list[tuple], num_blocks: int, block_size: int, manager: type,
                 sequence: type) -> tuple[float, int]:
    """Seconds to run ``ops`` through nano-vllm's ``BlockManager`` as its scheduler drives it, and cached tokens."""
    sequence.block_size = block_size
    seqs = {op[1]: sequence(op[2]) for op in ops if op[0] == "alloc"}
    bm = manager(num_blocks, block_size)
    cached = 0
    t0 = time.process_time()
    for op in ops:
        kind, seq = op[0], seqs[op[1]]
        if kind == "append":
            seq.append_token(op[2])
            if not bm.can_append(seq):
                raise RuntimeError("pool too small for the stream")
            bm.may_append(seq)
            seq.num_scheduled_tokens = 1
            bm.hash_blocks(seq)
            seq.num_cached_tokens += 1
            seq.num_scheduled_tokens = 0
        elif kind == "alloc":
            n_cached = bm.can_allocate(seq)
            if n_cached < 0:
                raise RuntimeError("pool too small for the stream")
            bm.allocate(seq, n_cached)
            cached += seq.num_cached_tokens
            seq.num_scheduled_tokens = len(seq) - seq.num_cached_tokens
            bm.hash_blocks(seq)
            seq.num_cached_tokens, seq.num_scheduled_tokens = len(seq), 0
        else:
            bm.deallocate(seq)
    return time.process_time() - t0, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mix", choices=[*MIXES, "all"], default="all")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-blocks", type=int, default=6000)
    parser.add_argument("--nanovllm", default=os.environ.get("NANOVLLM_PATH"), help="path to a nano-vllm checkout")
    args = parser.parse_args()
    nano_types = load_nanovllm(args.nanovllm) if args.nanovllm else None
    for mix in MIXES if args.mix == "all" else [args.mix]:
        ops = request_stream(args.ops, args.seed, mix)
        counts = {k: sum(1 for op in ops if op[0] == k) for k in ("alloc", "append", "free")}
        prompt_tokens = sum(len(op[2]) for op in ops if op[0] == "alloc")
        print(f"{mix} mix: {len(ops):,} operations ({counts['alloc']:,} allocate, {counts['append']:,} append, "
              f"{counts['free']:,} free), {prompt_tokens:,} prompt tokens, seed {args.seed}, "
              f"{args.num_blocks:,} blocks of {args.block_size}; CPU time, best of {args.repeats}")
        ours, nano = [], []
        for _ in range(args.repeats):  # alternate, so both see the same load on a shared machine
            ours.append(run_ours(ops, args.num_blocks, args.block_size))
            if nano_types:
                nano.append(run_nanovllm(ops, args.num_blocks, args.block_size, *nano_types))
        best = min(t for t, _ in ours)
        print(f"  inferlab BlockManager : {best / len(ops) * 1e6:6.2f} us/op, "
              f"{ours[0][1]:,} prompt tokens found cached")
        if nano:
            nbest = min(t for t, _ in nano)
            print(f"  nano-vllm BlockManager: {nbest / len(ops) * 1e6:6.2f} us/op, "
                  f"{nano[0][1]:,} prompt tokens found cached")
            print(f"  ratio (ours / nano-vllm): {best / nbest:.2f}")


if __name__ == "__main__":
    main()
