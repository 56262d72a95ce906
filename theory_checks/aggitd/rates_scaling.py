"""Scaling of FBO-AggITD: stationarity against the local steps tau and the variance of the
iterate against the number of sampled clients S."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel, strategies
from testbed.algorithms.aggitd import AggITDState
from testbed.algorithms.base import run_algorithm
from theory_checks import _stats
from theory_checks._sampling import sampling_exponent_measurement
from theory_checks.aggitd.common import NO_DRAWS, _setup, fixed_clients_context, outer_spectrum
from theory_checks.aggitd.rates_common import FixedIndex, outer_lipschitz
from theory_checks.claim import Case, Claim, Fit, Measurement, NotMeasurable, SeriesPoint
from theory_checks.tolerances import IDENTITY_RTOL

# --------------------------------------------------------------------------- scaling


TAU_GRID = (1, 2, 4, 8)
TAU_ITERATIONS = 5
# Why 0.05: with alpha_i = alpha / tau and beta_i = beta / tau, tau changes one round's map by
# O(alpha L_h) = 0.3 on x and O(beta L_g) <= 1/6 on y in the second-order terms only, an
# exponent of a few hundredths over tau = 1..8; an unscaled step (alpha, not alpha/tau) gives
# an exponent of order 1 (the contraction changes with tau).
TAU_TOLERANCE = 0.05


def check_tau_stationarity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """(1/K) sum_{k<K} ||grad f(x_k)||^2 of FBO-AggITD (exact mean over Q) vs tau: exponent 0."""
    problem = case.problem
    ex, x0, _ = _setup(case)
    eig = outer_spectrum(problem)
    # Why 0.05 / max(L_h, L_f): the tau-dependence of One-Round-Upper's map is O(alpha L_f / 2)
    # per round (L_f >= ||grad^2_x f_i||), 2.5% here, far below what a mis-scaled step changes.
    alpha = 0.05 / max(float(eig.max()), outer_lipschitz(problem))
    lam = 1.0 / ex.L_g
    beta = min(1.0, lam, 1.0 / (6.0 * ex.L_g))
    values = []
    for tau in TAU_GRID:
        algorithm = make(inner_steps=1, local_steps=tau, inner_step_size=beta,
                         neumann_step_size=lam, outer_step_size=alpha, expectation=True)
        state = algorithm.init(problem)._replace(x=x0, y=ex.y_star)
        records = run_algorithm(algorithm, problem, TAU_ITERATIONS, NO_DRAWS, state=state)
        values.append(float(np.mean([float(problem.exact_hypergradient(r.x).norm() ** 2)
                                     for r in records[:TAU_ITERATIONS]])))
    if min(values) <= (IDENTITY_RTOL * ex.scale(ex.y_star)) ** 2:
        raise NotMeasurable("started at a stationary point")
    fit = _stats.fit_exponent(np.array(TAU_GRID, float), np.array(values))
    result = Fit("exponent of (1/K) sum ||grad f(x_k)||^2 in tau", fit.slope, fit.ci_low,
                 fit.ci_high, 0.0, TAU_TOLERANCE, residual=fit.residual_max)
    series = tuple(SeriesPoint("measured", "local_steps", t, v)
                   for t, v in zip(TAU_GRID, values, strict=True))
    return Measurement(fit.slope, 0.0, result.agrees, "|exponent| <= 0.05", series=series,
                       fit=result, details={"values": values})


def check_participation_algorithm(claim: Claim, case: Case, make: Callable[..., Any]
                                  ) -> Measurement:
    """Var over every S-subset of FBO-AggITD's x_1 (Q = 1, exact oracles): exponent in
    (M - S) / (S (M - 1)) equals 1."""
    problem = case.problem
    m = problem.n_clients
    ex, x0, y0 = _setup(case)
    algorithm = make(inner_steps=1, local_steps=2, outer_step_size=0.1)
    def outcome(subset: tuple[int, ...]) -> torch.Tensor:
        ctx = fixed_clients_context(problem, FixedIndex(1), torch.tensor(subset))  # type: ignore
        return algorithm.step(ctx, AggITDState(x0, y0, None)).x

    # with clients that differ only in linear terms x_1 is affine in the subset means (the
    # local x-corrections E_i (x_nu - x) are the same on every client)
    return sampling_exponent_measurement(m, outcome, "Var[x_1]",
                                         "clients identical: no sampling variance")


def _four_client_cases() -> st.SearchStrategy[Case]:
    """Four clients that differ only in linear terms (every subset is enumerated)."""
    problem = st.builds(
        lambda dx, dy, kappa, gh, seed: QuadraticBilevel.random(
            4, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=0.0,
            gradient_heterogeneity=gh),
        st.integers(1, 2), st.integers(1, 2), st.floats(1.0, 4.0), st.floats(0.1, 3.0),
        strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"point_seed": seed}), problem, strategies.SEEDS)
