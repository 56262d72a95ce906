r"""Checks of the claims the FedMSA authors' code is decided against (``claims.toml``).

FedMSA's bilevel maps (paper eq. (10), N = 1, z = [w; v]; the printed (10a) has ``grad_x f``
where ``grad_w f`` belongs, as eq. (2) and the code have it) for client m:

.. math::  S^m(x, z) = [\nabla_w g^m(x, w);\ \nabla^2_w g^m(x, w) v - \nabla_w f^m(x, w)],
           \qquad P^m(x, z) = \nabla_x f^m(x, w) - \nabla^2_{xw} g^m(x, w) v,

and at the fixed point of ``mean_m S^m = 0`` (``w = y*(x)``, ``v = H_bar^{-1} grad_w f_bar``)
``mean_m P^m = grad F(x)``, the exact hypergradient. Algorithm 1's local recursion (6)-(7) on
client m from ``(x_0, w_0, v_0)`` and the global directions ``(h, q)``, exact oracles:

.. math::  h_k = P^m(z_k) + h_{k-1} - P^m(z_{k-1}), \quad h_0 = h,\quad
           x_{k+1} = x_k - \alpha h_k \quad\text{(q, w, v likewise with } S^m, \beta).

The momentum step (5a)-(5b), every client, exact oracles (the sample the same at both points):

.. math::  h_r = \mathrm{avg}_m [P^m(z_r) + (1 - \rho)(h_{r-1} - P^m(z_{r-1}))],
           \quad q_r \text{ likewise with } S^m.

The right-hand sides are computed here from dense per-client derivatives of the problem's own
losses (``torch.func``), independently of the code checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from testbed.estimators.base import InnerState
from testbed.library_adapter import dense_derivatives
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.tolerances import IDENTITY_RTOL


def seeded_point(problem: Any, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard normal ``x``, ``w`` and ``v`` from ``seed``."""
    rng = np.random.default_rng(seed)
    draw = [
        torch.as_tensor(rng.standard_normal(d), dtype=torch.float64)
        for d in (problem.dim_x, problem.dim_y, problem.dim_y)
    ]
    return draw[0], draw[1], draw[2]


def client_maps(
    problem: Any, client: int, x: torch.Tensor, w: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(P^m, S^m_w, S^m_v, grad_x f^m)`` of eq. (10) for client ``client`` by
    ``torch.func`` (the direct term last, for the diagnosis of a failure)."""
    who = torch.tensor([client])

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return problem.outer_loss(a[None], b[None], who, None).sum()

    def g(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return problem.inner_loss(a[None], b[None], who, None).sum()

    fx, fw = torch.func.grad(f, argnums=(0, 1))(x, w)
    gw = torch.func.grad(g, argnums=1)(x, w)
    H = torch.func.jacrev(torch.func.grad(g, argnums=1), argnums=1)(x, w)
    J = torch.func.jacrev(torch.func.grad(g, argnums=1), argnums=0)(x, w)  # (dy, dx)
    return fx - J.T @ v, gw, H @ v - fw, fx


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """``|a - b| / (|b| + 1)``."""
    return float((a - b).norm()) / (float(b.norm()) + 1.0)


def identity(measured: float, details: dict[str, Any]) -> Measurement:
    """An exact identity's measurement: the relative residual against ``IDENTITY_RTOL``."""
    return Measurement(
        measured, IDENTITY_RTOL, measured <= IDENTITY_RTOL, "relative residual <=", details=details
    )


def check_maps(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Every client's ``p_func(v)`` and ``s_func(v)`` against ``P^m`` and ``S^m`` (10) at a
    seeded ``(x, w, v)``: the largest relative residual."""
    problem = case.problem
    x, w, v = seeded_point(problem, int(case.params["point_seed"]))
    p, s_w, s_v = make().maps(problem, x, w, v)
    worst_p, worst_s, indirect_only = 0.0, 0.0, 0.0
    for m in range(problem.n_clients):
        P, S_w, S_v, direct = client_maps(problem, m, x, w, v)
        worst_p = max(worst_p, relative(p[m], P))
        worst_s = max(worst_s, relative(s_w[m], S_w), relative(s_v[m], S_v))
        # the diagnosis: p against P^m without its direct term grad_x f^m
        indirect_only = max(indirect_only, relative(p[m], P - direct))
    worst = max(worst_p, worst_s)
    return identity(
        worst,
        {
            "p_residual": worst_p,
            "s_residual": worst_s,
            "p_residual_against_P_without_direct": indirect_only,
            "n_clients": problem.n_clients,
        },
    )


def check_fixed_point(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """``mean_m p_func_m(v*)`` at ``w = y*(x)``, ``v* = H_bar^{-1} grad_w f_bar`` against
    ``grad F(x) = grad_x f_bar - J_bar H_bar^{-1} grad_w f_bar`` (a linear solve)."""
    problem = case.problem
    x, _, _ = seeded_point(problem, int(case.params["point_seed"]))
    y = problem.exact_inner_solution(x)
    d = dense_derivatives(problem, x, y)
    exact = d.grad_x_f - d.J @ torch.linalg.solve(d.H, d.grad_y_f)
    scale = float(d.grad_x_f.norm() + (d.J @ torch.linalg.solve(d.H, d.grad_y_f)).norm()) + 1e-300

    value = make(inner_steps=0).estimate(problem, x, InnerState(y), np.random.default_rng(0)).value
    residual = float((value - exact).norm()) / scale
    return identity(residual, {"direct_over_scale": float(d.grad_x_f.norm()) / scale})


def check_momentum(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Their ``fed_globhq`` at a seeded ``z_r = (x, w, v)`` from a seeded previous point
    ``z_{r-1}``, ``h_{r-1}``, ``q_{r-1}`` and the clients' maps there, against (5a)-(5b) with the
    maps (10); ``rho = (1 + point_seed mod 3) / 4``."""
    problem = case.problem
    seed = int(case.params["point_seed"])
    rho = (1 + seed % 3) / 4
    now, before = seeded_point(problem, seed), seeded_point(problem, seed + 1)
    h_last, qw_last, qv_last = seeded_point(problem, seed + 2)  # any previous directions
    n = problem.n_clients
    previous = [client_maps(problem, m, *before) for m in range(n)]
    current = [client_maps(problem, m, *now) for m in range(n)]
    last = {
        "h": h_last,
        "q": [qw_last, qv_last],
        "p": [entry[0] for entry in previous],
        "s": [[entry[1], entry[2]] for entry in previous],
    }
    theirs = make(momentum=rho).global_step(problem, *now, last)
    mean = lambda k, base: torch.stack(  # noqa: E731
        [c[k] + (1 - rho) * (base - p[k]) for c, p in zip(current, previous, strict=True)]
    ).mean(0)
    h, q_w, q_v = mean(0, h_last), mean(1, qw_last), mean(2, qv_last)
    direct = torch.stack([c[3] for c in current]).mean(0)
    residuals = {
        "h": relative(theirs["h"], h),
        "q": max(relative(theirs["q_w"], q_w), relative(theirs["q_v"], q_v)),
        # the diagnosis: h against (5a) with the current maps' direct term grad_x f^m left out
        "h_against_P_without_direct": relative(theirs["h"], h - direct),
    }
    worst = max(residuals["h"], residuals["q"])
    return identity(worst, {**residuals, "rho": rho})


def check_local_recursion(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Their ``update_local`` on client ``point_seed mod n`` for K = 1 + point_seed mod 4 steps
    from a seeded ``(x, w, v)`` and the global directions ``(h, q)`` = the mean maps there,
    against recursion (6)-(7) with the maps (10)."""
    problem = case.problem
    seed = int(case.params["point_seed"])
    K, m = 1 + seed % 4, seed % problem.n_clients
    x, w, v = seeded_point(problem, seed)
    L = float(problem.constants().L)
    # Why alpha = beta = 0.5 / L: small steps keep the K iterates near the start, where every
    # map is well scaled; the identity holds at any step
    alpha = beta = 0.5 / L
    estimator = make(outer_step_size=alpha, inner_step_size=beta, local_steps=K)
    maps = [client_maps(problem, c, x, w, v) for c in range(problem.n_clients)]
    h = torch.stack([entry[0] for entry in maps]).mean(0)
    q = [
        torch.stack([entry[1] for entry in maps]).mean(0),
        torch.stack([entry[2] for entry in maps]).mean(0),
    ]
    theirs = estimator.local_update(problem, x, w, v, h, q, m)
    xk, wk, vk = x, w, v
    last = client_maps(problem, m, xk, wk, vk)
    hk, qw, qv = h, q[0], q[1]
    for _ in range(K):
        now = client_maps(problem, m, xk, wk, vk)
        hk, qw, qv = (now[0] + hk - last[0], now[1] + qw - last[1], now[2] + qv - last[2])
        xk, wk, vk = xk - alpha * hk, wk - beta * qw, vk - beta * qv
        last = now
    residual = max(relative(theirs["x"], xk), relative(theirs["w"], wk), relative(theirs["v"], vk))
    return identity(residual, {"local_steps": K, "client": m, "alpha": alpha})
