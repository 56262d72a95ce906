"""FedMSA stochastic rates of Theorem 3.1 from exact moments: the exponents in M, tau and R (the
rho statement, as stated and with the proof's choices), the participation scaling in S, and the
case strategies of those claims."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel, QuadraticMinimax, strategies
from theory_checks import stats
from theory_checks.aggitd.common import fixed_clients_context
from theory_checks.claim import (
    Case,
    Claim,
    Fit,
    Measurement,
    NotMeasurable,
    SeriesPoint,
    known_case,
)
from theory_checks.client_sampling import sampling_exponent_measurement
from theory_checks.fedmsa.constants import heterogeneity_tau, theorem31_steps
from theory_checks.fedmsa.exact import (
    Branch,
    Layout,
    criterion_form,
    exact_run,
    expected_criteria,
    identify_round,
    validate_round,
)
from theory_checks.fedmsa.reference import (
    affine_matrix,
    build,
    fixed_point_Z,
    mean_maps,
    msa_radius,
    run,
    start_point,
    state_sizes,
)
from theory_checks.profiles import PerProfile

# Why 0.1 on an exponent: the values are exact expectations, so the only departure from the
# asymptotic power is pre-asymptotic: the criterion ramps up over the first ~horizon rounds from
# the fixed point and the momentum's memory 1/rho is a power of R, which bends the log-log line
# by relative corrections ~ horizon / R; on the grids below (R >= 4 horizons) they stay under a
# few hundredths (measured: the proof-choice slope is -0.59 over R = 16..1024 on the slowest
# contraction seen and -0.66 on the others).
EXPONENT_TOL = 0.1
THEORY_M_EXPONENT = -2.0 / 3.0  # (sigma / (M K R))^{2/3}: the slowest term of Thm 3.1 in M and R


# --------------------------------------------------------------------------- helpers


def fixed_point(problem: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x*, Z*(x*))`` with ``P(x*, Z*(x*)) = 0`` (the reduced map is affine in x)."""
    dx, _ = state_sizes(problem)

    def reduced(x: torch.Tensor) -> torch.Tensor:
        return mean_maps(problem, x, fixed_point_Z(problem, x))[0]

    A = affine_matrix(reduced, dx)
    cond = float(torch.linalg.cond(A))
    # Why 1e6: beyond it the solve's round-off (cond * 1e-16) is no longer negligible.
    if not math.isfinite(cond) or cond > 1e6:
        raise NotMeasurable(f"reduced map nearly singular (condition number {cond:.3g})")
    x_star = torch.linalg.solve(A, -reduced(torch.zeros(1, dx, dtype=torch.float64))[0])
    return x_star, fixed_point_Z(problem, x_star[None])[0]


def _exponent_measurement(quantity: str, sizes: Sequence[float], values: Sequence[float],
                          theory: float, bound: float, details: dict[str, Any],
                          step_name: str) -> Measurement:
    """Least-squares exponent of exact values (a deterministic curve) against ``bound``."""
    sizes_a, values_a = np.asarray(sizes, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if not (np.isfinite(values_a).all() and values_a.min() > 0.0):
        raise NotMeasurable("criterion exactly zero or not finite")
    raw = stats.fit_exponent(sizes_a, values_a)
    local = (np.diff(np.log(values_a)) / np.diff(np.log(sizes_a))).tolist()
    # exact values: no sampling interval (confidence 1); the local exponents are in details
    fit = Fit(quantity, raw.slope, raw.slope, raw.slope, theory, bound - theory, 1.0)
    series = tuple(SeriesPoint("measured", step_name, float(s), float(v))
                   for s, v in zip(sizes_a, values_a, strict=True))
    return Measurement(raw.slope, bound, raw.slope <= bound, "exact exponent <=", series=series,
                       fit=fit, details={**details, "values": values_a.tolist(),
                                         "local_exponents": local})


# =============================================================================== rate in M


def replicated(problem: QuadraticBilevel, m: int) -> QuadraticBilevel:
    """``m`` copies of client 0 of ``problem``, its sample set included (iid clients: the same
    data distribution, independent draws)."""
    arrays: dict[str, Any] = {k: np.repeat(v[:1], m, axis=0)
                              for k, v in problem.to_arrays().items()}
    return QuadraticBilevel(**arrays, name=f"{problem.name}[0]x{m}")


# Why {1, 2, 4} on the fast profile: identifying a round of M iid clients costs D + 1 +
# 2 (M + 1)(n - 1) single-round runs of ~10 ms (plus M validation rounds); the thorough
# profile adds 8. A case carries its grid (``params["m_grid"]``, :data:`IDENTICAL_CLIENTS`).
M_GRIDS = PerProfile(fast=(1, 2, 4), thorough=(1, 2, 4, 8))


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
    K, rho, R = (int(M_RATE_SETUP["local_steps"]), float(M_RATE_SETUP["momentum"]),
                 int(M_RATE_SETUP["rounds"]))
    one = replicated(problem, 1)
    alpha, beta = theorem31_steps(case)  # the case's problem is one client: client 0's steps
    x0, Z0 = fixed_point(one)
    grid = list(case.params["m_grid"])
    values = []
    for m in grid:
        sub = replicated(problem, m)
        alg = build(make, sub, local_steps=K, momentum=rho, outer_step_size=alpha,
                    inner_step_size=beta, batch_size=1)
        exact = exact_run(alg, sub, x0, Z0, sub.n_samples, case.params["seed"], iid=True)
        values.append(exact.criteria(R)[-1])
    return _exponent_measurement("exponent of E criterion in M", grid, values,
                                 THEORY_M_EXPONENT, THEORY_M_EXPONENT + EXPONENT_TOL,
                                 {"K": K, "rho": rho, "R": R, "alpha": alpha, "beta": beta},
                                 "clients M")


def identical_clients(fast: bool) -> st.SearchStrategy[Case]:
    """The instance whose client 0 is replicated (its other clients are not used), with the
    profile's grid of client counts (:data:`M_GRIDS`). Why dimensions 1 and 2 samples on the
    fast profile (``fast``): the identification's cost grows with D = 3 (d_x + 2 d_y) and with
    n - 1 per minibatch row."""
    m_grid = M_GRIDS.fast if fast else M_GRIDS.thorough
    problem = st.builds(
        lambda dx, dy, kappa, seed, n: QuadraticBilevel.random(
            1, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, n_samples=n,
            gradient_noise=1.0),
        st.integers(1, 1 if fast else 2), st.integers(1, 1 if fast else 2),
        st.floats(1.0, 2.0), strategies.SEEDS, st.just(2) if fast else st.integers(2, 3))
    return st.builds(lambda p, seed: Case(p, {"seed": seed, "m_grid": m_grid}), problem,
                     strategies.SEEDS)


#: The cases of claim fedmsa.rate.M_stochastic, per profile.
IDENTICAL_CLIENTS = PerProfile(functools.partial(identical_clients, fast=True),
                               functools.partial(identical_clients, fast=False))


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
        alg = build(make, p, local_steps=K, momentum=1.0 / R, outer_step_size=alpha,
                    inner_step_size=beta, batch_size=1)
        Z0 = fixed_point_Z(p, x0[None])[0]
        exact = exact_run(alg, p, x0, Z0, p.n_samples, case.params["seed"],
                          initial_batch=K * R)
        values.append(exact.criteria(R)[-1])
    return _exponent_measurement("exponent of E criterion in tau", taus, values, 1.0,
                                 1.0 + EXPONENT_TOL, {"K": K, "R": R, "taus": taus},
                                 "heterogeneity tau")


def tau_cases(fast: bool) -> st.SearchStrategy[Case]:
    """Why M <= 2 and dimension 1 on the fast profile (``fast``): three identifications (one
    per tau) of M (D + 1 + (2 M + 2 K)(n - 1)) two-step rounds."""
    problem = st.builds(
        lambda m, dx, dy, kappa, seed, n: QuadraticBilevel.random(
            m, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=0.1,
            gradient_heterogeneity=0.0, n_samples=n, gradient_noise=0.05),
        st.just(2) if fast else st.integers(2, 3), st.integers(1, 1 if fast else 2),
        st.integers(1, 1 if fast else 2), st.floats(1.0, 2.0), strategies.SEEDS,
        st.just(2) if fast else st.just(3))
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


#: The cases of claim fedmsa.rate.tau_stochastic, per profile.
TAU_CASES = PerProfile(functools.partial(tau_cases, fast=True),
                       functools.partial(tau_cases, fast=False))


# =============================================================================== rho


# Why rho identified at 1/4 and 3/4: eq. (5) is affine in rho, so the round at any rho is an
# entry-wise interpolation of the two (checked by a validation round at every rho used);
# rho = 1 is avoided because the algorithm skips the previous point there.
_RHO_ANCHORS = (0.25, 0.75)
# Why the largest R is capped: the moment recursion costs ~50 us per round and client; R_max =
# 8 R_0 with R_0 <= 256 keeps a case under a second.
_R0_CAP = 256


def _r_grid(radius: float) -> tuple[int, ...]:
    """``R_0 (1, 2, 4, 8)`` with ``R_0`` the power of two >= max(32, 4 horizons), a horizon
    being the ``6 / (1 - radius)`` rounds the noise-free iteration (K = 1) needs to forget its
    start (e^-6): past it only the momentum's memory ~ 1/rho bends the curve."""
    horizon = 6.0 / max(1.0 - radius, 1e-12)
    r0 = 2 ** int(math.ceil(math.log2(max(32.0, 4.0 * horizon))))
    if r0 > _R0_CAP:
        raise NotMeasurable(f"slow contraction (radius {radius:.3f}): R_0 = {r0} rounds")
    return tuple(r0 * f for f in (1, 2, 4, 8))


def _check_rho(case: Case, make: Callable[..., Any], proof_choice: bool) -> Measurement:
    """The noise part of the output-rule criterion against R, exact, with ``rho = 1/R`` (times
    the case's ``rho_constant``, Theta(1/R)'s constant) or the proof's ``max(1/R, R^{-2/3})``
    (``proof_choice``), and the round-0 batch of the case's ``initial_batch``: ``"b"``
    (Algorithm 1's box: the batch b = 1 of every round) or ``"KR"`` (the proof's b_0 = K R).
    Steps from :func:`~theory_checks.fedmsa.constants.theorem31_steps` (inside Lemmas B.1-B.2)."""
    problem = case.problem
    K = 1
    alpha, beta = theorem31_steps(case)
    radius = msa_radius(problem, alpha, beta)
    if radius >= 0.999:
        raise NotMeasurable(f"centralised MSA does not contract at these steps ({radius:.4f})")
    x0, Z0 = fixed_point(problem)
    offset = float(case.params.get("offset", 0.0))
    if offset:
        direction = start_point(problem, case.params["seed"])
        x0 = x0 + offset * direction / direction.norm()
    n = max(problem.n_samples, 1)
    dx, dz = state_sizes(problem)
    layout = Layout(dx, dz)
    rng = np.random.default_rng(case.params["seed"])
    initial_batch = case.params.get("initial_batch", "b")
    rho_constant = float(case.params.get("rho_constant", 1.0))

    def alg_at(rho: float, batch: int = 1) -> Any:
        return build(make, problem, local_steps=K, momentum=rho, outer_step_size=alpha,
                     inner_step_size=beta, batch_size=batch)

    start = alg_at(_RHO_ANCHORS[0]).state_at(problem, x0, Z0)
    first = identify_round(alg_at(_RHO_ANCHORS[0]), problem, layout, n, start=start)
    validate_round(alg_at(_RHO_ANCHORS[0]), problem, layout, first, n, rng, start)
    anchors = [identify_round(alg_at(r), problem, layout, n) for r in _RHO_ANCHORS]
    G, g = criterion_form(problem, layout)
    grid = _r_grid(radius)
    values, rhos = [], []
    for R in grid:
        # Thm 3.1: rho = Theta(1/R). The proof: rho = max(1/R, rho_2) with rho_2 ~ R^{-2/3}.
        rho = max(1.0 / R, R ** (-2.0 / 3.0)) if proof_choice else min(1.0, rho_constant / R)
        w = (rho - _RHO_ANCHORS[0]) / (_RHO_ANCHORS[1] - _RHO_ANCHORS[0])
        rest = [Branch.mix(a, b, w) for a, b in zip(*anchors, strict=True)]
        validate_round(alg_at(rho), problem, layout, rest, n, rng)
        round0 = first
        if initial_batch == "KR":
            round0 = [b.rebatched(K * R) for b in first]
            alg0 = alg_at(rho, K * R)
            validate_round(alg0, problem, layout, round0, n, rng,
                           alg0.state_at(problem, x0, Z0))
        values.append(expected_criteria(round0, rest, R, G, g, layout)[-1])
        rhos.append(rho)
    return _exponent_measurement("exponent of E criterion in R", grid, values,
                                 THEORY_M_EXPONENT, THEORY_M_EXPONENT + EXPONENT_TOL,
                                 {"K": K, "alpha": alpha, "beta": beta, "radius": radius,
                                  "rho": rhos, "offset": offset, "initial_batch": initial_batch,
                                  "proof_choice": proof_choice}, "rounds R")


def check_rho_as_stated(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = c/R (c: the case's ``rho_constant``, 1 by default) and the case's round-0 batch
    (Algorithm 1's box unless the case names ``initial_batch = "KR"``): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=False)


def check_rho_proof_choice(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """rho = max(1/R, R^{-2/3}) and b_0 = K R (the proof's choices): exponent in R <= -2/3."""
    return _check_rho(case, make, proof_choice=True)


def noisy_cases(initial_batch: str = "b", max_clients: int | None = None) -> PerProfile:
    """Additive noise only (hessian_noise = 0): Lemma B.5's mean-Lipschitz step condition is
    void, the momentum error obeys d_r = (1 - rho) d_{r-1} + rho eps_r exactly, and the rounds
    are affine in the samples' noise (the exact moments apply). Why M <= 2 and dimensions <= 2
    on the fast profile: the identification runs 3 M (D + 1 + 2 (M + 1)(n - 1)) rounds. The
    cases carry the round-0 batch rule ``initial_batch`` (``"b"``: Algorithm 1's box; ``"KR"``:
    the proof's b_0 = K R). One strategy per profile."""
    def build(fast: bool) -> st.SearchStrategy[Case]:
        clients = max_clients or (2 if fast else 3)
        size: dict[str, Any] = {"max_clients": clients, "max_dim": 2 if fast else 3,
                                "kappa": (1.0, 2.0), "max_hessian_heterogeneity": 0.3,
                                "n_samples": 3, "gradient_noise": 1.0}
        problem = st.one_of(strategies.quadratic_bilevel(**size),
                            strategies.quadratic_minimax(**size))
        return st.builds(lambda p, seed: Case(p, {"seed": seed, "offset": 0.0,
                                                  "initial_batch": initial_batch}),
                         problem, strategies.SEEDS)

    return PerProfile(functools.partial(build, fast=True), functools.partial(build, fast=False))


def noise_free_control() -> Callable[[], Case]:
    """Inside Theorem 3.1's conditions (one client: A5 holds per client) with sigma = 0
    (gradient noise 0 on the same sample sets), started off the fixed point: only the
    deterministic terms tau/R + 1/(sqrt(K) R) remain, the criterion decays like 1/R and the
    same check says "holds"."""
    problem = QuadraticBilevel.random(1, 1, 2, 2.0, seed=3, gradient_heterogeneity=0.5,
                                      n_samples=3, gradient_noise=0.0)
    return known_case(problem.spec(), {"seed": 0, "offset": 1.0})


# =============================================================================== S


def check_participation(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Var over every S-subset of the server point after round 1 (K = 3, exact maps): exponent
    in (M - S) / (S (M - 1)) equals 1."""
    problem = case.problem
    m = problem.n_clients
    alpha, beta = theorem31_steps(case)
    alg = build(make, problem, local_steps=3, momentum=0.5, outer_step_size=alpha,
                inner_step_size=beta, batch_size=None, participation=None)
    start = run(alg, problem, 1, seed=case.params["seed"],
                state=alg.state_at(problem, start_point(problem, case.params["seed"])))[-1].state

    def outcome(subset: tuple[int, ...]) -> torch.Tensor:
        ctx = fixed_clients_context(problem, np.random.default_rng(0), torch.tensor(subset))
        new = alg.step(ctx, start)
        return torch.cat([new.x, new.Z])

    # the server averages fixed per-client models (exact maps, same start)
    return sampling_exponent_measurement(m, outcome, "Var[(x_2, Z_2)]",
                                         "clients' local phases agree: no sampling variance")


def heterogeneous_four() -> st.SearchStrategy[Case]:
    """Four heterogeneous clients (S = 1..3: three points for the fit)."""
    families = st.sampled_from([QuadraticBilevel.random, QuadraticMinimax.random])
    problem = st.builds(
        lambda family, dx, dy, kappa, hh, gh, seed: family(
            4, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, hessian_heterogeneity=hh,
            gradient_heterogeneity=gh),
        families, st.integers(1, 2), st.integers(1, 2), st.floats(1.0, 2.0),
        st.floats(0.1, 0.5), st.floats(0.0, 2.0), strategies.SEEDS)
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)

