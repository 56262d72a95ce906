"""Algorithm 1's exact identities: the mean over Q against eq. (11) and the per-index
closed form of eq. (5) (also run on Alg. 1 as printed, to refute its typos)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from theory_checks.aggitd.common import ExtremeIndexDraw, exact_setup, run_estimate
from theory_checks.aggitd.constants import inner_step, neumann_step
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable
from theory_checks.tolerances import IDENTITY_RTOL, UNRESOLVED_TERM


def check_mean_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Mean over Q = 0..N of the estimator equals eq. (11) along the FedSVRG trajectory, and the
    estimator's own draw of Q ranges over exactly 0..N (the support the mean is taken over:
    read with :class:`~theory_checks.aggitd.common.ExtremeIndexDraw`, its lowest and highest
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
    lam, beta = neumann_step(case), inner_step(case)  # the propositions' caps
    ys = ex.fedsvrg_trajectory(y0, n, beta, tau)
    gx, _ = ex.grad_outer(ys[-1])
    predicted = gx - lam * ex.J @ ex.indirect_sum(ys, lam)
    params = {"inner_steps": n, "local_steps": tau, "inner_step_size": beta,
              "neumann_step_size": lam}
    outs = [run_estimate(make, ex.problem, x, y0, index=q, **params) for q in range(n + 1)]
    mean = torch.stack([o.value for o in outs]).mean(0)
    expected = run_estimate(make, ex.problem, x, y0, expectation=True, **params)
    support = [run_estimate(make, ex.problem, x, y0, ExtremeIndexDraw(end), **params).aux["index"]
               for end in ("low", "high")]
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
    return Measurement(worst, IDENTITY_RTOL, worst <= IDENTITY_RTOL, "relative residual <=",
                       details={"inner_steps": n, "local_steps": tau, "index_range": support,
                                **residuals})


def check_per_index_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """For a fixed Q: h = grad_x f(y^N) - lam (N+1) J prod_{t=N}^{Q+1}(I - lam H) grad_y f(y^Q)."""
    ex, x, y0 = exact_setup(case)
    seed = case.params["point_seed"]
    n = 1 + seed % 12
    q = (seed // 12) % (n + 1)
    tau = 1 + (seed // 200) % 2
    lam, beta = neumann_step(case), inner_step(case)  # the propositions' caps
    ys = ex.fedsvrg_trajectory(y0, n, beta, tau)
    gx, _ = ex.grad_outer(ys[-1])
    hess_iv = lam * (n + 1) * torch.linalg.matrix_power(ex.eye - lam * ex.H, n - q) \
        @ ex.grad_outer(ys[q])[1]
    indirect = ex.J @ hess_iv
    scale = ex.scale(ys[-1])
    if float(indirect.norm()) < UNRESOLVED_TERM * scale:
        # Why: with kappa = 1 (I - lam H = 0) and Q < N, or grad_y f(x, y^Q) = 0, the indirect
        # term vanishes, and with it the weight lam (N + 1) the identity is about: an estimator
        # weighting Q by lam N would pass. Such a case cannot test the claim.
        raise NotMeasurable("the indirect term vanishes at this (N, Q) "
                            f"({float(indirect.norm()) / scale:.2g} of the scale): the "
                            "importance weight is untested")
    predicted = gx - indirect
    # a reading of Alg. 1 as printed (claim aggitd.alg1.as_printed): line 6 with or without
    # lambda
    reading = ({"printed_line6": case.params["printed_line6"]}
               if "printed_line6" in case.params else {})
    out = run_estimate(make, ex.problem, x, y0, inner_steps=n, local_steps=tau,
                       inner_step_size=beta, neumann_step_size=lam, index=q, **reading)
    relative = float((out.value - predicted).norm()) / scale
    return Measurement(relative, IDENTITY_RTOL, relative <= IDENTITY_RTOL,
                       "relative residual <=", details={"inner_steps": n, "index": q})
