"""Figures unpickled with their transforms' links intact (``new_figure``'s templates).

A Matplotlib transform tells the transforms built on it ("parents") when it changes, as the data
transform does when the view limits move; each child keeps its parents in a dict keyed by the
parent's ``id``, and a parent registering again replaces its own entry. ``TransformNode.__setstate__``
restores that dict under the keys pickled: the ids the parents had in the process that pickled them,
which in the unpickled figure are just numbers. When a transform made later gets one of those numbers
as its id and registers with the same child, it takes the place of the unpickled parent, which is then
never told that its child changed and draws with the limits it saw last: a spine or bars drawn for the
previous slider value. Which numbers collide depends on memory addresses, so a picture went wrong now and
then (a frame of one CI run; a few of thousands in a process drawing every explorer).
"""

from __future__ import annotations

import pickle
import threading
import weakref
from typing import Any

from matplotlib.transforms import TransformNode

__all__ = ["loads"]

_lock = threading.Lock()


def _setstate(self: TransformNode, state: dict) -> None:
    """Matplotlib's ``__setstate__``, with each parent keyed by its id in this process."""
    parents: dict[int, weakref.ref] = {}
    for parent in state["_parents"].values():
        if parent is not None:  # dead when pickled
            parents[id(parent)] = weakref.ref(parent, lambda _, pop=parents.pop, k=id(parent): pop(k, None))
    self.__dict__ = {**state, "_parents": parents}


def loads(blob: bytes) -> Any:
    """``pickle.loads(blob)``, every transform in it linked to its parents under their ids."""
    with _lock:
        original = TransformNode.__dict__["__setstate__"]
        TransformNode.__setstate__ = _setstate
        try:
            return pickle.loads(blob)
        finally:
            TransformNode.__setstate__ = original
