"""Glue between the library and the book's prose: numbers computed on a page, named for its Markdown.

A page computes its numbers with ``inferlab`` and hands them to :func:`glue`; its Markdown cells
show them with the myst-nb role ``{glue:text}`name:.1f```. Values go in as plain Python numbers or
strings (myst-nb formats the text/plain form, which for a numpy scalar is ``np.float64(...)``).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

__all__ = ["glue", "plain", "source_of", "number_table", "formatted_table", "readable_name"]


def plain(name: str, value: Any) -> int | float | str:
    """``value`` as a plain int, float or str for the book; ValueError for NaN, inf or other types."""
    if isinstance(value, bool) or not isinstance(value, (Integral, Real, str)):
        raise ValueError(f"{name}: glue takes a number or a string, got {type(value).__name__}")
    if isinstance(value, str):
        return value
    if isinstance(value, Integral):
        return int(value)
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name}: glue takes a finite number, got {out}")
    return out


#: Where myst-nb looks for glued values (``myst_nb.ext.glue.GLUE_PREFIX``).
GLUE_PREFIX = "application/papermill.record/"


def glue(**values: Any) -> dict[str, int | float | str]:
    """Name each value for the page's Markdown (myst-nb ``glue``, not displayed); returns the plain values.

    Writes exactly what ``myst_nb.glue(name, value, display=False)`` writes, without importing
    myst-nb (which pulls in Sphinx and takes seconds): a display of the value's MIME bundle under
    ``GLUE_PREFIX`` with scrapbook metadata naming it.
    """
    clean = {name: plain(name, value) for name, value in values.items()}
    try:
        from IPython import get_ipython
        from IPython.core.formatters import format_display_data
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the notebook stack
        return clean
    if get_ipython() is None:  # plain Python: nothing to record
        return clean
    for name, value in clean.items():
        bundle, metadata = format_display_data(value)
        metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
        display({GLUE_PREFIX + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
    return clean


def source_of(module: str, name: str) -> str:
    """The source text of top-level function or class ``name`` of ``module``, read from its file, not imported.

    A page can show a kernel whose module needs what the reader may lack (torch, triton) without importing it.
    """
    import ast
    from importlib.util import find_spec

    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module must name an importable module, got {module!r}")
    with open(spec.origin, encoding="utf-8") as f:
        text = f.read()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[start - 1:node.end_lineno])
    raise ValueError(f"name must be a top-level function or class of {module}, got {name!r}")


def number_table(df: Any, rows: dict | None = None) -> Any:
    """``df`` (a pandas DataFrame) as a page prints it: rows renamed by ``rows``, whole numbers without ".0",
    others with their significant digits (``:g``), and "–" where a value is missing (not "NaN")."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame, got {type(df).__name__}")

    def cell(x: Any) -> str:
        if pd.isna(x):
            return "–"
        if isinstance(x, str):
            return x
        return f"{x:.0f}" if float(x).is_integer() else f"{x:g}"

    return df.rename(index=rows or {}).apply(lambda col: col.map(cell))


#: How a column's name ends -> the unit a reader sees in its header (longest first: ``_tok_s`` before ``_s``).
UNIT_SUFFIXES = {"_tok_s": "tokens/s", "_per_s": "per s", "_bps": "B/s", "_rps": "requests/s", "_bytes": "bytes",
                 "_gib": "GiB", "_mib": "MiB", "_gb": "GB", "_ms": "ms", "_us": "µs", "_s": "s"}
#: Words a header writes as the field does (snake_case names lose their capitals).
ACRONYMS = {"ttft": "TTFT", "itl": "ITL", "mbu": "MBU", "mfu": "MFU", "kv": "KV", "gpu": "GPU", "hbm": "HBM",
            "bf16": "BF16", "fp8": "FP8", "fp16": "FP16", "sdpa": "SDPA", "cuda": "CUDA"}


def readable_name(column: str) -> str:
    """A snake_case column name as a table's header: ``decode_step_s`` -> "decode step (s)",
    ``throughput_tok_s`` -> "throughput (tokens/s)", ``ttft_s`` -> "TTFT (s)"; other names with spaces for "_"."""
    if not isinstance(column, str) or not column:
        raise ValueError(f"column must be a non-empty str, got {column!r}")
    end = next((e for e in UNIT_SUFFIXES if column.lower().endswith(e) and len(column) > len(e)), "")
    words = " ".join(ACRONYMS.get(w.lower(), w) for w in column[:len(column) - len(end)].split("_") if w)
    return f"{words} ({UNIT_SUFFIXES[end]})" if end else words


def formatted_table(df: Any, formats: dict[str, str], names: dict[str, str] | None = None) -> Any:
    """``df`` (a pandas DataFrame) as a page prints it: only the columns named in ``formats``, in that order, each
    value written with its column's format spec (``".2f"``, ``".0%"``; ``""`` as it is).

    True and False read "yes" and "no", a word starts with a capital letter, and a missing value (NaN or None) is
    "–". Numbers in the index lose a trailing ".0" (``:g``). Columns and index levels are then renamed by ``names``
    (keys a frame lacks are ignored).
    """
    import numpy as np
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if not isinstance(formats, dict) or not formats:
        raise ValueError(f"formats must be a non-empty dict of column -> format spec, got {formats!r:.80}")
    missing = [c for c in formats if c not in df.columns]
    if missing:
        raise ValueError(f"formats must name columns of df {list(df.columns)[:8]}, got {missing[:5]}")
    if not all(isinstance(s, str) for s in formats.values()):
        raise ValueError(f"formats must map each column to a format spec (a str), got {formats!r:.80}")
    if names is not None and (not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values())):
        raise ValueError(f"names must be a dict of old name -> new name (a str), got {names!r:.80}")

    def cell(x: Any, spec: str) -> str:
        if isinstance(x, (bool, np.bool_)):
            return "yes" if x else "no"
        if x is None or (not isinstance(x, str) and pd.isna(x)):
            return "–"
        if isinstance(x, str):
            return x[:1].upper() + x[1:]
        return format(x, spec)

    def label(x: Any) -> Any:
        return f"{x:g}" if isinstance(x, (float, Real)) and not isinstance(x, (bool, Integral)) else x

    out = {}
    for column, spec in formats.items():
        try:
            out[column] = df[column].map(lambda x, spec=spec: cell(x, spec))
        except (TypeError, ValueError) as err:
            raise ValueError(f"formats[{column!r}] must be a format spec for the column's values, got {spec!r}: "
                             f"{err}") from None
    shown = pd.DataFrame(out, index=df.index).rename(index=label)
    return shown.rename(columns=names or {}).rename_axis(index=names or {})
