"""Shared helpers of the AggITD rate, errata and scaling checks: the constants ``L_f`` and
``M`` of the full gradient, Lemma 4's constants, the fixed-Q generator and the context
that records One-Round-Upper's uploads."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from testbed.oracles import Oracles
from theory_checks.aggitd.common import _Exact


def outer_lipschitz(problem: Any) -> float:
    """``L_f``: max over clients of ``||grad^2_{(x,y)} f_i||`` (constant on the quadratics)."""
    dx, dy = problem.dim_x, problem.dim_y
    zeros = torch.zeros(dx + dy, dtype=torch.float64)
    worst = 0.0
    for client in range(problem.n_clients):
        index = torch.tensor([client])

        def f(z: torch.Tensor, index: torch.Tensor = index) -> torch.Tensor:
            return problem.outer_loss(z[None, :dx], z[None, dx:], index, None)[0]

        hess = torch.autograd.functional.hessian(f, zeros)
        worst = max(worst, float(torch.linalg.matrix_norm(hess, ord=2)))
    return worst


def gradient_bound(problem: Any, points: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """``M``: max over clients and the given ``(x, y)`` of ``||grad F_i(x, y)||`` (exact)."""
    oracles = Oracles(problem)
    clients = torch.arange(problem.n_clients)
    worst = 0.0
    for x, y in points:
        gx, gy = oracles.grad_outer(x, y, clients)
        worst = max(worst, float(torch.sqrt((gx**2).sum(-1) + (gy**2).sum(-1)).max()))
    return worst


class FixedIndex:
    """Stands in for a run's generator when the only draw is AggITD's ``Q`` (Alg. 1 line 1).

    With exact oracles and full participation the server's ``Q ~ U{0..N}`` is the run's only
    random draw, so the exact expectation over Q is the mean over runs with ``Q = 0..N``; any
    other draw is an error.
    """

    def __init__(self, index: int) -> None:
        self.index = index

    def integers(self, low: int, high: int) -> int:
        if not low <= self.index < high:
            raise ValueError(f"fixed index {self.index} outside [{low}, {high})")
        return self.index


class LastUploads:
    """An upload observer that keeps the uploads of the last aggregation (One-Round-Upper's
    ``x^i``): ``FederatedContext(..., upload_observer=LastUploads())``."""

    def __init__(self) -> None:
        self.uploads: torch.Tensor | None = None

    def __call__(self, uploads: torch.Tensor, clients: torch.Tensor) -> None:
        self.uploads = uploads.detach().clone()


@dataclasses.dataclass(frozen=True)
class Lemma4Constants:
    """Lemma 4 / Appendix D.1 constants with ``rho = 0`` (so ``L_yx = 0``)."""

    mu: float
    L_g: float
    L_f: float

    @property
    def L_y(self) -> float:
        return self.L_g / self.mu

    @property
    def M_f(self) -> float:
        return self.L_f + self.L_g * self.L_f / self.mu

    @property
    def L_f_prime(self) -> float:
        return self.L_f + self.L_g * (self.L_f + self.M_f) / self.mu

    @property
    def alpha_2(self) -> float:
        """``1 / (324 M_f^2 + 6 M_f)``: Lemma 3's and Theorem 1's outer step cap."""
        return 1.0 / (324.0 * self.M_f**2 + 6.0 * self.M_f)


def _lemma4(problem: Any, ex: _Exact) -> Lemma4Constants:
    return Lemma4Constants(ex.mu, ex.L_g, outer_lipschitz(problem))
