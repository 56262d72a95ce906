r"""HGP's recursion on the static network: ``v^(M)`` after exactly M iterations of Algorithm 2 /
eq. (10) with ``Theta_hat = W^S`` (HGP Sec. 3.3, Alg. 2; the static-network variant of Sec. 4).

Algorithm 2 from ``u_i^(0) = grad_{x_i} f_i`` and ``v_i^(0) = grad_{lambda_i} f_i`` at the inner
solution runs, for ``m = 1..M``,

.. math::

    \bar u^{(m-1)} = \hat\Theta u^{(m-1)}, \qquad
    v_i^{(m)} = v_i^{(m-1)} - \eta J_i \bar u_i^{(m-1)}, \qquad
    u_i^{(m)} = \bar u_i^{(m-1)} - \eta H_i \bar u_i^{(m-1)},

(eq. (10) with ``Theta`` replaced by the averaging operator; paper convention ``J_i =
grad^2_{x_i lambda_i} g_i``, ``d_lambda x d_x``), and on the static undirected network of Sec. 4
the operator of every call is ``W^S``, W the constant doubly-stochastic mixing matrix
(:func:`~theory_checks.hgp.alg1.metropolis_operator`, the Metropolis weights computed here from
the graph's edges). With exact Jacobians and the exact consensus inner solution, ``v^(M)`` is a
fixed finite product that this module evaluates in float64 NumPy from the problem's blocks
(:meth:`client_blocks`), the case's eta, M and S.

Checked (:data:`STATIC_ITERATES`): the registered ``hgp-static`` built with the case's M, S,
eta and graph seed, run once at a drawn ``lambda``, returns ``v^(M)`` equal to the recursion's
to a relative 1e-10 of GlobalGrad's scale (:data:`~theory_checks.tolerances.IDENTITY_RTOL`: M <=
15 products of n x n and d x d matrices with O(1) entries). A case where the recursion gives
the same ``v`` at ``M - 1`` or ``M + 1`` as at M, within
:data:`~theory_checks.tolerances.UNRESOLVED_TERM` of the scale, cannot tell M from its
neighbours and is rejected, not passed.

Why it is needed (issue 32): ``hgp-static``'s other claims are Theorem 1's rate in S, which
takes M large enough to reach the floor (so one iteration more or fewer changes nothing it
measures), and the operator ``W^S`` of each call (:data:`~theory_checks.hgp.alg1.STATIC_OPERATOR`);
an HGP that runs M + 1 or M - 1 iterations while M is recorded passed both.

Hypotheses: Assumption 1 on the static graph (connected, so W^S is well defined and mixes) and
Assumption 2 (strong convexity, so the inner solution is unique).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from problems import strategies
from results_format.verdicts import ABOUT_STEP
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.hgp.alg1 import metropolis_operator
from theory_checks.hgp.common import graph_cases
from theory_checks.hgp.common import graph_of
from theory_checks.hgp.common import point
from theory_checks.hgp.common import run_hgp
from theory_checks.hgp.common import scale
from theory_checks.hgp.constants import network_assumptions
from theory_checks.hgp.constants import step_size
from theory_checks.perturbed_variants import field_variant
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM


def recursion_iterates(
    blocks: dict[str, np.ndarray], theta: np.ndarray, eta: float, M: int
) -> list[np.ndarray]:
    """``v^(0), ..., v^(M)`` (each ``(n, d_lambda)``) of eq. (10) with the operator ``theta``."""
    H, J = blocks["H"], blocks["J"]
    u, v = blocks["c"].copy(), blocks["e"].copy()
    iterates = [v.copy()]
    for _ in range(M):
        u_bar = theta @ u  # client i's average: sum_j theta_ij u_j
        v = v - eta * np.einsum("kij,kj->ki", J, u_bar)
        u = u_bar - eta * np.einsum("kij,kj->ki", H, u_bar)
        iterates.append(v.copy())
    return iterates


def check_static_iterates(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """``hgp-static``'s ``v^(M)`` against eq. (10) with ``W^S``: the relative gap."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    M, S = int(case.params["neumann_terms"]), int(case.params["pushsum_steps"])
    eta = step_size(case)
    torch_blocks = problem.client_blocks(x)
    blocks = {k: torch_blocks[k].detach().cpu().numpy() for k in ("H", "J", "c", "e")}
    theta = metropolis_operator(graph_of(case).edges(0, 1)[0], S)
    iterates = recursion_iterates(blocks, theta, eta, M + 1)
    unit = scale(torch_blocks)
    for neighbour in (M - 1, M + 1):
        gap = float(np.linalg.norm(iterates[neighbour] - iterates[M]))
        if gap < UNRESOLVED_TERM * unit:
            raise NotMeasurable(
                f"eq. (10) gives the same v at M = {neighbour} as at M = {M} ({gap / unit:.2g} "
                "of the scale): an iteration too many or too few would pass"
            )
    est = make(
        neumann_terms=M,
        pushsum_steps=S,
        neumann_step_size=eta,
        graph_seed=case.params["graph_seed"],
    )
    v = run_hgp(est, problem, x).trajectory[-1, 0].detach().cpu().numpy()
    residual = float(np.linalg.norm(v - iterates[M])) / unit
    return Measurement(
        residual,
        IDENTITY_RTOL,
        residual <= IDENTITY_RTOL,
        "relative gap of v^(M) <=",
        details={"neumann_terms": M, "pushsum_steps": S, "eta": eta},
    )


# Cases: the static undirected family (the entry's), S in 1..6, M in 1..15 (M >= 1: at M = 0
# no iteration runs), eta a factor in [0.3, 1.0] of 1/L.
static_iterates_cases = graph_cases(
    strategies.per_client_quadratic(),
    ("static_undirected",),
    steps=(1, 6),
    neumann_terms=st.integers(1, 15),
    eta_factor=st.floats(0.3, 1.0),
)


STATIC_ITERATES_PERTURBATION = Perturbation(
    name="one HGP iteration too many",
    description=(
        "the static variant runs M + 1 iterations of eq. (10) while M is recorded: v moves by "
        "eta J_i u_bar^(M), above UNRESOLVED_TERM of the scale on every case kept."
    ),
    build=field_variant("hgp-static", neumann_terms=lambda est: est.neumann_terms + 1),
)


STATIC_ITERATES = Claim(
    id="hgp.recursion.static_iterates",
    paper="HGP",
    reference="HGP Algorithm 2 / eq. (10) with Theta_hat = W^S (Sec. 3.3; static-network "
    "variant, Sec. 4)",
    kind="exact_identity",
    about=ABOUT_STEP,
    statement=(
        "the static variant's v^(M) equals M iterations of eq. (10) from u^(0) = grad_x f, "
        "v^(0) = grad_lambda f with Theta_hat = W^S (Metropolis W) at the stated M, S and eta "
        "(relative 1e-10)"
    ),
    estimators=("hgp-static",),
    strategy=static_iterates_cases,
    check=check_static_iterates,
    hypotheses=network_assumptions("static_undirected"),
    perturbation=STATIC_ITERATES_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (STATIC_ITERATES,)
