"""Widget redraw benchmark: median time of one callback (draw + PNG render) for every section explorer.

Run: `.venv/bin/python benchmarks/widgets_bench.py [--repeat N]`. Explorers are found the way the
tests find them (every ``*_explorer`` in ``inferlab.plot``); each is rendered at its default state
and at every control's extremes, ``--repeat`` times, and the median and worst median are printed.
The budget is 100 ms per redraw.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import statistics
import time

import inferlab.plot
from inferlab.plot import to_png


def explorers() -> dict:
    """Every explorer factory in inferlab.plot, by 'module.name'."""
    found = {}
    for info in pkgutil.iter_modules(inferlab.plot.__path__):
        module = importlib.import_module(f"inferlab.plot.{info.name}")
        found.update({f"{info.name}.{n}": getattr(module, n) for n in dir(module) if n.endswith("_explorer")})
    return found


def redraw_s(explorer, overrides: dict, repeat: int) -> float:
    """Median seconds of draw + PNG render with ``overrides``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = explorer.render(**overrides)
        if hasattr(result, "savefig"):
            to_png(result)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'explorer':45s} {'default ms':>10s} {'worst extreme ms':>17s}")
    for name, factory in sorted(explorers().items()):
        ex = factory()
        default = redraw_s(ex, {}, args.repeat)
        worst = max(redraw_s(ex, dict(ov), args.repeat) for ov, _ in ex.sweep())
        print(f"{name:45s} {default * 1e3:10.1f} {worst * 1e3:17.1f}")


if __name__ == "__main__":
    main()
