"""Federated multi-level compositional problem with linear levels and a quadratic top.

FedMSA's federated MCO problem (Tarzanagh et al. 2023, Sec. 2.3, eq. (Fed-MCO),
with linear levels): with ``N >= 1`` levels and dimensions ``dims = (d_0, ..., d_N)``,
client ``m`` of ``M`` has

.. math::

    f^{m,n}(u) &= W_{m,n} u + w_{m,n},
        \\quad \\mathbb{R}^{d_n} \\to \\mathbb{R}^{d_{n+1}},
        \\qquad n = 0, \\dots, N-1, \\\\
    f^{m,N}(u) &= \\tfrac12 u^T Q_m u - t_m^T u,
        \\quad \\mathbb{R}^{d_N} \\to \\mathbb{R},

and the objective composes the client means level by level,
``f(x) = fbar^N(fbar^{N-1}(... fbar^0(x)))`` with ``fbar^n = mean_m f^{m,n}``. Writing
bars for client means, ``G = Wbar_{N-1} ... Wbar_0`` (``d_N x d_0``) and
``u(x) = G x + c`` the value reaching the top level,

.. math::

    \\nabla f(x) = G^T (\\bar Q u(x) - \\bar t), \\qquad
    x^* = (G^T \\bar Q G)^{-1} G^T (\\bar t - \\bar Q c),

the product of averaged Jacobians of FedMSA's "true gradient" (Sec. 2.3; not the
average of per-client products of eq. (11b)). The optimum is unique when ``G`` has full
column rank and ``Qbar`` is positive definite; both are checked on construction.

For ``N == 1`` the same object is FedNest's compositional bilevel problem (eq. (7),
with the 1/2 convention of its Sec. 3.2): ``r_i = f^{i,0}``,

.. math::

    g_i(x, y) = \\tfrac12 \\|y - W_i x - w_i\\|^2, \\qquad
    f_i(x, y) = \\tfrac12 y^T Q_i y - t_i^T y, \\qquad
    y^*(x) = \\bar r(x) = \\bar W x + \\bar w,

so ``grad^2_y g = I`` (``mu = L = 1``), ``grad^2_xy g = -Wbar^T`` and the hypergradient
is the exact gradient above. For ``N > 1`` the bilevel methods raise
:class:`ProblemError`.

Stochastic oracles: sample ``j`` of client ``m`` has
``W_{m,n,j} = W_{m,n} + N_{m,n,j}``, ``w_{m,n,j} = w_{m,n} + n_{m,n,j}`` and
``t_{m,j} = t_m + n_{m,j}`` (``Q_m`` is exact), with the noise centred over ``j``. Every
map is affine in these arrays, so a minibatch evaluation (the maps built from the
minibatch means of the arrays) is unbiased, the mean over the whole sample set is exact,
and the variance is known in closed form (:meth:`LinearCompositional.noise_variance`).
For ``N == 1`` the minibatch inner loss is ``1/2 ||y - r_i(x; batch)||^2``: its
y-gradient ``y - r_i(x; batch)`` is FedNest's unbiased ``q_i`` (Sec. 2.4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import _spectra
from problems._base import Batch
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._rows import ClientRows
from problems._rows import gather_mean
from problems._rows import rows
from problems._rows import samples_around
from problems.checks import check_arrays
from problems.checks import check_dims
from problems.checks import check_samples
from problems.checks import symmetric_operator
from problems.compositional_bilevel import CompositionalBilevelView
from problems.family import ProblemFamily
from problems.family import knob_spec
from problems.family import recipe_rng

#: The knobs of :meth:`LinearCompositional.random` that must be finite and >= 0.
_NONNEGATIVE_KNOBS = (
    "jacobian_heterogeneity",
    "value_heterogeneity",
    "hessian_heterogeneity",
    "matrix_noise",
    "value_noise",
)


def _floats(spec: dict[str, Any]) -> int:
    """The float64 numbers a drawn problem holds: per client each level's ``W_n`` and
    ``w_n``, the last level's ``Q`` (and its kept spread) and ``t``; per sample ``W_n``,
    ``w_n`` and ``t`` again."""
    d, m, n = list(spec["dims"]), spec["n_clients"], spec["n_samples"]
    levels = sum(d[k + 1] * d[k] + d[k + 1] for k in range(len(d) - 1))
    return m * (levels + 2 * d[-1] * d[-1] + d[-1]) + m * n * (levels + d[-1])


def _draw_levels(rng: np.random.Generator, spec: dict[str, Any]) -> tuple[Any, ...]:
    """The draws of :meth:`LinearCompositional.random` for its ``spec``, in its stream's order:
    ``(W, w, Q, t, samples)``."""
    n_clients, dims, n_samples = spec["n_clients"], spec["dims"], spec["n_samples"]
    mu, condition_number = spec["mu"], spec["condition_number"]
    jh, vh = spec["jacobian_heterogeneity"], spec["value_heterogeneity"]
    hessian_heterogeneity = spec["hessian_heterogeneity"]
    matrix_noise, value_noise = spec["matrix_noise"], spec["value_noise"]
    M, N = n_clients, len(dims) - 1
    R = np.eye(dims[0])
    W, w = [], []
    for n in range(N):  # construction only: levels, not clients
        R_next = _spectra.random_orthogonal(rng, dims[n + 1])[:, : dims[0]]
        Z = rng.standard_normal((dims[n + 1], dims[n])) / math.sqrt(dims[n])
        W_bar = R_next @ R.T + Z @ (np.eye(dims[n]) - R @ R.T)
        W.append(_spectra.spread_around(rng, W_bar, M, jh))
        w.append(_spectra.around_gaussian(rng, M, dims[n + 1], vh))
        R = R_next
    Q = _spectra.spectral_stack(
        rng, M, dims[-1], mu, condition_number, hessian_heterogeneity, keep_spread=False
    ).stack
    t = _spectra.around_gaussian(rng, M, dims[-1], vh)
    samples: dict[str, Any] = {}
    if n_samples > 0:
        samples["W_samples"] = [
            samples_around(rng, W[n], n_samples, matrix_noise / math.sqrt(dims[n]))
            for n in range(N)
        ]
        samples["w_samples"] = [samples_around(rng, w[n], n_samples, value_noise) for n in range(N)]
        samples["t_samples"] = samples_around(rng, t, n_samples, value_noise)
    return W, w, Q, t, samples


class LinearCompositional(ProblemFamily, CompositionalBilevelView):
    """Federated linear-quadratic compositional problem; see the module docstring.

    Args:
        W: sequence of ``N`` stacks, ``W[n]`` of shape ``(M, d_{n+1}, d_n)``.
        w: sequence of ``N`` stacks, ``w[n]`` of shape ``(M, d_{n+1})``.
        Q: ``(M, d_N, d_N)`` symmetric, with ``Qbar`` positive definite.
        t: ``(M, d_N)``.
        W_samples, w_samples, t_samples: optional per-sample arrays
            (``(M, n_samples, ...)``, one stack per level for ``W`` and ``w``) whose
            means over samples equal the client arrays; without them there is no
            stochastic oracle.
        name, spec: as in :class:`problems.quadratic_bilevel.QuadraticBilevel`.

    Raises:
        ProblemError: on mismatched shapes, NaN or inf entries, zero clients or levels,
            ``Qbar`` not positive definite, or a composed map ``G`` without full column
            rank.
    """

    ID_TEMPLATES = {
        "LinearCompositional.random": (
            "lin.comp.m{n_clients}.d{dims_text}.k{condition_number:g}"
            ".jh{jacobian_heterogeneity:g}.vh{value_heterogeneity:g}"
            ".hh{hessian_heterogeneity:g}.n{n_samples}.seed{seed}"
        ),
    }
    INLINE_ID = "lin.comp.m{n_clients}.d{dims_text}.inline"
    #: :meth:`random`'s keyword knobs in the recipe's order, with their defaults (``None``:
    #: the ``heterogeneity`` shorthand).
    KNOBS: ClassVar[dict[str, float | None]] = {
        "condition_number": 1.0,
        "jacobian_heterogeneity": None,
        "value_heterogeneity": None,
        "hessian_heterogeneity": 0.0,
        "mu": 1.0,
        "n_samples": 0,
        "matrix_noise": 0.0,
        "value_noise": 0.0,
    }

    kind: ProblemKind = "compositional"

    def __init__(
        self,
        W: Sequence[Any],
        w: Sequence[Any],
        Q: Any,
        t: Any,
        *,
        W_samples: Sequence[Any] | None = None,
        w_samples: Sequence[Any] | None = None,
        t_samples: Any = None,
        name: str = "LinearCompositional",
        spec: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        if len(W) < 1 or len(W) != len(w):
            raise ProblemError(
                f"{name}: need N >= 1 levels with one W and one w each, got "
                f"{len(W)} W and {len(w)} w"
            )
        N = len(W)
        given = {f"W{n}": a for n, a in enumerate(W)}
        given.update({f"w{n}": a for n, a in enumerate(w)})
        given.update({"Q": Q, "t": t})
        shapes = {f"W{n}": f"M d{n + 1} d{n}" for n in range(N)}
        shapes.update({f"w{n}": f"M d{n + 1}" for n in range(N)})
        shapes.update({"Q": f"M d{N} d{N}", "t": f"M d{N}"})
        arrays, sizes = check_arrays(name, given, shapes, symmetric=("Q",))
        self.W = [arrays[f"W{n}"] for n in range(N)]
        self.w = [arrays[f"w{n}"] for n in range(N)]
        self.Q, self.t = arrays["Q"], arrays["t"]
        self.n_levels, self.n_clients = N, sizes["M"]
        self.dims = tuple(sizes[f"d{n}"] for n in range(N + 1))
        self.dim_x, self.dim_y = self.dims[0], self.dims[1]
        lowest = float(torch.linalg.eigvalsh(self.Q.mean(0)).min())
        if lowest <= 0.0:
            raise ProblemError(
                f"{name}: top-level Hessian Q_bar is not positive definite "
                f"(smallest eigenvalue {lowest:.3g})"
            )
        G = self.composed_matrix()
        sv = torch.linalg.svdvals(G)
        # Why 1e-10: G is a product of at most a few O(1) float64 matrices; a smaller
        # relative singular value is numerically rank deficient and the optimum would
        # not be unique.
        if G.shape[0] < G.shape[1] or float(sv.min()) <= 1e-10 * max(1.0, float(sv.max())):
            raise ProblemError(
                f"{name}: composed linear map G = W_bar_(N-1)...W_bar_0 "
                f"{tuple(G.shape)} lacks full column rank, so the optimum is not "
                "unique"
            )
        self._set_samples(W_samples, w_samples, t_samples)
        self._spec = spec or {"family": "LinearCompositional", "arrays": "inline"}
        self._Q_op = symmetric_operator(self.Q)  # closed-form oracles (problems.checks)
        self._client_rows = ClientRows()

    @property
    def dims_text(self) -> str:
        """The level dimensions as written in the id: ``"2x3x2"``."""
        return "x".join(str(d) for d in self.dims)

    def _named_arrays(self) -> dict[str, torch.Tensor]:
        out = {f"W{n}": a for n, a in enumerate(self.W)}
        out.update({f"w{n}": a for n, a in enumerate(self.w)})
        out.update({"Q": self.Q, "t": self.t})
        return out

    def _set_samples(self, W_s: Any, w_s: Any, t_s: Any) -> None:
        name, N = self.name, self.n_levels
        self.n_samples = 0
        self.W_samples: list[torch.Tensor] | None = None
        self.w_samples: list[torch.Tensor] | None = None
        self.t_samples: torch.Tensor | None = None
        present = [s is not None for s in (W_s, w_s, t_s)]
        if not any(present):
            return
        if not all(present) or len(W_s) != N or len(w_s) != N:
            raise ProblemError(
                f"{name}: give W_samples, w_samples (one per level) and t_samples, or none of them"
            )
        given = {f"W{k}": W_s[k] for k in range(N)}
        given.update({f"w{k}": w_s[k] for k in range(N)})
        given["t"] = t_s
        self.n_samples, samples = check_samples(name, given, self._named_arrays())
        self.W_samples = [samples[f"W{k}_samples"] for k in range(N)]
        self.w_samples = [samples[f"w{k}_samples"] for k in range(N)]
        self.t_samples = samples["t_samples"]

    # ------------------------------------------------------------ construction
    @classmethod
    def random(
        cls,
        n_clients: int,
        dims: Sequence[int],
        seed: int = 0,
        heterogeneity: float = 0.0,
        **knobs: float,
    ) -> LinearCompositional:
        """Draw a problem with ``N = len(dims) - 1`` levels and a unique optimum.

        ``dims = (d_0, ..., d_N)`` needs ``d_0 <= d_n`` for every n (else no full column
        rank). The mean maps are ``Wbar_n = R_{n+1} R_n^T + Z_n (I - R_n R_n^T)`` with
        ``R_0 = I`` and random orthonormal columns ``R_n`` (``d_n x d_0``), ``Z_n``
        Gaussian: then ``G = R_N`` has orthonormal columns, and ``Qbar`` has spectrum
        log-spaced in ``[mu, kappa mu]``, so the objective Hessian ``G^T Qbar G`` has
        its spectrum inside ``[mu, kappa mu]`` (Cauchy interlacing).

        Args:
            n_clients: M >= 1.
            dims: level dimensions, ``len(dims) >= 2``.
            seed: seeds the only generator used (``np.random.default_rng(seed)``).
            heterogeneity: shorthand for ``jacobian_heterogeneity`` and
                ``value_heterogeneity``.
            knobs: the knobs of :data:`KNOBS` by name (defaults there; an unknown one raises
                ``TypeError``): ``condition_number``: kappa >= 1 of ``Qbar``;
                ``jacobian_heterogeneity``: ``max_m ||W_{m,n} - Wbar_n||`` for every level
                (FedMSA's tau_n, Def. 2.2), spreads summing to zero over clients;
                ``value_heterogeneity``: root-mean-square spread of ``w_{m,n}`` and ``t_m``;
                ``hessian_heterogeneity``: relative spread in ``[0, 1)`` of
                ``Q_m = Qbar^{1/2} (I + S_m) Qbar^{1/2}`` (keeps every ``Q_m`` positive
                definite); ``mu``: smallest eigenvalue of ``Qbar``; ``n_samples``: samples per
                client for the stochastic oracle (0: deterministic only); ``matrix_noise``:
                per-entry standard deviation (times ``1/sqrt(d_n)``) of the sample noise on
                ``W``; ``value_noise``: standard deviation of the sample noise on ``w`` and
                ``t``.
        """
        label = "LinearCompositional.random"
        dims = check_dims(label, dims, minimum_length=2)
        given = {"n_clients": n_clients, "dims": list(dims), "seed": seed}
        spec = knob_spec(label, given, knobs, cls.KNOBS, shorthand=heterogeneity)
        if dims[0] > min(dims[1:]):
            raise ProblemError(
                f"{label}: d_0 = {dims[0]} exceeds a later dimension in {dims}; "
                "the composed map cannot have full column rank"
            )
        rng = recipe_rng(
            spec,
            nonnegative=_NONNEGATIVE_KNOBS,
            positive=("mu",),
            size=(_floats, "n_clients x (sum of d_n d_(n+1) + 2 d_N^2) x (1 + n_samples)"),
        )
        if spec["hessian_heterogeneity"] >= 1.0:
            raise ProblemError(f"{label}: hessian_heterogeneity must be < 1")
        W, w, Q, t, samples = _draw_levels(rng, spec)
        return cls(W, w, Q, t, name=label, spec=spec, **samples)

    # ---------------------------------------------------------------- identity
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every array that defines the problem (``W0, w0, ..., Q, t`` and samples)."""
        out = {k: v.cpu().numpy().copy() for k, v in self._named_arrays().items()}
        if self.n_samples:
            assert self.W_samples is not None and self.w_samples is not None
            assert self.t_samples is not None
            for n in range(self.n_levels):
                out[f"W{n}_samples"] = self.W_samples[n].cpu().numpy().copy()
                out[f"w{n}_samples"] = self.w_samples[n].cpu().numpy().copy()
            out["t_samples"] = self.t_samples.cpu().numpy().copy()
        return out

    # -------------------------------------------------------------- level maps
    def _level_arrays(
        self, n: int, clients: torch.Tensor, batch: Batch | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W_{m,n}, w_{m,n})`` (or ``(Q_m, t_m)`` at the top) per evaluated
        client."""
        if not 0 <= n <= self.n_levels:
            raise ProblemError(f"{self.name}: level {n} outside 0..{self.n_levels}")
        top = n == self.n_levels
        if batch is None:
            return (
                (rows(self.Q, clients), rows(self.t, clients))
                if top
                else (rows(self.W[n], clients), rows(self.w[n], clients))
            )
        if not self.n_samples:
            raise ProblemError(f"{self.name}: built without samples, so it has no minibatches")
        assert self.W_samples is not None and self.w_samples is not None
        assert self.t_samples is not None
        if top:
            return rows(self.Q, clients), gather_mean(self.t_samples, clients, batch)
        return (
            gather_mean(self.W_samples[n], clients, batch),
            gather_mean(self.w_samples[n], clients, batch),
        )

    def level_map(
        self, n: int, u: torch.Tensor, clients: torch.Tensor, batch: Batch | None = None
    ) -> torch.Tensor:
        """``f^{m,n}(u_c)`` for each evaluated client.

        Maps ``u (C, d_n)`` to ``(C, d_{n+1})``, or to ``(C,)`` at the top level
        ``n = N``.
        """
        M_, v = self._level_arrays(n, clients, batch)
        if n == self.n_levels:
            return 0.5 * torch.einsum("ci,cij,cj->c", u, M_, u) - (v * u).sum(-1)
        return torch.einsum("cij,cj->ci", M_, u) + v

    @property
    def level_maps(self) -> tuple[Callable[..., torch.Tensor], ...]:
        """``(f^0, ..., f^N)`` as callables ``(u, clients, batch=None)`` batched over
        clients."""
        return tuple(functools.partial(self.level_map, n) for n in range(self.n_levels + 1))

    @functools.cached_property
    def means(self) -> dict[str, Any]:
        """Client means: ``W`` and ``w`` (lists over levels), ``Q`` and ``t``."""
        return {
            "W": [a.mean(0) for a in self.W],
            "w": [a.mean(0) for a in self.w],
            "Q": self.Q.mean(0),
            "t": self.t.mean(0),
        }

    def mean_level_map(self, n: int, u: torch.Tensor) -> torch.Tensor:
        """``fbar^n(u)`` for a single point ``u (d_n,)``."""
        m = self.means
        if n == self.n_levels:
            return 0.5 * u @ m["Q"] @ u - m["t"] @ u
        return m["W"][n] @ u + m["w"][n]

    def level_values(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``[z^0, ..., z^N]`` with ``z^0 = x`` and ``z^{n+1} = fbar^n(z^n)``: the exact
        tracked values ``z^{n,*}`` of FedMSA's MCO maps (eq. (3))."""
        values = [x]
        for n in range(self.n_levels):
            values.append(self.mean_level_map(n, values[-1]))
        return values

    def composed_matrix(self) -> torch.Tensor:
        """``G = Wbar_{N-1} ... Wbar_0`` of shape ``(d_N, d_0)``."""
        G = self.means["W"][0]
        for W_bar in self.means["W"][1:]:
            G = W_bar @ G
        return G

    # ----------------------------------------------------------- exact answers
    def objective(self, x: torch.Tensor) -> torch.Tensor:
        """``f(x) = fbar^N(... fbar^0(x))``."""
        return self.mean_level_map(self.n_levels, self.level_values(x)[-1])

    def exact_gradient(self, x: torch.Tensor) -> torch.Tensor:
        """``grad f(x) = G^T (Qbar u(x) - tbar)`` (FedMSA Sec. 2.3, product of mean
        Jacobians)."""
        u = self.level_values(x)[-1]
        return self.composed_matrix().T @ (self.means["Q"] @ u - self.means["t"])

    def objective_hessian(self) -> torch.Tensor:
        """``G^T Qbar G`` (``d_0 x d_0``), positive definite by construction checks."""
        G = self.composed_matrix()
        return G.T @ self.means["Q"] @ G

    def optimum(self) -> torch.Tensor:
        """``x* = (G^T Qbar G)^{-1} G^T (tbar - Qbar c)`` with ``c = u(0)`` (least
        squares)."""
        c = self.level_values(torch.zeros(self.dims[0], dtype=torch.float64, device=self.device))[
            -1
        ]
        G, m = self.composed_matrix(), self.means
        return torch.linalg.solve(self.objective_hessian(), G.T @ (m["t"] - m["Q"] @ c))

    def level_constants(self) -> dict[str, float]:
        """Per-level constants: ``lipschitz_n = ||Wbar_n||``,
        ``tau_n = max_m ||W_{m,n} - Wbar_n||`` (FedMSA Def. 2.2 with averages),
        ``tau_N`` on ``Q``, and ``mu``/``L`` of the objective Hessian ``G^T Qbar G``.
        """
        m = self.means
        out: dict[str, float] = {}
        for n in range(self.n_levels):
            out[f"lipschitz_{n}"] = float(torch.linalg.matrix_norm(m["W"][n], ord=2))
            out[f"tau_{n}"] = float(torch.linalg.matrix_norm(self.W[n] - m["W"][n], ord=2).max())
        out[f"lipschitz_{self.n_levels}"] = float(torch.linalg.matrix_norm(m["Q"], ord=2))
        out[f"tau_{self.n_levels}"] = float(torch.linalg.matrix_norm(self.Q - m["Q"], ord=2).max())
        eig = torch.linalg.eigvalsh(self.objective_hessian())
        out["mu"], out["L"] = float(eig.min()), float(eig.max())
        return out

    def noise_variance(self, *points: torch.Tensor, batch_size: int = 1) -> dict[str, torch.Tensor]:
        """Exact per-client minibatch variances at level inputs
        ``points = (z^0, ..., z^N)``.

        Keys (each ``(M,)``): ``value_n``
        (``E||f^{m,n}(z^n; batch) - f^{m,n}(z^n)||^2``), ``jacobian_n`` (squared
        Frobenius norm) for ``n < N``; ``value_N`` and ``grad_N`` at the top. For
        ``N == 1`` also the bilevel keys of ``QuadraticBilevel.noise_variance`` at
        ``(x, y) = points``: ``grad_inner_y``, ``grad_outer_y``, ``grad_outer_x``,
        ``hessian_inner``.
        """
        if not self.n_samples:
            raise ProblemError(f"{self.name}: built without samples, so it has no oracle noise")
        if len(points) != self.n_levels + 1:
            raise ProblemError(
                f"{self.name}: need {self.n_levels + 1} level inputs, got {len(points)}"
            )
        assert self.W_samples is not None and self.w_samples is not None
        assert self.t_samples is not None
        out: dict[str, torch.Tensor] = {}
        for n in range(self.n_levels):
            dW = self.W_samples[n] - self.W[n][:, None]
            dv = torch.einsum("mkij,j->mki", dW, points[n]) + self.w_samples[n] - self.w[n][:, None]
            out[f"value_{n}"] = (dv**2).sum(-1).mean(1) / batch_size
            out[f"jacobian_{n}"] = (dW**2).sum((-1, -2)).mean(1) / batch_size
        dt = self.t_samples - self.t[:, None]
        top = self.n_levels
        out[f"value_{top}"] = ((dt @ points[top]) ** 2).mean(1) / batch_size
        out[f"grad_{top}"] = (dt**2).sum(-1).mean(1) / batch_size
        if self.n_levels == 1:
            out["grad_inner_y"] = out["value_0"]
            out["grad_outer_y"] = out["grad_1"]
            zero = torch.zeros(self.n_clients, dtype=torch.float64, device=self.device)
            out["grad_outer_x"], out["hessian_inner"] = zero, zero.clone()
        return out
