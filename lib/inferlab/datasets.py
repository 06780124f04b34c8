"""Access to the repository's data files (``data/``): published numbers of the chapter and our measurements."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd


def _data_dir() -> Path:
    """``inferlab/data`` inside an installed wheel (JupyterLite, pip), else the checkout's ``data/``."""
    packaged = Path(__file__).resolve().parent / "data"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "data"


DATA_DIR = _data_dir()


@lru_cache(maxsize=None)
def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def _table(folder: str, name: str) -> pd.DataFrame:
    path = DATA_DIR / folder / f"{name}.csv"
    if not path.exists():
        available = sorted(p.stem for p in (DATA_DIR / folder).glob("*.csv"))
        raise ValueError(f"name must be one of {available}, got {name!r}")
    return _read(path).copy()


def published(name: str) -> pd.DataFrame:
    """A table the chapter prints, from ``data/published/<name>.csv`` (provenance in data/README.md).

    A cell the chapter leaves empty (a value it does not report) is NaN.
    """
    return _table("published", name)


def trace(name: str) -> pd.DataFrame:
    """A request trace recorded by someone else, from ``data/traces/<name>.csv`` (provenance in data/README.md)."""
    return _table("traces", name)
