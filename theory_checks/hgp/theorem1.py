"""HGP Theorem 1 (main result; App. C.2): the error of stochastic HGP with Push-Sum.

The result (Sec. 3.3, restated in App. C): under Assumptions 1-3, ``0 < alpha < 1/eta`` and the S
condition ``S >= log((delta/(16 sqrt(n))) eta alpha/(1 - eta alpha)) / log tau`` (i.e.
``c = (8 sqrt(n)/delta) tau^S <= eta alpha / (2 (1 - eta alpha))``), with probability >= 1 - eps,

.. math::

    \\frac{\\|v^{(M)} - d_\\lambda f\\|}{\\|\\partial_x f\\|} \\le
    \\frac{4\\mu}{\\alpha}(1 + c)\\sqrt{2 \\log\\frac{2n(d_x + d_\\lambda)}{\\epsilon}}
    + \\frac{2\\beta}{\\eta\\alpha^2}\\, c + \\exp(-O(M)):

a noise term, a consensus bias geometric in S and a truncation bias geometric in M. Corollary 2
(mini-batch b) reads its noise term as ``kappa = O_P(1/sqrt(b))``. The proof (App. C.2) uses
``sigma_max(I - eta H_k) <= 1 - eta alpha``, which needs ``eta L <= 2 - eta alpha`` besides the
stated ``eta alpha < 1`` (a condition the theorem does not state).

Hypotheses (:mod:`theory_checks.hgp.constants`): Assumption 1 (per graph family, or exact
averaging), Assumption 2 (strong convexity), Assumption 3 (bounded oracle noise) for the
stochastic claims, ``0 < eta alpha < 1``, the step condition where the claim needs the proof's,
the S condition at the S the check runs.

Checked, one claim per part of the statement:

- ``hgp.theorem1.stated_step_condition`` (expected to fail): Cor. 1's bound under the stated
  ``0 < eta alpha < 1`` only, in two readings (the proof's explicit constants; ``exp(-O(M))`` as
  printed), on the complete graph (:func:`check_stated_step_condition`);
- ``hgp.theorem1.rate_in_m``: the truncation term's rate, exact averaging: the fitted slope of
  ``log error`` in M equals ``log rho_bar`` (5%) and is at most ``log(1 - eta alpha/2)``
  (:func:`check_rate_in_m`);
- ``hgp.theorem1.rate_in_s``: the consensus term's rate on a static network: the slope of the
  log error floor in S equals ``log SLEM(W)`` (25%) (:func:`check_rate_in_s`);
- ``hgp.theorem1.noise_exponent_b``: Cor. 2, the exact noise floor RMS ~ ``b^(-1/2)``, and the
  estimator's mean square equal to the exact one (:func:`check_noise_exponent_b`);
- ``hgp.theorem1.high_probability_bound``: ``P(error > bound) <= eps`` at eps = 0.1 with the
  measured ``c_S`` (Clopper-Pearson), and the deterministic form equal to eq. (10)'s mean path
  (:func:`check_high_probability`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import PerClientQuadratic, strategies
from results_format.verdicts import ABOUT_RESULT
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.mixing import slem
from theory_checks import stats
from theory_checks.claim import (
    Case,
    Claim,
    Fit,
    Measurement,
    NotMeasurable,
    Perturbation,
    SeriesPoint,
    known_case,
)
from theory_checks.decision import Binomial, Design, StatTest
from theory_checks.exact_quantities import dominant_mode_window
from theory_checks.hgp.common import (
    RATE_RTOL,
    averaging_operators,
    exact_averaging_cases,
    global_grad,
    mean_path_gap,
    noise_moments,
    noisy_cases,
    point,
    replica_estimates,
    run_hgp,
    scale,
    stacked_error,
    terms_for,
    variance_ratio_test,
)
from theory_checks.hgp.constants import (
    A1_EXACT,
    A2_STRONG_CONVEXITY,
    A3_ORACLE,
    assumption1,
    case_constants,
    case_graph,
    deterministic_contractions,
    eta_alpha_below_one,
    hgp_constants,
    pushsum_errors,
    s_condition,
    s_condition_cap,
    series_converges,
    step_condition,
    step_condition_holds,
    step_size,
    steps_meeting_s_condition,
)
from theory_checks.hgp.perturbations import HALF_BATCH, ViewedProblem, step_slip, swap
from theory_checks.hypotheses import Reading
from theory_checks.tolerances import IDENTITY_RTOL

# --------------------------------------------------------------------------- the stated step

#: Why 20 terms: enough for (1 - eta alpha)^m to fall below the actual contraction wherever
#: eta L > 2 - eta alpha, and for a divergent iteration to grow by orders; short enough for
#: hypothesis' shrinking to be quick.
STATED_STEP_TERMS = 20


def stated_step_setup(case: Case) -> tuple[GraphSequence, int, int, float, float]:
    """What the stated-condition check runs: the fully connected graph, S = 1 (so ``Theta_hat =
    Theta`` and ``c_S = 0`` to round-off), M = 20, ``eta = eta_alpha / alpha``."""
    k = hgp_constants(case.problem)
    return (
        GraphSequence("fully_connected", case.problem.n_clients),
        1,
        STATED_STEP_TERMS,
        step_size(case, k),
        k.alpha,
    )


#: Thm 1's S condition at what the stated-condition check runs (``c_S = 0`` to round-off).
STATED_STEP_S_CONDITION = s_condition(stated_step_setup)


def check_stated_step_condition(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Cor. 1 under the *stated* condition only (``0 < eta alpha < 1``, without the proof's step
    condition), on the fully connected graph (``c_S = 0``), in one of two readings
    (``case.params["reading"]``):

    - ``"explicit"`` (default): the proof's explicit form, ``(beta/alpha)(1 - eta alpha)^m +
      (2 beta/(eta alpha^2)) c_S`` at every m <= 20;
    - ``"exp_term"``: as printed, ``(2 beta/(eta alpha^2)) c_S + exp(-O(M))`` with the
      exponentially diminishing term's constants unspecified: the error must tend to the
      ``c_S`` floor, so it fails only where the error grows geometrically (least-squares slope
      of ``log error`` over ``m = 10..20`` > 0) while above the floor.
    """
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    graph, S, M, eta, a = stated_step_setup(case)
    k = hgp_constants(problem)
    b = k.beta
    c = max(pushsum_errors(graph, S, M))
    est = make(neumann_terms=M, pushsum_steps=S, neumann_step_size=eta, graph_family=graph.family)
    errors = stacked_error(run_hgp(est, problem, x).trajectory[:, 0], global_grad(problem, x))
    errors = errors / float(blocks["c"].norm())
    m = np.arange(len(errors))
    floor = 2 * b / (eta * a**2) * c
    details = {
        "eta_L": eta * k.L,
        "eta_alpha": eta * a,
        "c_S": c,
        "rho_bar": deterministic_contractions(blocks, eta)["rho_bar"],
    }
    if case.params.get("reading", "explicit") == "exp_term":
        tail = slice(M // 2, M + 1)
        above = errors[tail] > floor + IDENTITY_RTOL
        if not above.all():  # at the floor (to round-off): the M-term has vanished
            return Measurement(
                float(errors[-1]), floor, True, "error -> c_S floor", details=details
            )
        slope = float(stats.fit_rate(m[tail], errors[tail] - floor).slope)
        return Measurement(
            slope,
            0.0,
            slope <= 0.0,
            "growth rate of log(error - floor) over m = 10..20 <= 0 (the M-term diminishes)",
            details={**details, "error_at_M": float(errors[-1])},
        )
    bound = (b / a) * (1 - eta * a) ** m + floor
    worst = int(np.argmax(errors - bound))
    return Measurement(
        float(errors[worst]),
        float(bound[worst]),
        bool((errors <= bound + IDENTITY_RTOL).all()),
        "<= at every m",
        details={**details, "m": worst},
    )


def step_cases() -> st.SearchStrategy[Case]:
    """Theorem 1's step cases: kappa in [1, 10], a point and eta alpha in [0.05, 0.99]."""
    return st.builds(
        lambda problem, seed, f: Case(problem, {"point_seed": seed, "eta_alpha": f}),
        strategies.per_client_quadratic(kappa=(1.0, 10.0)),
        strategies.SEEDS,
        st.floats(0.05, 0.99),
    )


# --------------------------------------------------------------------------- Theorem 1 rates


def check_rate_in_m(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Thm 1's geometric term in M, exact averaging: fitted slope of log error = log rho_bar
    (5%), and <= log(1 - eta alpha / 2) (the Push-Sum guarantee of the proof, App. C.2, eq.
    (18))."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    k = hgp_constants(problem)
    eta = step_size(case, k)  # eta_factor / L
    H_bar, c_bar = blocks["H"].mean(0), blocks["c"].mean(0)
    values, vectors = torch.linalg.eigh(H_bar)
    rates = np.abs(1.0 - eta * values.cpu().numpy())
    order = np.argsort(-rates)
    J_stack = torch.cat(list(blocks["J"]), 0)
    amplitudes = np.array(
        [
            float((J_stack @ vectors[:, j]).norm())
            * abs(float(vectors[:, j] @ c_bar))
            / float(values[j])
            for j in range(len(values))
        ]
    )
    unit = scale(blocks)
    window = dominant_mode_window(amplitudes[order], rates[order], 1e-9 * unit)
    if window is None or rates[order[0]] == 0.0:
        raise NotMeasurable("slowest mode of I - eta H_bar not excited above round-off")
    start, stop = max(window[0], 1), min(window[1], 400)
    if stop - start < 3:
        raise NotMeasurable("dominant-mode window shorter than 3 terms")
    est = make(neumann_terms=stop, neumann_step_size=eta)
    errors = stacked_error(run_hgp(est, problem, x).trajectory[:, 0], global_grad(problem, x))
    steps = np.arange(start, stop + 1)
    fit = stats.fit_rate(steps, errors[start : stop + 1])
    theory = math.log(float(rates[order[0]]))
    guaranteed = math.log(max(1e-300, 1 - eta * k.alpha / 2))
    result = Fit(
        "log error per Neumann iteration",
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        theory,
        RATE_RTOL * abs(theory),
        residual=fit.residual_max,
    )
    # The Push-Sum guarantee needs eta L <= 2 - eta alpha (the step condition the paper leaves
    # unstated, claim hgp.theorem1.stated_step_condition); beyond it only the fitted rate (the
    # identity's, valid at any eta) is checked.
    within_step_condition = step_condition_holds(eta, k)
    passed = result.agrees and (
        not within_step_condition or fit.slope <= guaranteed + RATE_RTOL * abs(theory)
    )
    series = tuple(
        SeriesPoint("measured", "neumann_terms", int(s), float(errors[s])) for s in steps
    )
    return Measurement(
        fit.slope,
        theory,
        passed,
        "|fit - log rho_bar| <= 5% and fit <= log(1 - eta alpha/2)",
        series=series,
        fit=result,
        details={
            "window": [start, stop],
            "guaranteed": guaranteed,
            "within_step_condition": within_step_condition,
        },
    )


def check_rate_in_s(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Thm 1's geometric term in S on the static network (Theta_hat = W^S): the fitted slope of
    the log error floor (M -> infinity) in S equals log tau, tau = SLEM(W) (25%)."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    graph = GraphSequence("static_undirected", problem.n_clients, case.params["graph_seed"])
    tau = slem(graph.static_weights())
    if tau < 0.05:
        raise NotMeasurable("W mixes in one step (tau < 0.05): no geometric term to fit")
    eta = step_size(case)  # 1/L, the estimator's default
    r = deterministic_contractions(blocks, eta)["r"]
    # Why c_S <= 0.05 at the first S: second-order terms in c_S then bend the log-floor by
    # under 5%, so the slope is tau's; 6 points over 6 more S values resolve it.
    S0 = max(1, math.ceil(math.log(0.05) / math.log(tau)))
    grid = list(range(S0, S0 + 6))
    q = r * (1 + tau**S0)
    if q >= 1:
        raise NotMeasurable("q >= 1 at the grid's first S")
    # Why q^M <= 1e-3 tau^(S0+6) / 10: the truncation term is then 1000x below the smallest
    # floor, whose prefactor beta c / alpha is at least ~1/10 of the initial error here.
    M = terms_for(q, 1e-4 * tau ** (S0 + 6), 600)
    exact = global_grad(problem, x)
    floors = []
    for S in grid:
        est = make(neumann_terms=M, pushsum_steps=S, graph_seed=case.params["graph_seed"])
        floors.append(float(stacked_error(run_hgp(est, problem, x).trajectory[-1:, 0], exact)[0]))
    floors_arr = np.array(floors)
    if (floors_arr < 1e-12 * scale(blocks)).any():
        raise NotMeasurable("floor at round-off")
    fit = stats.fit_rate(np.array(grid), floors_arr)
    theory = math.log(tau)
    # Why 25%: a sign-alternating second eigenvalue of W and the O(c_S^2) terms bend the
    # finite-S floors by up to that much.
    result = Fit(
        "log error floor per Push-Sum step",
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        theory,
        0.25 * abs(theory),
        residual=fit.residual_max,
    )
    series = tuple(
        SeriesPoint("measured", "pushsum_steps", S, f, 0, S * M)
        for S, f in zip(grid, floors, strict=True)
    )
    return Measurement(
        fit.slope,
        theory,
        result.agrees,
        "|fit - log tau| <= 25% |log tau|",
        series=series,
        fit=result,
        details={"tau": tau, "neumann_terms": M},
    )


def rate_s_cases() -> st.SearchStrategy[Case]:
    """The S-rate cases of Theorem 1: at least 3 clients, dimension 2, kappa in [1, 3], a point and
    a graph seed."""
    return st.builds(
        lambda problem, seed, gs: Case(problem, {"point_seed": seed, "graph_seed": gs}),
        strategies.per_client_quadratic(min_clients=3, max_dim=2, kappa=(1.0, 3.0)),
        strategies.SEEDS,
        st.integers(0, 2**16),
    )


# --------------------------------------------------------------------------- Cor. 2 exponent

NOISE_B_GRID = (2, 4, 8, 16)
# Why 0.1: the exact variance is a polynomial sum_k a_k b^-k with
# a_k >= 0 (every term of the recursion is a positive map of a PSD matrix), so its exponent lies
# in [-1/2, -M/2]; the O(1/b^2) terms (products of two sampled matrices) steepen it by a few
# thousandths on these noise levels (-0.5006 on the saved case).
NOISE_B_TOLERANCE = 0.1


def check_noise_exponent_b(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design
) -> Measurement:
    """Cor. 2 (``kappa = O_P(1/sqrt(b))``, App. D.2), read as: the noise floor RMS of Push-Sum HGP
    with independent samples scales like ``b^(-1/2)``.

    Deterministic, on the exact variance ``V(b) = E||v^(M) - E v^(M)||^2`` (no sampling):
    the least-squares exponent of ``sqrt(V(b))`` over ``b`` in {2, 4, 8, 16} is within 0.1 of
    -1/2, and ``V(b) <= V(1) / b`` on the grid (Cor. 2's ``1/sqrt(b)`` upper bound in second-
    moment form); the exact mean path equals the deterministic run. Statistical: the
    estimator's own mean square at b = 2 over ``V(2)`` (:func:`variance_ratio_test`), so a
    batch-size bug is seen (the exact moments use the batch size the estimator reports).
    """
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    k = case_constants(case)  # the minibatch oracle's
    eta = step_size(case, k)  # 1/L
    # Why (1 - eta alpha / 2)^M <= 1e-3 (at most 80 terms): the noise terms of step m are
    # weighted by at most q^m <= (1 - eta alpha/2)^m (App. C.2, eq. (18)), so the floor is reached
    # to 0.1%; the exact moments are exact at any M, the cap only keeps the Monte Carlo run short.
    M = terms_for(1 - eta * k.alpha / 2, 1e-3, 80)
    params = {
        "neumann_terms": M,
        "pushsum_steps": case.params["pushsum_steps"],
        "graph_seed": case.params["graph_seed"],
        "neumann_step_size": eta,
    }
    operators = averaging_operators(make(**params), problem.n_clients, M)
    by_b = {
        b: noise_moments(problem, x, make(**params, batch_size=b), operators=operators)
        for b in (1, *NOISE_B_GRID)
    }
    V = {b: float(m.variance[-1]) for b, m in by_b.items()}
    if V[1] <= 0.0:
        raise NotMeasurable("no sampling noise reaches v^(M)")
    rms = np.sqrt([V[b] for b in NOISE_B_GRID])
    exponent = float(stats.fit_exponent(np.array(NOISE_B_GRID), rms).slope)
    # Why 1e-12 relative: V(1)/b - V(b) = sum_{k>=2} a_k (b^-1 - b^-k) >= 0 exactly; round-off
    # of the float64 recursion is ~1e-15 relative.
    upper_ok = all(V[b] <= V[1] / b * (1 + 1e-12) for b in NOISE_B_GRID)
    gap = mean_path_gap(problem, x, make, {**params, "batch_size": 2}, by_b[2])
    exponent_ok = abs(exponent + 0.5) <= NOISE_B_TOLERANCE
    test, R = variance_ratio_test(
        make(**params, batch_size=2),
        problem,
        x,
        by_b[2],
        design,
        0,
        "mean square at b = 2 / exact variance",
    )
    result = Fit(
        "exponent of the exact noise floor RMS in b",
        exponent,
        exponent,
        exponent,
        -0.5,
        NOISE_B_TOLERANCE,
    )
    series = tuple(
        SeriesPoint("measured", "batch_size", b, float(r))
        for b, r in zip(NOISE_B_GRID, rms, strict=True)
    ) + tuple(SeriesPoint("bound", "batch_size", b, math.sqrt(V[1] / b)) for b in NOISE_B_GRID)
    return Measurement(
        exponent,
        -0.5,
        exponent_ok and upper_ok and gap <= IDENTITY_RTOL,
        "|exact exponent + 1/2| <= 0.1, V(b) <= V(1)/b; estimator's mean square = exact",
        series=series,
        fit=result,
        details={
            "neumann_terms": M,
            "exact_rms": rms.tolist(),
            "V1": V[1],
            "upper_bound_ok": upper_ok,
            "mean_path_gap": gap,
            "replicas": R,
        },
        tests=(test,),
    )


# --------------------------------------------------------------------------- Thm 1 bound

# Why eps = 0.1: a level a check can observe (one case in ten may exceed); the bound's log term
# grows only like sqrt(log(1/eps)).
HIGH_PROBABILITY_EPS = 0.1


def theorem1_bound(
    mu: float, alpha: float, beta: float, eta: float, c: float, n: int, dims: int, eps: float
) -> float:
    """Thm 1 (main text), with the measured c_S for (8 sqrt(n)/delta) tau^S:
    ``(4 mu/alpha)(1 + c) sqrt(2 log(2 n (d_x + d_lambda)/eps)) + (2 beta/(eta alpha^2)) c``."""
    return (
        4 * mu / alpha * (1 + c) * math.sqrt(2 * math.log(2 * n * dims / eps))
        + 2 * beta / (eta * alpha**2) * c
    )


def high_probability_setup(case: Case) -> tuple[GraphSequence, int, int, float, float]:
    """What Thm 1's check runs on a case: its graph, the smallest ``S = S_0 2^k <= 256`` meeting
    the S condition with ``c_S`` of Alg. 1 on the graph (:func:`~theory_checks.hgp.constants.
    steps_meeting_s_condition`; the case's S when none does, which the S-condition hypothesis
    then rejects), M, eta = 1/L and alpha of the minibatch oracle."""
    k = case_constants(case)
    eta = step_size(case, k)  # 1/L
    # Why (1 - eta alpha/2)^M (M + 1) <= 1e-3 (beta/alpha): the exp(-O(M)) term (ratio
    # q <= 1 - eta alpha/2 up to a factor linear in M, App. C.2) is then negligible; it is
    # still added to the bound.
    M = 10
    while (1 - eta * k.alpha / 2) ** M * (M + 1) > 1e-3 and M < 400:
        M += 10
    graph = case_graph(case, "random_directed")
    S = int(case.params["pushsum_steps"])
    found = steps_meeting_s_condition(graph, S, M, eta, k.alpha)
    return graph, (found[0] if found else S), M, eta, k.alpha


#: Thm 1's S condition at the S the high-probability check runs.
HIGH_PROBABILITY_S_CONDITION = s_condition(high_probability_setup)


def check_high_probability(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design
) -> Measurement:
    """Thm 1 at eps = 0.1: ``P(normalised error > bound) <= eps``.

    The S-condition holds by construction (:func:`high_probability_setup`: S doubled until
    ``c_S = max_m sigma_max(Theta_hat^(m) - Theta) <= eta alpha / (2 (1 - eta alpha))``, c_S of
    Alg. 1 on the graph sequence, never the estimator's own averaging; no sampling). Then R
    independent replicas; the number above the bound is Binomial(R, p) and the claim's region
    is ``p <= eps`` (one-sided, Clopper-Pearson evidence). R is set before sampling: with no
    exceedance, the upper bound at the case's rate is ``<= eps / 2``, so a few exceedances
    still decide "holds"; a bound that fails twice as often as claimed (p = 2 eps) is then
    refuted at the confirmation's 4 R.
    """
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    k = case_constants(case)  # the minibatch oracle's
    alpha, beta, mu = k.alpha, k.beta, k.mu
    graph, S, M, eta, _ = high_probability_setup(case)
    c = max(pushsum_errors(graph, S, M))
    if c > s_condition_cap(eta, alpha):
        raise NotMeasurable("the S-condition of Thm 1 fails up to S = 256")
    tail = beta / alpha * (1 - eta * alpha / 2) ** M * (M + 1)
    eps, n = HIGH_PROBABILITY_EPS, problem.n_clients
    params = {
        "neumann_terms": M,
        "pushsum_steps": S,
        "graph_seed": graph.seed,
        "batch_size": case.params["batch_size"],
        "neumann_step_size": eta,
    }
    est = make(**params)
    # The bound is loose by design (49x-940x the 0.9-quantile), so no realistic bug in the
    # recursion can exceed it; the same configuration's deterministic form must follow eq.
    # (10)'s mean recursion at the stated eta with the estimator's own averaging operators
    # (exact, 1e-10), which a mis-set step or an iteration too many breaks.
    exact_mean = noise_moments(problem, x, make(**{**params, "batch_size": None}), eta=eta)
    mean_gap = mean_path_gap(problem, x, make, params, exact_mean)
    # one test, one bounded side: the whole case rate
    R = design.samples(
        max(100, math.ceil(math.log(design.false_fail_rate) / math.log(1.0 - eps / 2)))
    )
    samples = replica_estimates(est, problem, x, R, design, 0)
    grad_norm = float(problem.client_blocks(x)["c"].norm())
    errors = (samples - global_grad(problem, x)).flatten(1).norm(dim=1).cpu().numpy() / grad_norm
    dims = problem.dim_y + problem.dim_hyper
    bound = theorem1_bound(mu, alpha, beta, eta, c, n, dims, eps) + tail
    above = int((errors > bound).sum())
    quantile = float(np.quantile(errors, 1 - eps))
    return Measurement(
        quantile,
        bound,
        bool(np.isfinite(errors).all()) and mean_gap <= IDENTITY_RTOL,
        "P(normalised error > bound) <= eps (Clopper-Pearson); mean path = "
        "eq. (10) at the stated eta (1e-10)",
        details={
            "above": above,
            "replicas": R,
            "c_S": c,
            "pushsum_steps": S,
            "bound_over_quantile": bound / max(quantile, 1e-300),
            "mean_path_gap": mean_gap,
        },
        tests=(StatTest("P(error > Thm 1 bound)", Binomial(above, R), high=eps),),
    )


# The case Monte Carlo once refuted (old design: fitted exponent -0.389 from 64 replicas per b
# on one common stream, seed 1); the exact second moment gives -0.5006. Kept as an example so
# every run decides the law on it.
SAVED_NOISE_CASE = known_case(
    {
        "family": "PerClientQuadratic.random",
        "n_clients": 2,
        "dim_hyper": 1,
        "dim_y": 1,
        "condition_number": 1.0,
        "seed": 3170,
        "hessian_heterogeneity": 0.5,
        "cross_scale": 0.75,
        "outer_coupling": 0.0,
        "target_heterogeneity": 1.0,
        "rho": 1.0,
        "mu": 1.0,
        "n_samples": 16,
        "hessian_noise": 0.3,
        "cross_noise": 0.5,
        "gradient_noise": 0.0,
    },
    {"point_seed": 0, "graph_seed": 1, "pushsum_steps": 2, "batch_size": 1, "form": "independent"},
)

# --------------------------------------------------------------------------- perturbations

STEP_SLIP_EXACT = step_slip("hgp-exact-averaging")

# Why slow: each case runs six long static-network floors (~8 s on one core for the search)
STEP_SLIP_STATIC = step_slip("hgp-static", slow=True)

SUM_REDUCTION = Perturbation(
    "minibatch loss summed, not averaged",
    "the minibatch inner loss is reduced by sum instead of mean: at b = 4 the sampled Hessian "
    "is 4 H, I - eta H_b expands and the error grows geometrically. Thm 1's bound is 49x-940x "
    "the empirical 0.9-quantile on the drawn cases, so no bug smaller than such an inflation "
    "(a factor-2 variance, a small bias) can violate it: this is the realistic bug of that size",
    swap("hgp-stochastic", ViewedProblem, view="sum"),
)

# --------------------------------------------------------------------------- cases and controls

RATE_IN_M_CASES = exact_averaging_cases(min_clients=2, kappa=(2.0, 5.0))
NOISE_EXPONENT_B_CASES = noisy_cases(steps=(2, 4), max_dim=2)
HIGH_PROBABILITY_BOUND_CASES = noisy_cases()

# Positive control of claim hgp.theorem1.stated_step_condition
theorem1_stated_step_condition_control = known_case(
    PerClientQuadratic.random(3, 2, 2, 3.0, 2, hessian_heterogeneity=0.3).spec(),
    {"point_seed": 0, "eta_alpha": 0.1},
)

# --------------------------------------------------------------------------- the claims


STATED_STEP_CONDITION = Claim(
    id="hgp.theorem1.stated_step_condition",
    paper="HGP",
    reference=(
        "HGP Thm 1 / Cor. 1 proof (App. C.2, sigma_max(I - eta H) <= 1 - eta alpha); "
        "a condition the statement does not give"
    ),
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "under the stated 0 < eta alpha < 1 only: ||v^(m) - d_lambda f|| / ||d_x f|| <= "
        "(beta/alpha)(1 - eta alpha)^m + (2 beta/(eta alpha^2)) c_S"
    ),
    estimators=("hgp",),
    strategy=step_cases,
    check=check_stated_step_condition,
    hypotheses=(
        assumption1(family="fully_connected"),
        A2_STRONG_CONVEXITY,
        eta_alpha_below_one(),
        STATED_STEP_S_CONDITION,
    ),
    expected="fails",
    # eta alpha = 0.1 on a kappa-3 problem: eta L = 0.44 <= 1, the condition the proof needs, and
    # the stated bound holds (error 0.073 <= 0.136 at the worst m)
    positive_control=theorem1_stated_step_condition_control,
    notes=(
        "The proof needs eta L <= 2 - eta alpha (e.g. eta <= 1/L); with eta alpha < 1 only, I "
        "- eta H_k can have norm above 1 and the iteration contracts more slowly than (1 - "
        "eta alpha)^m or diverges. Two readings: the proof's explicit constants, and the "
        "theorem as printed, whose exp(-O(M)) has unspecified constants (so only an error "
        "that does not diminish refutes it). The saved case refutes both inside every stated "
        "hypothesis (A1 with B = 1 on the complete graph, A2, 0 < alpha < 1/eta with margin "
        "0.5, the S condition with c_S = 0): kappa = 10, eta alpha = 0.5, so eta L = 5 > 2 - "
        "eta alpha and rho(I - eta H_bar) = 4: the error grows like 4^m (3e10 at m = 20 "
        "against the explicit bound 9.5e-7). It lies outside only the unstated eta L <= 2 - "
        "eta alpha, which is the finding. Drawn cases that converge more slowly than (1 - eta "
        "alpha)^m refute the explicit reading only."
    ),
    # Saved counterexample (found by hypothesis, shrunk): kappa = 10 at eta alpha = 0.5, so eta L =
    # 5 and eta lambda_max(H_bar) = 5 > 2: the iteration diverges (rho_bar = 4), which refutes the
    # printed exp(-O(M)) as well as the proof's explicit (1 - eta alpha)^m.
    examples=(
        known_case(
            {
                "family": "PerClientQuadratic.random",
                "n_clients": 2,
                "dim_hyper": 1,
                "dim_y": 2,
                "condition_number": 10.0,
                "seed": 0,
                "hessian_heterogeneity": 0.0,
                "cross_scale": 1.0,
                "outer_coupling": 0.0,
                "target_heterogeneity": 1.0,
                "rho": 1.0,
                "mu": 1.0,
                "n_samples": 0,
                "hessian_noise": 0.0,
                "cross_noise": 0.0,
                "gradient_noise": 0.0,
            },
            {"point_seed": 0, "eta_alpha": 0.5},
        ),
    ),
    readings=(
        Reading(
            "the proof's explicit constants",
            (
                "||v^(m) - d_lambda f|| / ||d_x f|| <= (beta/alpha)(1 - eta alpha)^m "
                "+ (2 beta/(eta alpha^2)) c_S at every m <= 20"
            ),
            {"reading": "explicit"},
        ),
        Reading(
            "as printed: exp(-O(M)) with unspecified constants",
            (
                "||v^(M) - d_lambda f|| / ||d_x f|| <= (2 beta/(eta alpha^2)) c_S + exp(-O(M)): "
                "the error above the c_S floor does not grow with M "
                "(log-slope over m = 10..20 <= 0)"
            ),
            {"reading": "exp_term"},
        ),
    ),
)


RATE_IN_M = Claim(
    id="hgp.theorem1.rate_in_m",
    paper="HGP",
    reference=(
        "HGP Thm 1, third term exp(-O(M)) (App. C.2; exact-averaging rate derived from eq. (16))"
    ),
    kind="linear_rate",
    about=ABOUT_RESULT,
    statement=(
        "slope of log||v^(M) - d_lambda f|| in M = log rho_bar (5%), rho_bar = ||I - eta "
        "H_bar||, and <= log(1 - eta alpha / 2)"
    ),
    estimators=("hgp-exact-averaging",),
    strategy=RATE_IN_M_CASES,
    check=check_rate_in_m,
    hypotheses=(
        A1_EXACT,
        A2_STRONG_CONVEXITY,
        series_converges(),
    ),
    perturbation=STEP_SLIP_EXACT,
)


RATE_IN_S = Claim(
    id="hgp.theorem1.rate_in_s",
    paper="HGP",
    reference=(
        "HGP Thm 1, second term (2 beta/(eta alpha^2)) c tau^S, static network (Theta_hat = W^S)"
    ),
    kind="linear_rate",
    about=ABOUT_RESULT,
    statement=(
        "static network (Theta_hat = W^S): slope of log error floor in S = log SLEM(W) within 25%"
    ),
    estimators=("hgp-static",),
    strategy=rate_s_cases,
    check=check_rate_in_s,
    hypotheses=(
        assumption1(family="static_undirected"),
        A2_STRONG_CONVEXITY,
        eta_alpha_below_one(),
        step_condition(),
    ),
    perturbation=STEP_SLIP_STATIC,
)


NOISE_EXPONENT_B = Claim(
    id="hgp.theorem1.noise_exponent_b",
    paper="HGP",
    reference="HGP Cor. 2 (App. D.2, kappa = O_P(1/sqrt(b)))",
    kind="scaling_exponent",
    about=ABOUT_RESULT,
    statement=(
        "exact noise floor RMS of v^(M) around its conditional mean ~ b^(-1/2): "
        "least-squares exponent over b = 2..16 within 0.1 of -1/2 and E||v - E v||^2 (b) "
        "<= E||v - E v||^2 (1) / b; the estimator's mean square at b = 2 matches the "
        "exact one (ratio in [1/1.4, 1.4])"
    ),
    estimators=("hgp-stochastic",),
    strategy=NOISE_EXPONENT_B_CASES,
    check=check_noise_exponent_b,
    hypotheses=(
        assumption1(),
        A2_STRONG_CONVEXITY,
        A3_ORACLE,
        eta_alpha_below_one(),
        step_condition(),
    ),
    decision="statistical",
    max_examples=5,
    examples=(SAVED_NOISE_CASE,),
    perturbation=HALF_BATCH,
    notes=(
        "Decided on the exact second moment (a linear recursion, no sampling; "
        "theory_checks.hgp.common.noise_moments), which holds on every drawn case. An "
        "earlier Monte Carlo "
        "design (64 replicas per b on one common stream, a 2-dof least-squares interval) "
        "recorded 'fails as stated' on the saved case (two clients, dim 1, Hessians 1 +- 0.5, "
        "sample noise 0.3): exponent -0.389 at its hard-coded seed 1; the exact moment there "
        "gives -0.5006 (RMS 0.01141, 0.00806, 0.00570, 0.00403 for b = 2, 4, 8, 16), 40 "
        "independent seeds of that design give mean -0.499 (sd 0.046), and seed 1 was the "
        "most extreme of them: a fluke, not a refutation (tests/test_hgp.py reproduces both "
        "numbers)."
    ),
)


HIGH_PROBABILITY_BOUND = Claim(
    id="hgp.theorem1.high_probability_bound",
    paper="HGP",
    reference="HGP Thm 1 (main text, log(2n(d_x + d_lambda)/eps))",
    kind="variance_bound",
    about=ABOUT_RESULT,
    statement=(
        "P(||v^(M) - d_lambda f|| / ||d_x f|| <= (4 mu/alpha)(1 + c) sqrt(2 log(2n(d_x + "
        "d_lambda)/eps)) + (2 beta/(eta alpha^2)) c + exp(-O(M))) >= 1 - eps, with the "
        "measured c_S (eps = 0.1; Clopper-Pearson on the exceedances), for the recursion "
        "of eq. (10) at the stated eta (its deterministic form equal to the exact mean "
        "path, 1e-10)"
    ),
    estimators=("hgp-stochastic",),
    strategy=HIGH_PROBABILITY_BOUND_CASES,
    check=check_high_probability,
    hypotheses=(
        assumption1(),
        A2_STRONG_CONVEXITY,
        A3_ORACLE,
        eta_alpha_below_one(),
        step_condition(),
        HIGH_PROBABILITY_S_CONDITION,
    ),
    decision="statistical",
    max_examples=5,
    perturbation=SUM_REDUCTION,
    notes=(
        "The bound is loose: 49x to 940x the empirical 0.9-quantile on the drawn cases "
        "(details.bound_over_quantile), so only an error inflated that much can violate it; a "
        "halved Neumann step passed it. The same configuration's deterministic form is "
        "therefore compared with eq. (10)'s exact mean path at the stated eta "
        "(details.mean_path_gap), which such a step fails (hgp.step_halved in the mutation "
        "table)."
    ),
)


CLAIMS: tuple[Claim, ...] = (
    STATED_STEP_CONDITION,
    RATE_IN_M,
    RATE_IN_S,
    NOISE_EXPONENT_B,
    HIGH_PROBABILITY_BOUND,
)
