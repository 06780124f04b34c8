"""Execute a widget notebook many times headless and report stalls (nbclient#312 and the shutdown deadlock).

    python benchmarks/headless_loop.py chapters/8-1-1-request-lifecycle.ipynb --runs 100
    python benchmarks/headless_loop.py --amplified --runs 30 --no-fix   # reproduce stall A without the fix

A run counts as stalled when it lasts at least one cell timeout (stall A holds a cell for the
whole timeout) or more than ``--slack`` seconds longer than the fastest run (stall B adds about 2.5 s). ``--amplified`` runs a one-cell notebook
that displays an ``ipywidgets.Output`` and calls ``display`` 100 times inside it, the deterministic trigger.
"""

from __future__ import annotations

import argparse
import statistics
import time

import nbformat
from tqdm import tqdm

from inferlab import headless

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook", nargs="?")
    ap.add_argument("--amplified", action="store_true")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--timeout", type=int, default=10)
    ap.add_argument("--slack", type=float, default=2.0)
    ap.add_argument("--no-fix", action="store_true")
    args = ap.parse_args()
    if not args.no_fix:
        headless.install()
    from nbclient import NotebookClient

    if args.amplified:
        nb = headless.stall_probe_notebook()
    elif args.notebook:
        nb = nbformat.read(args.notebook, as_version=4)
    else:
        ap.error("give a notebook or --amplified")
    times = []
    for _ in tqdm(range(args.runs), desc="executions"):
        t0 = time.perf_counter()
        NotebookClient(nbformat.from_dict(nb), timeout=args.timeout).execute()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    stalled = [t for t in times if t >= args.timeout or t > min(times) + args.slack]
    print(f"runs={args.runs} fix={'off' if args.no_fix else 'on'} timeout={args.timeout}s "
          f"min={min(times):.2f}s median={med:.2f}s max={max(times):.2f}s "
          f"stalled={len(stalled)} ({', '.join(f'{t:.1f}s' for t in stalled)})")


if __name__ == "__main__":
    main()
