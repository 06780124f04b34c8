"""Worked scenarios of section 8.3.2 driven by a real ``BlockManager``: freeing, copy-on-write, preemption.

Each function builds a small pool, runs the chapter's scenario through the allocator and
returns its states or events, so figures and checks read the manager rather than a formula.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .._validate import non_negative_int, positive_int
from ..memory import blocks_for, kv_tokens
from .block_manager import BlockManager, PoolState


@dataclass(frozen=True)
class PoolEvent:
    """The pool at one moment of a scenario: time in seconds, what happened, free and draining blocks."""

    time_s: float
    label: str
    free_blocks: int
    draining_blocks: int


def cancellation_timeline(blocks: int = 104, call_return_s: float = 1.6e-3, step_done_s: float = 31e-3,
                          block_size: int = 16, spare_blocks: int = 24) -> list[PoolEvent]:
    """Cancel a request of ``blocks`` private blocks while a step reads them (8.3.2, Figure 8-16).

    The cancel call drops the table's references when it returns; the blocks drain until the
    submitted step completes. The two times are the chapter's observation, the counts come
    from the manager.
    """
    positive_int("blocks", blocks)
    positive_int("block_size", block_size)
    non_negative_int("spare_blocks", spare_blocks)
    if not 0 < call_return_s < step_done_s:
        raise ValueError("call_return_s must lie in (0, step_done_s)")
    bm = BlockManager(blocks + spare_blocks, block_size)
    bm.allocate("r", list(range(blocks * block_size)))
    step = bm.begin_step(["r"])
    events = [PoolEvent(0.0, "cancel requested; step in flight", bm.num_free, bm.num_draining)]
    bm.free("r")
    events.append(PoolEvent(call_return_s, "cancel call returns", bm.num_free, bm.num_draining))
    bm.end_step(step)
    events.append(PoolEvent(step_done_s, "step completes; blocks freed", bm.num_free, bm.num_draining))
    return events


@dataclass(frozen=True)
class PreemptionRun:
    """Outcome of decoding under memory pressure: steps, preemptions, resumes, recomputed tokens, finish order."""

    steps: int
    preemptions: list[tuple[int, Hashable, int]]  # (step, sequence, tokens it held when preempted)
    resumes: list[tuple[int, Hashable, int]]  # (step, sequence, tokens recomputed on resume)
    recomputed_tokens: int  # sum of what the resumes recomputed (the prefix cache saves the rest)
    finished: list[Hashable]
    used_blocks: list[int]  # blocks in use after each step


def decode_with_preemption(num_blocks: int, block_size: int, prompts: dict[Hashable, Sequence[int]],
                           output_tokens: int) -> PreemptionRun:
    """Decode ``output_tokens`` for each prompt under a pool of ``num_blocks``, preempting by recomputation.

    Scheduling follows vLLM v1: each step first serves the running sequences, oldest first,
    appending one token each; when one cannot get a block, the most recently admitted
    running sequence is preempted (its blocks freed, its tokens kept, put at the head of the
    waiting queue). Only a step that preempted nobody admits waiting sequences (first come,
    first served); a resumed sequence recomputes what the prefix cache no longer holds.
    """
    positive_int("num_blocks", num_blocks)
    positive_int("block_size", block_size)
    positive_int("output_tokens", output_tokens)
    if not prompts:
        raise ValueError("prompts must not be empty")
    for name, prompt in prompts.items():  # each sequence must at least fit alone, or nothing can finish
        if len(prompt) == 0:
            raise ValueError(f"prompts must not be empty, got an empty prompt for {name!r}")
        need = blocks_for(kv_tokens(len(prompt), output_tokens), block_size)
        if need > num_blocks:
            raise ValueError(f"num_blocks ({num_blocks}) is too small: sequence {name!r} alone needs {need} blocks")
    bm = BlockManager(num_blocks, block_size)
    waiting = list(prompts)
    running: list[Hashable] = []
    produced = {s: 0 for s in prompts}
    preemptions, resumes, finished, used = [], [], [], []
    step = 0
    limit = 10 * (len(prompts) + 1) * (output_tokens + 1) * (num_blocks + 1)
    while waiting or running:
        step += 1
        if step > limit:
            raise ValueError("num_blocks is too small: a single sequence does not fit")
        preempted_now = False
        for s in list(running):  # running sequences first, oldest first
            if s not in running:
                continue  # preempted earlier in this step
            while not bm.can_append(s, 1) and running[-1] != s:
                victim = running.pop()
                preemptions.append((step, victim, bm.preempt(victim)))
                waiting.insert(0, victim)
                preempted_now = True
            if not bm.can_append(s, 1):
                running.remove(s)
                preemptions.append((step, s, bm.preempt(s)))
                waiting.insert(0, s)
                preempted_now = True
                continue
            bm.append(s, [1_000_000 + produced[s]])
            produced[s] += 1
            if produced[s] == output_tokens:
                running.remove(s)
                bm.free(s)
                finished.append(s)
        while waiting and not preempted_now:  # admission only in a step without preemption
            s = waiting[0]
            toks = list(prompts[s]) + [1_000_000 + i for i in range(produced[s])]
            if not bm.can_allocate(toks):
                break
            if s in bm.seqs:
                resumes.append((step, s, bm.resume(s)))
            else:
                bm.allocate(s, toks)
            running.append(waiting.pop(0))
        used.append(bm.num_used)
    return PreemptionRun(step, preemptions, resumes, sum(r for _, _, r in resumes), finished, used)


def fork_branches(branches: int, prefix_tokens: int, private_tokens: int, block_size: int = 16) -> PoolState:
    """Fork ``branches`` sequences after one shared prompt, then let each append ``private_tokens`` of its own.

    Runs in a real ``BlockManager`` (forks share blocks by reference; writes into a shared tail copy
    it), and returns the pool's state: references over all tables against physical blocks in use.
    """
    positive_int("branches", branches)
    non_negative_int("prefix_tokens", prefix_tokens)
    non_negative_int("private_tokens", private_tokens)
    need = blocks_for(prefix_tokens, block_size) + branches * (blocks_for(private_tokens, block_size) + 2)
    bm = BlockManager(need, block_size, prefix_caching=False)  # forks share blocks; no content lookup needed
    private = [[10**7 * (i + 1) + t for t in range(private_tokens)] for i in range(branches)]
    if prefix_tokens == 0:  # nothing to fork from: each branch holds its own tokens (a sequence is never empty)
        for i in range(branches):
            if private[i]:
                bm.allocate(i, private[i])
        return bm.state()
    bm.allocate(0, list(range(prefix_tokens)))
    for i in range(1, branches):
        bm.fork(0, i)
    for i in range(branches):
        bm.append(i, private[i])
    return bm.state()


def shared_prefix_batch(n_requests: int, prefix_tokens: int, prompt_tokens: int, output_tokens: int,
                        num_blocks: int, block_size: int = 16) -> BlockManager:
    """Admit ``n_requests`` whose prompts share their first ``prefix_tokens`` and run them to completion.

    Each request allocates its prompt (the shared full blocks are found by content) and appends
    ``output_tokens - 1`` tokens (the last output is never written back), in a pool of ``num_blocks``.
    """
    positive_int("n_requests", n_requests)
    positive_int("prompt_tokens", prompt_tokens)
    non_negative_int("prefix_tokens", prefix_tokens)
    if prefix_tokens > prompt_tokens:
        raise ValueError(f"prefix_tokens ({prefix_tokens}) must not exceed prompt_tokens ({prompt_tokens})")
    positive_int("output_tokens", output_tokens)
    bm = BlockManager(num_blocks, block_size)
    prefix = list(range(prefix_tokens))
    for r in range(n_requests):
        own = [10**6 * (r + 1) + t for t in range(prompt_tokens - prefix_tokens + output_tokens - 1)]
        bm.allocate(r, prefix + own[:prompt_tokens - prefix_tokens])
        bm.append(r, own[prompt_tokens - prefix_tokens:])
    return bm


def refcount_steps() -> list[tuple[str, PoolState]]:
    """Figure 8-14 as states: A and B share two blocks; A ends; B is cancelled mid-step; the step completes."""
    bm = BlockManager(5, 4)
    bm.allocate("A", list(range(8)))
    bm.allocate("B", list(range(8)) + [20, 21])
    out = [("A and B share blocks #0 and #1 (ref 2)", bm.state())]
    bm.free("A")
    out.append(("A finishes: refs drop to 1, B still reads them", bm.state()))
    step = bm.begin_step(["B"])
    bm.free("B")
    out.append(("B cancelled mid-step: refs 0, the step still reads them (draining)", bm.state()))
    bm.end_step(step)
    out.append(("step done: refs 0 AND accelerator done, so the blocks are free", bm.state()))
    return out


def copy_on_write_steps() -> list[tuple[str, PoolState]]:
    """Figure 8-15 as states: a shared tail holding a, b, c; one branch writes x (copy), the other y (in place)."""
    bm = BlockManager(4, 4)
    a, b, c, x, y = 1, 2, 3, 24, 25
    bm.allocate("branch 1", [10, 11, 12, 13, a, b, c])
    bm.fork("branch 1", "branch 2")
    out = [("forked: both tables point to the same two blocks", bm.state())]
    bm.append("branch 1", [x])
    out.append(("branch 1 writes x: the shared tail is copied first", bm.state()))
    bm.append("branch 2", [y])
    out.append(("branch 2 writes y into the old tail, now its own", bm.state()))
    return out
