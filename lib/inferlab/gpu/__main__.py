"""``python -m inferlab.gpu EXPERIMENT|all [--quick|--tiny] [--device cuda|cpu] [--card KEY] [--out DIR]``.

Runs each experiment isolated (one that fails does not stop the others), writes every row as
it is measured, prints a summary and exits 1 if any experiment stopped or had failed points.
``--device cuda`` is the default (``--tiny`` on a machine without CUDA says so and runs on the
CPU); ``--device cpu`` is the CPU path (tiny sizes only: it proves the code, its times mean
nothing; it switches on Triton's interpreter, in which the Triton kernels run on the CPU).
Only full CUDA runs go to data/measured/; quick and tiny runs go to a cache folder unless
``--out`` names one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import EXPERIMENTS, cuda_available, run_all, settings_for, summary, torch_available
from .records import default_out_dir


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the experiments, print the summary; 0 if all ran cleanly, 1 if not, 2 on bad usage."""
    p = argparse.ArgumentParser(prog="python -m inferlab.gpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", choices=[*EXPERIMENTS, "all"])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="notebook-sized run (under a minute per experiment)")
    size.add_argument("--tiny", action="store_true", help="small sizes: a one-minute smoke run on CUDA; the CPU path")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="cuda (default) or cpu (tiny sizes only; proves the code); --tiny without a CUDA device "
                        "runs on the cpu and says so")
    p.add_argument("--card", default=None, help="inferlab.hardware key when the card is not recognized")
    p.add_argument("--out", type=Path, default=None, help="folder for the records (default: data/measured/ for a "
                                                          "full CUDA run, else a cache folder)")
    args = p.parse_args(argv)
    if not torch_available():
        print("torch is not installed: pip install -r requirements-gpu.txt", file=sys.stderr)
        return 2
    if args.device is None:  # CUDA; a tiny run on a machine without one proves the code on the CPU, and says so
        args.device = "cuda" if cuda_available() or not args.tiny else "cpu"
        if args.device == "cpu":
            print("no CUDA device here: the tiny run goes to the CPU (it proves the code; its times mean nothing)",
                  flush=True)
    if args.device == "cpu" and args.quick:
        print("--device cpu runs only the tiny sizes (drop --quick)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not cuda_available():
        print("no CUDA device here: run with --device cpu to check the code on the CPU (tiny sizes)", file=sys.stderr)
        return 2
    if args.device == "cpu":  # the Triton kernels run on the CPU in Triton's interpreter (triton is not yet imported)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    preset = "tiny" if args.tiny or args.device == "cpu" else "quick" if args.quick else "full"
    try:
        settings = settings_for(preset, args.device, card=args.card)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    print(f"{preset} run on {args.device}: {', '.join(names)}; records under {args.out or default_out_dir(settings)}",
          flush=True)
    outcomes = run_all(names, settings, args.out)
    print(summary(outcomes), flush=True)
    return 0 if all(o.clean for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
