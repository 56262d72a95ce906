"""Algorithm 1 (AggITD) and its per-index closed form, eq. (5) (Xiao & Ji 2023, Sec. 2.2; Alg. 1
lines 6 and 15 as printed disagree with eq. (5)).

Result. AggITD draws the server's index ``Q ~ U{0..N}`` (Alg. 1 line 1), runs N FedSVRG lower
rounds ``y^0..y^N`` and the recursion ``z^t = (I - lambda grad^2_y G_i(y^t)) z^{t-1}`` from
``z^Q = grad_y f(x, y^Q)``, and returns ``h_Q = grad_x f(x, y^N) - J p`` with
``p = lambda (N+1) z^N`` (line 15). On a fixed Q this is eq. (5):

    h_Q = grad_x f(x, y^N) - lambda (N+1) J prod_{t=N}^{Q+1} (I - lambda H(y^t)) grad_y f(x, y^Q).

As printed, line 6 drops the step lambda (``z_i^t = z^{t-1} - grad^2_y G_i z^{t-1}``) and line 15
takes ``z^{N-1}`` when ``Q < N``: either typo breaks eq. (5) (claim ``as_printed``, refuted, with
two readings: line 6 literally, and line 6 with the lambda a reader restores).

Hypotheses: Assumption 1 (``g_i`` mu-strongly convex in y) and the propositions' caps
``lambda <= min{10, 1/L_g}``, ``beta <= min{1, lambda, 1/(6 L_g)}``
(:mod:`theory_checks.aggitd.constants`).

Checked (:func:`check_per_index_identity`): for a drawn ``(N, Q, tau)``, with exact oracles and
full participation (the trajectory recomputed in closed form, ``y+ - y* = (I - M_tau H)(y -
y*)``), the estimate equals eq. (5) to 1e-10 relative; a case where the indirect term vanishes
(the importance weight untested) is not measurable. Perturbation: the importance weight lambda N."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from problems import QuadraticBilevel
from theory_checks.aggitd.common import exact_setup
from theory_checks.aggitd.common import identity_claim
from theory_checks.aggitd.common import saved_bilevel_case
from theory_checks.aggitd.perturbations import IMPORTANCE_WEIGHT_N
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import known_case
from theory_checks.hypotheses import Reading
from theory_checks.measurements import identity_residual
from theory_checks.tolerances import UNRESOLVED_TERM


def check_per_index_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """For a fixed Q: h = grad_x f(y^N) - lam (N+1) J prod_{t=N}^{Q+1}(I - lam H) grad_y f(y^Q)."""
    ex, x, y0 = exact_setup(case)
    seed = case.params["point_seed"]
    n = 1 + seed % 12
    q = (seed // 12) % (n + 1)
    tau = 1 + (seed // 200) % 2
    lam = ex.lam  # the propositions' caps, as beta
    ys = ex.fedsvrg_trajectory(y0, n, ex.beta, tau)
    gx, _ = ex.grad_outer(ys[-1])
    hess_iv = (
        lam
        * (n + 1)
        * torch.linalg.matrix_power(ex.eye - lam * ex.H, n - q)
        @ ex.grad_outer(ys[q])[1]
    )
    indirect = ex.J @ hess_iv
    scale = ex.scale(ys[-1])
    if float(indirect.norm()) < UNRESOLVED_TERM * scale:
        # Why: with kappa = 1 (I - lam H = 0) and Q < N, or grad_y f(x, y^Q) = 0, the indirect
        # term vanishes, and with it the weight lam (N + 1) the identity is about: an estimator
        # weighting Q by lam N would pass. Such a case cannot test the claim.
        raise NotMeasurable(
            "the indirect term vanishes at this (N, Q) "
            f"({float(indirect.norm()) / scale:.2g} of the scale): the "
            "importance weight is untested"
        )
    predicted = gx - indirect
    # a reading of Alg. 1 as printed (claim aggitd.alg1.as_printed): line 6 with or without
    # lambda
    reading = (
        {"printed_line6": case.params["printed_line6"]} if "printed_line6" in case.params else {}
    )
    out = ex.estimate(make, y0, inner_steps=n, local_steps=tau, index=q, **reading)
    relative = float((out.value - predicted).norm()) / scale
    return identity_residual(relative, details={"inner_steps": n, "index": q})


# Positive controls of the refuted statements: cases inside their conditions where they hold.
# Any problem with Q = N (point_seed 12: N = 1, Q = 1): the HessIV product is empty, so neither
# printed typo of Alg. 1 (lambda dropped in line 6, z^{N-1} in line 15) changes the estimate.
_CONTROL_PROBLEM = QuadraticBilevel.random(2, 2, 2, 3.0, seed=0).spec()


# Positive control of claim aggitd.alg1.as_printed
alg1_as_printed_control = known_case(_CONTROL_PROBLEM, {"point_seed": 12})


# --------------------------------------------------------------------------- the claims

# What every claim of this result shares.
alg1_claim = identity_claim.but(check=check_per_index_identity)


AS_PRINTED = alg1_claim(
    id="aggitd.alg1.as_printed",
    reference="Xiao & Ji 2023, Alg. 1 lines 6 and 15 as printed",
    serves="aggitd.alg1.per_index_identity",
    statement=(
        "Alg. 1 as printed (z_i^t = z^{t-1} - grad^2_y G_i z^{t-1}; p = lambda (N+1) "
        "z^{N-1} if Q < N) computes the estimator of eq. (5)"
    ),
    estimators=("aggitd-as-printed",),
    expected="fails",
    positive_control=alg1_as_printed_control,
    notes=(
        "Any Q < N exposes both typos: the recursion without lambda multiplies by (I - H), "
        "and z^{N-1} drops the t = N factor. Read two ways: line 6 literally (no lambda) and "
        "with the lambda a reader restores; line 15's z^{N-1} alone breaks the identity (the "
        "factor (I - lambda H(y^N)) is missing), so both fail. Inside Assumption 1 and the "
        "propositions' caps, lambda = 1/L_g with L_g joint in (x, y), beta = min(1, lambda, "
        "1/(6 L_g)). Saved counterexample: five identical clients, d_x = d_y = 1, mu = 1."
    ),
    readings=(
        Reading(
            "lines 6 and 15 as printed",
            (
                "z_i^t = z^{t-1} - grad^2_y G_i z^{t-1} (no lambda); p = lambda (N+1) z^{N-1} if Q "
                "< N"
            ),
            {"printed_line6": True},
        ),
        Reading(
            "line 6 with lambda restored",
            (
                "z_i^t = z^{t-1} - lambda grad^2_y G_i z^{t-1} (the missing step filled in); p = "
                "lambda (N+1) z^{N-1} if Q < N as printed"
            ),
            {"printed_line6": False},
        ),
    ),
    # The counterexample hypothesis found (saved as data): tried first on every run.
    examples=(saved_bilevel_case(n_clients=5),),
)


PER_INDEX_IDENTITY = alg1_claim(
    id="aggitd.alg1.per_index_identity",
    reference="Xiao & Ji 2023, eq. (5) (HessIV closed form; Sec. 2.2), Alg. 1 read with it",
    statement=(
        "for every Q: h_Q = grad_x f(x, y^N) - lambda (N+1) J prod_{t=N}^{Q+1} (I - "
        "lambda H(y^t)) grad_y f(x, y^Q), to 1e-10"
    ),
    corrects=AS_PRINTED.id,
    perturbation=IMPORTANCE_WEIGHT_N,
    notes=(
        "Alg. 1 with lambda in line 6 and p = lambda (N+1) z^N in line 15. Exact oracles and "
        "full participation, so the only randomness is Q; the trajectory is recomputed in "
        "closed form (FedSVRG on a quadratic: y+ - y* = (I - M_tau H)(y - y*))."
    ),
)


CLAIMS: tuple[Claim, ...] = (
    AS_PRINTED,
    PER_INDEX_IDENTITY,
)
