r"""Checks of the claims the FedMSA authors' compositional notebook is decided against.

FedMSA's Fed-MCO maps (eq. (11), App. D) for client m, ``N = 2`` levels ``f_0, f_1, f_2`` (the
risk-averse problem of Sec. 4), at ``Z = (z^1, z^2)``:

.. math::  S^{m,n} = z^n - f^{m,n-1}(z^{n-1}) \quad (n = 1, 2;\ z^0 = x), \qquad
           P^m = \nabla f^{m,0}(x)\, \nabla f^{m,1}(z^1)\, \nabla f^{m,2}(z^2),

(11a) and (11b), with ``grad f`` the transposed Jacobian. The right-hand sides are computed here
with torch from the problem's own level maps (:meth:`problems.RiskAverse.level_map`),
independently of the notebook's JAX. At the fixed point of ``avg_m S^m = 0`` (``z^{n+1} =
fbar^n(z^n)``) the paper's fixed-point argument uses ``avg_m P^m = grad f(x)``, the gradient of
``fbar^2(fbar^1(fbar^0(x)))``: an average of products, which equals the product of averages only
when the clients' Jacobians agree (``fedmsa.mco.paper_fixed_point_stationary``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import RiskAverse
from testbed_fedmsa_authors.checks import identity
from testbed_fedmsa_authors.checks import relative
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement


def risk_averse_cases() -> st.SearchStrategy[Case]:
    """Small risk-averse problems (2-4 clients, d = 2-6, 5-12 examples each: the notebook has
    2 clients, d = 10 and 500 each; with d = 1 or two examples a client the drawn gradients are
    as small as 1e-6 and a gap is hard to read), seeded points."""
    return st.builds(
        lambda m, d, n, seed, point_seed: Case(
            RiskAverse(n_clients=m, dim=d, n_examples=m * n, seed=seed),
            {"point_seed": point_seed},
        ),
        st.integers(2, 4),
        st.integers(2, 6),
        st.integers(5, 12),
        st.integers(0, 2**16),
        st.integers(0, 2**16),
    )


def seeded_levels(problem: Any, seed: int) -> list[torch.Tensor]:
    """``[x, z^1, z^2, z^3]``: ``x`` standard normal, each ``z`` its level's value at the level
    below plus a standard normal offset (so every ``S`` is nonzero) and ``z^2_y > 0`` (inside
    the square root's domain ``y + delta > 0``)."""
    rng = np.random.default_rng(seed)
    draw = lambda n: torch.as_tensor(rng.standard_normal(n), dtype=torch.float64)  # noqa: E731
    x = draw(problem.dims[0])
    z1 = problem.mean_level_map(0, x) + draw(problem.dims[1])
    z2 = problem.mean_level_map(1, z1) + draw(2)
    z2[1] = abs(z2[1]) + 0.1
    z3 = problem.mean_level_map(2, z2).reshape(1) + draw(1)
    return [x, z1, z2, z3]


def client_maps(
    problem: Any, m: int, levels: list[torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``P^m`` (11b) and ``S^{m,1}, S^{m,2}`` (11a), with the notebook's extra ``z^3 -
    f^{m,2}(z^2)``, by torch autograd on the problem's level maps."""
    who = torch.tensor([m])

    def level(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda u: problem.level_map(n, u[None], who)[0]

    jacobians = [torch.autograd.functional.jacobian(level(n), levels[n]) for n in range(3)]
    P = jacobians[0].T @ jacobians[1].T @ jacobians[2]
    S = [levels[n + 1] - level(n)(levels[n]).reshape(-1) for n in range(3)]
    return P, S


def check_mco_maps(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Every client's ``p_func(Z)`` and ``s_func(Z)`` against (11b) and (11a) at a seeded
    ``Z``: the largest relative residual."""
    problem = case.problem
    levels = seeded_levels(problem, int(case.params["point_seed"]))
    p, s = make().maps(problem, levels)
    worst_p = worst_s = 0.0
    for m in range(problem.n_clients):
        P, S = client_maps(problem, m, levels)
        worst_p = max(worst_p, relative(p[m], P))
        worst_s = max(worst_s, *(relative(s[n][m], S[n]) for n in range(3)))
    worst = max(worst_p, worst_s)
    return identity(
        worst, {"p_residual": worst_p, "s_residual": worst_s, "n_clients": problem.n_clients}
    )


def check_mco_fixed_point(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """``mean_m p_func_m`` at the fixed point ``Z*(x)`` of ``mean_m s_func_m = 0`` against
    ``grad f(x)`` (torch autograd of the composed averaged levels), at a seeded ``x``."""
    problem = case.problem
    x = seeded_levels(problem, int(case.params["point_seed"]))[0]
    value = make().estimate(problem, x, None, np.random.default_rng(0)).value
    exact = problem.exact_gradient(x)
    # relative to the sizes compared (not + 1: near a stationary point both are small, and the
    # gap is a fraction of them)
    residual = float((value - exact).norm()) / (float(exact.norm() + value.norm()) + 1e-300)
    return identity(
        residual, {"grad_norm": float(exact.norm()), "direction_norm": float(value.norm())}
    )


__all__ = [
    "check_mco_fixed_point",
    "check_mco_maps",
    "client_maps",
    "risk_averse_cases",
    "seeded_levels",
]
