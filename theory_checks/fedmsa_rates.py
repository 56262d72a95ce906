"""FedMSA Theorem 3.1, stochastic: rates in M and tau, the rho statement, scaling in S.

Companion of :mod:`theory_checks.fedmsa` (same maps, criterion and output rule, whose helpers it
reuses). Theorem 3.1 bounds the output-rule criterion ``E||P(x~)||^2 + ||Z~ - Z*(x~)||^2`` by
``O(tau/R + 1/(sqrt(K) R) + sigma^2/(MKR) + (sigma/(MKR))^{2/3})``. The checks here:

- **M** (clients): identical client means (tau = 0, no value heterogeneity) so that M changes
  only how many noisy oracles the global step (5) averages; started at the fixed point, so the
  criterion is the noise part alone. The theorem's slowest term in M is ``M^{-2/3}``.
- **tau** (heterogeneity): a one-parameter family whose client Jacobian deviations scale with
  one knob; steps ``alpha, beta = c / (tau K)`` as the theorem prescribes; the bound grows at
  most linearly in tau.
- **rho** (notes 6 item 4): the theorem says ``rho = Theta(1/R)``, the proof takes ``rho =
  max(1/R, rho_2)`` with ``rho_2 ~ R^{-2/3}`` and an initial batch ``b_0 = K R`` that the
  algorithm box omits. Measured from the fixed point, where only the noise terms remain.
- **S** (clients averaged in the local phase, the generalised variant): exact enumeration.

Monte Carlo exponents are fitted over replicates with explicit seeds and decided on their 95%
Student-t interval (:func:`theory_checks.aggitd_rates.interval_meets`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel, QuadraticMinimax, strategies
from theory_checks import _stats
from theory_checks._sampling import sampling_exponent_measurement
from theory_checks.aggitd import _FixedClients
from theory_checks.aggitd_rates import interval_fit, interval_meets
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable, SeriesPoint
from theory_checks.fedmsa import (
    _affine_matrix,
    _averaged_criterion,
    _point,
    _sizes,
    build,
    fixed_point_Z,
    heterogeneity_tau,
    mean_maps,
    run,
    single_timescale_step,
)
from theory_checks.runner import fast_profile, per_profile

# Why 0.1 on an exponent: Monte Carlo exponents over a 3-point grid carry pre-asymptotic bends of
# a few hundredths (the averaged criterion mixes its transient into the first rounds); the 95%
# interval covers the sampling error on top.
EXPONENT_TOL = 0.1
THEORY_M_EXPONENT = -2.0 / 3.0  # (sigma / (M K R))^{2/3}: the slowest term of Thm 3.1 in M and R


# --------------------------------------------------------------------------- helpers


def fixed_point(problem: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x*, Z*(x*))`` with ``P(x*, Z*(x*)) = 0`` (the reduced map is affine in x)."""
    dx, _ = _sizes(problem)

    def reduced(x: torch.Tensor) -> torch.Tensor:
        return mean_maps(problem, x, fixed_point_Z(problem, x))[0]

    A = _affine_matrix(reduced, dx)
    cond = float(torch.linalg.cond(A))
    # Why 1e6: beyond it the solve's round-off (cond * 1e-16) is no longer negligible.
    if not math.isfinite(cond) or cond > 1e6:
        raise NotMeasurable(f"reduced map nearly singular (condition number {cond:.3g})")
    x_star = torch.linalg.solve(A, -reduced(torch.zeros(1, dx, dtype=torch.float64))[0])
    return x_star, fixed_point_Z(problem, x_star[None])[0]


def criterion_after(problem: Any, alg: Any, R: int, seed: int, x0: torch.Tensor,
                    Z0: torch.Tensor, initial_batch: int | None = None) -> float:
    """Output-rule criterion of R rounds; round 0 with ``initial_batch`` (the proof's b_0)."""
    state = alg.state_at(problem, x0, Z0)
    first = alg if initial_batch is None else dataclasses.replace(alg, batch_size=initial_batch)
    records = run(first, problem, 1, seed=seed, state=state)
    if R > 1:
        records += run(alg, problem, R - 1, seed=seed + 1, state=records[-1].state)[1:]
    return float(_averaged_criterion(problem, records)[-1])


def _exponent_measurement(quantity: str, sizes: list[float], values: list[float],
                          theory: float, side: str, details: dict[str, Any],
                          groups: list[int] | None = None) -> Measurement:
    if min(values) <= 0.0:
        raise NotMeasurable("criterion exactly zero")
    raw = (_stats.fit_exponent(np.array(sizes), np.array(values)) if groups is None else
           _stats.fixed_effect_exponent(np.array(sizes), np.array(values), np.array(groups)))
    fit = interval_fit(quantity, raw, theory, EXPONENT_TOL)
    passed = interval_meets(fit, side)
    relation = ("95% interval low end <= theory + 0.1" if side == "upper"
                else "95% interval meets theory +- 0.1")
    grid = sorted(set(sizes))
    means = [float(np.mean([v for s, v in zip(sizes, values, strict=True) if s == g]))
             for g in grid]
    series = tuple(SeriesPoint("measured", quantity.split(" in ")[-1], g, m)
                   for g, m in zip(grid, means, strict=True))
    return Measurement(fit.estimate, theory + EXPONENT_TOL, passed, relation, series=series,
                       fit=fit, details={**details, "means": means})


def _replicates() -> int:
    """Why 3 on the fast profile: one FedMSA round costs 15-30 ms; 3 replicates of a 3-4 point
    grid keep a case near 2 s; the thorough profile takes 8."""
    return 3 if fast_profile() else 8


# --------------------------------------------------------------------------- rate in M


def sub_problem(problem: QuadraticBilevel, m: int) -> QuadraticBilevel:
    """The first ``m`` clients of ``problem`` (same client arrays and sample sets)."""
    arrays: dict[str, Any] = {k: v[:m] for k, v in problem.to_arrays().items()}
    return QuadraticBilevel(**arrays, name=f"{problem.name}[:{m}]")


M_GRID = (1, 2, 4, 8)


def check_rate_M(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Noise-only criterion (start at the fixed point) vs M: exponent <= -2/3 (+ 0.1)."""
    problem = case.problem
    if heterogeneity_tau(problem) > 1e-12:
        raise NotMeasurable("clients differ: M would change the problem, not only the noise")
    # Why K = 1, R = 4 and many replicates: momentum off (rho = 1) makes every round's noise a
    # fresh draw, so short runs are nearly independent samples of the noise part; 4 rounds x
    # 6 replicates per M give a 95% interval of about +-0.3 on the exponent in the fast budget.
    K, R, reps = 1, 4, 6 if fast_profile() else 24
    alpha, beta, _ = single_timescale_step(problem)
    x0, Z0 = fixed_point(problem)
    sizes: list[float] = []
    values: list[float] = []
    for m in M_GRID:
        sub = sub_problem(problem, m)
        # the finite sample sets give each client its own noise variance: sigma^2 of the first
        # m clients (exact, summed over the oracles the maps use) normalises the criterion
        noise = sub.noise_variance(x0, Z0[: problem.dim_y], 1)
        sigma_sq = float(sum(v.mean() for v in noise.values() if v is not noise["hessian_inner"]))
        alg = build(make, sub, local_steps=K, momentum=1.0, outer_step_size=alpha,
                    inner_step_size=beta, batch_size=1)
        for rep in range(reps):
            seed = int(np.random.default_rng([case.params["seed"], m, rep]).integers(2**31))
            values.append(criterion_after(sub, alg, R, seed, x0, Z0) / sigma_sq)
            sizes.append(float(m))
    return _exponent_measurement("exponent of criterion / sigma^2 in M", sizes, values,
                                 THEORY_M_EXPONENT, "upper",
                                 {"K": K, "R": R, "alpha": alpha, "beta": beta})


def _identical_clients() -> st.SearchStrategy[Case]:
    """Eight clients with the same means (tau = 0, sigma_2 = 0) and their own sample sets."""
    problem = st.builds(
        lambda dx, dy, kappa, seed: QuadraticBilevel.random(
            max(M_GRID), dx, dy, 1.0 if dy == 1 else kappa, seed=seed,
            hessian_heterogeneity=0.0, gradient_heterogeneity=0.0, n_samples=6,
            gradient_noise=1.0),
        st.integers(2, 4), st.integers(2, 4), st.floats(1.0, 2.0), strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


# --------------------------------------------------------------------------- rate in tau


HETEROGENEITY_GRID = (0.1, 0.2, 0.4)


def _rebuild(spec: dict[str, Any], knob: float) -> QuadraticBilevel:
    """The case's instance with ``hessian_heterogeneity = knob`` (same seed: same directions,
    so every client's Jacobian deviation scales with the knob)."""
    kwargs = {k: v for k, v in spec.items() if k != "family"}
    kwargs["hessian_heterogeneity"] = knob
    return QuadraticBilevel.random(**kwargs)


def check_rate_tau(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Criterion vs measured tau with alpha, beta = c / (tau K): exponent <= 1 (+ 0.1)."""
    K, R = 2, 8
    problems = [_rebuild(case.problem.spec(), h) for h in HETEROGENEITY_GRID]
    taus = [heterogeneity_tau(p) for p in problems]
    alpha0, beta0, _ = single_timescale_step(problems[0])
    x0 = _point(problems[0], case.params["seed"])
    sizes: list[float] = []
    values: list[float] = []
    for p, tau in zip(problems, taus, strict=True):
        # alpha, beta = O(1/(tau K)) (Thm 3.1): the contracting pair at the smallest tau, scaled
        alpha, beta = alpha0 * taus[0] / tau, beta0 * taus[0] / tau
        alg = build(make, p, local_steps=K, momentum=1.0 / R, outer_step_size=alpha,
                    inner_step_size=beta, batch_size=1)
        Z0 = fixed_point_Z(p, x0[None])[0]
        for rep in range(_replicates()):
            seed = int(np.random.default_rng([case.params["seed"], rep]).integers(2**31))
            values.append(criterion_after(p, alg, R, seed, x0, Z0, initial_batch=K * R))
            sizes.append(tau)
    return _exponent_measurement("exponent of the criterion in tau", sizes, values, 1.0,
                                 "upper", {"K": K, "R": R, "taus": taus})


def _tau_cases() -> st.SearchStrategy[Case]:
    problem = st.builds(
        lambda m, dx, dy, kappa, seed: QuadraticBilevel.random(
            m, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=0.1,
            gradient_heterogeneity=0.0, n_samples=6, gradient_noise=0.05),
        st.integers(2, 4), st.integers(1, 2), st.integers(1, 2), st.floats(1.0, 2.0),
        strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


# --------------------------------------------------------------------------- rho


def _r_grid() -> tuple[tuple[int, ...], int]:
    """``(R grid, replicates)``. Why from R = 8 (16 thorough): from the fixed point the
    criterion ramps up over the first rounds (the iterate needs several rounds to respond to
    the momentum error), which flattens the exponent of short runs (measured -0.33 over
    R = 4..64 but -0.66 over 16..64 for the proof's choice). One round costs 8-30 ms, so the
    fast profile affords R <= 32 with 3 replicates; the thorough one R <= 128 with 8."""
    return ((8, 16, 32), 3) if fast_profile() else ((16, 32, 64, 128), 8)


def _check_rho(case: Case, make: Callable[..., Any], proof_choice: bool) -> Measurement:
    problem = case.problem
    K = 1
    alpha, beta, _ = single_timescale_step(problem)
    x0, Z0 = fixed_point(problem)
    sizes: list[float] = []
    values: list[float] = []
    groups: list[int] = []
    grid, reps = _r_grid()
    for R in grid:
        # Thm 3.1: rho = 1/R. The proof: rho = max(1/R, rho_2) with rho_2 ~ R^{-2/3}, b_0 = KR.
        rho = max(1.0 / R, R ** (-2.0 / 3.0)) if proof_choice else 1.0 / R
        alg = build(make, problem, local_steps=K, momentum=rho, outer_step_size=alpha,
                    inner_step_size=beta, batch_size=1)
        for rep in range(reps):
            # common random numbers: replicate r draws the same noise stream at every R
            seed = int(np.random.default_rng([case.params["seed"], rep]).integers(2**31))
            values.append(criterion_after(problem, alg, R, seed, x0, Z0,
                                          initial_batch=K * R if proof_choice else None))
            sizes.append(float(R))
            groups.append(rep)
    return _exponent_measurement("exponent of the criterion in R", sizes, values,
                                 THEORY_M_EXPONENT, "upper",
                                 {"K": K, "alpha": alpha, "beta": beta,
                                  "proof_choice": proof_choice}, groups)


def check_rho_as_stated(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = 1/R and Algorithm 1's box (batch b in every round): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=False)


def check_rho_proof_choice(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = max(1/R, R^{-2/3}) and b_0 = K R (the proof's choices): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=True)


def _noisy_cases() -> st.SearchStrategy[Case]:
    """Additive noise only (hessian_noise = 0), so Lemma B.5's mean-Lipschitz step condition
    is void and the momentum error obeys d_r = (1 - rho) d_{r-1} + rho eps_r exactly. Why
    dim_y >= 3: the criterion is a sum of squares of ~dim_x + 2 dim_y noise coordinates; with
    rho ~ 1/R a run holds few independent draws, and more coordinates steady each one."""
    problem = st.one_of(
        strategies.quadratic_bilevel(max_clients=3, min_dim_y=3, max_dim=4, kappa=(1.0, 2.0),
                                     max_hessian_heterogeneity=0.3, n_samples=6,
                                     gradient_noise=1.0),
        strategies.quadratic_minimax(max_clients=3, min_dim_y=3, max_dim=4, kappa=(1.0, 2.0),
                                     max_hessian_heterogeneity=0.3, n_samples=6,
                                     gradient_noise=1.0))
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


# --------------------------------------------------------------------------- S


def check_participation(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Var over every S-subset of the server point after round 1 (K = 3, exact maps): exponent
    in (M - S) / (S (M - 1)) equals 1."""
    problem = case.problem
    m = problem.n_clients
    alpha, beta, _ = single_timescale_step(problem)
    alg = build(make, problem, local_steps=3, momentum=0.5, outer_step_size=alpha,
                inner_step_size=beta, batch_size=None, participation=None)
    start = run(alg, problem, 1, seed=case.params["seed"],
                state=alg.state_at(problem, _point(problem, case.params["seed"])))[-1].state
    def outcome(subset: tuple[int, ...]) -> torch.Tensor:
        ctx = _FixedClients(problem, np.random.default_rng(0), torch.tensor(subset))
        new = alg.step(ctx, start)
        return torch.cat([new.x, new.Z])

    # the server averages fixed per-client models (exact maps, same start)
    return sampling_exponent_measurement(m, outcome, "Var[(x_2, Z_2)]",
                                         "clients' local phases agree: no sampling variance")


def _heterogeneous_four() -> st.SearchStrategy[Case]:
    """Four heterogeneous clients (S = 1..3: three points for the fit)."""
    families = st.sampled_from([QuadraticBilevel.random, QuadraticMinimax.random])
    problem = st.builds(
        lambda family, dx, dy, kappa, hh, gh, seed: family(
            4, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=hh,
            gradient_heterogeneity=gh),
        families, st.integers(1, 2), st.integers(1, 2), st.floats(1.0, 2.0),
        st.floats(0.1, 0.5), st.floats(0.0, 2.0), strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


# --------------------------------------------------------------------------- the claims

_PAPER = "FedMSA"
_RHO_NOTE = (
    "Started at the fixed point (x*, Z*(x*)), so the deterministic terms of Thm 3.1 vanish and "
    "the criterion is the noise part; additive noise only, K = 1, batch 1, R in {8, 16, 32} "
    "(thorough 16..128), "
    "replicate r seeded by np.random.default_rng([seed, r]) at every R (common random numbers; "
    "the exponent is fitted with one intercept per replicate), steps from "
    "single_timescale_step. The theorem's slowest noise term is (sigma/(MKR))^{2/3}."
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="fedmsa.rate.M_stochastic",
        paper=_PAPER,
        reference="Theorem 3.1 / Cor. C.1, terms sigma^2/(MKR) + (sigma/(MKR))^{2/3}; notes "
                  "3.9-3.11, 5.3",
        kind="scaling_exponent",
        statement="noise-dominated (start at the fixed point), tau = 0: the output-rule "
                  "criterion / sigma^2 decays in M at least like M^{-2/3}: 95% interval of the "
                  "Monte Carlo exponent reaches below -2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_identical_clients,
        check=check_rate_M,
        max_examples=per_profile(1, 6),
        shrink=False,
        notes="Clients with identical means and their own sample sets (gradient noise 1, 6 "
              "samples), sub-problems of the first M in {1, 2, 4, 8} clients, K = 1, R = 4, "
              "rho = 1 (every round's noise fresh; each noise term of Thm 3.1 carries 1/M "
              "whatever rho), 6 replicates per M (24 thorough), seeds default_rng([seed, M, "
              "r]). sigma^2 = the first M clients' mean exact oracle variance. Only the global "
              "step (5) averages over M, so the measured "
              "exponent (near -1: the sigma^2/(MKR) form) is the linear speedup the paper "
              "claims.",
    ),
    Claim(
        id="fedmsa.rate.tau_stochastic",
        paper=_PAPER,
        reference="Theorem 3.1 term tau/R with alpha, beta = O(1/(tau K)); notes 3.9-3.11, 5.3",
        kind="scaling_exponent",
        statement="stochastic, alpha = beta = c/(tau K): the output-rule criterion at fixed R "
                  "grows at most linearly in the heterogeneity tau: 95% interval of the "
                  "exponent reaches below 1 + 0.1",
        estimators=("fedmsa",),
        strategy=_tau_cases,
        check=check_rate_tau,
        max_examples=per_profile(1, 6),
        shrink=False,
        notes="One instance per case rebuilt with hessian_heterogeneity in {0.1, 0.2, 0.4} "
              "(same seed, so the clients' Jacobian deviations scale together; tau measured by "
              "heterogeneity_tau), value heterogeneity 0, gradient noise 0.3, K = 2, R = 8, "
              "rho = 1/R, b_0 = KR; alpha, beta = the contracting pair at the smallest tau "
              "times tau_min / tau.",
    ),
    Claim(
        id="fedmsa.rho.as_stated",
        paper=_PAPER,
        reference="Theorem 3.1 and Cor. C.1 (rho = Theta(1/R)) with Algorithm 1's box (no "
                  "initial batch); notes 3.9, 6 item 4",
        kind="scaling_exponent",
        statement="rho = 1/R, every round batch b: the noise part of the criterion decays in R "
                  "at least like (MKR)^{-2/3}: 95% interval of the exponent reaches below "
                  "-2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_noisy_cases,
        check=check_rho_as_stated,
        max_examples=per_profile(1, 6),
        shrink=False,
        expected="fails",
        notes="Refuted: with rho = 1/R the round-0 momentum error survives (1 - 1/R)^R ~ e^{-1} "
              "of its size through every round, so the criterion does not decay in R "
              "(exponent near 0). The proof needs b_0 = KR (absent from the algorithm) and "
              "takes rho ~ R^{-2/3}. " + _RHO_NOTE,
    ),
    Claim(
        id="fedmsa.rho.proof_choice",
        paper=_PAPER,
        reference="Theorem 3.1's proof (App. B.2, final parameter choice: rho = max(1/R, "
                  "rho_2), rho_2 ~ R^{-2/3}, b_0 = KR); notes 3.9, 6 item 4",
        kind="scaling_exponent",
        statement="rho = max(1/R, R^{-2/3}) and an initial batch b_0 = K R: the noise part of "
                  "the criterion decays in R at least like R^{-2/3}: 95% interval of the "
                  "exponent reaches below -2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_noisy_cases,
        check=check_rho_proof_choice,
        corrects="fedmsa.rho.as_stated",
        max_examples=per_profile(1, 6),
        shrink=False,
        notes="rho_2 is taken with constant 1 (the proof's constant has Delta_W = W_0 - W_R, "
              "which is ~0 from the fixed point). " + _RHO_NOTE,
    ),
    Claim(
        id="fedmsa.scaling.participation",
        paper=_PAPER,
        reference="not stated in the paper (theory: one client; Conclusion: generalised "
                  "variant with S clients averaged, notes 2.6); derived here",
        kind="scaling_exponent",
        statement="Var over uniformly sampled S-subsets of the server point after a round of "
                  "the generalised variant (exact maps) is proportional to (M-S)/(S(M-1)): "
                  "fitted exponent 1 (0.02)",
        estimators=("fedmsa",),
        strategy=_heterogeneous_four,
        check=check_participation,
        max_examples=per_profile(3, None),
        shrink=False,
        notes="The paper states no exponent in S; this records the measured one. Round 0 (K = "
              "1, same for every client) then round 1 with K = 3 on every subset of M = 4 "
              "clients.",
    ),
)
