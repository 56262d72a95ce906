"""FBO-AggITD's expected iteration as an affine map, to follow it over the long horizons that
Theorem 1's step rule implies.

With exact oracles, full participation and the exact mean over the server's index Q
(expectation mode, eq. 11), one FBO-AggITD iteration on a closed-form family is an affine map
of the state ``z = (x, y)``: AggITD's inner FedSVRG steps, its HessIV sum and One-Round-Upper's
local steps are all affine in ``(x, y)`` (the derivatives are constant). :func:`affine_iteration`
reads the map ``z -> A z + c`` off the *registered algorithm* (``d + 1`` single iterations from
the origin and the unit vectors) and validates it on a seeded random state to round-off, so a
nonlinear or state-dependent implementation is not measurable rather than misread.

Under Theorem 1's outer step cap (``alpha_2 = 1/(324 M_f^2 + 6 M_f)``, ~1e-4 on the drawn cases)
the iterates need ~1e5 iterations to approach their limit; the affine map follows them there in
float64 at the cost of small matrix products (:func:`trajectory_minimum`), and gives the limit
itself as the solution of ``(I - A) z = c`` (:func:`fixed_point`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from testbed.algorithms.base import run_algorithm
from theory_checks.aggitd.common import NO_DRAWS
from theory_checks.claim import NotMeasurable


@dataclasses.dataclass(frozen=True)
class AffineIteration:
    """``z_{k+1} = A z_k + c`` with ``z = (x, y)`` (``x`` first, ``dim_x`` entries)."""

    A: np.ndarray
    c: np.ndarray
    dim_x: int

    @property
    def radius(self) -> float:
        """Spectral radius of ``A``: below 1 iff every start converges to the fixed point."""
        return float(np.abs(np.linalg.eigvals(self.A)).max())


def affine_iteration(algorithm: Any, problem: Any, seed: int = 0) -> AffineIteration:
    """Read one deterministic iteration of ``algorithm`` off ``d + 1`` runs and validate it.

    Raises :class:`NotMeasurable` when the iteration is not affine to ``1e-8`` relative on a
    seeded random state (it draws, or its map depends on the state in another way).
    """
    dx, dy = problem.dim_x, problem.dim_y
    init = algorithm.init(problem)

    def step(z: np.ndarray) -> np.ndarray:
        zt = torch.as_tensor(z, dtype=torch.float64)
        state = init._replace(x=zt[:dx].clone(), y=zt[dx:].clone())
        new = run_algorithm(algorithm, problem, 1, NO_DRAWS, state=state)[-1]
        return torch.cat([new.state.x, new.state.y]).numpy()

    d = dx + dy
    c = step(np.zeros(d))
    A = np.stack([step(e) - c for e in np.eye(d)], axis=1)
    z = np.random.default_rng(seed).standard_normal(d)
    predicted, actual = A @ z + c, step(z)
    # Why 1e-8: an affine iteration is reproduced to round-off (~1e-15 relative); anything above
    # 1e-8 is a nonlinearity, not arithmetic.
    if np.linalg.norm(actual - predicted) > 1e-8 * (np.linalg.norm(actual) + 1.0):
        raise NotMeasurable("the expected iteration is not affine in (x, y) on this instance")
    return AffineIteration(A, c, dx)


def fixed_point(it: AffineIteration) -> np.ndarray:
    """The limit of every trajectory, ``(I - A)^{-1} c``; NotMeasurable when ``A`` has spectral
    radius >= 1 (no limit to compare with)."""
    if it.radius >= 1.0:
        raise NotMeasurable(f"the iteration does not contract (spectral radius {it.radius:.6g})")
    return np.linalg.solve(np.eye(len(it.c)) - it.A, it.c)


def trajectory_minimum(it: AffineIteration, z0: np.ndarray, value: Callable[[np.ndarray],
                       np.ndarray], limit_value: float, max_iterations: int = 20_000_000,
                       chunk: int = 2048) -> tuple[float, int]:
    """``min_k value(z_k)`` over the whole trajectory from ``z0``, and the iterations followed.

    ``value`` maps a ``(n, d)`` stack of states to ``(n,)`` values. The trajectory is followed in
    chunks (``z_{kB + j} = A^j z_{kB}`` plus the affine part) until it is within round-off of the
    fixed point (``||z_k - z*|| <= 1e-12 (||z*|| + ||z0||)``), where the values equal
    ``limit_value`` to round-off, so the minimum of the prefix and of the limit is the infimum
    over all k.
    """
    d = len(z0)
    z_star = fixed_point(it)
    powers = [np.eye(d)]
    for _ in range(chunk - 1):
        powers.append(it.A @ powers[-1])
    P = np.stack(powers)  # A^j, j < chunk
    # z_{kB + j} - z* = A^j (z_{kB} - z*)
    step_B = it.A @ powers[-1]
    best, done, e = math.inf, 0, z0 - z_star
    scale = float(np.linalg.norm(z_star) + np.linalg.norm(z0)) + 1e-300
    while done < max_iterations:
        block = np.einsum("jab,b->ja", P, e) + z_star
        best = min(best, float(value(block).min()))
        done += chunk
        e = step_B @ e
        if float(np.linalg.norm(e)) <= 1e-12 * scale:
            return min(best, limit_value), done
    raise NotMeasurable(f"trajectory not within round-off of its limit after {done} iterations")


def trajectory_mean(it: AffineIteration, z0: np.ndarray,
                    value: Callable[[np.ndarray], np.ndarray], iterations: int,
                    chunk: int = 2048) -> float:
    """``(1/K) sum_{k<K} value(z_k)`` from ``z0`` (the iterates ``z_0..z_{K-1}``, as Theorem 1
    averages them), followed in chunks of ``z_{kB + j} = A^j z_{kB} + (sum_{i<j} A^i) c``."""
    d = len(z0)
    powers, partial = [np.eye(d)], [np.zeros(d)]
    for _ in range(chunk - 1):
        partial.append(it.A @ partial[-1] + it.c)
        powers.append(it.A @ powers[-1])
    P, S = np.stack(powers), np.stack(partial)
    total, done, z = 0.0, 0, np.asarray(z0, dtype=np.float64)
    while done < iterations:
        block = (np.einsum("jab,b->ja", P, z) + S)[: iterations - done]
        total += float(value(block).sum())
        done += len(block)
        z = it.A @ block[-1] + it.c
    return total / iterations


__all__ = ["AffineIteration", "affine_iteration", "fixed_point", "trajectory_mean",
           "trajectory_minimum"]
