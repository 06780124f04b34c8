"""Widget update latency: the frame a slider move draws, and its PNG, for every explorer over each knob's range.

Run: `.venv/bin/python benchmarks/widgets_bench.py [--repeat N]`. Explorers are found the
way the tests find them (every ``*_explorer`` in ``inferlab.book.plot``). Each knob is moved over
the values of its grid in the static book (``inferlab.book.static_explorers.knobs``, the others at their
defaults);
each point is timed ``--repeat`` times and its best kept; the median and the 95th percentile over
all points of an explorer are printed. The target is 50 ms median per update.

The repeats are passes over all points of an explorer, not back-to-back runs of one point: on a shared
machine a busy spell of a second or two then slows one pass of a point, not all of its repeats. One
explorer is measured at a time, as a reader moves one at a time (the renderer pool holds a few sizes).
"""

from __future__ import annotations

import argparse
import io
import time
from typing import Any

import numpy as np
from matplotlib.figure import Figure

import inferlab.book.plot
from inferlab.book.plot import to_png
from inferlab.book.static_explorers import knobs
from inferlab.book.widgets import settle_heap


def update_s(explorer: Any, overrides: dict[str, Any], repeat: int = 1) -> float:
    """Best-of-``repeat`` seconds of one update: the frame the widget shows for ``overrides`` and its PNG.

    ``Explorer.frame`` is what a slider move runs: a new draw, or for an explorer with an update path
    its figure redrawn in place (tested to give a new draw's pixels).
    """
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            result = explorer.frame(**overrides)
        except ValueError:  # the widget shows a message instead: the cost is the failed draw
            result = None
        if hasattr(result, "savefig"):
            to_png(result)
        best = min(best, time.perf_counter() - t0)
    return best


def reference_s(repeat: int) -> float:
    """Best-of-``repeat`` seconds of Matplotlib alone: a new one-panel Figure with one line, saved as PNG.

    No inferlab code runs: it measures the machine at that moment, to read the explorers' rows against
    (this shared machine has spells in which everything takes up to twice as long).
    """
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fig = Figure(figsize=(7.0, 3.2))
        fig.subplots().plot([0, 1, 2], [2, 0, 1])
        fig.savefig(io.BytesIO(), format="png")
        best = min(best, time.perf_counter() - t0)
    return best


def explorer_latencies(repeat: int = 3) -> list[dict[str, Any]]:
    """Median and p95 update time (s) of every explorer over the range of all its knobs (best of ``repeat`` passes).

    Each row also carries ``reference_s``, Matplotlib's own figure (``reference_s()``) timed next to the explorer.
    """
    rows = []
    for name, factory in sorted(inferlab.book.plot.explorer_factories().items()):
        ex = factory()
        points = [{k.name: v} for k in knobs(ex) for v in k.values]
        update_s(ex, {})  # warm caches (fonts, data files) once, as a reader's first move does
        settle_heap()  # as displaying an explorer does
        times = np.full(len(points), np.inf)
        for _ in range(repeat):
            times = np.minimum(times, [update_s(ex, point) for point in points])
        rows.append({"explorer": name, "updates": len(times), "median_s": float(np.median(times)),
                     "p95_s": float(np.percentile(times, 95)), "reference_s": reference_s(repeat)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'explorer':45s} {'updates':>7s} {'median ms':>9s} {'p95 ms':>7s} {'reference ms':>12s}")
    for row in explorer_latencies(args.repeat):
        print(f"{row['explorer']:45s} {row['updates']:7d} {row['median_s'] * 1e3:9.1f} {row['p95_s'] * 1e3:7.1f} "
              f"{row['reference_s'] * 1e3:12.1f}", flush=True)


if __name__ == "__main__":
    main()
