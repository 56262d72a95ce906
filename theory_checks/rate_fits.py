"""Fitting a rate against a paper's value, shared by the papers' checks: which steps of a
geometric error to fit, and the fitted line as the claim's :class:`~theory_checks.claim.Fit`.

- :func:`neumann_error_window`: the error of a truncated Neumann series (FedNest's HessIV,
  AggITD's eq. (11) from ``y*``) is a sum of geometric modes of the inner Hessian ``H``; the
  steps where its slowest mode dominates (:func:`~theory_checks.exact_quantities.
  dominant_mode_window`) are the ones whose log-slope is ``log(1 - lambda mu)``.
- :func:`fit_against`: a least-squares line of :mod:`theory_checks.stats` (its slope, interval and
  largest residual) beside the value the paper's bound implies and the accepted distance;
  :func:`rate_measurement`: a fitted log-rate as a claim's measurement, within
  :data:`~theory_checks.tolerances.RATE_RTOL` of the paper's; :func:`fitted_measurement`: any
  fitted slope as a claim's measurement, passing by the check's own condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import SeriesPoint
from theory_checks.exact_quantities import dominant_mode_window
from theory_checks.stats import LinearFit
from theory_checks.tolerances import RATE_RTOL


def neumann_error_window(
    J: torch.Tensor,
    spectrum: tuple[np.ndarray, np.ndarray],
    grad_y: torch.Tensor,
    lam: float,
    floor: float,
) -> tuple[int, int] | None:
    """Steps ``[start, stop]`` where the slowest mode dominates the Neumann error.

    With ``H = sum_k mu_k v_k v_k^T`` (``spectrum``: the ``mu_k`` ascending and the ``v_k`` as
    columns) the error after ``n`` terms, ``J H^{-1} (I - lambda H)^n grad_y f``, is
    ``sum_k J v_k <v_k, grad_y f> (1 - lambda mu_k)^n / mu_k``: modes of amplitude
    ``||J v_k|| |<v_k, grad_y f>| / mu_k`` and rate ``|1 - lambda mu_k|``, passed to
    :func:`~theory_checks.exact_quantities.dominant_mode_window` with ``floor`` (the smallest
    error worth fitting). ``None`` when the slowest mode is not excited above it.
    """
    eigenvalues, vectors = spectrum
    coeffs = vectors.T @ grad_y.cpu().numpy()
    J_np = J.cpu().numpy()
    amplitudes = np.array(
        [
            np.linalg.norm(J_np @ vectors[:, k]) * abs(coeffs[k]) / eigenvalues[k]
            for k in range(len(eigenvalues))
        ]
    )
    rates = np.abs(1.0 - lam * eigenvalues)
    return dominant_mode_window(amplitudes, rates, floor)


def fit_against(quantity: str, fit: LinearFit, theory: float, tolerance: float) -> Fit:
    """The slope of ``fit`` (:func:`~theory_checks.stats.fit_rate` or
    :func:`~theory_checks.stats.fit_exponent`) as the :class:`~theory_checks.claim.Fit` of
    ``quantity``: its interval and largest residual beside ``theory``, agreeing when
    ``|slope - theory| <= tolerance``."""
    return Fit(
        quantity,
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        theory,
        tolerance,
        residual=fit.residual_max,
    )


def rate_measurement(
    quantity: str,
    fit: LinearFit,
    theory: float,
    series: tuple[SeriesPoint, ...],
    details: dict[str, Any],
) -> Measurement:
    """The measurement of a linear rate: the slope of ``fit`` (log error per step) against the
    paper's ``theory = log(rate)``, holding when within :data:`~theory_checks.tolerances.
    RATE_RTOL` (5%) of it, with the fitted ``series`` and ``details``."""
    result = fit_against(quantity, fit, theory, RATE_RTOL * abs(theory))
    return fitted_measurement(
        result, result.agrees, "|fit - theory| <= 5% |theory|", series, details
    )


def fitted_measurement(
    result: Fit,
    passed: bool,
    relation: str,
    series: Sequence[SeriesPoint],
    details: dict[str, Any],
) -> Measurement:
    """The measurement of a fitted slope: ``result``'s estimate against its theory value (the
    figure and reference a claim's table shows), passing when ``passed`` (the fit's agreement
    and whatever else the check asks of the same data, which ``relation`` says), with the fit,
    the plotted ``series`` and the ``details``."""
    return Measurement(
        result.estimate,
        result.theory,
        passed,
        relation,
        series=tuple(series),
        fit=result,
        details=details,
    )
