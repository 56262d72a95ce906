"""FedMSA at tau = 0 is centralised single-timescale MSA (derived from eqs. (5)-(6) and
Algorithm 1): the tau = 0 regime of Theorem 3.1.

When every client's Jacobians agree (tau = 0, Definition 2.2) and the oracles are exact (sigma
= 0), the local recursion (6) gives ``h_{r,k} = P(x_{r+1,k}, Z_{r+1,k})`` exactly (the global
map, not client m~'s), so FedMSA's server point after round r is centralised MSA

    u_{t+1} = u_t - (alpha P(u_t), beta S(u_t)),    u = (x, Z),

after ``1 + (r - 1) K`` steps (round 0 runs one step, every later round K).

Hypothesis: A1. The check (:func:`check_tau_zero`) draws a tau = 0 family, picks steps that make
centralised MSA contract (:func:`~theory_checks.fedmsa.common.single_timescale_step`), runs 4
rounds of the registered algorithm with K in 1..4 and compares each round's server point with
the centralised iterate to a relative 1e-10.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.fedmsa.claim_makers import step_identity_claim
from theory_checks.fedmsa.common import MOMENTA
from theory_checks.fedmsa.common import build
from theory_checks.fedmsa.common import cases_of
from theory_checks.fedmsa.common import families
from theory_checks.fedmsa.common import gap_per_round
from theory_checks.fedmsa.common import mean_maps
from theory_checks.fedmsa.common import run
from theory_checks.fedmsa.common import single_timescale_step
from theory_checks.fedmsa.common import start_point
from theory_checks.fedmsa.constants import heterogeneity_tau
from theory_checks.fedmsa.perturbations import extra_local_step


def _centralised(
    problem: Any, x0: torch.Tensor, Z0: torch.Tensor, alpha: float, beta: float, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Centralised single-timescale MSA ``u_{t+1} = u_t - (alpha P, beta S)(u_t)``; iterates."""
    xs, Zs = [x0], [Z0]
    for _ in range(steps):
        P, S = mean_maps(problem, xs[-1][None], Zs[-1][None])
        xs.append(xs[-1] - alpha * P[0])
        Zs.append(Zs[-1] - beta * S[0])
    return torch.stack(xs), torch.stack(Zs)


def check_tau_zero(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """tau = 0, sigma = 0: round r's server point equals centralised MSA after 1 + (r-1)K steps."""
    problem = case.problem
    if heterogeneity_tau(problem) > 1e-12:
        raise NotMeasurable("clients' Jacobians differ (tau > 0)")
    K, R = case.params["local_steps"], 4
    alpha, beta, _ = single_timescale_step(problem)
    alg = build(
        make,
        problem,
        local_steps=K,
        momentum=case.params["momentum"],
        outer_step_size=alpha,
        inner_step_size=beta,
        batch_size=None,
    )
    state = alg.state_at(problem, start_point(problem, case.params["seed"]))
    records = run(alg, problem, R, seed=case.params["seed"], state=state)
    xs, Zs = _centralised(problem, state.x, state.Z, alpha, beta, 1 + (R - 1) * K)
    scale = float(xs.abs().max() + Zs.abs().max()) + 1.0

    def gap(rec: Any) -> float:
        t = 1 + (rec.iteration - 1) * K
        return float((rec.state.x - xs[t]).norm() + (rec.state.Z - Zs[t]).norm()) / scale

    return gap_per_round(records, gap, details={"K": K, "alpha": alpha, "beta": beta})


# Cases of claim fedmsa.tau_zero.equals_centralised_msa
tau_zero_equals_centralised_msa_cases = cases_of(
    families(tau_zero=True), momentum=MOMENTA, local_steps=st.integers(1, 4)
)


EQUALS_CENTRALISED_MSA_PERTURBATION = Perturbation(
    name="one local step too many",
    description=(
        "The local loop runs K + 1 steps in rounds r >= 1 (an off-by-one loop "
        "bound): the server point after round r is centralised MSA after 1 + (r - "
        "1)(K + 1) steps, not 1 + (r - 1) K; the identity (1e-10) sees one extra "
        "step of size alpha ||P||."
    ),
    build=extra_local_step,
)


EQUALS_CENTRALISED_MSA = step_identity_claim(
    id="fedmsa.tau_zero.equals_centralised_msa",
    reference="derived from eqs. (5)-(6) and Algorithm 1; tau = 0 regime of Theorem 3.1",
    statement=(
        "tau = 0 and sigma = 0: FedMSA's server point after round r equals centralised "
        "single-timescale MSA after 1 + (r - 1) K steps"
    ),
    estimators=("fedmsa", "fedmsa-mco"),
    strategy=tau_zero_equals_centralised_msa_cases,
    check=check_tau_zero,
    perturbation=EQUALS_CENTRALISED_MSA_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (EQUALS_CENTRALISED_MSA,)
