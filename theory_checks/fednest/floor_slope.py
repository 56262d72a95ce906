"""FedNest's floor-slope check: the fitted slope in N of deterministic FedNest's stationarity
floor (Thm 3.1's ``b^2`` term) against Lemma 2.2's bias rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from theory_checks import _stats
from theory_checks._exact import dominant_mode_window
from theory_checks.claim import Case, Claim, Fit, Measurement, NotMeasurable, SeriesPoint
from theory_checks.fednest.claims import CLAIMS as FEDNEST_CLAIMS
from theory_checks.fednest.common import _client_matrices
from theory_checks.fednest.constants import fednest_constants
from theory_checks.fednest.floor import check_stationarity_floor
from theory_checks.fednest.k_rate import _outer_hessian, _x_star

# Why 5%: inside the dominant-mode window the other eigenmodes carry <= 0.1% of the floor and the
# limit point's own N-dependence (grad_y f(x_N) -> grad_y f(x*)) moves it by O(rho^N); the
# classical Neumann decay-rate claim uses the same tolerance for the same kind of fit.
FLOOR_SLOPE_RTOL = 0.05


def _floor_parts(case: Case) -> dict[str, Any]:
    """Eigen-decomposition behind the floor ``||grad f(x_N)|| ~ ||J H^{-1} A^{N+1} v*||``."""
    problem = case.problem
    hess = _outer_hessian(problem)
    if float(torch.linalg.eigvalsh(hess).min()) <= 0.0:
        raise NotMeasurable("h is not strongly convex: no bounded-below floor to reach")
    x_star = _x_star(problem)
    y_star = problem.exact_inner_solution(x_star)
    mats = _client_matrices(problem, x_star, y_star)
    H, J, v = mats["H"].mean(0), mats["J"].mean(0), mats["gy"].mean(0)
    values, vectors = torch.linalg.eigh(H)
    return {"H": H, "J": J, "v": v, "values": values.cpu().numpy(),
            "vectors": vectors.cpu().numpy()}


def check_floor_slope(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Fitted slope in N of ``log ||grad f(x_N)||`` (deterministic FedNest's limit, read exactly
    by :func:`theory_checks.fednest.floor.check_stationarity_floor`) against Lemma 2.2's rate.

    At the limit ``x_N`` FedOut's direction vanishes and ``y_N = y*(x_N)``, so
    ``grad f(x_N) = -J H^{-1} A^{N+1} grad_y f(x_N, y*)`` (deterministic truncation, N + 1 terms):
    the floor decays like ``(1 - mu/l)^N`` with ``mu = lambda_min(H_bar)`` and
    ``l = 1/neumann_step_size`` (the exact form of notes 3.2 / T11, halved for the norm). The
    fit uses N in the window where the slowest mode dominates
    (:func:`theory_checks._exact.dominant_mode_window`); the check also asks the fitted slope to
    be no shallower than the slope of the paper's ``b`` (``log((kappa_g - 1)/kappa_g)``, A1-A2
    constants), i.e. (15)'s rate is an upper bound on the measured one.
    """
    problem = case.problem
    if problem.kind != "bilevel":
        raise NotMeasurable("only bilevel problems have a nonzero bias floor")
    parts = _floor_parts(case)
    lam = 1.0 / fednest_constants(problem).l_g1
    values, vectors = parts["values"], parts["vectors"]
    coeffs = vectors.T @ parts["v"].cpu().numpy()
    JH = parts["J"].cpu().numpy() @ vectors / values
    amplitudes = np.abs(coeffs) * np.linalg.norm(JH, axis=0)
    rates = 1.0 - lam * values
    scale = float(np.linalg.norm(JH, 2) * np.linalg.norm(coeffs)) + 1e-300
    # Why 1e-9 of the scale: the floor is read through a (dx + dy)-column solve whose round-off
    # is ~1e-13 relative; four decades above it the fitted slope is round-off free.
    window = dominant_mode_window(amplitudes, rates, 1e-9 * scale)
    if window is None:
        raise NotMeasurable("slowest eigenmode of H not excited above round-off")
    # Why start at 1/(lam mu): the limit point's own N-dependence (grad_y f(x_N) - grad_y f(x*)
    # = O(rho^N)) then perturbs the floor by <= e^-1 of its first-order size at the first N and
    # decays along the window; why 12 more terms: each N costs dx + dy + 2 FedNest steps.
    start = max(window[0], math.ceil(1.0 / (lam * float(values[0]))))
    stop = min(window[1], start + 12)
    if stop - start < 3:
        raise NotMeasurable("dominant-mode window shorter than 3 terms")
    grid = sorted(set(np.linspace(start, stop, num=5).round().astype(int).tolist()))
    floors, series, rhos = [], [], []
    for terms in grid:
        m = check_stationarity_floor(_FLOOR_CLAIM, Case(problem, {
            "point_seed": case.params["point_seed"], "neumann_terms": terms,
            "inner_steps": case.params["inner_steps"]}), make)
        rhos.append(m.details["rho"])
        floors.append(math.sqrt(m.measured))
        series.append(SeriesPoint("measured", "neumann_terms", terms, floors[-1]))
    if max(rhos) >= 1.0 or min(floors) <= 0.0:
        return Measurement(math.nan, 0.0, False, "deterministic FedNest converges",
                           details={"rho": rhos})
    fit = _stats.fit_rate(np.array(grid, float), np.array(floors))
    theory = math.log(1.0 - lam * float(values[0]))
    pc = fednest_constants(problem).as_dict()
    paper_slope = math.log((pc["kappa_g"] - 1.0) / pc["kappa_g"]) if pc["kappa_g"] > 1 \
        else -math.inf
    tolerance = FLOOR_SLOPE_RTOL * abs(theory)
    result = Fit("log ||grad f(x_N)|| per Neumann term", fit.slope, fit.ci_low, fit.ci_high,
                 theory, tolerance, residual=fit.residual_max)
    series += [SeriesPoint("theory", "neumann_terms", n,
                           floors[0] * math.exp(theory * (n - grid[0]))) for n in grid]
    passed = result.agrees and fit.slope <= paper_slope + tolerance
    return Measurement(fit.slope, theory, passed,
                       "|fit - log(1 - mu/l)| <= 5% and fit <= log(1 - 1/kappa_g)",
                       series=tuple(series), fit=result,
                       details={"paper_slope": paper_slope, "grid": grid, "rho": max(rhos),
                                "kappa_g": pc["kappa_g"]})


# The claim whose check reads one exact floor (its bound formula is what that check evaluates).
_FLOOR_CLAIM = next(c for c in FEDNEST_CLAIMS if c.id == "fednest.thm31.stationarity_floor")
