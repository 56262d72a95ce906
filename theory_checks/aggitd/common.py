"""Shared helpers of the AggITD claims: the exact-run sentinel :data:`NO_DRAWS`, the case
strategies, :class:`ExactView` (dense derivatives of one problem, with the paper's constants from
:mod:`theory_checks.aggitd.constants`), the estimator runner and the affine hypergradient and
fixed-subset context of the algorithm checks (notation: :mod:`theory_checks.aggitd`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from problems import strategies
from testbed.estimators.base import InnerState
from testbed.federation.context import FederatedContext
from testbed.federation.sampling import FixedParticipants
from testbed.oracles import Oracles
from theory_checks.aggitd.constants import aggitd_constants, dissimilarity_sq
from theory_checks.claim import Case, NotMeasurable
from theory_checks.classical.checks import closed_form_problems
from theory_checks.exact_quantities import evaluation_point, outer_affine, quadratic_view


class NoDraws:
    """Stands in for a run's generator in the exact checks. With exact oracles (no samples), full
    participation and a fixed Q (or the exact mean over Q, expectation mode) a run has nothing to
    draw, so these checks are deterministic, not Monte Carlo with a fixed seed: any draw is an
    error, raised here."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"an exact AggITD check drew a random number (rng.{name})")


NO_DRAWS: Any = NoDraws()


class ExtremeIndexDraw(NoDraws):
    """A generator for one draw of AggITD's index ``Q ~ U{0..N}`` (Alg. 1 line 1) that returns
    the lowest (``end="low"``) or the highest (``"high"``) value the draw can give, so a check
    reads the support the estimator samples from in two runs: it must be exactly ``0..N`` (the
    range the mean over Q, eq. (11), is taken over). Any other draw is refused, as by
    :class:`NoDraws`."""

    def __init__(self, end: str) -> None:
        self.end = end

    def integers(self, low: int, high: int | None = None, size: Any = None) -> int:
        if size is not None:
            raise RuntimeError("an index check drew an array (rng.integers(size=...))")
        low, high = (0, low) if high is None else (low, high)
        return int(low if self.end == "low" else high - 1)


# --------------------------------------------------------------------------- strategies


def closed_form_cases(kinds: tuple[str, ...] = ("bilevel", "minimax", "compositional"),
                      **problem_kwargs: Any) -> Callable[[], st.SearchStrategy[Case]]:
    """Cases of the closed-form families ``kinds`` (keyword sizes ``problem_kwargs``) with a
    drawn ``point_seed``."""
    def build() -> st.SearchStrategy[Case]:
        return st.builds(lambda problem, seed: Case(problem, {"point_seed": seed}),
                         closed_form_problems(kinds, **problem_kwargs), strategies.SEEDS)

    return build


def bilevel_cases(**problem_kwargs: Any) -> Callable[[], st.SearchStrategy[Case]]:
    """Cases of quadratic bilevel problems (keyword sizes ``problem_kwargs``) with a drawn
    ``point_seed``."""
    def build() -> st.SearchStrategy[Case]:
        return st.builds(lambda problem, seed: Case(problem, {"point_seed": seed}),
                         strategies.quadratic_bilevel(**problem_kwargs), strategies.SEEDS)

    return build


# --------------------------------------------------------------------------- exact helpers


class ExactView:
    """Dense derivatives and per-client Hessians of one problem, with the paper's constants
    (``paper``, :func:`~theory_checks.aggitd.constants.aggitd_constants`: ``mu``, ``L_g`` and
    ``L_f`` are Assumptions 1-2's, per sample and jointly in ``(x, y)``)."""

    def __init__(self, problem: Any, x: torch.Tensor) -> None:
        self.problem = problem
        self.x = x
        self.constants = problem.constants()
        self.y_star = problem.exact_inner_solution(x)
        self.view = quadratic_view(problem, x, self.y_star)
        self.H, self.J = self.view.H, self.view.J
        self.oracles = Oracles(problem)
        self.clients = torch.arange(problem.n_clients)
        eye = torch.eye(problem.dim_y, dtype=torch.float64)
        cols = [self.oracles.hvp_inner(x, self.y_star, e, self.clients) for e in eye]
        self.client_H = torch.stack(cols, dim=2)  # (M, dy, dy): column k is H_i e_k
        self.paper = aggitd_constants(problem)
        self.mu, self.L_g, self.L_f = self.paper.mu, self.paper.L_g, self.paper.L_f
        self.eye = eye

    def grad_outer(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.view.grad_outer(self.x, y)

    def heterogeneity_sq(self, y: torch.Tensor) -> float:
        """Assumption 4's dissimilarity at ``(x, y)`` (:func:`~theory_checks.aggitd.constants.
        dissimilarity_sq`)."""
        return dissimilarity_sq(self.problem, self.x, y)

    def fedsvrg_trajectory(self, y0: torch.Tensor, steps: int, beta: float, tau: int
                           ) -> list[torch.Tensor]:
        """Deterministic FedSVRG (Alg. 2) on a quadratic, full participation, in closed form.

        ``w_tau - y = -eta sum_{j<tau} (I - eta H_i)^j grad g(y)`` with ``eta = beta / tau``.
        """
        eta = beta / tau
        powers = [self.eye.expand_as(self.client_H)]
        for _ in range(tau - 1):
            powers.append(powers[-1] @ (self.eye - eta * self.client_H))
        step_matrix = eta * torch.stack(powers).sum(0).mean(0)
        ys = [y0]
        for _ in range(steps):
            grad = self.oracles.grad_inner(self.x, ys[-1], self.clients).mean(0)
            ys.append(ys[-1] - step_matrix @ grad)
        return ys

    def indirect_sum(self, ys: list[torch.Tensor], lam: float) -> torch.Tensor:
        """``sum_{Q=0}^{N} prod_{t=N}^{Q+1} (I - lam H(y^t)) grad_y f(x, y^Q)`` (eq. 11)."""
        total = torch.zeros_like(self.y_star)
        for y in ys:
            total = (self.eye - lam * self.H) @ total + self.grad_outer(y)[1]
        return total

    def scale(self, y: torch.Tensor) -> float:
        gx, gy = self.grad_outer(y)
        Hinv = torch.linalg.inv(self.H)
        return float(gx.norm() + torch.linalg.matrix_norm(self.J @ Hinv, ord=2) * gy.norm()
                     ) + 1e-300


def exact_setup(case: Case) -> tuple[ExactView, torch.Tensor, torch.Tensor]:
    """The case's exact view at its evaluation point ``(x, y0)`` (seeded by ``point_seed``),
    with ``x`` and ``y0``."""
    x, y0 = evaluation_point(case.problem, case.params["point_seed"])
    return ExactView(case.problem, x), x, y0


def run_estimate(make: Callable[..., Any], problem: Any, x: torch.Tensor, y0: torch.Tensor,
                 rng: Any = NO_DRAWS, **params: Any) -> Any:
    """One estimate at ``(x, y0)`` of the estimator ``make(**params)`` (with no random draws
    unless ``rng`` is given)."""
    estimator = make(**params)
    estimator.init(problem)
    return estimator.estimate(problem, x, InnerState(y0), rng)


def outer_spectrum(problem: Any) -> torch.Tensor:
    """Eigenvalues of ``grad^2 h`` (the outer objective's Hessian,
    :func:`~theory_checks.exact_quantities.outer_affine`);
    :class:`NotMeasurable` when ``h`` is not strongly convex (no lower bound, no limit)."""
    G, _ = outer_affine(problem)
    eig = torch.linalg.eigvalsh(G)
    if float(eig.min()) <= 0.0:
        raise NotMeasurable("outer objective not strongly convex: no lower bound, no limit")
    return eig


def fixed_clients_context(problem: Any, rng: Any, subset: torch.Tensor) -> FederatedContext:
    """A context whose every round uses one given client subset (to enumerate subsets)."""
    return FederatedContext(problem, rng,
                            sampler=FixedParticipants(subset, problem.n_clients))
