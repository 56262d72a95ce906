"""Exact quantities of a closed-form problem that claims compare estimators with.

The closed-form families have inner Hessians and cross Jacobians that do not depend on (x, y), so
the dense matrices are read off once with Hessian-vector products through the problem's own
losses (uncounted, full objectives). This works for every closed-form kind (bilevel, minimax,
compositional) without family-specific code, and cross-checks the families' own formulas.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from problems import Batch
from problems import Problem
from testbed.oracles import Oracles


@dataclasses.dataclass(frozen=True)
class QuadraticView:
    """Dense global derivatives of a problem at a point.

    Attributes:
        H: ``grad^2_y g`` of shape ``(dy, dy)``.
        J: ``grad^2_xy g`` of shape ``(dx, dy)``.
    """

    problem: Problem
    H: torch.Tensor
    J: torch.Tensor

    def _oracles(self) -> Oracles:
        return Oracles(self.problem)

    @property
    def clients(self) -> torch.Tensor:
        return torch.arange(self.problem.n_clients)

    def grad_outer(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(grad_x f, grad_y f)`` of the global outer objective at ``(x, y)``."""
        gx, gy = self._oracles().grad_outer(x, y, self.clients)
        return gx.mean(0), gy.mean(0)

    @property
    def spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigenvalues (ascending) and eigenvectors of H."""
        values, vectors = torch.linalg.eigh(self.H)
        return values.cpu().numpy(), vectors.cpu().numpy()


def sign_fixed(vector: torch.Tensor) -> torch.Tensor:
    """``vector`` or ``-vector``, whichever has its largest-magnitude entry (the first of
    equal ones) positive.

    A singular vector or an eigenvector is defined up to its sign, and LAPACK (CPU) and cuSOLVER
    (CUDA) pick different signs: a check that starts from one (a worst direction, a worst start)
    fixes the sign by this rule so that it computes the same numbers on every device. A check
    whose statement is "for every direction" evaluates both signs anyway.
    """
    index = int(torch.argmax(vector.abs()))
    return vector if float(vector[index]) >= 0.0 else -vector


def quadratic_view(problem: Problem, x: torch.Tensor, y: torch.Tensor) -> QuadraticView:
    oracles = Oracles(problem)
    clients = torch.arange(problem.n_clients)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    H_cols = [oracles.hvp_inner(x, y, e, clients).mean(0) for e in eye]
    J_cols = [oracles.jvp_inner_xy(x, y, e, clients).mean(0) for e in eye]
    H = torch.stack(H_cols, dim=1)
    return QuadraticView(problem, 0.5 * (H + H.T), torch.stack(J_cols, dim=1))


def evaluation_point(problem: Problem, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded outer point x and inner starting point y0, both standard normal."""
    rng = np.random.default_rng(seed)
    x = torch.as_tensor(rng.standard_normal(problem.dim_x), dtype=torch.float64)
    y0 = torch.as_tensor(rng.standard_normal(problem.dim_y), dtype=torch.float64)
    return x, y0


def dominant_mode_window(
    amplitudes: np.ndarray,
    rates: np.ndarray,
    floor: float,
    max_share: float = 1e-3,
    limit: int = 100_000,
) -> tuple[int, int] | None:
    """Steps ``[start, stop]`` where the slowest mode dominates a sum of geometric modes.

    The error of a linear iteration is ``sum_k a_k rho_k^n``; its log-slope approaches
    ``log rho_1`` (the slowest rate) once the other modes' share
    ``sum_{k>1} a_k rho_k^n / (a_1 rho_1^n)`` is below ``max_share``. The window stops where the
    dominant mode reaches ``floor`` (float64 round-off would take over below it).

    Args:
        amplitudes: ``a_k >= 0``, with ``a_1`` (index 0) the slowest mode's.
        rates: ``rho_k`` in ``[0, 1)``, ``rates[0]`` the largest.
        floor: smallest error worth fitting.

    Returns:
        ``(start, stop)``, or ``None`` when the slowest mode is not excited or never dominates
        above the floor.
    """
    a1, rho1 = float(amplitudes[0]), float(rates[0])
    if a1 <= floor or not 0.0 < rho1 < 1.0:
        return None
    stop = int(np.floor(np.log(floor / a1) / np.log(rho1)))
    # A mode with rate 0 still contributes at n = 0 (0**0 == 1) and vanishes after one step.
    others = [(float(a), float(r)) for a, r in zip(amplitudes[1:], rates[1:], strict=True) if a > 0]
    start = 0
    for n in range(0, min(stop, limit) + 1):
        share = sum(a * (r / rho1) ** n for a, r in others) / a1
        if share <= max_share:
            start = n
            break
    else:
        return None
    return (start, stop) if stop > start else None


def joint_hessians(
    problem: Problem,
    which: str = "g",
    per_sample: bool = False,
    point: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Each client's Hessian of ``g_i`` (``which="g"``) or ``f_i`` (``"f"``) in ``z = (x, y)``
    jointly, ``(M, dx + dy, dx + dy)``; with ``per_sample`` each sample's, ``(M, n, d, d)`` (the
    losses of one-sample minibatches). Evaluated at ``point`` (default ``z = 0``): constant on
    the quadratic families, which is where the papers' Lipschitz constants are these norms.

    The papers' smoothness assumptions are joint in ``z`` (FedNest A1: ``grad g_i(z)`` is
    ``l_{g,1}``-Lipschitz; AggITD Assumption 2: ``grad G_i(z; zeta)`` is ``L_g``-Lipschitz), so
    their constants are spectral norms of these matrices, not of the ``y`` block alone.
    """
    dx, dy, m = problem.dim_x, problem.dim_y, problem.n_clients
    clients = torch.arange(m)
    loss_fn = problem.outer_loss if which == "f" else problem.inner_loss
    batches: list[Any] = [None]
    if per_sample:
        n = int(getattr(problem, "n_samples", 0) or 0)
        if n == 0:
            raise ValueError(f"{problem.id}: no samples, so no per-sample Hessians")
        batches = [Batch(torch.full((m, 1), j, dtype=torch.long)) for j in range(n)]
    out = []
    for batch in batches:
        if point is None:
            z0 = torch.zeros(m, dx + dy, dtype=torch.float64)
        else:
            z0 = torch.cat([point[0], point[1]]).expand(m, dx + dy).clone()
        z = z0.requires_grad_(True)
        loss = loss_fn(z[:, :dx], z[:, dx:], clients, batch).sum()
        (grad,) = torch.autograd.grad(loss, z, create_graph=True)
        rows = []
        for k in range(dx + dy):
            (row,) = torch.autograd.grad(grad[:, k].sum(), z, retain_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(z) if row is None else row)
        out.append(torch.stack(rows, dim=1).detach())
    return torch.stack(out, dim=1) if per_sample else out[0]


def spectral_norm_max(matrices: torch.Tensor) -> float:
    """``max ||A||_2`` over a stack of matrices."""
    return float(torch.linalg.matrix_norm(matrices, ord=2).max())


def outer_affine(problem: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``grad h(x) = G x + g0`` on the closed-form families (the outer objective
    ``h(x) = f(x, y*(x))`` is quadratic there): ``(G, g0)`` from ``dx + 1`` exact
    hypergradients, ``G`` symmetrized (it is ``grad^2 h``)."""
    zero = torch.zeros(problem.dim_x, dtype=torch.float64)
    g0 = problem.exact_hypergradient(zero)
    cols = [
        problem.exact_hypergradient(e) - g0 for e in torch.eye(problem.dim_x, dtype=torch.float64)
    ]
    G = torch.stack(cols, dim=1)
    return 0.5 * (G + G.T), g0
