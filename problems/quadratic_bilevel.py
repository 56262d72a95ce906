"""Federated quadratic bilevel problem with exact answers.

Client ``i`` of ``M`` has

.. math::

    g_i(x, y) &= \\tfrac12 y^T A_i y - y^T (B_i x + b_i), \\\\
    f_i(x, y) &= \\tfrac12 y^T C_i y + y^T D_i x + c_i^T y + \\tfrac12 x^T E_i x + e_i^T x,

with ``g = mean_i g_i`` and ``f = mean_i f_i``. Writing bars for client means,

.. math::

    y^*(x) &= \\bar A^{-1} (\\bar B x + \\bar b), \\\\
    \\nabla_y f(x, y) &= \\bar C y + \\bar D x + \\bar c, \\qquad
    \\nabla_x f(x, y) = \\bar D^T y + \\bar E x + \\bar e, \\\\
    \\nabla^2_y g &= \\bar A, \\qquad \\nabla^2_{xy} g = -\\bar B^T \\ (d_x \\times d_y), \\\\
    \\nabla h(x) &= \\nabla_x f(x, y^*)
                 - \\nabla^2_{xy} g\\, [\\nabla^2_y g]^{-1} \\nabla_y f(x, y^*)
                 = \\nabla_x f(x, y^*) + \\bar B^T \\bar A^{-1} \\nabla_y f(x, y^*),

the last line being FedNest's Lemma 2.1 (eq. 8) / AggITD's eq. (2) for ``h(x) = f(x, y^*(x))``.

Stochastic oracles come from a finite sample set per client: sample ``j`` of client ``i`` has
``A_ij = A_i + N^A_ij``, ``b_ij = b_i + n^b_ij``, ``c_ij = c_i + n^c_ij``, ``e_ij = e_i + n^e_ij``
with the noise centred over ``j``, so the mean over the sample set is the client's objective
exactly and the variance of a minibatch oracle is known in closed form
(:meth:`QuadraticBilevel.noise_variance`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any
from typing import cast

import numpy as np
import torch

from problems._base import SPEC_BUILDERS
from problems._base import Batch
from problems._base import Owned
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._base import default_device
from problems._rows import matvec
from problems._rows import rmatvec
from problems._rows import rows
from problems.checks import check_arrays
from problems.checks import check_positive_definite
from problems.checks import check_seed
from problems.checks import symmetric_to_round_off
from problems.family import SAMPLE_KNOBS
from problems.family import SPREAD_KNOBS
from problems.family import QuadraticFamily
from problems.family import sample_arguments
from problems.quadratic_bilevel_draws import draw_blocks
from problems.quadratic_bilevel_draws import draw_blocks_together

#: The arrays that define a problem, with their axes (:func:`problems.checks.check_arrays`).
_SHAPES = {
    "A": "M dy dy",
    "B": "M dy dx",
    "b": "M dy",
    "C": "M dy dy",
    "D": "M dy dx",
    "c": "M dy",
    "E": "M dx dx",
    "e": "M dx",
}


def _floats(spec: dict[str, Any]) -> int:
    """The float64 numbers a drawn problem holds: per client ``A, C`` (and the Hessian spread
    kept for samples, a temporary) ``dim_y^2`` each, ``B, D`` ``dim_y dim_x``, ``E``
    ``dim_x^2``, the vectors; per sample ``A`` and the vectors again."""
    m, dx, dy, n = spec["n_clients"], spec["dim_x"], spec["dim_y"], spec["n_samples"]
    return m * (4 * dy * dy + 2 * dx * dy + dx * dx + 2 * dy + dx) + m * n * (dy * dy + 2 * dy + dx)


def _outer_hessian(means: dict[str, torch.Tensor], jacobian: torch.Tensor) -> torch.Tensor:
    """``grad^2 h = E_bar + D_bar^T Y + Y^T D_bar + Y^T C_bar Y`` (symmetrised) for the client
    means and ``Y = dy*/dx`` (:meth:`QuadraticBilevel.outer_hessian`)."""
    m, Y = means, jacobian
    hess = m["E"] + m["D"].T @ Y + Y.T @ m["D"] + Y.T @ m["C"] @ Y
    return 0.5 * (hess + hess.T)


def _has_strongly_convex_outer(problem: QuadraticBilevel) -> bool:
    try:
        problem.strongly_convex_outer_hessian()
    except ProblemError:
        return False
    return True


class QuadraticBilevel(QuadraticFamily):
    """Federated quadratic bilevel problem; see the module docstring for the formulas.

    Args:
        A, B, b, C, D, c, E, e: per-client arrays stacked along a leading client axis, shapes
            ``A (M, dy, dy)``, ``B (M, dy, dx)``, ``b (M, dy)``, ``C (M, dy, dy)``,
            ``D (M, dy, dx)``, ``c (M, dy)``, ``E (M, dx, dx)``, ``e (M, dx)``.
        A_samples, b_samples, c_samples, e_samples: optional per-sample arrays with a sample axis
            after the client axis (``(M, n, ...)``) whose means over ``n`` equal the client
            arrays; without them the problem has no stochastic oracle.
        name: used in error messages and in :attr:`id`.
        spec: constructor recipe that rebuilds this problem (see :func:`problems.from_spec`).

    Raises:
        ProblemError: on mismatched shapes, NaN or inf entries, zero clients, or an inner Hessian
            (client or sample) that is not positive definite.

    The knobs of :meth:`random <problems.family.QuadraticFamily.random>` (``KNOBS``), which
    draws a problem whose mean inner Hessian ``A_bar`` has spectrum log-spaced in
    ``[mu, kappa mu]``:

    - ``hessian_heterogeneity``: relative spread ``h`` in ``[0, 1)`` of the second-order terms:
      ``A_i = A_bar^{1/2} (I + S_i) A_bar^{1/2}`` with ``sum_i S_i = 0`` and
      ``max_i ||S_i|| = h`` (so every ``A_i`` keeps eigenvalues in ``[(1-h) mu, (1+h) L]``);
      ``B_i, C_i, D_i`` spread by the same relative amount. FedMSA's tau; zero means clients
      differ only by linear terms.
    - ``gradient_heterogeneity``: root-mean-square spread ``sigma`` of the linear terms ``b_i``
      (and ``c_i``, ``e_i``) around their means: AggITD's sigma_2.
    - ``mu``: smallest eigenvalue of ``A_bar``.
    - ``n_samples``: samples per client for the stochastic oracle (0: deterministic only).
    - ``gradient_noise``: standard deviation of the per-sample noise on ``b, c, e``.
    - ``hessian_noise``: relative size ``eta`` of the per-sample Hessian noise
      (``A_ij = A_bar^{1/2}(I + S_i + N_ij)A_bar^{1/2}`` with ``max ||N_ij|| = eta``);
      ``h + eta < 1`` keeps every sample Hessian positive definite.
    - ``cross_scale``: multiplies every ``B_i`` (the cross derivative ``grad^2_xy g``) after the
      draw; a small one makes a paper's joint Lipschitz constant over ``(x, y)`` (FedNest's A1,
      AggITD's Assumption 2) close to ``lambda_max(A_i)``.
    - ``outer_curvature``: multiplies ``C_i, D_i, E_i`` after the draw; 0 makes every ``f_i``
      affine, hence Lipschitz on the whole space (FedNest A1's ``l_{f,0}`` read globally). Both
      scales default to 1, which leaves the draw, the spec and the id those of a problem
      without the knobs (the id names them only when not 1).

    Examples:
        >>> p = QuadraticBilevel.random(n_clients=3, dim_x=2, dim_y=2, condition_number=4.0,
        ...                            seed=0)
        >>> x = torch.zeros(2, dtype=torch.float64)
        >>> p.exact_hypergradient(x).shape
        torch.Size([2])
    """

    kind: ProblemKind = "bilevel"
    A: torch.Tensor
    B: torch.Tensor
    b: torch.Tensor
    C: torch.Tensor
    D: torch.Tensor
    c: torch.Tensor
    E: torch.Tensor
    e: torch.Tensor
    A_samples: torch.Tensor | None
    b_samples: torch.Tensor | None
    c_samples: torch.Tensor | None
    e_samples: torch.Tensor | None

    ID_TEMPLATES = {
        "QuadraticBilevel.random": (
            "quad.bilevel.m{n_clients}.dx{dim_x}.dy{dim_y}"
            ".k{condition_number:g}.hh{hessian_heterogeneity:g}"
            ".gh{gradient_heterogeneity:g}.n{n_samples}.seed{seed}{scales_suffix}"
        ),
    }
    INLINE_ID = "quad.bilevel.m{n_clients}.dx{dim_x}.dy{dim_y}.inline"
    SHAPES = _SHAPES
    ARRAY_NAMES = tuple(_SHAPES)
    SAMPLE_NAMES = ("A_samples", "b_samples", "c_samples", "e_samples")
    SYMMETRIC, OPERATORS = ("C", "E"), ("A", "C", "E")
    # grad^2_y g_i = A_i, grad^2_xy g_i = -B_i^T
    INNER_HESSIAN, CROSS, CROSS_SIGN = "A", "B", -1
    KNOBS = {**SPREAD_KNOBS, "mu": 1.0, **SAMPLE_KNOBS, "cross_scale": 1.0, "outer_curvature": 1.0}
    SCALE_KNOBS = ("cross_scale", "outer_curvature")
    SIZE = (_floats, "n_clients x (4 dim_y^2 + 2 dim_x dim_y + dim_x^2) x (1 + n_samples)")
    DRAW = draw_blocks

    @property
    def scales_suffix(self) -> str:
        """The id's part for the scale knobs of ``random`` that are set (empty when none is)."""
        return "".join(
            f".{tag}{self._spec[knob]:g}"
            for knob, tag in (("cross_scale", "cs"), ("outer_curvature", "oc"))
            if knob in self._spec
        )

    @classmethod
    def random_together(cls, spec: dict[str, Any], seeds: Sequence[int]) -> list[QuadraticBilevel]:
        """``from_spec({**spec, "seed": s})`` of every seed of ``seeds``, drawn at once: the same
        arrays, constants, recipe and behaviour, bit for bit (``tests/test_draws_together.py``).

        ``spec`` is a recipe of :meth:`random`. Every problem draws from its own generator as
        :meth:`random` does (:func:`~problems.quadratic_bilevel_draws.draw_blocks_together`); the
        arithmetic and the constructor's checks run on the batch
        (:func:`problems.checks.check_arrays` and :func:`~problems.checks.check_positive_definite`
        ``together``: each problem checked as alone, against its own scale); the sample arrays are
        checked problem by problem (:func:`~problems.checks.check_samples`: their means' check reads
        a torch reduction whose order a batch could change). A failing check raises its
        :class:`~problems._base.ProblemError` (naming the first failing check, not necessarily the
        first problem's: alone, the first problem that fails raises its first failing check). Raises
        :class:`~problems._base.ProblemError` too for a recipe that is not :meth:`random`'s and on a
        default device that is not the CPU."""
        if SPEC_BUILDERS.get(str(spec.get("family"))) != cls.random or cls.DRAW is not draw_blocks:
            raise ProblemError(f"{cls.__name__}: {spec.get('family')!r} is not drawn together")
        if default_device().type != "cpu":
            raise ProblemError(f"{cls.__name__}: draws together on the CPU only")
        recipe = cls.recipe(**{k: v for k, v in spec.items() if k != "family"})
        if not seeds:
            return []
        specs = [{**recipe, "seed": seed} for seed in seeds]
        label = str(recipe["family"])
        # the knobs checked once (the recipes differ only in their seeds), each seed as alone
        rngs = [cls.recipe_generator(specs[0])]
        for seed in seeds[1:]:
            check_seed(label, seed)
            rngs.append(np.random.default_rng(seed))
        arrays, samples = draw_blocks_together(rngs, recipe)
        stacked: dict[str, np.ndarray] = {  # the drawn stacks, numpy arrays (Owned or not)
            k: cast(np.ndarray, a.array if isinstance(a, Owned) else a)
            for k, a in zip(cls.ARRAY_NAMES, arrays, strict=True)
        }
        checked, sizes = check_arrays(
            label,
            {k: Owned(v) for k, v in stacked.items()},
            cls.SHAPES,
            cls.SYMMETRIC,
            together=True,
        )
        hessian = cls.INNER_HESSIAN
        eigenvalues = check_positive_definite(hessian, label, checked[hessian], together=True)
        as_stored = {name: symmetric_to_round_off(checked[name]) for name in cls.OPERATORS}
        # each problem's arrays its own copies, as alone: numpy's for the arrays drawn in numpy
        # and taken as they are (Owned), torch's for those the constructor copies
        own = {
            k: [torch.from_numpy(a.copy()) for a in stacked[k]]
            if isinstance(given, Owned)
            else [a.clone() for a in checked[k].unbind()]
            for k, given in zip(cls.ARRAY_NAMES, arrays, strict=True)
        }
        problems = []
        for r, spec_r in enumerate(specs):
            problem = cls.__new__(cls)
            problem.name = label
            problem._hold(
                {k: own[k][r] for k in cls.ARRAY_NAMES},
                sizes,
                eigenvalues[r].clone(),
                sample_arguments(cls, {k: Owned(v[r].copy()) for k, v in samples.items()}),
                spec_r,
                {name: flags[r] for name, flags in as_stored.items()},
            )
            problems.append(problem)
        return problems

    @classmethod
    def drawn_with_minimizer(
        cls, spec: dict[str, Any], rngs: Sequence[np.random.Generator], tries: int = 50
    ) -> list[QuadraticBilevel]:
        """For every generator of ``rngs``: the first of its draws ``from_spec({**spec,
        "seed": int(rng.integers(2**31))})`` whose outer objective ``h`` is strongly convex
        (:meth:`strongly_convex_outer_hessian`: ``h`` has a unique minimiser), each generator
        drawing its seeds in turn as one drawing alone would, every round's draws together
        (:meth:`random_together`, :meth:`strongly_convex_together`). Raises
        :class:`~problems._base.ProblemError` when a generator's ``tries`` draws have none."""
        found: list[QuadraticBilevel | None] = [None] * len(rngs)
        pending = list(range(len(rngs)))
        for _ in range(tries):
            if not pending:
                break
            drawn = cls.random_together(spec, [int(rngs[i].integers(2**31)) for i in pending])
            convex = cls.strongly_convex_together(drawn)
            for i, problem, ok in zip(pending, drawn, convex, strict=True):
                found[i] = problem if ok else None
            pending = [i for i, ok in zip(pending, convex, strict=True) if not ok]
        if pending:
            raise ProblemError(f"no draw of {dict(spec)} in {tries} has an outer minimiser")
        return [p for p in found if p is not None]

    # ------------------------------------------------------------------ oracle interface
    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(x_c, y_c)`` for each evaluated client c (full objective or minibatch mean)."""
        A, b = self._sampled("A", clients, batch), self._sampled("b", clients, batch)
        B = rows(self.B, clients)
        quad = 0.5 * torch.einsum("ci,cij,cj->c", y, A, y)
        return quad - torch.einsum("ci,cij,cj->c", y, B, x) - (y * b).sum(-1)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(x_c, y_c)`` for each evaluated client c (full objective or minibatch mean)."""
        c, e = self._sampled("c", clients, batch), self._sampled("e", clients, batch)
        C, D, E = rows(self.C, clients), rows(self.D, clients), rows(self.E, clients)
        return (
            0.5 * torch.einsum("ci,cij,cj->c", y, C, y)
            + torch.einsum("ci,cij,cj->c", y, D, x)
            + (c * y).sum(-1)
            + 0.5 * torch.einsum("ci,cij,cj->c", x, E, x)
            + (e * x).sum(-1)
        )

    # ------------------------------------------------------------------ closed-form oracles
    # The derivatives of the losses above as batched matrix-vector products (the protocol
    # problems.ClosedFormOracles that testbed.Oracles uses instead of autodiff). Each reads only
    # the arrays its formula has; under full participation they are the stacked arrays
    # themselves, under partial participation rows gathered once per client set
    # (problems.family.ClientArrayFamily). x, y, v are (C, d) rows or one (d,) vector for every
    # client.
    def oracle_grad_inner(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y g_i = A_i y - B_i x - b_i``: ``(C, dy)``."""
        return (
            rmatvec(self._curvature("A", clients, batch), y)
            - matvec(self._take(self.B, clients), x)
            - self._term("b", clients, batch)
        )

    def _outer_grad_x_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_x f_i = D_i^T y + E_i x + e_i``: ``(C, dx)``."""
        return (
            rmatvec(self._take(self.D, clients), y)
            + rmatvec(self._take(self._operators["E"], clients), x)
            + self._term("e", clients, batch)
        )

    def _outer_grad_y_rows(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``grad_y f_i = C_i y + D_i x + c_i``: ``(C, dy)``."""
        return (
            rmatvec(self._take(self._operators["C"], clients), y)
            + matvec(self._take(self.D, clients), x)
            + self._term("c", clients, batch)
        )

    # ------------------------------------------------------------------ exact answers
    def client_cross_jacobians(self) -> torch.Tensor:
        """Stack ``(M, dx, dy)`` of ``grad^2_xy g_i = -B_i^T``."""
        return -self.B.transpose(1, 2)

    def outer_grad_x(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.means
        return m["D"].T @ y + m["E"] @ x + m["e"]

    def outer_grad_y(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.means
        return m["C"] @ y + m["D"] @ x + m["c"]

    def client_outer_grad_y(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Stack ``(M, dy)`` of ``grad_y f_i(x, y)``."""
        return torch.einsum("mij,j->mi", self.C, y) + torch.einsum("mij,j->mi", self.D, x) + self.c

    def client_outer_grad_x(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Stack ``(M, dx)`` of ``grad_x f_i(x, y)``."""
        return torch.einsum("mji,j->mi", self.D, y) + torch.einsum("mij,j->mi", self.E, x) + self.e

    def inner_grad_y(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = self.means
        return m["A"] @ y - m["B"] @ x - m["b"]

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor:
        """``y*(x) = A_bar^{-1} (B_bar x + b_bar)`` by a linear solve."""
        m = self.means
        return torch.linalg.solve(m["A"], m["B"] @ x + m["b"])

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor:
        """``grad h(x) = grad_x f + B_bar^T A_bar^{-1} grad_y f`` at ``y*(x)`` (Lemma 2.1)."""
        y_star = self.exact_inner_solution(x)
        adjoint = torch.linalg.solve(self.means["A"], self.outer_grad_y(x, y_star))
        return self.outer_grad_x(x, y_star) + self.means["B"].T @ adjoint

    @staticmethod
    def exact_hypergradients(
        problems: Sequence[QuadraticBilevel], points: Sequence[torch.Tensor]
    ) -> list[torch.Tensor]:
        """:meth:`exact_hypergradient` of each ``problems[r]`` at ``points[r]``, the same floats,
        its two linear solves each one batched call over the problems (CPU LAPACK factors and
        solves each matrix of a batch as it does the matrix alone); every product stays the
        problem's own (a batched matrix-vector product sums in another order). Problems off
        the CPU are each computed alone."""
        if any(p.device.type != "cpu" for p in problems):
            return [p.exact_hypergradient(x) for p, x in zip(problems, points, strict=True)]
        means = [p.means for p in problems]
        hessians = torch.stack([m["A"] for m in means])
        y_star = torch.linalg.solve(
            hessians, torch.stack([m["B"] @ x + m["b"] for m, x in zip(means, points, strict=True)])
        )
        adjoint = torch.linalg.solve(
            hessians,
            torch.stack(
                [
                    p.outer_grad_y(x, y)
                    for p, x, y in zip(problems, points, y_star.unbind(), strict=True)
                ]
            ),
        )
        return [
            p.outer_grad_x(x, y) + m["B"].T @ a
            for p, m, x, y, a in zip(
                problems, means, points, y_star.unbind(), adjoint.unbind(), strict=True
            )
        ]

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor:
        """``h(x) = f(x, y*(x))``."""
        y = self.exact_inner_solution(x)
        m = self.means
        return (
            0.5 * y @ m["C"] @ y + y @ m["D"] @ x + m["c"] @ y + 0.5 * x @ m["E"] @ x + m["e"] @ x
        )

    def outer_hessian(self) -> torch.Tensor:
        """``grad^2 h = E_bar + D_bar^T Y + Y^T D_bar + Y^T C_bar Y`` with ``Y = dy*/dx``.

        Constant in x, since ``y*(x)`` is affine and f quadratic.
        """
        return _outer_hessian(self.means, self.hypergradient_jacobian())

    @staticmethod
    def strongly_convex_together(problems: Sequence[QuadraticBilevel]) -> list[bool]:
        """Whether :meth:`strongly_convex_outer_hessian` of each problem returns (``False``:
        it raises), the same floats: its linear solve and its eigenvalues one batched call
        over the problems (CPU LAPACK runs each matrix of a batch as alone); every product
        stays the problem's own (a batched product sums in another order). Problems off the
        CPU are each checked alone."""
        if not problems or any(p.device.type != "cpu" for p in problems):
            return [_has_strongly_convex_outer(p) for p in problems]
        means = [p.means for p in problems]
        jacobians = torch.linalg.solve(
            torch.stack([m["A"] for m in means]), torch.stack([m["B"] for m in means])
        )
        hessians = torch.stack(
            [_outer_hessian(m, Y) for m, Y in zip(means, jacobians.unbind(), strict=True)]
        )
        return (torch.linalg.eigvalsh(hessians).amin(dim=-1) > 0.0).tolist()

    def strongly_convex_outer_hessian(self) -> torch.Tensor:
        """:meth:`outer_hessian`; raises :class:`~problems._base.ProblemError` when it is not
        positive definite (h not strongly convex: no unique minimiser)."""
        hess = self.outer_hessian()
        lowest = float(torch.linalg.eigvalsh(hess).min())
        if lowest <= 0.0:
            raise ProblemError(
                f"{self.name}: h(x) = f(x, y*(x)) is not strongly convex (smallest Hessian "
                f"eigenvalue {lowest:.3g}), so it has no unique minimiser"
            )
        return hess

    def outer_minimizer(self) -> torch.Tensor:
        """``x* = argmin h`` by a linear solve; raises when h is not strongly convex."""
        hess = self.strongly_convex_outer_hessian()
        return torch.linalg.solve(
            hess,
            -self.exact_hypergradient(
                torch.zeros(self.dim_x, dtype=torch.float64, device=self.device)
            ),
        )

    def hypergradient_jacobian(self) -> torch.Tensor:
        """``dy*/dx = A_bar^{-1} B_bar`` of shape ``(dy, dx)``."""
        return torch.linalg.solve(self.means["A"], self.means["B"])

    # ------------------------------------------------------------------ constants & noise
    def constants(self) -> ProblemConstants:
        """Constants of the inner problem (``A_i``, ``b_i``), ``||B_bar||``, ``||C_bar||`` and
        ``||D_bar||``: computed once per problem (a cache like :attr:`means`, dropped by
        :meth:`to`), since step rules read them at every run's start."""
        return self._constants

    @functools.cached_property
    def _constants(self) -> ProblemConstants:
        m = self.means
        return self._inner_constants(
            "A",
            "b",
            cross_norm=float(torch.linalg.matrix_norm(m["B"], ord=2)),
            outer_grad_y_lipschitz=float(torch.linalg.matrix_norm(m["C"], ord=2)),
            outer_grad_x_lipschitz=float(torch.linalg.matrix_norm(m["D"], ord=2)),
        )

    def noise_variance(
        self, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1
    ) -> dict[str, torch.Tensor]:
        """Exact per-client variance ``E||o_batch - o_i||^2`` of each minibatch oracle at (x, y).

        With ``batch_size`` samples drawn with replacement the variance is the population
        variance over the client's sample set divided by ``batch_size``.

        Returns:
            dict of ``(M,)`` tensors: ``grad_inner_y`` (``grad_y g_i``), ``grad_outer_y``,
            ``grad_outer_x`` and ``hessian_inner`` (squared Frobenius norm of the Hessian noise).
        """
        dA, db, c_noise, e_noise = self._sample_deviations("A", "b", "c", "e")
        g_noise = torch.einsum("mnij,j->mni", dA, y) - db
        return {
            "grad_inner_y": (g_noise**2).sum(-1).mean(1) / batch_size,
            "grad_outer_y": (c_noise**2).sum(-1).mean(1) / batch_size,
            "grad_outer_x": (e_noise**2).sum(-1).mean(1) / batch_size,
            "hessian_inner": (dA**2).sum((-1, -2)).mean(1) / batch_size,
        }
