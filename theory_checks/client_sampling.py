"""Client-sampling variance by exact enumeration, and its exponent in the sampling factor.

When the server averages S clients drawn uniformly without replacement from M, and the sampled
quantity is an average of fixed per-client values ``v_i``, its variance over the draw is exactly

.. math::  \\operatorname{Var} = \\frac{M - S}{S (M - 1)} \\sigma_v^2 ,
           \\qquad \\sigma_v^2 = \\frac{1}{M} \\sum_i \\|v_i - \\bar v\\|^2 ,

the finite-population correction. The checks enumerate every S-subset (so the variance is
exact, not sampled) and fit the exponent of the variance in ``(M - S) / (S (M - 1))``: 1 when
the quantity is affine in the subset mean, as FedNest's FedIHGP (N = 1), AggITD and FedMSA are
on the problems where the papers state (or imply) the law.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import torch

from theory_checks import stats
from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import SeriesPoint


def sampling_factor(m: int, s: int) -> float:
    """``(M - S) / (S (M - 1))``: the variance of a uniform S-of-M subset mean over sigma^2."""
    return (m - s) / (s * (m - 1))


def subset_variances(
    m: int, outcome: Callable[[tuple[int, ...]], torch.Tensor]
) -> tuple[list[float], list[float]]:
    """``(sampling factors, variances)`` for S = 1..M-1: the variance of ``outcome(subset)``
    over every S-subset of the M clients (each equally likely), by enumeration."""
    factors, variances = [], []
    for s in range(1, m):
        stack = torch.stack([outcome(subset) for subset in itertools.combinations(range(m), s)])
        variances.append(float(((stack - stack.mean(0)) ** 2).sum(-1).mean()))
        factors.append(sampling_factor(m, s))
    return factors, variances


def sampling_exponent_measurement(
    m: int, outcome: Callable[[tuple[int, ...]], torch.Tensor], quantity: str, identical_reason: str
) -> Measurement:
    """Fitted exponent of the enumerated variance in the sampling factor against 1.

    Why the 0.02 tolerance: when the quantity is affine in the subset mean the variance is
    exactly proportional to the factor, so the fit is exact up to round-off.
    """
    factors, variances = subset_variances(m, outcome)
    if min(variances) <= 1e-24:
        raise NotMeasurable(identical_reason)
    fit = stats.fit_exponent(np.array(factors), np.array(variances))
    result = Fit(
        f"exponent of {quantity} in (M-S)/(S(M-1))",
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        1.0,
        0.02,
        fit.confidence,
        residual=fit.residual_max,
    )
    series = tuple(
        SeriesPoint("measured", "sampled_clients", s + 1, v) for s, v in enumerate(variances)
    )
    return Measurement(
        fit.slope,
        1.0,
        result.agrees,
        "|exponent - 1| <= 0.02",
        series=series,
        fit=result,
        details={"variances": variances},
    )
