"""Running experiments: each one isolated, its rows written as they come, a summary of what failed and why.

``run_experiment`` runs one experiment of a ``Settings``: it releases what earlier experiments
left in PyTorch's cache, reads the device (free memory, card, peaks), then writes every row the
experiment yields to its CSV at once (``records.Recorder``). An exception ends that experiment
only: it is printed with its traceback, kept in the ``Outcome``, and the next experiment runs.
``run_all`` runs several; ``summary`` says in a few lines which ran cleanly, which had failed or
skipped points, and which stopped, with the exception's text.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .._validate import one_of
from .device import device_info, release
from .records import Recorder, describe
from .settings import Settings, with_sizes


@dataclass(frozen=True)
class Experiment:
    """One experiment: the function that yields its rows, its sizes per preset and its columns (in its module)."""

    module: str
    function: str
    presets: str
    columns: str
    section: str
    what: str


EXPERIMENTS: dict[str, Experiment] = {
    "decode_step": Experiment("model_runs", "decode_step", "DECODE_PRESETS", "DECODE_COLUMNS", "8.1.3",
                              "decode step vs batch and context: eager, graph, compiled, graph+compiled; MBU"),
    "prefill_chunks": Experiment("model_runs", "prefill_chunks", "PREFILL_PRESETS", "PREFILL_COLUMNS", "8.2.3",
                                 "one prefill chunk after 0 ... 8K cached tokens (first vs last chunk); MFU"),
    "paged_vs_contiguous": Experiment("kernel_runs", "paged_vs_contiguous", "PAGED_PRESETS", "PAGED_COLUMNS", "8.3.1",
                                      "in-place paged kernel (and gather) over blocks of 8-64 vs contiguous"),
    "kv_formats": Experiment("kernel_runs", "kv_formats", "KV_PRESETS", "KV_COLUMNS", "8.4.2",
                             "BF16, FP8, q8_0 KV: converted in the kernel vs a dequantized copy"),
    "host_copy": Experiment("transfer", "host_copy", "COPY_PRESETS", "COPY_COLUMNS", "8.4.3",
                            "host-to-device bandwidth (pinned, pageable); 1- vs 2-buffer prefetch"),
    "verify_cost": Experiment("model_runs", "verify_cost", "VERIFY_PRESETS", "VERIFY_COLUMNS", "8.5.2",
                              "verifying k draft positions vs one decode step"),
}


def experiment(name: str):
    """The function that runs experiment ``name``, its sizes per preset, and its columns."""
    e = EXPERIMENTS[one_of("name", name, EXPERIMENTS)]
    mod = importlib.import_module(f"{__package__}.{e.module}")
    return getattr(mod, e.function), getattr(mod, e.presets), getattr(mod, e.columns)


@dataclass
class Outcome:
    """What one experiment of a run did: rows by status, where they went, and the exception that stopped it."""

    name: str
    path: Path | None = None
    rows: list[dict] = field(default_factory=list, repr=False)
    error: str | None = None  # 'Type: message' of the exception that ended the experiment
    trace: str = field(default="", repr=False)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        """Rows of ``status`` ('ok', 'skipped', 'failed')."""
        return sum(r.get("status") == status for r in self.rows)

    @property
    def clean(self) -> bool:
        """No exception and no failed point (skipped points are not failures)."""
        return self.error is None and self.count("failed") == 0

    def frame(self) -> pd.DataFrame:
        """The ok rows as a DataFrame."""
        return pd.DataFrame([r for r in self.rows if r.get("status") == "ok"])

    def line(self) -> str:
        """One line: name, state, rows by status, where the record went, and why it failed."""
        state = "ok" if self.clean else "STOPPED" if self.error else "FAILED POINTS"
        counts = ", ".join(f"{self.count(s)} {s}" for s in ("ok", "skipped", "failed") if self.count(s))
        text = f"{self.name:20s} {state:13s} {counts or 'no rows'} in {self.seconds:.0f} s"
        if self.path is not None and self.rows:
            text += f" -> {self.path}"
        if self.error:
            text += f"\n{'':21s}stopped by {self.error}"
        for r in self.rows:
            if r.get("status") == "failed":
                text += f"\n{'':21s}failed point: {r.get('error')}"
        return text


def run_experiment(name: str, settings: Settings, out_dir: Path | None = None, write: bool = True,
                   raise_errors: bool = False, **sizes: object) -> Outcome:
    """Run one experiment; every row is written as it comes. An exception is kept in the Outcome (or raised)."""
    fn, presets, columns = experiment(name)
    size = with_sizes(presets[settings.preset], sizes)
    out = Outcome(name)
    t0 = time.perf_counter()
    rows = None
    try:
        info = device_info(settings.device, settings.card)  # after releasing what earlier experiments left
        rec = Recorder(name, columns, settings, info, out_dir)
        out.path = rec.path if write else None
        rows = fn(settings, size, info)
        for row in rows:
            out.rows.append(rec.add(row) if write else {**{"status": "ok"}, **row})
    except Exception as exc:
        if raise_errors:
            raise
        out.error, out.trace = describe(exc), traceback.format_exc()
        print(f"{name} stopped by {out.error}\n{out.trace}", file=sys.stderr)
    finally:
        if hasattr(rows, "close"):
            rows.close()  # frees the experiment's tensors now, not at the next garbage collection
        del rows
        out.seconds = time.perf_counter() - t0
        try:
            held = release(settings.device, compiled=True)
            if held > 2**30:
                print(f"{name}: {held / 2**30:.1f} GiB still allocated after it: the next experiments see less "
                      "free memory", file=sys.stderr)
        except Exception as exc:  # a CUDA error is sticky: the next experiment's device_info reports it
            print(f"{name}: releasing memory failed: {describe(exc)}", file=sys.stderr)
    return out


def run_all(names: list[str], settings: Settings, out_dir: Path | None = None) -> list[Outcome]:
    """Run ``names`` one after another, each isolated; print each one's line as it ends."""
    outcomes = []
    for name in names:
        outcomes.append(run_experiment(name, settings, out_dir))
        print(outcomes[-1].line(), flush=True)
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    """A few lines: how many experiments ran cleanly, then one line (and its reasons) per experiment."""
    bad = [o.name for o in outcomes if not o.clean]
    head = (f"summary: {len(outcomes) - len(bad)} of {len(outcomes)} experiments ran cleanly"
            + (f"; not clean: {', '.join(bad)}" if bad else ""))
    return "\n".join([head, *(o.line() for o in outcomes)])
