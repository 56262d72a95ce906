"""Federated quadratic minimax problem (strongly convex in x, strongly concave in y).

FedNest's federated minimax problem (eq. (2) of Tarzanagh et al. 2022; Sec. 2.4 for FedNest on it)
is the bilevel problem (1) with ``g_i = -f_i``. Client ``i`` of ``M`` has

.. math::

    f_i(x, y) = -\\bigl[\\tfrac12 y^T P_i y - b_i^T y + y^T A_i x\\bigr]
                + \\tfrac12 x^T \\Lambda_i x + e_i^T x, \\qquad g_i = -f_i,

with ``P_i`` symmetric positive definite (``f_i`` is ``lambda_min(P_i)``-strongly
concave in y; FedNest's A2 on ``g_i``) and ``f = mean_i f_i``. This is FedNest's
experiment (Sec. 4.3) with general ``P_i, A_i, Lambda_i`` and a linear x-term. Writing
bars for client means,

.. math::

    \\nabla_y f &= -\\bar P y + \\bar b - \\bar A x, \\qquad
    y^*(x) = \\arg\\max_y f(x, y) = \\bar P^{-1} (\\bar b - \\bar A x), \\\\
    \\varphi(x) &= \\max_y f(x, y)
        = \\tfrac12 (\\bar b - \\bar A x)^T \\bar P^{-1} (\\bar b - \\bar A x)
          + \\tfrac12 x^T \\bar\\Lambda x + \\bar e^T x, \\\\
    \\nabla \\varphi(x) &= \\nabla_x f(x, y^*(x))
        = -\\bar A^T y^*(x) + \\bar\\Lambda x + \\bar e
        \\quad \\text{(Danskin; the indirect term of Lemma 2.1 vanishes because }
        \\nabla_y f(x, y^*) = 0), \\\\
    \\nabla^2 \\varphi &= \\bar A^T \\bar P^{-1} \\bar A + \\bar\\Lambda \\succ 0
        \\ \\text{(checked)},
    \\qquad x^* = (\\bar A^T \\bar P^{-1} \\bar A + \\bar\\Lambda)^{-1}
                  (\\bar A^T \\bar P^{-1} \\bar b - \\bar e), \\quad y^* = y^*(x^*).

Only the client *mean* satisfies ``grad_y f(x, y*) = 0``; per client
``grad_y f_i(x, y*) != 0`` under heterogeneity (the ``b_i`` and ``P_i`` differ). As a bilevel
problem the inner Hessian is ``grad^2_y g = P_bar`` and the cross derivative
``grad^2_xy g = A_bar^T`` (``dx x dy``).

Stochastic oracles come from a finite sample set per client: sample ``j`` of client
``i`` has ``P_ij = P_i + N^P_ij``, ``b_ij = b_i + n^b_ij``, ``e_ij = e_i + n^e_ij`` with
the noise centred over ``j``, so the mean over the sample set is the client's objective
exactly and the minibatch variance is known in closed form
(:meth:`QuadraticMinimax.noise_variance`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from problems import _spectra
from problems._base import Batch
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._rows import matvec
from problems._rows import rmatvec
from problems._rows import rows
from problems._rows import samples_around
from problems.family import SAMPLE_KNOBS
from problems.family import SPREAD_KNOBS
from problems.family import QuadraticFamily
from problems.family import inner_hessians
from problems.minimax_synthetic import fednest_synthetic_arrays

#: The arrays that define a problem, with their axes (:func:`problems.checks.check_arrays`).
_SHAPES = {"P": "M dy dy", "b": "M dy", "A": "M dy dx", "Lam": "M dx dx", "e": "M dx"}


def _floats(spec: dict[str, Any]) -> int:
    """The float64 numbers a drawn problem holds: per client ``P`` (and its kept spread)
    ``dim_y^2``, ``A`` ``dim_y dim_x``, ``Lam`` ``dim_x^2``, the vectors; per sample ``P``
    and the vectors again."""
    m, dx, dy, n = spec["n_clients"], spec["dim_x"], spec["dim_y"], spec["n_samples"]
    return m * (2 * dy * dy + dx * dy + dx * dx + dy + dx) + m * n * (dy * dy + dy + dx)


def _draw_blocks(rng: np.random.Generator, spec: dict[str, Any]) -> tuple[tuple[Any, ...], dict]:
    """The draws of :meth:`QuadraticMinimax.random` for its ``spec``, in its stream's order:
    the constructor's arrays ``(P, b, A, Lam, e)`` and its sample sets."""
    hessians = inner_hessians(rng, spec)
    P = hessians.stack
    M, dx, dy, n_samples = spec["n_clients"], spec["dim_x"], spec["dim_y"], spec["n_samples"]
    hh, gh, ridge = spec["hessian_heterogeneity"], spec["gradient_heterogeneity"], spec["ridge"]
    hessian_noise, gradient_noise = spec["hessian_noise"], spec["gradient_noise"]
    A_bar = rng.standard_normal((dy, dx)) / math.sqrt(dy)
    A = _spectra.spread_around(rng, A_bar, M, _spectra.relative_size(A_bar, hh))
    Lam = ridge * (np.eye(dx) + _spectra.centered_symmetric_spread(rng, M, dx, hh))
    b = _spectra.around_gaussian(rng, M, dy, gh)
    e = _spectra.around_gaussian(rng, M, dx, gh)
    samples: dict[str, Any] = {}
    if n_samples > 0:
        samples["P_samples"] = hessians.samples(rng, n_samples, hessian_noise)
        samples["b_samples"] = samples_around(rng, b, n_samples, gradient_noise)
        samples["e_samples"] = samples_around(rng, e, n_samples, gradient_noise)
    return (P, b, A, Lam, e), samples


class QuadraticMinimax(QuadraticFamily):
    """Federated SC-SC quadratic minimax problem; see the module docstring for the
    formulas.

    Args:
        P, b, A, Lam, e: per-client arrays stacked along a leading client axis, shapes
            ``P (M, dy, dy)`` (symmetric positive definite), ``b (M, dy)``,
            ``A (M, dy, dx)``, ``Lam (M, dx, dx)`` (symmetric), ``e (M, dx)``.
        P_samples, b_samples, e_samples: optional per-sample arrays ``(M, n, ...)``
            whose means over ``n`` equal the client arrays; without them there is no
            stochastic oracle.
        name: used in error messages and in :attr:`id`.
        spec: constructor recipe that rebuilds this problem.

    Raises:
        ProblemError: on mismatched shapes, NaN or inf entries, zero clients, a ``P_i``
            (client or sample) that is not positive definite, or a max-function ``phi``
            that is not strongly convex (``A_bar^T P_bar^{-1} A_bar + Lam_bar`` not
            positive definite).

    The knobs of :meth:`random <problems.family.QuadraticFamily.random>` (``KNOBS``), which
    draws a problem whose mean inner Hessian ``P_bar`` has spectrum log-spaced in
    ``[mu, kappa mu]`` (so ``mu_f = mu`` and the inner ``kappa = condition_number``):

    - ``hessian_heterogeneity``: relative spread ``h`` in ``[0, 1)``:
      ``P_i = P_bar^{1/2} (I + S_i) P_bar^{1/2}``, ``sum_i S_i = 0``, ``max_i ||S_i|| = h``;
      ``Lam_i = ridge (I + S'_i)`` and ``A_i`` spread by the same relative amount (FedMSA's tau).
    - ``gradient_heterogeneity``: root-mean-square spread of ``b_i`` and ``e_i`` around their
      means (AggITD's sigma_2).
    - ``mu``: smallest eigenvalue of ``P_bar``.
    - ``ridge``: ``Lam_bar = ridge * I`` (> 0 makes f strongly convex in x).
    - ``n_samples``: samples per client for the stochastic oracle (0: deterministic only).
    - ``gradient_noise``: standard deviation of the per-sample noise on ``b, e``.
    - ``hessian_noise``: relative size ``eta`` of the per-sample noise on ``P``
      (``h + eta < 1`` keeps every sample ``P_ij`` positive definite).
    """

    kind: ProblemKind = "minimax"
    P: torch.Tensor
    b: torch.Tensor
    A: torch.Tensor
    Lam: torch.Tensor
    e: torch.Tensor
    P_samples: torch.Tensor | None
    b_samples: torch.Tensor | None
    e_samples: torch.Tensor | None

    ID_TEMPLATES = {
        "QuadraticMinimax.random": (
            "quad.minimax.m{n_clients}.dx{dim_x}.dy{dim_y}"
            ".k{condition_number:g}.hh{hessian_heterogeneity:g}"
            ".gh{gradient_heterogeneity:g}.n{n_samples}.seed{seed}"
        ),
        "QuadraticMinimax.fednest_synthetic": (
            "fednest.minimax.m{n_clients}.d{dim}.s{s:g}.lam{lam:g}.seed{seed}"
        ),
    }
    INLINE_ID = "quad.minimax.m{n_clients}.dx{dim_x}.dy{dim_y}.inline"
    SHAPES = _SHAPES
    ARRAY_NAMES = tuple(_SHAPES)
    SAMPLE_NAMES = ("P_samples", "b_samples", "e_samples")
    SYMMETRIC, OPERATORS = ("Lam",), ("P", "Lam")
    # grad^2_y g_i = P_i, grad^2_xy g_i = A_i^T
    INNER_HESSIAN, CROSS, CROSS_SIGN = "P", "A", 1
    KNOBS = {**SPREAD_KNOBS, "mu": 1.0, "ridge": 1.0, **SAMPLE_KNOBS}
    POSITIVE_KNOBS = ("mu", "ridge")
    SIZE = (_floats, "n_clients x (2 dim_y^2 + dim_x dim_y + dim_x^2) x (1 + n_samples)")
    DRAW = _draw_blocks

    def _check_well_posed(self) -> None:
        """``phi(x) = max_y f(x, y)`` must be strongly convex: ``A_bar^T P_bar^-1 A_bar +
        Lam_bar`` positive definite."""
        phi_hessian = self.outer_hessian()
        lowest = float(torch.linalg.eigvalsh(0.5 * (phi_hessian + phi_hessian.T)).min())
        if lowest <= 0.0:
            raise ProblemError(
                f"{self.name}: phi(x) = max_y f(x, y) is not strongly convex: "
                f"A_bar^T P_bar^-1 A_bar + Lam_bar has smallest eigenvalue {lowest:.3g}"
            )

    @classmethod
    def fednest_synthetic(cls, **knobs: float) -> QuadraticMinimax:
        """FedNest's synthetic minimax experiment (Sec. 4.3, Fig. 4) with the paper's
        constants.

        ``f_i(x, y) = -[(1/2)||y||^2 - b_i^T y + y^T A_i x] + (lam/2)||x||^2`` with
        ``A_i = t_i I``, ``t_i ~ U(0, 0.1)``, ``b_i = b_i' - (1/m) sum_j b_j'``,
        ``b_i' ~ N(0, s^2 I_d)`` and ``lam = 10``: ``P_i = I``, ``Lam_i = lam I``,
        ``e_i = 0`` here. Then ``y*(x) = b_bar - t_bar x``,
        ``phi(x) = (1/2)||A_bar x - b_bar||^2 + (lam/2)||x||^2`` (the paper's text in Sec. 4.3 omits
        the ridge) and, since centring makes ``b_bar = 0``,
        ``x* = y* = 0`` up to float64 round-off. ``mu_f = 1``.

        The paper does not give m; the default 1000 is the authors' notebook value. The
        notebook (``minmax_synthetic.ipynb`` of ucr-optml/FedNest) differs
        from the paper: ``lambda = 0.1``, ``b_i ~ N(0, s_i)`` with std
        ``s_i ~ U(0, 2 s)`` centred over each client's own coordinates, 50 of 1000
        clients per round, extra 1/n and 0.5 factors, and an idealised FedNest cell that
        drops ``b``. This instance follows the paper.

        Draw order from ``np.random.default_rng(seed)``: all ``t_i``, then all ``b_i'``. The
        knobs ``n_clients`` (m), ``dim`` (d), ``s``, ``lam`` and ``seed``, by name (defaults:
        :data:`problems.minimax_synthetic.FEDNEST_SYNTHETIC`; an unknown one raises
        ``TypeError``).
        """
        arrays, spec = fednest_synthetic_arrays(knobs)
        return cls(*arrays, name=str(spec["family"]), spec=spec)

    # -------------------------------------------------------- oracle interface
    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(x_c, y_c)`` for each evaluated client c (full objective or minibatch
        mean)."""
        P, b, e = (self._sampled(name, clients, batch) for name in ("P", "b", "e"))
        A, Lam = rows(self.A, clients), rows(self.Lam, clients)
        return (
            -0.5 * torch.einsum("ci,cij,cj->c", y, P, y)
            + (b * y).sum(-1)
            - torch.einsum("ci,cij,cj->c", y, A, x)
            + 0.5 * torch.einsum("ci,cij,cj->c", x, Lam, x)
            + (e * x).sum(-1)
        )

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i = -f_i`` (FedNest eq. (2)): the inner problem maximises f."""
        return -self.outer_loss(x, y, clients, batch)

    # ------------------------------------------------------ closed-form oracles
    # The losses' derivatives as batched matrix-vector products (problems.ClosedFormOracles),
    # with g_i = -f_i:  grad_x f_i = -A_i^T y + Lam_i x + e_i,  grad_y f_i = -P_i y + b_i - A_i x,
    # grad_y g_i = -grad_y f_i,  grad^2_y g_i = P_i,  grad^2_xy g_i = A_i^T.
    def oracle_grad_inner(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y g_i = P_i y - b_i + A_i x``: ``(C, dy)``."""
        return (
            rmatvec(self._curvature("P", clients, batch), y)
            - self._term("b", clients, batch)
            + matvec(self._take(self.A, clients), x)
        )

    def _outer_grad_x_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_x f_i = -A_i^T y + Lam_i x + e_i``: ``(C, dx)``."""
        return (
            rmatvec(self._take(self._operators["Lam"], clients), x)
            - rmatvec(self._take(self.A, clients), y)
            + self._term("e", clients, batch)
        )

    def _outer_grad_y_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y f_i = -P_i y + b_i - A_i x``: ``(C, dy)``."""
        return (
            self._term("b", clients, batch)
            - rmatvec(self._curvature("P", clients, batch), y)
            - matvec(self._take(self.A, clients), x)
        )

    # ----------------------------------------------------------- exact answers
    def outer_grad_x(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.means
        return -m["A"].T @ y + m["Lam"] @ x + m["e"]

    def outer_grad_y(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.means
        return -m["P"] @ y + m["b"] - m["A"] @ x

    def client_outer_grad_y(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Stack ``(M, dy)`` of ``grad_y f_i(x, y)`` (nonzero per client at y* under
        heterogeneity: only their mean vanishes there)."""
        return -torch.einsum("mij,j->mi", self.P, y) + self.b - torch.einsum("mij,j->mi", self.A, x)

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor:
        """``y*(x) = argmax_y f(x, y) = P_bar^{-1} (b_bar - A_bar x)`` by a linear
        solve."""
        m = self.means
        return torch.linalg.solve(m["P"], m["b"] - m["A"] @ x)

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor:
        """``grad phi(x) = grad_x f(x, y*(x))`` (Danskin; FedNest Sec. 2.4)."""
        return self.outer_grad_x(x, self.exact_inner_solution(x))

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor:
        """``phi(x) = max_y f(x, y) = f(x, y*(x))``."""
        m = self.means
        r = m["b"] - m["A"] @ x
        return 0.5 * r @ torch.linalg.solve(m["P"], r) + 0.5 * x @ m["Lam"] @ x + m["e"] @ x

    def outer_hessian(self) -> torch.Tensor:
        """``grad^2 phi = A_bar^T P_bar^{-1} A_bar + Lam_bar`` of shape ``(dx, dx)``."""
        m = self.means
        return m["A"].T @ torch.linalg.solve(m["P"], m["A"]) + m["Lam"]

    def saddle_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x*, y*)``: ``x* = (A^T P^{-1} A + Lam)^{-1} (A^T P^{-1} b - e)`` (bars),
        ``y*(x*)``."""
        m = self.means
        rhs = m["A"].T @ torch.linalg.solve(m["P"], m["b"]) - m["e"]
        x_star = torch.linalg.solve(self.outer_hessian(), rhs)
        return x_star, self.exact_inner_solution(x_star)

    # ------------------------------------------------------- constants & noise
    def constants(self) -> ProblemConstants:
        """Constants of the inner problem ``g = -f`` in y (``mu = mu_f``, ``L`` its
        smoothness)."""
        m = self.means
        cross = float(torch.linalg.matrix_norm(m["A"], ord=2))
        return self._inner_constants(
            "P",
            "b",
            cross_norm=cross,
            outer_grad_x_lipschitz=cross,
            outer_grad_y_lipschitz=float(torch.linalg.eigvalsh(m["P"]).abs().max()),
        )

    def noise_variance(
        self, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1
    ) -> dict[str, torch.Tensor]:
        """Exact per-client variance ``E||o_batch - o_i||^2`` of each minibatch oracle
        at (x, y).

        Draws are with replacement, so the variance is the population variance over the
        client's sample set divided by ``batch_size``. Returns ``(M,)`` tensors
        ``grad_inner_y`` (= ``grad_outer_y``, since ``g_i = -f_i``), ``grad_outer_y``,
        ``grad_outer_x`` and ``hessian_inner`` (squared Frobenius norm of the P noise).
        """
        dP, db, e_noise = self._sample_deviations("P", "b", "e")
        y_noise = -torch.einsum("mnij,j->mni", dP, y) + db
        grad_y = (y_noise**2).sum(-1).mean(1) / batch_size
        return {
            "grad_inner_y": grad_y,
            "grad_outer_y": grad_y.clone(),
            "grad_outer_x": (e_noise**2).sum(-1).mean(1) / batch_size,
            "hessian_inner": (dP**2).sum((-1, -2)).mean(1) / batch_size,
        }
