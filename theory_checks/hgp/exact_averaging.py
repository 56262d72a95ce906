"""HGP with exact averaging: the closed form of eq. (10)'s error (Remark 3 / eq. (16) with
``Theta_hat = Theta``; the closed form derived here).

With exact averaging (``Theta_hat = Theta``, the centralized variant or a server) and exact
Jacobians, eq. (10) started from ``u^(0) = d_x f``, ``v^(0) = d_lambda f`` has, for every client
i, every step eta and every M,

.. math::  v_i^{(M)} - \\mathrm{GlobalGrad}_i = J_i\\, \\bar H^{-1} (I - \\eta \\bar H)^M \\bar c

with ``H_bar = (1/n) sum_k H_k``, ``c_bar = (1/n) sum_k c_k`` (notation of
:mod:`theory_checks.hgp`): the identity behind Thm 1's truncation term ``exp(-O(M))``.

Hypotheses: exact averaging (Assumption 1 trivially) and Assumption 2 (strong convexity, so
``H_bar`` is invertible); no step condition is needed: the identity holds at any eta.

Checked (:func:`check_error_identity`, ``hgp.exact_averaging.error_identity``): the estimator's
``v^(M)`` minus GlobalGrad (a linear solve) against the right-hand side, relative residual
<= 1e-10, for M in [0, 40], eta a factor in [0.3, 1.5] of 1/L and both the exact and the server
averaging rule; a case with M = 0 (no iteration) or where the identity cannot tell M from
M +- 1 is rejected, not passed.
Perturbation: float32 messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from problems import strategies
from results_format.verdicts import ABOUT_STEP
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.hgp.common import global_grad
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.common import run_hgp
from theory_checks.hgp.common import scale
from theory_checks.hgp.constants import EXACT_AVERAGING_ASSUMPTIONS
from theory_checks.hgp.constants import step_size
from theory_checks.hgp.perturbations import FLOAT32_MESSAGES
from theory_checks.measurements import identity_residual
from theory_checks.tolerances import UNRESOLVED_TERM


def check_error_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Exact averaging: ``v_i^(M) - GlobalGrad_i = J_i H_bar^{-1} (I - eta H_bar)^M c_bar``.

    A case whose identity is the same at ``M - 1`` or ``M + 1`` as at M (to within what the
    identity resolves) cannot test it: with ``eta H_bar = I`` (kappa = 1 at eta = 1/L) every
    M >= 1 gives GlobalGrad, so an HGP with an iteration too many or too few would pass; at
    M = 0 no step is taken. Such cases are rejected, not counted as passes.
    """
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    M = int(case.params["neumann_terms"])
    eta = step_size(case)  # eta_factor / L
    H_bar, c_bar = blocks["H"].mean(0), blocks["c"].mean(0)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)

    def predicted_error(terms: int) -> torch.Tensor:
        power = torch.linalg.matrix_power(eye - eta * H_bar, terms)
        return torch.einsum("kij,j->ki", blocks["J"], torch.linalg.solve(H_bar, power @ c_bar))

    predicted, unit = predicted_error(M), scale(blocks)
    if M == 0:
        # v^(0) = e_i: no iteration ran, so the recursion's step and update are untested (a
        # halved eta or a sign-flipped v-update passes); such a case is not a pass either.
        raise NotMeasurable("M = 0: no iteration, the recursion is untested")
    for neighbour in (M - 1, M + 1):
        gap = float((predicted_error(neighbour) - predicted).norm()) if neighbour >= 0 else 1.0
        if gap < UNRESOLVED_TERM * unit:
            raise NotMeasurable(
                f"the identity gives the same v at M = {neighbour} as at M = {M} "
                f"({gap / unit:.2g} of the scale): an iteration too many or too "
                "few would pass"
            )
    est = make(neumann_terms=M, neumann_step_size=eta, averaging=case.params["averaging"])
    v = run_hgp(est, problem, x).trajectory[-1, 0]
    residual = float((v - global_grad(problem, x) - predicted).norm()) / unit
    return identity_residual(residual, details={"neumann_terms": M, "eta": eta})


def identity_cases() -> st.SearchStrategy[Case]:
    """The exact-averaging identity's cases: a problem, a point, eta as a factor in [0.3, 1.5] of
    its bound, the Neumann count M in [0, 40] and the averaging rule (exact or server)."""
    return st.builds(
        lambda problem, seed, f, M, avg: Case(
            problem, {"point_seed": seed, "eta_factor": f, "neumann_terms": M, "averaging": avg}
        ),
        strategies.per_client_quadratic(),
        strategies.SEEDS,
        st.floats(0.3, 1.5),
        st.integers(0, 40),
        st.sampled_from(("exact", "server")),
    )


# --------------------------------------------------------------------------- the claim


ERROR_IDENTITY = hgp_claim(
    id="hgp.exact_averaging.error_identity",
    reference="HGP eq. (10)/(16) with exact Theta (closed form derived)",
    kind="exact_identity",
    about=ABOUT_STEP,
    statement=(
        "v_i^(M) - GlobalGrad_i = J_i H_bar^{-1} (I - eta H_bar)^M c_bar (1e-10), exact "
        "averaging and the centralized (server) variant"
    ),
    estimators=("hgp-exact-averaging", "hgp-centralized"),
    strategy=identity_cases,
    check=check_error_identity,
    hypotheses=EXACT_AVERAGING_ASSUMPTIONS,
    perturbation=FLOAT32_MESSAGES,
)


CLAIMS: tuple[Claim, ...] = (ERROR_IDENTITY,)
