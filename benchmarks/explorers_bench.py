"""The static book's explorers in headless Chromium: latency of every knob move, and what each page weighs.

Run after `make book`: `.venv/bin/python benchmarks/explorers_bench.py [--repeat N]`. Every knob of every explorer
is moved to each of its values (best of ``--repeat`` per value, the time to the frame after the new picture is
painted, measured by the page's own script); per explorer, the median and 95th percentile over all its moves.
Then each page's HTML and the data files of its explorers (``_static/explorers/``), which the page loads.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tests"))


def explorer_latencies(repeat: int = 3, site: Path = SITE) -> list[dict[str, Any]]:
    """Per explorer: moves, median and p95 milliseconds of a knob move in the browser (best of ``repeat``)."""
    from _cdp import Chromium, serve
    from _explorer_checks import EXPLORER, sweep

    pages = sorted(p for p in (site / "chapters").glob("*.html") if EXPLORER.search(p.read_text(encoding="utf-8")))
    rows: dict[str, list[float]] = {}
    chromium = Chromium()
    try:
        with serve(site) as base:
            tab = chromium.page()
            for page in pages:
                tab.goto(base + str(page.relative_to(site)))
                for row in sweep(tab, every_position=True, tries=repeat):
                    rows.setdefault(row["explorer"], []).extend(row["times_ms"])
    finally:
        chromium.close()
    return [{"explorer": key, "moves": len(t), "median_ms": statistics.median(t),
             "p95_ms": statistics.quantiles(t, n=20, method="inclusive")[-1] if len(t) > 1 else t[0]} for key, t in sorted(rows.items())]


def page_weights(site: Path = SITE) -> list[dict[str, Any]]:
    """Per page with explorers: its HTML bytes and the bytes of the explorer data files it loads."""
    out = []
    for page in sorted((site / "chapters").glob("*.html")):
        keys = re.findall(r'data-explorer="([^"]+)"', page.read_text(encoding="utf-8"))
        data = sum((site / "_static" / "explorers" / f"{k}.js").stat().st_size for k in keys)
        out.append({"page": page.name, "html_bytes": page.stat().st_size, "explorers": len(keys), "data_bytes": data})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'explorer':45s} {'moves':>5s} {'median ms':>9s} {'p95 ms':>7s}")
    for r in explorer_latencies(args.repeat):
        print(f"{r['explorer']:45s} {r['moves']:5d} {r['median_ms']:9.1f} {r['p95_ms']:7.1f}", flush=True)
    print(f"\n{'page':45s} {'HTML KB':>8s} {'explorers':>9s} {'data KB':>8s}")
    for r in page_weights():
        print(f"{r['page']:45s} {r['html_bytes'] / 1024:8.0f} {r['explorers']:9d} {r['data_bytes'] / 1024:8.0f}")


if __name__ == "__main__":
    main()
