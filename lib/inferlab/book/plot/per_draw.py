"""Answers kept for the length of one draw.

Matplotlib measures some artists several times in one draw (a legend's boxes, an axis' tick labels), and
nothing they depend on changes in between. ``kept_for_draw`` makes such a method answer once per argument
within a block, by an instance attribute that shadows the class' method, and removes it afterwards.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["kept_for_draw"]


@contextmanager
def kept_for_draw(objects: Iterable[object], names: tuple[str, ...]) -> Iterator[None]:
    """Within the block, each method in ``names`` of each of ``objects`` works out each answer once; after
    it (an exception included), every call is worked out as usual again."""
    objects = list(objects)
    try:
        for obj in objects:
            for name in names:
                setattr(obj, name, functools.cache(getattr(obj, name)))
        yield
    finally:
        for obj in objects:
            for name in names:
                obj.__dict__.pop(name, None)
