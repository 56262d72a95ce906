"""Statistics helpers for stochastic claims and fitted rates (after TFP's statistical_testing).

Every assertion takes a ``false_fail_rate`` (the probability that it fails although the claim is
true), and the sample size is computed *before* sampling from that rate and the discrepancy the
check must detect. Rates and exponents are fitted by ordinary least squares with Student-t
confidence intervals.

Naming follows TFP: ``min_num_samples_for_*`` computes a sample size; ``assert_*`` raises
:class:`StatisticalAssertionError` with the numbers when the data contradict the claim.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats


class StatisticalAssertionError(AssertionError):
    """A statistical assertion failed; the message gives the interval and the claimed value."""


# --------------------------------------------------------------------------- sample sizes


def hoeffding_half_width(num_samples: int, value_range: float, false_fail_rate: float) -> float:
    """Half width ``t`` with ``P(|mean - E| >= t) <= false_fail_rate`` for values in a range.

    Two-sided Hoeffding: ``P(|mean - E| >= t) <= 2 exp(-2 n t^2 / range^2)``.
    """
    _check_rate(false_fail_rate)
    return value_range * math.sqrt(math.log(2.0 / false_fail_rate) / (2.0 * num_samples))


def min_num_samples_for_hoeffding(
    discrepancy: float, value_range: float, false_fail_rate: float
) -> int:
    """Samples needed so a Hoeffding interval has half width at most ``discrepancy / 2``.

    Then a true mean and a mean off by ``discrepancy`` cannot both pass.
    """
    _check_rate(false_fail_rate)
    half = discrepancy / 2.0
    return math.ceil(value_range**2 * math.log(2.0 / false_fail_rate) / (2.0 * half**2))


def chebyshev_half_width(num_samples: int, variance: float, false_fail_rate: float) -> float:
    """Half width ``t`` with ``P(|mean - E| >= t) <= false_fail_rate`` when ``Var <= variance``.

    Chebyshev on the mean of ``n`` i.i.d. samples (vector-valued: ``variance`` bounds
    ``E||X - E X||^2``): ``P(||mean - E|| >= t) <= variance / (n t^2)``.
    """
    _check_rate(false_fail_rate)
    return math.sqrt(variance / (num_samples * false_fail_rate))


def min_num_samples_for_chebyshev(
    discrepancy: float, variance: float, false_fail_rate: float
) -> int:
    """Samples needed so the Chebyshev half width is at most ``discrepancy / 2``."""
    _check_rate(false_fail_rate)
    half = discrepancy / 2.0
    return math.ceil(variance / (false_fail_rate * half**2))


def bonferroni(false_fail_rate: float, num_checks: int) -> float:
    """Per-check rate so that ``num_checks`` checks together fail falsely at most that often."""
    _check_rate(false_fail_rate)
    if num_checks < 1:
        raise ValueError(f"num_checks must be >= 1, got {num_checks}")
    return false_fail_rate / num_checks


# --------------------------------------------------------------------------- assertions


def assert_mean_within_by_chebyshev(
    samples: np.ndarray, expected: np.ndarray, variance: float, false_fail_rate: float
) -> float:
    """Assert ``||mean(samples) - expected|| < half width`` for i.i.d. vector samples.

    Args:
        samples: ``(n, d)`` (or ``(n,)``) i.i.d. draws.
        expected: the claimed mean.
        variance: a known upper bound on ``E||X - E X||^2`` (from the problem's exact noise).
        false_fail_rate: probability of failing when the claim is true.

    Returns:
        The observed distance ``||mean - expected||``.
    """
    samples = np.asarray(samples, dtype=np.float64)
    n = samples.shape[0]
    distance = float(np.linalg.norm(samples.mean(axis=0) - np.asarray(expected)))
    half = chebyshev_half_width(n, variance, false_fail_rate)
    if not distance < half:
        raise StatisticalAssertionError(
            f"mean is {distance:.4g} from the claimed value; Chebyshev half width {half:.4g} "
            f"(n={n}, variance bound {variance:.4g}, false-fail rate {false_fail_rate:g})"
        )
    return distance


def assert_mean_below_by_hoeffding(
    samples: np.ndarray, bound: float, value_range: float, false_fail_rate: float
) -> float:
    """Assert ``E X <= bound`` for i.i.d. values in an interval of length ``value_range``.

    Fails only when the sample mean exceeds ``bound`` by more than the one-sided Hoeffding half
    width ``range * sqrt(log(1/rate) / (2n))``. Returns the sample mean.
    """
    samples = np.asarray(samples, dtype=np.float64)
    _check_rate(false_fail_rate)
    n = samples.shape[0]
    half = value_range * math.sqrt(math.log(1.0 / false_fail_rate) / (2.0 * n))
    mean = float(samples.mean())
    if mean > bound + half:
        raise StatisticalAssertionError(
            f"sample mean {mean:.4g} exceeds the bound {bound:.4g} by more than the Hoeffding "
            f"half width {half:.4g} (n={n}, false-fail rate {false_fail_rate:g})"
        )
    return mean


# --------------------------------------------------------------------------- fits


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """``y ~ intercept + slope * x`` with a Student-t interval on the slope."""

    slope: float
    intercept: float
    ci_low: float
    ci_high: float
    confidence: float
    num_points: int
    std_error: float = math.nan  # of the slope
    dof: int = 0  # residual degrees of freedom of the interval
    # largest |y - line| over the points: on exact (deterministic) data the interval measures
    # how far the points are from a line, not chance, and this is the figure to show
    residual_max: float = math.nan


def fit_slope(x: np.ndarray, y: np.ndarray, confidence: float = 0.95) -> LinearFit:
    """Ordinary least squares of ``y`` on ``x`` with a two-sided t interval for the slope."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("fit_slope needs two 1-D arrays of the same length")
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"fit_slope needs at least 3 points, got {n}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("fit_slope got NaN or inf")
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx == 0.0:
        raise ValueError("fit_slope needs at least two distinct x values")
    slope = float(xc @ (y - y.mean())) / sxx
    intercept = float(y.mean() - slope * x.mean())
    residual = y - (intercept + slope * x)
    sigma2 = float(residual @ residual) / (n - 2)
    std_error = math.sqrt(sigma2 / sxx)
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 2)) * std_error
    return LinearFit(
        slope,
        intercept,
        slope - half,
        slope + half,
        confidence,
        n,
        std_error,
        n - 2,
        float(np.abs(residual).max()),
    )


def fit_rate(steps: np.ndarray, errors: np.ndarray, confidence: float = 0.95) -> LinearFit:
    """Fit ``log error = a + step * log(rate)``: the slope is ``log(rate)``."""
    errors = np.asarray(errors, dtype=np.float64)
    if (errors <= 0).any():
        raise ValueError("fit_rate needs positive errors")
    return fit_slope(np.asarray(steps, dtype=np.float64), np.log(errors), confidence)


def fit_exponent(sizes: np.ndarray, values: np.ndarray, confidence: float = 0.95) -> LinearFit:
    """Fit ``log value = a + p log size``: the slope is the scaling exponent ``p``."""
    sizes = np.asarray(sizes, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if (sizes <= 0).any() or (values <= 0).any():
        raise ValueError("fit_exponent needs positive sizes and values")
    return fit_slope(np.log(sizes), np.log(values), confidence)


def _check_rate(rate: float) -> None:
    if not 0.0 < rate < 1.0:
        raise ValueError(f"false_fail_rate must be in (0, 1), got {rate}")
