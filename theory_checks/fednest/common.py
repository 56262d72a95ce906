"""FedNest's shared helpers: paper/reference names, client matrices, the linear-outer probe,
the scripted context, FedIHGP's exact expectation over ``N'``, affine maps read column by
column, and the hypothesis strategies of :mod:`theory_checks.fednest`'s claims (the A1-A2
constants live in :mod:`theory_checks.fednest.constants`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import ProblemConstants, QuadraticBilevel, strategies
from testbed.federation.context import FederatedContext
from testbed.federation.sampling import ClientSampler, ScriptedParticipants
from testbed.oracles import Oracles
from theory_checks.claim import Case, NotMeasurable
from theory_checks.exact_quantities import outer_affine

PAPER = "FedNest"
REF = "Tarzanagh et al. 2022"


# =============================================================================== helpers


def all_clients(problem: Any) -> torch.Tensor:
    """The indices of every client: full participation."""
    return torch.arange(problem.n_clients)


def client_matrices(problem: Any, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-client ``H_i (M, dy, dy)``, ``J_i (M, dx, dy)``, ``grad_x f_i``, ``grad_y f_i``."""
    oracles, clients = Oracles(problem), all_clients(problem)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    H = torch.stack([oracles.hvp_inner(x, y, e, clients) for e in eye], dim=2)
    J = torch.stack([oracles.jvp_inner_xy(x, y, e, clients) for e in eye], dim=2)
    gx, gy = oracles.grad_outer(x, y, clients)
    return {"H": 0.5 * (H + H.transpose(1, 2)), "J": J, "gx": gx, "gy": gy}


class LinearOuterProbe:
    """``problem`` with every outer loss replaced by ``v^T y``, so ``grad_y f_i = v``.

    FedIHGP applied to the probe returns ``H_hat v``; probing ``v = e_j`` reads the columns of
    ``E[H_hat]`` (Lemma 2.2 is a statement about a matrix).
    """

    def __init__(self, base: Any, v: torch.Tensor) -> None:
        self.base, self.v = base, v
        self.kind, self.n_clients = base.kind, base.n_clients
        self.dim_x, self.dim_y = base.dim_x, base.dim_y

    @property
    def id(self) -> str:
        return f"probe({self.base.id})"

    def outer_loss(self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor,
                   batch: Any) -> torch.Tensor:
        return (y * self.v).sum(-1) + 0.0 * x.sum(-1)

    def inner_loss(self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor,
                   batch: Any) -> torch.Tensor:
        return self.base.inner_loss(x, y, clients, batch)

    def sample_batch(self, rng: np.random.Generator, clients: torch.Tensor,
                     batch_size: int) -> Any:
        return self.base.sample_batch(rng, clients, batch_size)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.initial_point()

    def constants(self) -> ProblemConstants:
        return self.base.constants()


def scripted_context(problem: Any, subsets: Iterable[torch.Tensor],
                     participation: int) -> FederatedContext:
    """A federated context whose next participant sets are ``subsets`` (exact enumeration of
    client sampling), then ``participation`` clients drawn as usual."""
    then = ClientSampler(problem.n_clients, participation)
    return FederatedContext(problem, np.random.default_rng(0), participation,
                            sampler=ScriptedParticipants(list(subsets), then))


def expected_ihgp(estimator: Any, problem: Any, x: torch.Tensor,
                  y: torch.Tensor) -> tuple[torch.Tensor, float, Any]:
    """``E[p]`` and ``E||p||^2`` over ``N'`` (exact finite sum; full participation)."""
    ctx = FederatedContext(problem, np.random.default_rng(0))
    result = estimator.ihgp(ctx, x, y, truncation_index=estimator.neumann_terms - 1)
    path = torch.stack(result.path)
    probs = torch.as_tensor(estimator.truncation_probabilities(), dtype=torch.float64)
    mean = (probs[:, None] * path).sum(0)
    second = float((probs * (path**2).sum(1)).sum())
    return mean, second, result


def fedihgp(make: Callable[..., Any], terms: int, lam: float, **kw: Any) -> Any:
    """FedIHGP alone (Alg. 3, no inner steps) from the builder ``make``: ``terms`` Neumann
    terms of step ``lam``."""
    return make(inner_steps=0, neumann_terms=terms, neumann_step_size=lam, **kw)


def measured_map(update: Callable[[torch.Tensor], torch.Tensor], center: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(update(center) - center, columns update(center + e_j) - update(center))``."""
    base = update(center)
    eye = torch.eye(center.shape[0], dtype=torch.float64)
    columns = [update(center + e) - base for e in eye]
    return base - center, torch.stack(columns, dim=1)


def outer_minimizer(problem: Any) -> torch.Tensor:
    """``x* = argmin f = -G^{-1} g0`` of a closed-form problem, whose outer gradient is
    ``G x + g0`` (:func:`~theory_checks.exact_quantities.outer_affine`); not measurable when
    ``f`` is not strongly convex (Thm 3.1's K-rate regime and the floor's limit need it)."""
    hess, g0 = outer_affine(problem)
    if float(torch.linalg.eigvalsh(hess).min()) <= 0.0:
        raise NotMeasurable("f is not strongly convex: the K-rate regime is not reached")
    return torch.linalg.solve(hess, -g0)


# =============================================================================== strategies


def case_builder(problems: st.SearchStrategy[Any], **params: st.SearchStrategy[Any]
                 ) -> Callable[[], st.SearchStrategy[Case]]:
    """A claim's strategy: cases of ``problems`` with a drawn ``point_seed`` and the drawn
    ``params``."""
    def build() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed, values: Case(problem, {"point_seed": seed, **values}),
            problems, strategies.SEEDS, st.fixed_dictionaries(params))

    return build


def bilevel_problems(max_clients: int = 6, max_dim: int = 4,
                     kappa: tuple[float, float] = (1.0, 30.0),
                     min_dim_y: int = 1) -> st.SearchStrategy[Any]:
    """Quadratic bilevel problems of :func:`problems.strategies.quadratic_bilevel`."""
    return strategies.quadratic_bilevel(max_clients=max_clients, max_dim=max_dim, kappa=kappa,
                                        min_dim_y=min_dim_y)


@st.composite
def heterogeneous_bilevel(draw: st.DrawFn, min_hessian: float = 0.2, max_hessian: float = 0.9,
                          max_dim: int = 4, kappa_max: float = 20.0,
                          clients: tuple[int, int] = (2, 6)) -> QuadraticBilevel:
    """Bilevel problems with several clients, Hessian heterogeneity >= min_hessian and
    gradient heterogeneity >= 0.5."""
    dim_x = draw(st.integers(1, max_dim))
    dim_y = draw(st.integers(1, max_dim))
    n_clients = draw(st.integers(*clients))
    kappa = 1.0 if dim_y == 1 else draw(st.floats(1.0, kappa_max))
    hh = draw(st.floats(min_hessian, max_hessian))
    gh = draw(st.floats(0.5, 3.0))
    return QuadraticBilevel.random(n_clients, dim_x, dim_y, kappa, seed=draw(strategies.SEEDS),
                                   hessian_heterogeneity=hh, gradient_heterogeneity=gh)


@st.composite
def per_client_taus(draw: st.DrawFn, problem: Any, low: int = 1, high: int = 4
                    ) -> tuple[int, ...]:
    """A number of local steps in ``[low, high]`` for each client of ``problem``."""
    return tuple(draw(st.integers(low, high)) for _ in range(problem.n_clients))

