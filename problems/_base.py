"""The problem interface that every estimator sees, and the shared validation helpers.

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
import math
from collections.abc import Callable
from typing import Literal, Protocol, runtime_checkable

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


# ---------------------------------------------------------------------------------------------
# Validation helpers shared by the families. Every error names the problem it comes from.
# ---------------------------------------------------------------------------------------------


def check_finite(name: str, problem: str, array: torch.Tensor) -> None:
    if not bool(torch.isfinite(array).all()):
        raise ProblemError(f"{problem}: array {name!r} has NaN or inf entries")


def check_shape(name: str, problem: str, array: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(array.shape) != shape:
        raise ProblemError(
            f"{problem}: array {name!r} has shape {tuple(array.shape)}, expected {shape}"
        )


def check_symmetric(name: str, problem: str, array: torch.Tensor) -> None:
    scale = max(1.0, float(array.abs().max()))
    # Why 1e-10: the arrays are float64 and built symmetric; an asymmetry above this is input
    # error, not round-off.
    if float((array - array.transpose(-1, -2)).abs().max()) > 1e-10 * scale:
        raise ProblemError(f"{problem}: array {name!r} must be symmetric")


def check_positive_definite(name: str, problem: str, array: torch.Tensor) -> torch.Tensor:
    """Raise unless every matrix in the stack is symmetric positive definite; return eigenvalues."""
    check_symmetric(name, problem, array)
    eigenvalues = torch.linalg.eigvalsh(array)
    lowest = float(eigenvalues.min())
    if lowest <= 0.0:
        raise ProblemError(
            f"{problem}: inner Hessian {name!r} is not positive definite "
            f"(smallest eigenvalue {lowest:.3g})"
        )
    return eigenvalues


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def check_int(problem: str, name: str, value: object, minimum: int | None = 0) -> None:
    """An integer (not a bool, float or string) ``>= minimum`` (any integer: ``None``)."""
    if not _is_int(value):
        what = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise ProblemError(f"{problem}: {name} must be {what}, got {value!r}")
    if minimum is not None and int(value) < minimum:  # type: ignore[call-overload]
        raise ProblemError(f"{problem}: {name} must be an integer >= {minimum}, got {value!r}")


def check_clients(problem: str, n_clients: int) -> None:
    if not _is_int(n_clients):
        raise ProblemError(f"{problem}: n_clients must be an integer >= 1, got {n_clients!r}")
    if n_clients < 1:
        raise ProblemError(f"{problem}: needs at least one client, got {n_clients}")


def check_seed(problem: str, seed: object) -> None:
    """A seed numpy accepts: an integer >= 0 or a sequence of them."""
    values = list(seed) if isinstance(seed, (list, tuple)) else [seed]
    if not values or not all(_is_int(v) and int(v) >= 0 for v in values):  # type: ignore
        raise ProblemError(f"{problem}: seed must be an integer >= 0 (or a sequence of them), "
                           f"got {seed!r}")


#: Largest condition number a closed-form problem accepts. Why 1e12: the exact answers are
#: float64 linear solves whose relative error is about kappa * 1e-16, so beyond 1e12 the
#: "exact" reference keeps fewer than 4 correct digits and every check against it is void
#: (and at 1e300 the spectrum itself overflows).
MAX_CONDITION_NUMBER = 1e12


def check_condition_number(problem: str, condition_number: float) -> None:
    if not _is_real(condition_number):
        raise ProblemError(f"{problem}: condition number must be a number >= 1, got "
                           f"{condition_number!r}")
    if not math.isfinite(condition_number) or condition_number < 1.0:
        raise ProblemError(
            f"{problem}: condition number must be a finite number >= 1, got {condition_number}"
        )
    if condition_number > MAX_CONDITION_NUMBER:
        raise ProblemError(
            f"{problem}: condition number {condition_number:.3g} is above "
            f"{MAX_CONDITION_NUMBER:.0e}: float64 solves would leave the exact answers with "
            "no correct digits"
        )


def check_nonnegative(problem: str, name: str, value: float) -> None:
    if not _is_real(value):
        raise ProblemError(f"{problem}: {name} must be a number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0.0:
        raise ProblemError(f"{problem}: {name} must be finite and >= 0, got {value}")


def as_tensor(array: object) -> torch.Tensor:
    """float64 tensor copy of ``array`` (numpy array, tensor or nested list)."""
    return torch.as_tensor(array, dtype=torch.float64).detach().clone()


# Gathers use ``index_select`` rather than advanced indexing: on small tensors torch's parallel
# advanced-indexing kernel costs ~100x more (it was the bottleneck of replicated HGP runs and of
# the batched closed-form rounds in benchmarks/closed_form_rounds.py).
def rows(array: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """``array[clients]`` for per-client arrays ``(M, ...)``: row c is client ``clients[c]``'s."""
    return array.index_select(0, clients)


def gather_mean(samples: torch.Tensor, clients: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Minibatch mean of per-sample arrays ``samples`` of shape ``(M, n_samples, ...)``.

    Returns ``(C, ...)``: for each evaluated client, the mean over its drawn sample indices.
    """
    n_samples = samples.shape[1]
    flat = samples.reshape(-1, *samples.shape[2:])
    index = (clients[:, None] * n_samples + batch.indices).reshape(-1)
    picked = flat.index_select(0, index).reshape(*batch.indices.shape, *samples.shape[2:])
    return picked.mean(dim=1)


def draw_indices(
    rng: np.random.Generator, clients: torch.Tensor, n_samples: int, batch_size: int,
    problem: str,
) -> Batch:
    if n_samples == 0:
        raise ProblemError(
            f"{problem}: built without samples (n_samples=0), so it has no stochastic oracle"
        )
    if batch_size < 1:
        raise ProblemError(f"{problem}: batch size must be >= 1, got {batch_size}")
    indices = rng.integers(0, n_samples, size=(int(clients.shape[0]), batch_size))
    return Batch(torch.as_tensor(indices, dtype=torch.long))


def centered_noise(
    rng: np.random.Generator, shape: tuple[int, ...], scale: float
) -> np.ndarray:
    """Gaussian noise along axis 1 (the sample axis), centred so its sample mean is exactly 0.

    Centring makes the finite-sample mean of the per-sample objectives equal the client's
    objective exactly, so minibatch oracles are unbiased with an exactly computable variance.
    """
    noise = rng.standard_normal(shape) * scale
    if shape[1] > 0:
        noise -= noise.mean(axis=1, keepdims=True)
    return noise


def from_spec(spec: dict[str, object]) -> object:
    """Rebuild a problem from its :meth:`spec` (a counterexample's recipe).

    Families register a builder in :data:`SPEC_BUILDERS` under their ``family`` name.
    """
    family = spec.get("family")
    if family not in SPEC_BUILDERS:
        raise KeyError(f"no builder for problem family {family!r}; known: {sorted(SPEC_BUILDERS)}")
    kwargs = {k: v for k, v in spec.items() if k != "family"}
    return SPEC_BUILDERS[str(family)](**kwargs)


SPEC_BUILDERS: dict[str, Callable[..., object]] = {}
