"""All benchmarks (`make bench`): one table in benchmarks/results.md and benchmarks/results.csv.

Rows: cold execution time of every notebook (a new kernel each, as a reader runs it; the note gives the
time in the book build, where explorers also draw their default picture and knobs), widget update latency of every explorer (median and p95 over its
range, redraw included), the same in the static book's browser (every knob of every explorer in headless
Chromium), simulator, allocator and quantization throughput (the scripts beside this one, their lines parsed),
the pages' sizes and their explorers' data, and with ``--fresh-clone`` the wall time of
``make book`` and ``make test`` in fresh clones. Wall-clock times on a 2-core machine that others
may share: read them with that in mind (each row says what was repeated).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: Targets of issue 14 (seconds), by benchmark section.
TARGETS = {"notebook": 5.0, "widget": 0.050, "explorer in the browser": 0.050, "make book": 150.0,
           "make test": 180.0}


def _row(section: str, name: str, metric: str, value: float, unit: str, note: str = "",
         has_target: bool = True) -> dict:
    target = TARGETS.get(section) if has_target else None
    meets = "" if target is None or unit != "s" else ("yes" if value <= target else "no")
    return {"section": section, "name": name, "metric": metric, "value": value, "unit": unit,
            "target": "" if target is None else target, "meets": meets, "note": note}


def _execute(path: Path, frames: bool) -> tuple[float, float]:
    """Wall seconds of one run of ``path`` in a new kernel, and the seconds its code cells took."""
    import nbformat
    from nbclient import NotebookClient

    from inferlab.book.widgets import OFFLINE_ENV

    before = os.environ.get(OFFLINE_ENV)
    os.environ[OFFLINE_ENV] = "1" if frames else ""  # the kernel inherits it
    try:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=300, record_timing=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        return time.perf_counter() - t0, sum(_cell_seconds(c) for c in nb.cells if c.cell_type == "code")
    finally:  # not left set for what runs next (the fresh clones' make test)
        if before is None:
            os.environ.pop(OFFLINE_ENV, None)
        else:
            os.environ[OFFLINE_ENV] = before


def notebook_rows(paths: list[Path]) -> list[dict]:
    """Each notebook run cold in a new kernel as a reader runs it (the target), then as the book build runs it
    (explorers draw their static placeholder too)."""
    from inferlab import headless

    headless.install()
    rows = []
    for path in paths:
        wall, cells = _execute(path, frames=False)
        build_wall, _ = _execute(path, frames=True)
        rel = str(path.relative_to(ROOT))
        rows.append(_row("notebook", rel, "cold execution", wall, "s",
                         f"cells alone {cells:.1f} s; in the book build (static explorers) {build_wall:.1f} s"))
        print(f"{rel:55s} {wall:6.1f} s (cells {cells:.1f} s; static explorers {build_wall:.1f} s)", flush=True)
    return rows


def _cell_seconds(cell) -> float:
    from datetime import datetime

    ex = cell.metadata.get("execution", {})
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def widget_rows(repeat: int) -> list[dict]:
    """Median and p95 update latency of every explorer (best of ``repeat`` per point)."""
    from widgets_bench import explorer_latencies

    rows = []
    for r in explorer_latencies(repeat):
        note = (f"{r['updates']} updates, best of {repeat} passes each; Matplotlib alone, timed beside it: "
                f"{r['reference_s'] * 1e3:.1f} ms")
        rows.append(_row("widget", r["explorer"], "update median", r["median_s"], "s", note))
        rows.append(_row("widget", r["explorer"], "update p95", r["p95_s"], "s", note, has_target=False))
        print(f"{r['explorer']:45s} median {r['median_s'] * 1e3:6.1f} ms  p95 {r['p95_s'] * 1e3:6.1f} ms", flush=True)
    return rows


def _script(name: str, *args: str) -> str:
    print(f"\n== {name} {' '.join(args)}", flush=True)
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True,
                         text=True, check=True).stdout
    print(out, flush=True)
    return out


def throughput_rows() -> list[dict]:
    """Simulator, allocator and quantization throughput, parsed from the scripts' own tables."""
    rows = []
    out = _script("scheduler_bench.py", "--million", "0", "--no-reference")
    seeded, _, azure = out.partition("the Azure conversation trace")
    for part, what, note in ((seeded, "simulator", "10,000-request seeded trace, best of 3"),
                             (azure, "simulator, Azure trace", "the whole Azure conversation trace, 19,366 requests, "
                                                               "best of 3")):
        for policy, rate in re.findall(r"^\s*(\w+): +([\d,]+) requests/s", part, re.M):
            rows.append(_row(what, policy, "requests simulated", float(rate.replace(",", "")), "1/s", note))
    out = _script("allocator_bench.py", "--ops", "50000", "--repeats", "3")
    mix = None
    for line in out.splitlines():
        if m := re.match(r"([\w-]+) mix:", line):
            mix = m.group(1)
        elif (m := re.search(r"inferlab BlockManager : +([\d.]+) us/op", line)) and mix:
            rows.append(_row("allocator", mix, "operations", 1e6 / float(m.group(1)), "1/s",
                             "50,000 operations, best of 3"))
    out = _script("quant_bench.py", "--rows", "256", "--repeats", "3")
    for fmt, direction, ours, theirs in re.findall(r"^(\w+) +(\w+) +([\d.]+) +([\d.]+|n/a)", out, re.M):
        note = "best of 3; gguf (reference) " + (f"{theirs} M/s" if theirs != "n/a" else "n/a")
        rows.append(_row("quantization", f"{fmt} {direction}", "values", float(ours) * 1e6, "1/s", note))
    return rows


def browser_rows(repeat: int) -> list[dict]:
    """Every explorer of the built book in headless Chromium: median and p95 of a knob move over all its values."""
    from explorers_bench import explorer_latencies

    rows = []
    for r in explorer_latencies(repeat):
        note = f"{r['moves']} moves, best of {repeat} each, to the frame after the paint"
        rows.append(_row("explorer in the browser", r["explorer"], "move median", r["median_ms"] / 1e3, "s", note))
        rows.append(_row("explorer in the browser", r["explorer"], "move p95", r["p95_ms"] / 1e3, "s", note))
        print(f"{r['explorer']:45s} median {r['median_ms']:6.1f} ms  p95 {r['p95_ms']:6.1f} ms", flush=True)
    return rows


def page_rows() -> list[dict]:
    """Size of every built page's HTML, and of the explorer data files a chapter page loads, if the book is built."""
    from explorers_bench import page_weights

    site = ROOT / "_build" / "html"
    rows = [_row("page size", str(p.relative_to(site)), "HTML bytes", p.stat().st_size, "B")
            for p in sorted([*site.glob("*.html"), *site.glob("chapters/*.html"), *site.glob("exercises/*.html")])]
    rows += [_row("page size", f"chapters/{r['page']}", "explorer data bytes", r["data_bytes"], "B",
                  f"{r['explorers']} explorers, loaded by the page") for r in page_weights(site) if r["explorers"]]
    return rows


def _failure(done: subprocess.CompletedProcess) -> str:
    """What failed, in one line: pytest's summary lines of failed tests, else make's error lines, else the end."""
    lines = (done.stdout + done.stderr).splitlines()
    failed = [line for line in lines if re.match(r"(FAILED|ERROR) ", line)]
    failed = failed or [line for line in lines if line.startswith("make") and "Error" in line]
    return "; ".join(failed[:5]) or (done.stdout + done.stderr)[-300:]


def fresh_clone_rows() -> list[dict]:
    """Wall time of `make book` and of `make test`, each in its own fresh clone (install included).

    Each clone gets empty uv and npm caches, as on a fresh machine: every package is downloaded again.
    """
    rows = []
    for target in ("book", "test"):
        with tempfile.TemporaryDirectory(prefix=f"fresh-{target}-") as tmp:
            subprocess.run(["git", "clone", "--quiet", str(ROOT), f"{tmp}/repo"], check=True)
            env = {**os.environ, "UV_CACHE_DIR": f"{tmp}/uv-cache", "npm_config_cache": f"{tmp}/npm-cache"}
            t0 = time.perf_counter()
            done = subprocess.run(["make", target], cwd=f"{tmp}/repo", env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            log = ROOT / "_build" / f"bench-make-{target}.log"  # whole, for a failure's cause
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(done.stdout + done.stderr, encoding="utf-8")
            note = "passed (empty uv and npm caches)" if done.returncode == 0 else f"FAILED: {_failure(done)} (whole log: {log.relative_to(ROOT)})"
            rows.append(_row(f"make {target}", "fresh clone", "wall", wall, "s", note))
            print(f"make {target} from a fresh clone: {wall:.0f} s ({note[:400]})", flush=True)
    return rows


def write(rows: list[dict], out: Path) -> None:
    """Write the rows as CSV and as one Markdown table per section."""
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"# Benchmarks ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
             "machine possibly shared)", ""]
    for section in dict.fromkeys(r["section"] for r in rows):
        lines += [f"## {section}", "", "| name | metric | value | target | meets | note |", "|---|---|---:|---:|---|---|"]
        for r in (r for r in rows if r["section"] == section):
            value = _fmt(r["value"], r["unit"])
            target = _fmt(r["target"], r["unit"]) if r["target"] != "" else ""
            lines.append(f"| {r['name']} | {r['metric']} | {value} | {target} | {r['meets']} | {r['note']} |")
        lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.1f} s"
    if unit == "B":
        return f"{value / 1024:,.0f} KiB"
    return f"{value:,.0f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["notebooks", "widgets", "throughput", "browser", "pages"],
                        choices=["notebooks", "widgets", "throughput", "browser", "pages"])
    parser.add_argument("--notebooks", nargs="*", type=Path, help="notebooks to time (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="passes over every widget update (best kept)")
    parser.add_argument("--fresh-clone", action="store_true", help="also time make book / make test in clones")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    rows = []
    # the in-process timings first, before any notebook kernel has run beside this process
    if "widgets" in args.only:
        rows += widget_rows(args.repeat)
    if "throughput" in args.only:
        rows += throughput_rows()
    if "notebooks" in args.only:
        paths = args.notebooks or sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*.ipynb")])
        rows += notebook_rows([p.resolve() for p in paths])
    if "browser" in args.only:
        rows += browser_rows(3)
    if "pages" in args.only:
        rows += page_rows()
    if args.fresh_clone:
        rows += fresh_clone_rows()
    write(rows, args.out)
    print(f"\nwrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
