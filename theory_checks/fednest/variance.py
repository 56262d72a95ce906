"""FedIHGP's variance checks (notes 3.2): the exact second moment over ``N'``, its linear
growth in N, and the client-sampling variance of ``|S_0| = s`` clients with ``N = 1``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from theory_checks import stats
from theory_checks.claim import Case, Claim, Fit, Measurement, NotMeasurable, SeriesPoint
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import (
    client_matrices,
    expected_ihgp,
    fedihgp,
    scripted_context,
)
from theory_checks.fednest.constants import fednest_constants
from theory_checks.tolerances import IDENTITY_RTOL


def _variance_formula(H: torch.Tensor, v: torch.Tensor, lam: float, terms: int
                      ) -> tuple[float, float]:
    """Notes 3.2: ``E||p||^2 = (N/l^2) sum_{j<N} ||A^j v||^2`` and ``||E p||^2``."""
    eye = torch.eye(H.shape[0], dtype=torch.float64)
    A = eye - lam * H
    power, second = v, 0.0
    for _ in range(terms):
        second += float(power @ power)
        power = A @ power
    second *= terms * lam**2
    mean = torch.linalg.solve(H, (eye - torch.linalg.matrix_power(A, terms)) @ v)
    return second, float(mean @ mean)


def check_variance_exact(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Exact second moment over ``N'`` of ``p_{N'}`` equals the notes-3.2 formula."""
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    terms = int(case.params["neumann_terms"])
    lam = 1.0 / fednest_constants(problem).l_g1
    estimator = fedihgp(make, terms, lam)
    mean, second, _ = expected_ihgp(estimator, problem, x, y)
    mats = client_matrices(problem, x, y)
    second_th, mean_sq_th = _variance_formula(mats["H"].mean(0), mats["gy"].mean(0), lam, terms)
    scale = second_th + 1e-300
    residual = (abs(second - second_th) + abs(float(mean @ mean) - mean_sq_th)) / scale
    return Measurement(residual, IDENTITY_RTOL, residual <= IDENTITY_RTOL, "relative residual <=",
                       details={"variance": second - float(mean @ mean),
                                "variance_formula": second_th - mean_sq_th,
                                "neumann_terms": terms})


def check_variance_linear_in_n(claim: Claim, case: Case, make: Callable[..., Any]
                               ) -> Measurement:
    """Fitted exponent of ``Var(p_{N'})`` in N over ``N in {a, 2a, 4a, 8a}``, ``a >= 8 kappa``.

    Derivation (notes 3.2): ``Var = N S_N - Q_N`` with ``S_N -> sum v_k^2 / (lambda_k (2l -
    lambda_k))`` and ``Q_N -> ||H^{-1} v||^2 <= (2 kappa - 1) S / 1``, so the local log-log slope
    is ``1 / (1 - Q/(N S))`` and lies in ``[1, 1 / (1 - (2 kappa - 1)/N)]``; the tolerance is that
    deviation at ``N = a`` (plus 0.02 for the ``rho^{2N}`` corrections).

    The exponent is the same for N and N + 1 terms (an estimator that runs N + 1 terms while N
    is reported has a variance linear in N too), so the run also checks, at each N of the grid,
    the exact law the exponent is fitted to: ``E||p||^2 = (N / l^2) sum_{j<N} ||A^j v||^2``
    (notes 3.2) to 1e-10, which a count off by one breaks.
    """
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    constants = problem.constants()
    l_g1 = fednest_constants(problem).l_g1
    lam = 1.0 / l_g1
    kappa = l_g1 / constants.mu
    base = int(8 * math.ceil(kappa))
    grid = [base, 2 * base, 4 * base, 8 * base]
    mats = client_matrices(problem, x, y)
    variances, series, law = [], [], 0.0
    for terms in grid:
        mean, second, _ = expected_ihgp(fedihgp(make, terms, lam), problem, x, y)
        second_th, _ = _variance_formula(mats["H"].mean(0), mats["gy"].mean(0), lam, terms)
        law = max(law, abs(second - second_th) / (second_th + 1e-300))
        variance = second - float(mean @ mean)
        if variance <= 0.0:
            return Measurement(0.0, 1.0, False, "variance > 0",
                               details={"neumann_terms": terms, "variance": variance})
        variances.append(variance)
        series.append(SeriesPoint("measured", "neumann_terms", terms, variance, 0, terms))
    fit = stats.fit_exponent(np.array(grid, dtype=float), np.array(variances))
    deviation = (2 * kappa - 1) / base
    tolerance = deviation / (1.0 - deviation) + 0.02
    result = Fit("exponent of Var(p) in N", fit.slope, fit.ci_low, fit.ci_high, 1.0, tolerance,
                 residual=fit.residual_max)
    series += [SeriesPoint("fitted", "neumann_terms", n,
                           math.exp(fit.intercept) * n**fit.slope) for n in grid]
    return Measurement(fit.slope, 1.0, result.agrees and law <= IDENTITY_RTOL,
                       "|fit - 1| <= derived deviation; E||p||^2 = its law (1e-10)",
                       series=tuple(series), fit=result,
                       details={"kappa": kappa, "grid": grid, "tolerance": tolerance,
                                "second_moment_law_residual": law})


def check_client_sampling_variance(claim: Claim, case: Case, make: Callable[..., Any]
                                   ) -> Measurement:
    """``|S_0| = s`` sampled UAR: ``Var(p_0) = (1/l^2) (m - s)/(s (m - 1)) sigma_v^2`` (N = 1).

    The variance is exact: every subset of size s is enumerated through a scripted context.
    ``sigma_v^2 = (1/m) sum_i ||grad_y f_i - grad_y f||^2``. The fitted exponent of Var in the
    finite-population factor is 1 (an exact law, so the interval is round-off wide).
    """
    problem = case.problem
    m = problem.n_clients
    x, y = evaluation_point(problem, case.params["point_seed"])
    lam = 1.0 / fednest_constants(problem).l_g1
    gy = client_matrices(problem, x, y)["gy"]
    sigma2 = float(((gy - gy.mean(0)) ** 2).sum(1).mean())
    full = lam * gy.mean(0)
    if sigma2 <= 1e-12 * float(gy.norm()) ** 2:
        raise NotMeasurable("clients' outer gradients do not differ: no sampling variance")
    sizes, variances, laws, worst, series = [], [], [], 0.0, []
    for s in range(1, m):
        subsets = [torch.tensor(c) for c in itertools.combinations(range(m), s)]
        estimator = fedihgp(make, 1, lam, participation=s)
        ctx = scripted_context(problem, subsets, s)
        values = torch.stack([estimator.ihgp(ctx, x, y).p for _ in subsets])
        mean_gap = float((values.mean(0) - full).norm()) / float(full.norm() + 1e-300)
        variance = float(((values - full) ** 2).sum(1).mean())
        law = (m - s) / (s * (m - 1))
        predicted = lam**2 * law * sigma2
        worst = max(worst, abs(variance - predicted) / predicted, mean_gap)
        sizes.append(s)
        variances.append(variance)
        laws.append(law)
        series += [SeriesPoint("measured", "sampled_clients", s, variance, 0, len(subsets)),
                   SeriesPoint("theory", "sampled_clients", s, predicted, 0, len(subsets))]
    details = {"n_clients": m, "worst_relative_residual": worst}
    if len(sizes) < 3 or min(variances) <= 0.0:
        passed = worst <= IDENTITY_RTOL
        return Measurement(worst, IDENTITY_RTOL, passed, "relative residual <=",
                           series=tuple(series), details=details)
    fit = stats.fit_exponent(np.array(laws), np.array(variances))
    result = Fit("exponent of Var in (m-s)/(s(m-1))", fit.slope, fit.ci_low, fit.ci_high, 1.0,
                 1e-6, residual=fit.residual_max)
    return Measurement(worst, IDENTITY_RTOL, worst <= IDENTITY_RTOL and result.agrees,
                       "relative residual <= and exponent = 1", series=tuple(series), fit=result,
                       details=details)


