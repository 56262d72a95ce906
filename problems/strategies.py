"""Hypothesis strategies that draw well-posed closed-form problems.

Each strategy draws, in this order, small dimensions first, then ``log10(kappa)`` in the requested
range, then heterogeneity, then an integer seed that alone feeds ``np.random.default_rng``. No
strategy touches a global random state, so a failing example shrinks to a small, reproducible
problem whose :meth:`spec` rebuilds it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TypeVar

from hypothesis import strategies as st

from problems.compositional import LinearCompositional
from problems.logistic import PerClientLogistic
from problems.minimax import QuadraticMinimax
from problems.per_client import PerClientQuadratic
from problems.quadratic_bilevel import QuadraticBilevel

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)

_Quadratic = TypeVar("_Quadratic", QuadraticBilevel, QuadraticMinimax)
_Family = TypeVar("_Family")


def _condition_number(draw: st.DrawFn, kappa: tuple[float, float], dim: int) -> float:
    """``10**u`` with ``u`` uniform between ``log10`` of the range's ends (drawn even when unused),
    or 1 when the Hessian is ``1 x 1``."""
    low, high = kappa
    log_kappa = draw(st.floats(math.log10(low), math.log10(high)))
    return 1.0 if dim == 1 else float(10.0**log_kappa)


def _draw_recipe(
    draw: st.DrawFn,
    random: Callable[..., _Family],
    kappa: tuple[tuple[float, float], int],
    ranges: dict[str, tuple[float, float]],
    **fixed: object,
) -> _Family:
    """The rest of a strategy's draw, after its sizes (given to ``random`` already): the
    condition number (:func:`_condition_number` over ``kappa = (range, dim)``), one float per
    knob of ``ranges`` in its order, then the seed; ``random`` gets them and ``fixed`` by name."""
    condition_number = _condition_number(draw, *kappa)
    knobs = {name: draw(st.floats(*bounds)) for name, bounds in ranges.items()}
    seed = draw(SEEDS)
    return random(condition_number=condition_number, seed=seed, **knobs, **fixed)


def _spectral_quadratic(
    family: type[_Quadratic],
    name: str,
    doc: str,
) -> Callable[..., st.SearchStrategy[_Quadratic]]:
    """The strategy ``name`` of ``family`` (:class:`QuadraticBilevel` or
    :class:`QuadraticMinimax`, whose ``random`` take the same knobs), documented by ``doc``."""

    def draw_problem(
        draw: st.DrawFn,
        *,
        max_clients: int = 16,
        min_dim_y: int = 1,
        max_dim: int = 8,
        kappa: tuple[float, float] = (1.0, 100.0),
        max_hessian_heterogeneity: float = 0.9,
        max_gradient_heterogeneity: float = 3.0,
        **sampling: float,
    ) -> _Quadratic:
        dim_x = draw(st.integers(1, max_dim))
        dim_y = draw(st.integers(max(min_dim_y, 1), max_dim))
        n_clients = draw(st.integers(1, max_clients))
        return _draw_recipe(
            draw,
            functools.partial(family.random, n_clients, dim_x, dim_y),
            (kappa, dim_y),
            {
                "hessian_heterogeneity": (0.0, max_hessian_heterogeneity),
                "gradient_heterogeneity": (0.0, max_gradient_heterogeneity),
            },
            **sampling,
        )

    # the name hypothesis shows in the strategy's repr (and in falsifying examples)
    draw_problem.__name__ = draw_problem.__qualname__ = name
    draw_problem.__doc__ = doc
    return st.composite(draw_problem)


quadratic_bilevel = _spectral_quadratic(
    QuadraticBilevel,
    "quadratic_bilevel",
    """A :class:`QuadraticBilevel` with ``kappa`` in the given range and 1..max_clients clients.

    ``sampling``: the sample-set knobs of :meth:`QuadraticBilevel.random` (``n_samples``,
    ``gradient_noise``, ``hessian_noise``; none: no samples), passed to it as they are;
    ``max_hessian_heterogeneity + hessian_noise`` must stay below 1 so every client and sample
    Hessian is positive definite.
    """,
)
quadratic_minimax = _spectral_quadratic(
    QuadraticMinimax,
    "quadratic_minimax",
    """A :class:`QuadraticMinimax` whose inner ``P_bar`` has ``kappa`` in the range.

    ``sampling``: the sample-set knobs of :meth:`QuadraticMinimax.random` (``n_samples``,
    ``gradient_noise``, ``hessian_noise``; none: no samples), passed to it as they are;
    ``max_hessian_heterogeneity + hessian_noise`` must stay below 1 so every client
    and sample ``P`` is positive definite.
    """,
)


@st.composite
def linear_compositional(
    draw: st.DrawFn,
    *,
    max_clients: int = 16,
    min_levels: int = 1,
    max_levels: int = 4,
    max_dim: int = 6,
    kappa: tuple[float, float] = (1.0, 100.0),
    max_jacobian_heterogeneity: float = 1.0,
    max_value_heterogeneity: float = 3.0,
    **sampling: float,
) -> LinearCompositional:
    """A :class:`LinearCompositional` with ``min_levels..max_levels`` levels.

    Dimensions are drawn with ``d_0 <= d_n`` for every level so the composed map has
    full column rank; ``kappa`` is the condition number of ``Q_bar``. ``sampling``: the
    sample-set knobs of :meth:`LinearCompositional.random` (``n_samples``, ``matrix_noise``,
    ``value_noise``; none: no samples), passed to it as they are.
    """
    n_levels = draw(st.integers(min_levels, max_levels))
    dim_x = draw(st.integers(1, max_dim))
    dims = [dim_x] + [draw(st.integers(dim_x, max_dim)) for _ in range(n_levels)]
    n_clients = draw(st.integers(1, max_clients))
    return _draw_recipe(
        draw,
        functools.partial(LinearCompositional.random, n_clients, dims),
        (kappa, dims[-1]),
        {
            "jacobian_heterogeneity": (0.0, max_jacobian_heterogeneity),
            "value_heterogeneity": (0.0, max_value_heterogeneity),
        },
        **sampling,
    )


@st.composite
def per_client_quadratic(
    draw: st.DrawFn,
    *,
    min_clients: int = 2,
    max_clients: int = 6,
    max_dim: int = 3,
    kappa: tuple[float, float] = (1.0, 5.0),
    hessian_heterogeneity: tuple[float, float] = (0.0, 0.5),
    cross_scale: tuple[float, float] = (0.2, 2.0),
    outer_coupling: tuple[float, float] = (0.0, 1.0),
    target_heterogeneity: tuple[float, float] = (0.5, 2.0),
    rho: tuple[float, float] = (0.05, 1.0),
    **sampling: float,
) -> PerClientQuadratic:
    """A :class:`PerClientQuadratic` (HGP P1) with every knob drawn from the given ranges.

    Defaults are small (n <= 6, dims <= 3, kappa <= 5) because HGP's cost is M * S gossip steps
    whatever the dimension, and the rates the claims fit scale with kappa. ``sampling``: the
    sample-set knobs of :meth:`PerClientQuadratic.random` (``n_samples``, ``hessian_noise``,
    ``cross_noise``; none: no samples), passed to it as they are.
    """
    dim_hyper = draw(st.integers(1, max_dim))
    dim_y = draw(st.integers(1, max_dim))
    n_clients = draw(st.integers(min_clients, max_clients))
    return _draw_recipe(
        draw,
        functools.partial(PerClientQuadratic.random, n_clients, dim_hyper, dim_y),
        (kappa, dim_y),
        {
            "hessian_heterogeneity": hessian_heterogeneity,
            "cross_scale": cross_scale,
            "outer_coupling": outer_coupling,
            "target_heterogeneity": target_heterogeneity,
            "rho": rho,
        },
        **sampling,
    )


@st.composite
def per_client_logistic(
    draw: st.DrawFn,
    *,
    max_clients: int = 4,
    dims: tuple[int, int] = (2, 5),
    n_train: tuple[int, int] = (30, 60),
    mu: tuple[float, float] = (0.1, 0.5),
    hyper: str = "weights",
) -> PerClientLogistic:
    """A :class:`PerClientLogistic` on the FedEM-style synthetic data of HGP sec. 5.1."""
    n_clients = draw(st.integers(2, max_clients))
    dim = draw(st.integers(*dims))
    N = draw(st.integers(*n_train))
    ridge = draw(st.floats(*mu))
    seed = draw(SEEDS)
    return PerClientLogistic.random(n_clients, dim, N, N, seed, mu=ridge, hyper=hyper)  # type: ignore[arg-type]
