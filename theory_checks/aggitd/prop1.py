"""Proposition 1: AggITD's mean over Q (eq. (11)) and its bias bound (eq. (4)) (Xiao & Ji 2023,
Sec. 4.2, App. C.1).

Result. The mean of AggITD over the server's index ``Q = 0..N`` is eq. (11),

    (1/(N+1)) sum_{Q=0}^{N} h_Q = grad_x f(x, y^N)
        - lambda J sum_{Q=0}^{N} prod_{t=N}^{Q+1} (I - lambda H(y^t)) grad_y f(x, y^Q),

and its bias against the hypergradient at ``y^N`` is bounded by eq. (4) (with the
Hessian-Lipschitz constant ``rho = 0`` on the closed-form families, so the ``alpha_1, alpha_2``
terms vanish):

    B_I = ||E_Q h^I - J H^{-1} grad_y f(x, y^N)||^2
        <= 4 lam^2 L_f^2 L_g^2 alpha_3(N) ||y^0 - y*||^2 + 4 L_g^2 M^2 (1 - lam mu)^{2N+2} / mu^2
           + 200 lam beta^2 sigma_g^2 L_f^2 L_g^2 N (N+1) / mu,
    alpha_3(N) = 3 (N+1) (1 - beta mu / 2)^N / (lam mu).

Hypotheses: Assumption 1, ``lambda <= min{10, 1/L_g}``, ``beta <= min{1, lambda, 1/(6 L_g)}``;
``L_g, L_f`` Assumption 2's (joint in ``(x, y)``), M the largest ``||grad F_i||`` at the visited
points, ``sigma_g^2`` Assumption 4's dissimilarity (:mod:`theory_checks.aggitd.constants`).

Checked: the mean over Q = 0..N (one run per Q) and the expectation mode equal eq. (11) to 1e-10,
and the estimator's draw of Q ranges over exactly 0..N (:func:`check_mean_identity`;
perturbation: lambda stored in float32); eq. (4) at every N of a grid from the case's start and
from ``y^0 = y*`` (:func:`~theory_checks.aggitd.common.check_prop1_bias`, shared with erratum 9,
with the bound :func:`prop1_bound`; perturbation: the importance weight lambda N)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from testbed.estimators.aggitd import AggITD
from theory_checks.aggitd.common import NoDraws
from theory_checks.aggitd.common import bias_bound_claims
from theory_checks.aggitd.common import check_prop1_bias
from theory_checks.aggitd.common import exact_setup
from theory_checks.aggitd.common import four_case_estimate_claim
from theory_checks.aggitd.common import identity_claim
from theory_checks.aggitd.perturbations import IMPORTANCE_WEIGHT_N
from theory_checks.aggitd.perturbations import estimator_variant
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import Perturbation
from theory_checks.classical.common import closed_form_cases
from theory_checks.measurements import identity_residual


class ExtremeIndexDraw(NoDraws):
    """A generator for one draw of AggITD's index ``Q ~ U{0..N}`` (Alg. 1 line 1) that returns
    the lowest (``end="low"``) or the highest (``"high"``) value the draw can give, so a check
    reads the support the estimator samples from in two runs: it must be exactly ``0..N`` (the
    range the mean over Q, eq. (11), is taken over). Any other draw is refused, as by
    :class:`NoDraws`."""

    def __init__(self, end: str) -> None:
        self.end = end

    def integers(self, low: int, high: int | None = None, size: Any = None) -> int:
        if size is not None:
            raise RuntimeError("an index check drew an array (rng.integers(size=...))")
        low, high = (0, low) if high is None else (low, high)
        return int(low if self.end == "low" else high - 1)


def check_mean_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Mean over Q = 0..N of the estimator equals eq. (11) along the FedSVRG trajectory, and the
    estimator's own draw of Q ranges over exactly 0..N (the support the mean is taken over:
    read with :class:`ExtremeIndexDraw`, its lowest and highest
    value; an estimator drawing from 0..N - 1 would make the enumerated mean a mean it never
    samples)."""
    ex, x, y0 = exact_setup(case)
    seed = case.params["point_seed"]
    n, tau = seed % 9, 1 + (seed // 9) % 3
    if n == 0:
        # Why: with N = 0 there is no lower round and the weight lambda (N + 1) is lambda, so
        # the count and the weight the identity is about are untested (an AggITD forgetting
        # the weight, or stepping beta / 2, passes); such a case is not a pass.
        raise NotMeasurable("N = 0: no lower round, the weight lambda (N + 1) is untested")
    lam = ex.lam  # the propositions' caps, as beta
    ys = ex.fedsvrg_trajectory(y0, n, ex.beta, tau)
    gx, _ = ex.grad_outer(ys[-1])
    predicted = gx - lam * ex.J @ ex.indirect_sum(ys, lam)
    counts = {"inner_steps": n, "local_steps": tau}
    outs = [ex.estimate(make, y0, index=q, **counts) for q in range(n + 1)]
    mean = torch.stack([o.value for o in outs]).mean(0)
    expected = ex.estimate(make, y0, expectation=True, **counts)
    support = [
        ex.estimate(make, y0, rng=ExtremeIndexDraw(end), **counts).aux["index"]
        for end in ("low", "high")
    ]
    scale = ex.scale(ys[-1])
    residuals = {
        # 0 when the draw's support is 0..N, else 1 (an O(1) failure, like a wrong identity)
        "index_support": float(support != [0, n]),
        "mean_over_index": float((mean - predicted).norm()) / scale,
        "expectation_mode": float((expected.value - predicted).norm()) / scale,
        "inner_iterate": float((outs[0].state.y - ys[-1]).norm())
        / (float(ys[-1].norm()) + float(y0.norm()) + 1e-300),
    }
    worst = max(residuals.values())
    return identity_residual(
        worst, details={"inner_steps": n, "local_steps": tau, "index_range": support, **residuals}
    )


def prop1_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """RHS of eq. (4) with rho = 0 (the alpha_1, alpha_2 terms vanish on quadratics)."""
    n, lam, beta = params["inner_steps"], params["neumann_step_size"], params["inner_step_size"]
    mu, L_g, L_f, M = params["mu"], params["L_g"], params["L_f"], params["M"]
    alpha3 = 3.0 * (n + 1) * (1.0 - beta * mu / 2.0) ** n / (lam * mu)
    return (
        4.0 * lam**2 * L_f**2 * L_g**2 * alpha3 * params["initial_gap_sq"]
        + 4.0 * L_g**2 * M**2 * (1.0 - lam * mu) ** (2 * n + 2) / mu**2
        + 200.0 * lam * beta**2 * params["sigma_g_sq"] * L_f**2 * L_g**2 * n * (n + 1) / mu
    )


@dataclasses.dataclass(frozen=True)
class Float32Neumann(AggITD):
    """AggITD whose Neumann step lambda is stored in float32 (a dtype slip on a float64 run)."""

    def step_sizes(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().step_sizes(problem)
        return beta, float(np.float32(lam))


NEUMANN_STEP_FLOAT32 = Perturbation(
    "lambda stored in float32",
    "the Neumann step lambda is rounded to float32 (a dtype slip on a float64 run): a relative "
    "error ~3e-8 in every factor (I - lambda H) and in the weight lambda (N + 1), about 100x the "
    "identity's 1e-10 tolerance; the smallest realistic error that a float64 identity must see "
    "(it is invisible when lambda happens to be a float32 number, e.g. lambda = 1)",
    estimator_variant(Float32Neumann),
)


# --------------------------------------------------------------------------- the claims

# the cases each claim draws
BIAS_BOUND_CASES = closed_form_cases(max_dim=4)


MEAN_IDENTITY = identity_claim(
    id="aggitd.prop1.mean_identity",
    reference="Xiao & Ji 2023, eq. (11) (proof of Prop. 1, App. C.1)",
    serves="aggitd.prop1.bias_bound",
    statement=(
        "(1/(N+1)) sum_{Q=0}^{N} h_Q = grad_x f(x, y^N) - lambda J sum_{Q=0}^{N} "
        "prod_{t=N}^{Q+1} (I - lambda H(y^t)) grad_y f(x, y^Q), to 1e-10; the expectation "
        "mode returns the same"
    ),
    check=check_mean_identity,
    # Why 4 cases on fast: N + 2 estimator runs per case (~0.3 s); thorough draws 60
    max_examples=PerProfile(4, None),
    shrink=False,
    perturbation=NEUMANN_STEP_FLOAT32,
    notes=(
        "Exact oracles and full participation, so the only randomness is Q; the trajectory is "
        "recomputed in closed form (FedSVRG on a quadratic: y+ - y* = (I - M_tau H)(y - y*))."
    ),
)


BIAS_BOUND = bias_bound_claims(four_case_estimate_claim)(
    id="aggitd.prop1.bias_bound",
    reference="Xiao & Ji 2023, Prop. 1, eq. (4) (rho = 0)",
    statement=(
        "||E_Q h^I - J H^{-1} grad_y f(x, y^N)||^2 <= 4 lam^2 L_f^2 L_g^2 alpha_3(N) "
        "||y^0 - y*||^2 + 4 L_g^2 M^2 (1 - lam mu)^{2N+2} / mu^2 + 200 lam beta^2 "
        "sigma_g^2 L_f^2 L_g^2 N(N+1) / mu, alpha_3 = 3(N+1)(1 - beta mu/2)^N/(lam mu)"
    ),
    strategy=BIAS_BOUND_CASES,
    # a case: 8 expectation-mode runs up to N = 16 (~0.4 s)
    check=check_prop1_bias,
    bound=prop1_bound,
    perturbation=IMPORTANCE_WEIGHT_N,
    notes=(
        "lambda = 1/L_g, beta = min(1, lambda, 1/(6 L_g)), tau in 1..3; exact oracles, so the "
        "inner expectation is the exact mean over Q (expectation mode, checked against the "
        "per-Q runs by aggitd.prop1.mean_identity). Assumptions 1-4's constants (L_f, L_g "
        "joint in (x, y), mu per client, M and sigma_2 with the full gradients): from the "
        "case's start and from y^0 = y*, where only the truncation term is left on agreeing "
        "clients (what lets a weight error show)."
    ),
)


CLAIMS: tuple[Claim, ...] = (
    MEAN_IDENTITY,
    BIAS_BOUND,
)
