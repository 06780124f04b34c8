"""Admission: who may start now, beyond the slot limit (a check-then-act pair, as nano-vllm's can_allocate/allocate)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .._validate import instance, positive_int
from ..memory import blocks_for, kv_tokens
from .request import Request

__all__ = ["Admission", "NoLimit", "KVBlockLimit"]


@runtime_checkable
class Admission(Protocol):
    """Decides whether a request may start now (beyond the ``max_running`` slots) and tracks what it holds."""

    def fits(self, request: Request) -> bool: ...
    def can_admit(self, request: Request) -> bool: ...
    def admit(self, request: Request) -> None: ...
    def release(self, request: Request) -> None: ...


def _request(request: Request) -> Request:
    if type(request) is not Request:  # the engines pass Requests: one check
        instance("request", request, Request)
    return request


class NoLimit:
    """Admission that never refuses (only ``max_running`` limits the batch)."""

    def fits(self, request: Request) -> bool:
        """Every request fits."""
        _request(request)
        return True

    def can_admit(self, request: Request) -> bool:
        """Every request may start."""
        _request(request)
        return True

    def admit(self, request: Request) -> None:
        """Nothing to reserve."""
        _request(request)

    def release(self, request: Request) -> None:
        """Nothing to free."""
        _request(request)


@dataclass
class KVBlockLimit:
    """Admission that reserves a request's KV blocks to completion (prompt + output - 1 tokens) at admission."""

    total_blocks: int
    block_size: int = 16
    used_blocks: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        positive_int("total_blocks", self.total_blocks)
        positive_int("block_size", self.block_size)

    def blocks_needed(self, request: Request) -> int:
        """Blocks ``request`` holds once it has emitted all its outputs."""
        _request(request)
        return _blocks_to_completion(request.prompt_tokens, request.output_tokens, self.block_size)

    @property
    def free_blocks(self) -> int:
        """Blocks not reserved by any running request."""
        return self.total_blocks - self.used_blocks

    def fits(self, request: Request) -> bool:
        """Whether ``request`` could ever be admitted (its blocks fit in an empty cache)."""
        return self.blocks_needed(request) <= self.total_blocks

    def can_admit(self, request: Request) -> bool:
        """Whether ``request``'s blocks fit in the free blocks now."""
        return self.blocks_needed(request) <= self.free_blocks

    def admit(self, request: Request) -> None:
        """Reserve ``request``'s blocks (call ``can_admit`` first)."""
        need = self.blocks_needed(request)
        if need > self.free_blocks:
            raise ValueError(f"request {request.name!r} needs {need} blocks, {self.free_blocks} are free")
        self.used_blocks += need

    def release(self, request: Request) -> None:
        """Free ``request``'s blocks (nothing changes if fewer are reserved)."""
        need = self.blocks_needed(request)
        if need > self.used_blocks:
            raise ValueError(f"request {request.name!r} must have been admitted: releasing its {need} blocks "
                             f"would free more than the {self.used_blocks} reserved")
        self.used_blocks -= need


@functools.lru_cache(maxsize=4096)
def _blocks_to_completion(prompt_tokens: int, output_tokens: int, block_size: int) -> int:
    # asked for every waiting request at every step (a third of a trace's simulated time): computed once per size
    return blocks_for(kv_tokens(prompt_tokens, output_tokens), block_size)
