"""HGP's closed-form step products on :class:`problems.PerClientQuadratic` equal the autodiff
oracles' bit for bit (:meth:`~problems.PerClientQuadratic.curvature_products`), so the
replicated runs of the HGP claims record the same numbers with or without them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from problems import PerClientQuadratic
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.hgp import own_blocks
from testbed.decentralized.ledger import ROW_FORM_REPLICAS
from testbed.oracles import Oracles
from theory_checks.hgp.perturbations import SumReductionView

# Every shape and minibatch size the HGP claims draw (clients <= 4, dims <= 3, b in 1, 2, 4;
# b = 3 besides), one replica and many stacked (the row layout of a replicated run); with 40
# replicas the means of b <= 2 come from the problem's table of every minibatch's mean, with 8192
# (16384 rows: an eighth of the 2 x 16^4 minibatches) those of b = 3, 4 too.
SHAPES = list(itertools.product((2, 4), (1, 2, 3), (1, 3), (None, 1, 2, 3, 4), (1, 40)))
SHAPES += list(itertools.product((2,), (1, 3), (2,), (3, 4), (8192,)))


def _problem(n: int, dy: int, dl: int) -> PerClientQuadratic:
    return PerClientQuadratic.random(
        n,
        dl,
        dy,
        2.0,
        seed=7 * n + dy + 10 * dl,
        n_samples=16,
        hessian_noise=0.3,
        cross_noise=0.5,
        hessian_heterogeneity=0.3,
        outer_coupling=0.5,
    )


def _rows(problem: PerClientQuadratic, replicas: int) -> tuple[torch.Tensor, ...]:
    rng = np.random.default_rng(3)
    count = problem.n_clients * replicas
    x = torch.as_tensor(rng.standard_normal(problem.dim_x))
    y = torch.as_tensor(rng.standard_normal((count, problem.dim_y)))
    # values over many binades, so that a different order of the sums shows in the last bits
    u = torch.as_tensor(rng.standard_normal((count, problem.dim_y)) * np.exp(rng.normal(0, 3)))
    return x, y, u, torch.arange(problem.n_clients).repeat(replicas)


# independent samples for the two products, or one for both (the practical form: on the CPU
# one lookup in the table of both means side by side where a table pays)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize(("n", "dy", "dl", "b", "replicas"), SHAPES)
def test_curvature_products_equal_autodiff(
    n: int, dy: int, dl: int, b: int | None, replicas: int, shared: bool
):
    problem = _problem(n, dy, dl)
    x, y, u, clients = _rows(problem, replicas)
    rng = np.random.default_rng(5)
    batch_j = None if b is None else problem.sample_batch(rng, clients, b)
    batch_h = batch_j if shared or b is None else problem.sample_batch(rng, clients, b)
    oracles = Oracles(problem)
    jv, hv = problem.curvature_products(u, clients, batch_j, batch_h)
    own = own_blocks(problem, oracles.jvp_inner_xy(x, y, u, clients, batch_j), clients)
    assert torch.equal(jv, own)
    assert torch.equal(hv, oracles.hvp_inner(x, y, u, clients, batch_h))


class _AutodiffOnly(PerClientQuadratic):
    """The same problem without the closed form: HGP falls back to the oracles."""

    curvature_products = None  # type: ignore[assignment]


def _autodiff_only(problem: PerClientQuadratic) -> _AutodiffOnly:
    arrays = {k: getattr(problem, k) for k in ("A", "b", "C", "Q", "t", "P")}
    samples = {k: getattr(problem, k) for k in ("A_samples", "b_samples", "C_samples")}
    return _AutodiffOnly(**arrays, rho=problem.rho, **samples)


# the practical form's one sample for both is one double backward of the loss
# (testbed.decentralized.hgp's joint products), the independent form one per product
# and at ROW_FORM_REPLICAS replicas, whose rows are evaluated client-major (each row's own
# block of the oracles' Jacobian then taken by its client, not its position)
@pytest.mark.parametrize("replicas", [5, ROW_FORM_REPLICAS])
@pytest.mark.parametrize("form", ["independent", "practical", "deterministic"])
def test_hgp_run_equal_with_and_without_closed_form(form: str, replicas: int):
    problem = _problem(3, 2, 2)
    plain = _autodiff_only(problem)
    est = HyperGradientPush(
        neumann_terms=6,
        pushsum_steps=2,
        batch_size=None if form == "deterministic" else 2,
        shared_sample=form == "practical",
    )
    x = torch.as_tensor(np.random.default_rng(2).standard_normal(problem.dim_x))
    runs = [
        est.run(p, x, est.initial_state(p), np.random.default_rng(11), replicas=replicas)
        for p in (problem, plain)
    ]
    assert torch.equal(runs[0].trajectory, runs[1].trajectory)
    assert runs[0].calls == runs[1].calls


def test_a_view_with_its_own_loss_is_differentiated_through_it():
    """A perturbation's view of the problem (its own minibatch loss, every other attribute
    forwarded) must not be served the problem's closed form: HGP differentiates the view's
    loss (hgp.theorem1.high_probability_bound's power check runs on such a view)."""
    problem = _problem(2, 3, 3)
    est = HyperGradientPush(neumann_terms=4, pushsum_steps=2, batch_size=4)
    x = torch.as_tensor(np.random.default_rng(2).standard_normal(problem.dim_x))

    def last(p):
        return est.run(p, x, est.initial_state(problem), np.random.default_rng(11)).trajectory[-1]

    plain = _autodiff_only(problem)
    summed = last(SumReductionView(problem))
    assert torch.equal(summed, last(SumReductionView(plain)))
    assert not torch.allclose(summed, last(problem))
