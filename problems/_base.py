"""The problem interface that every estimator sees (validation helpers: :mod:`problems.checks`).

A problem has ``n_clients`` clients. Client ``i`` owns an outer objective ``f_i(x, y)`` and an
inner objective ``g_i(x, y)`` (for a minimax problem ``g_i = -f_i``; for a compositional problem
``g_i(x, y) = 1/2 ||y - r_i(x)||^2``). Losses are evaluated for many clients at once: the client
axis is the leading tensor axis, so one call evaluates a whole round.

Shape contract of :meth:`Problem.outer_loss` and :meth:`Problem.inner_loss`:

- ``x``: ``(C, dim_x)``, one outer iterate per evaluated client;
- ``y``: ``(C, dim_y)``, one inner iterate per evaluated client;
- ``clients``: ``(C,)`` integer tensor of client indices (repeats allowed);
- ``batch``: ``None`` for the full local objective, or a :class:`Batch` from
  :meth:`Problem.sample_batch` for a minibatch estimate;
- returns ``(C,)``, the loss of each evaluated client at its own ``(x, y)``.

Because row ``c`` of the result depends only on row ``c`` of ``x`` and ``y``, the gradient of the
*sum* of the losses with respect to the stacked iterates is the stack of per-client gradients. The
oracles in :mod:`testbed` rely on this to compute every per-client derivative in one autodiff call;
the same contract holds later for MLP/CNN workloads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal
from typing import Protocol
from typing import runtime_checkable

import numpy as np
import torch

ProblemKind = Literal["bilevel", "minimax", "compositional"]
PROBLEM_KINDS: tuple[str, ...] = ("bilevel", "minimax", "compositional")


class ProblemError(ValueError):
    """Raised when a problem is built from input that does not define a well-posed problem."""


@dataclasses.dataclass(frozen=True)
class Batch:
    """Per-client minibatch: ``indices[c]`` are the sample indices drawn for evaluated client c.

    ``indices`` has shape ``(C, batch_size)``; samples are drawn uniformly with replacement from
    the client's finite sample set, so a minibatch mean is an unbiased estimate of the client's
    full objective with variance ``sigma_i^2 / batch_size`` exactly.
    """

    indices: torch.Tensor

    @property
    def size(self) -> int:
        return int(self.indices.shape[1])


@dataclasses.dataclass(frozen=True)
class ProblemConstants:
    """Constants the papers' bounds are written in.

    Attributes:
        mu: strong-convexity modulus of the global inner objective g in y
            (``lambda_min`` of the mean inner Hessian).
        L: smoothness of g in y (``lambda_max`` of the mean inner Hessian); ``l_{g,1}`` in FedNest.
        mu_clients: ``min_i lambda_min(H_i)``, the per-client modulus FedNest's A2 asks for.
        L_clients: ``max_i lambda_max(H_i)``.
        cross_norm: ``||grad^2_xy g||``, the spectral norm of the mean cross derivative.
        outer_grad_y_lipschitz: Lipschitz constant of ``grad_y f`` in y (``||C_bar||``).
        outer_grad_x_lipschitz: Lipschitz constant of ``grad_x f`` in y (``||D_bar||``).
        hessian_heterogeneity: ``max_i ||H_i - H_bar||``, FedMSA's tau (Def. 2.2) on the inner
            Hessians; zero when clients differ only by linear terms.
        gradient_heterogeneity: ``sqrt(mean_i ||grad_y g_i - grad_y g||^2)`` at ``(x, y) = 0``,
            AggITD's sigma_2 (Assumption 4).
    """

    mu: float
    L: float
    mu_clients: float
    L_clients: float
    cross_norm: float
    outer_grad_y_lipschitz: float
    outer_grad_x_lipschitz: float
    hessian_heterogeneity: float
    gradient_heterogeneity: float

    @property
    def kappa(self) -> float:
        """Condition number ``L / mu`` of the global inner objective."""
        return self.L / self.mu

    def as_dict(self) -> dict[str, float]:
        out = dataclasses.asdict(self)
        out["kappa"] = self.kappa
        return out


@runtime_checkable
class Problem(Protocol):
    """What an estimator may use: per-client losses, minibatches and a starting point."""

    kind: ProblemKind
    n_clients: int
    dim_x: int
    dim_y: int

    @property
    def id(self) -> str: ...

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor: ...

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor: ...

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch: ...

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]: ...


@runtime_checkable
class ClosedFormProblem(Problem, Protocol):
    """A problem whose answers are known exactly (linear solves in float64)."""

    def constants(self) -> ProblemConstants: ...

    def exact_inner_solution(self, x: torch.Tensor) -> torch.Tensor: ...

    def exact_hypergradient(self, x: torch.Tensor) -> torch.Tensor: ...

    def outer_objective(self, x: torch.Tensor) -> torch.Tensor: ...

    def spec(self) -> dict[str, object]: ...


@runtime_checkable
class ClosedFormOracles(Protocol):
    """A problem that knows its derivatives: batched closed-form oracles.

    :class:`testbed.Oracles` calls these instead of differentiating the losses when a problem has
    them (the estimators are unchanged). Each takes ``x (C, dx)`` / ``y (C, dy)`` / ``v (C, dy)``
    rows or one ``(d,)`` vector shared by every evaluated client, the ``(C,)`` client indices and
    the minibatch, and returns one row per evaluated client: exactly the derivatives of
    :meth:`Problem.outer_loss` / :meth:`Problem.inner_loss` (a test cross-checks them against
    autodiff of the losses to 1e-12 relative).
    """

    def oracle_grad_inner(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor: ...

    def oracle_grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str = "xy",
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]: ...

    def oracle_hvp_inner(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor: ...

    def oracle_jvp_inner_xy(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor: ...


class OracleParts:
    """:class:`ClosedFormOracles`' outer gradient, HVP and mixed product assembled from parts.

    The closed-form quadratic families (:class:`~problems.quadratic_bilevel.QuadraticBilevel`,
    :class:`~problems.minimax.QuadraticMinimax`, the ``N == 1`` bilevel view of
    :class:`~problems.compositional.LinearCompositional`) give ``grad_x f_i`` and ``grad_y f_i``
    one at a time (``_outer_grad_x_rows``, ``_outer_grad_y_rows``: ``(x, y, clients, batch)``),
    and, their inner objectives being quadratic in ``y``, the products with ``grad^2_y g_i`` and
    ``grad^2_xy g_i``, which do not depend on ``(x, y)`` (``_hessian_rows``, ``_cross_rows``:
    ``(v, clients, batch)``); each returns one row per evaluated client. A family gives these
    four and its own ``oracle_grad_inner``.
    """

    def oracle_grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str = "xy",
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(grad_x f_i, grad_y f_i)`` per evaluated client; only the parts named in ``wrt`` are
        computed (the other is ``None``)."""
        gx = self._outer_grad_x_rows(x, y, clients, batch) if "x" in wrt else None
        gy = self._outer_grad_y_rows(x, y, clients, batch) if "y" in wrt else None
        return gx, gy

    def oracle_hvp_inner(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad^2_y g_i v``: ``(C, dy)``, the same at every ``(x, y)``."""
        return self._hessian_rows(v, clients, batch)

    def oracle_jvp_inner_xy(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad^2_xy g_i v``: ``(C, dx)``, the same at every ``(x, y)``."""
        return self._cross_rows(v, clients, batch)

    # the parts a family gives: (x, y, clients, batch) -> grad_x f_i or grad_y f_i rows, and
    # (v, clients, batch) -> grad^2_y g_i v or grad^2_xy g_i v rows
    _outer_grad_x_rows: Callable[..., torch.Tensor]
    _outer_grad_y_rows: Callable[..., torch.Tensor]
    _hessian_rows: Callable[..., torch.Tensor]
    _cross_rows: Callable[..., torch.Tensor]


class Owned:
    """An array handed over to a problem's constructor without a defensive copy.

    ``QuadraticBilevel.random`` and friends build arrays that nobody else holds; wrapping them in
    ``Owned`` lets the constructor take them as they are (a float64 numpy array is shared with
    torch, not copied), so a problem of 16 GB is never held twice.
    """

    __slots__ = ("array",)

    def __init__(self, array: object) -> None:
        self.array = array


def default_device() -> torch.device:
    """torch's default device (``torch.set_default_device``; the CPU unless a command's
    ``--device`` set it): where a problem built from numpy arrays puts them."""
    getter = getattr(torch, "get_default_device", None)  # torch >= 2.3
    return getter() if getter is not None else torch.empty(0).device


def as_tensor(array: object) -> torch.Tensor:
    """float64 tensor copy of ``array`` (numpy array, tensor or nested list); an :class:`Owned`
    float64 array is taken without a copy. A numpy array or list goes to
    :func:`default_device`; a tensor stays where it is."""
    if isinstance(array, Owned):
        inner = array.array
        if isinstance(inner, np.ndarray) and inner.dtype == np.float64:
            shared = torch.from_numpy(np.ascontiguousarray(inner))
            device = default_device()
            return shared if device.type == "cpu" else shared.to(device)
        return torch.as_tensor(inner, dtype=torch.float64).detach()
    return torch.as_tensor(array, dtype=torch.float64).detach().clone()


def from_spec(spec: dict[str, object], device: str | torch.device | None = None) -> object:
    """Rebuild a problem from its :meth:`spec` (a counterexample's recipe), on ``device``
    (default: :func:`default_device`).

    Families register a builder in :data:`SPEC_BUILDERS` under their ``family`` name.
    """
    family = spec.get("family")
    if family not in SPEC_BUILDERS:
        raise KeyError(f"no builder for problem family {family!r}; known: {sorted(SPEC_BUILDERS)}")
    kwargs = {k: v for k, v in spec.items() if k != "family"}
    problem = SPEC_BUILDERS[str(family)](**kwargs)
    move = getattr(problem, "to", None)
    return move(device) if device is not None and move is not None else problem


SPEC_BUILDERS: dict[str, Callable[..., object]] = {}
