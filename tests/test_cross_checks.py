"""Every closed-form family's exact gradient, checked four independent ways.

(a) sympy: ``h(x) = f(x, y*(x))`` derived symbolically from the per-client arrays (exact
    rationals; ``y*`` solves ``grad_y g = 0``), differentiated and evaluated exactly;
(b) central finite differences of ``outer_objective``;
(c) torch autodiff through the exact solve inside ``outer_objective``;
(d) FedNest's Lemma 2.1 assembled from the estimator-facing per-client losses through
    :class:`testbed.oracles.Oracles` (autodiff gradients, HVPs and mixed products).

Families: QuadraticBilevel, QuadraticMinimax, LinearCompositional with N == 1 (bilevel
view, ``h = f``) and with N > 1 (``objective`` / ``exact_gradient``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import sympy
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems.strategies import linear_compositional
from problems.strategies import quadratic_bilevel
from problems.strategies import quadratic_minimax
from testbed.oracles import Oracles
from tests._tol import FINITE_DIFFERENCE_RTOL
from tests._tol import IDENTITY_RTOL

EPS = float(np.finfo(np.float64).eps)
FAST = settings(max_examples=15, deadline=None)
SYMPY = settings(max_examples=4, deadline=None)  # Why 4: exact rational algebra is slow
SMALL = {"max_clients": 3, "max_dim": 3}

FAMILIES: dict[str, Any] = {
    "bilevel": quadratic_bilevel(**SMALL),
    "minimax": quadratic_minimax(**SMALL),
    "compositional-1": linear_compositional(max_levels=1, **SMALL),
    "compositional-N": linear_compositional(min_levels=2, max_levels=3, **SMALL),
}
SEEDS = st.integers(0, 2**31 - 1)
BILEVEL_VIEWS = ["bilevel", "minimax", "compositional-1"]


def _multi_level(p: Any) -> bool:
    return isinstance(p, LinearCompositional) and p.n_levels > 1


def _h(p: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """``h(x)``: the bilevel outer objective, or the composition for N > 1."""
    return p.objective if _multi_level(p) else p.outer_objective


def _grad(p: Any, x: torch.Tensor) -> torch.Tensor:
    return p.exact_gradient(x) if _multi_level(p) else p.exact_hypergradient(x)


def _point(p: Any, seed: int) -> torch.Tensor:
    dim = p.dims[0] if isinstance(p, LinearCompositional) else p.dim_x
    return torch.as_tensor(2.0 * np.random.default_rng(seed).standard_normal(dim))


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def _on_drawn_points(
    families: list[str], limits: settings
) -> Callable[[Callable[[Any, torch.Tensor], None]], Callable[..., None]]:
    """The decorated ``test(p, x)`` as a hypothesis test under ``limits``, one pytest case per
    family in ``families``: ``p`` drawn from the family's strategy, ``x`` from a drawn seed
    (:func:`_point`)."""

    def decorate(test: Callable[[Any, torch.Tensor], None]) -> Callable[..., None]:
        def run(family: str, data: st.DataObject, seed: int) -> None:
            p = data.draw(FAMILIES[family])
            test(p, _point(p, seed))

        run.__name__ = run.__qualname__ = test.__name__
        run.__doc__ = test.__doc__
        drawn = given(data=st.data(), seed=SEEDS)(run)
        return limits(pytest.mark.parametrize("family", families)(drawn))

    return decorate


# ------------------------------------------------------------------ (a) sympy
def _rational(array: np.ndarray) -> sympy.Matrix:
    """Exact rational copy (every float64 is a dyadic rational); vectors as columns."""
    a = array.reshape(-1, 1) if array.ndim == 1 else array
    entries = [sympy.Rational(float(v)) for v in a.ravel()]
    return sympy.Matrix(a.shape[0], a.shape[1], entries)


def _clients(p: Any, name: str) -> list[sympy.Matrix]:
    return [_rational(a) for a in p.to_arrays()[name]]


def _symbolic_losses(p: Any, x: sympy.Matrix, y: sympy.Matrix) -> tuple[Any, Any]:
    """Global ``(f, g)`` as sympy expressions: means of the per-client formulas."""

    def quad(v: sympy.Matrix, m: sympy.Matrix, w: sympy.Matrix) -> Any:
        return (v.T * m * w)[0, 0]

    def dot(a: sympy.Matrix, b: sympy.Matrix) -> Any:
        return (a.T * b)[0, 0]

    half = sympy.Rational(1, 2)
    fs, gs = [], []
    if isinstance(p, QuadraticBilevel):
        for A, B, b, C, D, c, E, e in zip(*(_clients(p, k) for k in "ABbCDcEe"), strict=True):
            gs.append(half * quad(y, A, y) - dot(y, B * x + b))
            fs.append(
                half * quad(y, C, y) + quad(y, D, x) + dot(c, y) + half * quad(x, E, x) + dot(e, x)
            )
    elif isinstance(p, QuadraticMinimax):
        arrays = (_clients(p, k) for k in ("P", "b", "A", "Lam", "e"))
        for P, b, A, Lam, e in zip(*arrays, strict=True):
            f = -(half * quad(y, P, y) - dot(b, y) + quad(y, A, x)) + half * quad(x, Lam, x)
            fs.append(f + dot(e, x))
            gs.append(-fs[-1])
    else:
        for W, w, Q, t in zip(*(_clients(p, k) for k in ("W0", "w0", "Q", "t")), strict=True):
            r = y - W * x - w
            gs.append(half * dot(r, r))
            fs.append(half * quad(y, Q, y) - dot(t, y))
    return sympy.Add(*fs) / len(fs), sympy.Add(*gs) / len(gs)


def _sympy_gradient(p: Any, x_value: torch.Tensor) -> torch.Tensor:
    dim = x_value.shape[0]
    xs = sympy.Matrix(sympy.symbols(f"x0:{dim}"))
    if _multi_level(p):

        def mean(name: str) -> sympy.Matrix:
            stack = _clients(p, name)
            return sum(stack, sympy.zeros(*stack[0].shape)) / len(stack)

        u = xs
        for n in range(p.n_levels):
            u = mean(f"W{n}") * u + mean(f"w{n}")
        h = sympy.Rational(1, 2) * (u.T * mean("Q") * u)[0, 0] - (mean("t").T * u)[0, 0]
    else:
        ys = sympy.Matrix(sympy.symbols(f"y0:{p.dim_y}"))
        f, g = _symbolic_losses(p, xs, ys)
        lhs, rhs = sympy.linear_eq_to_matrix([sympy.diff(g, v) for v in ys], list(ys))
        y_star = lhs.LUsolve(rhs)
        h = f.subs(dict(zip(ys, y_star, strict=True)), simultaneous=True)
    values = {v: sympy.Rational(float(a)) for v, a in zip(xs, x_value.tolist(), strict=True)}
    grad = [sympy.diff(h, v).subs(values) for v in xs]
    return torch.tensor([float(g) for g in grad], dtype=torch.float64)


@_on_drawn_points(sorted(FAMILIES), SYMPY)
def test_exact_gradient_equals_sympy_derivation(p: Any, x: torch.Tensor) -> None:
    # Why 1e-10: sympy is exact; the float64 closed form loses O(kappa * eps) ~ 1e-14.
    assert _rel(_grad(p, x), _sympy_gradient(p, x)) <= IDENTITY_RTOL


# ------------------------------------------------------------------ (b) finite
# differences
@_on_drawn_points(sorted(FAMILIES), FAST)
def test_exact_gradient_equals_central_differences(p: Any, x: torch.Tensor) -> None:
    h = _h(p)
    # Why eps^(1/3) * scale: central differences err by O(step^2 h''') (truncation) plus
    # O(eps |h| / step) (round-off); the sum is smallest at step ~ eps^(1/3) * scale,
    # where both are O(eps^(2/3)) ~ 4e-11 relative. (h''' = 0 here, so only round-off.)
    steps = EPS ** (1 / 3) * torch.clamp(x.abs(), min=1.0)
    eye = torch.eye(x.shape[0], dtype=torch.float64)
    fd = torch.stack(
        [(h(x + s * e) - h(x - s * e)) / (2 * s) for s, e in zip(steps, eye, strict=True)]
    )
    # Why 1e-6: round-off above is ~1e-10 relative for O(1..1e3) objectives.
    assert _rel(fd, _grad(p, x)) <= FINITE_DIFFERENCE_RTOL


# ------------------------------------------------------------------ (c) autodiff
@_on_drawn_points(sorted(FAMILIES), FAST)
def test_exact_gradient_equals_autodiff_through_the_solve(p: Any, x: torch.Tensor) -> None:
    x.requires_grad_(True)
    _h(p)(x).backward()
    assert x.grad is not None
    # Why 1e-10: both sides are float64 linear algebra on the same arrays; they differ
    # by O(kappa * eps) round-off.
    assert _rel(x.grad, _grad(p, x.detach())) <= IDENTITY_RTOL


# ------------------------------------------------------------------ (d) oracles
@_on_drawn_points(BILEVEL_VIEWS, FAST)
def test_lemma_2_1_from_per_client_oracles(p: Any, x: torch.Tensor) -> None:
    """grad h = grad_x f - grad^2_xy g [grad^2_y g]^{-1} grad_y f (FedNest eq. (8))."""
    y = p.exact_inner_solution(x)
    oracles, clients = Oracles(p), torch.arange(p.n_clients)
    gx, gy = (v.mean(0) for v in oracles.grad_outer(x, y, clients))
    eye = torch.eye(p.dim_y, dtype=torch.float64)
    H = torch.stack([oracles.hvp_inner(x, y, e, clients).mean(0) for e in eye], dim=1)
    v = torch.linalg.solve(H, gy)
    hyper = gx - oracles.jvp_inner_xy(x, y, v, clients).mean(0)
    # Why 1e-10: one extra solve with the autodiff Hessian, O(kappa * eps) apart.
    assert _rel(hyper, p.exact_hypergradient(x)) <= IDENTITY_RTOL
    if isinstance(p, QuadraticMinimax):
        # Danskin (FedNest Sec. 2.4): the indirect term vanishes at y*(x).
        assert _rel(gx, p.exact_hypergradient(x)) <= IDENTITY_RTOL
