"""FedMSA reference maps and shared helpers: the per-client maps ``(P^m, S^m)`` read off each
closed-form family, Theorem 3.1's criterion, and the build / run / step-size helpers.

Written independently of :mod:`testbed.algorithms.fedmsa_maps` (eq. (10) bilevel and minimax,
eq. (11) compositional), so a wrong map in the algorithm shows in the checks of
:mod:`theory_checks.fedmsa` and :mod:`theory_checks.fedmsa.rates`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems import LinearCompositional, QuadraticBilevel, QuadraticMinimax
from testbed.algorithms.base import run_algorithm
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from theory_checks.claim import NotMeasurable

# --------------------------------------------------------------------------- reference maps


def reference_maps(problem: Any, x: torch.Tensor, Z: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ``(P^m, S^m)`` at points ``x (T, d_0)``, ``Z (T, d_Z)``: shapes ``(T, M, .)``.

    Read off the family's arrays (not autodiff): bilevel eq. (10) with the corrected (10a),
    minimax the same with ``g = -f``, compositional eq. (11).
    """
    if isinstance(problem, QuadraticBilevel):
        dy = problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        P = (torch.einsum("mji,tj->tmi", problem.D, w) + torch.einsum("mij,tj->tmi", problem.E, x)
             + problem.e + torch.einsum("mji,tj->tmi", problem.B, v))
        gw = (torch.einsum("mij,tj->tmi", problem.A, w) - torch.einsum("mij,tj->tmi", problem.B, x)
              - problem.b)
        fw = (torch.einsum("mij,tj->tmi", problem.C, w) + torch.einsum("mij,tj->tmi", problem.D, x)
              + problem.c)
        S = torch.cat([gw, torch.einsum("mij,tj->tmi", problem.A, v) - fw], dim=-1)
        return P, S
    if isinstance(problem, QuadraticMinimax):
        dy = problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        At_w = torch.einsum("mji,tj->tmi", problem.A, w)
        At_v = torch.einsum("mji,tj->tmi", problem.A, v)
        P = -At_w + torch.einsum("mij,tj->tmi", problem.Lam, x) + problem.e - At_v
        Pw = torch.einsum("mij,tj->tmi", problem.P, w)
        Ax = torch.einsum("mij,tj->tmi", problem.A, x)
        fw = -Pw + problem.b - Ax
        S = torch.cat([Pw - problem.b + Ax, torch.einsum("mij,tj->tmi", problem.P, v) - fw],
                      dim=-1)
        return P, S
    if isinstance(problem, LinearCompositional):
        sizes = list(problem.dims[1:])
        zs = [x, *torch.split(Z, sizes, dim=-1)]
        blocks = [zs[n][:, None, :] - torch.einsum("mij,tj->tmi", problem.W[n - 1], zs[n - 1])
                  - problem.w[n - 1] for n in range(1, len(zs))]
        g = torch.einsum("mij,tj->tmi", problem.Q, zs[-1]) - problem.t
        for n in range(problem.n_levels - 1, -1, -1):
            g = torch.einsum("mji,tmj->tmi", problem.W[n], g)
        return g, torch.cat(blocks, dim=-1)
    raise NotMeasurable(f"no reference maps for {type(problem).__name__}")


def mean_maps(problem: Any, x: torch.Tensor, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    P, S = reference_maps(problem, x, Z)
    return P.mean(1), S.mean(1)


def state_sizes(problem: Any) -> tuple[int, int]:
    """``(d_x, d_Z)``: the sizes of the outer variable and of the stacked inner ones."""
    if isinstance(problem, LinearCompositional):
        return problem.dims[0], sum(problem.dims[1:])
    return problem.dim_x, 2 * problem.dim_y


def affine_matrix(fn: Callable[[torch.Tensor], torch.Tensor], dim: int) -> torch.Tensor:
    """Matrix of an affine map ``fn: (T, dim) -> (T, out)`` (its columns are differences)."""
    eye = torch.eye(dim, dtype=torch.float64)
    points = torch.cat([torch.zeros(1, dim, dtype=torch.float64), eye])
    values = fn(points)
    return (values[1:] - values[:1]).T


def joint_jacobian(problem: Any, per_client: bool = False) -> torch.Tensor:
    """Jacobian of ``u = (x, Z) -> (P, S)`` (global; or per client, ``(M, d, d)``)."""
    dx, dz = state_sizes(problem)

    def fn(u: torch.Tensor) -> torch.Tensor:
        P, S = reference_maps(problem, u[:, :dx], u[:, dx:])
        out = torch.cat([P, S], dim=-1)
        return out if per_client else out.mean(1)

    if not per_client:
        return affine_matrix(fn, dx + dz)
    eye = torch.eye(dx + dz, dtype=torch.float64)
    values = fn(torch.cat([torch.zeros(1, dx + dz, dtype=torch.float64), eye]))
    return (values[1:] - values[:1]).permute(1, 2, 0)


def fixed_point_Z(problem: Any, x: torch.Tensor) -> torch.Tensor:
    """``Z*(x)`` for points ``x (T, d_0)``: the solution of ``S(x, Z) = 0`` (affine in Z)."""
    dx, dz = state_sizes(problem)
    T = x.shape[0]
    J_Z = affine_matrix(
        lambda Z: mean_maps(problem, torch.zeros(Z.shape[0], dx, dtype=torch.float64), Z)[1], dz)
    offset = mean_maps(problem, x, torch.zeros(T, dz, dtype=torch.float64))[1]
    return -torch.linalg.solve(J_Z, offset.T).T


def criterion(problem: Any, x: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Theorem 3.1's criterion ``||P(x, Z*(x))||^2 + ||Z - Z*(x)||^2`` per point (rows)."""
    Z_star = fixed_point_Z(problem, x)
    P_red = mean_maps(problem, x, Z_star)[0]
    return (P_red**2).sum(-1) + ((Z - Z_star) ** 2).sum(-1)


# --------------------------------------------------------------------------- helpers


def build(make: Callable[..., Any], problem: Any, **params: Any) -> Any:
    """The algorithm for ``problem``: ``make`` builds it; a compositional problem gets the
    compositional maps of eq. (11) (keeping the algorithm's class, so perturbations survive)."""
    semantics = params.pop("semantics", None)
    alg = make(**params)
    if problem.kind == "compositional" and not isinstance(alg.maps, CompositionalMaps):
        alg = dataclasses.replace(alg, maps=CompositionalMaps(semantics or "paper"))
    elif semantics is not None and isinstance(alg.maps, CompositionalMaps):
        alg = dataclasses.replace(alg, maps=dataclasses.replace(alg.maps, semantics=semantics))
    return alg


def run(alg: Any, problem: Any, rounds: int, seed: int = 0, state: Any = None) -> list[Any]:
    return run_algorithm(alg, problem, rounds, np.random.default_rng(seed), state=state)


def local_points(records: list[Any]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Every local iterate ``(x_{r+1,k}, Z_{r+1,k})`` of a run (first local client), in order,
    and the round of each."""
    xs, Zs, rounds = [], [], []
    for rec in records[1:]:
        for it in rec.state.local:
            xs.append(it.x[0])
            Zs.append(it.Z[0])
            rounds.append(rec.iteration)
    return torch.stack(xs), torch.stack(Zs), rounds


def single_timescale_step(problem: Any) -> tuple[float, float, float]:
    """Steps ``(alpha, beta)`` that make centralised MSA contract, and the spectral radius of
    ``I - diag(alpha, beta) J``; NotMeasurable when no tried pair contracts."""
    J = joint_jacobian(problem)
    dx, _ = state_sizes(problem)
    norm = float(torch.linalg.matrix_norm(J, ord=2))
    eye = torch.eye(J.shape[0], dtype=torch.float64)
    best = (math.inf, 0.0, 0.0)
    # Why a grid of fractions of 1/||J||: single-timescale MSA (alpha and beta of the same
    # order) contracts for small steps when every eigenvalue of J has a positive real part;
    # trying a few pairs and keeping the fastest avoids both an unstable and a needlessly slow
    # choice (the x-mode is often much slower than the Z-modes, so alpha may exceed beta).
    grid = (2.0, 1.2, 0.8, 0.5, 0.3, 0.15, 0.05)
    for a in grid:
        for b in grid:
            scale = torch.cat([torch.full((dx,), a / norm), torch.full((J.shape[0] - dx,),
                                                                        b / norm)])
            radius = float(torch.linalg.eigvals(eye - scale[:, None] * J).abs().max())
            if radius < best[0]:
                best = (radius, a / norm, b / norm)
    if best[0] >= 0.999:
        raise NotMeasurable("centralised single-timescale MSA does not contract on this "
                            "instance (a Jacobian eigenvalue has a non-positive real part)")
    return best[1], best[2], best[0]


def msa_radius(problem: Any, alpha: float, beta: float) -> float:
    """Spectral radius of centralised MSA's iteration ``I - diag(alpha, beta) J`` with the
    steps ``alpha`` (outer) and ``beta`` (inner): below 1 when it contracts."""
    J = joint_jacobian(problem)
    dx, _ = state_sizes(problem)
    scale = torch.cat([torch.full((dx,), alpha), torch.full((J.shape[0] - dx,), beta)])
    eye = torch.eye(J.shape[0], dtype=torch.float64)
    return float(torch.linalg.eigvals(eye - scale[:, None] * J).abs().max())


def start_point(problem: Any, seed: int) -> torch.Tensor:
    """A seeded standard-normal outer point ``x`` of size ``d_x``."""
    dx, _ = state_sizes(problem)
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.standard_normal(dx), dtype=torch.float64)
