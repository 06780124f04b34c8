"""Retry accounting (section 8.4.4): a wrong first answer costs its generation, the check, and the retry.

Time to a correct answer is the sum over attempts up to the first correct one of (generation + check).
If each attempt is correct with probability p, independently, the expected number of attempts is 1/p
and the expected time (T_gen + T_check) / p.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._validate import fraction, non_negative


def time_to_correct(outcomes: Sequence[bool], generate_s: "float | Sequence[float]", check_s: float) -> float:
    """Seconds until the first correct attempt has been generated and checked; inf if none is correct."""
    ok = np.asarray(outcomes, dtype=bool)
    if ok.ndim != 1 or ok.size == 0:
        raise ValueError("outcomes must be a non-empty sequence of booleans, one per attempt")
    gen = np.broadcast_to(np.asarray(generate_s, dtype=float), ok.shape)
    if (gen < 0).any() or not np.isfinite(gen).all():
        raise ValueError("generate_s must be finite and >= 0")
    non_negative("check_s", check_s)
    if not ok.any():
        return float("inf")
    n = int(np.argmax(ok)) + 1
    return float(gen[:n].sum() + n * check_s)


def expected_time_to_correct(p_correct: float, generate_s: float, check_s: float) -> float:
    """Expected seconds to a correct answer when each attempt succeeds with probability p: (T_gen + T_check)/p."""
    if fraction("p_correct", p_correct) == 0:
        raise ValueError("p_correct must be > 0 (otherwise no attempt ever succeeds)")
    return (non_negative("generate_s", generate_s) + non_negative("check_s", check_s)) / p_correct


def changed_tasks(grid: pd.DataFrame, config_a: str, config_b: str, by: str = "config") -> pd.DataFrame:
    """Tasks whose number of correct runs differs between two configurations (columns: task, a, b)."""
    for c in (config_a, config_b):
        if c not in set(grid[by]):
            raise ValueError(f"config must be one of {sorted(set(grid[by]))}, got {c!r}")
    counts = grid.pivot_table(index="task", columns=by, values="correct", aggfunc="sum")
    out = counts[[config_a, config_b]].astype(int)
    out.columns = ["a", "b"]
    return out[out.a != out.b].reset_index()
