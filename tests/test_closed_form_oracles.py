"""The closed-form batched oracles of the quadratic families (issue 12) equal autodiff of the
losses they belong to, on every kind of client set the algorithms pass.

``testbed.Oracles`` calls a problem's ``oracle_*`` methods when it has them; ``autograd=True``
differentiates :meth:`Problem.outer_loss` / :meth:`Problem.inner_loss` instead. The two are
compared on the shared all-clients tensor (the no-gather path), an equal but distinct ``arange``,
a subset, a subset with repeated clients, shared ``(d,)`` and per-row ``(C, d)`` points, and
exact and minibatch oracles. Why 1e-12 relative: both sides are a few float64 matrix-vector
products of O(1)-conditioned arrays (round-off ~1e-15); a wrong client row, a missing
symmetrisation or a dropped term is off by O(1).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import all_clients
from testbed.oracles import Oracles

RTOL = 1e-12

PROBLEMS = {
    "bilevel": lambda: QuadraticBilevel.random(
        5, 3, 4, 8.0, 0.4, seed=3, n_samples=6, gradient_noise=0.5, hessian_noise=0.2
    ),
    "minimax": lambda: QuadraticMinimax.random(
        5, 3, 4, 6.0, 0.3, seed=4, n_samples=6, gradient_noise=0.3, hessian_noise=0.2
    ),
    "compositional": lambda: LinearCompositional.random(
        5, (3, 4), seed=5, heterogeneity=0.3, n_samples=6, matrix_noise=0.2, value_noise=0.3
    ),
}

CLIENT_SETS = {
    "shared all": lambda m: all_clients(m),
    "equal arange": lambda m: torch.arange(m),
    "subset": lambda m: torch.tensor([3, 0, 4]),
    "repeated": lambda m: torch.tensor([1, 1, 2, 1]),
}


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    scale = max(1.0, float(b.abs().max()))
    assert float((a - b).abs().max()) <= RTOL * scale, float((a - b).abs().max())


@pytest.mark.parametrize("family", sorted(PROBLEMS))
@pytest.mark.parametrize("client_set", sorted(CLIENT_SETS))
@pytest.mark.parametrize("minibatch", [False, True])
@pytest.mark.parametrize("per_row", [False, True])
def test_closed_form_oracles_equal_autodiff(family, client_set, minibatch, per_row):
    problem = PROBLEMS[family]()
    closed, auto = Oracles(problem), Oracles(problem, autograd=True)
    assert closed.closed_form is problem and auto.closed_form is None
    clients = CLIENT_SETS[client_set](problem.n_clients)
    count = int(clients.shape[0])
    gen = torch.Generator().manual_seed(7)

    def point(dim: int) -> torch.Tensor:
        shape = (count, dim) if per_row else (dim,)
        return torch.randn(shape, dtype=torch.float64, generator=gen)

    x, y, v = point(problem.dim_x), point(problem.dim_y), point(problem.dim_y)
    batch = problem.sample_batch(np.random.default_rng(11), clients, 3) if minibatch else None
    for a, b in zip(
        closed.grad_outer(x, y, clients, batch), auto.grad_outer(x, y, clients, batch), strict=True
    ):
        _close(a, b)
    _close(closed.grad_outer_x(x, y, clients, batch), auto.grad_outer_x(x, y, clients, batch))
    _close(closed.grad_outer_y(x, y, clients, batch), auto.grad_outer_y(x, y, clients, batch))
    _close(closed.grad_inner(x, y, clients, batch), auto.grad_inner(x, y, clients, batch))
    _close(closed.hvp_inner(x, y, v, clients, batch), auto.hvp_inner(x, y, v, clients, batch))
    _close(closed.jvp_inner_xy(x, y, v, clients, batch), auto.jvp_inner_xy(x, y, v, clients, batch))
    # the same oracle calls are counted on both paths
    assert closed.counter.snapshot() == auto.counter.snapshot()


def test_a_wrong_closed_form_oracle_is_caught(monkeypatch):
    """The comparison above can fail: a closed-form HVP that applies client 0's Hessian for
    every client (a client-indexing slip) differs from autodiff on a heterogeneous problem."""
    problem = PROBLEMS["bilevel"]()
    original = type(problem).oracle_hvp_inner

    def first_client_only(self, x, y, v, clients, batch):
        return original(self, x, y, v, torch.zeros_like(clients), batch)

    monkeypatch.setattr(type(problem), "oracle_hvp_inner", first_client_only)
    clients = all_clients(problem.n_clients)
    y = torch.ones(problem.dim_y, dtype=torch.float64)
    x = torch.ones(problem.dim_x, dtype=torch.float64)
    with pytest.raises(AssertionError):
        _close(
            Oracles(problem).hvp_inner(x, y, y, clients),
            Oracles(problem, autograd=True).hvp_inner(x, y, y, clients),
        )
