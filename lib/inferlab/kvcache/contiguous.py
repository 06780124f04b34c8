"""One contiguous region per request, the allocation that paging replaces (section 8.3.1).

A workload of requests is admitted together and decoded step by step: at every step each
unfinished request writes the KV of one more token. Three allocators hold the same tokens:

* ``"reserve"``: at admission each request gets ``prompt + max_output`` token positions in one
  region, back to back in the arena; a region never grows and never moves, and the positions
  past the request's current length stay reserved but unused;
* ``"grow"``: each request holds a region of exactly its length. A token is written in place if
  the position after the region is free; otherwise the whole region is copied to the first free
  gap of the arena that can hold it plus the new token (first fit), and its old place is freed;
* ``"paged"``: a real ``BlockManager``; each request's tokens live in whole blocks wherever the
  pool hands them out, so nothing is ever copied.

Addresses count token positions from the start of the arena (for ``"paged"``: block id x block
size + offset). A finished request frees its memory at the end of the step of its last token.
``high_water`` is the highest address ever in use: the memory the allocator needed, holes
included. Only the allocator differs between the three runs; the tokens stored are the same.
A run takes O(steps x requests) Python operations: it is for the small workloads a page draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._validate import items, non_negative_int, one_of, positive_int
from .block_manager import BlockManager

__all__ = ["ALLOCATORS", "ArenaRun", "run_allocator", "arena_map"]

ALLOCATORS = ("reserve", "grow", "paged")

#: (start address, tokens used, positions allocated) of one piece of a request's memory
Segment = tuple[int, int, int]


@dataclass(frozen=True)
class ArenaRun:
    """One allocator over one workload: where every request's KV lay after each step, and what it cost.

    ``layout[s][i]`` lists request ``i``'s segments after step ``s`` (step 0: right after
    admission); a finished request is absent.
    """

    allocator: str
    layout: list[dict[int, list[Segment]]]
    copied_tokens: int  # token positions of KV copied to make room (relocations)
    relocations: int  # regions moved
    high_water: int  # highest address ever in use: the memory the allocator needed

    @property
    def steps(self) -> int:
        """Decode steps run (the longest output)."""
        return len(self.layout) - 1

    @property
    def stored(self) -> list[int]:
        """Tokens whose KV is held, after each step."""
        return [sum(u for segs in lay.values() for _, u, _ in segs) for lay in self.layout]

    @property
    def allocated(self) -> list[int]:
        """Token positions allocated to requests, after each step."""
        return [sum(a for segs in lay.values() for _, _, a in segs) for lay in self.layout]

    @property
    def peak_allocated(self) -> int:
        """The most token positions allocated at once."""
        return max(self.allocated)

    @property
    def peak_stored(self) -> int:
        """The most tokens held at once (the same for every allocator of a workload)."""
        return max(self.stored)


def _workload(prompts: Sequence[int], outputs: Sequence[int]) -> tuple[list[int], list[int]]:
    ps, gs = items("prompts", prompts), items("outputs", outputs)
    if not ps:
        raise ValueError("prompts must name at least one request")
    if len(ps) != len(gs):
        raise ValueError(f"prompts and outputs must have the same length, got {len(ps)} and {len(gs)}")
    return [positive_int("prompts[i]", p) for p in ps], [non_negative_int("outputs[i]", g) for g in gs]


def _first_fit(regions: dict[int, list[int]], need: int) -> int:
    """Start of the first gap between ``regions`` ([start, length] each) that holds ``need`` positions."""
    end = 0
    for start, length in sorted(regions.values()):
        if start - end >= need:
            return end
        end = max(end, start + length)
    return end


def run_allocator(allocator: str, prompts: Sequence[int], outputs: Sequence[int], max_output: int | None = None,
                  block_size: int = 16) -> ArenaRun:
    """Admit every request (``prompts[i]`` tokens), then decode ``outputs[i]`` tokens each under ``allocator``.

    ``max_output`` is what ``"reserve"`` sets aside per request (default: the longest output);
    ``block_size`` is the ``"paged"`` block. See the module docstring for the three allocators.
    """
    one_of("allocator", allocator, ALLOCATORS)
    ps, gs = _workload(prompts, outputs)
    cap = max(gs) if max_output is None else non_negative_int("max_output", max_output)
    if cap < max(gs):
        raise ValueError(f"max_output must be at least the longest output ({max(gs)}), got {cap}")
    positive_int("block_size", block_size)
    n = len(ps)
    held = list(ps)  # tokens each request holds
    live = [i for i in range(n)]
    copied = moved = 0
    if allocator == "paged":  # a pool of exactly the blocks the busiest step needs: freed blocks are reused
        lengths = np.array(ps)[:, None] + np.minimum(np.arange(max(gs) + 1)[None, :], np.array(gs)[:, None])
        alive = np.arange(max(gs) + 1)[None, :] <= np.array(gs)[:, None]  # freed after the step of its last token
        bm = BlockManager(int((-(-lengths // block_size) * alive).sum(axis=0).max()), block_size,
                          prefix_caching=False)
        for i in range(n):
            bm.allocate(i, [10**6 * (i + 1) + t for t in range(ps[i])])

        def segments(i: int) -> list[Segment]:
            table = bm.block_table(i)
            return [(b * block_size, min(block_size, held[i] - k * block_size), block_size)
                    for k, b in enumerate(table)]
    else:
        regions: dict[int, list[int]] = {}  # request -> [start, positions allocated]
        start = 0
        for i in range(n):
            size = ps[i] + cap if allocator == "reserve" else ps[i]
            regions[i] = [start, size]
            start += size

        def segments(i: int) -> list[Segment]:
            s, size = regions[i]
            return [(s, held[i], size)]

    def snapshot() -> dict[int, list[Segment]]:
        return {i: segments(i) for i in live}

    def finish(step: int) -> None:
        for i in [j for j in live if gs[j] == step]:
            live.remove(i)
            if allocator == "paged":
                bm.free(i)
            else:
                del regions[i]

    layout = [snapshot()]
    high = max(s + a for segs in layout[0].values() for s, _, a in segs)
    finish(0)
    for step in range(1, max(gs) + 1):
        for i in [j for j in live if gs[j] >= step]:
            if allocator == "paged":
                bm.append(i, [10**6 * (i + 1) + held[i]])
            elif allocator == "grow":
                s, size = regions[i]
                blocked = any(o != i and r[0] == s + size for o, r in regions.items())
                if blocked:
                    del regions[i]
                    regions[i] = [_first_fit(regions, size + 1), size]
                    copied += size
                    moved += 1
                regions[i][1] += 1
            held[i] += 1
        layout.append(snapshot())
        high = max([high] + [s + a for segs in layout[-1].values() for s, _, a in segs])
        finish(step)
    return ArenaRun(allocator, layout, copied, moved, high)


def arena_map(run: ArenaRun, height: int | None = None) -> np.ndarray:
    """The arena as an image, ``[address, step]``: request index where a token is stored, -1 allocated
    but unused, -2 free (rows up to ``height``, default ``run.high_water``)."""
    rows = run.high_water if height is None else non_negative_int("height", height)
    img = np.full((rows, len(run.layout)), -2, np.int16)
    for col, lay in enumerate(run.layout):
        for i, segs in lay.items():
            for start, used, alloc in segs:
                img[start:start + alloc, col] = -1
                img[start:start + used, col] = i
    return img
