"""Where measurements go, and what every row says: written one row at a time, as it is measured.

A ``Recorder`` appends each row to ``<out>/<device>/<experiment>.csv`` the moment it is measured
(the header with the first row), so an experiment that fails half-way leaves the rows before
the failure. Every row carries the run's metadata (``META_COLUMNS``: experiment, preset, dtype,
attention, GPU name, driver, torch version, date, the card and the peaks used) and its own
``backend`` (the attention kernel that ran), ``status`` (ok, skipped, failed) and ``error``
(the exception's text when it is not ok).

Only full-size CUDA runs are measurements: they go to data/measured/<card>/ and the notebooks'
cells show them (``recorded``). Quick and tiny runs, and every CPU run, go to a cache folder
(``scratch_dir``: $INFERLAB_GPU_RUNS, else $XDG_CACHE_HOME/inferlab/gpu-runs, else
~/.cache/inferlab/gpu-runs), and a Recorder refuses to write them under data/measured/.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pandas as pd

from ..datasets import DATA_DIR
from .device import DeviceInfo
from .settings import Settings

MEASURED_DIR = DATA_DIR / "measured"
#: Columns every row gets from the run (after the experiment's own columns).
META_COLUMNS = ("experiment", "preset", "dtype", "attention", "device", "gpu", "driver", "torch", "date", "card",
                "card_match", "peak_hbm_bandwidth_Bps", "peak_bf16_flops", "host_link_Bps")
#: Columns every row fills itself (besides its experiment's): the kernel that ran, and whether it did.
ROW_COLUMNS = ("backend", "status", "error")
STATUSES = ("ok", "skipped", "failed")


def scratch_dir() -> Path:
    """The folder for runs that are not measurements (quick, tiny, CPU): a user cache, never data/measured/."""
    if os.environ.get("INFERLAB_GPU_RUNS"):
        return Path(os.environ["INFERLAB_GPU_RUNS"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "inferlab" / "gpu-runs"


def is_measurement(settings: Settings) -> bool:
    """Whether a run of these settings is recorded as a measurement (full size, on CUDA)."""
    return settings.device == "cuda" and settings.preset == "full"


def default_out_dir(settings: Settings) -> Path:
    """data/measured/ for a full CUDA run; otherwise ``scratch_dir()/<preset>``."""
    return MEASURED_DIR if is_measurement(settings) else scratch_dir() / settings.preset


def record_path(experiment: str, device_slug: str, out_dir: Path | None = None) -> Path:
    """<out_dir>/<device>/<experiment>.csv (``out_dir`` default data/measured/)."""
    return Path(out_dir or MEASURED_DIR) / device_slug / f"{experiment}.csv"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def describe(exc: BaseException) -> str:
    """An exception as one line for a row: 'OutOfMemoryError: CUDA out of memory. Tried to allocate ...'."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


def skipped(fields: dict[str, object], why: str) -> dict[str, object]:
    """A row that says why a point was not measured (it does not fit, no compiler ...)."""
    return {**fields, "status": "skipped", "error": why}


def failed(fields: dict[str, object], exc: BaseException) -> dict[str, object]:
    """A row that says a point failed and why."""
    return {**fields, "status": "failed", "error": describe(exc)}


class Recorder:
    """Appends an experiment's rows to its CSV as they come, each with the run's metadata."""

    def __init__(self, experiment: str, columns: tuple[str, ...], settings: Settings, info: DeviceInfo,
                 out_dir: Path | None = None) -> None:
        out = Path(out_dir) if out_dir is not None else default_out_dir(settings)
        if _inside(out, MEASURED_DIR) and not is_measurement(settings):
            raise ValueError(f"out_dir must not be under {MEASURED_DIR} for a {settings.preset} run on "
                             f"{settings.device}: only full-size CUDA runs are measurements (leave out --out)")
        self.path = record_path(experiment, info.slug, out)
        self.columns = (*columns, *ROW_COLUMNS, *META_COLUMNS)
        self.meta = {"experiment": experiment, "preset": settings.preset, "dtype": settings.dtype,
                     "attention": settings.attention, **info.metadata()}
        self.rows: list[dict[str, object]] = []

    def add(self, row: dict[str, object]) -> dict[str, object]:
        """Write ``row`` (status 'ok' unless it says otherwise) with the metadata; return it as written."""
        extra = set(row) - set(self.columns)
        if extra:
            raise ValueError(f"row must have only the columns of {self.path.stem}, got extra {sorted(extra)}")
        full = {**{c: None for c in self.columns}, "status": "ok", **row, **self.meta}
        if full["status"] not in STATUSES:
            raise ValueError(f"row's status must be one of {STATUSES}, got {full['status']!r}")
        first = not self.rows
        if first:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w" if first else "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.columns)
            if first:
                w.writeheader()
            w.writerow({k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v for k, v in full.items()})
        self.rows.append(full)
        return full

    def frame(self, status: str | None = "ok") -> pd.DataFrame:
        """The rows written so far (those of ``status``; all if None), as a DataFrame."""
        rows = [r for r in self.rows if status is None or r["status"] == status]
        return pd.DataFrame(rows, columns=list(self.columns))


def recorded(experiment: str, measured_dir: Path | None = None) -> tuple[pd.DataFrame, Path] | None:
    """The newest measurement of ``experiment`` under data/measured/ (any card): its ok rows of a full CUDA run, or None."""
    found = []
    for p in sorted(Path(measured_dir or MEASURED_DIR).glob(f"*/{experiment}.csv")):
        rows = pd.read_csv(p)
        keep = pd.Series(True, index=rows.index)
        for col, want in (("device", "cuda"), ("preset", "full"), ("status", "ok")):
            keep &= rows[col].astype(str).eq(want) if col in rows else False
        if keep.any():
            found.append((rows[keep].reset_index(drop=True), p))
    if not found:
        return None
    return max(found, key=lambda fp: str(fp[0]["date"].iloc[0]) if "date" in fp[0] else "")
