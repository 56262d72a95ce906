"""Claims about the classical estimators (exact, AID with Neumann or CG, ITD) and GD.

Notation (README glossary): ``H = grad^2_y g`` (dy x dy), ``J = grad^2_xy g`` (dx x dy),
``mu, L`` the extreme eigenvalues of H, ``lambda`` the Neumann step (``neumann_step_size``),
``beta`` the inner GD step (``inner_step_size``), ``N`` the Neumann terms (``neumann_terms``),
``T`` the inner steps (``inner_steps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import ProblemConstants, strategies
from testbed.estimators.base import InnerState
from testbed.estimators.global_oracles import GlobalOracles
from testbed.oracles import Oracles
from theory_checks import _stats
from theory_checks._exact import dominant_mode_window, evaluation_point, quadratic_view
from theory_checks.claim import Case, Claim, Fit, Measurement, NotMeasurable, SeriesPoint
from theory_checks.claim_file import load_claims
from theory_checks.classical.constants import smoothness
from theory_checks.tolerances import IDENTITY_RTOL, UNRESOLVED_TERM

# Why 5%: the stated tolerance for fitted rates against theory. The fit windows below
# are chosen so that faster modes perturb the fitted slope by well under 1%.
RATE_RTOL = 0.05
# Why 1e-9 relative: below it float64 round-off in the estimate (about 1e-13 of the largest
# term) would bend a fitted log-error line.
FIT_FLOOR = 1e-9


ALL_KINDS = ("bilevel", "minimax", "compositional")


def closed_form_problems(
    kinds: tuple[str, ...] = ALL_KINDS, *, min_dim_y: int = 1, max_dim: int = 8,
    kappa: tuple[float, float] = (1.0, 100.0),
) -> st.SearchStrategy[Any]:
    """Closed-form problems of the given kinds that the bilevel estimators accept.

    Compositional problems are FedNest's N = 1 form, whose inner Hessian is the identity
    (kappa = 1), so they only join claims that do not need kappa > 1.
    """
    options: list[st.SearchStrategy[Any]] = []
    if "bilevel" in kinds:
        options.append(strategies.quadratic_bilevel(min_dim_y=min_dim_y, max_dim=max_dim,
                                                    kappa=kappa))
    if "minimax" in kinds:
        options.append(strategies.quadratic_minimax(min_dim_y=min_dim_y, max_dim=max_dim,
                                                    kappa=kappa))
    if "compositional" in kinds:
        options.append(strategies.linear_compositional(min_levels=1, max_levels=1,
                                                       max_dim=min(max_dim, 6)))
    return st.one_of(*options)


def _cases(kinds: tuple[str, ...] = ALL_KINDS, **problem_kwargs: Any
           ) -> Callable[[], st.SearchStrategy[Case]]:
    def build() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed: Case(problem, {"point_seed": seed}),
            closed_form_problems(kinds, **problem_kwargs),
            strategies.SEEDS,
        )

    return build


def _scale(view: Any, grad_x: torch.Tensor, grad_y: torch.Tensor) -> float:
    """Natural magnitude of a hypergradient's terms, the unit of relative errors."""
    H_inv = torch.linalg.inv(view.H)
    indirect = torch.linalg.matrix_norm(view.J @ H_inv, ord=2) * grad_y.norm()
    return float(grad_x.norm() + indirect) + 1e-300


def _grid(low: int, high: int, points: int = 25) -> list[int]:
    """At most ``points`` integers spread evenly over ``[low, high]`` (both included).

    Why a grid and not every value: each value is a separate estimate whose cost grows with the
    value; 25 points resolve a geometric curve on a log plot and keep a check under a second.
    """
    return sorted(set(np.linspace(low, high, num=min(points, high - low + 1)).round()
                      .astype(int).tolist()))


# UNRESOLVED_TERM (theory_checks.tolerances): a term an identity case cannot test.


def _relative_identity(residual: torch.Tensor, scale: float) -> Measurement:
    relative = float(residual.norm()) / scale
    return Measurement(relative, IDENTITY_RTOL, relative <= IDENTITY_RTOL, relation="<=")


def _exact_parts(case: Case) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor,
                                      torch.Tensor, torch.Tensor]:
    problem = case.problem
    x, y0 = evaluation_point(problem, case.params["point_seed"])
    y_star = problem.exact_inner_solution(x)
    view = quadratic_view(problem, x, y_star)
    grad_x, grad_y = view.grad_outer(x, y_star)
    return view, x, y0, y_star, grad_x, grad_y


# --------------------------------------------------------------------------- Neumann identity


def check_neumann_error_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """estimate - exact == J H^{-1} (I - lambda H)^N grad_y f at y*(x), with lambda = 1/L."""
    problem = case.problem
    view, x, _, _, grad_x, grad_y = _exact_parts(case)
    terms = int(case.params.get("neumann_terms", 1 + case.params["point_seed"] % 60))
    lam = 1.0 / smoothness(problem)
    estimator = make(inner_steps=None, neumann_terms=terms, neumann_step_size=lam)
    out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(0))
    exact = problem.exact_hypergradient(x)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    contraction = torch.linalg.matrix_power(eye - lam * view.H, terms)
    predicted = view.J @ torch.linalg.solve(view.H, contraction @ grad_y)
    scale = _scale(view, grad_x, grad_y)
    if float(predicted.norm()) < UNRESOLVED_TERM * scale:
        # Why: a minimax problem has grad_y f(x, y*) = 0 and kappa ~ 1 gives I - lambda H ~ 0,
        # so the Neumann error is zero whatever N: the identity would hold for an estimator
        # with N - 1 terms too. Such a case cannot test the claim and is not counted as a pass.
        raise NotMeasurable("the Neumann error is below what the identity resolves "
                            f"({float(predicted.norm()) / scale:.2g} of the scale)")
    m = _relative_identity(out.value - exact - predicted, scale)
    return Measurement(m.measured, m.bound, m.passed, "relative residual <=",
                       details={"neumann_terms": terms, "hvp_calls": out.calls.hvp})


# --------------------------------------------------------------------------- Neumann bound


def neumann_error_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """||J|| ||grad_y f|| (1 - lambda mu)^N / mu  (FedNest (14a) times ||J|| ||grad_y f||)."""
    lam = params["neumann_step_size"]
    return (constants.cross_norm * params["grad_y_norm"]
            * (1.0 - lam * constants.mu) ** params["neumann_terms"] / constants.mu)


def _neumann_errors(case: Case, make: Callable[..., Any], terms: list[int]) -> tuple[
        np.ndarray, list[int], Any, float, torch.Tensor, torch.Tensor]:
    problem = case.problem
    view, x, _, _, grad_x, grad_y = _exact_parts(case)
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
    terms = _grid(1, n_max)
    errors, hvps, view, lam, grad_x, grad_y = _neumann_errors(case, make, terms)
    scale = _scale(view, grad_x, grad_y)
    series: list[SeriesPoint] = []
    worst = -math.inf
    for n, err, hvp in zip(terms, errors, hvps, strict=True):
        params = {"neumann_terms": n, "neumann_step_size": lam,
                  "grad_y_norm": float(grad_y.norm())}
        bound = claim.evaluate_bound(constants, params)
        # Why the additive IDENTITY_RTOL * scale: once the bound drops to round-off, the
        # estimate's own float64 error (not the estimator) decides the comparison.
        worst = max(worst, err - bound - IDENTITY_RTOL * scale)
        series.append(SeriesPoint("measured", "neumann_terms", n, err, hvp))
        series.append(SeriesPoint("bound", "neumann_terms", n, bound, hvp))
    final_bound = claim.evaluate_bound(constants, {
        "neumann_terms": n_max, "neumann_step_size": lam, "grad_y_norm": float(grad_y.norm())})
    return Measurement(float(errors[-1]), final_bound, worst <= 0.0, "<= at every N on the grid",
                       series=tuple(series), details={"kappa": constants.kappa})


# --------------------------------------------------------------------------- Neumann decay rate


def check_neumann_decay_rate(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Fitted slope of log||error|| in N equals log(1 - lambda mu) within 5%."""
    problem = case.problem
    view, x, _, _, grad_x, grad_y = _exact_parts(case)
    lam = 1.0 / smoothness(problem)
    eigenvalues, vectors = view.spectrum
    coeffs = vectors.T @ grad_y.cpu().numpy()
    J = view.J.cpu().numpy()
    amplitudes = np.array([np.linalg.norm(J @ vectors[:, k]) * abs(coeffs[k]) / eigenvalues[k]
                           for k in range(len(eigenvalues))])
    rates = np.abs(1.0 - lam * eigenvalues)
    scale = _scale(view, grad_x, grad_y)
    window = dominant_mode_window(amplitudes, rates, FIT_FLOOR * scale)
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
    fit = _stats.fit_rate(np.array(terms), errors)
    tolerance = RATE_RTOL * abs(theory)
    result = Fit("log error per Neumann term", fit.slope, fit.ci_low, fit.ci_high, theory,
                 tolerance, residual=fit.residual_max)
    series = tuple(
        [SeriesPoint("measured", "neumann_terms", n, e, h) for n, e, h in
         zip(terms, errors, hvps, strict=True)]
        + [SeriesPoint("fitted", "neumann_terms", n, math.exp(fit.intercept + fit.slope * n))
           for n in terms]
    )
    return Measurement(fit.slope, theory, result.agrees, "|fit - theory| <= 5% |theory|",
                       series=series, fit=result, details={"window": [start, stop]})


# --------------------------------------------------------------------------- CG


def _textbook_cg(H: np.ndarray, rhs: np.ndarray, iterations: int) -> np.ndarray:
    """``iterations`` steps of textbook conjugate gradient on ``H v = rhs`` from ``v = 0``, on
    the dense matrix (an implementation independent of the estimator's, which sees only
    Hessian-vector products); exact arithmetic stops at a zero residual."""
    v, residual = np.zeros_like(rhs), rhs.copy()
    direction, rr = residual.copy(), float(residual @ residual)
    for _ in range(iterations):
        if rr == 0.0:
            break
        h_dir = H @ direction
        step = rr / float(direction @ h_dir)
        v, residual = v + step * direction, residual - step * h_dir
        rr_next = float(residual @ residual)
        direction, rr = residual + (rr_next / rr) * direction, rr_next
    return v


def check_cg_exact(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """AID-CG with dim_y iterations and the exact inner solution equals the exact hypergradient."""
    return cg_exactness(case, make, operator_power=1)


def check_normal_cg_exact(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """AID with CG on the normal equations ``H^T H u = H^T grad_y f`` (a library's solver for
    non-symmetric systems), dim_y iterations, exact inner solution: exact, to the round-off of
    CG on ``H^T H``, whose condition number is kappa^2."""
    return cg_exactness(case, make, operator_power=2)


def cg_exactness(case: Case, make: Callable[..., Any], operator_power: int) -> Measurement:
    """CG with dim_y iterations on the operator ``H^operator_power`` (1: H; 2: the normal
    equations) from the exact inner solution: the relative error of the hypergradient.

    A case on which CG is already exact after dim_y - 1 iterations cannot test the count: with
    ``grad_y f(x, y*) = 0`` (minimax problems) or an inner Hessian with fewer than dim_y distinct
    eigenvalues excited by ``grad_y f`` (a compositional problem's H = I) the Krylov space is
    exhausted early, and a CG one iteration short would pass. Such cases are rejected.
    """
    problem = case.problem
    view, x, _, _, grad_x, grad_y = _exact_parts(case)
    scale = _scale(view, grad_x, grad_y)
    H, J, g = view.H.cpu().numpy(), view.J.cpu().numpy(), grad_y.cpu().numpy()
    operator = np.linalg.matrix_power(H, operator_power)  # H, or H^T H (H symmetric)
    rhs = np.linalg.matrix_power(H, operator_power - 1) @ g
    short = J @ (_textbook_cg(operator, rhs, problem.dim_y - 1) - np.linalg.solve(H, g))
    if float(np.linalg.norm(short)) < UNRESOLVED_TERM * scale:
        raise NotMeasurable("CG is exact here after dim_y - 1 iterations ("
                            f"{float(np.linalg.norm(short)) / scale:.2g} of the scale): a CG "
                            "one iteration short would pass")
    estimator = make(inner_steps=None, cg_iterations=problem.dim_y)
    out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(0))
    residual = out.value - problem.exact_hypergradient(x)
    relative = float(residual.norm()) / scale
    # Why kappa(operator) * 1e-10: CG's forward error in floating point grows with the condition
    # number of the operator it runs on (Greenbaum 1997, Thm 4.2.1), kappa for H and kappa^2 for
    # H^T H; at kappa = 1 this is the identity tier.
    tol = IDENTITY_RTOL * problem.constants().kappa ** operator_power
    return Measurement(relative, tol, relative <= tol, "relative error <=",
                       details={"cg_iterations": problem.dim_y, "hvp_calls": out.calls.hvp})


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
    series = [SeriesPoint("measured", "iteration", int(t), float(e), problem.n_clients * int(t))
              for t, e in zip(steps, errors, strict=True)]
    series += [SeriesPoint("bound", "iteration", int(t), float(b), problem.n_clients * int(t))
               for t, b in zip(steps, bounds, strict=True)]
    theory = math.log(rho)
    fit = _stats.fit_rate(steps[start:stop + 1], errors[start:stop + 1])
    result = Fit("log error per inner iteration", fit.slope, fit.ci_low, fit.ci_high, theory,
                 RATE_RTOL * abs(theory), residual=fit.residual_max)
    series += [SeriesPoint("fitted", "iteration", int(t),
                           math.exp(fit.intercept + fit.slope * t)) for t in steps[start:]]
    series += [SeriesPoint("theory", "iteration", int(t),
                           float(errors[start] * rho ** (t - start))) for t in steps[start:]]
    return Measurement(fit.slope, theory, bound_holds and result.agrees,
                       "<= at every t and |fit - theory| <= 5% |theory|",
                       series=tuple(series), fit=result,
                       details={"window": [start, stop], "kappa": constants.kappa})


# --------------------------------------------------------------------------- ITD


def _itd_run(case: Case, make: Callable[..., Any], steps: int) -> tuple[Any, ...]:
    problem = case.problem
    view, x, y0, y_star, grad_x, grad_y = _exact_parts(case)
    beta = 1.0 / smoothness(problem)
    estimator = make(inner_steps=steps, inner_step_size=beta)
    out = estimator.estimate(problem, x, InnerState(y0), np.random.default_rng(0))
    return out, view, x, y0, y_star, grad_x, grad_y, beta


def _itd_prediction(view: Any, x: torch.Tensor, y0: torch.Tensor, y_star: torch.Tensor,
                    beta: float, steps: int) -> tuple[torch.Tensor, float]:
    """The identity's ITD_T and the scale of its residual (the gradients at y_T)."""
    eye = torch.eye(y0.shape[0], dtype=torch.float64)
    A_T = torch.linalg.matrix_power(eye - beta * view.H, steps)
    y_T = y_star + A_T @ (y0 - y_star)
    gx_T, gy_T = view.grad_outer(x, y_T)
    predicted = gx_T - view.J @ torch.linalg.solve(view.H, (eye - A_T) @ gy_T)
    return predicted, _scale(view, gx_T, gy_T)


def check_itd_error_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """ITD_T = grad_x f(x, y_T) - J H^{-1}(I - (I - beta H)^T) grad_y f(x, y_T) on quadratics.

    A case whose identity gives the same value at T - 1 or T + 1 as at T (to within what the
    identity resolves) cannot test it: with ``beta H = I`` (kappa = 1, or a compositional
    problem's identity inner Hessian) one step reaches y* and every T >= 1 gives the same ITD, so
    an estimator off by one step would pass. Such cases are rejected, not counted as passes.
    """
    steps = int(case.params.get("inner_steps", 1 + case.params["point_seed"] % 40))
    out, view, x, y0, y_star, _, _, beta = _itd_run(case, make, steps)
    predicted, scale = _itd_prediction(view, x, y0, y_star, beta, steps)
    for neighbour in (steps - 1, steps + 1):
        other, _ = _itd_prediction(view, x, y0, y_star, beta, neighbour)
        gap = float((other - predicted).norm())
        if neighbour >= 0 and gap < UNRESOLVED_TERM * scale:
            raise NotMeasurable(f"the identity gives the same ITD at T = {neighbour} as at "
                                f"T = {steps} ({gap / scale:.2g} of the scale): an off-by-one "
                                "in T would pass")
    m = _relative_identity(out.value - predicted, scale)
    return Measurement(m.measured, m.bound, m.passed, "relative residual <=",
                       details={"inner_steps": steps})


def itd_error_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """q^T [ (l_x + ||J|| l_y (1 + q^T) / mu) ||y_0 - y*|| + ||J|| ||grad_y f(x, y*)|| / mu ]."""
    q = max(abs(1.0 - params["inner_step_size"] * constants.mu),
            abs(1.0 - params["inner_step_size"] * constants.L))
    qT = q ** params["inner_steps"]
    J, mu = constants.cross_norm, constants.mu
    return qT * ((constants.outer_grad_x_lipschitz
                  + J * constants.outer_grad_y_lipschitz * (1.0 + qT) / mu)
                 * params["initial_distance"] + J * params["grad_y_norm"] / mu)


def check_itd_error_bound(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """||ITD_T - grad h|| <= itd_error_bound on a grid of T in [0, T_max]."""
    problem = case.problem
    constants = problem.constants()
    view, x, y0, y_star, grad_x, grad_y = _exact_parts(case)
    exact = problem.exact_hypergradient(x)
    beta = 1.0 / smoothness(problem)
    slack = IDENTITY_RTOL * _scale(view, grad_x, grad_y)
    t_max = int(min(150, math.ceil(3 * constants.kappa) + 3))  # why: ~3 e-folds of decay
    series, worst, last = [], -math.inf, (0.0, 0.0)
    for steps in [0, *_grid(1, t_max)]:
        estimator = make(inner_steps=steps, inner_step_size=beta)
        out = estimator.estimate(problem, x, InnerState(y0), np.random.default_rng(0))
        error = float((out.value - exact).norm())
        params = {"inner_steps": steps, "inner_step_size": beta,
                  "initial_distance": float((y0 - y_star).norm()),
                  "grad_y_norm": float(grad_y.norm())}
        bound = claim.evaluate_bound(constants, params)
        worst = max(worst, error - bound - slack)
        calls = out.calls.oracle_calls
        series += [SeriesPoint("measured", "inner_steps", steps, error, calls),
                   SeriesPoint("bound", "inner_steps", steps, bound, calls)]
        last = (error, bound)
    return Measurement(last[0], last[1], worst <= 0.0, "<= at every T on the grid",
                       series=tuple(series))


# --------------------------------------------------------------------------- exact vs FD


def check_exact_finite_differences(
    claim: Claim, case: Case, make: Callable[..., Any]
) -> Measurement:
    """The exact hypergradient equals central finite differences of h(x) = f(x, y*(x))."""
    problem = case.problem
    x, _ = evaluation_point(problem, case.params["point_seed"])
    estimator = make()
    state = estimator.init(problem)  # a library adapter's state is its inner start
    value = estimator.estimate(problem, x, state, np.random.default_rng(0)).value
    # Why eps^(1/3) * scale: the step that balances truncation (O(h^2)) and round-off
    # (O(eps / h)) for central differences.
    step = np.finfo(np.float64).eps ** (1.0 / 3.0) * max(1.0, float(x.abs().max()))
    eye = torch.eye(problem.dim_x, dtype=torch.float64)
    fd = torch.stack([
        (problem.outer_objective(x + step * e) - problem.outer_objective(x - step * e))
        / (2 * step) for e in eye])
    relative = float((value - fd).norm()) / (float(fd.norm()) + 1.0)
    # Why 1e-6: central differences with that step are accurate to ~eps^(2/3) ~ 4e-11 times
    # the third derivative scale; quadratics have none, but round-off in h(x) (magnitude up to
    # ~1e3 here) divided by the step leaves ~1e-8.
    return Measurement(relative, 1e-6, relative <= 1e-6, "relative difference <=")


# --------------------------------------------------------------------------- the claims

CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("claims.toml"))
