"""``python -m inferlab.gpu EXPERIMENT|all [--quick|--tiny] [--card KEY] [--out DIR]``: run and record measurements."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import EXPERIMENTS, cuda_available, run, torch_available


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the experiments, print where each record went; 0 on success."""
    p = argparse.ArgumentParser(prog="python -m inferlab.gpu", description=__doc__)
    p.add_argument("experiment", choices=[*EXPERIMENTS, "all"])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="notebook-sized run (under a minute per experiment)")
    size.add_argument("--tiny", action="store_true", help="CPU-sized run that proves the code (times mean nothing)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when present")
    p.add_argument("--card", default=None, help="inferlab.hardware key when the GPU name is not recognized")
    p.add_argument("--out", type=Path, default=None, help="folder instead of data/measured/")
    args = p.parse_args(argv)
    if not torch_available():
        print("torch is not installed: pip install -r requirements-gpu.txt", file=sys.stderr)
        return 2
    device = args.device or ("cuda" if cuda_available() else "cpu")
    if device == "cpu" and not args.tiny:
        print("no CUDA device here: run with --tiny (and --out DIR) to check the code on the CPU", file=sys.stderr)
        return 2
    preset = "tiny" if args.tiny else "quick" if args.quick else "full"
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    for name in names:
        rows, path = run(name, preset, device, args.card, args.out)
        print(f"{name}: {len(rows)} rows -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
