"""Counted batched oracles agree with the closed forms, per client, and count exactly."""

import torch
from hypothesis import given
from hypothesis import settings

from problems import strategies
from testbed import Oracles
from tests._tol import IDENTITY_RTOL


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=IDENTITY_RTOL, atol=IDENTITY_RTOL)


@settings(max_examples=15)
@given(strategies.quadratic_bilevel(max_clients=6))
def test_oracles_equal_closed_form_per_client(p):
    M = p.n_clients
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(M, p.dim_x, generator=gen)
    y = torch.randn(M, p.dim_y, generator=gen)
    v = torch.randn(M, p.dim_y, generator=gen)
    clients = torch.arange(M)
    oracles = Oracles(p)
    gx, gy = oracles.grad_outer(x, y, clients)
    _close(gy, torch.einsum("mij,mj->mi", p.C, y) + torch.einsum("mij,mj->mi", p.D, x) + p.c)
    _close(gx, torch.einsum("mji,mj->mi", p.D, y) + torch.einsum("mij,mj->mi", p.E, x) + p.e)
    _close(
        oracles.grad_inner(x, y, clients),
        torch.einsum("mij,mj->mi", p.A, y) - torch.einsum("mij,mj->mi", p.B, x) - p.b,
    )
    _close(oracles.hvp_inner(x, y, v, clients), torch.einsum("mij,mj->mi", p.A, v))
    _close(
        oracles.jvp_inner_xy(x, y, v, clients),
        torch.einsum("mij,mj->mi", p.client_cross_jacobians(), v),
    )
    calls = oracles.counter.snapshot()
    assert (calls.grad_f, calls.grad_g, calls.hvp, calls.jvp) == (M, M, M, M)


def test_repeated_and_subset_clients_are_evaluated_separately():
    from problems import QuadraticBilevel

    p = QuadraticBilevel.random(5, 2, 3, 4.0, 0.5, seed=1, gradient_heterogeneity=1.0)
    oracles = Oracles(p)
    clients = torch.tensor([3, 3, 0])
    x, y = torch.zeros(2), torch.ones(3)
    g = oracles.grad_inner(x, y, clients)
    _close(g[0], g[1])
    _close(g[2], p.A[0] @ y - p.b[0])
    assert oracles.counter.snapshot().grad_g == 3
