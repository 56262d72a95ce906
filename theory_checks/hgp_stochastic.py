"""HGP claims about the stochastic form (Thm 1 noise term, Cor. 2, notes D3 and D4).

Replicated runs: ``HyperGradientPush.run(..., replicas=R)`` stacks R independent copies on the
client axis (same graphs, same inner solution, independent minibatches), so R runs cost one
batched oracle call per step. The deterministic run on the same graphs is the conditional mean
(D3), so noise is measured around it exactly rather than around a sample mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st
from scipy import stats

from problems import strategies
from theory_checks import _stats
from theory_checks.claim import (
    Case,
    Claim,
    Fit,
    Measurement,
    NotMeasurable,
    SeriesPoint,
    known_case,
)
from theory_checks.hgp_common import fresh_state, global_grad, point, terms_for

# Why these sample-set sizes and noise levels: 16 samples per client give a finite, exactly
# centred noise; hessian_noise 0.3 with heterogeneity <= 0.5 keeps every sample Hessian positive
# definite (alpha > 0, Assumption 3) while making kappa_x visible.
_NOISY = {"n_samples": 16, "hessian_noise": 0.3, "cross_noise": 0.5}
# Why 1e-3: false-failure rate of each statistical check (per case, Bonferroni inside).
FALSE_FAIL_RATE = 1e-3


def _noisy_cases(steps: tuple[int, int] = (2, 6), **kwargs: Any
                 ) -> Callable[[], st.SearchStrategy[Case]]:
    def build() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed, gs, S, b, form: Case(problem, {
                "point_seed": seed, "graph_seed": gs, "pushsum_steps": S, "batch_size": b,
                "form": form}),
            strategies.per_client_quadratic(**{"max_clients": 4, **_NOISY, **kwargs}),
            strategies.SEEDS, st.integers(0, 2**16), st.integers(*steps),
            st.sampled_from((1, 4)), st.sampled_from(("independent", "practical")))

    return build


def _floor(make: Callable[..., Any], problem: Any, x: torch.Tensor, replicas: int,
           track: bool = False, **params: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """``(v_r^(M) for r < R, deterministic v^(M) on the same graphs, the stochastic run)``.

    The same generator seed for every call: common random numbers across the parameter values
    a check compares (their sampling errors are then positively correlated).
    """
    stochastic = make(**params).run(problem, x, fresh_state(problem),
                                    np.random.default_rng(1), replicas=replicas,
                                    track_consensus=False)
    deterministic = make(**{**params, "batch_size": None}).run(
        problem, x, fresh_state(problem), np.random.default_rng(1), track_consensus=track)
    return stochastic.trajectory[-1], deterministic.trajectory[-1, 0], deterministic


def _rms(samples: torch.Tensor, center: torch.Tensor) -> float:
    return float(((samples - center) ** 2).flatten(1).sum(1).mean().sqrt())


# --------------------------------------------------------------------------- D3


def check_unbiased(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """D3: E[stochastic HGP | graphs] = deterministic HGP on the same graphs; per-coordinate
    z-scores of R = 400 replicas against it, Bonferroni over coordinates at rate 1e-3 (normal
    approximation of the replica mean, R = 400 >> 30)."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    practical = case.params["form"] == "practical"
    replicas = 400
    samples, mean, _ = _floor(
        make, problem, x, replicas, neumann_terms=20, pushsum_steps=case.params["pushsum_steps"],
        graph_seed=case.params["graph_seed"], batch_size=case.params["batch_size"],
        shared_sample=practical, keep_weights=practical)
    flat = samples.flatten(1).numpy()
    sd = flat.std(axis=0, ddof=1)
    if (sd <= 0).any():
        raise NotMeasurable("a coordinate has no noise (zero sample variance)")
    z = np.abs(flat.mean(axis=0) - mean.flatten().numpy()) / (sd / math.sqrt(replicas))
    z_crit = float(stats.norm.ppf(1 - FALSE_FAIL_RATE / (2 * z.size)))
    return Measurement(float(z.max()), z_crit, float(z.max()) < z_crit, "max |z| <",
                       details={"form": case.params["form"], "replicas": replicas})


# --------------------------------------------------------------------------- Cor. 2 exponent


def check_noise_exponent_b(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Cor. 2: the noise floor RMS of HGP (Push-Sum, independent samples) scales like b^(-1/2);
    the fitted exponent over b in {2, 4, 8, 16} is within 0.1 of -1/2."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    consts = problem.hgp_constants()
    eta = 1.0 / consts["L"]
    # Why (1 - eta alpha / 2)^M <= 1e-3 (at most 80 terms): the noise terms of step m are
    # weighted by at most q^m <= (1 - eta alpha/2)^m (notes 4.4), so the floor is reached to
    # 0.1%; the cap only binds for alpha/L < 0.17, where the floor is still within 1%.
    M = terms_for(1 - eta * consts["alpha"] / 2, 1e-3, 80)
    # Why b >= 2: products of two sampled matrices add O(1/b) terms to the O(1/sqrt(b)) noise;
    # at b = 1 they steepen the fitted exponent by up to ~0.1 on some drawn problems (seen in the
    # thorough profile), and Cor. 2 is a statement about the 1/sqrt(b) regime.
    sizes = [2, 4, 8, 16]
    params = {"neumann_terms": M, "pushsum_steps": case.params["pushsum_steps"],
              "graph_seed": case.params["graph_seed"], "neumann_step_size": eta}
    mean = make(**params, batch_size=None).run(problem, x, fresh_state(problem),
                                               np.random.default_rng(1),
                                               track_consensus=False).trajectory[-1, 0]
    rms = []
    for b in sizes:
        # Why R = 64 with the same seed for every b: the log-RMS of 64 replicas has a standard
        # deviation of about 1/sqrt(2 R) = 0.09, and common random numbers correlate the points,
        # so the slope's error is a few hundredths, well inside the 0.1 tolerance.
        samples = make(**params, batch_size=b).run(
            problem, x, fresh_state(problem), np.random.default_rng(1), replicas=64,
            track_consensus=False).trajectory[-1]
        rms.append(_rms(samples, mean))
    fit = _stats.fit_exponent(np.array(sizes), np.array(rms))
    # Why 0.1: the notes' T9 tolerance; products of two sampled matrices add O(1/b) terms to
    # the O(1/sqrt(b)) noise, which shift the exponent by a few hundredths at b = 1.
    result = Fit("exponent of the noise floor RMS in b", fit.slope, fit.ci_low, fit.ci_high,
                 -0.5, 0.1)
    series = tuple(SeriesPoint("measured", "batch_size", b, r) for b, r in
                   zip(sizes, rms, strict=True))
    # Decided on the 95% interval, not the point estimate: on small drawn problems (one- or
    # two-dimensional blocks) the RMS of 64 replicas has heavier tails than the Gaussian
    # 1/sqrt(2R) estimate, and a point-estimate rule failed a true claim on a drawn case
    # (estimate -0.37, interval [-0.82, 0.07]); a true law now fails with probability <= 2.5%.
    return Measurement(fit.slope, -0.5, result.interval_agrees,
                       "95% interval meets -1/2 +- 0.1", series=series, fit=result,
                       details={"neumann_terms": M, "point_estimate_within": result.agrees})


# --------------------------------------------------------------------------- D4 sqrt(eta)


def check_sqrt_eta(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Notes D4 / 7.2 item 16: with exact averaging the noise floor RMS scales like sqrt(eta)
    (the paper's noise term is eta-free); fitted exponent over eta in {0.05, 0.1, 0.2, 0.4}/L
    within 0.15 of 1/2, and each mean square <= (4/3)(eta/alpha) mu^2 ||d_x f||^2 (D4)."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    consts = problem.hgp_constants()
    alpha, beta = consts["alpha"], consts["beta"]
    mu2 = consts["kappa_lambda"] ** 2 + consts["kappa_x"] ** 2 * beta**2 / alpha**2
    grad_norm = float(problem.client_blocks(x)["c"].norm())
    # Why eta <= 0.4/L: the exact floor is RMS^2 ~ eta / (alpha (2 - eta alpha)); at eta alpha
    # up to 0.8 (kappa ~ 1) the 1/(2 - eta alpha) factor steepens the fitted exponent by ~0.1
    # (seen in the thorough profile); up to 0.4 it stays below ~0.05.
    factors = [0.05, 0.1, 0.2, 0.4]
    rms, bound_ok = [], True
    for f in factors:
        eta = f / consts["L"]
        # Why 3 / (eta alpha) terms: the variance settles like (1 - eta alpha)^(2m), so this is
        # e^-6 ~ 0.25% from its limit.
        M = int(min(400, math.ceil(3.0 / (eta * alpha))))
        samples, mean, _ = _floor(make, problem, x, 64, neumann_terms=M, averaging="exact",
                                  batch_size=1, neumann_step_size=eta)
        value = _rms(samples, mean)
        rms.append(value)
        # Why 1.5 x: the mean square of 64 replicas exceeds its expectation by 50% with
        # probability far below 1e-3 for these light-tailed (bounded) noises.
        bound_ok &= value**2 <= 1.5 * (4.0 / 3.0) * (eta / alpha) * mu2 * grad_norm**2
    fit = _stats.fit_exponent(np.array(factors), np.array(rms))
    # Why 0.15: 1 - r^2 = 2 eta alpha - (eta alpha)^2 bends the pure sqrt(eta) law by up to
    # ~0.05 in the exponent over this range, plus the sampling error of the RMS.
    result = Fit("exponent of the noise floor RMS in eta", fit.slope, fit.ci_low, fit.ci_high,
                 0.5, 0.15)
    series = tuple(SeriesPoint("measured", "neumann_step_size", f, r) for f, r in
                   zip(factors, rms, strict=True))
    return Measurement(fit.slope, 0.5, result.agrees and bound_ok,
                       "|fit - 1/2| <= 0.15 and mean square <= D4 bound", series=series,
                       fit=result, details={"d4_bound_ok": bound_ok})


# --------------------------------------------------------------------------- Thm 1 bound


def theorem1_bound(mu: float, alpha: float, beta: float, eta: float, c: float, n: int,
                   dims: int, eps: float) -> float:
    """Thm 1 (main text), with the measured c_S for (8 sqrt(n)/delta) tau^S:
    ``(4 mu/alpha)(1 + c) sqrt(2 log(2 n (d_x + d_lambda)/eps)) + (2 beta/(eta alpha^2)) c``."""
    return (4 * mu / alpha * (1 + c) * math.sqrt(2 * math.log(2 * n * dims / eps))
            + 2 * beta / (eta * alpha**2) * c)


def check_high_probability(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Thm 1 at eps = 0.1: the fraction of R = 200 replicas above the bound is not
    significantly above eps (binomial test at rate 1e-3); the S-condition is enforced by
    doubling S until c_S <= eta alpha / (2 (1 - eta alpha))."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    consts = problem.hgp_constants()
    alpha, beta, eta = consts["alpha"], consts["beta"], 1.0 / consts["L"]
    mu = math.sqrt(consts["kappa_lambda"] ** 2 + consts["kappa_x"] ** 2 * beta**2 / alpha**2)
    # Why (1 - eta alpha/2)^M (M + 1) <= 1e-3 (beta/alpha): the exp(-O(M)) term (ratio
    # q <= 1 - eta alpha/2 up to a factor linear in M, notes 4.4) is then negligible; it is
    # still added to the bound.
    M = 10
    while (1 - eta * alpha / 2) ** M * (M + 1) > 1e-3 and M < 400:
        M += 10
    tail = beta / alpha * (1 - eta * alpha / 2) ** M * (M + 1)
    # Why R = 100: with eps = 0.1 a binomial test at rate 1e-3 then flags an exceedance
    # frequency of about 0.2 or more, i.e. a bound that fails twice as often as claimed.
    S, eps, replicas = int(case.params["pushsum_steps"]), 0.1, 100
    while True:
        samples, _, run = _floor(make, problem, x, replicas, True, neumann_terms=M,
                                 pushsum_steps=S,
                                 graph_seed=case.params["graph_seed"],
                                 batch_size=case.params["batch_size"], neumann_step_size=eta)
        c = max(run.consensus_errors)
        if c <= eta * alpha / (2 * (1 - eta * alpha)):
            break
        if S >= 256:
            raise NotMeasurable("the S-condition of Thm 1 fails up to S = 256")
        S *= 2
    grad_norm = float(problem.client_blocks(x)["c"].norm())
    errors = (samples - global_grad(problem, x)).flatten(1).norm(dim=1).numpy() / grad_norm
    dims = problem.dim_y + problem.dim_hyper
    bound = theorem1_bound(mu, alpha, beta, eta, c, problem.n_clients, dims, eps) + tail
    above = int((errors > bound).sum())
    p_value = float(stats.binom.sf(above - 1, replicas, eps)) if above else 1.0
    return Measurement(float(np.quantile(errors, 1 - eps)), bound, p_value >= FALSE_FAIL_RATE,
                       "(1 - eps)-quantile of the normalised error <= bound (binomial test)",
                       details={"above": above, "c_S": c, "pushsum_steps": S,
                                "bound_over_quantile": bound / max(float(np.quantile(
                                    errors, 1 - eps)), 1e-300)})


CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="hgp.stochastic.unbiased",
        paper="HGP",
        reference="HGP Alg. 2 / Remark 3; notes 4.6 D3 (conditional unbiasedness)",
        kind="variance_bound",
        statement="E[v^(M) | graph sequence] = deterministic HGP on the same graphs, for "
                  "independent samples and for the practical form (shared sample, omega kept)",
        estimators=("hgp-stochastic", "hgp-practical"),
        strategy=_noisy_cases(),
        check=check_unbiased,
    ),
    Claim(
        id="hgp.theorem1.noise_exponent_b",
        paper="HGP",
        reference="HGP Cor. 2 (kappa = O_P(1/sqrt(b))); notes 4.7, 6.3 T9",
        kind="scaling_exponent",
        statement="noise floor RMS of v^(M) around its conditional mean ~ b^(-1/2): fitted "
                  "exponent within 0.1 of -1/2",
        estimators=("hgp-stochastic",),
        strategy=_noisy_cases(steps=(2, 4), max_dim=2),
        check=check_noise_exponent_b,
        expected="fails",
        # Found by seed-only draws (theory_checks._determinism): two clients, dim 1, Hessians
        # 1 +- 0.5 with sample noise 0.3, the Neumann cap M = 80 binding; fitted exponent -0.389
        # [-0.399, -0.379] over b in {2, 4, 8, 16}. Kept as an explicit example.
        examples=(known_case(
            {"family": "PerClientQuadratic.random", "n_clients": 2, "dim_hyper": 1, "dim_y": 1,
             "condition_number": 1.0, "seed": 3170, "hessian_heterogeneity": 0.5,
             "cross_scale": 0.75, "outer_coupling": 0.0, "target_heterogeneity": 1.0,
             "rho": 1.0, "mu": 1.0, "n_samples": 16, "hessian_noise": 0.3, "cross_noise": 0.5,
             "gradient_noise": 0.0},
            {"point_seed": 0, "graph_seed": 1, "pushsum_steps": 2, "batch_size": 1,
             "form": "independent"}),),
        notes="The b^(-1/2) law of the noise floor (T9's reading of Cor. 2) fails on a drawn "
              "case: exponent -0.389 [-0.399, -0.379] over b = 2..16 (noise decays slower than "
              "b^(-1/2)); holds within 0.1 on the other drawn cases. Cause not yet diagnosed "
              "(candidates: the capped Neumann horizon on a slowly contracting client, "
              "higher-order products of sampled Hessians); Cor. 2 itself is an O_P upper "
              "bound, so no corrected claim is registered yet.",
    ),
    Claim(
        id="hgp.noise.sqrt_eta",
        paper="HGP",
        reference="HGP Thm 1 proof (1 - q^2 >= eta^2 alpha^2/4); notes 4.6 D4, 7.2 item 16",
        kind="scaling_exponent",
        statement="exact averaging: noise floor RMS ~ sqrt(eta) (fitted exponent within 0.15 of "
                  "1/2; the paper's noise term is eta-free) and E||v - E v||^2 <= (4/3)(eta/"
                  "alpha) mu^2 ||d_x f||^2",
        estimators=("hgp-stochastic",),
        # Why kappa <= 1.5 and heterogeneity <= 0.3: M ~ 3/(eta alpha) at eta = 0.1/L stays
        # below ~150 iterations, which keeps the four replicated runs in the fast budget.
        strategy=_noisy_cases(max_dim=2, kappa=(1.0, 1.5), hessian_heterogeneity=(0.0, 0.3)),
        check=check_sqrt_eta,
        notes="Confirms the erratum: the variance sum of the martingale terms is "
              "eta^2 mu^2 (1+c)^2 / (1 - q^2) with 1 - q^2 ~ 2 eta alpha, so the RMS floor is "
              "proportional to sqrt(eta/alpha), not eta-free.",
    ),
    Claim(
        id="hgp.theorem1.high_probability_bound",
        paper="HGP",
        reference="HGP Thm 1 (main text, log(2n(d_x + d_lambda)/eps)); notes 4.3, 6.3 T10",
        kind="variance_bound",
        statement="P(||v^(M) - d_lambda f|| / ||d_x f|| <= (4 mu/alpha)(1 + c) sqrt(2 log(2n(d_x"
                  " + d_lambda)/eps)) + (2 beta/(eta alpha^2)) c + exp(-O(M))) >= 1 - eps, with "
                  "the measured c_S",
        estimators=("hgp-stochastic",),
        strategy=_noisy_cases(),
        check=check_high_probability,
    ),
)
