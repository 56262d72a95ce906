"""FedNest's Theorem 3.1 stationarity-floor check: the exact limit of the deterministic
iteration against the bias floor ``b_N^2``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from testbed.federation.context import FederatedContext
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable, SeriesPoint
from theory_checks.fednest.common import client_matrices, measured_map
from theory_checks.fednest.constants import fednest_constants
from theory_checks.tolerances import IDENTITY_RTOL


def floor_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """``b_N^2`` with ``b_N = ||J_bar|| ||grad_y f(x_N, y*)|| (1/mu) (1 - mu/l)^N`` (item 3's
    explicit constant)."""
    rho = 1.0 - constants.mu * params["neumann_step_size"]
    b = params["cross_norm"] * params["grad_y_norm"] * rho ** params["neumann_terms"] / constants.mu
    return b * b


def check_stationarity_floor(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Thm 3.1, deterministic form: FedNest's limit ``x_N`` has ``||grad f(x_N)||^2 <= b_N^2``.

    The deterministic iteration (exact oracles, full participation, deterministic truncation)
    is affine in ``z = (x, y)``; its map ``G`` and offset are read from single steps at ``z*`` and
    ``z* + e_j``, so the limit ``z_N = (I - G)^{-1} c`` is exact; ``rho(G) < 1`` is required (the
    iteration must converge to it).
    """
    problem = case.problem
    if problem.kind != "bilevel":
        raise NotMeasurable("only bilevel problems have a nonzero bias floor")
    terms = int(case.params["neumann_terms"])
    # FedIHGP's scale 1/l_{g,1}, A1's constant (theory_checks.fednest.constants), as Alg. 3 has it
    algorithm = make(inner_steps=case.params["inner_steps"], neumann_terms=terms, local_steps=1,
                     truncation="deterministic",
                     neumann_step_size=1.0 / fednest_constants(problem).l_g1)
    steps = algorithm.resolve_steps(problem)
    zero = torch.zeros(problem.dim_x, dtype=torch.float64)
    g0 = problem.exact_hypergradient(zero)
    hess = torch.stack([problem.exact_hypergradient(e) - g0
                        for e in torch.eye(problem.dim_x, dtype=torch.float64)], dim=1)
    if float(torch.linalg.eigvalsh(0.5 * (hess + hess.T)).min()) <= 0.0:
        raise NotMeasurable("h is not strongly convex: no bounded-below floor to reach")
    x_star = torch.linalg.solve(hess, -g0)
    y_star = problem.exact_inner_solution(x_star)
    dx = problem.dim_x

    def step(z: torch.Tensor) -> torch.Tensor:
        ctx = FederatedContext(problem, np.random.default_rng(0))
        state = algorithm.init(problem)._replace(x=z[:dx], y=z[dx:], steps=steps)
        new = algorithm.step(ctx, state)
        return torch.cat([new.x, new.y])

    z_star = torch.cat([x_star, y_star])
    offset, G = measured_map(step, z_star)
    rho = float(torch.linalg.eigvals(G).abs().max())
    eye = torch.eye(G.shape[0], dtype=torch.float64)
    z_limit = z_star + torch.linalg.solve(eye - G, offset)
    x_limit = z_limit[:dx]
    floor = float(problem.exact_hypergradient(x_limit).norm() ** 2)
    y_lim = problem.exact_inner_solution(x_limit)
    view = client_matrices(problem, x_limit, y_lim)
    params = {"neumann_terms": terms, "neumann_step_size": steps.neumann,
              "cross_norm": float(torch.linalg.matrix_norm(view["J"].mean(0), ord=2)),
              "grad_y_norm": float(view["gy"].mean(0).norm())}
    bound = claim.evaluate_bound(problem.constants(), params)
    slack = (IDENTITY_RTOL * (1.0 + float(g0.norm()))) ** 2
    passed = rho < 1.0 and floor <= bound + slack
    return Measurement(floor, bound, passed, "rho(G) < 1 and floor <=",
                       series=(SeriesPoint("measured", "neumann_terms", terms, floor),
                               SeriesPoint("bound", "neumann_terms", terms, bound)),
                       details={"rho": rho, "neumann_terms": terms,
                                "y_limit_error": float((z_limit[dx:] - y_lim).norm())})


