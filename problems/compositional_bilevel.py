"""FedNest's compositional bilevel problem as a view of a one-level ``LinearCompositional``.

For ``N == 1`` levels the federated compositional problem is FedNest's eq. (7) (with the
1/2 convention of its Sec. 3.2): ``g_i(x, y) = 1/2 ||y - r_i(x)||^2`` with ``r_i = f^{i,0}`` and
``f_i(x, y) = f^{i,1}(y)``, so ``grad^2_y g_i = I`` and the hypergradient is the compositional
gradient. This mixin gives :class:`~problems.compositional.LinearCompositional` the Problem
contract's losses, closed-form oracles, exact answers and constants in that view; every method
refuses a problem with more levels.
"""

from __future__ import annotations

from typing import Any

import torch

from problems._base import Batch
from problems._base import OracleParts
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._rows import matvec
from problems._rows import rmatvec


class CompositionalBilevelView(OracleParts):
    """The N == 1 bilevel view (module docstring); mixed into ``LinearCompositional``."""

    # provided by LinearCompositional
    name: str
    n_levels: int
    n_clients: int
    dim_x: int
    dim_y: int
    dims: tuple[int, ...]
    n_samples: int
    W: list[torch.Tensor]
    w: list[torch.Tensor]
    Q: torch.Tensor
    t: torch.Tensor
    means: Any
    _client_rows: Any
    _Q_op: torch.Tensor
    level_map: Any
    mean_level_map: Any
    objective: Any
    exact_gradient: Any
    _level_arrays: Any

    # --------------------------------------------------- bilevel view (N == 1)
    def _require_bilevel(self, what: str) -> None:
        if self.n_levels != 1:
            raise ProblemError(
                f"{self.name}: {what} is the FedNest bilevel view, defined only for "
                f"N == 1 levels (this problem has N = {self.n_levels}); use "
                "objective, exact_gradient and level_map instead"
            )

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(x, y) = 1/2 ||y - r_i(x)||^2`` with ``r_i = f^{i,0}`` (FedNest eq.
        (7))."""
        self._require_bilevel("inner_loss")
        return 0.5 * ((y - self.level_map(0, x, clients, batch)) ** 2).sum(-1)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(x, y) = f^{i,1}(y) = 1/2 y^T Q_i y - t_i^T y`` (no direct x
        dependence)."""
        self._require_bilevel("outer_loss")
        return self.level_map(1, y, clients, batch)

    # ------------------------------------------------ closed-form oracles (N == 1)
    # g_i = 1/2 ||y - W_i x - w_i||^2 and f_i = 1/2 y^T Q_i y - t_i^T y as batched products
    # (problems.ClosedFormOracles): grad_y g_i = y - W_i x - w_i, grad^2_y g_i = I,
    # grad^2_xy g_i = -W_i^T, grad_x f_i = 0, grad_y f_i = Q_i y - t_i.
    def _map(self, clients: torch.Tensor, batch: Batch | None) -> tuple[torch.Tensor, torch.Tensor]:
        if batch is None:
            return (
                self._client_rows.get(self.W[0], clients),
                self._client_rows.get(self.w[0], clients),
            )
        return self._level_arrays(0, clients, batch)

    def oracle_grad_inner(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y g_i = y - (W_i x + w_i)``: ``(C, dy)``."""
        self._require_bilevel("inner_loss")
        W, w = self._map(clients, batch)
        return y - (matvec(W, x) + w)

    def _outer_grad_x_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_x f_i = 0``: ``(C, dx)``."""
        self._require_bilevel("outer_loss")
        return torch.zeros(int(clients.shape[0]), self.dim_x, dtype=x.dtype, device=x.device)

    def _outer_grad_y_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y f_i = Q_i y - t_i``: ``(C, dy)``."""
        self._require_bilevel("outer_loss")
        t = (
            self._client_rows.get(self.t, clients)
            if batch is None
            else self._level_arrays(1, clients, batch)[1]
        )
        gy = rmatvec(self._client_rows.get(self._Q_op, clients), y) - t
        return gy.expand(int(clients.shape[0]), -1).clone() if gy.ndim == 1 else gy

    def _hessian_rows(
        self, v: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad^2_y g_i v = v``: ``(C, dy)``."""
        self._require_bilevel("inner_loss")
        return v.expand(int(clients.shape[0]), -1).clone()

    def _cross_rows(
        self, v: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad^2_xy g_i v = -W_i^T v``: ``(C, dx)``."""
        self._require_bilevel("inner_loss")
        W, _ = self._map(clients, batch)
        return -rmatvec(W, v)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.zeros(self.dims[0], dtype=torch.float64, device=self.W[0].device),
            torch.zeros(self.dims[1], dtype=torch.float64, device=self.W[0].device),
        )

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor:
        """``y*(x) = rbar(x) = Wbar x + wbar``."""
        self._require_bilevel("exact_inner_solution")
        return self.mean_level_map(0, x)

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor:
        """``grad h(x) = Wbar^T (Qbar y*(x) - tbar)`` = :meth:`exact_gradient`."""
        self._require_bilevel("exact_hypergradient")
        return self.exact_gradient(x)

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor:
        """``h(x) = f(x, y*(x))`` = :meth:`objective`."""
        self._require_bilevel("outer_objective")
        return self.objective(x)

    def constants(self) -> ProblemConstants:
        """Bilevel constants for ``N == 1``: ``grad^2_y g = I`` so ``mu = L = 1`` (kappa
        1)."""
        self._require_bilevel("constants")
        m = self.means
        dev = self.w[0] - m["w"][0]
        return ProblemConstants(
            mu=1.0,
            L=1.0,
            mu_clients=1.0,
            L_clients=1.0,
            cross_norm=float(torch.linalg.matrix_norm(m["W"][0], ord=2)),
            outer_grad_y_lipschitz=float(torch.linalg.matrix_norm(m["Q"], ord=2)),
            outer_grad_x_lipschitz=0.0,
            hessian_heterogeneity=0.0,
            gradient_heterogeneity=float(torch.sqrt((dev**2).sum(-1).mean())),
        )
