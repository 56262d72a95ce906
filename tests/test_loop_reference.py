"""The batched client axis computes what the per-client loop computes.

:class:`problems.PerClientLoop` evaluates each client's row through the wrapped problem alone and
stacks the rows; the benchmarks time the batched problem against it, so the two must be the same
function. Every oracle and one outer step of FedNest and of FBO-AggITD are compared.

Why ``LOOP_RTOL = 1e-12``: both sides do the same float64 operations on the same numbers per
client; only the summation order inside a batched kernel (einsum or vmap-ed matmul over ``C``
rows) may differ from the single-row kernel, which moves a sum of ``d`` products by at most
``d eps`` of its terms' magnitude: ``d <= 5`` on the quadratics (~1e-15), ``d <= 200`` (the MLP's
hidden width) on the workload (~4e-14). One outer step chains about a hundred such evaluations,
each error entering additively (the maps are contractions on these well-conditioned problems), so
the accumulated difference stays below 1e-13; 1e-12 leaves a margin while a mixed-up client row
would be off by O(1) (the row-coupled problem below shows the comparison catches it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import PerClientLoop
from problems import PerClientQuadratic
from problems import ProblemError
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems.workloads import build_workload
from testbed import Oracles
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.fednest import FedNest
from testbed.federation.context import FederatedContext

LOOP_RTOL = 1e-12


def _close(batched: torch.Tensor, looped: torch.Tensor) -> None:
    scale = max(1.0, float(batched.abs().max()))
    torch.testing.assert_close(looped, batched, rtol=LOOP_RTOL, atol=LOOP_RTOL * scale)


def _family(name: str):
    if name == "bilevel":
        return QuadraticBilevel.random(
            6, 3, 4, 10.0, 0.3, seed=1, n_samples=5, gradient_noise=0.5, hessian_noise=0.2
        )
    if name == "minimax":
        return QuadraticMinimax.random(
            5, 3, 4, 10.0, 0.3, seed=2, n_samples=4, gradient_noise=0.5, hessian_noise=0.2
        )
    if name == "compositional":
        return LinearCompositional.random(
            5, [3, 4], seed=3, heterogeneity=0.5, n_samples=4, matrix_noise=0.2, value_noise=0.5
        )
    if name == "per-client-hyper":
        return PerClientQuadratic.random(
            5,
            2,
            3,
            5.0,
            seed=4,
            outer_coupling=0.5,
            n_samples=4,
            hessian_noise=0.2,
            cross_noise=0.3,
            gradient_noise=0.5,
        )
    # the MLP hyper-representation workload (vmap over clients), in float64 so that the
    # comparison is at float64 round-off like the others
    return build_workload(
        "hyper_representation",
        "digits",
        {"scheme": "iid", "n_clients": 5},
        model="mlp",
        seed=0,
        dtype=torch.float64,
    )


FAMILIES = ("bilevel", "minimax", "compositional", "per-client-hyper", "mlp-workload")
# (family, minibatch): every family both ways, except the MLP workload on minibatches only: its
# full local objectives go through the same vmap-ed rows, and a looped full-data pass costs
# seconds of this file's ~10 s budget.
CASES = [(f, b) for f in FAMILIES for b in (False, True) if f != "mlp-workload" or b]


# outputs that are zero by the family's structure (a compositional f_i reads only y)
STRUCTURAL_ZEROS = {("compositional", "grad_outer_x")}


def _oracle_outputs(problem, x, y, v, clients, batch):
    oracles = Oracles(problem)
    gx, gy = oracles.grad_outer(x, y, clients, batch)
    return {
        "grad_outer_x": gx,
        "grad_outer_y": gy,
        "grad_inner": oracles.grad_inner(x, y, clients, batch),
        "hvp_inner": oracles.hvp_inner(x, y, v, clients, batch),
        "jvp_inner_xy": oracles.jvp_inner_xy(x, y, v, clients, batch),
    }, oracles.counter.snapshot()


@pytest.mark.parametrize(("family", "minibatch"), CASES)
def test_every_oracle_agrees_between_batched_and_looped(family, minibatch):
    problem = _family(family)
    gen = torch.Generator().manual_seed(0)
    # repeated and out-of-order clients: the loop must keep each row with its own client
    clients = torch.tensor([0, 3, 3, problem.n_clients - 1, 1])
    x = torch.randn(5, problem.dim_x, generator=gen)
    y = torch.randn(5, problem.dim_y, generator=gen)
    v = torch.randn(5, problem.dim_y, generator=gen)
    batch = problem.sample_batch(np.random.default_rng(0), clients, 3) if minibatch else None
    batched, calls_batched = _oracle_outputs(problem, x, y, v, clients, batch)
    looped, calls_looped = _oracle_outputs(PerClientLoop(problem), x, y, v, clients, batch)
    for name, value in batched.items():
        if (family, name) not in STRUCTURAL_ZEROS:
            assert float(value.abs().max()) > 0.0, f"{name} is zero: a vacuous comparison"
        _close(value, looped[name])
    assert calls_batched == calls_looped  # a looped evaluation still counts per client


def _sizes(inner: float) -> dict[str, float]:
    """Minibatches of 2, inner and Neumann steps ``inner``, outer step 0.05."""
    return {
        "batch_size": 2,
        "inner_step_size": inner,
        "neumann_step_size": inner,
        "outer_step_size": 0.05,
    }


def _steps(problem):
    constants = problem.constants()
    # explicit step sizes (the loop exposes only the Problem contract, not constants()):
    # FedNest's 1/l_{g,1} and AggITD's 1/L, the defaults each algorithm would read itself
    fednest = FedNest(
        inner_steps=2, neumann_terms=4, local_steps=3, **_sizes(1.0 / constants.L_clients)
    )
    aggitd = FBOAggITD(inner_steps=3, local_steps=2, **_sizes(1.0 / constants.L))
    return {"fednest": fednest, "fbo-aggitd": aggitd}


@pytest.mark.parametrize("name", ["fednest", "fbo-aggitd"])
def test_one_outer_step_agrees_between_batched_and_looped(name):
    problem = _family("bilevel")
    algorithm = _steps(problem)[name]
    states, calls = [], []
    for side in (problem, PerClientLoop(problem)):
        # the same seed on both sides: the loop delegates sample_batch, so both draw the same
        # clients, truncation index and minibatches
        ctx = FederatedContext(
            side, np.random.default_rng(3), algorithm.participation, algorithm.batch_size
        )
        states.append(algorithm.step(ctx, algorithm.init(side)))
        calls.append(ctx.calls())
    batched, looped = states
    assert not torch.equal(batched.x, problem.initial_point()[0])  # the step moved x
    _close(batched.x, looped.x)
    _close(batched.y, looped.y)
    assert calls[0] == calls[1]


class _RowCoupled(QuadraticBilevel):
    """A broken problem: each row's inner loss also reads the other rows (centred over rows)."""

    def inner_loss(self, x, y, clients, batch):
        loss = super().inner_loss(x, y, clients, batch)
        return loss - loss.mean() + 0.1 * (y.sum() - y.sum(-1))


def test_the_comparison_catches_a_problem_that_breaks_row_separability():
    honest = QuadraticBilevel.random(4, 2, 3, 5.0, 0.3, seed=5)
    broken = _RowCoupled(*(getattr(honest, k) for k in "A B b C D c E e".split()))
    clients = torch.arange(4)
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 2, generator=gen), torch.randn(4, 3, generator=gen)
    batched = Oracles(broken).grad_inner(x, y, clients)
    looped = Oracles(PerClientLoop(broken)).grad_inner(x, y, clients)
    with pytest.raises(AssertionError):
        _close(batched, looped)


def test_the_wrapper_keeps_the_contract_and_rejects_bad_input():
    problem = _family("bilevel")
    loop = PerClientLoop(problem)
    assert (loop.kind, loop.n_clients, loop.dim_x, loop.dim_y) == (
        problem.kind,
        problem.n_clients,
        problem.dim_x,
        problem.dim_y,
    )
    assert loop.id == f"loop({problem.id})"
    for a, b in zip(loop.initial_point(), problem.initial_point(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ProblemError, match="one row per evaluated client"):
        loop.inner_loss(torch.zeros(2, 3), torch.zeros(3, 4), torch.arange(3), None)
    with pytest.raises(ProblemError, match="Problem contract"):
        PerClientLoop(object())  # type: ignore[arg-type]
