"""Scaling of FBO-AggITD: stationarity against the local steps tau and the variance of the
iterate against the number of sampled clients S."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel, strategies
from testbed.algorithms.aggitd import AggITDState
from theory_checks import stats
from theory_checks.aggitd.common import exact_setup, fixed_clients_context, outer_spectrum
from theory_checks.aggitd.constants import (
    inner_step,
    lemma3_outer_step,
    neumann_step,
    theorem1_inner_steps,
    theorem1_outer_step,
)
from theory_checks.aggitd.iteration import affine_iteration, trajectory_mean
from theory_checks.aggitd.rates_common import FixedIndex
from theory_checks.claim import Case, Claim, Fit, Measurement, NotMeasurable, SeriesPoint
from theory_checks.client_sampling import sampling_exponent_measurement
from theory_checks.exact_quantities import outer_affine
from theory_checks.tolerances import IDENTITY_RTOL

# --------------------------------------------------------------------------- scaling


TAU_GRID = (1, 2, 4, 8)
# Why 2e6: the affine map follows ~1e6 iterations per second; Theorem 1's steps give horizons of
# 1e3 to 1e5 iterations on the drawn cases.
TAU_MAX_ITERATIONS = 2_000_000
# Why 0.05 above 0: the claim is one-sided (Theorem 1's bound is tau-free, an upper bound; the
# measured average may fall with tau); at Theorem 1's steps tau changes one round's map by
# O(alpha L_f) ~ 1e-4 on x and O(beta L_g) <= 1/6 on y in the second-order terms only, an
# exponent of a few thousandths; a step scaled by 1/tau_i twice (alpha / tau_i^2) slows the
# progress tau-fold, an exponent of order 0.3.
TAU_TOLERANCE = 0.05


def check_tau_stationarity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """(1/K) sum_{k<K} ||grad f(x_k)||^2 of FBO-AggITD (exact mean over Q) does not grow with
    tau: exponent <= 0.05, at Theorem 1's steps and Corollary 1's N
    (:mod:`~theory_checks.aggitd.constants`) over K = ceil(1 / (alpha mu_h)) iterations (the
    horizon on which the outer error falls by e^-1), followed as an affine map
    (:mod:`~theory_checks.aggitd.iteration`)."""
    problem = case.problem
    ex, x0, _ = exact_setup(case)
    mu_h = float(outer_spectrum(problem).min())
    n, lam, beta = theorem1_inner_steps(case), neumann_step(case), inner_step(case)
    alpha = theorem1_outer_step(case)
    horizon = math.ceil(1.0 / (alpha * mu_h))
    if horizon > TAU_MAX_ITERATIONS:
        raise NotMeasurable(f"horizon 1/(alpha mu_h) = {horizon} iterations: too long")
    G, g0 = outer_affine(problem)
    G_np, g0_np, dx = G.cpu().numpy(), g0.cpu().numpy(), problem.dim_x
    z0 = torch.cat([x0, ex.y_star]).cpu().numpy()

    def stationarity(z: np.ndarray) -> np.ndarray:
        return ((z[..., :dx] @ G_np.T + g0_np) ** 2).sum(-1)

    values = []
    for tau in TAU_GRID:
        algorithm = make(inner_steps=n, local_steps=tau, inner_step_size=beta,
                         neumann_step_size=lam, outer_step_size=alpha, expectation=True)
        it = affine_iteration(algorithm, problem, seed=case.params["point_seed"])
        values.append(trajectory_mean(it, z0, stationarity, horizon))
    if min(values) <= (IDENTITY_RTOL * ex.scale(ex.y_star)) ** 2:
        raise NotMeasurable("started at a stationary point")
    fit = stats.fit_exponent(np.array(TAU_GRID, float), np.array(values))
    result = Fit("exponent of (1/K) sum ||grad f(x_k)||^2 in tau", fit.slope, fit.ci_low,
                 fit.ci_high, 0.0, TAU_TOLERANCE, residual=fit.residual_max)
    series = tuple(SeriesPoint("measured", "local_steps", t, v)
                   for t, v in zip(TAU_GRID, values, strict=True))
    return Measurement(fit.slope, TAU_TOLERANCE, fit.slope <= TAU_TOLERANCE,
                       "exponent <= 0.05 (does not grow with tau)", series=series, fit=result,
                       details={"values": values, "K": horizon, "inner_steps": n,
                                "outer_step_size": alpha, "neumann_step_size": lam,
                                "inner_step_size": beta})


def check_participation_algorithm(claim: Claim, case: Case, make: Callable[..., Any]
                                  ) -> Measurement:
    """Var over every S-subset of FBO-AggITD's x_1 (Q = 1, exact oracles): exponent in
    (M - S) / (S (M - 1)) equals 1."""
    problem = case.problem
    m = problem.n_clients
    ex, x0, y0 = exact_setup(case)
    algorithm = make(inner_steps=1, local_steps=2, outer_step_size=lemma3_outer_step(case),
                     neumann_step_size=neumann_step(case), inner_step_size=inner_step(case))
    def outcome(subset: tuple[int, ...]) -> torch.Tensor:
        ctx = fixed_clients_context(problem, FixedIndex(1), torch.tensor(subset))  # type: ignore
        return algorithm.step(ctx, AggITDState(x0, y0, None)).x

    # with clients that differ only in linear terms x_1 is affine in the subset means (the
    # local x-corrections E_i (x_nu - x) are the same on every client)
    return sampling_exponent_measurement(m, outcome, "Var[x_1]",
                                         "clients identical: no sampling variance")


def four_client_cases() -> st.SearchStrategy[Case]:
    """Four clients that differ only in linear terms (every subset is enumerated)."""
    problem = st.builds(
        lambda dx, dy, kappa, gh, seed: QuadraticBilevel.random(
            4, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=0.0,
            gradient_heterogeneity=gh),
        st.integers(1, 2), st.integers(1, 2), st.floats(1.0, 4.0), st.floats(0.1, 3.0),
        strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"point_seed": seed}), problem, strategies.SEEDS)
