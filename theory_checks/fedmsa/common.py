"""FedMSA's shared helpers: what several of its results use.

- **Reference maps** (:func:`reference_maps`): the per-client maps ``(P^m, S^m)`` read off each
  closed-form family's arrays, written independently of :mod:`testbed.algorithms.fedmsa_maps`
  (eq. (10) bilevel and minimax, eq. (11) compositional), so a wrong map in the algorithm shows
  in the checks; Theorem 3.1's criterion ``||P(x, Z*(x))||^2 + ||Z - Z*(x)||^2``
  (:func:`criterion`) and the fixed points ``Z*(x)`` and ``(x*, Z*(x*))``.
- **Build and run** the registered algorithm (:func:`build`, :func:`run`), its steps
  (:func:`single_timescale_step`, :func:`msa_radius`) and a seeded start (:func:`start_point`).
- **Exact moments** of Theorem 3.1's output-rule criterion: :mod:`theory_checks.fedmsa.moments`.
- **Case strategies** (:func:`families`, :func:`cases_of`, :data:`MOMENTA`): the closed-form
  families (bilevel, minimax, compositional) the identities and the deterministic rates draw.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import strategies
from testbed.algorithms.base import run_algorithm
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from theory_checks import stats
from theory_checks.claim import Case
from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import SeriesPoint
from theory_checks.claim import paper_claim
from theory_checks.tolerances import IDENTITY_RTOL

#: The constructor of FedMSA's claims (:class:`~theory_checks.claim.ClaimMaker`); each result
#: module narrows it with the fields its claims share.
fedmsa_claim = paper_claim("FedMSA")

# --------------------------------------------------------------------------- reference maps


def reference_maps(
    problem: Any, x: torch.Tensor, Z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ``(P^m, S^m)`` at points ``x (T, d_0)``, ``Z (T, d_Z)``: shapes ``(T, M, .)``.

    Read off the family's arrays (not autodiff): bilevel eq. (10) with the corrected (10a),
    minimax the same with ``g = -f``, compositional eq. (11).
    """
    if isinstance(problem, QuadraticBilevel):
        dy = problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        P = (
            torch.einsum("mji,tj->tmi", problem.D, w)
            + torch.einsum("mij,tj->tmi", problem.E, x)
            + problem.e
            + torch.einsum("mji,tj->tmi", problem.B, v)
        )
        gw = (
            torch.einsum("mij,tj->tmi", problem.A, w)
            - torch.einsum("mij,tj->tmi", problem.B, x)
            - problem.b
        )
        fw = (
            torch.einsum("mij,tj->tmi", problem.C, w)
            + torch.einsum("mij,tj->tmi", problem.D, x)
            + problem.c
        )
        S = torch.cat([gw, torch.einsum("mij,tj->tmi", problem.A, v) - fw], dim=-1)
        return P, S
    if isinstance(problem, QuadraticMinimax):
        dy = problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        At_w = torch.einsum("mji,tj->tmi", problem.A, w)
        At_v = torch.einsum("mji,tj->tmi", problem.A, v)
        P = -At_w + torch.einsum("mij,tj->tmi", problem.Lam, x) + problem.e - At_v
        Pw = torch.einsum("mij,tj->tmi", problem.P, w)
        Ax = torch.einsum("mij,tj->tmi", problem.A, x)
        fw = -Pw + problem.b - Ax
        S = torch.cat([Pw - problem.b + Ax, torch.einsum("mij,tj->tmi", problem.P, v) - fw], dim=-1)
        return P, S
    if isinstance(problem, LinearCompositional):
        sizes = list(problem.dims[1:])
        zs = [x, *torch.split(Z, sizes, dim=-1)]
        blocks = [
            zs[n][:, None, :]
            - torch.einsum("mij,tj->tmi", problem.W[n - 1], zs[n - 1])
            - problem.w[n - 1]
            for n in range(1, len(zs))
        ]
        g = torch.einsum("mij,tj->tmi", problem.Q, zs[-1]) - problem.t
        for n in range(problem.n_levels - 1, -1, -1):
            g = torch.einsum("mji,tmj->tmi", problem.W[n], g)
        return g, torch.cat(blocks, dim=-1)
    raise NotMeasurable(f"no reference maps for {type(problem).__name__}")


def mean_maps(problem: Any, x: torch.Tensor, Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    P, S = reference_maps(problem, x, Z)
    return P.mean(1), S.mean(1)


def state_sizes(problem: Any) -> tuple[int, int]:
    """``(d_x, d_Z)``: the sizes of the outer variable and of the stacked inner ones."""
    if isinstance(problem, LinearCompositional):
        return problem.dims[0], sum(problem.dims[1:])
    return problem.dim_x, 2 * problem.dim_y


def affine_matrix(fn: Callable[[torch.Tensor], torch.Tensor], dim: int) -> torch.Tensor:
    """Matrix of an affine map ``fn: (T, dim) -> (T, out)`` (its columns are differences)."""
    eye = torch.eye(dim, dtype=torch.float64)
    points = torch.cat([torch.zeros(1, dim, dtype=torch.float64), eye])
    values = fn(points)
    return (values[1:] - values[:1]).T


def joint_jacobian(problem: Any, per_client: bool = False) -> torch.Tensor:
    """Jacobian of ``u = (x, Z) -> (P, S)`` (global; or per client, ``(M, d, d)``)."""
    dx, dz = state_sizes(problem)

    def fn(u: torch.Tensor) -> torch.Tensor:
        P, S = reference_maps(problem, u[:, :dx], u[:, dx:])
        out = torch.cat([P, S], dim=-1)
        return out if per_client else out.mean(1)

    if not per_client:
        return affine_matrix(fn, dx + dz)
    eye = torch.eye(dx + dz, dtype=torch.float64)
    values = fn(torch.cat([torch.zeros(1, dx + dz, dtype=torch.float64), eye]))
    return (values[1:] - values[:1]).permute(1, 2, 0)


def fixed_point_Z(problem: Any, x: torch.Tensor) -> torch.Tensor:
    """``Z*(x)`` for points ``x (T, d_0)``: the solution of ``S(x, Z) = 0`` (affine in Z)."""
    dx, dz = state_sizes(problem)
    T = x.shape[0]
    J_Z = affine_matrix(
        lambda Z: mean_maps(problem, torch.zeros(Z.shape[0], dx, dtype=torch.float64), Z)[1], dz
    )
    offset = mean_maps(problem, x, torch.zeros(T, dz, dtype=torch.float64))[1]
    return -torch.linalg.solve(J_Z, offset.T).T


def criterion(problem: Any, x: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Theorem 3.1's criterion ``||P(x, Z*(x))||^2 + ||Z - Z*(x)||^2`` per point (rows)."""
    Z_star = fixed_point_Z(problem, x)
    P_red = mean_maps(problem, x, Z_star)[0]
    return (P_red**2).sum(-1) + ((Z - Z_star) ** 2).sum(-1)


# --------------------------------------------------------------------------- helpers


def build(make: Callable[..., Any], problem: Any, **params: Any) -> Any:
    """The algorithm for ``problem``: ``make`` builds it; a compositional problem gets the
    compositional maps of eq. (11) (keeping the algorithm's class, so perturbations survive)."""
    semantics = params.pop("semantics", None)
    alg = make(**params)
    if problem.kind == "compositional" and not isinstance(alg.maps, CompositionalMaps):
        alg = dataclasses.replace(alg, maps=CompositionalMaps(semantics or "paper"))
    elif semantics is not None and isinstance(alg.maps, CompositionalMaps):
        alg = dataclasses.replace(alg, maps=dataclasses.replace(alg.maps, semantics=semantics))
    return alg


def run(alg: Any, problem: Any, rounds: int, seed: int = 0, state: Any = None) -> list[Any]:
    return run_algorithm(alg, problem, rounds, np.random.default_rng(seed), state=state)


def gap_per_round(records: list[Any], gap: Callable[[Any], float], **fields: Any) -> Measurement:
    """An identity checked after every round of a run: ``gap(record)`` is the round's relative
    gap, plotted per round (with the communication rounds so far); the measurement is the
    largest gap, passing at :data:`~theory_checks.tolerances.IDENTITY_RTOL`. ``fields`` are the
    measurement's other fields (``details``)."""
    worst, series = 0.0, []
    for rec in records[1:]:
        relative = gap(rec)
        worst = max(worst, relative)
        series.append(
            SeriesPoint("measured", "round", rec.iteration, relative, 0, rec.calls.comm_rounds)
        )
    return Measurement(
        worst,
        IDENTITY_RTOL,
        worst <= IDENTITY_RTOL,
        "relative gap <=",
        series=tuple(series),
        **fields,
    )


def local_points(records: list[Any]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Every local iterate ``(x_{r+1,k}, Z_{r+1,k})`` of a run (first local client), in order,
    and the round of each."""
    xs, Zs, rounds = [], [], []
    for rec in records[1:]:
        for it in rec.state.local:
            xs.append(it.x[0])
            Zs.append(it.Z[0])
            rounds.append(rec.iteration)
    return torch.stack(xs), torch.stack(Zs), rounds


def single_timescale_step(problem: Any) -> tuple[float, float, float]:
    """Steps ``(alpha, beta)`` that make centralised MSA contract, and the spectral radius of
    ``I - diag(alpha, beta) J``; NotMeasurable when no tried pair contracts."""
    J = joint_jacobian(problem)
    dx, _ = state_sizes(problem)
    norm = float(torch.linalg.matrix_norm(J, ord=2))
    eye = torch.eye(J.shape[0], dtype=torch.float64)
    best = (math.inf, 0.0, 0.0)
    # Why a grid of fractions of 1/||J||: single-timescale MSA (alpha and beta of the same
    # order) contracts for small steps when every eigenvalue of J has a positive real part;
    # trying a few pairs and keeping the fastest avoids both an unstable and a needlessly slow
    # choice (the x-mode is often much slower than the Z-modes, so alpha may exceed beta).
    grid = (2.0, 1.2, 0.8, 0.5, 0.3, 0.15, 0.05)
    for a in grid:
        for b in grid:
            scale = torch.cat(
                [torch.full((dx,), a / norm), torch.full((J.shape[0] - dx,), b / norm)]
            )
            radius = float(torch.linalg.eigvals(eye - scale[:, None] * J).abs().max())
            if radius < best[0]:
                best = (radius, a / norm, b / norm)
    if best[0] >= 0.999:
        raise NotMeasurable(
            "centralised single-timescale MSA does not contract on this "
            "instance (a Jacobian eigenvalue has a non-positive real part)"
        )
    return best[1], best[2], best[0]


def msa_radius(problem: Any, alpha: float, beta: float) -> float:
    """Spectral radius of centralised MSA's iteration ``I - diag(alpha, beta) J`` with the
    steps ``alpha`` (outer) and ``beta`` (inner): below 1 when it contracts."""
    J = joint_jacobian(problem)
    dx, _ = state_sizes(problem)
    scale = torch.cat([torch.full((dx,), alpha), torch.full((J.shape[0] - dx,), beta)])
    eye = torch.eye(J.shape[0], dtype=torch.float64)
    return float(torch.linalg.eigvals(eye - scale[:, None] * J).abs().max())


def start_point(problem: Any, seed: int) -> torch.Tensor:
    """A seeded standard-normal outer point ``x`` of size ``d_x``."""
    dx, _ = state_sizes(problem)
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.standard_normal(dx), dtype=torch.float64)


# --------------------------------------------------------------------------- exponents

# Why 0.1 on an exponent: the values are exact expectations, so the only departure from the
# asymptotic power is pre-asymptotic: the criterion ramps up over the first ~horizon rounds from
# the fixed point and the momentum's memory 1/rho is a power of R, which bends the log-log line
# by relative corrections ~ horizon / R; on the rate claims' grids (R >= 4 horizons) they stay
# under a few hundredths (measured: the proof-choice slope is -0.59 over R = 16..1024 on the
# slowest contraction seen and -0.66 on the others).
EXPONENT_TOL = 0.1
THEORY_M_EXPONENT = -2.0 / 3.0  # (sigma / (M K R))^{2/3}: the slowest term of Thm 3.1 in M and R


def fixed_point(problem: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x*, Z*(x*))`` with ``P(x*, Z*(x*)) = 0`` (the reduced map is affine in x)."""
    dx, _ = state_sizes(problem)

    def reduced(x: torch.Tensor) -> torch.Tensor:
        return mean_maps(problem, x, fixed_point_Z(problem, x))[0]

    A = affine_matrix(reduced, dx)
    cond = float(torch.linalg.cond(A))
    # Why 1e6: beyond it the solve's round-off (cond * 1e-16) is no longer negligible.
    if not math.isfinite(cond) or cond > 1e6:
        raise NotMeasurable(f"reduced map nearly singular (condition number {cond:.3g})")
    x_star = torch.linalg.solve(A, -reduced(torch.zeros(1, dx, dtype=torch.float64))[0])
    return x_star, fixed_point_Z(problem, x_star[None])[0]


def exponent_measurement(
    quantity: str,
    sizes: Sequence[float],
    values: Sequence[float],
    theory: float,
    bound: float,
    details: dict[str, Any],
    step_name: str,
) -> Measurement:
    """Least-squares exponent of exact values (a deterministic curve) against ``bound``."""
    sizes_a, values_a = np.asarray(sizes, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if not (np.isfinite(values_a).all() and values_a.min() > 0.0):
        raise NotMeasurable("criterion exactly zero or not finite")
    raw = stats.fit_exponent(sizes_a, values_a)
    local = (np.diff(np.log(values_a)) / np.diff(np.log(sizes_a))).tolist()
    # exact values: no sampling interval (confidence 1); the local exponents are in details
    fit = Fit(quantity, raw.slope, raw.slope, raw.slope, theory, bound - theory, 1.0)
    series = tuple(
        SeriesPoint("measured", step_name, float(s), float(v))
        for s, v in zip(sizes_a, values_a, strict=True)
    )
    return Measurement(
        raw.slope,
        bound,
        raw.slope <= bound,
        "exact exponent <=",
        series=series,
        fit=fit,
        details={**details, "values": values_a.tolist(), "local_exponents": local},
    )


# =============================================================================== cases


MOMENTA = st.sampled_from([0.0, 0.3, 1.0])


def families(
    *,
    stochastic: bool = False,
    tau_zero: bool = False,
    max_dim: int = 4,
    max_clients: int = 6,
    kappa: tuple[float, float] = (1.0, 30.0),
    max_levels: int = 3,
) -> st.SearchStrategy[Any]:
    """The closed-form families (bilevel, minimax, compositional) at these sizes; ``stochastic``
    adds sample noise, ``tau_zero`` makes the clients' Hessians (Jacobians) identical."""
    hh = 0.0 if tau_zero else 0.5
    noise: dict[str, Any] = (
        {"n_samples": 5, "gradient_noise": 0.5, "hessian_noise": 0.1} if stochastic else {}
    )
    mco_noise: dict[str, Any] = (
        {"n_samples": 5, "matrix_noise": 0.1, "value_noise": 0.5} if stochastic else {}
    )
    return st.one_of(
        strategies.quadratic_bilevel(
            max_clients=max_clients,
            max_dim=max_dim,
            kappa=kappa,
            max_hessian_heterogeneity=hh,
            **noise,
        ),
        strategies.quadratic_minimax(
            max_clients=max_clients,
            max_dim=max_dim,
            kappa=kappa,
            max_hessian_heterogeneity=hh,
            **noise,
        ),
        strategies.linear_compositional(
            max_clients=max_clients,
            max_dim=max_dim,
            max_levels=max_levels,
            kappa=kappa,
            max_jacobian_heterogeneity=0.0 if tau_zero else 0.5,
            **mco_noise,
        ),
    )


def cases_of(
    problems: st.SearchStrategy[Any],
    fixed: Mapping[str, Any] | None = None,
    **params: st.SearchStrategy[Any],
) -> Callable[[], st.SearchStrategy[Case]]:
    """A claim's strategy: cases of ``problems``, each with a drawn seed, the drawn ``params``
    and the ``fixed`` parameters (the same in every case)."""
    constant = dict(fixed or {})

    def make() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed, extra: Case(problem, {"seed": seed, **extra, **constant}),
            problems,
            strategies.SEEDS,
            st.fixed_dictionaries(params),
        )

    return make
