"""Gradient descent's linear rate on a strongly convex quadratic (Nesterov 2004, Thm 2.1.15).

Result. GD on ``y -> g(x, y)`` with step ``beta = 1/L`` from ``y_0``:

    ||y_t - y*|| <= (1 - mu/L)^t ||y_0 - y*||,

and on a quadratic the slowest eigenmode decays exactly at ``1 - mu/L``, so the fitted slope of
``log||y_t - y*||`` in t is ``log(1 - mu/L)``.

Hypotheses: ``g`` mu-strongly convex and L-smooth in y, ``beta <= 1/L``.

Checked (:func:`check_gd_linear_rate`): the bound at every t, and the slope fitted over the window
where the slowest mode dominates within 5% of ``log(1 - mu/L)``, on the estimators' own inner
solver, which must run exactly the T steps it is given (T + 1 iterates); the perturbation runs
GD at 0.8/L."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from testbed import GradientDescent
from testbed import Oracles
from testbed.estimators.global_oracles import GlobalOracles
from testbed.registry import get_estimator
from theory_checks import stats
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.claim import SeriesPoint
from theory_checks.classical.common import KIND_LINEAR_RATE
from theory_checks.classical.common import classical_claim
from theory_checks.classical.constants import GD_STEP_CAP
from theory_checks.classical.constants import STRONGLY_CONVEX
from theory_checks.classical.constants import smoothness
from theory_checks.exact_quantities import dominant_mode_window
from theory_checks.exact_quantities import evaluation_point
from theory_checks.exact_quantities import quadratic_view
from theory_checks.rate_fits import fit_against
from theory_checks.rate_fits import fitted_measurement
from theory_checks.tolerances import FIT_FLOOR
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import RATE_RTOL

# --------------------------------------------------------------------------- GD rate


def check_gd_linear_rate(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """GD with beta = 1/L: ||y_t - y*|| <= (1 - mu/L)^t ||y_0 - y*||, slope log(1 - mu/L)."""
    problem = case.problem
    constants = problem.constants()
    x, y0 = evaluation_point(problem, case.params["point_seed"])
    y_star = problem.exact_inner_solution(x)
    view = quadratic_view(problem, x, y_star)
    beta = 1.0 / smoothness(problem)
    eigenvalues, vectors = view.spectrum
    amplitudes = np.abs(vectors.T @ (y0 - y_star).cpu().numpy())
    rates = np.abs(1.0 - beta * eigenvalues)
    rho = 1.0 - constants.mu / constants.L
    initial = float((y0 - y_star).norm())
    window = dominant_mode_window(amplitudes, rates, FIT_FLOOR * initial)
    if window is None:
        raise NotMeasurable("slowest eigenmode not excited above float64 round-off")
    start, stop = window
    oracles = GlobalOracles(Oracles(problem), np.random.default_rng(0))
    inner = make(inner_steps=stop, inner_step_size=beta).inner  # the estimator's own solver
    run = inner.run(oracles, x, y0, keep_trajectory=True)
    errors = np.array([float((y - y_star).norm()) for y in run.trajectory])
    steps = np.arange(len(errors))
    bounds = rho**steps * initial
    slack = IDENTITY_RTOL * (initial + float(y_star.norm()))  # round-off of the iterate itself
    bound_holds = bool((errors <= bounds + slack).all())
    series = [
        SeriesPoint("measured", "iteration", int(t), float(e), problem.n_clients * int(t))
        for t, e in zip(steps, errors, strict=True)
    ]
    series += [
        SeriesPoint("bound", "iteration", int(t), float(b), problem.n_clients * int(t))
        for t, b in zip(steps, bounds, strict=True)
    ]
    theory = math.log(rho)
    fit = stats.fit_rate(steps[start : stop + 1], errors[start : stop + 1])
    result = fit_against("log error per inner iteration", fit, theory, RATE_RTOL * abs(theory))
    series += [
        SeriesPoint("fitted", "iteration", int(t), math.exp(fit.intercept + fit.slope * t))
        for t in steps[start:]
    ]
    series += [
        SeriesPoint("theory", "iteration", int(t), float(errors[start] * rho ** (t - start)))
        for t in steps[start:]
    ]
    # the solver runs the T = stop steps it is given: T + 1 iterates (a count read in one place
    # and run from another fits the same rate)
    ran = len(run.trajectory) - 1
    return fitted_measurement(
        result,
        bound_holds and result.agrees and ran == stop,
        "<= at every t, |fit - theory| <= 5% |theory| and T steps run",
        series,
        {"window": [start, stop], "kappa": constants.kappa, "steps_run": ran},
    )


def _slow_gd(**kw: Any) -> Any:
    est = get_estimator("aid-neumann").build(**kw)
    inner = est.inner
    return dataclasses.replace(est, inner=GradientDescent(inner.steps, 0.8 * inner.step_size))


SLOW_GD = Perturbation(
    "GD step 0.8/L",
    "the inner solver runs with 0.8 of the step 1/L: the rate becomes "
    "1 - 0.8 mu/L, a 20% slower contraction than claimed",
    _slow_gd,
)


# --------------------------------------------------------------------------- the claims

LINEAR_RATE = classical_claim(
    **KIND_LINEAR_RATE,
    id="classical.gd.linear_rate",
    reference="Nesterov 2004, Thm 2.1.15 (GD on a strongly convex quadratic, step 1/L)",
    statement="||y_t - y*|| <= (1 - mu/L)^t ||y_0 - y*||; fitted slope = log(1 - mu/L)",
    estimators=("aid-cg", "aid-neumann", "itd"),
    check=check_gd_linear_rate,
    hypotheses=(STRONGLY_CONVEX, GD_STEP_CAP),
    perturbation=SLOW_GD,
)


CLAIMS: tuple[Claim, ...] = (LINEAR_RATE,)
