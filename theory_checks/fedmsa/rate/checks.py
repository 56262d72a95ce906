"""The checks of FedMSA Theorem 3.1's rates (:mod:`theory_checks.fedmsa.rate`): the exponent in R
(deterministic, capped steps), in K at tau = 0, in M on copies of one client and in tau on a
one-knob heterogeneity family, each with its setup and tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from problems import QuadraticBilevel
from theory_checks import stats
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import SeriesPoint
from theory_checks.fedmsa.common import EXPONENT_TOL
from theory_checks.fedmsa.common import THEORY_M_EXPONENT
from theory_checks.fedmsa.common import build
from theory_checks.fedmsa.common import criterion
from theory_checks.fedmsa.common import exponent_measurement
from theory_checks.fedmsa.common import fixed_point
from theory_checks.fedmsa.common import fixed_point_Z
from theory_checks.fedmsa.common import local_points
from theory_checks.fedmsa.common import msa_radius
from theory_checks.fedmsa.common import run
from theory_checks.fedmsa.common import start_point
from theory_checks.fedmsa.constants import heterogeneity_tau
from theory_checks.fedmsa.constants import theorem31_steps
from theory_checks.fedmsa.moments import exact_run
from theory_checks.rate_fits import fit_against

# Why 0.1 on the exponent in K: the fitted exponents come from 4-6 grid points of a deterministic
# curve whose leading-order behaviour is the claimed power; sub-leading terms (the partial sum of
# a geometric series that has not fully converged) bend the log-log line by a few hundredths.
K_EXPONENT_TOL = 0.1


# --------------------------------------------------------------------------- rates


def _averaged_criterion(problem: Any, records: list[Any]) -> np.ndarray:
    """Output-rule criterion after each round R: the mean of the criterion over every local
    iterate ``(r, k)`` of rounds ``0..R-1`` (the expectation over ``(r, k) ~ Unif``)."""
    xs, Zs, rounds = local_points(records)
    values = criterion(problem, xs, Zs).cpu().numpy()
    sums = np.cumsum(values)
    counts = np.arange(1, len(values) + 1)
    ends = [i for i in range(len(rounds)) if i == len(rounds) - 1 or rounds[i + 1] != rounds[i]]
    return np.array([sums[i] / counts[i] for i in ends])


def _rate_setup(case: Case, K: int) -> tuple[float, float, float, float]:
    """Steps following Theorem 3.1, ``alpha, beta = O(1/(tau K))``: the contracting pair of
    :func:`~theory_checks.fedmsa.constants.theorem31_steps` (inside Lemmas B.1-B.2) capped at
    ``1/(4 tau K)``; returns alpha, beta, tau and the spectral radius of centralised MSA's
    iteration with those steps."""
    problem = case.problem
    alpha, beta = theorem31_steps(case)
    tau = heterogeneity_tau(problem)
    if tau > 0:
        alpha, beta = min(alpha, 1.0 / (4.0 * tau * K)), min(beta, 1.0 / (4.0 * tau * K))
    return alpha, beta, tau, msa_radius(problem, alpha, beta)


# Why R in (4, 8, 16, 32) horizons: the values are exact expectations, and past 4 horizons
# (e^-24 of the criterion's sum left) the averaged criterion is S / (1 + (R - 1) K) to
# round-off, whose exponent in R is -1 - (K - 1) / (1 + (R - 1) K): within 0.01 of -1. The
# long grid is what resolves small floors: a floor f bends the last octave's exponent by about
# f K R_max / S, so R_max = 32 horizons sees floors ~ 20x smaller than the 3 horizons of a run.
R_HORIZONS = (4, 8, 16, 32)
# Why 0.02: twice the -1 - (K - 1)/(1 + (R - 1) K) bend above.
R_EXPONENT_TOL = 0.02
# Why: the moment recursion costs ~50 us per round and client; 2e4 rounds stay under a second.
R_ROUND_CAP = 20_000


def _msa(
    make: Callable[..., Any],
    problem: Any,
    local_steps: int,
    momentum: float,
    steps: tuple[float, float],
    batch_size: int | None,
) -> Any:
    """FedMSA on ``problem`` (:func:`~theory_checks.fedmsa.common.build`) with ``K`` local
    steps, the momentum ``rho``, the steps ``(alpha, beta)`` and minibatches of ``batch_size``
    (``None``: exact maps)."""
    return build(
        make,
        problem,
        local_steps=local_steps,
        momentum=momentum,
        outer_step_size=steps[0],
        inner_step_size=steps[1],
        batch_size=batch_size,
    )


def check_rate_R(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Deterministic part of Theorem 3.1 / Cor. C.1 / Cor. D.1: ``E`` of the output-rule
    criterion after R rounds is O(tau/R + 1/(sqrt(K) R)); exact exponent in R <= -1 + 0.02.

    Exact maps (sigma = 0), so the only randomness is the local client of every round; the
    expectation over it is exact (:func:`theory_checks.fedmsa.moments.exact_run`: the round of
    the registered algorithm identified as an affine map per local client, the state's mean and
    covariance propagated as a mixture)."""
    problem = case.problem
    K = case.params["local_steps"]
    alpha, beta, tau, radius = _rate_setup(case, K)
    # the horizon: 6 / (contraction gap) local steps of centralised MSA leave e^-6 of the start
    gap = max(1.0 - radius, 1e-12)
    horizon = max(4, int(math.ceil(6.0 / (gap * K))))
    grid = np.array([f * horizon for f in R_HORIZONS])
    if grid[-1] > R_ROUND_CAP:
        raise NotMeasurable(f"needs {grid[-1]} rounds of K = {K} (slow contraction)")
    alg = _msa(make, problem, K, case.params["momentum"], (alpha, beta), None)
    x0 = start_point(problem, case.params["seed"])
    Z0 = alg.maps.initial(problem)[1]
    averaged = exact_run(alg, problem, x0, Z0, 1, case.params["seed"]).criteria(int(grid[-1]))
    values = averaged[grid - 1]
    if values.min() <= 0 or not np.isfinite(values).all():
        raise NotMeasurable("criterion reached exactly zero or overflowed")
    fit = stats.fit_exponent(grid, values)
    local = (np.diff(np.log(values)) / np.diff(np.log(grid))).tolist()
    # exact values: no sampling interval (confidence 1); the local exponents are in details
    result = Fit(
        "exponent of E averaged criterion in R",
        fit.slope,
        fit.slope,
        fit.slope,
        -1.0,
        R_EXPONENT_TOL,
        1.0,
    )
    passed = fit.slope <= -1.0 + R_EXPONENT_TOL
    series = tuple(
        SeriesPoint("measured", "rounds R", int(r), float(v), 0, 2 * int(r))
        for r, v in zip(grid, values, strict=True)
    )
    return Measurement(
        fit.slope,
        -1.0 + R_EXPONENT_TOL,
        passed,
        "exact exponent <=",
        series=series,
        fit=result,
        details={
            "tau": tau,
            "K": K,
            "alpha": alpha,
            "beta": beta,
            "horizon": horizon,
            "local_exponents": local,
            "values": values.tolist(),
        },
    )


def check_rate_K(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """tau = 0: the criterion at fixed R is O(1/(sqrt(K) R)); fitted exponent in K <= -1/2.
    A case whose rounds need more map evaluations than its ``round_budget`` is not measured."""
    problem = case.problem
    if heterogeneity_tau(problem) > 1e-12:
        raise NotMeasurable("tau > 0")
    alpha, beta = theorem31_steps(case)
    radius = msa_radius(problem, alpha, beta)
    Ks = np.array([2, 4, 8])
    # Why R = 6 / (K_min (1 - radius)): the smallest K must already see the sum of the
    # criterion converge (e^-6 of its first terms), else the average is flat in K.
    R = max(3, int(math.ceil(6.0 / (Ks[0] * (1.0 - radius)))))
    # the case's budget of map evaluations, per profile (the claim K_AT_TAU_ZERO says why)
    if R * int((Ks + 1).sum()) > int(case.params["round_budget"]):
        raise NotMeasurable(f"R = {R} rounds for K up to {Ks[-1]}: over the budget")
    values = []
    for K in Ks:
        alg = _msa(make, problem, int(K), case.params["momentum"], (alpha, beta), None)
        records = run(
            alg,
            problem,
            R,
            seed=case.params["seed"],
            state=alg.state_at(problem, start_point(problem, case.params["seed"])),
        )
        values.append(_averaged_criterion(problem, records)[-1])
    values_a = np.array(values)
    if values_a.min() <= 0:
        raise NotMeasurable("criterion reached exactly zero")
    fit = stats.fit_exponent(Ks, values_a)
    result = fit_against(
        "exponent of the averaged criterion in K (tau = 0)", fit, -0.5, K_EXPONENT_TOL
    )
    series = tuple(
        SeriesPoint("measured", "local steps K", int(k), float(v))
        for k, v in zip(Ks, values_a, strict=True)
    )
    passed = fit.slope <= -0.5 + K_EXPONENT_TOL
    return Measurement(
        fit.slope,
        -0.5 + K_EXPONENT_TOL,
        passed,
        "fitted exponent <=",
        series=series,
        fit=result,
        details={"R": R, "alpha": alpha, "beta": beta},
    )


# =============================================================================== rate in M


def replicated(problem: QuadraticBilevel, m: int) -> QuadraticBilevel:
    """``m`` copies of client 0 of ``problem``, its sample set included (iid clients: the same
    data distribution, independent draws)."""
    arrays: dict[str, Any] = {
        k: np.repeat(v[:1], m, axis=0) for k, v in problem.to_arrays().items()
    }
    return QuadraticBilevel(**arrays, name=f"{problem.name}[0]x{m}")


# Why K = 1, rho = 1/2, R = 6: momentum on (eq. (5)'s recursion is exercised) and a short
# horizon; the M-dependence of Thm 3.1 is in every noise term (sigma^2/(MKR) and
# (sigma/(MKR))^{2/3}) whatever K and rho, and only the global step (5) averages over M.
M_RATE_SETUP: dict[str, float] = {"local_steps": 1, "momentum": 0.5, "rounds": 6}


def check_rate_M(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Exact noise-only criterion (start at the fixed point) of M copies of client 0 (its
    sample set included) against M over the case's ``m_grid``: exponent <= -2/3 + 0.1. Every M
    has the same means and the same per-client noise, so only the number of independent draws
    (5) averages changes."""
    problem = case.problem
    K, rho, R = (
        int(M_RATE_SETUP["local_steps"]),
        float(M_RATE_SETUP["momentum"]),
        int(M_RATE_SETUP["rounds"]),
    )
    one = replicated(problem, 1)
    alpha, beta = theorem31_steps(case)  # the case's problem is one client: client 0's steps
    x0, Z0 = fixed_point(one)
    grid = list(case.params["m_grid"])
    values = []
    for m in grid:
        sub = replicated(problem, m)
        alg = _msa(make, sub, K, rho, (alpha, beta), 1)
        exact = exact_run(alg, sub, x0, Z0, sub.n_samples, case.params["seed"], iid=True)
        values.append(exact.criteria(R)[-1])
    return exponent_measurement(
        "exponent of E criterion in M",
        grid,
        values,
        THEORY_M_EXPONENT,
        THEORY_M_EXPONENT + EXPONENT_TOL,
        {"K": K, "rho": rho, "R": R, "alpha": alpha, "beta": beta},
        "clients M",
    )


# =============================================================================== rate in tau


HETEROGENEITY_GRID = (0.1, 0.2, 0.4)
# Why K = 2, R = 8, rho = 1/R, b_0 = K R: Theorem 3.1's parameter regime at a horizon the
# identification affords; the tau/R term needs alpha ~ 1/(tau K) to bind, which these steps
# (the contracting pair at the smallest tau, times tau_min / tau) do.
TAU_SETUP = {"local_steps": 2, "rounds": 8}


def _rebuild(spec: dict[str, Any], knob: float) -> QuadraticBilevel:
    """The case's instance with ``hessian_heterogeneity = knob`` (same seed: same directions,
    so every client's Jacobian deviation scales with the knob)."""
    kwargs = {k: v for k, v in spec.items() if k != "family"}
    kwargs["hessian_heterogeneity"] = knob
    return QuadraticBilevel.random(**kwargs)


def check_rate_tau(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Exact criterion after R rounds vs measured tau, alpha, beta = c / (tau K): exponent <=
    1 + 0.1 (an upper bound on the growth)."""
    K, R = TAU_SETUP["local_steps"], TAU_SETUP["rounds"]
    problems = [_rebuild(case.problem.spec(), h) for h in HETEROGENEITY_GRID]
    taus = [heterogeneity_tau(p) for p in problems]
    alpha0, beta0 = theorem31_steps(case)  # the case's instance is the grid's first
    x0 = start_point(problems[0], case.params["seed"])
    values = []
    for p, tau in zip(problems, taus, strict=True):
        # alpha, beta = O(1/(tau K)) (Thm 3.1): the contracting pair at the smallest tau, scaled
        alpha, beta = alpha0 * taus[0] / tau, beta0 * taus[0] / tau
        alg = _msa(make, p, K, 1.0 / R, (alpha, beta), 1)
        Z0 = fixed_point_Z(p, x0[None])[0]
        exact = exact_run(alg, p, x0, Z0, p.n_samples, case.params["seed"], initial_batch=K * R)
        values.append(exact.criteria(R)[-1])
    return exponent_measurement(
        "exponent of E criterion in tau",
        taus,
        values,
        1.0,
        1.0 + EXPONENT_TOL,
        {"K": K, "R": R, "taus": taus},
        "heterogeneity tau",
    )
