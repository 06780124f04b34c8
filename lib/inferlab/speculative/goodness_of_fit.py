"""Pearson's chi-square goodness-of-fit test in numpy, with the critical value from the chi-square CDF (mpmath).

Used to show empirically that speculative sampling reproduces the target distribution: bins whose
expected count is below ``min_expected`` are pooled into one, as the usual rule of thumb asks.
"""

from __future__ import annotations

from collections.abc import Sequence

import mpmath
import numpy as np

from .._validate import positive, positive_int

__all__ = ["chi_square", "chi_square_critical", "fits"]


def chi_square(counts: Sequence[int] | np.ndarray, probs: Sequence[float] | np.ndarray,
               min_expected: float = 5.0) -> tuple[float, int]:
    """(statistic, degrees of freedom) of observed ``counts`` against ``probs``; small bins pooled into one."""
    obs = np.asarray(counts, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if obs.ndim != 1 or obs.shape != p.shape or obs.size < 2:
        raise ValueError("counts and probs must be 1-D, of the same length >= 2")
    if np.any(obs < 0) or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError("counts must be >= 0 and probs a distribution summing to 1")
    positive("min_expected", min_expected)
    expected = obs.sum() * p
    big = expected >= min_expected
    obs_b = np.append(obs[big], obs[~big].sum())
    exp_b = np.append(expected[big], expected[~big].sum())
    keep = exp_b > 0
    obs_b, exp_b = obs_b[keep], exp_b[keep]
    if obs_b.size < 2:
        raise ValueError("too few samples: fewer than two bins reach min_expected")
    return float(((obs_b - exp_b) ** 2 / exp_b).sum()), int(obs_b.size - 1)


def chi_square_critical(dof: int, significance: float = 0.01) -> float:
    """x with P(chi2_dof > x) = ``significance``: the regularized lower incomplete gamma solved for x."""
    k = positive_int("dof", dof)
    if not 0 < significance < 1:
        raise ValueError(f"significance must lie in (0, 1), got {significance!r}")
    target = 1 - significance
    lo, hi = 0.0, float(k + 10 * np.sqrt(2 * k) + 50)  # the CDF there is 1 to many digits
    for _ in range(80):  # bisection on the monotone CDF: 2**-80 of the bracket
        mid = (lo + hi) / 2
        if mpmath.gammainc(k / 2, 0, mid / 2, regularized=True) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2

def fits(counts: Sequence[int] | np.ndarray, probs: Sequence[float] | np.ndarray, significance: float = 0.01,
         min_expected: float = 5.0) -> bool:
    """Whether the chi-square test does not reject ``probs`` at ``significance``."""
    stat, dof = chi_square(counts, probs, min_expected)
    return stat <= chi_square_critical(dof, significance)
