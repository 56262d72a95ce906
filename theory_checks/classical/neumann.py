"""The Neumann-series AID estimator with the exact inner solution (Ghadimi & Wang 2018, eq. (3.3);
FedNest Lemma 2.2, eq. (14a)).

Result. With ``y = y*(x)`` and ``lambda = 1/L``, the N-term Neumann estimate
``hat h_N = grad_x f - J lambda sum_{j<N} (I - lambda H)^j grad_y f`` satisfies, because
``lambda sum_{j<N} (I - lambda H)^j = H^{-1}(I - (I - lambda H)^N)``,

    hat h_N - grad h = J H^{-1} (I - lambda H)^N grad_y f(x, y*)            (identity)
    ||hat h_N - grad h|| <= ||J|| ||grad_y f(x, y*)|| (1 - lambda mu)^N / mu       (bound)

(the bound is (14a), ``||lambda sum_{j<N} (I - lambda H)^j - H^{-1}|| <= (1 - lambda mu)^N / mu``,
times ``||J|| ||grad_y f||``), so log||hat h_N - grad h|| decays in N with slope
``log(1 - lambda mu)``.

Hypotheses: ``g`` mu-strongly convex and L-smooth in y, ``lambda <= 1/L``
(:mod:`theory_checks.classical.constants`).

Checked: the identity to :data:`~theory_checks.tolerances.IDENTITY_RTOL` at a drawn N
(:func:`check_neumann_error_identity`), the bound at every N of a grid
(:func:`check_neumann_error_bound`), and the fitted slope within 5% of ``log(1 - lambda mu)`` over
the window where the slowest eigenmode dominates (:func:`check_neumann_decay_rate`); the
perturbation runs the series at 0.9 lambda."""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from testbed import Neumann
from testbed.estimators.classical import ImplicitDifferentiation
from testbed.registry import get_estimator
from theory_checks import stats
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.claim import SeriesPoint
from theory_checks.classical.common import KIND_ERROR_BOUND
from theory_checks.classical.common import KIND_LINEAR_RATE
from theory_checks.classical.common import KIND_STEP_IDENTITY
from theory_checks.classical.common import classical_claim
from theory_checks.classical.common import exact_parts
from theory_checks.classical.common import grid
from theory_checks.classical.common import hypergradient_scale
from theory_checks.classical.common import relative_identity
from theory_checks.classical.constants import NEUMANN_STEP_CAP
from theory_checks.classical.constants import STRONGLY_CONVEX
from theory_checks.classical.constants import smoothness
from theory_checks.measurements import BoundOnGrid
from theory_checks.rate_fits import neumann_error_window
from theory_checks.rate_fits import rate_measurement
from theory_checks.tolerances import FIT_FLOOR
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM

# --------------------------------------------------------------------------- Neumann identity


def check_neumann_error_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """estimate - exact == J H^{-1} (I - lambda H)^N grad_y f at y*(x), with lambda = 1/L."""
    problem = case.problem
    view, x, _, _, grad_x, grad_y = exact_parts(case)
    terms = int(case.params.get("neumann_terms", 1 + case.params["point_seed"] % 60))
    lam = 1.0 / smoothness(problem)
    estimator = make(inner_steps=None, neumann_terms=terms, neumann_step_size=lam)
    out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(0))
    exact = problem.exact_hypergradient(x)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    contraction = torch.linalg.matrix_power(eye - lam * view.H, terms)
    predicted = view.J @ torch.linalg.solve(view.H, contraction @ grad_y)
    scale = hypergradient_scale(view, grad_x, grad_y)
    if float(predicted.norm()) < UNRESOLVED_TERM * scale:
        # Why: a minimax problem has grad_y f(x, y*) = 0 and kappa ~ 1 gives I - lambda H ~ 0,
        # so the Neumann error is zero whatever N: the identity would hold for an estimator
        # with N - 1 terms too. Such a case cannot test the claim and is not counted as a pass.
        raise NotMeasurable(
            "the Neumann error is below what the identity resolves "
            f"({float(predicted.norm()) / scale:.2g} of the scale)"
        )
    m = relative_identity(out.value - exact - predicted, scale)
    return Measurement(
        m.measured,
        m.bound,
        m.passed,
        "relative residual <=",
        details={"neumann_terms": terms, "hvp_calls": out.calls.hvp},
    )


# --------------------------------------------------------------------------- Neumann bound


def neumann_error_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """||J|| ||grad_y f|| (1 - lambda mu)^N / mu  (FedNest (14a) times ||J|| ||grad_y f||)."""
    lam = params["neumann_step_size"]
    return (
        constants.cross_norm
        * params["grad_y_norm"]
        * (1.0 - lam * constants.mu) ** params["neumann_terms"]
        / constants.mu
    )


def _neumann_errors(
    case: Case, make: Callable[..., Any], terms: list[int]
) -> tuple[np.ndarray, list[int], Any, float, torch.Tensor, torch.Tensor]:
    problem = case.problem
    view, x, _, _, grad_x, grad_y = exact_parts(case)
    lam = 1.0 / smoothness(problem)
    exact = problem.exact_hypergradient(x)
    errors, hvps = [], []
    for n in terms:
        estimator = make(inner_steps=None, neumann_terms=n, neumann_step_size=lam)
        out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(0))
        errors.append(float((out.value - exact).norm()))
        hvps.append(out.calls.hvp)
    return np.array(errors), hvps, view, lam, grad_x, grad_y


def check_neumann_error_bound(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """||estimate - exact|| <= bound for N = 1..N_max with the exact inner solution."""
    problem = case.problem
    constants = problem.constants()
    n_max = int(min(200, math.ceil(4 * constants.kappa) + 5))  # why: covers ~4 e-folds of decay
    terms = grid(1, n_max)
    errors, hvps, view, lam, grad_x, grad_y = _neumann_errors(case, make, terms)
    # Why the additive IDENTITY_RTOL * scale: once the bound drops to round-off, the estimate's
    # own float64 error (not the estimator) decides the comparison.
    slack = IDENTITY_RTOL * hypergradient_scale(view, grad_x, grad_y)
    points = BoundOnGrid("neumann_terms", slack)
    # plain floats (not numpy scalars): the comparison and the series record Python numbers
    for n, err, hvp in zip(terms, errors.tolist(), hvps, strict=True):
        params = {"neumann_terms": n, "neumann_step_size": lam, "grad_y_norm": float(grad_y.norm())}
        points.add(n, err, claim.evaluate_bound(constants, params), hvp)
    # the last point (N_max) and its slack are recorded: a case passes only if its last point does
    return points.measurement(
        "<= at every N on the grid", details={"kappa": constants.kappa}, slack=slack
    )


# --------------------------------------------------------------------------- Neumann decay rate


def check_neumann_decay_rate(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Fitted slope of log||error|| in N equals log(1 - lambda mu) within 5%."""
    problem = case.problem
    view, x, _, _, grad_x, grad_y = exact_parts(case)
    lam = 1.0 / smoothness(problem)
    spectrum = view.spectrum
    eigenvalues = spectrum[0]
    scale = hypergradient_scale(view, grad_x, grad_y)
    window = neumann_error_window(view.J, spectrum, grad_y, lam, FIT_FLOOR * scale)
    theory = math.log(1.0 - lam * float(eigenvalues[0]))
    if window is None:
        raise NotMeasurable("slowest eigenmode not excited above float64 round-off")
    start = max(window[0], 1)
    # Why 4 kappa terms: the slowest mode then decays by e^-4 over the window, plenty for a
    # log-linear fit whose residuals are round-off, while keeping the HVP count linear in kappa.
    stop = min(window[1], start + math.ceil(4 * problem.constants().kappa))
    if stop - start < 3:
        raise NotMeasurable("dominant-mode window shorter than 3 terms")
    terms = sorted(set(np.linspace(start, stop, num=12).round().astype(int).tolist()))
    errors, hvps, *_ = _neumann_errors(case, make, terms)
    fit = stats.fit_rate(np.array(terms), errors)
    series = tuple(
        [
            SeriesPoint("measured", "neumann_terms", n, e, h)
            for n, e, h in zip(terms, errors, hvps, strict=True)
        ]
        + [
            SeriesPoint("fitted", "neumann_terms", n, math.exp(fit.intercept + fit.slope * n))
            for n in terms
        ]
    )
    return rate_measurement(
        "log error per Neumann term", fit, theory, series, {"window": [start, stop]}
    )


def _neumann_wrong_step(**kw: Any) -> Any:
    est = get_estimator("aid-neumann").build(**kw)
    lam = est.linear_solver.step_size
    return ImplicitDifferentiation(
        est.inner, Neumann(est.linear_solver.terms, 0.9 * lam), est.batch_size
    )


NEUMANN_STEP = Perturbation(
    "Neumann step 0.9 lambda",
    "the series runs with 0.9 of the step it reports (a mis-set step size): its error decays "
    "like (1 - 0.9 lambda mu)^N, a 10% slower rate, and the partial sum is no longer the "
    "identity's; a 10% error in a step is the size of a wrong constant in a step rule",
    _neumann_wrong_step,
)


# --------------------------------------------------------------------------- the claims

# What every claim of this result shares.
neumann_claim = classical_claim.but(
    estimators=("aid-neumann",),
    hypotheses=(STRONGLY_CONVEX, NEUMANN_STEP_CAP),
    perturbation=NEUMANN_STEP,
)


ERROR_IDENTITY = neumann_claim(
    **KIND_STEP_IDENTITY,
    id="classical.neumann.error_identity",
    reference="Ghadimi & Wang 2018, eq. (3.3); FedNest Lemma 2.2, eq. (14a)'s identity from (13b)",
    statement=(
        "hat h_N - grad h = J H^{-1} (I - lambda H)^N grad_y f(x, y*) (exact inner "
        "solution, lambda = 1/L)"
    ),
    check=check_neumann_error_identity,
    notes="Neumann sum: lambda sum_{j<N} (I - lambda H)^j = H^{-1}(I - (I - lambda H)^N).",
)


ERROR_BOUND = neumann_claim(
    **KIND_ERROR_BOUND,
    id="classical.neumann.error_bound",
    reference="FedNest Lemma 2.2, eq. (14a), times ||J|| ||grad_y f||",
    statement="||hat h_N - grad h|| <= ||J|| ||grad_y f(x, y*)|| (1 - lambda mu)^N / mu",
    check=check_neumann_error_bound,
    bound=neumann_error_bound,
)


DECAY_RATE = neumann_claim(
    **KIND_LINEAR_RATE,
    id="classical.neumann.decay_rate",
    reference="FedNest Lemma 2.2, eq. (14a) (slope log(1 - 1/kappa) in N)",
    statement="slope of log||hat h_N - grad h|| in N = log(1 - lambda mu)",
    check=check_neumann_decay_rate,
    notes=(
        "Fitted over the N-window where the slowest eigenmode carries all but 0.1% of the "
        "error and the error is above float64 round-off."
    ),
)


CLAIMS: tuple[Claim, ...] = (
    ERROR_IDENTITY,
    ERROR_BOUND,
    DECAY_RATE,
)
