"""The exact-moment machinery of theory_checks/fedmsa/common.py, against brute force.

The rate claims (M, tau, R, rho) are decided on exact expectations: one FedMSA round of the
registered algorithm, identified as an affine map of the state plus one term per minibatch slot
(:func:`identify_round`), then moments propagated as a mixture over the local client. Here the
identified moments equal an enumeration of every local client and every draw, a non-affine
algorithm is refused, and the rebatching (b_0) and rho-interpolation the rho claims use are
exact. The claims' verdicts, perturbations and controls are in theory_checks/test_claims.py.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed.algorithms.fedmsa import FedMSA
from testbed.registry import get_estimator
from theory_checks.claim import NotMeasurable
from theory_checks.fedmsa.common import fixed_point
from theory_checks.fedmsa.common import mean_maps
from theory_checks.fedmsa.moments import Branch
from theory_checks.fedmsa.moments import Layout
from theory_checks.fedmsa.moments import criterion_form
from theory_checks.fedmsa.moments import expected_criteria
from theory_checks.fedmsa.moments import identify_round
from theory_checks.fedmsa.moments import run_round
from theory_checks.fedmsa.moments import validate_round
from theory_checks.fedmsa.rate.checks import replicated


def _small() -> tuple[QuadraticBilevel, Layout]:
    p = QuadraticBilevel.random(
        2,
        1,
        1,
        1.0,
        seed=4,
        hessian_heterogeneity=0.3,
        gradient_heterogeneity=0.5,
        n_samples=2,
        gradient_noise=1.0,
    )
    return p, Layout(p.dim_x, 2 * p.dim_y)


def _alg(rho: float = 0.4, batch: int | None = 1, K: int = 1) -> FedMSA:
    return get_estimator("fedmsa").build(
        outer_step_size=0.2,
        inner_step_size=0.3,
        momentum=rho,
        local_steps=K,
        participation=1,
        batch_size=batch,
    )


def test_identified_round_moments_equal_enumeration_of_every_client_and_draw():
    """From a fixed state, the mixture of the identified branches has the mean and covariance
    of the outputs over every local client and every sample of every slot (2 x 2^6 rounds)."""
    p, layout = _small()
    alg = _alg()
    s = np.random.default_rng(1).standard_normal(layout.D)
    branches = identify_round(alg, p, layout, p.n_samples)
    outs_a = np.array(_every_round_output(alg, p, layout, layout.state(s), branches))
    moments = [b.moments(s, np.zeros((layout.D, layout.D)), b.noise()) for b in branches]
    mean = np.mean([mn for mn, _ in moments], axis=0)
    second = np.mean([c + np.outer(mn, mn) for mn, c in moments], axis=0)
    # Why 1e-12: both sides are sums of the same float64 outputs, in different orders.
    np.testing.assert_allclose(mean, outs_a.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, outs_a.T @ outs_a / len(outs_a), rtol=1e-12, atol=1e-12)


def test_expected_criterion_equals_enumeration_over_two_rounds():
    """E of the output-rule criterion after 2 rounds (iterates x_0, x_1 with K = 1) from a
    fixed start equals the enumeration of round 0's client and draws."""
    p, layout = _small()
    alg = _alg()
    x0 = torch.tensor([0.7], dtype=torch.float64)
    Z0 = torch.tensor([0.2, -0.4], dtype=torch.float64)
    start = alg.state_at(p, x0, Z0)
    first = identify_round(alg, p, layout, p.n_samples, start=start)
    rest = identify_round(alg, p, layout, p.n_samples)
    G, g = criterion_form(p, layout)
    exact = expected_criteria(first, rest, 2, G, g, layout)[-1]

    def crit(u: np.ndarray) -> float:
        return float(np.sum((G @ u + g) ** 2))

    # x_1, Z_1: round 1's first local iterate
    values = [crit(out[: layout.du]) for out in _every_round_output(alg, p, layout, start, first)]
    u0 = torch.cat([x0, Z0]).numpy()
    np.testing.assert_allclose(exact, 0.5 * (crit(u0) + np.mean(values)), rtol=1e-12)


def _every_round_output(alg, p, layout, start, branches) -> list[np.ndarray]:
    """The round's output from ``start`` for every local client and every sample of every
    minibatch slot (the enumeration the identified branches' moments must equal)."""
    outs = []
    for m in range(p.n_clients):
        rows = branches[m].rows
        for samples in itertools.product(range(p.n_samples), repeat=sum(rows)):
            it = iter(samples)
            draws = [np.array([[next(it)] for _ in range(r)]) for r in rows]
            outs.append(run_round(alg, p, layout, start, m, draws=draws)[0])
    return outs


def test_criterion_form_is_the_criterion():
    p, layout = _small()
    G, g = criterion_form(p, layout)
    u = np.array([0.3, -1.1, 0.5])
    x, Z = torch.tensor(u[:1])[None], torch.tensor(u[1:])[None]
    from theory_checks.fedmsa.common import criterion

    np.testing.assert_allclose(np.sum((G @ u + g) ** 2), float(criterion(p, x, Z)[0]), rtol=1e-12)


@dataclasses.dataclass(frozen=True)
class _Quadratic(FedMSA):
    """Not affine in the state: h + 0.1 h^2 (what Hessian noise or a nonlinearity would do)."""

    def global_directions(self, step):
        h, q = super().global_directions(step)
        return h + 0.1 * h**2, q


def test_a_non_affine_round_is_not_measurable():
    p, layout = _small()
    alg = _alg()
    bad = _Quadratic(**{f.name: getattr(alg, f.name) for f in dataclasses.fields(alg)})
    branches = identify_round(bad, p, layout, p.n_samples)
    with pytest.raises(NotMeasurable, match="not affine"):
        validate_round(bad, p, layout, branches, p.n_samples, np.random.default_rng(0))
    good = identify_round(alg, p, layout, p.n_samples)
    assert validate_round(alg, p, layout, good, p.n_samples, np.random.default_rng(0)) < 1e-12


def test_rebatched_round_predicts_a_wide_minibatch():
    """Identified with batch 1, rescaled to 5 draws per minibatch: it predicts a round of the
    algorithm with batch 5 (the proof's b_0 = K R is applied this way)."""
    p, layout = _small()
    alg = _alg()
    start = alg.state_at(p, torch.zeros(1, dtype=torch.float64))
    first = [b.rebatched(5) for b in identify_round(alg, p, layout, p.n_samples, start=start)]
    wide = dataclasses.replace(alg, batch_size=5)
    err = validate_round(
        wide,
        p,
        layout,
        first,
        p.n_samples,
        np.random.default_rng(2),
        wide.state_at(p, torch.zeros(1, dtype=torch.float64)),
    )
    assert err < 1e-12


def test_rho_interpolation_equals_identification():
    """Eq. (5) is affine in rho: the mix of the rounds identified at 1/4 and 3/4 is the round
    identified at 1/2."""
    p, layout = _small()
    a, b, mid = (identify_round(_alg(r), p, layout, p.n_samples) for r in (0.25, 0.75, 0.5))
    for ba, bb, bm in zip(a, b, mid, strict=True):
        mixed = Branch.mix(ba, bb, 0.5)
        np.testing.assert_allclose(mixed.T, bm.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mixed.c, bm.c, rtol=1e-12, atol=1e-12)
        for rm, r in zip(mixed.responses, bm.responses, strict=True):
            np.testing.assert_allclose(rm, r, rtol=1e-12, atol=1e-12)


def test_fixed_point_zeroes_both_maps():
    p = QuadraticBilevel.random(
        3, 2, 2, 2.0, seed=1, hessian_heterogeneity=0.3, gradient_heterogeneity=1.0
    )
    x, Z = fixed_point(p)
    P, S = mean_maps(p, x[None], Z[None])
    assert float(P.norm() + S.norm()) < 1e-10 * (1.0 + float(x.norm() + Z.norm()))
    torch.testing.assert_close(x, p.outer_minimizer(), rtol=1e-9, atol=1e-12)


def test_replicated_copies_client_zero_and_its_samples():
    p = QuadraticBilevel.random(
        3, 2, 2, 2.0, seed=0, n_samples=3, gradient_noise=1.0, gradient_heterogeneity=1.0
    )
    rep = replicated(p, 4)
    assert rep.n_clients == 4 and rep.n_samples == 3
    for m in range(4):
        torch.testing.assert_close(rep.A[m], p.A[0])
        torch.testing.assert_close(rep.b_samples[m], p.b_samples[0])
