"""Spectral estimates and gradient descent for the influence protocol (HGP Sec. 5.2).

Power iteration for the largest eigenvalue (the stable step), Lanczos (ARPACK) for the smallest
(the damping margin), and Nesterov-accelerated descent to a gradient tolerance (the retrained
optima), on matrix-free Hessian-vector products; used by
:class:`~problems.workloads.influence.InfluenceProblem` and the HGP experiments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from problems._base import ProblemError

#: Power iteration: at most this many Hessian-vector products. The residual
#: ``||A v - rho v||`` falls like ``r^k`` for the gap ratio ``r = |lambda_2 / lambda_1|``, so
#: reaching ``POWER_RTOL`` takes about ``ln(1/POWER_RTOL) / (1 - r)`` products: 300 covers ``r``
#: up to about 0.97 (the CNN's measured top eigenvalue converges in tens); a run that stops at the
#: cap is reported as not converged.
POWER_ITERATIONS = 300
#: Power iteration stops when the residual ``||A v - rho v|| <= POWER_RTOL |rho|``, which puts an
#: eigenvalue of the symmetric A within ``POWER_RTOL |rho|`` of the Rayleigh quotient ``rho``. The
#: estimate sets a step whose stability margin is a factor 2 (``1/lambda_max`` against the bound
#: ``2/lambda_max``), so 1e-4 is far inside that margin, and still 100x above the float32
#: round-off of a Hessian-vector product (~1e-6 relative).
POWER_RTOL = 1e-4
#: Lanczos (ARPACK ``eigsh``) relative accuracy of the smallest eigenvalue: 1e-3 of its size, far
#: below the damping margin it is compared with (the margin is >= 1/(eta M), ~4e-2 in the configs).
LANCZOS_TOL = 1e-3
#: Lanczos: at most this many restarts, and a Krylov basis of this size (ARPACK's ``ncv``). A
#: basis of 40 vectors resolves an isolated extreme eigenvalue in one or two restarts; the cap
#: bounds the Hessian-vector products at ``LANCZOS_MAX_RESTARTS * LANCZOS_BASIS``.
LANCZOS_MAX_RESTARTS = 30
LANCZOS_BASIS = 40


class SpectralEstimate(NamedTuple):
    """An eigenvalue estimate: ``value``, Hessian-vector products used, whether it converged."""

    value: float
    products: int
    converged: bool


def _start_vector(
    dim: int, seed: int, dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    v = torch.as_tensor(
        np.random.default_rng([seed, 17]).standard_normal(dim), dtype=dtype, device=device
    )
    return v / v.norm()


def power_iteration(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    start: torch.Tensor,
    iterations: int,
    rtol: float,
) -> SpectralEstimate:
    """The eigenvalue of largest magnitude (signed: the Rayleigh quotient) of a symmetric
    operator, from the unit vector ``start``; stops when ``||A v - rho v|| <= rtol |rho|`` (an
    eigenvalue lies within ``rtol |rho|`` of ``rho``), or at ``iterations`` with
    ``converged=False``."""
    v = start
    value = 0.0
    for k in range(1, iterations + 1):
        w = matvec(v)
        value, norm = float(v @ w), float(w.norm())
        if not (math.isfinite(value) and math.isfinite(norm)):
            raise ProblemError("power iteration: the operator returned non-finite values")
        if norm == 0.0:
            return SpectralEstimate(0.0, k, True)
        if float((w - value * v).norm()) <= rtol * abs(value):
            return SpectralEstimate(value, k, True)
        v = w / norm
    return SpectralEstimate(value, iterations, False)


def largest_eigenvalue(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    *,
    seed: int,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    iterations: int = POWER_ITERATIONS,
    rtol: float = POWER_RTOL,
) -> SpectralEstimate:
    """``lambda_max`` (algebraically largest) by power iteration from a seeded Gaussian start:
    when the dominant eigenvalue ``mu`` is negative, a second power iteration on ``A - mu I``
    (whose spectrum is ``lambda - mu >= 0``, dominated by ``lambda_max - mu``), from the start of
    seed ``seed + 1``, finds it."""
    first = power_iteration(matvec, _start_vector(dim, seed, dtype, device), iterations, rtol)
    if first.value >= 0.0:
        return first
    mu = first.value
    second = power_iteration(
        lambda v: matvec(v) - mu * v, _start_vector(dim, seed + 1, dtype, device), iterations, rtol
    )
    return SpectralEstimate(
        second.value + mu, first.products + second.products, first.converged and second.converged
    )


def smallest_eigenvalue(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    *,
    seed: int,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    tol: float = LANCZOS_TOL,
) -> SpectralEstimate:
    """``lambda_min`` (algebraically smallest) of a symmetric operator by Lanczos: scipy's
    ``eigsh(which="SA")`` on a ``LinearOperator`` of ``matvec`` (evaluated in ``dtype``), from
    a seeded start. On ARPACK's non-convergence the best Ritz value so far is returned with
    ``converged=False`` (a Ritz value is >= lambda_min: it can only understate the damping)."""
    from scipy.sparse.linalg import ArpackNoConvergence
    from scipy.sparse.linalg import LinearOperator
    from scipy.sparse.linalg import eigsh

    count = 0

    def apply(v: np.ndarray) -> np.ndarray:
        nonlocal count
        count += 1
        out = matvec(torch.as_tensor(np.asarray(v).reshape(-1), dtype=dtype, device=device))
        return out.detach().to(torch.float64).cpu().numpy()

    operator = LinearOperator((dim, dim), matvec=apply, dtype=np.float64)
    start = _start_vector(dim, seed, torch.float64, "cpu").cpu().numpy()
    basis = min(LANCZOS_BASIS, dim - 1)
    try:
        values = eigsh(
            operator,
            k=1,
            which="SA",
            v0=start,
            tol=tol,
            ncv=basis,
            maxiter=LANCZOS_MAX_RESTARTS * basis,
            return_eigenvectors=False,
        )
        return SpectralEstimate(float(values.min()), count, True)
    except ArpackNoConvergence as error:
        found = np.asarray(error.eigenvalues)
        if found.size == 0:
            raise ProblemError(f"Lanczos found no eigenvalue after {count} products") from error
        return SpectralEstimate(float(found.min()), count, False)


class Descent(NamedTuple):
    """Gradient descent to a tolerance: the end point, steps taken, final gradient norm,
    whether ``||grad|| <= tol`` was reached within the step cap, and the gradient norm at the
    start (for a caller's divergence test: an end far above the start)."""

    y: torch.Tensor
    steps: int
    grad_norm: float
    reached: bool
    start_grad_norm: float = math.nan


class DescentDiverged(ProblemError):
    """:func:`descend` met a gradient that is not finite."""


def momentum_bound(momentum: float) -> float:
    """``eta lambda_max`` below which Nesterov's method with momentum ``beta`` (as in
    :func:`descend`) is stable on a quadratic: ``2 (1 + beta) / (1 + 2 beta)`` (2 for plain
    gradient descent, 4/3 as beta -> 1). From the iteration's characteristic polynomial
    ``r^2 - (1 + beta) a r + beta a`` with ``a = 1 - eta lambda`` (Jury's conditions)."""
    return 2.0 * (1.0 + momentum) / (1.0 + 2.0 * momentum)


def descend(
    grad: Callable[[torch.Tensor], torch.Tensor],
    start: torch.Tensor,
    *,
    step: float,
    tol: float,
    max_steps: int,
    momentum: float = 0.0,
) -> Descent:
    """Full-batch gradient descent from ``start`` until ``||grad(y)|| <= tol`` or ``max_steps``
    steps (the gradient at the iterate ``y`` is checked before each step).

    ``momentum = 0``: ``y <- y - step grad(y)``. ``momentum = beta > 0``: Nesterov's method,
    ``z = y + beta (y - y_prev)``, ``y <- z - step grad(z)`` (two gradients per step: one at z,
    one at y for the stopping test).
    """
    if not 0.0 <= momentum < 1.0:
        raise ProblemError(f"momentum must be in [0, 1), got {momentum}")
    y = start.detach().clone()
    previous = y
    norm = first = math.inf
    for k in range(max_steps + 1):
        g = grad(y)
        norm = float(g.norm())
        if k == 0:
            first = norm
        if not math.isfinite(norm):
            raise DescentDiverged(
                f"gradient descent diverged at step {k} (step size {step:g}):"
                f" the gradient is not finite (its norm was {first:.3g} at "
                "the start)"
            )
        if norm <= tol:
            return Descent(y, k, norm, True, first)
        if k == max_steps:
            break
        if momentum == 0.0:
            y = y - step * g
        else:
            z = y + momentum * (y - previous)
            previous, y = y, z - step * grad(z)
    return Descent(y, max_steps, norm, False, first)
