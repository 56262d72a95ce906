"""Federated quadratic bilevel family with per-client hyperparameters (HGP Sec. 3, with quadratic
g_i and f_i).

HGP (Terashita & Hara) gives every client its own hyperparameter ``lambda_i`` (paper letters;
the testbed's outer variable is ``x = [lambda_1; ...; lambda_n]``, its inner variable ``y`` is the
paper's shared model ``x``). Client ``i`` of ``n`` has

.. math::

    g_i(y, \\lambda_i) &= \\tfrac12 y^T A_i y - y^T (b_i + C_i \\lambda_i), \\\\
    f_i(y, \\lambda_i) &= \\tfrac12 (y + P_i\\lambda_i - t_i)^T Q_i (y + P_i\\lambda_i - t_i)
                         + \\tfrac{\\rho}2 \\|\\lambda_i\\|^2 .

Client i's losses read only its own block ``lambda_i`` of x, so the problem is a standard bilevel
problem (``g = mean_i g_i``, ``f = mean_i f_i``, ``h(x) = f(x, y*(x))``) to which every classical
estimator applies, while HGP (eq. 10, Alg. 2) sees the per-client blocks. In the paper's notation
(Sec. 3.3), at ``y* = (sum_k A_k)^{-1} sum_k (b_k + C_k lambda_k)``:

- ``H_k = A_k``, ``J_k = grad^2_{y lambda_k} g_k = -C_k^T`` (``d_lambda x d_y``),
- ``c_k = Q_k r_k``, ``e_k = P_k^T Q_k r_k + rho lambda_k``, ``r_k = y* + P_k lambda_k - t_k``,
- GlobalGrad ``<d_lambda F>_i = e_i - J_i (sum_k H_k)^{-1} sum_k c_k`` for ``F = sum_k f_k``,

and the testbed's hypergradient of ``h = F / n`` is ``GlobalGrad / n``. ``P_i`` makes
``grad_lambda f_i`` depend on ``y`` (the term that Theorem 2's statement drops, App. D.3).

Stochastic oracles: sample ``j`` of client i has ``A_ij = A_i + N^A_ij``, ``C_ij = C_i + N^C_ij``
and ``b_ij = b_i + n^b_ij`` with the noise centred over j, so minibatch Hessians and cross
Jacobians are unbiased (Assumption 3) with almost surely bounded error (kappa_x, kappa_lambda).
The outer loss is deterministic (HGP samples only the Jacobians, Alg. 2).
"""

from __future__ import annotations

import functools
import math
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import _spectra
from problems._base import Batch
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._rows import loop_form
from problems._rows import loop_matvec
from problems._rows import loop_rmatvec
from problems._rows import matvec
from problems._rows import rmatvec
from problems._rows import rows
from problems._rows import samples_around
from problems.checks import check_arrays
from problems.checks import check_nonnegative
from problems.checks import check_positive_definite
from problems.checks import check_samples
from problems.family import HESSIAN_SPREADS
from problems.family import ClientArrayFamily
from problems.family import knob_spec
from problems.family import recipe_rng
from problems.family import sample_arguments

#: The arrays that define a problem, with their axes (:func:`problems.checks.check_arrays`).
_SHAPES = {"A": "n dy dy", "b": "n dy", "C": "n dy dl", "Q": "n dy dy", "t": "n dy", "P": "n dy dl"}
_ARRAYS = tuple(_SHAPES)
_SAMPLES = ("A_samples", "b_samples", "C_samples")
#: The knobs of :meth:`PerClientQuadratic.random` that must be finite and >= 0.
_NONNEGATIVE_KNOBS = (
    "hessian_heterogeneity",
    "hessian_noise",
    "cross_noise",
    "gradient_noise",
    "rho",
    "cross_scale",
    "outer_coupling",
    "target_heterogeneity",
)


#: Most rows of a table of minibatch means (:meth:`PerClientQuadratic._minibatch_mean`). Why
#: 2^18: with 16 samples a client, every minibatch of up to 4 samples of up to 4 clients (the HGP
#: claims' cases), at most 19 MB an array for 3 x 3 Hessians.
MINIBATCH_TABLE_ROWS = 2**18


def take_blocks(x: torch.Tensor, clients: torch.Tensor, n: int, block: int) -> torch.Tensor:
    """Row c: block ``clients[c]`` (of size ``block``) of ``x[c]`` (x is ``(C, n * block)``)."""
    count = x.shape[0]
    index = torch.arange(count, device=clients.device) * n + clients
    return x.reshape(count * n, block).index_select(0, index)


def _with_norm(scale: float, matrices: np.ndarray) -> np.ndarray:
    """The stack ``matrices`` with each matrix rescaled to spectral norm ``scale``."""
    return scale * matrices / np.linalg.norm(matrices, 2, axis=(1, 2))[:, None, None]


def _floats(spec: dict[str, Any]) -> int:
    """The float64 numbers a drawn problem holds: per client ``A, Q`` (and the kept spread)
    ``dim_y^2``, ``C, P`` ``dim_y dim_hyper``, the vectors; per sample ``A``, ``C`` and
    ``b`` again."""
    m, dl, dy, n = spec["n_clients"], spec["dim_hyper"], spec["dim_y"], spec["n_samples"]
    return m * (3 * dy * dy + 2 * dy * dl + 2 * dy) + m * n * (dy * dy + dy * dl + dy)


def _draw(rng: np.random.Generator, spec: dict[str, Any]) -> tuple[tuple[Any, ...], dict]:
    """The draws of :meth:`PerClientQuadratic.random` for its checked ``spec``, in its stream's
    order: the constructor's arguments ``(A, b, C, Q, t, P, rho)`` and its sample sets."""
    n, dl, dy, n_samples = spec["n_clients"], spec["dim_hyper"], spec["dim_y"], spec["n_samples"]
    hessians = _spectra.spectral_stack(
        rng,
        n,
        dy,
        spec["mu"],
        spec["condition_number"],
        spec["hessian_heterogeneity"],
        keep_spread=n_samples > 0,
    )
    A = hessians.stack
    b = rng.standard_normal((n, dy))
    C = _with_norm(spec["cross_scale"], rng.standard_normal((n, dy, dl)))
    Q_half = rng.standard_normal((n, dy, dy)) / math.sqrt(dy)
    Q = _with_norm(1.0, Q_half @ np.swapaxes(Q_half, 1, 2) + 0.5 * np.eye(dy))
    t = _spectra.around_gaussian(rng, n, dy, spec["target_heterogeneity"])
    P = _with_norm(spec["outer_coupling"], rng.standard_normal((n, dy, dl)))
    samples: dict[str, Any] = {}
    if n_samples > 0:
        samples["A_samples"] = hessians.samples(rng, n_samples, spec["hessian_noise"])
        samples["C_samples"] = C[:, None] + _spectra.sample_spreads(
            rng, n, n_samples, (dy, dl), spec["cross_noise"]
        )
        samples["b_samples"] = samples_around(rng, b, n_samples, spec["gradient_noise"])
    return (A, b, C, Q, t, P, spec["rho"]), samples


class PerClientQuadratic(ClientArrayFamily):
    """The per-client-hyperparameter quadratic family; formulas in the module docstring.

    Args:
        A: ``(n, dy, dy)`` SPD inner Hessians; b: ``(n, dy)``; C: ``(n, dy, dl)``;
        Q: ``(n, dy, dy)`` symmetric PSD; t: ``(n, dy)``; P: ``(n, dy, dl)``; rho >= 0.
        A_samples, b_samples, C_samples: optional ``(n, N, ...)`` per-sample arrays whose means
            over N equal ``A``, ``b``, ``C``.

    Raises:
        ProblemError: on mismatched shapes, NaN/inf, or a client or sample Hessian that is not
            positive definite.
    """

    ID_TEMPLATES = {
        "PerClientQuadratic.random": (
            "perclient.quad.n{n_clients}.dl{dim_hyper}.dy{dim_y}"
            ".k{condition_number:g}.hh{hessian_heterogeneity:g}"
            ".cs{cross_scale:g}.oc{outer_coupling:g}.N{n_samples}"
            ".seed{seed}"
        ),
    }
    INLINE_ID = "perclient.quad.n{n_clients}.dl{dim_hyper}.dy{dim_y}.inline"
    ARRAY_NAMES = _ARRAYS
    SAMPLE_NAMES = _SAMPLES
    #: :meth:`random`'s keyword knobs in the recipe's order, with their defaults.
    KNOBS: ClassVar[dict[str, float | None]] = {
        "hessian_heterogeneity": 0.3,
        "cross_scale": 1.0,
        "outer_coupling": 0.0,
        "target_heterogeneity": 1.0,
        "rho": 0.1,
        "mu": 1.0,
        "n_samples": 0,
        "hessian_noise": 0.0,
        "cross_noise": 0.0,
        "gradient_noise": 0.0,
    }

    kind: ProblemKind = "bilevel"

    def __init__(
        self,
        A: Any,
        b: Any,
        C: Any,
        Q: Any,
        t: Any,
        P: Any,
        rho: float,
        *,
        name: str = "PerClientQuadratic",
        spec: dict[str, Any] | None = None,
        **samples: Any,
    ) -> None:
        self.name = name
        arrays, sizes = check_arrays(
            name, dict(zip(_ARRAYS, (A, b, C, Q, t, P), strict=True)), _SHAPES, symmetric=("Q",)
        )
        n, dy, dl = sizes["n"], sizes["dy"], sizes["dl"]
        check_nonnegative(name, "rho", float(rho))
        self._client_eigenvalues = check_positive_definite("A", name, arrays["A"])
        self.A, self.b, self.C = arrays["A"], arrays["b"], arrays["C"]
        self.Q, self.t, self.P = arrays["Q"], arrays["t"], arrays["P"]
        self.rho = float(rho)
        self.n_clients, self.dim_hyper, self.dim_y = n, dl, dy
        self.dim_x = n * dl
        self.n_samples, checked = check_samples(
            name, sample_arguments(type(self), samples), arrays, positive_definite="A"
        )
        self.A_samples, self.b_samples, self.C_samples = (checked.get(k) for k in _SAMPLES)
        self._spec = spec or {"family": "PerClientQuadratic", "arrays": "inline"}

    # ------------------------------------------------------------------ construction
    @classmethod
    def random(
        cls,
        n_clients: int,
        dim_hyper: int,
        dim_y: int,
        condition_number: float = 4.0,
        seed: int = 0,
        **knobs: float,
    ) -> PerClientQuadratic:
        """Draw an instance; ``np.random.default_rng(seed)`` is the only randomness.

        Args:
            n_clients, dim_hyper, dim_y: n, d_lambda and the shared model's d (paper's d_x).
            condition_number: kappa of the mean Hessian ``A_bar`` (spectrum log-spaced in
                ``[mu, kappa mu]``).
            seed: seeds the only generator used.
            knobs: the knobs of :data:`KNOBS` by name (defaults there; an unknown one raises
                ``TypeError``): ``hessian_heterogeneity`` ``h`` in ``[0, 1)``:
                ``A_i = A_bar^{1/2}(I + S_i)A_bar^{1/2}``, ``sum_i S_i = 0``, ``max ||S_i|| = h``;
                ``cross_scale``: spectral norm scale of ``C_i`` (the paper's beta);
                ``outer_coupling``: spectral norm scale of ``P_i`` (0: f_i's lambda-part is a
                ridge); ``target_heterogeneity``: RMS spread of the targets ``t_i``
                (heterogeneous c_i); ``rho``: ridge on lambda in f; ``mu``: smallest eigenvalue
                of ``A_bar``; ``n_samples``, ``hessian_noise``, ``cross_noise``,
                ``gradient_noise``: finite sample sets per client (``h + hessian_noise < 1``
                keeps every sample Hessian positive definite).
        """
        label = "PerClientQuadratic.random"
        sizes = {"n_clients": n_clients, "dim_hyper": dim_hyper, "dim_y": dim_y}
        given = {**sizes, "condition_number": condition_number, "seed": seed}
        spec = knob_spec(label, given, knobs, cls.KNOBS)
        rng = recipe_rng(
            spec,
            nonnegative=_NONNEGATIVE_KNOBS,
            below_one=HESSIAN_SPREADS,
            positive=("mu",),
            dims=("dim_hyper", "dim_y"),
            size=(_floats, "n_clients x (3 dim_y^2 + 2 dim_y dim_hyper) x (1 + n_samples)"),
        )
        arrays, samples = _draw(rng, spec)
        return cls(*arrays, name=label, spec=spec, **samples)

    # ------------------------------------------------------------------ identity
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The family's arrays and samples (:class:`~problems.family.ProblemFamily`), and
        ``rho``, a number rather than an array attribute."""
        return {**super().to_arrays(), "rho": np.array(self.rho)}

    # ------------------------------------------------------------------ oracle interface
    def hyper_blocks(self, x: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """Row c of the result is client ``clients[c]``'s own block ``lambda_i`` of ``x[c]``."""
        return take_blocks(x, clients, self.n_clients, self.dim_hyper)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(y_c, lambda_i)`` per evaluated client (full objective or minibatch mean)."""
        lam = self.hyper_blocks(x, clients)
        A, b, C = (self._sampled(name, clients, batch) for name in ("A", "b", "C"))
        linear = b + torch.einsum("cij,cj->ci", C, lam)
        return 0.5 * torch.einsum("ci,cij,cj->c", y, A, y) - (y * linear).sum(-1)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(y_c, lambda_i)`` per evaluated client; deterministic (``batch`` is ignored)."""
        lam = self.hyper_blocks(x, clients)
        r = y + torch.einsum("cij,cj->ci", rows(self.P, clients), lam) - rows(self.t, clients)
        return 0.5 * torch.einsum("ci,cij,cj->c", r, rows(self.Q, clients), r) + 0.5 * self.rho * (
            lam * lam
        ).sum(-1)

    def curvature_products(
        self,
        u: torch.Tensor,
        clients: torch.Tensor,
        cross_batch: Batch | None,
        hessian_batch: Batch | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """HGP's two products per evaluated client (Alg. 2, eq. 10), in closed form, without
        the loss's autodiff: ``(grad^2_{lambda_i y} g_i u_c, grad^2_y g_i u_c)``, ``(C, dl)``
        (the own block ``lambda_i``; the others are zero) and ``(C, dy)``.

        With ``hat A``, ``hat C`` the client's arrays or their minibatch means
        (:meth:`_sampled` on ``hessian_batch``, ``cross_batch``; one batch may serve both), the
        derivatives of :meth:`inner_loss` are

        .. math::  \\nabla^2_{\\lambda_i y} g_i\\, u = -\\hat C^T u, \\qquad
                   \\nabla^2_y g_i\\, u = \\tfrac12 (\\hat A + \\hat A^T) u,

        (the loss's ``y^T hat A y / 2`` differentiated twice: a minibatch mean of sample
        Hessians is symmetric only to round-off). Each is computed in the order the loss's
        double backward computes it, so the numbers equal the autodiff oracles' bit for bit
        (``tests/test_hgp_closed_form.py`` compares them on every shape and batch size the HGP
        claims draw).
        """
        cross_rows = self._table_rows(clients, cross_batch)
        if hessian_batch is cross_batch and cross_rows is not None and u.device.type == "cpu":
            # one sample for both: one lookup in the table of both means side by side (one
            # gather of the row's ``dy (dy + dl)`` numbers, not two; on the CPU, whose batched
            # product of small matrices is a plain loop over any strides: the same numbers)
            both = self._minibatch_mean("AC", clients, cross_batch, cross_rows)
            hessian, cross = both[..., : self.dim_y], both[..., self.dim_y :]
        else:
            hessian_rows = (
                cross_rows
                if hessian_batch is cross_batch
                else self._table_rows(clients, hessian_batch)
            )
            cross = self._minibatch_mean("C", clients, cross_batch, cross_rows)
            hessian = self._minibatch_mean("A", clients, hessian_batch, hessian_rows)
        if loop_form(hessian, u) and loop_form(cross, u):
            # the same sums as whole-row elementwise products (faster at these sizes)
            jv = loop_rmatvec(cross, -u)
            hv = 0.5 * (loop_matvec(hessian, u) + loop_rmatvec(hessian, u))
        else:
            jv = rmatvec(cross, -u)
            hv = 0.5 * (matvec(hessian, u) + rmatvec(hessian, u))
        return jv, hv

    @functools.cached_property
    def _minibatch_tables(self) -> dict[tuple[str, int], torch.Tensor]:
        return {}

    def _table_rows(self, clients: torch.Tensor, batch: Batch | None) -> torch.Tensor | None:
        """The rows of the evaluated minibatches in their table (:meth:`_minibatch_mean`), or
        None where no table pays: ``client N^b + sum_k j_k N^(b-1-k)`` for indices
        ``j_1..j_b`` (integers: any order of the sums gives them)."""
        if batch is None:
            return None
        count, b = batch.indices.shape
        per_client = self.n_samples**b
        size = self.n_clients * per_client
        if size > MINIBATCH_TABLE_ROWS or 8 * count < size:
            return None
        powers = self.n_samples ** torch.arange(b - 1, -1, -1, device=batch.indices.device)
        if batch.indices.device.type == "cpu":  # one pass (CUDA has no integer mv)
            return torch.mv(batch.indices, powers).add_(clients * per_client)
        return clients * per_client + (batch.indices * powers).sum(1)

    def _minibatch_mean(
        self, name: str, clients: torch.Tensor, batch: Batch | None, rows: torch.Tensor | None
    ) -> torch.Tensor:
        """:meth:`_sampled`: client array ``name`` per evaluated client or its minibatch mean,
        the latter looked up at ``rows`` (:meth:`_table_rows`) in a table of every minibatch's
        mean where one pays.

        A client has ``N^b`` ordered minibatches of ``b`` of its ``N`` samples; the table holds
        the mean of each, computed once by :meth:`_sampled` itself (the same gather and
        reduction, row by row, so a looked-up mean is the gathered one bit for bit), at row
        ``client N^b + sum_k j_k N^(b-1-k)`` for indices ``j_1..j_b``. It is built when it has
        at most ``MINIBATCH_TABLE_ROWS`` rows and a call evaluates at least an eighth as many
        rows (a replicated HGP run then gathers more rows than the table holds within its
        first steps); a smaller call gathers as :meth:`_sampled` does. ``name`` ``"AC"`` (a
        table only) is ``A`` and ``C`` side by side, ``(dy, dy + dl)`` a row: both means of one
        minibatch in one lookup.
        """
        if batch is None or rows is None:
            return self._sampled(name, clients, batch)
        return self._minibatch_table(name, batch).index_select(0, rows)

    def _minibatch_table(self, name: str, batch: Batch) -> torch.Tensor:
        """The table of every minibatch's mean of ``name`` for ``batch``'s size, on its device
        (:meth:`_minibatch_mean`), computed at its first use."""
        b = batch.indices.shape[1]
        table = self._minibatch_tables.get((name, b))
        if table is None:
            table = self._every_minibatch_mean(name, b, batch.indices.device)
            self._minibatch_tables[(name, b)] = table
        return table

    def _every_minibatch_mean(self, name: str, b: int, device: torch.device) -> torch.Tensor:
        """The rows of :meth:`_minibatch_table` (for ``"AC"``, the tables of ``A`` and ``C``
        side by side, those kept where they are, else made for it and not kept)."""
        if name == "AC":
            kept = self._minibatch_tables
            return torch.cat(
                [
                    kept[(k, b)] if (k, b) in kept else self._every_minibatch_mean(k, b, device)
                    for k in ("A", "C")
                ],
                dim=-1,
            )
        per_client = self.n_samples**b
        codes = torch.arange(self.n_clients * per_client, device=device)
        powers = self.n_samples ** torch.arange(b - 1, -1, -1, device=device)
        every = Batch((codes[:, None] // powers) % self.n_samples)
        return self._sampled(name, codes // per_client, every)

    # ------------------------------------------------------------------ exact answers
    def _lam(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.n_clients, self.dim_hyper)

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor:
        """``y* = (sum_k A_k)^{-1} sum_k (b_k + C_k lambda_k)`` by a linear solve."""
        rhs = (self.b + torch.einsum("kij,kj->ki", self.C, self._lam(x))).sum(0)
        return torch.linalg.solve(self.A.sum(0), rhs)

    def client_blocks(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Paper-convention blocks at ``y*(x)``: H (n,dy,dy), J (n,dl,dy), c (n,dy), e (n,dl)."""
        lam = self._lam(x)
        y = self.exact_inner_solution(x)
        r = y + torch.einsum("kij,kj->ki", self.P, lam) - self.t
        c = torch.einsum("kij,kj->ki", self.Q, r)
        e = torch.einsum("kji,kj->ki", self.P, c) + self.rho * lam
        return {"H": self.A, "J": -self.C.transpose(1, 2), "c": c, "e": e, "y": y}

    def local_blocks(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Blocks at client i's own optimum ``y_i = A_i^{-1}(b_i + C_i lambda_i)`` (LocalGrad)."""
        lam = self._lam(x)
        rhs = self.b + torch.einsum("kij,kj->ki", self.C, lam)
        y = torch.linalg.solve(self.A, rhs[..., None])[..., 0]
        r = y + torch.einsum("kij,kj->ki", self.P, lam) - self.t
        c = torch.einsum("kij,kj->ki", self.Q, r)
        e = torch.einsum("kji,kj->ki", self.P, c) + self.rho * lam
        return {"H": self.A, "J": -self.C.transpose(1, 2), "c": c, "e": e, "y": y}

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor:
        """``grad h = GlobalGrad / n``, GlobalGrad_i = e_i - J_i (sum H)^{-1} sum c (Sec. 3.3)."""
        blk = self.client_blocks(x)
        adjoint = torch.linalg.solve(blk["H"].sum(0), blk["c"].sum(0))
        global_grad = blk["e"] - torch.einsum("kij,j->ki", blk["J"], adjoint)
        return global_grad.reshape(-1) / self.n_clients

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor:
        """``h(x) = mean_i f_i(y*(x), lambda_i)``."""
        y = self.exact_inner_solution(x)
        clients = torch.arange(self.n_clients, device=self.device)
        return self.outer_loss(
            x.expand(self.n_clients, -1), y.expand(self.n_clients, -1), clients, None
        ).mean()

    def outer_hessian(self) -> torch.Tensor:
        """``grad^2 h`` (constant: y* is affine in x and f quadratic), dense ``(dx, dx)``."""
        n, dl, dy = self.n_clients, self.dim_hyper, self.dim_y
        Y = torch.linalg.solve(self.A.sum(0), torch.cat(list(self.C), dim=1))  # dy*/dx
        P_full = torch.zeros(n, dy, n, dl, dtype=torch.float64, device=self.device)
        every = torch.arange(n, device=self.device)
        P_full[every, :, every, :] = self.P
        R = Y[None] + P_full.reshape(n, dy, n * dl)  # d r_i / dx, stacked over clients
        hess = torch.einsum("kia,kij,kjb->ab", R, self.Q, R)
        hess = hess / n + self.rho / n * torch.eye(
            self.dim_x, dtype=torch.float64, device=self.device
        )
        return 0.5 * (hess + hess.T)

    def outer_minimizer(self) -> torch.Tensor:
        """``argmin h`` by a linear solve (h is a quadratic; strongly convex when rho > 0)."""
        hess = self.outer_hessian()
        if float(torch.linalg.eigvalsh(hess).min()) <= 0.0:
            raise ProblemError(f"{self.name}: h is not strongly convex (rho = 0?)")
        zero = torch.zeros(self.dim_x, dtype=torch.float64, device=self.device)
        return torch.linalg.solve(hess, -self.exact_hypergradient(zero))

    # ------------------------------------------------------------------ constants
    @functools.cached_property
    def _sample_hessians(self) -> torch.Tensor:
        return self.A if self.A_samples is None else self.A_samples.reshape(-1, *self.A.shape[1:])

    def constants(self) -> ProblemConstants:
        cross = torch.cat(list(-self.C.transpose(1, 2)), dim=0) / self.n_clients  # (dx, dy)
        outer_x = torch.cat([P.T @ Q for P, Q in zip(self.P, self.Q, strict=True)], 0)
        return self._inner_constants(
            "A",
            "b",
            cross_norm=float(torch.linalg.matrix_norm(cross, ord=2)),
            outer_grad_y_lipschitz=float(torch.linalg.matrix_norm(self.means["Q"], ord=2)),
            outer_grad_x_lipschitz=float(torch.linalg.matrix_norm(outer_x, ord=2)) / self.n_clients,
        )

    def hgp_constants(self) -> dict[str, float]:
        """HGP's constants (Thm 1, App. C) from the finite sample sets, exactly.

        ``alpha = min sigma_min`` and ``L = max sigma_max`` over every client and sample inner
        Hessian (minibatch means lie in their convex hull, so the same bounds hold for any b);
        ``beta = max sigma_max(J)`` likewise; ``kappa_x``, ``kappa_lambda``: the largest
        single-sample deviations (a minibatch mean deviates by at most that, triangle inequality);
        ``nu_f``: Lipschitz constant of ``grad_lambda f`` and ``grad_y f`` in the stacked y;
        ``nu_g = 0`` (Hessians and Jacobians do not depend on y).
        """
        hess = torch.cat([self.A, self._sample_hessians]) if self.n_samples else self.A
        eig = torch.linalg.eigvalsh(hess)
        crosses = (
            self.C
            if self.C_samples is None
            else torch.cat([self.C, self.C_samples.reshape(-1, *self.C.shape[1:])])
        )
        kx = kl = 0.0
        if self.n_samples:
            assert self.A_samples is not None and self.C_samples is not None
            kx = float(torch.linalg.matrix_norm(self.A_samples - self.A[:, None], ord=2).max())
            kl = float(torch.linalg.matrix_norm(self.C_samples - self.C[:, None], ord=2).max())
        PtQ = self.P.transpose(1, 2) @ self.Q
        nu_f = max(
            float(torch.linalg.matrix_norm(self.Q, ord=2).max()),
            float(torch.linalg.matrix_norm(PtQ, ord=2).max()),
        )
        return {
            "alpha": float(eig.min()),
            "L": float(eig.max()),
            "beta": float(torch.linalg.matrix_norm(crosses, ord=2).max()),
            "kappa_x": kx,
            "kappa_lambda": kl,
            "nu_f": nu_f,
            "nu_g": 0.0,
        }
